/*
 * llama_tools.c: compiling and running llama.cpp's own tools against an artifact.
 *
 * What is tested or measured must be what runs: the artifact's libllama, libggml, libggml-base and
 * backend modules (the prebuilt Vulkan module, say), not a second build of llama.cpp. So a tool is
 * compiled from the pinned source checkout (its sources use the public headers, and llama-bench the
 * `common` headers) and linked against the artifact's libraries, which come from the very same
 * commit. Each tool is built once per commit into the cache ($SIPP_CACHE_DIR, default ~/.cache/sipp,
 * in build-COMMIT-TOOL) in seconds to minutes, instead of configuring llama.cpp's CMake build, which
 * would build every library again and link a source-built ggml-base that the prebuilt modules would
 * not share.
 *
 * The binary is rebuilt when its compile command changes (another compiler, another source), but
 * not when only the artifact directory does: every artifact of one commit has the same ABI.
 * At run time it takes its libraries from the artifact (LD_LIBRARY_PATH) and runs in the artifact's
 * directory: ggml_backend_load_all() searches the executable's directory and the current one, so it
 * loads exactly the artifact's modules and picks the CPU variant the way sipp does.
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
#include "cli/llama_tools.h"

#define PATH_ROOM 256 /* bytes kept free for names appended to the cache directory */
#define CXX_STD "-std=c++17"
#define CXX_OPT "-O2"
#define MAX_PARTS 16 /* sources, includes or libraries of one tool */

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

int llama_tool_run(char *const *argv, const char *art) { return run(argv, NULL, art, art); }

/* A growing argv whose strings it owns. */
typedef struct {
    char *v[LLAMA_TOOL_MAX_ARGS];
    int n;
} arglist;

static void arg_add(arglist *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void arg_add(arglist *a, const char *fmt, ...) {
    if (a->n >= LLAMA_TOOL_MAX_ARGS - 1) return;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&a->v[a->n], fmt, ap) >= 0) a->n++;
    va_end(ap);
    a->v[a->n] = NULL;
}

static void arg_free(arglist *a) {
    for (int i = 0; i < a->n; i++)
        free(a->v[i]);
    a->n = 0;
}

/* The compile command, and the same without the artifact's -L (the key that decides a rebuild). */
static void compile_argv(const llama_tool *t, const char *src, const char *art, const char *out, arglist *a,
                         char *key, size_t n) {
    const char *env = getenv("CXX");
    arg_add(a, "%s", env && *env ? env : "c++");
    arg_add(a, "%s", CXX_STD);
    arg_add(a, "%s", CXX_OPT);
    for (int i = 0; t->includes[i] && i < MAX_PARTS; i++)
        arg_add(a, "-I%s/%s", src, t->includes[i]);
    for (int i = 0; t->sources[i] && i < MAX_PARTS; i++)
        arg_add(a, "%s/%s", src, t->sources[i]);
    arg_add(a, "-o");
    arg_add(a, "%s", out);
    int libdir = a->n;
    arg_add(a, "-L%s", art);
    for (int i = 0; t->libs[i] && i < MAX_PARTS; i++)
        arg_add(a, "-l%s", t->libs[i]);
    arg_add(a, "-pthread");
    key[0] = '\0';
    for (int i = 0; i < a->n; i++) {
        if (i == libdir) continue;
        size_t len = strlen(key);
        snprintf(key + len, n - len, "%s%s", i ? " " : "", a->v[i]);
    }
}

static bool make_dirs(const char *who, const char *dir) {
    char mk[LLAMA_TOOL_PATH];
    path_fmt(mk, sizeof mk, "%s", dir);
    for (char *p = mk + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(mk, 0755);
            *p = '/';
        }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        cli_error("%s: cannot create %s: %s", who, dir, strerror(errno));
        return false;
    }
    return true;
}

bool llama_tool_ensure(const llama_tool *t, const char *art, char *binary, size_t n) {
    char cache[LLAMA_TOOL_PATH], src[LLAMA_TOOL_PATH], ok[LLAMA_TOOL_PATH], dir[LLAMA_TOOL_PATH],
        first[LLAMA_TOOL_PATH];
    cache_dir(cache, sizeof cache);
    /* Room is left under the path size for the file names appended to the build directory. */
    if (strlen(cache) > LLAMA_TOOL_PATH - PATH_ROOM ||
        !path_fmt(src, sizeof src, "%s/llama.cpp-%s", cache, sipp_llama_commit()) ||
        !path_fmt(ok, sizeof ok, "%s/.sipp-ok", src) ||
        !path_fmt(first, sizeof first, "%s/%s", src, t->sources[0]) ||
        !path_fmt(dir, sizeof dir, "%s/build-%s-%s", cache, sipp_llama_commit(), t->name)) {
        cli_error("%s: the cache directory path '%s' is too long; set SIPP_CACHE_DIR to a shorter one",
                  t->log_prefix, cache);
        return false;
    }
    if (!is_file(ok) || !is_file(first)) {
        cli_error(
            "%s: no llama.cpp %s checkout at %s; run deps/fetch.sh (make does), or set SIPP_CACHE_DIR to the "
            "cache that has it",
            t->log_prefix, sipp_llama_release(), src);
        return false;
    }
    for (int i = 0; t->libs[i]; i++) {
        char lib[LLAMA_TOOL_PATH];
        path_fmt(lib, sizeof lib, "%s/lib%s.so", art, t->libs[i]);
        if (!is_file(lib)) {
            cli_error(
                "%s: %s needs lib%s.so and artifact %s has none; use an artifact that has it (a prebuilt "
                "one: make, or sipp build --backend cpu)",
                t->log_prefix, t->name, t->libs[i], art);
            return false;
        }
    }
    char stamp[LLAMA_TOOL_PATH], log[LLAMA_TOOL_PATH], key[4 * LLAMA_TOOL_PATH];
    path_fmt(binary, n, "%s/%s", dir, t->name);
    path_fmt(stamp, sizeof stamp, "%s/sipp-build-command", dir);
    path_fmt(log, sizeof log, "%s/build.log", dir);
    arglist argv = {.n = 0};
    compile_argv(t, src, art, binary, &argv, key, sizeof key);

    FILE *f = fopen(stamp, "r");
    char have[sizeof key] = "";
    if (f) {
        if (!fgets(have, sizeof have, f)) have[0] = '\0';
        fclose(f);
    }
    if (is_file(binary) && strcmp(have, key) == 0) {
        arg_free(&argv);
        return true;
    }
    if (!make_dirs(t->log_prefix, dir)) {
        arg_free(&argv);
        return false;
    }
    remove(stamp);
    fprintf(stderr,
            "sipp: building llama.cpp's %s from the pinned source (%s) against %s;\n"
            "sipp: this can take minutes the first time (log: %s)\n",
            t->name, src, art, log);
    int rc = run(argv.v, log, NULL, NULL);
    arg_free(&argv);
    if (rc != 0) {
        cli_error("%s: building %s failed (exit %d); see %s. It needs a C++17 compiler (apt-get install g++, "
                  "or set "
                  "CXX)",
                  t->log_prefix, t->name, rc, log);
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

bool llama_tool_device(const char *who, const char *backend, char *device, size_t n) {
    char err[SIPP_ERROR_SIZE];
    sipp_backend_decision d;
    if (sipp_backend_decide(backend, NULL, &d, err) != SIPP_OK) {
        cli_error("%s: %s", who, err);
        return false;
    }
    /* The decision's first device: "Vulkan0" of "Vulkan0,CPU". */
    snprintf(device, n, "%.*s", (int)strcspn(d.devices, ","), d.devices);
    return true;
}
