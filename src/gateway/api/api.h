/*
 * api.h: the APIs (api/): one file per API, named after it (openai.c, anthropic.c, ollama.c
 * and ollama_models.c, responses.c, native.c, llama_server.c, props.c, audio.c, speech.c, ...), the
 * field tables (fields.c), the translations of other APIs into a chat (translate.c), the
 * Responses API's store and MCP tools, the audio routes on a whisper target (transcription.c), the
 * page (web.c) and the route table (router.c). What the top (gateway.c) includes of api/.
 */
#ifndef SIPP_GATEWAY_API_API_H
#define SIPP_GATEWAY_API_API_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "gateway/config.h"
#include "gateway/field_names.h"
#include "gateway/fleet/fleet.h"
#include "gateway/http/http.h"
#include "gateway/kinds/kinds.h"
#include "gateway/media_parts.h"
#include "gateway/metrics.h"
#include "gateway/request_parse.h"

/*
 * ---- fields.c: what each API's request fields get: honored, ignored (named in the
 * sipp-ignored response header) or refused with a 400 naming them. docs/api-fields.md is the same
 * table in prose, and tests/integration/test_api_fields.py checks every row of it against a
 * running gateway.
 */
typedef enum gw_field_decision {
    GW_FIELD_HONORED, /* changes what the model is given or how it samples, and is applied */
    GW_FIELD_IGNORED, /* bookkeeping or a hint: accepted and named in sipp-ignored */
    GW_FIELD_REFUSED, /* would change the output and cannot be honoured: a 400 naming it */
} gw_field_decision;

typedef struct gw_field_rule {
    const char *name;
    gw_field_decision decision;
    const char *why; /* ignored: why the output is the same without it; refused: what to do instead */
} gw_field_rule;

/* The top-level fields of each API's request body; each table ends with {NULL}. */
extern const gw_field_rule gw_fields_responses[];
extern const gw_field_rule gw_fields_messages[];
extern const gw_field_rule gw_fields_ollama_chat[];
extern const gw_field_rule gw_fields_ollama_generate[];
extern const gw_field_rule gw_fields_transcriptions[]; /* the form fields of /v1/audio/transcriptions */
extern const gw_field_rule gw_fields_whisper[];        /* those of the audio routes on a whisper.cpp target */
extern const gw_field_rule gw_fields_speech[];         /* /v1/audio/speech */

/* Checks every top-level field of root against rules: an ignored field is named in sipp-ignored, a
 * refused one (when not null) or one in no row is a 400 naming it (api names the route). False
 * after replying. */
bool gw_fields_check(gw_call *call, json_t *root, const gw_field_rule *rules, const char *api);

/*
 * ---- ollama_duration.c: Ollama's keep_alive values, read the way Ollama reads them.
 */
#define GW_DURATION_MAX_S 9223372036.854775807 /* Go's limit: int64 nanoseconds */

/* A Go duration ("5m", "10s", "1h30m", "1.5h", "300ms", "0", "-1m"; units ns, us, µs, ms, s, m, h)
 * as seconds. False, leaving *seconds alone, for anything else or beyond about 290 years. */
bool gw_parse_go_duration(const char *s, double *seconds);

/*
 * ---- responses_mcp.c: the Responses API's {"type": "mcp"} tools, run by the gateway on the model's
 * behalf through the [[mcp]] servers. api/responses.c renders the items.
 */
/* At most this many MCP calls run in one response; a call past it fails with an error item and
 * the response ends (docs/gateway.md). */
#define GW_RS_MCP_MAX_CALLS 8

/* The MCP tools of one request. */
typedef struct gw_rs_mcp gw_rs_mcp;

/* Tool t (tools[i], {"type": "mcp", "server_label", ...}) of the request: its server's tools (those
 * both allowed_tools let through) are appended to out as chat function tools under their own names
 * and descriptions, and an mcp_list_tools item (id "mcpl_RID_N") is kept for the output. *m is
 * made on the first one. False after replying 400 naming the field (an unknown label, a server_url
 * that is not the configured one, a tool name another tool has). */
bool gw_rs_mcp_tool(gw_call *call, gw_rs_mcp **m, json_t *t, size_t i, json_t *out, const char *rid);

/* Whether name is one of the request's MCP tools; its server's label and whether a call needs the
 * client's approval first (require_approval). */
bool gw_rs_mcp_find(const gw_rs_mcp *m, const char *name, const char **label, bool *approval);

/* The mcp_list_tools items, in the order of the tools (a new reference). */
json_t *gw_rs_mcp_list_items(const gw_rs_mcp *m);

/* An mcp_call item of a call not yet run ("status": "in_progress"), or an mcp_approval_request
 * item, for tool name with arguments (a JSON text). */
json_t *gw_rs_mcp_call_item(const char *id, const char *label, const char *name, const char *arguments);
json_t *gw_rs_mcp_approval_item(const char *id, const char *label, const char *name, const char *arguments);

/* Runs the call an mcp_call item holds and sets its "output", or its "error" (the server failed,
 * hung past its timeout, or the tool said it failed), and "status" completed | failed. Returns the
 * text the model is given as the call's result. Borrowed from item. */
const char *gw_rs_mcp_run(gw_call *call, json_t *item);

/* The result of a call as the model is told it: the item's output, or its error. */
const char *gw_rs_mcp_result_text(json_t *item);

void gw_rs_mcp_free(gw_rs_mcp *m);

/*
 * ---- responses_store.c: the bounded in-memory store of the Responses API.
 * Every function is safe from any thread.
 */
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

/*
 * ---- router.c: the route table: the gw_handler the connection layer runs requests with.
 */
/* route: guard, method checks, the route; finish: admission permit, metrics, the log line. */
extern const gw_handler gw_router;

/*
 * ---- the route handlers, one line each (the file of each API in api/, and web.c; the Responses,
 * Messages and Ollama routes build on translate.c). router.c's table lists them.
 *
 * To add a route: write its handler in the file of its API, declare it here, add one line to the
 * table in router.c, and document it in docs/gateway.md.
 */
void gw_route_models(gw_call *call);
void gw_route_model(gw_call *call, const char *id);
/* POST /v1/models/{name}/load and /unload (api/model_load.c); name is name[0..name_len). */
void gw_route_model_residency(gw_call *call, const char *name, size_t name_len, const char *action);
/* GET /v1/models/{name}/file (api/model_file.c): the target's GGUF, with Range, when [web]
 * serve_model_files is on; gw_model_file_path tells whether the part after /v1/models/ asks for it,
 * and gw_model_file_json is the browser_file entry of /v1/models (NULL: not served). */
void gw_route_model_file(gw_call *call, const char *name, size_t name_len);
bool gw_model_file_path(const char *rest);
json_t *gw_model_file_json(gw_call *call, const gw_target *t);
void gw_route_chat_completions(gw_call *call);
void gw_route_completions(gw_call *call);
void gw_route_embeddings(gw_call *call);
void gw_route_transcriptions(gw_call *call); /* POST /v1/audio/transcriptions (api/audio.c) */
void gw_route_translations(gw_call *call);   /* POST /v1/audio/translations (api/audio.c) */
void gw_route_catalog(gw_call *call);        /* GET /v1/catalog (api/catalog.c) */
void gw_route_speech(gw_call *call);         /* POST /v1/audio/speech (api/speech.c) */
/* llama-server's own routes (api/llama_server.c) */
void gw_route_rerank(gw_call *call); /* /v1/rerank, /rerank, /v1/reranking */
void gw_route_tokenize(gw_call *call);
void gw_route_detokenize(gw_call *call);
void gw_route_apply_template(gw_call *call);
void gw_route_infill(gw_call *call);
void gw_route_props(gw_call *call);                  /* GET /props (api/props.c) */
void gw_route_slots(gw_call *call);                  /* GET /slots */
void gw_route_slot_action(gw_call *call);            /* POST /slots/ID?action=save|restore|erase */
void gw_route_chat_input_tokens(gw_call *call);      /* /v1/chat/completions/input_tokens */
void gw_route_responses_input_tokens(gw_call *call); /* /v1/responses/input_tokens (api/responses.c) */
void gw_route_transcriptions(gw_call *call);         /* POST /v1/audio/transcriptions (api/audio.c) */
void gw_route_translations(gw_call *call);           /* POST /v1/audio/translations (api/audio.c) */
void gw_route_native_query(gw_call *call);
/* api/lora.c: GET and POST /lora-adapters (admin) */
void gw_route_lora_get(gw_call *call);
void gw_route_lora_set(gw_call *call);
void gw_route_native_chat(gw_call *call);
void gw_route_native_embed(gw_call *call);
void gw_route_health(gw_call *call);
void gw_route_ready(gw_call *call);
void gw_route_metrics(gw_call *call);
void gw_route_backends(gw_call *call);
/* GET /v1/mcp/tools (api/mcp.c): the [[mcp]] servers and their tools. */
void gw_route_mcp_tools(gw_call *call);
void gw_route_responses(gw_call *call);       /* POST /v1/responses */
void gw_route_response_get(gw_call *call);    /* GET /v1/responses/{id}[/input_items] */
void gw_route_response_delete(gw_call *call); /* DELETE /v1/responses/{id} */
void gw_route_messages(gw_call *call);        /* POST /v1/messages */
void gw_route_messages_count(gw_call *call);  /* POST /v1/messages/count_tokens */
void gw_route_ollama_version(gw_call *call);
void gw_route_ollama_tags(gw_call *call);
void gw_route_ollama_show(gw_call *call);
void gw_route_ollama_ps(gw_call *call);
void gw_route_ollama_chat(gw_call *call);
void gw_route_ollama_generate(gw_call *call);
void gw_route_ollama_embed(gw_call *call); /* /api/embed and the legacy /api/embeddings */
void gw_route_ollama_pull(gw_call *call);
void gw_route_ollama_delete(gw_call *call);
/* The web page (web.c): "/" and its embedded files, with security headers of its own; and under
 * /browser/ the browser runtime its "run in this browser" mode loads (bindings/web, make web's files). */
void gw_route_web(gw_call *call);
void gw_route_browser(gw_call *call);

/*
 * ---- transcription.c: OpenAI's audio routes (/v1/audio/transcriptions and /v1/audio/translations) on a
 * target whose kind transcribes: a whisper.cpp model.
 */
/* Whether t's kind transcribes clips itself (a whisper.cpp model); false for the others, whose
 * audio route turns the clip into a chat (a llama model with an audio projector). */
bool gw_transcription_served(const gw_target *t);

/* Answers the form (its fields as JSON, api/audio.c) on the target its "model" names: the
 * fields checked and parsed, the target admitted and loaded, the clip transcribed (translated to
 * English when translate) on a thread of its own, cancelled when the client goes away, and the
 * answer rendered in the response format, or streamed as transcript.text.delta / .done events.
 * Replies always. */
void gw_transcription_run(gw_call *call, const gw_form *form, json_t *fields, bool translate);

/*
 * ---- ollama.c: what Ollama's generation routes and model routes (ollama_models.c) share.
 */
#define GW_OLLAMA_API_NAME "Ollama's API"       /* how errors name the API */
#define GW_OLLAMA_NDJSON "application/x-ndjson" /* its streams: one JSON object a line */
/* Now, as Ollama's times read ("2026-12-07T14:19:12.123456789Z"). */
json_t *gw_ollama_now_json(void);
/* The target a client's model name means ("tiny" and "tiny:latest" alike), or NULL. */
gw_target *gw_ollama_find_target(gw_server *srv, const char *name);
/* The name under which a target is listed: with a tag, as Ollama's names have one. */
json_t *gw_ollama_listed_name(const gw_target *t);
/* The model a body names ("model", or older clients' "name"), or NULL. */
const char *gw_ollama_body_model(json_t *root);
/* Appends j (stolen) as one line of a stream of JSON lines. */
void gw_ollama_append_line(sipp_buf *out, json_t *j);
/* The 403 for a store or residency change by a caller without the admin scope (ollama.c's top). */
void gw_ollama_refuse_non_admin(gw_call *call, const char *what);

/*
 * ---- translate.c: helpers of the routes that translate another API into a chat completion (the
 * Responses, Messages and Ollama routes; see translate.c).
 */
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

#endif
