/*
 * embed.h: embeddings and reranking on a local target (embed.c).
 */
#ifndef SIPP_GATEWAY_EMBED_H
#define SIPP_GATEWAY_EMBED_H

#include "gateway/connection.h"
#include "gateway/request_parse.h"
#include "gateway/server.h"

/* Embeds g's inputs on a ready local target and replies. */
void gw_embed(gw_call *call, gw_target *target, gw_gen *g);

/* Ranks g's documents (inputs) for g's query on a ready local target loaded as a reranker, and
 * replies in Jina's and Cohere's shape: results [{index, relevance_score, document?}], the most
 * relevant first, top_n of them, and usage. */
void gw_rerank(gw_call *call, gw_target *target, gw_gen *g);

#endif
