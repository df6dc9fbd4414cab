/*
 * last_error.c: see last_error.h. A small per-thread table of (handle id, message), replaced
 * round-robin: a thread rarely fails on more than a few handles between reading their messages.
 */
#include "util/last_error.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "util/util.h"

#define LAST_ERROR_HANDLES 4

typedef struct entry {
    uint64_t id; /* 0: unused */
    char msg[SIPP_ERROR_SIZE];
} entry;

static atomic_uint_fast64_t next_id = 1;
static __thread entry tl_entries[LAST_ERROR_HANDLES];
static __thread unsigned tl_next;
static __thread char tl_copy[SIPP_ERROR_SIZE]; /* another thread's message, as last read here */

void sipp_last_error_init(sipp_last_error *le) {
    le->id = atomic_fetch_add(&next_id, 1);
    pthread_mutex_init(&le->lock, NULL);
    le->any_thread[0] = '\0';
}

void sipp_last_error_destroy(sipp_last_error *le) { pthread_mutex_destroy(&le->lock); }

/* This thread's entry for the handle, or NULL. */
static entry *entry_find(uint64_t id) {
    for (int i = 0; i < LAST_ERROR_HANDLES; i++)
        if (tl_entries[i].id == id) return &tl_entries[i];
    return NULL;
}

sipp_status sipp_last_error_setv(sipp_last_error *le, sipp_status status, const char *fmt, va_list ap) {
    entry *e = entry_find(le->id);
    if (!e) {
        e = &tl_entries[tl_next++ % LAST_ERROR_HANDLES];
        e->id = le->id;
    }
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    pthread_mutex_lock(&le->lock);
    sipp_strlcpy(le->any_thread, e->msg, sizeof le->any_thread);
    pthread_mutex_unlock(&le->lock);
    return status;
}

const char *sipp_last_error_get(const sipp_last_error *le) {
    const entry *e = entry_find(le->id);
    if (e) return e->msg;
    /* The lock guards the copy, not the handle's identity: taking it through a const handle is fine. */
    pthread_mutex_t *lock = (pthread_mutex_t *)&le->lock;
    pthread_mutex_lock(lock);
    sipp_strlcpy(tl_copy, le->any_thread, sizeof tl_copy);
    pthread_mutex_unlock(lock);
    return tl_copy;
}
