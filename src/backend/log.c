/*
 * log.c: llama.cpp's and ggml's log, routed through one callback for the whole process.
 *
 * ggml has one global log callback (llama_log_set sets llama.cpp's and ggml's together). sipp sets
 * it once, here, and never swaps it: everything else goes through this file.
 *
 *   - Levels. sipp_runtime_init says how much reaches stderr (sipp_runtime_params.log_level).
 *   - Capture. While a thread does something whose failure llama.cpp or gguf explains only in a
 *     log line (a model load, a context, a GGUF header read), that thread's first error line is
 *     kept in a buffer of its own (sipp_log_capture), so that sipp's one-line message can say what
 *     llama.cpp objected to, and the line is not printed a second time. Other threads' lines pass
 *     as usual: the buffer is per thread, so no lock is needed and no line is lost.
 *   - Observation. A thread may also watch every line it logs (sipp_log_observe): placement.c reads
 *     where llama.cpp put a model's layers and buffers from its load lines, as llama.h has no call
 *     that says so.
 *
 * A capture may start before the runtime is initialised (`sipp models info` reads headers without
 * loading any backend): the callback is installed on first use either way.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "ggml.h"
#include "llama.h"
#include "util/util.h"

static _Atomic sipp_log_level log_level = SIPP_LOG_ERROR;
static pthread_once_t installed = PTHREAD_ONCE_INIT;
static __thread char *capture_buf;
static __thread sipp_log_observer observer;
static __thread void *observer_user;

void sipp_log_callback(enum ggml_log_level level, const char *text, void *user) {
    if (level == GGML_LOG_LEVEL_INFO) sipp_buffers_note(text);
    if (observer && text) observer(text, observer_user);
    if (capture_buf) {
        /* The first error line says what went wrong; later ones say that loading failed. The caller
         * reports it in its own message, so nothing is printed twice. */
        if (level == GGML_LOG_LEVEL_ERROR && !*capture_buf && text && *text && *text != '\n') {
            sipp_strlcpy(capture_buf, text, SIPP_ERROR_SIZE);
            size_t n = strlen(capture_buf);
            while (n && (capture_buf[n - 1] == '\n' || capture_buf[n - 1] == ' '))
                capture_buf[--n] = '\0';
        }
        if (level == GGML_LOG_LEVEL_ERROR || level == GGML_LOG_LEVEL_CONT) return;
    }
    sipp_log_level want;
    switch (level) {
    case GGML_LOG_LEVEL_ERROR: want = SIPP_LOG_ERROR; break;
    case GGML_LOG_LEVEL_WARN: want = SIPP_LOG_WARN; break;
    case GGML_LOG_LEVEL_INFO: want = SIPP_LOG_INFO; break;
    case GGML_LOG_LEVEL_CONT: want = SIPP_LOG_DEBUG; break;
    default: want = SIPP_LOG_DEBUG; break;
    }
    if (want <= log_level) fputs(text, stderr);
}

static void install(void) { llama_log_set(sipp_log_callback, NULL); }

void sipp_log_route(sipp_log_level level) {
    log_level = level;
    pthread_once(&installed, install);
}

void sipp_log_capture(char *buf) {
    pthread_once(&installed, install);
    capture_buf = buf;
    if (buf) buf[0] = '\0';
}

void sipp_log_observe(sipp_log_observer fn, void *user) {
    pthread_once(&installed, install);
    observer = fn;
    observer_user = user;
}
