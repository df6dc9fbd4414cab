/*
 * build.c: `sipp build [TARGET] --backend NAME [--backend ...] [--from-source] [--out DIR]`: makes an
 * artifact, a directory of the pinned llama.cpp libraries with exactly the chosen backend modules, by
 * running the same deps/fetch.sh that `make BACKENDS=...` runs, for a target package:
 *
 *   cli     (the default) for the CLI and gateway: --artifact DIR / SIPP_ARTIFACT select it, and an
 *           explicit --backend the default artifact lacks is taken from it
 *   node    the same artifact, plus the Node addon (bindings/node/build.sh) that loads it
 *   python  the same artifact, for the ctypes binding
 *   web     the browser runtime (bindings/web/build.sh), once the tree has one
 *   all     every target above this tree can build
 *
 * Each target's artifact is recorded in build/targets/TARGET.json, where that package looks for it
 * (packages.c), so SIPP_NODE_BACKEND / SIPP_PYTHON_BACKEND select what `sipp build node|python` made.
 *
 * `--backend all` is every backend this host can have, conservatively: a backend is left out unless
 * what its module needs at run time is here (the Vulkan loader; the NVIDIA driver and CUDA runtime),
 * and the command says which it left out and why. A backend named explicitly that the host cannot
 * have is an error naming what to install, rather than an artifact that cannot load.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "cli/packages.h"

#define MAX_BUILD_BACKENDS 4
#define WEB_BUILD_SCRIPT "bindings/web/build.sh"
#define NODE_BUILD_SCRIPT "bindings/node/build.sh"
#define CMD_BYTES (4 * PATH_MAX)

typedef struct {
    cli_common c;
    const char *list[MAX_BUILD_BACKENDS + 1]; /* the backends, cpu first */
    int n;
    bool all;         /* --backend all */
    bool any_backend; /* some --backend was given */
    bool from_source;
    const char *out_dir, *sign_key;
} build_options;

/* --backend, repeatable: cpu (always in), vulkan, cuda, rpc, or all. */
static bool parse_backend(cli_args *a, const cli_option *opt, void *opts) {
    build_options *o = opts;
    o->any_backend = true;
    if (strcmp(a->value, "all") == 0) {
        o->all = true;
    } else if (strcmp(a->value, "vulkan") == 0 || strcmp(a->value, "cuda") == 0 ||
               strcmp(a->value, "rpc") == 0) {
        bool dup = false;
        for (int i = 0; i < o->n; i++)
            dup |= strcmp(o->list[i], a->value) == 0;
        if (!dup) o->list[o->n++] = a->value;
    } else if (strcmp(a->value, "cpu") != 0) {
        cli_error("build: --backend '%s' is not one of cpu, vulkan, cuda, rpc, all", a->value);
        return false;
    }
    return true;
}

static const cli_option opt_backend = {.name = "--backend",
                                       .arg = "cpu|vulkan|cuda|rpc|all",
                                       .kind = CLI_OPT_CUSTOM,
                                       .parse = parse_backend,
                                       .help = "a backend module of the artifact; repeat it for more"};
static const cli_option opt_from_source = {.name = "--from-source",
                                           .kind = CLI_OPT_FLAG,
                                           .offset = offsetof(build_options, from_source),
                                           .help = "build llama.cpp (CPU) from the pinned source"};
static const cli_option opt_out = {.name = "--out",
                                   .arg = "DIR",
                                   .kind = CLI_OPT_STRING,
                                   .offset = offsetof(build_options, out_dir),
                                   .help = "write the artifact to DIR (default: build/artifacts/NAME)"};
static const cli_option opt_sign = {.name = "--sign",
                                    .arg = "KEY.pem",
                                    .kind = CLI_OPT_STRING,
                                    .offset = offsetof(build_options, sign_key),
                                    .help = "sign the manifest and the SBOM with this Ed25519 key"};

static const cli_option *const options[] = {&opt_backend, &opt_from_source, &opt_out, &opt_sign, NULL};

static const char about[] =
    "TARGET is who loads the artifact:\n"
    "  cli     (default) the CLI: --backend NAME takes it when the default artifact lacks NAME;\n"
    "          --artifact DIR or SIPP_ARTIFACT=DIR select it for anything (the gateway too)\n"
    "  node    the Node package: builds its addon; SIPP_NODE_BACKEND=NAME then selects this artifact\n"
    "  python  the Python package: SIPP_PYTHON_BACKEND=NAME then selects this artifact\n"
    "  web     the browser runtime (bindings/web), when this tree has it\n"
    "  all     every target this tree can build\n\n"
    "Makes build/artifacts/NAME (NAME = the backends joined by '+'), or DIR with --out: the pinned\n"
    "llama.cpp libraries with exactly these backend modules and a manifest.json. Every artifact has the\n"
    "CPU backend. 'all' is every backend this host can have; it says which it left out and why.\n"
    "rpc (ggml's RPC client and server) is compiled from the pinned source in seconds.\n"
    "--from-source builds llama.cpp (CPU) from the pinned source instead of the prebuilt libraries.\n"
    "The artifact is recorded in build/targets/TARGET.json; sipp backends --target TARGET lists it.\n"
    "Beside manifest.json it writes sbom.spdx.json (SPDX 2.3: every file with its hash and origin, and\n"
    "the Debian packages sipp links against); --sign KEY.pem signs both with an Ed25519 key\n"
    "(signature.json; check it with sipp artifact verify DIR --key PUB.pem).\n";

static const cli_command command = {
    .name = "build",
    .synopsis = "build [TARGET] --backend cpu|vulkan|cuda|rpc|all [--backend ...] [OPTIONS]",
    .about = about,
    .options = options,
    .max_args = TARGET_COUNT + 1,
    .args_hint = "name each TARGET once"};

static bool loadable(const char *lib) {
    void *h = dlopen(lib, RTLD_LAZY | RTLD_LOCAL);
    if (h) dlclose(h);
    return h != NULL;
}

/* Why this host cannot have the backend, or NULL when it can. */
static const char *host_lacks(const char *b) {
    if (strcmp(b, "vulkan") == 0 && !loadable("libvulkan.so.1"))
        return "vulkan needs the Vulkan loader (libvulkan.so.1 not found): apt-get install -y libvulkan1 "
               "mesa-vulkan-drivers";
    if (strcmp(b, "cuda") == 0 && !loadable("libcuda.so.1"))
        return "cuda needs the NVIDIA driver (libcuda.so.1 not found, so no CUDA device can be used here): "
               "install "
               "the NVIDIA driver and CUDA runtime (apt-get install -y nvidia-driver libcudart12 "
               "libcublas12)";
    if (strcmp(b, "cuda") == 0 && !(loadable("libcudart.so.12") && loadable("libcublas.so.12")))
        return "cuda needs the CUDA 12 runtime (libcudart.so.12, libcublas.so.12 not found): apt-get install "
               "-y "
               "libcudart12 libcublas12";
    return NULL;
}

/* The backends `--backend all` never includes on this host, and why. */
static const struct {
    const char *name, *why;
} never_here[] = {
    {"metal", "Metal is macOS only"},
    {"webgpu", "WebGPU is a browser backend: sipp build web"},
};

static bool file_exists(const char *root, const char *rel) {
    char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    return access(p, R_OK) == 0;
}

/* Runs `bash ROOT/SCRIPT`; false (with the error printed) when it fails. */
static bool run_script(const char *root, const char *script) {
    char cmd[CMD_BYTES];
    snprintf(cmd, sizeof cmd, "bash '%s/%s'", root, script);
    int rc = system(cmd);
    if (rc != 0) {
        cli_error("build: %s failed (status %d); see the message above", script,
                  WIFEXITED(rc) ? WEXITSTATUS(rc) : rc);
        return false;
    }
    return true;
}

/* Runs deps/fetch.sh for the backends; writes the artifact directory it made (its last line). */
static bool fetch(const char *root, const char **list, int n, bool from_source, const char *out_dir,
                  char *art, size_t art_n) {
    char cmd[CMD_BYTES];
    int len = snprintf(cmd, sizeof cmd, "LLAMA_FROM_SOURCE=%d %s%s%s bash '%s/deps/fetch.sh' '%s/build'",
                       from_source, out_dir ? "SIPP_ARTIFACT_OUT='" : "", out_dir ? out_dir : "",
                       out_dir ? "'" : "", root, root);
    for (int i = 0; i < n; i++)
        len += snprintf(cmd + len, sizeof cmd - (size_t)len, " %s", list[i]);
    FILE *p = popen(cmd, "r");
    if (!p) {
        cli_error("build: cannot run deps/fetch.sh: %s", strerror(errno));
        return false;
    }
    char line[PATH_MAX];
    art[0] = '\0';
    while (fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = '\0';
        if (*line) snprintf(art, art_n, "%s", line);
    }
    int rc = pclose(p);
    if (rc != 0 || !*art) {
        cli_error("build: deps/fetch.sh failed (status %d); see the message above",
                  WIFEXITED(rc) ? WEXITSTATUS(rc) : rc);
        return false;
    }
    return true;
}

/* Writes the artifact's SBOM (deps/sbom.py), listing this binary and libsipp as sipp's files. */
static bool write_sbom(const char *root, const char *art) {
    char exe[PATH_MAX], cmd[CMD_BYTES];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[len > 0 ? len : 0] = '\0';
    snprintf(cmd, sizeof cmd,
             "SIPP_VERSION='%s' python3 '%s/deps/sbom.py' '%s' '%s' '%s/build/lib/libsipp.so' >/dev/null",
             sipp_version(), root, art, exe, root);
    int rc = system(cmd);
    if (rc != 0) {
        cli_error("build: deps/sbom.py failed for %s (status %d); see the message above", art,
                  WIFEXITED(rc) ? WEXITSTATUS(rc) : rc);
        return false;
    }
    return true;
}

/* What a target's package selects once the artifact is recorded, in words. */
static void say_built(cli_target t, const char *art, const char **list, int n) {
    const char *env = cli_target_backend_env(t);
    printf("sipp build %s: artifact %s (", cli_target_name(t), art);
    for (int i = 0; i < n; i++)
        printf("%s%s", i ? "+" : "", list[i]);
    if (env)
        printf("): %s=%s selects it\n", env, n > 1 ? list[n - 1] : "cpu");
    else if (n > 1)
        printf("): sipp --backend %s takes it when the default artifact lacks %s; --artifact %s selects it\n",
               list[n - 1], list[n - 1], art);
    else
        printf("): sipp --artifact %s (or SIPP_ARTIFACT=%s) selects it\n", art, art);
}

static bool build_web(const char *root) {
    if (!file_exists(root, WEB_BUILD_SCRIPT)) {
        cli_error(
            "build web: the browser runtime is not built yet: this sipp has no bindings/web (its build "
            "script %s is missing), so there is nothing to build for web. Use the cli, node or python target",
            WEB_BUILD_SCRIPT);
        return false;
    }
    return run_script(root, WEB_BUILD_SCRIPT);
}

/* The TARGET arguments: want[t] for each named one, *all_targets for "all". */
static bool parse_targets(const char **args, int n_args, bool want[TARGET_COUNT], bool *all_targets) {
    for (int i = 0; i < n_args; i++) {
        cli_target t;
        if (strcmp(args[i], "all") == 0) {
            *all_targets = true;
        } else if (cli_target_parse(args[i], &t)) {
            want[t] = true;
        } else {
            cli_error("build: '%s' is not a target; the targets are %s, all (sipp build --help)", args[i],
                      cli_target_names());
            return false;
        }
    }
    return true;
}

/* --backend all: the GPU backends this host can have (saying why each other is left out), and rpc. */
static void choose_all(build_options *o) {
    o->n = 1;
    static const char *const gpu[] = {"vulkan", "cuda"};
    for (size_t i = 0; i < sizeof gpu / sizeof gpu[0]; i++) {
        const char *why = o->from_source ? "the prebuilt module is used; --from-source builds the CPU only"
                                         : host_lacks(gpu[i]);
        if (why)
            fprintf(stderr, "sipp: build: --backend all leaves out %s: %s\n", gpu[i], why);
        else
            o->list[o->n++] = gpu[i];
    }
    for (size_t i = 0; i < sizeof never_here / sizeof never_here[0]; i++)
        fprintf(stderr, "sipp: build: --backend all leaves out %s: %s\n", never_here[i].name,
                never_here[i].why);
    o->list[o->n++] = "rpc"; /* compiled from the pinned source in seconds; needs nothing at run time */
}

int cmd_build(int argc, char **argv) {
    build_options o = {.list = {"cpu"}, .n = 1};
    const char *args[TARGET_COUNT + 1];
    int n_args;
    bool want[TARGET_COUNT] = {false}, all_targets = false;
    int rc = cli_parse(&command, argc, argv, &o, args, &n_args);
    if (rc != CLI_PARSED) return rc;
    if (!parse_targets(args, n_args, want, &all_targets)) return EXIT_USAGE;
    const char **list = o.list;
    const char *out_dir = o.out_dir, *sign_key = o.sign_key;
    bool from_source = o.from_source, all = o.all, any_backend = o.any_backend;
    bool web_only = want[TARGET_WEB] && !want[TARGET_CLI] && !want[TARGET_NODE] && !want[TARGET_PYTHON];
    if (!any_backend && !web_only && !all_targets) {
        cli_error(
            "build: name the backends: sipp build [TARGET] --backend cpu|vulkan|cuda|rpc|all (sipp build "
            "--help)");
        return EXIT_USAGE;
    }
    int n_targets = 0;
    for (int t = 0; t < TARGET_COUNT; t++)
        n_targets += want[t];
    if (!n_targets && !all_targets) want[TARGET_CLI] = true;
    if (all) choose_all(&o);
    int n = o.n;
    for (int i = 1; i < n; i++) {
        const char *why = host_lacks(list[i]);
        if (why) {
            cli_error("build: %s", why);
            return EXIT_RUNTIME;
        }
    }
    char root[PATH_MAX];
    if (!cli_source_root(root, sizeof root)) {
        cli_error("build: cannot find deps/fetch.sh beside this binary; run sipp build from the source "
                  "tree's build/bin/sipp");
        return EXIT_RUNTIME;
    }
    if (all_targets) {
        want[TARGET_CLI] = want[TARGET_NODE] = want[TARGET_PYTHON] = true;
        want[TARGET_WEB] = file_exists(root, WEB_BUILD_SCRIPT);
        if (!want[TARGET_WEB])
            fprintf(stderr, "sipp: build all: leaves out web: the browser runtime is not built yet (no %s)\n",
                    WEB_BUILD_SCRIPT);
    }
    if (web_only && any_backend && (n > 1 || all)) {
        cli_error("build web: --backend names native backends; the browser runtime chooses cpu or webgpu per "
                  "endpoint at run time. Drop --backend, or build the cli, node or python target");
        return EXIT_USAGE;
    }
    if (want[TARGET_WEB] && !build_web(root)) return EXIT_RUNTIME;
    if (web_only) return EXIT_OK;

    char art[PATH_MAX];
    if (sign_key && access(sign_key, R_OK) != 0) {
        cli_error("build: --sign '%s': %s; make a key with: openssl genpkey -algorithm ed25519 -out KEY.pem",
                  sign_key, strerror(errno));
        return EXIT_USAGE;
    }
    if (!fetch(root, list, n, from_source, out_dir, art, sizeof art)) return EXIT_RUNTIME;
    if (!write_sbom(root, art)) return EXIT_RUNTIME;
    if (sign_key) {
        char err[SIPP_ERROR_SIZE];
        if (sipp_artifact_sign(art, sign_key, err) != SIPP_OK) {
            cli_error("build: --sign: %s", err);
            return EXIT_RUNTIME;
        }
        printf("sipp build: signed %s/signature.json\n", art);
    }
    if (want[TARGET_NODE] && !run_script(root, NODE_BUILD_SCRIPT)) return EXIT_RUNTIME;
    for (int t = 0; t < TARGET_COUNT; t++) {
        if (!want[t] || t == TARGET_WEB) continue;
        if (!cli_target_record_write((cli_target)t, art)) return EXIT_RUNTIME;
        say_built((cli_target)t, art, list, n);
    }
    return EXIT_OK;
}
