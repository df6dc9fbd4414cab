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
    enum llama_pooling_type want; /* sipp_engine_params.pooling; UNSPECIFIED: the model's */
};

bool sipp_embed_pooling_parse(const char *name, int *out) {
    static const struct {
        const char *name;
        enum llama_pooling_type type;
    } names[] = {{"none", LLAMA_POOLING_TYPE_NONE},
                 {"mean", LLAMA_POOLING_TYPE_MEAN},
                 {"cls", LLAMA_POOLING_TYPE_CLS},
                 {"last", LLAMA_POOLING_TYPE_LAST},
                 {"rank", LLAMA_POOLING_TYPE_RANK}};
    *out = LLAMA_POOLING_TYPE_UNSPECIFIED;
    if (!name || !*name) return true;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i].name) == 0) {
            *out = names[i].type;
            return true;
        }
    return false;
}

sipp_embedder *sipp_embedder_new(int pooling) {
    sipp_embedder *em = calloc(1, sizeof *em);
    if (!em) return NULL;
    pthread_mutex_init(&em->mu, NULL);
    em->want = (enum llama_pooling_type)pooling;
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

/* Creates the context on first use: the pooling asked for, else the model's, or mean when it has
 * none. */
static sipp_status ensure_ctx(sipp_embedder *em, sipp_model *m, int ctx_size, int threads, char *err) {
    if (em->ctx) return SIPP_OK;
    int n_ctx = ctx_size > EMBED_CTX_MAX ? EMBED_CTX_MAX : ctx_size;
    em->ctx = make_ctx(m, n_ctx, threads, em->want);
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

/* Appends tok unless it is LLAMA_TOKEN_NULL. */
static void push_token(llama_token *seq, int *k, llama_token tok) {
    if (tok != LLAMA_TOKEN_NULL) seq[(*k)++] = tok;
}

/* The model's rerank template with {query} and {document} replaced (malloc'ed), or NULL when it has
 * none. */
static char *rerank_prompt(const sipp_model *m, const char *query, const char *doc) {
    const char *tmpl = llama_model_chat_template(m->lm, "rerank");
    if (!tmpl) return NULL;
    sipp_buf b = {0};
    for (const char *p = tmpl; *p;) {
        if (strncmp(p, "{query}", strlen("{query}")) == 0) {
            sipp_buf_append(&b, query, strlen(query));
            p += strlen("{query}");
        } else if (strncmp(p, "{document}", strlen("{document}")) == 0) {
            sipp_buf_append(&b, doc, strlen(doc));
            p += strlen("{document}");
        } else {
            sipp_buf_append(&b, p++, 1);
        }
    }
    return b.data ? b.data : strdup("");
}

/* The tokens of one (query, document) pair, built as llama-server's format_prompt_rerank builds them
 * (sipp.h says how); *seq is malloc'ed. */
static sipp_status rerank_tokens(sipp_model *m, const char *query, const char *doc, llama_token **seq, int *n,
                                 char *err) {
    char *prompt = rerank_prompt(m, query, doc);
    if (prompt) {
        sipp_status st = sipp_model_tokenize_alloc(m, prompt, false, true, seq, n, err);
        free(prompt);
        return st;
    }
    const struct llama_vocab *v = m->vocab;
    llama_token *q, *d;
    int nq, nd;
    sipp_status st = sipp_model_tokenize_alloc(m, query, false, false, &q, &nq, err);
    if (st != SIPP_OK) return st;
    if ((st = sipp_model_tokenize_alloc(m, doc, false, false, &d, &nd, err)) != SIPP_OK) {
        free(q);
        return st;
    }
    llama_token eos = llama_vocab_eos(v) != LLAMA_TOKEN_NULL ? llama_vocab_eos(v) : llama_vocab_sep(v);
    bool add_eos = llama_vocab_get_add_eos(v);
    *seq = malloc((size_t)(nq + nd + 4) * sizeof **seq);
    int k = 0;
    if (*seq) {
        if (llama_vocab_get_add_bos(v)) push_token(*seq, &k, llama_vocab_bos(v));
        memcpy(*seq + k, q, (size_t)nq * sizeof **seq), k += nq;
        if (add_eos) push_token(*seq, &k, eos);
        if (llama_vocab_get_add_sep(v)) push_token(*seq, &k, llama_vocab_sep(v));
        memcpy(*seq + k, d, (size_t)nd * sizeof **seq), k += nd;
        if (add_eos) push_token(*seq, &k, eos);
    } else {
        st = sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    }
    *n = k;
    free(q);
    free(d);
    return st;
}

sipp_status sipp_rerank_run(sipp_embedder *em, sipp_model *m, int ctx_size, int threads, const char *query,
                            const char *const *docs, size_t n_docs, const sipp_embed_options *opt,
                            float **scores, int *n_tokens, char *err) {
    *scores = NULL;
    sipp_embed_options def = sipp_embed_default_options();
    if (!opt) opt = &def;
    double deadline = deadline_of(opt);
    if (!query || !docs || n_docs == 0)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "no query or documents");
    pthread_mutex_lock(&em->mu);
    sipp_status st = ensure_ctx(em, m, ctx_size, threads, err);
    if (st == SIPP_OK && em->pooling != LLAMA_POOLING_TYPE_RANK)
        st = sipp_fail(err, SIPP_ERR_MODEL,
                       "'%s' is not loaded as a reranker (its pooling is not rank): rank with a reranking "
                       "model (one with a rank head, cls.output) loaded with pooling \"rank\"",
                       m->path);
    float *out = st == SIPP_OK ? calloc(n_docs, sizeof *out) : NULL;
    if (st == SIPP_OK && !out) st = sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    int total = 0;
    for (size_t i = 0; st == SIPP_OK && i < n_docs; i++) {
        if ((st = keep_going(opt, deadline, i, n_docs, err)) != SIPP_OK) break;
        llama_token *seq = NULL;
        int k = 0;
        st = rerank_tokens(m, query, docs[i] ? docs[i] : "", &seq, &k, err);
        if (st == SIPP_OK) st = eval_one(em, seq, k, out + i, 1, i, err);
        total += k;
        free(seq);
    }
    pthread_mutex_unlock(&em->mu);
    if (st != SIPP_OK) {
        free(out);
        return st;
    }
    *scores = out;
    if (n_tokens) *n_tokens = total;
    return SIPP_OK;
}
