/*
 * tokens.h: a local model's tokenizer and template, as llama-server's routes tell them (tokens.c).
 * Each is a gw_dispatch.local answer: called on a ready local target, it replies.
 */
#ifndef SIPP_GATEWAY_TOKENS_H
#define SIPP_GATEWAY_TOKENS_H

#include "gateway/connection.h"
#include "gateway/request_parse.h"
#include "gateway/server.h"

void gw_tokenize(gw_call *call, gw_target *t, gw_gen *g);       /* POST /tokenize */
void gw_detokenize(gw_call *call, gw_target *t, gw_gen *g);     /* POST /detokenize */
void gw_apply_template(gw_call *call, gw_target *t, gw_gen *g); /* POST /apply-template */
/* POST /v1/chat/completions/input_tokens, /v1/responses/input_tokens */
void gw_input_tokens(gw_call *call, gw_target *t, gw_gen *g);

#endif
