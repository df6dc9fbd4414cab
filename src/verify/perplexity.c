/*
 * perplexity.c: sipp_model_perplexity, llama-perplexity's default mode reproduced step by step, so
 * that `sipp perplexity` and llama.cpp's tool give the same number on the same file (the quality gate
 * between backends and quantizations is built on that number).
 *
 * The steps, as tools/perplexity/perplexity.cpp takes them at the pinned commit: tokenize the whole
 * text once with the vocabulary's BOS; refuse a text under 2 * n_ctx tokens; cut it into
 * tokens / n_ctx chunks (or fewer, --chunks); evaluate each chunk in a cleared context with its first
 * token replaced by BOS when the vocabulary adds one, batch / n_ctx chunks per decode; score only the
 * second half of each chunk (the logits at positions n_ctx/2 .. n_ctx-2 against the tokens that
 * follow them), so that no scored token has less than half a chunk of context. The log-softmax is
 * computed as llama.cpp does (float maximum and differences, a double sum of expf), so the two tools'
 * sums differ only by the order of additions. The "+/-" is PPL times the standard error of the mean
 * NLL, from the running sums of NLL and NLL squared.
 *
 * The llama.cpp half (the context, the batches, the logits) is src/engine/chunk_eval.c; this file
 * never sees a llama.cpp type. Rows are scored on `threads` threads, each summing a fixed share in
 * order, so a run is deterministic for a given thread count.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/chunk_eval.h"
#include "util/util.h"

#define PPL_DEFAULT_CTX 512    /* llama-perplexity's default -c */
#define PPL_DEFAULT_BATCH 2048 /* llama.cpp's default -b */
#define PPL_MIN_CTX 8          /* below this the second half holds too few tokens to score */
#define PPL_MAX_SCORE_THREADS 64

sipp_perplexity_params sipp_perplexity_default_params(void) {
    return (sipp_perplexity_params){
        .ctx_size = PPL_DEFAULT_CTX, .batch_size = PPL_DEFAULT_BATCH, .max_chunks = -1};
}

/* -log softmax(logits)[tok], in llama-perplexity's arithmetic. */
static double token_nll(const float *logits, int n_vocab, int tok) {
    float max = logits[0];
    for (int i = 1; i < n_vocab; i++)
        if (logits[i] > max) max = logits[i];
    double sum = 0.0;
    for (int i = 0; i < n_vocab; i++)
        sum += expf(logits[i] - max);
    return -((double)(logits[tok] - max) - log(sum));
}

/* One scoring thread's share of a chunk's rows: [from, to). */
typedef struct score_share {
    const float *rows;
    const int32_t *next; /* the token each row predicts */
    int n_vocab, from, to;
    double nll, nll2;
} score_share;

static void *score_rows(void *arg) {
    score_share *s = arg;
    s->nll = s->nll2 = 0.0;
    for (int i = s->from; i < s->to; i++) {
        double v = token_nll(s->rows + (size_t)i * (size_t)s->n_vocab, s->n_vocab, s->next[i]);
        s->nll += v;
        s->nll2 += v * v;
    }
    return NULL;
}

/* Adds the NLL of n rows (row i predicts next[i]) to *nll and its square to *nll2. */
static void score_chunk(const float *rows, const int32_t *next, int n, int n_vocab, int threads, double *nll,
                        double *nll2) {
    score_share shares[PPL_MAX_SCORE_THREADS];
    pthread_t tids[PPL_MAX_SCORE_THREADS];
    bool started[PPL_MAX_SCORE_THREADS] = {false};
    int k = threads < 1 ? 1 : threads > PPL_MAX_SCORE_THREADS ? PPL_MAX_SCORE_THREADS : threads;
    if (k > n) k = n;
    for (int t = 0; t < k; t++) {
        shares[t] = (score_share){rows, next, n_vocab, n * t / k, n * (t + 1) / k, 0.0, 0.0};
        started[t] = t > 0 && pthread_create(&tids[t], NULL, score_rows, &shares[t]) == 0;
    }
    for (int t = 0; t < k; t++) {
        if (started[t])
            pthread_join(tids[t], NULL);
        else
            score_rows(&shares[t]); /* the calling thread's share, or a thread that did not start */
    }
    for (int t = 0; t < k; t++) {
        *nll += shares[t].nll;
        *nll2 += shares[t].nll2;
    }
}

static sipp_status check_params(const sipp_perplexity_params *p, char *errbuf) {
    if (p->ctx_size < PPL_MIN_CTX)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "ctx_size %d is too small (at least %d)",
                         p->ctx_size, PPL_MIN_CTX);
    if (p->batch_size < 1)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "batch_size %d must be positive", p->batch_size);
    if (p->max_chunks == 0 || p->max_chunks < -1)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "max_chunks %d must be positive, or -1 for all",
                         p->max_chunks);
    if (p->threads < 0)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "threads %d must be 0 (all cores) or positive",
                         p->threads);
    return SIPP_OK;
}

/* The whole text's tokens with BOS, as llama-perplexity's common_tokenize(ctx, text, true). */
static sipp_status tokenize_text(sipp_model *m, const char *text, size_t len, int32_t **out, size_t *n_out,
                                 char *errbuf) {
    size_t cap = len + 8, need = 0; /* a token per byte at most, and the specials */
    int32_t *toks = malloc(cap * sizeof *toks);
    if (!toks) return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory for the tokens of %zu bytes", len);
    sipp_status st = sipp_tokenize(m, text, len, true, false, toks, cap, &need);
    if (st == SIPP_ERR_INVALID_ARGUMENT && need > cap) {
        int32_t *grown = realloc(toks, need * sizeof *toks);
        st = grown ? sipp_tokenize(m, text, len, true, false, grown, need, &need) : SIPP_ERR_NO_MEMORY;
        if (grown) toks = grown;
    }
    if (st != SIPP_OK) {
        free(toks);
        return sipp_fail(errbuf, st, "tokenizing the text failed: %s", sipp_model_last_error(m));
    }
    *out = toks;
    *n_out = need;
    return SIPP_OK;
}

sipp_status sipp_model_perplexity(sipp_model *model, const char *text, size_t len,
                                  const sipp_perplexity_params *params, sipp_perplexity_result *out,
                                  char *errbuf) {
    sipp_perplexity_params p = params ? *params : sipp_perplexity_default_params();
    if (out) memset(out, 0, sizeof *out);
    if (!model || !out || (!text && len))
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "no model, text or result given");
    sipp_status st = check_params(&p, errbuf);
    if (st != SIPP_OK) return st;
    int32_t bos;
    bool adds_eos;
    sipp_chunk_eval_vocab(model, &bos, &adds_eos);
    if (adds_eos)
        return sipp_fail(errbuf, SIPP_ERR_MODEL,
                         "the model's vocabulary appends EOS to every text; perplexity by llama-perplexity's "
                         "method needs one that does not");
    if (len == 0) return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "the text is empty");

    int32_t *tokens = NULL;
    size_t n_tokens = 0;
    if ((st = tokenize_text(model, text, len, &tokens, &n_tokens, errbuf)) != SIPP_OK) return st;
    out->n_text_tokens = (int64_t)n_tokens;
    const int n_ctx = p.ctx_size;
    if (n_tokens < 2 * (size_t)n_ctx) {
        free(tokens);
        char fits[96];
        if (n_tokens / 2 >= PPL_MIN_CTX)
            snprintf(fits, sizeof fits, "a context of %zu would fit", n_tokens / 2);
        else
            snprintf(fits, sizeof fits, "no context fits: give a text of at least %d tokens",
                     2 * PPL_MIN_CTX);
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                         "the text is %zu tokens; perplexity with a context of %d needs at least %d (2 x ctx "
                         "size); %s",
                         n_tokens, n_ctx, 2 * n_ctx, fits);
    }
    int n_chunk = (int)(n_tokens / (size_t)n_ctx);
    if (p.max_chunks > 0 && p.max_chunks < n_chunk) n_chunk = p.max_chunks;
    /* llama-perplexity's layout: a batch of at least a chunk holds batch / n_ctx whole chunks. */
    const int n_seq = p.batch_size >= n_ctx ? p.batch_size / n_ctx : 1;
    const int n_batch = p.batch_size >= n_ctx ? n_seq * n_ctx : p.batch_size;
    const int first = n_ctx / 2, n_scored = n_ctx - first - 1;
    int threads = p.threads > 0 ? p.threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (threads < 1) threads = 1;
    out->n_seq = n_seq;

    sipp_chunk_eval *ce = NULL;
    if ((st = sipp_chunk_eval_new(model, n_ctx, n_seq, n_batch, threads, &ce, errbuf)) != SIPP_OK) {
        free(tokens);
        return st;
    }
    const int n_vocab = sipp_chunk_eval_n_vocab(ce);
    double nll = 0.0, nll2 = 0.0, t0 = sipp_now_ms();
    int64_t count = 0;
    for (int i = 0; i < n_chunk && st == SIPP_OK; i += n_seq) {
        const int n_batch_chunks = n_chunk - i < n_seq ? n_chunk - i : n_seq;
        const int32_t *chunk0 = tokens + (size_t)i * (size_t)n_ctx;
        if ((st = sipp_chunk_eval_run(ce, chunk0, n_batch_chunks, first, bos, errbuf)) != SIPP_OK) break;
        for (int c = 0; c < n_batch_chunks && st == SIPP_OK; c++) {
            const int32_t *next = chunk0 + (size_t)c * (size_t)n_ctx + first + 1;
            score_chunk(sipp_chunk_eval_rows(ce, c), next, n_scored, n_vocab, threads, &nll, &nll2);
            count += n_scored;
            out->n_chunks = i + c + 1;
            out->n_scored = count;
            out->ppl = exp(nll / (double)count);
            if (p.on_chunk && !p.on_chunk(out->n_chunks, n_chunk, out->ppl, p.user))
                st = sipp_fail(errbuf, SIPP_ERR_CANCELLED, "stopped after chunk %d of %d", out->n_chunks,
                               n_chunk);
        }
    }
    out->seconds = (sipp_now_ms() - t0) / 1000.0;
    sipp_chunk_eval_free(ce);
    free(tokens);
    if (out->seconds > 0) out->tokens_per_second = (double)out->n_chunks * n_ctx / out->seconds;
    if (count > 1) {
        double mean = nll / (double)count, var = nll2 / (double)count - mean * mean;
        out->ppl_error = var > 0 ? sqrt(var / (double)(count - 1)) * out->ppl : 0.0;
    }
    return st;
}
