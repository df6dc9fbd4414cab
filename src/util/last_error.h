/*
 * last_error.h: a handle's last error message, kept per thread like errno (internal).
 *
 * A handle whose calls are [any thread] (an engine, a model) cannot keep its message in one buffer:
 * two threads failing at once would write it together, and a thread reading its own message would
 * read the other's half-written one. So each thread keeps the message of its own last failure on each
 * handle, and sipp_*_last_error on that thread returns it. The handle also keeps a copy of the last
 * failure of any thread, under a lock, for a thread that never failed on it (a supervisor reading
 * what went wrong); that copy is taken into the reading thread's own storage, so a returned pointer
 * is never written by another thread.
 *
 * A thread remembers the handles of its last LAST_ERROR_HANDLES failures; each handle has an id that
 * is never reused, so a new handle at a freed one's address does not see its messages.
 */
#ifndef SIPP_UTIL_LAST_ERROR_H
#define SIPP_UTIL_LAST_ERROR_H

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>

#include "sipp.h"

typedef struct sipp_last_error {
    uint64_t id;
    pthread_mutex_t lock;
    char any_thread[SIPP_ERROR_SIZE]; /* the last failure of any thread, guarded by lock */
} sipp_last_error;

void sipp_last_error_init(sipp_last_error *le);
void sipp_last_error_destroy(sipp_last_error *le);

/* Records a failure of the calling thread on the handle; returns status. */
sipp_status sipp_last_error_setv(sipp_last_error *le, sipp_status status, const char *fmt, va_list ap);

/* The calling thread's last failure on the handle, else (a copy of) the last of any thread, else "".
 * Valid on this thread until its next failure or read on some handle. */
const char *sipp_last_error_get(const sipp_last_error *le);

#endif
