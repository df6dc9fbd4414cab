/*
 * llama_server.c: the routes llama-server has that no other API names, in its shapes, so that a
 * client written for llama-server finds them here: /v1/rerank (with /rerank and /v1/reranking),
 * /tokenize, /detokenize, /apply-template, /infill and /v1/chat/completions/input_tokens (Responses' own
 * input_tokens is in api/responses.c, which translates its body).
 *
 * Each goes through the one dispatcher (dispatch.c) as /v1/embeddings does: decoded with its field
 * table (request_parse.c), its target resolved with the caller's scope and admitted, then answered
 * by the target's kind: a llama target ranks in its embedding context (embed.c) or answers from its
 * tokenizer and template (tokens.c) or fills in the middle (infill.c); a remote one is forwarded a rerank at
 * its base_url's /rerank, and refuses the others, which read a model's own files.
 */
#include "gateway/api/api.h"
#include "gateway/fleet/fleet.h"
#include "gateway/kinds/kinds.h"

void gw_route_rerank(gw_call *call) { gw_dispatch_call(call, GW_API_RERANK, NULL); }

/* A route answered on the local model by local. */
static void run_local(gw_call *call, gw_api api, void (*local)(gw_call *, gw_target *, gw_gen *),
                      const char *name) {
    gw_dispatch_run(call, NULL, &(gw_dispatch){.api = api, .local = local, .route_name = name});
}

void gw_route_tokenize(gw_call *call) { run_local(call, GW_API_TOKENIZE, gw_tokenize, "/tokenize"); }

void gw_route_detokenize(gw_call *call) { run_local(call, GW_API_DETOKENIZE, gw_detokenize, "/detokenize"); }

void gw_route_apply_template(gw_call *call) {
    run_local(call, GW_API_CHAT, gw_apply_template, "/apply-template");
}

void gw_route_infill(gw_call *call) { run_local(call, GW_API_INFILL, gw_infill, "/infill"); }

void gw_route_chat_input_tokens(gw_call *call) {
    run_local(call, GW_API_CHAT, gw_input_tokens, "/v1/chat/completions/input_tokens");
}
