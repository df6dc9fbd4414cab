/*
 * routes.h: the route handlers (routes_*.c, web.c; the Responses, Messages and Ollama routes build
 * on translate.h), one line each, and what a route handler
 * builds on. router.c's table lists them; nothing below the routes includes this header.
 *
 * To add a route: write its handler in a routes_*.c file, declare it here, add one line to the
 * table in router.c, and document it in docs/gateway.md.
 */
#ifndef SIPP_GATEWAY_ROUTES_H
#define SIPP_GATEWAY_ROUTES_H

#include "gateway/admission.h"
#include "gateway/auth.h"
#include "gateway/connection.h"
#include "gateway/dispatch.h"
#include "gateway/embed.h"
#include "gateway/generate.h"
#include "gateway/kinds/kind.h"
#include "gateway/metrics.h"
#include "gateway/request_parse.h"
#include "gateway/residency.h"
#include "gateway/sse.h"
#include "gateway/targets.h"
#include "gateway/upstream.h"

void gw_route_models(gw_call *call);
void gw_route_model(gw_call *call, const char *id);
/* POST /v1/models/{name}/load and /unload (routes_residency.c); name is name[0..name_len). */
void gw_route_model_residency(gw_call *call, const char *name, size_t name_len, const char *action);
/* GET /v1/models/{name}/file (routes_model_file.c): the target's GGUF, with Range, when [web]
 * serve_model_files is on; gw_model_file_path tells whether the part after /v1/models/ asks for it,
 * and gw_model_file_json is the browser_file entry of /v1/models (NULL: not served). */
void gw_route_model_file(gw_call *call, const char *name, size_t name_len);
bool gw_model_file_path(const char *rest);
json_t *gw_model_file_json(gw_call *call, const gw_target *t);
void gw_route_chat_completions(gw_call *call);
void gw_route_completions(gw_call *call);
void gw_route_embeddings(gw_call *call);
void gw_route_transcriptions(gw_call *call); /* POST /v1/audio/transcriptions (routes_audio.c) */
void gw_route_translations(gw_call *call);   /* POST /v1/audio/translations (routes_audio.c) */
void gw_route_catalog(gw_call *call);        /* GET /v1/catalog (routes_catalog.c) */
void gw_route_speech(gw_call *call);         /* POST /v1/audio/speech (routes_speech.c) */
/* llama-server's own routes (routes_llama.c) */
void gw_route_rerank(gw_call *call); /* /v1/rerank, /rerank, /v1/reranking */
void gw_route_tokenize(gw_call *call);
void gw_route_detokenize(gw_call *call);
void gw_route_apply_template(gw_call *call);
void gw_route_infill(gw_call *call);
void gw_route_props(gw_call *call);                  /* GET /props (routes_props.c) */
void gw_route_slots(gw_call *call);                  /* GET /slots */
void gw_route_slot_action(gw_call *call);            /* POST /slots/ID?action=save|restore|erase */
void gw_route_chat_input_tokens(gw_call *call);      /* /v1/chat/completions/input_tokens */
void gw_route_responses_input_tokens(gw_call *call); /* /v1/responses/input_tokens (routes_responses.c) */
void gw_route_transcriptions(gw_call *call);         /* POST /v1/audio/transcriptions (routes_audio.c) */
void gw_route_translations(gw_call *call);           /* POST /v1/audio/translations (routes_audio.c) */
void gw_route_native_query(gw_call *call);
/* routes_lora.c: GET and POST /lora-adapters (admin) */
void gw_route_lora_get(gw_call *call);
void gw_route_lora_set(gw_call *call);
void gw_route_native_chat(gw_call *call);
void gw_route_native_embed(gw_call *call);
void gw_route_health(gw_call *call);
void gw_route_ready(gw_call *call);
void gw_route_metrics(gw_call *call);
void gw_route_backends(gw_call *call);
/* GET /v1/mcp/tools (routes_mcp.c): the [[mcp]] servers and their tools. */
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

#endif
