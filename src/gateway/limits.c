/*
 * limits.c: how much the gateway takes on.
 *
 * Rate limit. Each client (the token's caller, or the IP address without auth) has a token bucket
 * of `burst` requests that refills at requests_per_minute / 60 per second; a request takes one or
 * is refused with 429 and Retry-After (the seconds until the bucket holds one again). Buckets live
 * in a table of at most GW_MAX_CLIENTS entries; when it is full, the client seen least recently
 * gives its place up (a forgotten client starts again with a full bucket, which errs on the side
 * of letting requests through).
 *
 * Admission. At most max_concurrent_requests generations run at once (across targets); up to
 * max_queue more wait for a permit, in arrival order of wake-up, until their request deadline;
 * beyond that a request is refused at once with 429. Waiters poll for their client going away.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway/gateway.h"

#define GW_MAX_CLIENTS 4096
#define GW_ADMIT_SLICE_MS 100
#define GW_SECONDS_PER_MINUTE 60.0
#define GW_MS_PER_S 1000.0

typedef struct bucket {
    char client[64];
    double tokens;
    double last_ms;
} bucket;

struct gw_limits {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    double rate_per_ms; /* 0 = no rate limit */
    double burst;
    bucket *buckets;
    size_t n_buckets;
    int max_active, max_queue;
    int active, queued;
};

gw_limits *gw_limits_new(const gw_config *cfg) {
    gw_limits *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    pthread_mutex_init(&l->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&l->cv, &ca);
    pthread_condattr_destroy(&ca);
    l->rate_per_ms = cfg->rate_requests_per_minute / GW_SECONDS_PER_MINUTE / GW_MS_PER_S;
    l->burst = cfg->rate_burst > 0 ? cfg->rate_burst : cfg->rate_requests_per_minute;
    l->max_active = cfg->max_concurrent_requests;
    l->max_queue = cfg->max_queue;
    if (l->rate_per_ms > 0 && !(l->buckets = calloc(GW_MAX_CLIENTS, sizeof *l->buckets))) {
        free(l);
        return NULL;
    }
    return l;
}

void gw_limits_free(gw_limits *l) {
    if (!l) return;
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    free(l->buckets);
    free(l);
}

static bucket *find_bucket(gw_limits *l, const char *client, double now) {
    bucket *oldest = NULL;
    for (size_t i = 0; i < l->n_buckets; i++) {
        if (strcmp(l->buckets[i].client, client) == 0) return &l->buckets[i];
        if (!oldest || l->buckets[i].last_ms < oldest->last_ms) oldest = &l->buckets[i];
    }
    bucket *b = l->n_buckets < GW_MAX_CLIENTS ? &l->buckets[l->n_buckets++] : oldest;
    snprintf(b->client, sizeof b->client, "%s", client);
    b->tokens = l->burst;
    b->last_ms = now;
    return b;
}

bool gw_rate_take(gw_limits *l, const char *client, int *retry_after_s) {
    if (l->rate_per_ms <= 0) return true;
    double now = sipp_now_ms();
    pthread_mutex_lock(&l->mu);
    bucket *b = find_bucket(l, client, now);
    b->tokens = fmin(l->burst, b->tokens + (now - b->last_ms) * l->rate_per_ms);
    b->last_ms = now;
    bool ok = b->tokens >= 1.0;
    if (ok) b->tokens -= 1.0;
    else *retry_after_s = (int)ceil((1.0 - b->tokens) / l->rate_per_ms / GW_MS_PER_S);
    pthread_mutex_unlock(&l->mu);
    if (!ok && *retry_after_s < 1) *retry_after_s = 1;
    return ok;
}

gw_admit_result gw_admit(gw_limits *l, double deadline_ms, bool (*abandoned)(void *), void *arg) {
    pthread_mutex_lock(&l->mu);
    if (l->active < l->max_active) {
        l->active++;
        pthread_mutex_unlock(&l->mu);
        return GW_ADMIT_OK;
    }
    if (l->queued >= l->max_queue) {
        pthread_mutex_unlock(&l->mu);
        return GW_ADMIT_QUEUE_FULL;
    }
    l->queued++;
    gw_admit_result r = GW_ADMIT_OK;
    while (l->active >= l->max_active) {
        if (sipp_now_ms() >= deadline_ms) {
            r = GW_ADMIT_TIMEOUT;
            break;
        }
        pthread_mutex_unlock(&l->mu);
        bool gone = abandoned && abandoned(arg);
        pthread_mutex_lock(&l->mu);
        if (gone) {
            r = GW_ADMIT_ABANDONED;
            break;
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += (long)GW_ADMIT_SLICE_MS * 1000000L;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&l->cv, &l->mu, &ts);
    }
    l->queued--;
    if (r == GW_ADMIT_OK) l->active++;
    pthread_mutex_unlock(&l->mu);
    return r;
}

void gw_release(gw_limits *l) {
    pthread_mutex_lock(&l->mu);
    l->active--;
    pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

void gw_limits_counts(gw_limits *l, int *active, int *queued) {
    pthread_mutex_lock(&l->mu);
    *active = l->active;
    *queued = l->queued;
    pthread_mutex_unlock(&l->mu);
}
