/*
 * translate.h: helpers of the routes that translate another API into a chat completion (the
 * Responses, Messages and Ollama routes; see translate.c).
 */
#ifndef SIPP_GATEWAY_TRANSLATE_H
#define SIPP_GATEWAY_TRANSLATE_H

#include "gateway/admission.h"
#include "gateway/api_fields.h"
#include "gateway/dispatch.h"
#include "gateway/field_names.h"
#include "gateway/generate.h"
#include "gateway/request_parse.h"

#define GW_TIME_SIZE 48

/* gw_call_target for the routes that reach local targets only (count_tokens, Ollama's embed):
 * a remote target is refused with 501, named by api_name. */
gw_target *gw_translated_target(gw_call *call, const char *name, const char *api_name);

/* The call's body as a JSON object, or NULL after replying 400. */
json_t *gw_body_object(gw_call *call);

/* Sets to[as or key] = from[key] when present; true when it was. */
bool gw_copy_field(json_t *from, const char *key, json_t *to, const char *as);

/* Replies 400 naming the first key of root that is not in known (NULL-terminated) and returns
 * false: fields a route does not know are refused, never ignored. */
bool gw_check_fields(gw_call *call, json_t *root, const char *const *known, const char *api);

/* RFC 3339 UTC time with nanoseconds ("2026-12-01T09:28:30.123456789Z"). */
void gw_iso_time(double unix_s, char *out, size_t cap);
/* Wall-clock seconds since the epoch. */
double gw_unix_now(void);

#endif
