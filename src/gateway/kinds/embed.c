/*
 * embed.c: embeddings on a local target, for POST /v1/embeddings (OpenAI's shape) and
 * POST /v1/embed (sipp's), and reranking, for POST /v1/rerank (Jina's and Cohere's shape, as
 * llama-server's /v1/rerank answers: its score is the model's rank head, unnormalized).
 *
 * sipp_engine_embed runs on the calling thread, in the engine's second (embedding) context, so an
 * embedding request neither waits behind generations nor slows them beyond sharing the cores.
 * OpenAI's embeddings have unit length, so /v1/embeddings always normalizes; /v1/embed lets the
 * caller choose with "normalize" (default true). encoding_format "base64" (what OpenAI's clients
 * ask for by default) packs a vector as little-endian float32, base64-encoded.
 *
 * The call stops between inputs once the client has gone or request_timeout_seconds has passed
 * (504), and a model whose output is not finite is an error naming the cause (500), not a 200 with
 * empty vectors.
 */
#include <stdlib.h>
#include <string.h>

#include "gateway/kinds/kinds.h"
#include "gateway/metrics.h"
#include "util/base64.h"

#define FLOAT_BYTES 4

static json_t *vector_base64(const float *v, int n) {
    size_t bytes = (size_t)n * FLOAT_BYTES;
    unsigned char *raw = malloc(bytes ? bytes : 1);
    char *text = NULL;
    if (raw) {
        for (int i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, &v[i], sizeof u);
            for (int k = 0; k < FLOAT_BYTES; k++)
                raw[(size_t)i * FLOAT_BYTES + (size_t)k] = (unsigned char)(u >> (8 * k));
        }
        text = sipp_base64_encode(raw, bytes);
    }
    json_t *out = text ? json_string(text) : NULL;
    free(raw);
    free(text);
    return out;
}

static json_t *vector(const float *v, int n) {
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++)
        json_array_append_new(a, json_real(v[i]));
    return a;
}

static bool client_still_there(void *call) { return !gw_call_abandoned(call); }

/* Stopped between inputs when the client leaves or the request times out (one request may carry
 * thousands of inputs); returning releases the admission permit. */
static sipp_embed_options call_options(gw_call *call, bool normalize) {
    sipp_embed_options opt = sipp_embed_default_options();
    opt.normalize = normalize;
    opt.timeout_ms = gw_call_ms_left(call);
    opt.should_continue = client_still_there;
    opt.user = call;
    return opt;
}

/* The reply to a failed embed or rerank: a model that cannot do it is the request's fault (400). */
static void reply_failure(gw_call *call, gw_target *t, sipp_status st) {
    gw_error_kind kind = st == SIPP_ERR_MODEL ? GW_E_INVALID_FIELD : gw_error_from_status(st);
    gw_reply_error(call, kind, "model '%s': %s", t->cfg->name, sipp_engine_last_error(t->engine));
}

void gw_embed(gw_call *call, gw_target *t, gw_gen *g, const gw_embed_format *fmt) {
    float *out = NULL;
    int n_embd = 0, n_tokens = 0;
    sipp_embed_options opt = call_options(call, g->normalize);
    double t0 = sipp_now_ms();
    sipp_status st =
        sipp_engine_embed_with(t->engine, g->inputs, g->n_inputs, &opt, &out, &n_embd, &n_tokens);
    if (st != SIPP_OK) {
        reply_failure(call, t, st);
        return;
    }
    gw_metrics_tokens(call->srv->metrics, t->index, n_tokens, 0, 0, -1);
    if (fmt) {
        fmt->render(call, t, g, out, n_embd, n_tokens, t0);
        sipp_free(out);
        return;
    }
    json_t *rows = json_array();
    for (size_t i = 0; i < g->n_inputs; i++) {
        const float *row = out + i * (size_t)n_embd;
        json_t *v = g->base64 ? vector_base64(row, n_embd) : vector(row, n_embd);
        if (g->api == GW_API_EMBEDDINGS)
            json_array_append_new(rows, json_pack("{s:s, s:I, s:o}", "object", "embedding", "index",
                                                  (json_int_t)i, "embedding", v));
        else
            json_array_append_new(rows, v);
    }
    sipp_free(out);
    if (g->api == GW_API_EMBEDDINGS)
        gw_reply_json(call, 200,
                      json_pack("{s:s, s:o, s:s, s:{s:i, s:i}}", "object", "list", "data", rows, "model",
                                t->cfg->name, "usage", "prompt_tokens", n_tokens, "total_tokens", n_tokens));
    else
        gw_reply_json(call, 200,
                      json_pack("{s:s, s:i, s:o, s:{s:i}}", "model", t->cfg->name, "n_embd", n_embd,
                                "embeddings", rows, "usage", "prompt_tokens", n_tokens));
}

/* A result before it is rendered; sorted by score, the higher first (the earlier document first
 * among equals). */
typedef struct rank {
    int index;
    float score;
} rank;

static int by_score(const void *a, const void *b) {
    const rank *x = a, *y = b;
    return x->score > y->score ? -1 : x->score < y->score ? 1 : x->index - y->index;
}

/* The document of result i as the request gave it, a string as {"text": ...}. */
static json_t *document_of(gw_gen *g, size_t i) {
    json_t *e = json_array_get(json_object_get(g->root, "documents"), i);
    return json_is_object(e) ? json_incref(e) : json_pack("{s:s}", "text", g->inputs[i]);
}

static json_t *rank_results(gw_gen *g, const float *scores) {
    rank *order = malloc(g->n_inputs * sizeof *order);
    json_t *rows = json_array();
    if (!order) return rows;
    for (size_t i = 0; i < g->n_inputs; i++)
        order[i] = (rank){(int)i, scores[i]};
    qsort(order, g->n_inputs, sizeof *order, by_score);
    for (int k = 0; k < g->top_n && (size_t)k < g->n_inputs; k++) {
        json_t *r =
            json_pack("{s:i, s:f}", "index", order[k].index, "relevance_score", (double)order[k].score);
        if (g->return_documents) json_object_set_new(r, "document", document_of(g, (size_t)order[k].index));
        json_array_append_new(rows, r);
    }
    free(order);
    return rows;
}

void gw_rerank(gw_call *call, gw_target *t, gw_gen *g) {
    float *scores = NULL;
    int n_tokens = 0;
    sipp_embed_options opt = call_options(call, false);
    sipp_status st =
        sipp_engine_rerank_with(t->engine, g->query, g->inputs, g->n_inputs, &opt, &scores, &n_tokens);
    if (st != SIPP_OK) {
        reply_failure(call, t, st);
        return;
    }
    json_t *rows = rank_results(g, scores);
    sipp_free(scores);
    gw_metrics_tokens(call->srv->metrics, t->index, n_tokens, 0, 0, -1);
    gw_reply_json(call, 200,
                  json_pack("{s:s, s:s, s:o, s:{s:i, s:i}}", "object", "list", "model", t->cfg->name,
                            "results", rows, "usage", "prompt_tokens", n_tokens, "total_tokens", n_tokens));
}
