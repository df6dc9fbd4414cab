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
/* Keeps value (stolen) under id, replacing an entry of that id; drops expired entries, then the
 * oldest while over a bound. False (nothing kept) when value alone is over the byte bound or the
 * store keeps nothing. */
bool gw_responses_put(gw_responses *s, const char *id, json_t *value);
/* A deep copy of the entry under id (new reference), or NULL when unknown or expired. */
json_t *gw_responses_get(gw_responses *s, const char *id);
/* True when there was an entry under id (now gone). */
bool gw_responses_delete(gw_responses *s, const char *id);
/* Live entries and their bytes. */
void gw_responses_counts(gw_responses *s, size_t *count, size_t *bytes);

#endif
