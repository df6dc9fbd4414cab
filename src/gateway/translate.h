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
#include "gateway/media_parts.h"
#include "gateway/request_parse.h"

#define GW_TIME_SIZE 48

/* gw_call_target for the routes that reach local targets only (count_tokens, Ollama's embed):
 * a remote target is refused with 501, named by api_name. */
gw_target *gw_translated_target(gw_call *call, const char *name, const char *api_name);

/* The call's body as a JSON object, or NULL after replying 400. */
json_t *gw_body_object(gw_call *call);

/* Sets to[as or key] = from[key] when present; true when it was. */
bool gw_copy_field(json_t *from, const char *key, json_t *to, const char *as);

/* What one of an API's tools becomes (gw_translate_tools). */
typedef enum gw_tool_fate { GW_TOOL_REFUSED, GW_TOOL_ADDED, GW_TOOL_LEFT_OUT } gw_tool_fate;
typedef gw_tool_fate (*gw_tool_fn)(gw_call *call, json_t *tool, size_t i, json_t *out, void *ctx);

/* chat's "tools" from an API's tools array (absent or null: none). one(call, tool, i, out, ctx)
 * decides tool i: it appends what the tool becomes to out (ADDED, see gw_function_tool); or leaves
 * it out (LEFT_OUT: a tool the provider would run and sipp does not, which the model is not shown
 * and sipp-ignored names as "tools[i]"); or replies and refuses it (REFUSED). not_array is the
 * refusal of tools that are not an array. False after replying. */
bool gw_translate_tools(gw_call *call, json_t *tools, json_t *chat, const char *not_array, gw_tool_fn one,
                        void *ctx);

/* Whether chat's tools (as gw_translate_tools made them) have one named name; else replies 400 saying
 * that tool_choice names a `kind` (an API's word: "custom tool", "function", "tool") that is not in
 * tools, and lists them. */
bool gw_forced_tool_listed(gw_call *call, json_t *chat, const char *name, const char *kind);

/* chat's function tool for an API's tool t: {"type": "function", "function": {"name"?,
 * "description"?, "parameters"?, "strict"?}}, with name (borrowed; NULL: none), the parameters'
 * schema from t[schema_key], and t's strict when keep_strict. */
json_t *gw_function_tool(json_t *t, json_t *name, const char *schema_key, bool keep_strict);

/* Replies 400 naming the first key of root that is not in known (NULL-terminated) and returns
 * false: fields a route does not know are refused, never ignored. */
bool gw_check_fields(gw_call *call, json_t *root, const char *const *known, const char *api);

/* RFC 3339 UTC time with nanoseconds ("2026-12-01T09:28:30.123456789Z"). */
void gw_iso_time(double unix_s, char *out, size_t cap);
/* Wall-clock seconds since the epoch. */
double gw_unix_now(void);

#endif
