/*
 * tokens.c: token arrays and llama batches, the small helpers the scheduler, the draft, slot state,
 * embeddings and tracing all use. Here, below all of them, so none of those reaches into another
 * for them.
 */
#include "engine/tokens.h"
#include "util/util.h"

#include <stdlib.h>

int sipp_common_prefix(const llama_token *a, int na, const llama_token *b, int nb) {
    int n = 0;
    while (n < na && n < nb && a[n] == b[n])
        n++;
    return n;
}

bool sipp_tokens_reserve(llama_token **tokens, int *cap, int n) {
    if (n <= *cap) return true;
    int grown = *cap ? *cap : 256;
    while (grown < n)
        grown *= 2;
    llama_token *t = realloc(*tokens, (size_t)grown * sizeof *t);
    if (!t) return false;
    *tokens = t;
    *cap = grown;
    return true;
}

void sipp_batch_add(llama_batch *b, llama_token t, llama_pos pos, llama_seq_id seq, bool logits) {
    int i = b->n_tokens++;
    b->token[i] = t;
    b->pos[i] = pos;
    b->n_seq_id[i] = 1;
    b->seq_id[i][0] = seq;
    b->logits[i] = logits;
}

int sipp_decode_range(struct llama_context *ctx, const llama_token *tokens, int from, int n,
                      bool all_logits) {
    llama_batch b = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; i++) {
        b.token[i] = tokens[from + i];
        b.pos[i] = from + i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = all_logits || i == n - 1;
    }
    b.n_tokens = n;
    int rc = llama_decode(ctx, b);
    llama_batch_free(b);
    return rc;
}
