/*
 * runtime.c: one-time process setup. It loads the ggml backend modules of one artifact directory,
 * sets how much of llama.cpp's logging reaches stderr (log.c), and answers what the process has
 * (sipp_host_discover).
 *
 * Backend modules are loaded once per process: ggml keeps a global registry of them, so this is the
 * only global state libsipp has. Which modules load is decided by which files the artifact holds;
 * that is what "compiled" means for sipp.
 */
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend/backend.h"
#include "ggml-backend.h"
#include "llama.h"
#include "util/util.h"

#ifndef SIPP_VERSION
#define SIPP_VERSION "0.1.0"
#endif
#ifndef SIPP_LLAMA_RELEASE
#define SIPP_LLAMA_RELEASE "unknown"
#endif
#ifndef SIPP_LLAMA_COMMIT
#define SIPP_LLAMA_COMMIT "unknown"
#endif

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static bool init_done;
static sipp_status init_status;
static char init_error[SIPP_ERROR_SIZE];
static char artifact_dir[PATH_MAX];

const char *sipp_version(void) { return SIPP_VERSION; }
int sipp_abi_version(void) { return SIPP_ABI_VERSION; }
const char *sipp_llama_release(void) { return SIPP_LLAMA_RELEASE; }
const char *sipp_llama_commit(void) { return SIPP_LLAMA_COMMIT; }

const char *sipp_status_name(sipp_status s) {
    static const char *const names[] = {
        [SIPP_OK] = "ok",
        [SIPP_ERR_INVALID_ARGUMENT] = "invalid_argument",
        [SIPP_ERR_NOT_FOUND] = "not_found",
        [SIPP_ERR_IO] = "io_error",
        [SIPP_ERR_MODEL] = "model_error",
        [SIPP_ERR_BACKEND] = "backend_error",
        [SIPP_ERR_CONTEXT_FULL] = "context_full",
        [SIPP_ERR_BUSY] = "busy",
        [SIPP_ERR_CANCELLED] = "cancelled",
        [SIPP_ERR_TIMEOUT] = "timeout",
        [SIPP_ERR_NO_MEMORY] = "no_memory",
        [SIPP_ERR_CLOSED] = "closed",
        [SIPP_ERR_INTERNAL] = "internal_error",
    };
    return (unsigned)s < sizeof names / sizeof names[0] && names[s] ? names[s] : "unknown";
}

sipp_runtime_params sipp_runtime_default_params(void) {
    sipp_runtime_params p = {.artifact_dir = NULL, .log_level = SIPP_LOG_ERROR};
    return p;
}

/* The directory libllama was loaded from: the artifact this library was linked against. */
static bool own_artifact_dir(char *out, size_t n) {
    Dl_info info;
    if (!dladdr((void *)llama_backend_init, &info) || !info.dli_fname) return false;
    char resolved[PATH_MAX];
    if (!realpath(info.dli_fname, resolved)) return false;
    sipp_strlcpy(out, dirname(resolved), n);
    return true;
}

static sipp_status do_init(const sipp_runtime_params *p) {
    sipp_log_route(p->log_level);
#ifdef __EMSCRIPTEN__
    /* The browser runtime (make web) links ggml's CPU backend statically into one WebAssembly
     * module: there is no artifact directory and nothing to load. */
    sipp_strlcpy(artifact_dir, "wasm (linked in)", sizeof artifact_dir);
    llama_backend_init();
    if (!ggml_backend_reg_by_name("CPU"))
        return sipp_fail(init_error, SIPP_ERR_BACKEND,
                         "this browser runtime has no CPU backend; rebuild it with make web");
    sipp_buffers_learn();
    return SIPP_OK;
#endif

    const char *dir = p->artifact_dir;
    if (!dir || !*dir) dir = getenv("SIPP_ARTIFACT");
    char own[PATH_MAX];
    if ((!dir || !*dir) && own_artifact_dir(own, sizeof own)) dir = own;
    if (!dir)
        return sipp_fail(init_error, SIPP_ERR_BACKEND,
                         "cannot find the artifact directory; set SIPP_ARTIFACT");

    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return sipp_fail(
            init_error, SIPP_ERR_NOT_FOUND,
            "artifact '%s' is not a directory; build one with make or sipp build, or unset SIPP_ARTIFACT",
            dir);
    if (!realpath(dir, artifact_dir)) sipp_strlcpy(artifact_dir, dir, sizeof artifact_dir);

    /* A deployment that requires signed artifacts checks every file before any module is loaded. */
    const char *require = getenv("SIPP_REQUIRE_SIGNED");
    if (require && *require) {
        char why[SIPP_ERROR_SIZE];
        if (sipp_artifact_verify(artifact_dir, require, why) != SIPP_OK)
            return sipp_fail(init_error, SIPP_ERR_BACKEND, "SIPP_REQUIRE_SIGNED=%s refuses the artifact: %s",
                             require, why);
    }

    llama_backend_init();
    ggml_backend_load_all_from_path(artifact_dir);
    if (!ggml_backend_reg_by_name("CPU"))
        return sipp_fail(
            init_error, SIPP_ERR_BACKEND,
            "artifact '%s' has no loadable CPU backend module (libggml-cpu-*.so); rebuild it with make",
            artifact_dir);
    sipp_buffers_learn();
    return SIPP_OK;
}

sipp_status sipp_runtime_init(const sipp_runtime_params *params, char *errbuf) {
    pthread_mutex_lock(&init_lock);
    if (!init_done) {
        sipp_runtime_params def = sipp_runtime_default_params();
        init_status = do_init(params ? params : &def);
        init_done = true;
    }
    sipp_status st = init_status;
    pthread_mutex_unlock(&init_lock);
    if (st != SIPP_OK && errbuf) sipp_strlcpy(errbuf, init_error, SIPP_ERROR_SIZE);
    return st;
}

const char *sipp_runtime_artifact_dir(void) {
    pthread_mutex_lock(&init_lock);
    const char *d = init_done && init_status == SIPP_OK ? artifact_dir : NULL;
    pthread_mutex_unlock(&init_lock);
    return d;
}

static sipp_device_kind kind_of(enum ggml_backend_dev_type t) {
    switch (t) {
    case GGML_BACKEND_DEVICE_TYPE_GPU: return SIPP_DEVICE_GPU;
    case GGML_BACKEND_DEVICE_TYPE_IGPU: return SIPP_DEVICE_IGPU;
    case GGML_BACKEND_DEVICE_TYPE_ACCEL: return SIPP_DEVICE_ACCEL;
    default: return SIPP_DEVICE_CPU;
    }
}

void sipp_host_discover(sipp_host_view *view) {
    memset(view, 0, sizeof *view);
    for (size_t r = 0; r < ggml_backend_reg_count(); r++) {
        ggml_backend_reg_t reg = ggml_backend_reg_get(r);
        sipp_backend_id id = sipp_backend_from_ggml(ggml_backend_reg_name(reg));
        if (id != SIPP_BACKEND_COUNT) view->compiled[id] = true;
    }
    for (size_t i = 0; i < ggml_backend_dev_count() && view->n_devices < SIPP_MAX_DEVICES; i++) {
        ggml_backend_dev_t dev = ggml_backend_dev_get(i);
        sipp_backend_id id = sipp_backend_from_ggml(ggml_backend_reg_name(ggml_backend_dev_backend_reg(dev)));
        if (id == SIPP_BACKEND_COUNT) continue;
        sipp_device_desc *d = &view->devices[view->n_devices++];
        d->backend = id;
        d->index = (int)i;
        sipp_strlcpy(d->name, ggml_backend_dev_name(dev), sizeof d->name);
        sipp_strlcpy(d->description, ggml_backend_dev_description(dev), sizeof d->description);
        d->kind = kind_of(ggml_backend_dev_type(dev));
        d->software = id != SIPP_BACKEND_CPU && sipp_device_is_software(d->description);
        ggml_backend_dev_memory(dev, &d->memory_free, &d->memory_total);
    }
}
