/*
 * embed.c: embeddings and reranking, in a second llama context of the engine's model.
 *
 * Generation and embedding want different contexts: embeddings need the pooled hidden state of the
 * whole input in one ubatch, and must not evict the generation slots' KV. A second context over the
 * same llama_model shares the weights, so nothing is loaded twice. It is created on first use and
 * runs on the caller's thread under its own lock, so an embedding call never waits behind a long
 * generation, and generation never waits behind it.
 *
 * A call can be stopped between inputs (sipp_embed_options: a timeout and a should_continue
 * callback), since one request may carry thousands of them: the gateway stops a call whose client
 * left or whose request timed out, which frees this context and the admission permit. Each pooled
 * output is checked to be finite before it is copied out: a broken model gives an error naming the
 * input, not NaN rows (which JSON cannot even carry).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "engine/embed.h"
#include "engine/tokens.h"
#include "model/model.h"
#include "util/util.h"

#define EMBED_CTX_MAX 8192

struct sipp_embedder {
    pthread_mutex_t mu;
    struct llama_context *ctx;
    int n_ctx;
    enum llama_pooling_type pooling;
};

sipp_embedder *sipp_embedder_new(void) {
    sipp_embedder *em = calloc(1, sizeof *em);
    if (em) pthread_mutex_init(&em->mu, NULL);
    return em;
}

void sipp_embedder_free(sipp_embedder *em) {
    if (!em) return;
    if (em->ctx) llama_free(em->ctx);
    pthread_mutex_destroy(&em->mu);
    free(em);
}

static struct llama_context *make_ctx(sipp_model *m, int n_ctx, int threads,
                                      enum llama_pooling_type pooling) {
    struct llama_context_params cp = sipp_model_context_params(m);
    cp.n_ctx = (uint32_t)n_ctx;
    cp.n_batch = (uint32_t)n_ctx;
    cp.n_ubatch = (uint32_t)n_ctx; /* pooling needs each input whole in one ubatch */
    cp.n_seq_max = 1;
    cp.n_threads = threads;
    cp.n_threads_batch = threads;
    cp.embeddings = true;
    cp.pooling_type = pooling;
    struct llama_context *ctx = llama_init_from_model(m->lm, cp);
    sipp_model_lora_apply(m, ctx, NULL); /* the model's adapters at their scales */
    return ctx;
}

/* Creates the context on first use: the model's pooling, or mean when it has none. */
static sipp_status ensure_ctx(sipp_embedder *em, sipp_model *m, int ctx_size, int threads, char *err) {
    if (em->ctx) return SIPP_OK;
    int n_ctx = ctx_size > EMBED_CTX_MAX ? EMBED_CTX_MAX : ctx_size;
    em->ctx = make_ctx(m, n_ctx, threads, LLAMA_POOLING_TYPE_UNSPECIFIED);
    if (em->ctx && llama_pooling_type(em->ctx) == LLAMA_POOLING_TYPE_NONE) {
        llama_free(em->ctx);
        em->ctx = make_ctx(m, n_ctx, threads, LLAMA_POOLING_TYPE_MEAN);
    }
    if (!em->ctx)
        return sipp_fail(err, SIPP_ERR_NO_MEMORY, "cannot create the embedding context for '%s'", m->path);
    em->n_ctx = (int)llama_n_ctx(em->ctx);
    em->pooling = llama_pooling_type(em->ctx);
    return SIPP_OK;
}

sipp_embed_options sipp_embed_default_options(void) {
    sipp_embed_options o = {.normalize = true};
    return o;
}

/* Between inputs: SIPP_OK to go on, or why to stop (the caller's callback, or the clock). */
static sipp_status keep_going(const sipp_embed_options *opt, double deadline_ms, size_t done, size_t total,
                              char *err) {
    if (opt->should_continue && !opt->should_continue(opt->user))
        return sipp_fail(err, SIPP_ERR_CANCELLED, "the embedding was cancelled after %zu of %zu inputs", done,
                         total);
    if (deadline_ms > 0 && sipp_now_ms() >= deadline_ms)
        return sipp_fail(err, SIPP_ERR_TIMEOUT, "the embedding timed out after %zu of %zu inputs (%d ms)",
                         done, total, opt->timeout_ms);
    return SIPP_OK;
}

static double deadline_of(const sipp_embed_options *opt) {
    return opt->timeout_ms > 0 ? sipp_now_ms() + opt->timeout_ms : 0;
}

/* Evaluates one token sequence and copies its pooled output (n floats) into row; input is its index,
 * for the message when the output is not finite. */
static sipp_status eval_one(sipp_embedder *em, const llama_token *toks, int n_toks, float *row, int n,
                            size_t input, char *err) {
    if (n_toks > em->n_ctx)
        return sipp_fail(err, SIPP_ERR_CONTEXT_FULL,
                         "an input is %d tokens but the embedding context holds %d; shorten it", n_toks,
                         em->n_ctx);
    llama_memory_clear(llama_get_memory(em->ctx), true);
    int rc = sipp_decode_range(em->ctx, toks, 0, n_toks, true);
    if (rc != 0)
        return sipp_fail(err, SIPP_ERR_INTERNAL, "llama_decode failed embedding an input (code %d)", rc);
    const float *v = llama_get_embeddings_seq(em->ctx, 0);
    if (!v) return sipp_fail(err, SIPP_ERR_INTERNAL, "llama.cpp returned no pooled embedding");
    for (int i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return sipp_fail(
                err, SIPP_ERR_MODEL,
                "the model's output for input %zu is not finite (%s at element %d): its weights or "
                "hyperparameters are broken",
                input, isnan(v[i]) ? "NaN" : "infinity", i);
    memcpy(row, v, (size_t)n * sizeof *row);
    return SIPP_OK;
}

static void l2_normalize(float *v, int n) {
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += (double)v[i] * v[i];
    if (sum <= 0) return;
    float inv = (float)(1.0 / sqrt(sum));
    for (int i = 0; i < n; i++)
        v[i] *= inv;
}

sipp_status sipp_embed_run(sipp_embedder *em, sipp_model *m, int ctx_size, int threads,
                           const char *const *texts, size_t n_texts, const sipp_embed_options *opt,
                           float **out, int *n_embd, int *n_tokens, char *err) {
    *out = NULL;
    sipp_embed_options def = sipp_embed_default_options();
    if (!opt) opt = &def;
    double deadline = deadline_of(opt);
    if (!texts || n_texts == 0) return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "no input to embed");
    pthread_mutex_lock(&em->mu);
    sipp_status st = ensure_ctx(em, m, ctx_size, threads, err);
    if (st == SIPP_OK && em->pooling == LLAMA_POOLING_TYPE_RANK)
        st = sipp_fail(err, SIPP_ERR_MODEL, "'%s' is a reranking model; use rerank, not embed", m->path);
    int n = llama_model_n_embd_out(m->lm);
    float *rows = st == SIPP_OK ? calloc(n_texts * (size_t)n, sizeof *rows) : NULL;
    if (st == SIPP_OK && !rows) st = sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    int total = 0;
    for (size_t i = 0; st == SIPP_OK && i < n_texts; i++) {
        if ((st = keep_going(opt, deadline, i, n_texts, err)) != SIPP_OK) break;
        if (!texts[i] || !*texts[i]) {
            st = sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "input %zu is empty", i);
            break;
        }
        llama_token *toks;
        int n_toks;
        st = sipp_model_tokenize_alloc(m, texts[i], true, false, &toks, &n_toks, err);
        if (st != SIPP_OK) break;
        st = eval_one(em, toks, n_toks, rows + i * (size_t)n, n, i, err);
        free(toks);
        total += n_toks;
        if (st == SIPP_OK && opt->normalize) l2_normalize(rows + i * (size_t)n, n);
    }
    pthread_mutex_unlock(&em->mu);
    if (st != SIPP_OK) {
        free(rows);
        return st;
    }
    *out = rows;
    *n_embd = n;
    if (n_tokens) *n_tokens = total;
    return SIPP_OK;
}

sipp_status sipp_rerank_run(sipp_embedder *em, sipp_model *m, int ctx_size, int threads, const char *query,
                            const char *const *docs, size_t n_docs, const sipp_embed_options *opt,
                            float **scores, char *err) {
    *scores = NULL;
    sipp_embed_options def = sipp_embed_default_options();
    if (!opt) opt = &def;
    double deadline = deadline_of(opt);
    if (!query || !docs || n_docs == 0)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "no query or documents");
    pthread_mutex_lock(&em->mu);
    sipp_status st = ensure_ctx(em, m, ctx_size, threads, err);
    if (st == SIPP_OK && em->pooling != LLAMA_POOLING_TYPE_RANK)
        st = sipp_fail(err, SIPP_ERR_MODEL, "'%s' is not a reranking model (its pooling is not rank)",
                       m->path);
    float *out = st == SIPP_OK ? calloc(n_docs, sizeof *out) : NULL;
    if (st == SIPP_OK && !out) st = sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    /* As llama-server does: [BOS] query [EOS] [SEP] document [EOS], one sequence per document. */
    const struct llama_vocab *v = m->vocab;
    for (size_t i = 0; st == SIPP_OK && i < n_docs; i++) {
        if ((st = keep_going(opt, deadline, i, n_docs, err)) != SIPP_OK) break;
        llama_token *q, *d;
        int nq, nd;
        if ((st = sipp_model_tokenize_alloc(m, query, false, false, &q, &nq, err)) != SIPP_OK) break;
        if ((st = sipp_model_tokenize_alloc(m, docs[i] ? docs[i] : "", false, false, &d, &nd, err)) !=
            SIPP_OK) {
            free(q);
            break;
        }
        llama_token *seq = malloc((size_t)(nq + nd + 4) * sizeof *seq);
        int k = 0;
        if (seq) {
            seq[k++] = llama_vocab_bos(v);
            memcpy(seq + k, q, (size_t)nq * sizeof *seq), k += nq;
            seq[k++] = llama_vocab_eos(v);
            seq[k++] = llama_vocab_sep(v);
            memcpy(seq + k, d, (size_t)nd * sizeof *seq), k += nd;
            seq[k++] = llama_vocab_eos(v);
            st = eval_one(em, seq, k, out + i, 1, i, err);
        } else {
            st = sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
        }
        free(seq);
        free(q);
        free(d);
    }
    pthread_mutex_unlock(&em->mu);
    if (st != SIPP_OK) {
        free(out);
        return st;
    }
    *scores = out;
    return SIPP_OK;
}
