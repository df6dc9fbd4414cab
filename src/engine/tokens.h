/*
 * tokens.h: token arrays and llama batches, the helpers every part of the engine uses (tokens.c).
 */
#ifndef SIPP_ENGINE_TOKENS_H
#define SIPP_ENGINE_TOKENS_H

#include "llama.h"
#include <stdbool.h>

/* The length of the common prefix of a[0..na) and b[0..nb). */
int sipp_common_prefix(const llama_token *a, int na, const llama_token *b, int nb);
/* Grows *tokens (capacity *cap) to hold at least n tokens, doubling from 256; false when out of memory. */
bool sipp_tokens_reserve(llama_token **tokens, int *cap, int n);
/* Appends one token of sequence seq at pos to batch b, with or without its logits. */
void sipp_batch_add(llama_batch *b, llama_token t, llama_pos pos, llama_seq_id seq, bool logits);

/* Decodes tokens[from .. from+n) as sequence 0 at their own positions, in one llama_decode; outputs
 * for every token or only the last. Returns llama_decode's code. For the side contexts (embeddings,
 * inspection); the engine's batches carry many sequences and build their own. */
int sipp_decode_range(struct llama_context *ctx, const llama_token *tokens, int from, int n, bool all_logits);

#endif
