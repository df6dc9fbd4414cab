/*
 * routes_llama.c: the routes llama-server has that no other API names, in its shapes, so that a
 * client written for llama-server finds them here: /v1/rerank (with /rerank and /v1/reranking).
 *
 * Each goes through the one dispatcher (dispatch.c) as /v1/embeddings does: decoded with its field
 * table (request_parse.c), its target resolved with the caller's scope and admitted, then answered
 * by the target's kind (a llama target ranks in its embedding context; a remote one is forwarded the
 * body at its base_url's /rerank).
 */
#include "gateway/dispatch.h"
#include "gateway/routes.h"

void gw_route_rerank(gw_call *call) { gw_dispatch_call(call, GW_API_RERANK, NULL); }
