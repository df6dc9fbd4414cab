/*
 * responses_store.h: the bounded in-memory store of the Responses API (see responses_store.c).
 * Every function is safe from any thread.
 */
#ifndef SIPP_GATEWAY_RESPONSES_STORE_H
#define SIPP_GATEWAY_RESPONSES_STORE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "gateway/config.h"

typedef struct gw_responses gw_responses;

/* A store bounded by the config's [responses] max_stored, max_stored_bytes and ttl_seconds. */
gw_responses *gw_responses_new(const gw_config *cfg);
void gw_responses_free(gw_responses *s);
/* Keeps value (stolen) under id for owner (the caller that made it); drops expired entries, then
 * the oldest while over a bound. False (nothing kept) when value alone is over the byte bound, the
 * store keeps nothing, or id is already taken (an id is never reused, even by its own owner). */
bool gw_responses_put(gw_responses *s, const char *id, const char *owner, json_t *value);
/* A deep copy of the entry under id (new reference), or NULL when unknown, expired, or owned by
 * another caller than owner (NULL: any owner, for an admin). */
json_t *gw_responses_get(gw_responses *s, const char *id, const char *owner);
/* True when there was an entry under id of owner (NULL: any owner), now gone. */
bool gw_responses_delete(gw_responses *s, const char *id, const char *owner);
/* Live entries and their bytes. */
void gw_responses_counts(gw_responses *s, size_t *count, size_t *bytes);

#endif
