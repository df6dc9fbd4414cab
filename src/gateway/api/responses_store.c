/*
 * responses_store.c: the in-memory store behind the Responses API's store and
 * previous_response_id.
 *
 * An entry is one response as JSON: the response object that GET /v1/responses/{id} returns, its
 * input items, the conversation so far in chat-completions messages (what a follow-up turn
 * prepends), and the context key of the conversation (so the follow-up runs in the slot that holds
 * its KV and evaluates only the new tokens).
 *
 * Bounded three ways, all from [responses] in the config: max_stored entries, max_stored_bytes of
 * their JSON, and ttl_seconds. Entries are kept in insertion order; a put drops expired entries and
 * then the oldest while over a bound, so the store never holds more than its limits. A lookup of
 * an expired entry misses, as an unknown one does (the route answers 404 naming the id).
 *
 * Every entry has an owner, the caller that made it (auth.c's gw_auth_caller). A lookup names the
 * owner it is made for, and an entry of another owner misses exactly as an unknown id does, so a
 * caller cannot tell another's responses from ids that never existed; an admin looks up with no
 * owner and sees them all. Ids are never replaced: a put under an id already held fails, so no
 * caller can overwrite another's conversation by choosing its id.
 *
 * Lookups are a linear scan under one lock: with the default bound (1024) that is microseconds, far
 * below a generation. Entries are immutable once stored; a get returns a deep copy, so no JSON is
 * shared between threads.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/api/api.h"
#include "util/assertions.h"

typedef struct entry {
    char *id;
    char *owner;
    json_t *value;
    size_t bytes;
    double expires_ms; /* sipp_now_ms clock */
} entry;

struct gw_responses {
    pthread_mutex_t lock;
    entry *entries; /* oldest first */
    size_t n, cap;
    size_t bytes;
    size_t max_count, max_bytes;
    double ttl_ms;
};

gw_responses *gw_responses_new(const gw_config *cfg) {
    gw_responses *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    pthread_mutex_init(&s->lock, NULL);
    s->max_count = (size_t)cfg->responses_max_stored;
    s->max_bytes = cfg->responses_max_bytes;
    s->ttl_ms = cfg->responses_ttl_seconds * 1000.0;
    return s;
}

static void entry_clear(entry *e) {
    free(e->id);
    free(e->owner);
    json_decref(e->value);
}

/* Removes entry i (lock held). */
static void drop(gw_responses *s, size_t i) {
    SIPP_ASSERT_HELD(&s->lock);
    s->bytes -= s->entries[i].bytes;
    entry_clear(&s->entries[i]);
    memmove(&s->entries[i], &s->entries[i + 1], (s->n - i - 1) * sizeof *s->entries);
    s->n--;
}

static void drop_expired(gw_responses *s, double now) {
    for (size_t i = 0; i < s->n;) {
        if (s->entries[i].expires_ms <= now)
            drop(s, i);
        else
            i++;
    }
}

/* The index of the entry under id when owner (NULL: any) owns it, else -1. */
static long find(gw_responses *s, const char *id, const char *owner) {
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->entries[i].id, id) == 0)
            return !owner || strcmp(s->entries[i].owner, owner) == 0 ? (long)i : -1;
    return -1;
}

void gw_responses_free(gw_responses *s) {
    if (!s) return;
    for (size_t i = 0; i < s->n; i++)
        entry_clear(&s->entries[i]);
    free(s->entries);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

bool gw_responses_put(gw_responses *s, const char *id, const char *owner, json_t *value) {
    char *text = value ? json_dumps(value, JSON_COMPACT) : NULL;
    bool made = text != NULL;
    size_t bytes = made ? strlen(text) + strlen(id) : 0;
    free(text);
    if (!s || !made || s->max_count == 0 || bytes > s->max_bytes) {
        json_decref(value);
        return false;
    }
    char *key = strdup(id), *who = strdup(owner);
    if (!key || !who) {
        free(key);
        free(who);
        json_decref(value);
        return false;
    }
    pthread_mutex_lock(&s->lock);
    double now = sipp_now_ms();
    drop_expired(s, now);
    bool ok = find(s, id, NULL) < 0;
    while (ok && s->n > 0 && (s->n + 1 > s->max_count || s->bytes + bytes > s->max_bytes))
        drop(s, 0);
    if (ok && s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        entry *e = realloc(s->entries, cap * sizeof *e);
        if (e) {
            s->entries = e;
            s->cap = cap;
        } else {
            ok = false;
        }
    }
    if (ok) {
        s->entries[s->n++] =
            (entry){.id = key, .owner = who, .value = value, .bytes = bytes, .expires_ms = now + s->ttl_ms};
        s->bytes += bytes;
    }
    pthread_mutex_unlock(&s->lock);
    if (!ok) {
        free(key);
        free(who);
        json_decref(value);
    }
    return ok;
}

json_t *gw_responses_get(gw_responses *s, const char *id, const char *owner) {
    if (!s) return NULL;
    pthread_mutex_lock(&s->lock);
    drop_expired(s, sipp_now_ms());
    long i = find(s, id, owner);
    json_t *copy = i >= 0 ? json_deep_copy(s->entries[i].value) : NULL;
    pthread_mutex_unlock(&s->lock);
    return copy;
}

bool gw_responses_delete(gw_responses *s, const char *id, const char *owner) {
    if (!s) return false;
    pthread_mutex_lock(&s->lock);
    drop_expired(s, sipp_now_ms());
    long i = find(s, id, owner);
    if (i >= 0) drop(s, (size_t)i);
    pthread_mutex_unlock(&s->lock);
    return i >= 0;
}

void gw_responses_counts(gw_responses *s, size_t *count, size_t *bytes) {
    *count = *bytes = 0;
    if (!s) return;
    pthread_mutex_lock(&s->lock);
    drop_expired(s, sipp_now_ms());
    *count = s->n;
    *bytes = s->bytes;
    pthread_mutex_unlock(&s->lock);
}
