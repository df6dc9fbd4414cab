/*
 * transcriber.c: a whisper.cpp model loaded once, and the pool of whisper states that transcribe on it.
 *
 * whisper.cpp splits a model in two: the context (the weights, read-only once loaded) and states (the
 * mel spectrogram, the KV caches, the compute buffers and the result of one whisper_full). Any number
 * of states decode on one context at once, each from its own thread, so a transcriber is one context
 * and `parallel` states, and a call takes a free state for the length of one clip (waiting on a
 * condition variable when all are busy). The threads of one clip are its own: two clips at once with
 * two threads each use four.
 *
 * The backend is chosen as for llama models (src/backend's policy: auto, or an explicit backend that
 * must be compiled and available) and handed to libwhisper as use_gpu and the ordinal of the chosen
 * GPU among ggml's GPU devices, which is how whisper.cpp counts them.
 *
 * Memory is measured, not estimated: libwhisper logs every buffer it allocates (the weights per buffer
 * type, each state's KV caches and compute buffers), and the log callback installed here adds those
 * lines of the loading thread to the transcriber's sipp_memory, as src/backend/buffers.c does for
 * llama.cpp's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "speech/speech.h"
#include "store/whisper_file.h"
#include "util/util.h"

#define WHISPER_FILE_MAGIC 0x67676d6cu
#define DEFAULT_MAX_THREADS 4 /* whisper-cli's default: min(4, CPUs) */
#define BYTES_PER_MB 1e6      /* libwhisper reports sizes in MB of 10^6 bytes */

/* The transcriber whose load this thread is running (its log lines are its buffers), and the last
 * error line libwhisper logged on this thread. */
static _Thread_local sipp_transcriber *loading;
static _Thread_local char last_error[SIPP_ERROR_SIZE];

sipp_transcriber_params sipp_transcriber_default_params(void) {
    return (sipp_transcriber_params){.parallel = 1, .flash_attn = true};
}

bool sipp_is_whisper_model(const char *path) {
    FILE *f = path ? fopen(path, "rb") : NULL;
    uint32_t magic = 0;
    bool ok = f && fread(&magic, sizeof magic, 1, f) == 1 && magic == WHISPER_FILE_MAGIC;
    if (f) fclose(f);
    return ok;
}

/* "... <what> = 12.34 MB" -> bytes, or 0 when the line says no such thing. */
static uint64_t mb_after(const char *line, const char *what) {
    const char *p = strstr(line, what);
    if (!p || !(p = strchr(p, '='))) return 0;
    double mb = strtod(p + 1, NULL);
    return mb > 0 ? (uint64_t)(mb * BYTES_PER_MB) : 0;
}

/* One log line of libwhisper's during a load: a buffer it allocated, counted where it lives. */
static void note_buffer(sipp_transcriber *t, const char *line) {
    const bool host = strcmp(t->backend, "cpu") == 0;
    const char *dev = host ? NULL : t->device;
    uint64_t b;
    if ((b = mb_after(line, "total size"))) {
        /* "whisper_model_load:      CPU total size = ..." names the buffer type */
        const char *colon = strchr(line, ':');
        char name[32] = "";
        if (colon) sscanf(colon + 1, "%31s", name);
        /* the CPU's own buffers and its extra layouts (AMX, CPU_REPACK) are host memory */
        sipp_buft_place place;
        const bool known = sipp_buft_place_of(name, strlen(name), &place);
        const bool on_host = known ? place.host : strncmp(name, "CPU", 3) == 0;
        const char *where = known ? place.device : name;
        sipp_memory_add(&t->mem, on_host ? NULL : where, on_host ? 0 : strlen(where), SIPP_MEMORY_WEIGHTS, b);
    } else if ((b = mb_after(line, "kv self size")) || (b = mb_after(line, "kv cross size")) ||
               (b = mb_after(line, "kv pad  size"))) {
        sipp_memory_add(&t->mem, dev, dev ? strlen(dev) : 0, SIPP_MEMORY_KV, b);
    } else if ((b = mb_after(line, "compute buffer ("))) {
        sipp_memory_add(&t->mem, dev, dev ? strlen(dev) : 0, SIPP_MEMORY_COMPUTE, b);
    }
}

static void whisper_log(enum ggml_log_level level, const char *text, void *user) {
    if (loading) note_buffer(loading, text);
    if (level == GGML_LOG_LEVEL_ERROR) {
        snprintf(last_error, sizeof last_error, "%s", text);
        size_t n = strlen(last_error);
        while (n && (last_error[n - 1] == '\n' || last_error[n - 1] == ' '))
            last_error[--n] = '\0';
    }
    sipp_log_callback(level, text, user);
}

/* The backend for the load, and libwhisper's context parameters for it. */
static sipp_status pick_backend(sipp_transcriber *t, const sipp_transcriber_params *p,
                                struct whisper_context_params *cp, char *errbuf) {
    sipp_host_view view;
    sipp_policy_result pick;
    sipp_host_discover(&view);
    sipp_status st = sipp_policy_decide(&view, p->backend, p->backend_order, &pick, errbuf);
    if (st != SIPP_OK) return st;
    if (pick.backend != SIPP_BACKEND_CPU && pick.backend != SIPP_BACKEND_CUDA &&
        pick.backend != SIPP_BACKEND_VULKAN && pick.backend != SIPP_BACKEND_METAL)
        return sipp_fail(errbuf, SIPP_ERR_BACKEND,
                         "backend '%s' cannot run whisper models (use cpu, vulkan, cuda or metal)",
                         sipp_backend_name(pick.backend));
    *cp = t->api->whisper_context_default_params();
    cp->flash_attn = p->flash_attn;
    cp->use_gpu = pick.backend != SIPP_BACKEND_CPU;
    sipp_strlcpy(t->backend, sipp_backend_name(pick.backend), sizeof t->backend);
    sipp_strlcpy(t->reason, pick.reason, sizeof t->reason);
    sipp_strlcpy(t->device, "CPU", sizeof t->device);
    if (cp->use_gpu) {
        const sipp_device_desc *dev = &view.devices[pick.device];
        int ordinal = 0;
        for (int i = 0; i < view.n_devices; i++)
            if ((view.devices[i].kind == SIPP_DEVICE_GPU || view.devices[i].kind == SIPP_DEVICE_IGPU) &&
                view.devices[i].index < dev->index)
                ordinal++;
        cp->gpu_device = ordinal;
        sipp_strlcpy(t->device, dev->name, sizeof t->device);
    }
    return SIPP_OK;
}

static sipp_status check_file(const char *path, char *errbuf) {
    if (!path || !*path) return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "no whisper model path given");
    if (access(path, R_OK) != 0)
        return sipp_fail(errbuf, SIPP_ERR_NOT_FOUND, "whisper model '%s': %s", path, strerror(errno));
    if (!sipp_is_whisper_model(path))
        return sipp_fail(errbuf, SIPP_ERR_MODEL,
                         "'%s' is not a whisper.cpp model (no ggml magic at its start); whisper models are "
                         "the ggml-*.bin files whisper.cpp publishes",
                         path);
    /* libwhisper's loader trusts the file (a forged file type aborts the process, a truncated file is
     * read past its end): the file is walked as `sipp pull` checks a download before it is loaded */
    sipp_whisper_hparams h;
    return sipp_whisper_file_check(path, &h, NULL, errbuf);
}

/* The context and its states, with libwhisper's log lines counted as this transcriber's memory. */
static sipp_status load(sipp_transcriber *t, const char *path, struct whisper_context_params cp,
                        char *errbuf) {
    last_error[0] = '\0';
    loading = t;
    sipp_status st = sipp_whisper_init(t->api, path, cp, &t->ctx, errbuf);
    if (st == SIPP_OK && !t->ctx)
        st = sipp_fail(errbuf, SIPP_ERR_MODEL, "libwhisper could not load '%s'%s%s", path,
                       last_error[0] ? ": " : "", last_error);
    for (int i = 0; st == SIPP_OK && i < t->n_states; i++) {
        st = sipp_whisper_state_new(t->api, t->ctx, &t->states[i], errbuf);
        if (st == SIPP_OK && !t->states[i])
            st = sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "libwhisper could not create state %d of '%s'%s%s", i,
                           path, last_error[0] ? ": " : "", last_error);
    }
    loading = NULL;
    return st;
}

sipp_status sipp_transcriber_new(const char *path, const sipp_transcriber_params *params,
                                 sipp_transcriber **out, char *errbuf) {
    *out = NULL;
    sipp_transcriber_params p = params ? *params : sipp_transcriber_default_params();
    if (p.parallel < 1) p.parallel = 1;
    sipp_status st = sipp_runtime_init(NULL, errbuf);
    if (st != SIPP_OK || (st = check_file(path, errbuf)) != SIPP_OK) return st;
    sipp_transcriber *t = calloc(1, sizeof *t);
    if (!t) return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory loading '%s'", path);
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->freed, NULL);
    t->n_states = p.parallel;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    t->threads = p.threads > 0 ? p.threads
                               : (int)(cpus < DEFAULT_MAX_THREADS && cpus > 0 ? cpus : DEFAULT_MAX_THREADS);
    t->states = calloc((size_t)t->n_states, sizeof *t->states);
    t->busy = calloc((size_t)t->n_states, sizeof *t->busy);
    if (!t->states || !t->busy) {
        st = sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory loading '%s'", path);
        goto fail;
    }
    if (!(t->api = sipp_whisper_open(errbuf))) {
        st = SIPP_ERR_BACKEND;
        goto fail;
    }
    t->api->whisper_log_set(whisper_log, NULL);
    struct whisper_context_params cp;
    if ((st = pick_backend(t, &p, &cp, errbuf)) != SIPP_OK || (st = load(t, path, cp, errbuf)) != SIPP_OK)
        goto fail;
    *out = t;
    return SIPP_OK;
fail:
    sipp_transcriber_free(t);
    return st;
}

void sipp_transcriber_free(sipp_transcriber *t) {
    if (!t) return;
    for (int i = 0; t->states && i < t->n_states; i++)
        if (t->states[i]) t->api->whisper_free_state(t->states[i]);
    if (t->ctx) t->api->whisper_free(t->ctx);
    free(t->states);
    free(t->busy);
    pthread_cond_destroy(&t->freed);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

const char *sipp_transcriber_backend(const sipp_transcriber *t) { return t ? t->backend : ""; }
const char *sipp_transcriber_backend_reason(const sipp_transcriber *t) { return t ? t->reason : ""; }

void sipp_transcriber_memory(const sipp_transcriber *t, sipp_memory *out) {
    memset(out, 0, sizeof *out);
    if (t) *out = t->mem; /* written only while loading, before the handle is returned */
}

int sipp_transcriber_acquire(sipp_transcriber *t) {
    pthread_mutex_lock(&t->mu);
    for (;;) {
        for (int i = 0; i < t->n_states; i++) {
            if (!t->busy[i]) {
                t->busy[i] = true;
                pthread_mutex_unlock(&t->mu);
                return i;
            }
        }
        pthread_cond_wait(&t->freed, &t->mu);
    }
}

/* Replaces a used state by a fresh one. whisper.cpp seeds the random generator of a state's first
 * decoder once, when the state is made, and samples from it whenever the temperature fallback
 * rises above 0: a used state would decode the next clip differently from the first. A fresh state
 * decodes every clip as whisper-cli's single one, so the same request gives the same transcript.
 * The new state is made before the old one is freed; when it cannot be made, the old one stays. */
static void renew_state(sipp_transcriber *t, int slot) {
    struct whisper_state *fresh = NULL;
    char err[SIPP_ERROR_SIZE];
    if (sipp_whisper_state_new(t->api, t->ctx, &fresh, err) != SIPP_OK || !fresh) return;
    t->api->whisper_free_state(t->states[slot]);
    t->states[slot] = fresh;
}

void sipp_transcriber_release(sipp_transcriber *t, int slot) {
    renew_state(t, slot);
    pthread_mutex_lock(&t->mu);
    t->busy[slot] = false;
    pthread_cond_signal(&t->freed);
    pthread_mutex_unlock(&t->mu);
}
