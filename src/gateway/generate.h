/*
 * generate.h: a generation on a local target, rendered by a route's gw_format (generate.c).
 */
#ifndef SIPP_GATEWAY_GENERATE_H
#define SIPP_GATEWAY_GENERATE_H

#include "gateway/connection.h"
#include "gateway/format.h"
#include "gateway/request_parse.h"
#include "gateway/server.h"

/* Runs g on a ready local target and replies: a stream when g->stream, else one JSON body. Takes
 * over g's contents. */
void gw_generate(gw_call *call, gw_target *target, gw_gen *g, const gw_format *fmt);

#endif
