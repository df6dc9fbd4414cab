/*
 * media_budget.c: decoded media bytes held by concurrent requests, against one shared budget
 * (sipp_media_budget in sipp.h; taken and given back by the engine around decoding, media_budget.h).
 *
 * A request's images and audio are decoded on the thread that submits it, so requests to several
 * targets decode at once; each engine's own limits bound one request, this bounds them together. A
 * request takes its whole amount at once or nothing, so two large requests cannot each hold half and
 * wait for the rest.
 */
#include "model/media_budget.h"

#include <pthread.h>
#include <stdlib.h>

struct sipp_media_budget {
    pthread_mutex_t mu;
    size_t cap, used; /* used <= cap, under mu */
};

sipp_media_budget *sipp_media_budget_new(size_t bytes) {
    sipp_media_budget *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    pthread_mutex_init(&b->mu, NULL);
    b->cap = bytes;
    return b;
}

void sipp_media_budget_free(sipp_media_budget *b) {
    if (!b) return;
    pthread_mutex_destroy(&b->mu);
    free(b);
}

size_t sipp_media_budget_in_use(const sipp_media_budget *b) {
    if (!b) return 0;
    pthread_mutex_lock((pthread_mutex_t *)&b->mu);
    size_t used = b->used;
    pthread_mutex_unlock((pthread_mutex_t *)&b->mu);
    return used;
}

size_t sipp_media_budget_cap(const sipp_media_budget *b) { return b ? b->cap : 0; }

bool sipp_media_budget_take(sipp_media_budget *b, size_t bytes) {
    if (!b || bytes == 0) return true;
    pthread_mutex_lock(&b->mu);
    bool ok = bytes <= b->cap - b->used;
    if (ok) b->used += bytes;
    pthread_mutex_unlock(&b->mu);
    return ok;
}

void sipp_media_budget_give(sipp_media_budget *b, size_t bytes) {
    if (!b || bytes == 0) return;
    pthread_mutex_lock(&b->mu);
    b->used -= bytes <= b->used ? bytes : b->used;
    pthread_mutex_unlock(&b->mu);
}
