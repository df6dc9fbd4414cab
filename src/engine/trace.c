/*
 * trace.c: looking inside a loaded model for `sipp verify` and `sipp ops`.
 *
 * Teacher-forced logits evaluate fixed tokens and return the logits of every position, either as one
 * batched prefill or one token at a time through the KV cache: the two must agree, and backends must
 * agree with each other, within a tolerance. The graph trace walks the real compute graph of a
 * prefill and of one decode step through the scheduler's evaluation callback, and records for each
 * node its op, the device whose buffer holds its result (where it ran) and whether the chosen device
 * supports it. A change of device between consecutive nodes is a boundary: a copy between devices,
 * paid every step when it sits in the decode graph.
 *
 * A chat with images or audio is evaluated the way a request's prompt is (the chat rendered by its
 * template, its media decoded and checked, each item a span the projector encodes), but whole and in a
 * fresh context, so that the logits after the media can be compared between backends.
 */
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "chat/chat_request.h"
#include "engine/tokens.h"
#include "model/kv_cache.h"
#include "model/mmproj.h"
#include "model/model.h"
#include "util/util.h"

#define TRACE_PROMPT_TOKENS 8
#define TRACE_CTX 256
#define MAX_TRACE_DEVICES 8

/* A context of one sequence; kv NULL keeps llama.cpp's f16 cache. */
static struct llama_context *scratch_ctx(sipp_model *m, int n_ctx, int n_batch, int threads,
                                         ggml_backend_sched_eval_callback cb, void *cb_user,
                                         const sipp_kv_types *kv) {
    struct llama_context_params cp = sipp_model_context_params(m);
    if (kv) {
        cp.type_k = kv->k;
        cp.type_v = kv->v;
    }
    cp.n_ctx = (uint32_t)n_ctx;
    cp.n_batch = (uint32_t)n_batch;
    cp.n_ubatch = (uint32_t)n_batch;
    cp.n_seq_max = 1;
    cp.n_threads = threads > 0 ? threads : 1;
    cp.n_threads_batch = cp.n_threads;
    cp.cb_eval = cb;
    cp.cb_eval_user_data = cb_user;
    struct llama_context *ctx = llama_init_from_model(m->lm, cp);
    sipp_model_lora_apply(m, ctx, NULL); /* the model's adapters at their scales */
    return ctx;
}

/* Teacher-forced logits with the KV cache at kv's types (NULL: f16). */
static sipp_status eval_logits(sipp_model *m, const int32_t *tokens, size_t n_tokens, bool incremental,
                               int threads, const sipp_kv_types *kv, float **out, int *n_vocab_out,
                               char *errbuf) {
    *out = NULL;
    if (!m || !tokens || n_tokens == 0 || n_tokens > INT32_MAX / 2)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "no tokens to evaluate");
    int n = (int)n_tokens, n_vocab = m->info.n_vocab;
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= n_vocab)
            return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "token %d is %d, outside the vocabulary", i,
                             tokens[i]);
    float *logits = malloc((size_t)n * (size_t)n_vocab * sizeof *logits);
    if (!logits) return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory for %d x %d logits", n, n_vocab);
    struct llama_context *ctx =
        scratch_ctx(m, n + TRACE_PROMPT_TOKENS, incremental ? 1 : n, threads, NULL, NULL, kv);
    if (!ctx) {
        free(logits);
        return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "cannot create a context to evaluate %d tokens", n);
    }
    sipp_status st = SIPP_OK;
    if (incremental) {
        for (int i = 0; i < n && st == SIPP_OK; i++) {
            if (sipp_decode_range(ctx, tokens, i, 1, true) != 0)
                st = sipp_fail(errbuf, SIPP_ERR_INTERNAL, "decode failed at token %d", i);
            else
                memcpy(logits + (size_t)i * n_vocab, llama_get_logits_ith(ctx, -1),
                       (size_t)n_vocab * sizeof *logits);
        }
    } else if (sipp_decode_range(ctx, tokens, 0, n, true) != 0) {
        st = sipp_fail(errbuf, SIPP_ERR_INTERNAL, "decode of %d tokens failed", n);
    } else {
        for (int i = 0; i < n; i++)
            memcpy(logits + (size_t)i * n_vocab, llama_get_logits_ith(ctx, i),
                   (size_t)n_vocab * sizeof *logits);
    }
    llama_free(ctx);
    if (st != SIPP_OK) {
        free(logits);
        return st;
    }
    *out = logits;
    *n_vocab_out = n_vocab;
    return SIPP_OK;
}

sipp_status sipp_model_eval_logits(sipp_model *m, const int32_t *tokens, size_t n_tokens, bool incremental,
                                   int threads, float **out, int *n_vocab_out, char *errbuf) {
    return eval_logits(m, tokens, n_tokens, incremental, threads, NULL, out, n_vocab_out, errbuf);
}

sipp_status sipp_model_eval_logits_kv(sipp_model *m, const int32_t *tokens, size_t n_tokens, int threads,
                                      const char *cache_type, const char **cache_type_v, float **out,
                                      int *n_vocab_out, char *errbuf) {
    *out = NULL;
    if (!m) return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "no model given");
    sipp_engine_params p = sipp_engine_default_params();
    p.cache_type_k = cache_type;
    p.cache_type_v = m->flash_attn == LLAMA_FLASH_ATTN_TYPE_DISABLED ? NULL : cache_type;
    sipp_kv_types kv;
    sipp_status st = sipp_model_kv_types(m, &p, &kv, errbuf);
    if (cache_type_v) *cache_type_v = p.cache_type_v;
    return st != SIPP_OK ? st
                         : eval_logits(m, tokens, n_tokens, false, threads, &kv, out, n_vocab_out, errbuf);
}

/* The chat of p rendered and tokenized as a request's prompt: *tokens with the media's spans (*mp). */
static sipp_status media_prompt(sipp_model *m, const sipp_request_params *p, llama_token **tokens,
                                int *n_tokens, sipp_media_prompt **mp, char *errbuf) {
    sipp_schema_limits limits = sipp_schema_limits_default();
    chat_request chat;
    sipp_status st = chat_request_prepare(m, p, &limits, &chat, errbuf);
    if (st == SIPP_OK && chat.n_media == 0)
        st = sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "the chat has no image or audio part");
    if (st == SIPP_OK)
        st = sipp_media_tokenize(m->mmproj, chat.plan->prompt, chat.media, chat.n_media, tokens, n_tokens, mp,
                                 errbuf);
    chat_request_clear(&chat);
    return st;
}

/* Evaluates the prompt in ctx: text in batches, each span through the projector; the text after the
 * last span with the logits of every position, copied to out->logits. */
static sipp_status eval_media_prompt(sipp_model *m, struct llama_context *ctx, const llama_token *tokens,
                                     int n, const sipp_media_prompt *mp, sipp_chat_logits *out,
                                     char *errbuf) {
    const sipp_media_span *last = sipp_media_span_get(mp, sipp_media_n_spans(mp) - 1);
    const int tail = last->start + last->n, n_vocab = m->info.n_vocab;
    if (tail >= n)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                         "the chat's prompt ends with a media item: no text follows it");
    for (int pos = 0; pos < n;) {
        int span = sipp_media_span_at(mp, pos);
        if (span >= 0) {
            double ms = 0;
            sipp_status st = sipp_media_eval(m->mmproj, ctx, mp, span, 0, n, &ms, errbuf);
            if (st != SIPP_OK) return st;
            out->n_media += sipp_media_span_get(mp, span)->n;
            pos += sipp_media_span_get(mp, span)->n;
            continue;
        }
        int next = sipp_media_next_start(mp, pos);
        if (next > n) next = n;
        if (sipp_decode_range(ctx, tokens, pos, next - pos, pos >= tail) != 0)
            return sipp_fail(errbuf, SIPP_ERR_INTERNAL, "decode of prompt positions %d..%d failed", pos,
                             next - 1);
        pos = next;
    }
    out->n_rows = n - tail;
    if (!(out->logits = malloc((size_t)out->n_rows * (size_t)n_vocab * sizeof *out->logits)))
        return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory for %d x %d logits", out->n_rows,
                         n_vocab);
    for (int i = 0; i < out->n_rows; i++)
        memcpy(out->logits + (size_t)i * n_vocab, llama_get_logits_ith(ctx, i),
               (size_t)n_vocab * sizeof *out->logits);
    out->n_vocab = n_vocab;
    return SIPP_OK;
}

sipp_status sipp_model_eval_chat_logits(sipp_model *m, const char *chat_json, int threads,
                                        sipp_chat_logits *out, char *errbuf) {
    if (out) memset(out, 0, sizeof *out);
    if (!m || !chat_json || !out)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "no model, chat or result given");
    sipp_request_params p = sipp_request_default_params();
    p.chat_json = chat_json;
    llama_token *tokens = NULL;
    int n = 0;
    sipp_media_prompt *mp = NULL;
    sipp_status st = media_prompt(m, &p, &tokens, &n, &mp, errbuf);
    if (st != SIPP_OK) return st;
    out->n_prompt = n;
    sipp_strlcpy(out->projector_device, sipp_mmproj_device(m->mmproj), sizeof out->projector_device);
    struct llama_context *ctx = scratch_ctx(m, n + TRACE_PROMPT_TOKENS, n, threads, NULL, NULL, NULL);
    if (!ctx)
        st = sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "cannot create a context to evaluate %d positions", n);
    else
        st = eval_media_prompt(m, ctx, tokens, n, mp, out, errbuf);
    if (ctx) llama_free(ctx);
    sipp_media_prompt_free(mp);
    free(tokens);
    if (st != SIPP_OK) {
        free(out->logits);
        out->logits = NULL;
    }
    return st;
}

typedef struct trace {
    sipp_graph_report *report;
    ggml_backend_dev_t chosen;
    ggml_backend_dev_t devs[MAX_TRACE_DEVICES];
    int n_devs;
    bool decode_phase;
    const char *last_device;
} trace;

/* The device a node ran on: the device whose own buffer type holds its result; host buffers are the
 * CPU's (a GPU backend may hand the CPU pinned host memory, which does not make it the GPU's work). */
static const char *node_device(const trace *tr, const struct ggml_tensor *t) {
    ggml_backend_buffer_t buf = t->view_src ? t->view_src->buffer : t->buffer;
    if (!buf) return "none";
    ggml_backend_buffer_type_t buft = ggml_backend_buffer_get_type(buf);
    for (int i = 0; i < tr->n_devs; i++)
        if (ggml_backend_dev_buffer_type(tr->devs[i]) == buft) return ggml_backend_dev_name(tr->devs[i]);
    return "CPU";
}

static sipp_op_stat *op_slot(sipp_graph_report *r, const char *op) {
    for (int i = 0; i < r->n_ops; i++)
        if (strcmp(r->ops[i].op, op) == 0) return &r->ops[i];
    if (r->n_ops == SIPP_MAX_OPS) return NULL;
    sipp_op_stat *s = &r->ops[r->n_ops++];
    memset(s, 0, sizeof *s);
    sipp_strlcpy(s->op, op, sizeof s->op);
    return s;
}

static bool trace_cb(struct ggml_tensor *t, bool ask, void *user) {
    trace *tr = user;
    if (!ask) return true;
    sipp_graph_report *r = tr->report;
    const char *dev = node_device(tr, t);
    if (tr->last_device && strcmp(tr->last_device, dev) != 0) {
        if (tr->decode_phase)
            r->boundaries_decode++;
        else
            r->boundaries_prefill++;
    }
    tr->last_device = dev;
    if (!tr->decode_phase) return false; /* ops are counted once, from the decode step's graph */
    r->n_nodes++;
    sipp_op_stat *s = op_slot(r, ggml_op_desc(t));
    if (!s) return false;
    s->count++;
    if (!tr->chosen || ggml_backend_dev_supports_op(tr->chosen, t)) s->supported++;
    if (strcmp(dev, r->device) == 0) s->on_device++;
    size_t used = strlen(s->where);
    if (!strstr(s->where, dev) && used + strlen(dev) + 2 < sizeof s->where)
        snprintf(s->where + used, sizeof s->where - used, "%s%s", used ? "," : "", dev);
    return false; /* observe only: no need for the node's data */
}

sipp_status sipp_model_trace_graph(sipp_model *m, int threads, sipp_graph_report *out, char *errbuf) {
    memset(out, 0, sizeof *out);
    trace tr = {.report = out};
    for (size_t i = 0; i < ggml_backend_dev_count() && tr.n_devs < MAX_TRACE_DEVICES; i++)
        tr.devs[tr.n_devs++] = ggml_backend_dev_get(i);
    /* The chosen device: the model's GPU device, or the CPU. */
    const char *want = m->cpu_only ? "CPU" : m->decision.devices;
    for (int i = 0; i < tr.n_devs; i++)
        if (strncmp(want, ggml_backend_dev_name(tr.devs[i]), strlen(ggml_backend_dev_name(tr.devs[i]))) == 0)
            tr.chosen = tr.devs[i];
    sipp_strlcpy(out->device, tr.chosen ? ggml_backend_dev_name(tr.chosen) : "CPU", sizeof out->device);
    sipp_strlcpy(out->backend, m->decision.backend, sizeof out->backend);

    struct llama_context *ctx = scratch_ctx(m, TRACE_CTX, TRACE_PROMPT_TOKENS, threads, trace_cb, &tr, NULL);
    if (!ctx) return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "cannot create a context to trace the graph");
    int32_t toks[TRACE_PROMPT_TOKENS + 1];
    llama_token bos = llama_vocab_bos(m->vocab);
    for (int i = 0; i <= TRACE_PROMPT_TOKENS; i++)
        toks[i] = bos >= 0 ? bos : 0;
    sipp_status st = SIPP_OK;
    if (sipp_decode_range(ctx, toks, 0, TRACE_PROMPT_TOKENS, false) != 0) {
        st = sipp_fail(errbuf, SIPP_ERR_INTERNAL, "the traced prefill failed");
    } else {
        tr.decode_phase = true;
        tr.last_device = NULL;
        if (sipp_decode_range(ctx, toks, TRACE_PROMPT_TOKENS, 1, false) != 0)
            st = sipp_fail(errbuf, SIPP_ERR_INTERNAL, "the traced decode step failed");
    }
    llama_free(ctx);
    return st;
}
