/*
 * tokens.h: a local model's tokenizer and template, as llama-server's routes tell them (tokens.c).
 * Each is a gw_dispatch.local answer: called on a ready local target, it replies.
 */
#ifndef SIPP_GATEWAY_TOKENS_H
#define SIPP_GATEWAY_TOKENS_H

#include "gateway/connection.h"
#include "gateway/request_parse.h"
#include "gateway/server.h"

/* Appends the text of tokens to b as llama-server's tokens_to_str writes it (each token's piece,
 * special tokens written, no leading space removed); false at the first id that is not a token
 * (*bad gets its index) or when out of memory. */
bool gw_tokens_text(sipp_model *m, const int32_t *tokens, size_t n, sipp_buf *b, size_t *bad);

void gw_tokenize(gw_call *call, gw_target *t, gw_gen *g);       /* POST /tokenize */
void gw_detokenize(gw_call *call, gw_target *t, gw_gen *g);     /* POST /detokenize */
void gw_apply_template(gw_call *call, gw_target *t, gw_gen *g); /* POST /apply-template */
/* POST /v1/chat/completions/input_tokens, /v1/responses/input_tokens */
void gw_input_tokens(gw_call *call, gw_target *t, gw_gen *g);

#endif
