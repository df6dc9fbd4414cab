/*
 * doctor.c: `sipp doctor [--backend NAME] [--json]`: everything that decides where a model runs,
 * in one report: the OS and CPU, the CPU module ggml picked, the artifact and what it compiles in,
 * the devices, whether the GPU drivers and loaders are visible, the toolchains for source builds,
 * and what `auto` would choose and why. With --backend it exits 1 when that backend is unusable,
 * saying why, so scripts can ask "will vulkan work here?".
 *
 * --target cli|node|python|web reports the same for what that package would load in this process:
 * the artifact its own rules choose (packages.c), its compiled backends, whether the requested
 * backend (--backend, else the package's SIPP_*_BACKEND, else auto) is usable from it, and the
 * exact command that fixes it when not.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "cli/packages.h"
#include "gateway/fleet/fleet.h"
#include "gateway/gateway.h"

#define VULKAN_ICD_DIRS "/usr/share/vulkan/icd.d:/etc/vulkan/icd.d:/usr/local/share/vulkan/icd.d"

json_t *cli_backends_json(void);
json_t *cli_recipes_json(void);
json_t *cli_devices_json(const char *backend);
json_t *cli_rpc_report_json(const char *list, bool *all_ok);
void cli_rpc_report_print(json_t *arr);

static bool can_dlopen(const char *lib) {
    void *h = dlopen(lib, RTLD_LAZY | RTLD_LOCAL);
    if (h) dlclose(h);
    return h != NULL;
}

/* The Vulkan ICD manifests installed: which Vulkan drivers the loader can find. */
static json_t *vulkan_icds(bool *has_lavapipe) {
    json_t *arr = json_array();
    char dirs[] = VULKAN_ICD_DIRS;
    char *save = NULL;
    *has_lavapipe = false;
    for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        DIR *dh = opendir(d);
        struct dirent *e;
        while (dh && (e = readdir(dh))) {
            if (!strstr(e->d_name, ".json")) continue;
            json_array_append_new(arr, json_string(e->d_name));
            if (strstr(e->d_name, "lvp") || strstr(e->d_name, "lavapipe")) *has_lavapipe = true;
        }
        if (dh) closedir(dh);
    }
    return arr;
}

static bool in_path(const char *tool) {
    const char *path = getenv("PATH");
    if (!path) return false;
    char *copy = strdup(path), *save = NULL;
    bool found = false;
    for (char *d = strtok_r(copy, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
        char full[1024];
        snprintf(full, sizeof full, "%s/%s", d, tool);
        found = access(full, X_OK) == 0;
    }
    free(copy);
    return found;
}

static json_t *drivers_json(json_t *notes) {
    bool vk_loader = can_dlopen("libvulkan.so.1");
    bool lavapipe;
    json_t *icds = vulkan_icds(&lavapipe);
    int vk_devices = 0;
    sipp_backend_info b[16];
    int nb = sipp_backends_list(b, 16);
    for (int i = 0; i < nb && i < 16; i++)
        if (strcmp(b[i].name, "vulkan") == 0) vk_devices = b[i].compiled ? b[i].n_devices : -1;
    const char *vis = getenv("GGML_VK_VISIBLE_DEVICES");
    if (!vk_loader)
        json_array_append_new(notes, json_string("vulkan: the Vulkan loader (libvulkan.so.1) is missing: "
                                                 "apt-get install libvulkan1 mesa-vulkan-drivers"));
    else if (lavapipe && vk_devices == 0 && !vis)
        json_array_append_new(
            notes,
            json_string("vulkan: a software Vulkan driver (lavapipe, a real Vulkan device running on the "
                        "CPU) is installed. "
                        "ggml's Vulkan backend skips CPU-type devices unless GGML_VK_VISIBLE_DEVICES names "
                        "them (none is visible now): run with GGML_VK_VISIBLE_DEVICES=0 and --backend vulkan "
                        "to use it (auto never "
                        "picks a software device; the cpu backend is faster on the same cores)"));
    bool cuda_driver = can_dlopen("libcuda.so.1");
    bool cudart =
        can_dlopen("libcudart.so.12") || can_dlopen("libcudart.so.13") || can_dlopen("libcudart.so");
    return json_pack("{s:{s:b, s:o, s:s?}, s:{s:b, s:b}}", "vulkan", "loader", vk_loader, "icds", icds,
                     "GGML_VK_VISIBLE_DEVICES", vis, "cuda", "driver", cuda_driver, "runtime", cudart);
}

static json_t *toolchains_json(void) {
    static const char *const tools[] = {"cc", "cmake", "ninja", "nvcc", "glslc", "npm"};
    json_t *o = json_object();
    for (size_t i = 0; i < sizeof tools / sizeof tools[0]; i++)
        json_object_set_new(o, tools[i], json_boolean(in_path(tools[i])));
    return o;
}

static json_t *decision_json(const char *requested, bool *ok) {
    sipp_backend_decision d;
    char err[SIPP_ERROR_SIZE];
    *ok = sipp_backend_decide(requested, NULL, &d, err) == SIPP_OK;
    if (!*ok) return json_pack("{s:s, s:b, s:s}", "requested", requested, "usable", 0, "error", err);
    return json_pack("{s:s, s:b, s:s, s:s, s:s}", "requested", requested, "usable", 1, "backend", d.backend,
                     "reason", d.reason, "device", d.devices);
}

/* A line per recipe: auto's choice and the backends installed for it (sipp backends has the matrix). */
static void print_recipes(json_t *recipes) {
    size_t i, k;
    json_t *r, *b;
    printf("\nrecipes   (the matrix with what is installable: sipp backends)\n");
    json_array_foreach(recipes, i, r) {
        printf("  %-10s auto %-7s installed:", json_string_value(json_object_get(r, "name")),
               json_string_value(json_object_get(json_object_get(r, "auto"), "backend")));
        int n = 0;
        json_array_foreach(json_object_get(r, "backends"), k, b) {
            if (strcmp(json_string_value(json_object_get(b, "state")), "installed") != 0) continue;
            printf("%s%s", n++ ? ", " : " ", json_string_value(json_object_get(b, "name")));
        }
        printf("%s\n", n ? "" : " none");
    }
}

static void print_text(json_t *r) {
    json_t *os = json_object_get(r, "os"), *cpu = json_object_get(r, "cpu"),
           *art = json_object_get(r, "artifact");
    printf("sipp %s, llama.cpp %s (%s)\n", sipp_version(), sipp_llama_release(), sipp_llama_commit());
    printf("os        %s, kernel %s, %s\n", json_string_value(json_object_get(os, "name")),
           json_string_value(json_object_get(os, "kernel")),
           json_string_value(json_object_get(os, "machine")));
    printf("cpu       %s, %d cores\n", json_string_value(json_object_get(cpu, "model")),
           (int)json_integer_value(json_object_get(cpu, "cores")));
    printf("isa      ");
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(cpu, "features"), i, v) printf(" %s", json_string_value(v));
    printf("\nggml cpu  %s\n", json_string_value(json_object_get(cpu, "ggml_cpu_module")));
    json_t *man = json_object_get(art, "manifest");
    printf("artifact  %s", json_string_value(json_object_get(art, "dir")));
    if (json_is_object(man))
        printf(" (%s, %s)", json_string_value(json_object_get(man, "name")),
               json_string_value(json_object_get(man, "origin")));
    const char *sbom = json_string_value(json_object_get(art, "sbom"));
    printf("\nsbom      %s%s", sbom ? sbom : "none (rebuild the artifact with make or sipp build)",
           json_string_value(json_object_get(art, "signature")) ? ", signed" : "");
    printf("\n\nbackends\n");
    json_array_foreach(json_object_get(r, "backends"), i, v) {
        printf("  %-7s compiled %-3s available %-3s", json_string_value(json_object_get(v, "name")),
               json_is_true(json_object_get(v, "compiled")) ? "yes" : "no",
               json_is_true(json_object_get(v, "available")) ? "yes" : "no");
        size_t k;
        json_t *d;
        json_array_foreach(json_object_get(v, "devices"), k, d)
            printf(" %s %s (%s%s)", k ? ";" : "", json_string_value(json_object_get(d, "name")),
                   json_string_value(json_object_get(d, "description")),
                   json_is_true(json_object_get(d, "software")) ? ", software" : "");
        printf("\n");
    }
    print_recipes(json_object_get(r, "recipes"));
    json_t *dr = json_object_get(r, "drivers");
    printf("\ndrivers   vulkan loader %s, cuda driver %s, cuda runtime %s\n",
           json_is_true(json_object_get(json_object_get(dr, "vulkan"), "loader")) ? "yes" : "no",
           json_is_true(json_object_get(json_object_get(dr, "cuda"), "driver")) ? "yes" : "no",
           json_is_true(json_object_get(json_object_get(dr, "cuda"), "runtime")) ? "yes" : "no");
    printf("tools    ");
    const char *key;
    json_object_foreach(json_object_get(r, "toolchains"), key, v)
        printf(" %s:%s", key, json_is_true(v) ? "yes" : "no");
    json_t *dec = json_object_get(r, "decision");
    printf("\n\n%s -> ", json_string_value(json_object_get(dec, "requested")));
    if (json_is_true(json_object_get(dec, "usable")))
        printf("%s: %s\n", json_string_value(json_object_get(dec, "backend")),
               json_string_value(json_object_get(dec, "reason")));
    else
        printf("unusable: %s\n", json_string_value(json_object_get(dec, "error")));
    printf("\nmemory budget (sipp serve: what loaded models may hold)\n");
    json_array_foreach(json_object_get(r, "memory_budget"), i, v)
        printf("  %-7s %llu MiB (%s)\n", json_string_value(json_object_get(v, "place")),
               (unsigned long long)(json_integer_value(json_object_get(v, "budget_bytes")) >> 20),
               json_string_value(json_object_get(v, "from")));
    json_array_foreach(json_object_get(r, "notes"), i, v) printf("note: %s\n", json_string_value(v));
}

static void print_target(json_t *t) {
    printf("target    %s: %s", json_string_value(json_object_get(t, "target")),
           json_is_true(json_object_get(t, "usable")) ? "usable" : "UNUSABLE");
    const char *art = json_string_value(json_object_get(t, "artifact"));
    if (art) printf(", artifact %s (%s)", art, json_string_value(json_object_get(t, "source")));
    printf("\n          requested %s", json_string_value(json_object_get(t, "requested")));
    const char *problem = json_string_value(json_object_get(t, "problem"));
    if (problem) printf(": %s", problem);
    const char *fix = json_string_value(json_object_get(t, "fix"));
    printf("\n%s%s%s", fix ? "fix       " : "", fix ? fix : "", fix ? "\n" : "");
}

/* The backend a target's package would ask for: --backend, else its environment variable, else auto. */
static const char *target_backend(cli_target t, const char *backend) {
    const char *env = cli_target_backend_env(t);
    const char *v = env ? getenv(env) : NULL;
    return backend ? backend : v && *v ? v : "auto";
}

/* The exact command that makes the requested backend usable for the target, when a build does. */
static json_t *target_fix(cli_target t, const char *backend) {
    char fix[256];
    const char *b = strcmp(backend, "auto") == 0 ? "cpu" : backend;
    snprintf(fix, sizeof fix, "sipp build %s --backend %s%s", cli_target_name(t), b, "");
    return json_string(fix);
}

/* {"target","requested","artifact","source","backends","usable","problem","fix"}; *dir is the
 * artifact to initialise the runtime with (NULL when the target loads none). */
static json_t *target_json(cli_target t, const char *backend, const char *artifact, const char **dir,
                           cli_target_choice *c) {
    cli_target_choose(t, backend, artifact, c);
    *dir = c->found ? c->dir : NULL;
    json_t *backends = c->found ? cli_artifact_backends(c->dir) : NULL;
    json_t *o = json_pack("{s:s, s:s, s:s?, s:s?, s:o}", "target", cli_target_name(t), "requested", backend,
                          "artifact", c->found ? c->dir : NULL, "source", c->found ? c->source : NULL,
                          "backends", backends ? backends : json_null());
    if (t == TARGET_WEB) {
        json_object_set_new(o, "usable", json_false());
        json_object_set_new(o, "problem", json_string(c->problem));
        char root[PATH_MAX], probe[PATH_MAX + 64];
        bool have =
            cli_source_root(root, sizeof root) &&
            (snprintf(probe, sizeof probe, "%s/bindings/web/build.sh", root), access(probe, R_OK) == 0);
        json_object_set_new(o, "fix",
                            json_string(have ? "sipp build web, then check the backend in the browser page"
                                             : "none yet: the browser runtime (bindings/web) is not built "
                                               "yet in this sipp"));
        return o;
    }
    if (!c->found || !c->has_backend) {
        json_object_set_new(o, "usable", json_false());
        json_object_set_new(o, "problem", json_string(c->problem));
        json_object_set_new(o, "fix", target_fix(t, backend));
    }
    return o;
}

static const cli_option *const options[] = {&cli_opt_target,   &cli_opt_backend, &cli_opt_json,
                                            &cli_opt_artifact, &cli_opt_rpc,     NULL};

static const char about[] =
    "Reports the OS, CPU and ISA, the CPU module ggml picked, the artifact and its backends,\n"
    "the devices, driver and loader visibility, toolchains, and what auto decides and why.\n"
    "With --backend NAME it exits 1 when that backend is unusable here and says why.\n"
    "--target reports what that package would load in this process (its artifact, chosen by\n"
    "its own rules and SIPP_NODE_BACKEND / SIPP_PYTHON_BACKEND), whether the backend is usable\n"
    "from it, and the command that fixes it; it exits 1 when the backend is unusable there.\n"
    "With --rpc it checks each rpc server: reachable, protocol version, device, free memory\n"
    "(and exits 1 when one fails).\n";

static const cli_command command = {.name = "doctor",
                                    .synopsis = "doctor [OPTIONS]",
                                    .about = about,
                                    .options = options,
                                    .max_args = 0,
                                    .args_hint = "doctor takes options only"};

int cmd_doctor(int argc, char **argv) {
    cli_common o = {0}; /* doctor has no options of its own */
    int n_args;
    int rc = cli_parse(&command, argc, argv, &o, NULL, &n_args);
    if (rc != CLI_PARSED) return rc;
    bool as_json = o.json;
    const char *backend = o.backend, *artifact = o.artifact, *rpc = o.rpc, *target_name = o.target;
    char err[SIPP_ERROR_SIZE];
    cli_target target = TARGET_CLI;
    if (target_name && !cli_target_parse(target_name, &target)) {
        cli_error("doctor: --target '%s' is not one of %s", target_name, cli_target_names());
        return EXIT_USAGE;
    }
    if (target_name) backend = target_backend(target, backend);
    if (backend && sipp_backend_check_name(backend, err) != SIPP_OK) {
        cli_error("--backend: %s", err);
        return EXIT_USAGE;
    }
    json_t *tj = NULL;
    cli_target_choice choice;
    if (target_name) {
        const char *dir;
        tj = target_json(target, backend, artifact, &dir, &choice);
        if (!dir) {
            /* Nothing to load (web, or no artifact at all): the target's report is the whole answer. */
            if (as_json) {
                char *js = json_dumps(json_pack("{s:O}", "target", tj), JSON_INDENT(2));
                puts(js);
                free(js);
            } else {
                print_target(tj);
            }
            cli_error("doctor --target %s: %s", target_name,
                      json_string_value(json_object_get(tj, "problem")));
            json_decref(tj);
            return EXIT_RUNTIME;
        }
        artifact = dir;
    }
    if (!cli_runtime_init_for(artifact, backend)) {
        json_decref(tj);
        return EXIT_RUNTIME;
    }

    bool ok;
    char *facts_text = sipp_host_facts_json();
    json_t *facts = facts_text ? json_loads(facts_text, 0, NULL) : NULL;
    sipp_free(facts_text);
    if (!facts) {
        cli_error("doctor: out of memory");
        return EXIT_RUNTIME;
    }
    json_t *notes = json_array();
    json_t *report = json_pack("{s:s, s:s, s:s, s:O, s:O, s:O, s:o, s:o, s:o, s:o}", "sipp_version",
                               sipp_version(), "llama_release", sipp_llama_release(), "llama_commit",
                               sipp_llama_commit(), "os", json_object_get(facts, "os"), "cpu",
                               json_object_get(facts, "cpu"), "artifact", json_object_get(facts, "artifact"),
                               "backends", cli_backends_json(), "drivers", drivers_json(notes), "toolchains",
                               toolchains_json(), "decision", decision_json(backend ? backend : "auto", &ok));
    json_decref(facts);
    gw_config defaults;
    gw_config_init(&defaults);
    json_object_set_new(report, "memory_budget", gw_budgets_json(&defaults));
    gw_config_free(&defaults);
    json_object_set_new(report, "recipes", cli_recipes_json());
    json_object_set_new(report, "notes", notes);
    bool rpc_ok = true;
    if (rpc) json_object_set_new(report, "rpc", cli_rpc_report_json(rpc, &rpc_ok));
    if (tj) {
        if (!ok && !json_object_get(tj, "usable")) {
            /* Compiled in but not usable (no device, no driver): the decision says what is missing. */
            json_object_set_new(tj, "problem",
                                json_string(json_string_value(
                                    json_object_get(json_object_get(report, "decision"), "error"))));
            if (!choice.has_backend) json_object_set_new(tj, "fix", target_fix(target, backend));
        }
        if (!json_object_get(tj, "usable")) json_object_set_new(tj, "usable", json_boolean(ok));
        ok = ok && json_is_true(json_object_get(tj, "usable"));
        json_object_set_new(report, "target", tj);
    }
    if (as_json) {
        char *s = json_dumps(report, JSON_INDENT(2));
        puts(s);
        free(s);
    } else {
        print_text(report);
        if (rpc) cli_rpc_report_print(json_object_get(report, "rpc"));
        if (tj) print_target(tj);
    }
    if (!ok) {
        json_t *dec = json_object_get(report, "decision");
        cli_error("%s", json_string_value(json_object_get(dec, "error")));
    }
    json_decref(report);
    return ok && rpc_ok ? EXIT_OK : EXIT_RUNTIME;
}
