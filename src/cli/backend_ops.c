/*
 * backend_ops.c: `sipp backend-ops --backend NAME --mode test|perf|support [--op OP]`: run llama.cpp's
 * own op test, test-backend-ops, against the active artifact's backend module.
 *
 * What is tested must be what runs: the artifact's libggml, libggml-base and backend modules (the
 * prebuilt Vulkan module, say), not a second build of ggml. So test-backend-ops is compiled from the
 * pinned source checkout (tests/test-backend-ops.cpp uses only ggml's public headers) and linked
 * against the artifact's libggml and libggml-base, which come from the very same commit. It is one
 * translation unit, built once per commit into the cache ($SIPP_CACHE_DIR, default
 * ~/.cache/sipp/build-COMMIT-backend-ops) in a few minutes, instead of configuring llama.cpp with
 * LLAMA_BUILD_TESTS, which would also build libllama and llama-common (tens of minutes on two cores)
 * and link a source-built ggml-base that the prebuilt modules would not share.
 *
 * At run time the binary takes its libraries from the artifact (LD_LIBRARY_PATH) and runs in the
 * artifact's directory: ggml_backend_load_all() searches the executable's directory and the current
 * one, so it loads exactly the artifact's modules and picks the CPU variant the way sipp does.
 * test-backend-ops's -b names a device ("CPU", "Vulkan0"): the device sipp would use for the backend.
 * Arguments after `--` go to test-backend-ops unchanged (e.g. -- -p 'type=f16').
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"

#define PATH_BYTES 4096
#define PATH_ROOM 256 /* bytes kept free for names appended to the cache directory */
#define MAX_ARGS 64
#define SOURCE_FILE "tests/test-backend-ops.cpp"
#define BINARY "test-backend-ops"
#define CXX_STD "-std=c++17"
#define CXX_OPT "-O2"

static const char usage[] =
    "usage: sipp backend-ops --backend NAME [--mode test|perf|support] [--op OP] [--artifact DIR] [-- "
    "ARGS...]\n\n"
    "Runs llama.cpp's test-backend-ops against the active artifact's backend: test compares every op\n"
    "with the CPU backend, perf times them, support lists which ops the device supports. --op restricts\n"
    "it to one op (as ggml names it: ADD, MUL_MAT, ...). ARGS after -- go to test-backend-ops as they\n"
    "are. The first run compiles test-backend-ops from the pinned llama.cpp source against the artifact's\n"
    "libraries, into $SIPP_CACHE_DIR (default ~/.cache/sipp); that takes a few minutes. The exit status\n"
    "is 0 when test-backend-ops passes, 1 otherwise. Vulkan on lavapipe needs GGML_VK_VISIBLE_DEVICES=0.\n";

/* snprintf into a path buffer; false when it does not fit (the caller refuses rather than cut). */
static bool path_fmt(char *out, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool path_fmt(char *out, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(out, n, fmt, ap);
    va_end(ap);
    return k >= 0 && (size_t)k < n;
}

static void cache_dir(char *out, size_t n) {
    const char *c = getenv("SIPP_CACHE_DIR"), *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (c && *c)
        snprintf(out, n, "%s", c);
    else if (x && *x)
        snprintf(out, n, "%s/sipp", x);
    else
        snprintf(out, n, "%s/.cache/sipp", home ? home : ".");
}

static bool is_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* Runs argv (PATH searched) with stdout/stderr to log_path, or inherited when NULL; in dir when not
 * NULL, with LD_LIBRARY_PATH=libdir when not NULL. Returns the exit status, or -1. */
static int run(char *const *argv, const char *log_path, const char *dir, const char *libdir) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        if (log_path) {
            FILE *f = freopen(log_path, "w", stdout);
            if (!f) _exit(127);
            dup2(STDOUT_FILENO, STDERR_FILENO);
        }
        if (dir && chdir(dir) != 0) _exit(127);
        if (libdir) setenv("LD_LIBRARY_PATH", libdir, 1);
        execvp(argv[0], argv);
        fprintf(stderr, "sipp: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The compile command; the build is redone when it changes (another compiler, another source). */
static int compile_argv(char **argv, char *cmdline, size_t n, const char *src, const char *art,
                        const char *out) {
    static char cxx[PATH_BYTES], inc[PATH_BYTES], source[PATH_BYTES], libdir[PATH_BYTES];
    const char *env = getenv("CXX");
    path_fmt(cxx, sizeof cxx, "%s", env && *env ? env : "c++");
    path_fmt(inc, sizeof inc, "-I%s/ggml/include", src);
    path_fmt(source, sizeof source, "%s/%s", src, SOURCE_FILE);
    path_fmt(libdir, sizeof libdir, "-L%s", art);
    char *args[] = {cxx,         CXX_STD, CXX_OPT,  inc,           source,     "-o",
                    (char *)out, libdir,  "-lggml", "-lggml-base", "-pthread", NULL};
    int k = 0;
    cmdline[0] = '\0';
    for (; args[k]; k++) {
        argv[k] = args[k];
        size_t len = strlen(cmdline);
        snprintf(cmdline + len, n - len, "%s%s", k ? " " : "", args[k]);
    }
    argv[k] = NULL;
    return k;
}

/* Builds test-backend-ops into build_dir unless an up-to-date one is there. */
static bool ensure_built(const char *src, const char *art, const char *build_dir, char *binary, size_t n) {
    char stamp[PATH_BYTES], log[PATH_BYTES], cmdline[4 * PATH_BYTES], *argv[MAX_ARGS];
    path_fmt(binary, n, "%s/%s", build_dir, BINARY);
    path_fmt(stamp, sizeof stamp, "%s/sipp-build-command", build_dir);
    path_fmt(log, sizeof log, "%s/build.log", build_dir);
    compile_argv(argv, cmdline, sizeof cmdline, src, art, binary);
    /* The artifact's directory is not part of what makes the binary: every artifact of one commit has
     * the same ggml ABI. Compare the command without it. */
    char key[sizeof cmdline];
    snprintf(key, sizeof key, "%s", cmdline);
    char *l = strstr(key, " -L");
    if (l) {
        char *end = strchr(l + 1, ' ');
        memmove(l, end ? end : l + strlen(l), strlen(end ? end : l + strlen(l)) + 1);
    }
    FILE *f = fopen(stamp, "r");
    char have[sizeof key] = "";
    if (f) {
        if (!fgets(have, sizeof have, f)) have[0] = '\0';
        fclose(f);
    }
    if (is_file(binary) && strcmp(have, key) == 0) return true;

    char mk[PATH_BYTES];
    path_fmt(mk, sizeof mk, "%s", build_dir);
    for (char *p = mk + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(mk, 0755);
            *p = '/';
        }
    if (mkdir(build_dir, 0755) != 0 && errno != EEXIST) {
        cli_error("backend-ops: cannot create %s: %s", build_dir, strerror(errno));
        return false;
    }
    remove(stamp);
    fprintf(stderr,
            "sipp: building llama.cpp's test-backend-ops from the pinned source (%s) against %s;\n"
            "sipp: this takes a few minutes the first time (log: %s)\n",
            src, art, log);
    int rc = run(argv, log, NULL, NULL);
    if (rc != 0) {
        cli_error(
            "backend-ops: building test-backend-ops failed (exit %d); see %s. It needs a C++17 compiler "
            "(apt-get install g++, or set CXX)",
            rc, log);
        return false;
    }
    f = fopen(stamp, "w");
    if (f) {
        fputs(key, f);
        fclose(f);
    }
    fprintf(stderr, "sipp: built %s\n", binary);
    return true;
}

int cmd_backend_ops(int argc, char **argv) {
    const char *backend = NULL, *mode = "test", *op = NULL, *artifact = NULL;
    int extra = argc;
    cli_args a = {.argc = argc, .argv = argv};
    while (a.i < argc && !a.bad) {
        const char *arg = argv[a.i];
        if (strcmp(arg, "--") == 0) {
            extra = a.i + 1;
            break;
        }
        if (cli_flag(&a, "--help") || cli_flag(&a, "-h")) {
            fputs(usage, stdout);
            return EXIT_OK;
        } else if (cli_flag_value(&a, "--backend"))
            backend = a.value;
        else if (cli_flag_value(&a, "--mode"))
            mode = a.value;
        else if (cli_flag_value(&a, "--op"))
            op = a.value;
        else if (cli_flag_value(&a, "--artifact"))
            artifact = a.value;
        else {
            cli_error("backend-ops: unknown argument '%s' (see sipp backend-ops --help)", arg);
            return EXIT_USAGE;
        }
    }
    if (a.bad) return EXIT_USAGE;
    if (!backend) {
        cli_error("backend-ops: --backend is required (sipp backend-ops --backend vulkan --mode test)");
        return EXIT_USAGE;
    }
    if (!mode || (strcmp(mode, "test") != 0 && strcmp(mode, "perf") != 0 && strcmp(mode, "support") != 0)) {
        cli_error("backend-ops: --mode '%s' is not one of test, perf, support", mode ? mode : "");
        return EXIT_USAGE;
    }
    if (argc - extra > MAX_ARGS - 8) {
        cli_error("backend-ops: too many arguments after --");
        return EXIT_USAGE;
    }
    char err[SIPP_ERROR_SIZE];
    if (sipp_backend_check_name(backend, err) != SIPP_OK) {
        cli_error("backend-ops: --backend: %s", err);
        return EXIT_USAGE;
    }
    if (!cli_runtime_init(artifact)) return EXIT_RUNTIME;
    sipp_backend_decision d;
    if (sipp_backend_decide(backend, NULL, &d, err) != SIPP_OK) {
        cli_error("backend-ops: %s", err);
        return EXIT_RUNTIME;
    }
    /* The decision's first device: "Vulkan0" of "Vulkan0,CPU". */
    char device[sizeof d.devices];
    memcpy(device, d.devices, sizeof device);
    device[strcspn(device, ",")] = '\0';

    char cache[PATH_BYTES], src[PATH_BYTES], ok[PATH_BYTES], build_dir[PATH_BYTES], binary[PATH_BYTES];
    cache_dir(cache, sizeof cache);
    char source[PATH_BYTES];
    /* Room is left under PATH_BYTES for the file names appended to the build directory. */
    if (strlen(cache) > PATH_BYTES - PATH_ROOM ||
        !path_fmt(src, sizeof src, "%s/llama.cpp-%s", cache, sipp_llama_commit()) ||
        !path_fmt(ok, sizeof ok, "%s/.sipp-ok", src) ||
        !path_fmt(source, sizeof source, "%s/%s", src, SOURCE_FILE) ||
        !path_fmt(build_dir, sizeof build_dir, "%s/build-%s-backend-ops", cache, sipp_llama_commit())) {
        cli_error(
            "backend-ops: the cache directory path '%s' is too long; set SIPP_CACHE_DIR to a shorter one",
            cache);
        return EXIT_RUNTIME;
    }
    if (!is_file(ok) || !is_file(source)) {
        cli_error("backend-ops: no llama.cpp %s checkout at %s; run deps/fetch.sh (make does), or set "
                  "SIPP_CACHE_DIR "
                  "to the cache that has it",
                  sipp_llama_release(), src);
        return EXIT_RUNTIME;
    }
    const char *art = sipp_runtime_artifact_dir();
    if (!ensure_built(src, art, build_dir, binary, sizeof binary)) return EXIT_RUNTIME;

    char *targv[MAX_ARGS];
    int k = 0;
    targv[k++] = binary;
    targv[k++] = (char *)mode;
    targv[k++] = "-b";
    targv[k++] = device;
    if (op) {
        targv[k++] = "-o";
        targv[k++] = (char *)op;
    }
    for (int i = extra; i < argc; i++)
        targv[k++] = argv[i];
    targv[k] = NULL;
    printf("sipp backend-ops: test-backend-ops %s -b %s%s%s on artifact %s\n", mode, device, op ? " -o " : "",
           op ? op : "", art);
    int rc = run(targv, NULL, art, art);
    if (rc != 0) {
        cli_error("backend-ops: test-backend-ops %s on %s %s (exit %d)", mode, device,
                  rc < 0 ? "did not finish" : "reported failures", rc);
        return EXIT_RUNTIME;
    }
    return EXIT_OK;
}
