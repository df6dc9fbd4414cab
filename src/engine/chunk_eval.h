/*
 * chunk_eval.h: the llama.cpp half of perplexity (chunk_eval.c): a context that evaluates fixed
 * chunks of tokens, several at a time as separate sequences, and hands back the logits of each
 * chunk's later positions. What is scored and how lives above, in src/verify/perplexity.c; this
 * header shows no llama.cpp type, so that the verify layer stays off llama.h.
 */
#ifndef SIPP_ENGINE_CHUNK_EVAL_H
#define SIPP_ENGINE_CHUNK_EVAL_H

#include <stdbool.h>
#include <stdint.h>

#include "sipp.h"

typedef struct sipp_chunk_eval sipp_chunk_eval;

/* The vocabulary's BOS token when it adds one to every text (else -1), and whether it appends EOS. */
void sipp_chunk_eval_vocab(const sipp_model *m, int32_t *bos, bool *adds_eos);

/* A context for chunks of n_ctx tokens, n_seq of them per decode (a context of n_seq * n_ctx tokens
 * and n_seq sequences), decoded n_batch tokens at a time (n_batch < n_ctx, or n_seq * n_ctx). */
sipp_status sipp_chunk_eval_new(sipp_model *m, int n_ctx, int n_seq, int n_batch, int threads,
                                sipp_chunk_eval **out, char *errbuf);
void sipp_chunk_eval_free(sipp_chunk_eval *ce);

/* Clears the context and evaluates n_chunks (<= n_seq) chunks that follow each other in tokens, each
 * at positions 0 .. n_ctx-1 of a sequence of its own, with its first token replaced by bos when bos
 * >= 0. Outputs are the logits of positions first .. n_ctx-1 of each chunk, read with
 * sipp_chunk_eval_rows until the next call. */
sipp_status sipp_chunk_eval_run(sipp_chunk_eval *ce, const int32_t *tokens, int n_chunks, int first,
                                int32_t bos, char *errbuf);

/* The logits of chunk c of the last run: n_ctx - first rows of n_vocab floats (borrowed). */
const float *sipp_chunk_eval_rows(const sipp_chunk_eval *ce, int c);
int sipp_chunk_eval_n_vocab(const sipp_chunk_eval *ce);

#endif
