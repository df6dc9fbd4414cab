/*
 * chunk_eval.c: evaluating fixed chunks of tokens for perplexity, the way llama-perplexity lays out
 * its batches, so that the logits (and the speed) are the ones it gets on the same file.
 *
 * When the batch is at least a chunk, batch / chunk chunks go into one llama_decode as sequences 0,
 * 1, ... of a context that holds them all (n_seq * n_ctx tokens, n_seq sequences); llama.cpp then
 * splits the batch into micro-batches as it likes. When the batch is smaller than a chunk, one chunk
 * takes several decodes through the KV cache and its outputs are gathered here, because each decode
 * overwrites the context's logits. Only positions from `first` on ask for logits: the rest are
 * context, and an output row costs a vocabulary's worth of memory and copying.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/chunk_eval.h"
#include "engine/tokens.h"
#include "model/model.h"
#include "util/util.h"

struct sipp_chunk_eval {
    struct llama_context *ctx;
    llama_batch batch;
    int n_ctx, n_seq, n_batch, n_vocab;
    int first;     /* of the last run */
    float *rows;   /* a chunk's outputs gathered over its decodes; NULL when one decode holds them */
    size_t n_rows; /* capacity of rows */
};

void sipp_chunk_eval_vocab(const sipp_model *m, int32_t *bos, bool *adds_eos) {
    *bos = llama_vocab_get_add_bos(m->vocab) ? llama_vocab_bos(m->vocab) : -1;
    *adds_eos = llama_vocab_get_add_eos(m->vocab);
}

sipp_status sipp_chunk_eval_new(sipp_model *m, int n_ctx, int n_seq, int n_batch, int threads,
                                sipp_chunk_eval **out, char *errbuf) {
    *out = NULL;
    if (n_ctx < 1 || n_seq < 1 || n_batch < 1 || (n_batch < n_ctx && n_seq != 1) ||
        (n_batch >= n_ctx && n_batch != n_seq * n_ctx))
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                         "chunks of %d tokens, %d per decode, do not fit batches of %d tokens", n_ctx, n_seq,
                         n_batch);
    sipp_chunk_eval *ce = calloc(1, sizeof *ce);
    if (!ce) return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory");
    ce->n_ctx = n_ctx;
    ce->n_seq = n_seq;
    ce->n_batch = n_batch < n_seq * n_ctx ? n_batch : n_seq * n_ctx;
    ce->n_vocab = m->info.n_vocab;
    struct llama_context_params cp = sipp_model_context_params(m);
    cp.n_ctx = (uint32_t)(n_seq * n_ctx);
    cp.n_batch = (uint32_t)ce->n_batch;
    cp.n_seq_max = (uint32_t)n_seq;
    cp.n_threads = threads > 0 ? threads : 1;
    cp.n_threads_batch = cp.n_threads;
    ce->ctx = llama_init_from_model(m->lm, cp);
    sipp_model_lora_apply(m, ce->ctx, NULL); /* the model's adapters at their scales */
    if (!ce->ctx) {
        free(ce);
        return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY,
                         "cannot create a context of %d sequences of %d tokens (batch %d)", n_seq, n_ctx,
                         n_batch);
    }
    ce->batch = llama_batch_init(ce->n_batch, 0, 1);
    if (ce->n_batch < n_ctx) {
        ce->n_rows = (size_t)n_ctx;
        ce->rows = malloc(ce->n_rows * (size_t)ce->n_vocab * sizeof *ce->rows);
        if (!ce->rows) {
            sipp_chunk_eval_free(ce);
            return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory for %d rows of logits", n_ctx);
        }
    }
    *out = ce;
    return SIPP_OK;
}

void sipp_chunk_eval_free(sipp_chunk_eval *ce) {
    if (!ce) return;
    llama_batch_free(ce->batch);
    llama_free(ce->ctx);
    free(ce->rows);
    free(ce);
}

sipp_status sipp_chunk_eval_run(sipp_chunk_eval *ce, const int32_t *tokens, int n_chunks, int first,
                                int32_t bos, char *errbuf) {
    if (n_chunks < 1 || n_chunks > ce->n_seq || first < 0 || first >= ce->n_ctx)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "%d chunks from position %d do not fit", n_chunks,
                         first);
    ce->first = first;
    llama_memory_clear(llama_get_memory(ce->ctx), true);
    size_t gathered = 0;
    for (int start = 0; start < ce->n_ctx; start += ce->n_batch) {
        int size = ce->n_ctx - start < ce->n_batch ? ce->n_ctx - start : ce->n_batch;
        int n_outputs = 0;
        ce->batch.n_tokens = 0;
        for (int seq = 0; seq < n_chunks; seq++) {
            const int32_t *chunk = tokens + (size_t)seq * ce->n_ctx;
            for (int k = 0; k < size; k++) {
                int pos = start + k;
                sipp_batch_add(&ce->batch, pos == 0 && bos >= 0 ? bos : chunk[pos], pos, seq, pos >= first);
                n_outputs += pos >= first;
            }
        }
        if (llama_decode(ce->ctx, ce->batch) != 0)
            return sipp_fail(errbuf, SIPP_ERR_INTERNAL, "decoding %d tokens at position %d failed",
                             ce->batch.n_tokens, start);
        if (ce->rows && n_outputs > 0) {
            memcpy(ce->rows + gathered * (size_t)ce->n_vocab, llama_get_logits(ce->ctx),
                   (size_t)n_outputs * (size_t)ce->n_vocab * sizeof *ce->rows);
            gathered += (size_t)n_outputs;
        }
    }
    return SIPP_OK;
}

const float *sipp_chunk_eval_rows(const sipp_chunk_eval *ce, int c) {
    return ce->rows ? ce->rows : llama_get_logits_ith(ce->ctx, c * ce->n_ctx + ce->first);
}

int sipp_chunk_eval_n_vocab(const sipp_chunk_eval *ce) { return ce->n_vocab; }
