/*
 * doctor.c: `sipp doctor [--backend NAME] [--json]`: everything that decides where a model runs,
 * in one report: the OS and CPU, the CPU module ggml picked, the artifact and what it compiles in,
 * the devices, whether the GPU drivers and loaders are visible, the toolchains for source builds,
 * and what `auto` would choose and why. With --backend it exits 1 when that backend is unusable,
 * saying why, so scripts can ask "will vulkan work here?".
 */
#include <dirent.h>
#include <dlfcn.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "gateway/gateway.h"
#include "gateway/residency.h"

#define VULKAN_ICD_DIRS "/usr/share/vulkan/icd.d:/etc/vulkan/icd.d:/usr/local/share/vulkan/icd.d"

json_t *cli_backends_json(void);
json_t *cli_devices_json(const char *backend);

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
            notes, json_string("vulkan: a software Vulkan driver (lavapipe, a real Vulkan device running on the CPU) is installed. "
                               "ggml's Vulkan backend skips CPU-type devices unless GGML_VK_VISIBLE_DEVICES names "
                               "them (none is visible now): run with GGML_VK_VISIBLE_DEVICES=0 and --backend vulkan to use it (auto never "
                               "picks a software device; the cpu backend is faster on the same cores)"));
    bool cuda_driver = can_dlopen("libcuda.so.1");
    bool cudart = can_dlopen("libcudart.so.12") || can_dlopen("libcudart.so.13") || can_dlopen("libcudart.so");
    return json_pack("{s:{s:b, s:o, s:s?}, s:{s:b, s:b}}", "vulkan", "loader", vk_loader, "icds", icds,
                     "GGML_VK_VISIBLE_DEVICES", vis, "cuda", "driver", cuda_driver, "runtime", cudart);
}

static json_t *toolchains_json(void) {
    static const char *const tools[] = {"cc", "cmake", "ninja", "nvcc", "glslc", "npm"};
    json_t *o = json_object();
    for (size_t i = 0; i < sizeof tools / sizeof tools[0]; i++) json_object_set_new(o, tools[i], json_boolean(in_path(tools[i])));
    return o;
}

static json_t *decision_json(const char *requested, bool *ok) {
    sipp_backend_decision d;
    char err[SIPP_ERROR_SIZE];
    *ok = sipp_backend_decide(requested, NULL, &d, err) == SIPP_OK;
    if (!*ok) return json_pack("{s:s, s:b, s:s}", "requested", requested, "usable", 0, "error", err);
    return json_pack("{s:s, s:b, s:s, s:s, s:s}", "requested", requested, "usable", 1, "backend", d.backend, "reason",
                     d.reason, "device", d.devices);
}

static void print_text(json_t *r) {
    json_t *os = json_object_get(r, "os"), *cpu = json_object_get(r, "cpu"), *art = json_object_get(r, "artifact");
    printf("sipp %s, llama.cpp %s (%s)\n", sipp_version(), sipp_llama_release(), sipp_llama_commit());
    printf("os        %s, kernel %s, %s\n", json_string_value(json_object_get(os, "name")),
           json_string_value(json_object_get(os, "kernel")), json_string_value(json_object_get(os, "machine")));
    printf("cpu       %s, %d cores\n", json_string_value(json_object_get(cpu, "model")),
           (int)json_integer_value(json_object_get(cpu, "cores")));
    printf("isa      ");
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(cpu, "features"), i, v) printf(" %s", json_string_value(v));
    printf("\nggml cpu  %s\n", json_string_value(json_object_get(cpu, "ggml_cpu_module")));
    json_t *man = json_object_get(art, "manifest");
    printf("artifact  %s", json_string_value(json_object_get(art, "dir")));
    if (json_is_object(man)) printf(" (%s, %s)", json_string_value(json_object_get(man, "name")),
                                    json_string_value(json_object_get(man, "origin")));
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
    json_t *dr = json_object_get(r, "drivers");
    printf("\ndrivers   vulkan loader %s, cuda driver %s, cuda runtime %s\n",
           json_is_true(json_object_get(json_object_get(dr, "vulkan"), "loader")) ? "yes" : "no",
           json_is_true(json_object_get(json_object_get(dr, "cuda"), "driver")) ? "yes" : "no",
           json_is_true(json_object_get(json_object_get(dr, "cuda"), "runtime")) ? "yes" : "no");
    printf("tools    ");
    const char *key;
    json_object_foreach(json_object_get(r, "toolchains"), key, v) printf(" %s:%s", key, json_is_true(v) ? "yes" : "no");
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

int cmd_doctor(int argc, char **argv) {
    bool as_json = false;
    const char *backend = NULL, *artifact = NULL;
    cli_args a = {.argc = argc, .argv = argv};
    while (a.i < argc && !a.bad) {
        if (cli_flag(&a, "--json")) as_json = true;
        else if (cli_flag_value(&a, "--backend")) backend = a.value;
        else if (cli_flag_value(&a, "--artifact")) artifact = a.value;
        else if (cli_flag(&a, "--help") || cli_flag(&a, "-h")) {
            printf("usage: sipp doctor [--backend NAME] [--json] [--artifact DIR]\n\n"
                   "Reports the OS, CPU and ISA, the CPU module ggml picked, the artifact and its backends,\n"
                   "the devices, driver and loader visibility, toolchains, and what auto decides and why.\n"
                   "With --backend NAME it exits 1 when that backend is unusable here and says why.\n");
            return EXIT_OK;
        } else {
            cli_error("doctor: unknown option '%s'", argv[a.i]);
            return EXIT_USAGE;
        }
    }
    if (a.bad) return EXIT_USAGE;
    char err[SIPP_ERROR_SIZE];
    if (backend && sipp_backend_check_name(backend, err) != SIPP_OK) {
        cli_error("--backend: %s", err);
        return EXIT_USAGE;
    }
    if (!cli_runtime_init(artifact)) return EXIT_RUNTIME;

    bool ok;
    char *facts_text = sipp_host_facts_json();
    json_t *facts = facts_text ? json_loads(facts_text, 0, NULL) : NULL;
    sipp_free(facts_text);
    if (!facts) {
        cli_error("doctor: out of memory");
        return EXIT_RUNTIME;
    }
    json_t *notes = json_array();
    json_t *report = json_pack("{s:s, s:s, s:s, s:O, s:O, s:O, s:o, s:o, s:o, s:o}", "sipp_version", sipp_version(),
                               "llama_release", sipp_llama_release(), "llama_commit", sipp_llama_commit(), "os",
                               json_object_get(facts, "os"), "cpu", json_object_get(facts, "cpu"), "artifact",
                               json_object_get(facts, "artifact"), "backends",
                               cli_backends_json(), "drivers", drivers_json(notes), "toolchains", toolchains_json(),
                               "decision", decision_json(backend ? backend : "auto", &ok));
    json_decref(facts);
    gw_config defaults;
    gw_config_init(&defaults);
    json_object_set_new(report, "memory_budget", gw_budgets_json(&defaults));
    gw_config_free(&defaults);
    json_object_set_new(report, "notes", notes);
    if (as_json) {
        char *s = json_dumps(report, JSON_INDENT(2));
        puts(s);
        free(s);
    } else {
        print_text(report);
    }
    if (!ok) {
        json_t *dec = json_object_get(report, "decision");
        cli_error("%s", json_string_value(json_object_get(dec, "error")));
    }
    json_decref(report);
    return ok ? EXIT_OK : EXIT_RUNTIME;
}
