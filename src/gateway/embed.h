/*
 * embed.h: embeddings on a local target (embed.c).
 */
#ifndef SIPP_GATEWAY_EMBED_H
#define SIPP_GATEWAY_EMBED_H

#include "gateway/connection.h"
#include "gateway/request_parse.h"
#include "gateway/server.h"

/* Embeds g's inputs on a ready local target and replies. */
void gw_embed(gw_call *call, gw_target *target, gw_gen *g);

#endif
