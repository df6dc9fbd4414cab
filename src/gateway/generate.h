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

/* Counts the tokens of g's chat as a generation on t would see them (template, tools, thinking
 * switch: it runs the prompt and one token, warming the slot for the request that usually follows)
 * and replies {"input_tokens": N}; a prompt past the context is counted all the same, with
 * "context_window" and "exceeds_context_window". Errors name fields through renames. */
void gw_count_tokens(gw_call *call, gw_target *t, gw_gen *g, const gw_rename *renames);

#endif
