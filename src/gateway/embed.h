/*
 * embed.h: embeddings on a local target (embed.c).
 */
#ifndef SIPP_GATEWAY_EMBED_H
#define SIPP_GATEWAY_EMBED_H

#include "gateway/connection.h"
#include "gateway/request_parse.h"
#include "gateway/server.h"

/* An embedding route's own reply (Ollama's /api/embed and /api/embeddings): out holds g's inputs'
 * vectors, n_embd floats each; t0_ms is when embedding began. Replies, also with an error. */
typedef struct gw_embed_format {
    void (*render)(gw_call *call, gw_target *t, gw_gen *g, const float *out, int n_embd, int n_tokens,
                   double t0_ms);
} gw_embed_format;

/* Embeds g's inputs on a ready local target and replies in fmt's shape (NULL: by g's API). */
void gw_embed(gw_call *call, gw_target *target, gw_gen *g, const gw_embed_format *fmt);

#endif
