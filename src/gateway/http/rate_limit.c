/*
 * rate_limit.c: the per-client rate limit.
 *
 * Each client (the token's caller, or the IP address without auth) has a token bucket
 * of `burst` requests that refills at requests_per_minute / 60 per second; a request takes one or
 * is refused with 429 and Retry-After (the seconds until the bucket holds one again). Buckets live
 * in a table of at most GW_MAX_CLIENTS entries; when it is full, the client seen least recently
 * gives its place up (a forgotten client starts again with a full bucket, which errs on the side
 * of letting requests through).
 *
 * A caller whose bearer token fails is charged to its IP address's bucket, so guessing tokens
 * spends the same budget as making requests: once it is spent the guesses get 429, not 401.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway/http/http.h"

#define GW_MAX_CLIENTS 4096
#define GW_SECONDS_PER_MINUTE 60.0
#define GW_MS_PER_S 1000.0

typedef struct bucket {
    char client[64];
    double tokens;
    double last_ms;
} bucket;

struct gw_limits {
    pthread_mutex_t mu;
    double rate_per_ms; /* 0 = no rate limit */
    double burst;
    bucket *buckets;
    size_t n_buckets;
};

gw_limits *gw_limits_new(const gw_config *cfg) {
    gw_limits *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    pthread_mutex_init(&l->mu, NULL);
    l->rate_per_ms = cfg->rate_requests_per_minute / GW_SECONDS_PER_MINUTE / GW_MS_PER_S;
    l->burst = cfg->rate_burst > 0 ? cfg->rate_burst : cfg->rate_requests_per_minute;
    if (l->rate_per_ms > 0 && !(l->buckets = calloc(GW_MAX_CLIENTS, sizeof *l->buckets))) {
        free(l);
        return NULL;
    }
    return l;
}

void gw_limits_free(gw_limits *l) {
    if (!l) return;
    pthread_mutex_destroy(&l->mu);
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
    if (ok)
        b->tokens -= 1.0;
    else
        *retry_after_s = (int)ceil((1.0 - b->tokens) / l->rate_per_ms / GW_MS_PER_S);
    pthread_mutex_unlock(&l->mu);
    if (!ok && *retry_after_s < 1) *retry_after_s = 1;
    return ok;
}
