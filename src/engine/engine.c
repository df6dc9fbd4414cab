/*
 * engine.c: one thread that owns a llama context and serves requests from any thread.
 *
 * sipp_engine_submit (any thread) checks a request, tokenizes its prompt and queues it; the engine
 * thread (engine_main; for a stepped engine, the caller of sipp_engine_step) waits for work, hands queued
 * requests to the scheduler (scheduler.c), which places them in slots and runs one llama_decode per step, and
 * drains everything at shutdown.
 *
 * Failures stay local. A request that is cancelled, times out, or cannot get KV space ends alone;
 * the other slots keep running. The queue is bounded: a full queue refuses at once.
 */
#ifndef __EMSCRIPTEN__
#include <dlfcn.h>
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "engine/draft.h"
#include "engine/embed.h"
#include "engine/infill.h"
#include "engine/lora.h"
#include "engine/request.h"
#include "engine/sampling.h"
#include "engine/scheduler.h"
#include "engine/slot.h"
#include "engine/state.h"
#include "model/kv_cache.h"
#include "model/media_budget.h"

#define DEFAULT_BATCH 512
#define DEFAULT_CTX_CAP 4096

static void *engine_main(void *arg);

/* A function of the library that holds `known` which ggml's backend registry does not hand out (the
 * CPU backend's proc addresses cover only a few): NULL where there is none, or no such library. */
static void *sibling_symbol(void *known, const char *name) {
#ifdef __EMSCRIPTEN__
    (void)known;
    (void)name;
    return NULL;
#else
    Dl_info info;
    if (!known || !dladdr(known, &info) || !info.dli_fname) return NULL;
    void *h = dlopen(info.dli_fname, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (!h) return NULL;
    void *sym = dlsym(h, name);
    dlclose(h); /* ggml's own reference keeps the library loaded */
    return sym;
#endif
}

static void attach_threadpool(sipp_engine *e, int threads) {
    ggml_backend_reg_t cpu = ggml_backend_reg_by_name("CPU");
    if (!cpu) return;
    struct ggml_threadpool *(*tp_new)(struct ggml_threadpool_params *) =
        (struct ggml_threadpool * (*)(struct ggml_threadpool_params *))
            ggml_backend_reg_get_proc_address(cpu, "ggml_threadpool_new");
    e->threadpool_free =
        (void (*)(struct ggml_threadpool *))ggml_backend_reg_get_proc_address(cpu, "ggml_threadpool_free");
    e->threadpool_pause =
        (void (*)(struct ggml_threadpool *))sibling_symbol((void *)tp_new, "ggml_threadpool_pause");
    if (!tp_new || !e->threadpool_free) return;
    struct ggml_threadpool_params tpp = ggml_threadpool_params_default(threads);
    e->threadpool = tp_new(&tpp);
    if (e->threadpool) llama_attach_threadpool(e->ctx, e->threadpool, e->threadpool);
}

/* The speculative decoding parameters: a known method, draft sizes in range, a known draft cut-off, a
 * memory that can drop the rejected tail of a proposal. Fills in the defaults: a draft model alone
 * means "draft"; *cutoff says whether the engine speculates with the cut-off "auto". */
static sipp_status check_speculative(const sipp_model *m, sipp_engine_params *p, bool *ngram, bool *cutoff,
                                     char *errbuf) {
    bool has_draft = p->draft_model && *p->draft_model;
    const char *spec = p->speculative && *p->speculative ? p->speculative : has_draft ? "draft" : "none";
    *ngram = strcmp(spec, "ngram") == 0;
    bool draft = strcmp(spec, "draft") == 0;
    if (!*ngram && !draft && strcmp(spec, "none") != 0)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                         "speculative '%.32s' is not one of none, ngram, draft", spec);
    if (has_draft && !draft)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                         "draft_model '%.200s' is given but speculative is '%s'; drop one of them",
                         p->draft_model, spec);
    if (draft && !has_draft)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "speculative 'draft' needs a draft_model");
    if (!draft) p->draft_model = NULL;
    if (p->draft_max == 0) p->draft_max = SIPP_DRAFT_MAX_DEFAULT;
    if (p->draft_min == 0) p->draft_min = 1;
    if (p->draft_max < 1 || p->draft_max > SIPP_DRAFT_MAX || p->draft_min < 1 || p->draft_min > p->draft_max)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                         "draft_max %d and draft_min %d must satisfy 1 <= draft_min <= draft_max <= %d",
                         p->draft_max, p->draft_min, SIPP_DRAFT_MAX);
    if (!(p->draft_p_min >= 0 && p->draft_p_min < 1))
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "draft_p_min %g is not in [0, 1)",
                         (double)p->draft_p_min);
    const char *cut = p->draft_cutoff && *p->draft_cutoff ? p->draft_cutoff : "auto";
    if (strcmp(cut, "auto") != 0 && strcmp(cut, "off") != 0)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "draft_cutoff '%.32s' is not one of auto, off",
                         cut);
    p->draft_cutoff = NULL; /* the caller's string need not outlive the call */
    *cutoff = (*ngram || draft) && strcmp(cut, "auto") == 0;
    if ((*ngram || draft) && (llama_model_is_recurrent(m->lm) || llama_model_is_hybrid(m->lm)))
        return sipp_fail(
            errbuf, SIPP_ERR_INVALID_ARGUMENT,
            "model '%s' keeps a recurrent state, which cannot drop a rejected proposal; run it without "
            "speculative decoding",
            m->path);
    return SIPP_OK;
}

static sipp_status engine_fail(sipp_engine *e, sipp_status st, const char *fmt, ...) SIPP_PRINTF(3, 4);
/* Errors of calls on an engine are kept per thread, like errno (util/last_error.h): two threads
 * whose submits fail at the same moment each read their own message. */
static sipp_status engine_fail(sipp_engine *e, sipp_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    sipp_last_error_setv(&e->error, st, fmt, ap);
    va_end(ap);
    return st;
}

const char *sipp_engine_last_error(const sipp_engine *e) { return e ? sipp_last_error_get(&e->error) : ""; }

/* The engine's parameters: the caller's (or the defaults) with every unset field given its default,
 * and the ones a model or llama.cpp cannot take refused. */
static sipp_status resolve_params(const sipp_model *model, const sipp_engine_params *params,
                                  sipp_engine_params *p, bool *spec_ngram, bool *spec_auto, sipp_kv_types *kv,
                                  char *errbuf) {
    sipp_engine_params defaults = sipp_engine_default_params();
    *p = params ? *params : defaults;
    if (p->parallel <= 0) p->parallel = defaults.parallel;
    if (p->max_queued <= 0) p->max_queued = defaults.max_queued;
    if (p->batch_size <= 0) p->batch_size = DEFAULT_BATCH;
    if (p->threads <= 0) p->threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (p->ctx_size < 0)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "ctx_size %d is negative", p->ctx_size);
    if (p->ctx_size == 0)
        p->ctx_size = model->info.n_ctx_train > 0 && model->info.n_ctx_train < DEFAULT_CTX_CAP
                          ? model->info.n_ctx_train
                          : DEFAULT_CTX_CAP;
    sipp_status sst = check_speculative(model, p, spec_ngram, spec_auto, errbuf);
    if (sst != SIPP_OK || (sst = sipp_model_kv_types(model, p, kv, errbuf)) != SIPP_OK) return sst;
    if ((size_t)p->parallel > llama_max_parallel_sequences())
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "parallel %d is above llama.cpp's limit of %zu",
                         p->parallel, llama_max_parallel_sequences());
    return SIPP_OK;
}

/* The llama.cpp context: one sequence per slot in a unified KV cache, and the batch of a step. */
static sipp_status open_context(sipp_engine *e, sipp_kv_types kv, char *errbuf) {
    const sipp_engine_params *p = &e->params;
    struct llama_context_params cp = sipp_model_context_params(e->model);
    cp.n_ctx = (uint32_t)p->ctx_size;
    cp.type_k = kv.k;
    cp.type_v = kv.v;
    cp.n_batch = (uint32_t)p->batch_size;
    cp.n_ubatch = (uint32_t)p->batch_size;
    cp.n_seq_max = (uint32_t)p->parallel;
    cp.n_threads = p->threads;
    cp.n_threads_batch = p->threads;
    cp.kv_unified = true;
    char llama_err[SIPP_ERROR_SIZE];
    sipp_log_capture(llama_err);
    sipp_buffers_capture(&e->buffers);
    e->ctx = llama_init_from_model(e->model->lm, cp);
    sipp_buffers_capture(NULL);
    sipp_log_capture(NULL);
    if (!e->ctx)
        return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "cannot create a context of %d tokens for '%s': %s",
                         p->ctx_size, e->model->path,
                         *llama_err ? llama_err : "llama.cpp gave no reason; try a smaller --ctx-size");
    attach_threadpool(e, p->threads);
    e->mem = llama_get_memory(e->ctx);
    /* llama.cpp rounds the context up (to 256 cells) and caps the batch at the context: the engine
     * keeps to the size the caller asked for and to the batch llama.cpp accepts. */
    e->n_ctx = (int)llama_n_ctx(e->ctx) < p->ctx_size ? (int)llama_n_ctx(e->ctx) : p->ctx_size;
    e->n_batch = (int)llama_n_batch(e->ctx) < p->batch_size ? (int)llama_n_batch(e->ctx) : p->batch_size;
    e->batch = llama_batch_init(e->n_batch, 0, 1);
    return SIPP_OK;
}

/* The per-slot arrays: the slots themselves and the scheduler's scratch (one entry per slot, so that
 * a step allocates nothing). */
static sipp_status alloc_slots(sipp_engine *e, char *errbuf) {
    size_t n = (size_t)e->params.parallel;
    e->slots = calloc(n, sizeof *e->slots);
    e->spec_p = calloc(n, sizeof *e->spec_p);
    e->spec_room = calloc(n, sizeof *e->spec_room);
    e->starting = calloc(n, sizeof *e->starting);
    e->starting_slot = calloc(n, sizeof *e->starting_slot);
    if (!e->slots || !e->spec_p || !e->spec_room || !e->starting || !e->starting_slot)
        return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory");
    for (int i = 0; i < e->params.parallel; i++)
        e->slots[i].id = i;
    e->stats.slots = e->params.parallel;
    return SIPP_OK;
}

/* The embedder, and for an engine that serves embeddings one run of it now: its context is made when
 * the engine is, not on the first request. A model that cannot embed says so on that request. */
static sipp_status open_embedder(sipp_engine *e, char *errbuf) {
    int pooling;
    if (!sipp_embed_pooling_parse(e->params.pooling, &pooling))
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                         "pooling '%s' is not one of none, mean, cls, last, rank (or empty: the model's own)",
                         e->params.pooling);
    e->embedder = sipp_embedder_new(pooling);
    if (!e->embedder) return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory");
    if (!e->params.embeddings) return SIPP_OK;
    float *probe = NULL;
    int n_embd;
    const char *text = "embedding context warm-up";
    sipp_embed_options raw = sipp_embed_default_options();
    raw.normalize = false;
    sipp_status est = sipp_embed_run(e->embedder, e->model, e->params.ctx_size, e->params.threads, &text, 1,
                                     &raw, &probe, &n_embd, NULL, errbuf);
    free(probe);
    return est == SIPP_ERR_MODEL ? SIPP_OK : est;
}

/* Resolve the parameters, then the context, the slots, the draft model, the embedder and the engine
 * thread, in that order; a failure in any frees what was made. */
static sipp_status engine_create(sipp_model *model, const sipp_engine_params *params, bool stepped,
                                 sipp_engine **out, char *errbuf) {
    *out = NULL;
    if (!model) return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "no model given");
    sipp_engine_params p;
    bool spec_ngram = false, spec_auto = false;
    sipp_kv_types kv;
    sipp_status st = resolve_params(model, params, &p, &spec_ngram, &spec_auto, &kv, errbuf);
    if (st != SIPP_OK) return st;

    sipp_engine *e = calloc(1, sizeof *e);
    if (!e) return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory");
    e->model = model;
    e->params = p;
    e->spec_ngram = spec_ngram;
    e->spec_auto = spec_auto;
    pthread_mutex_init(&e->mu, NULL);
    e->schema_limits = sipp_schema_limits_default();
    pthread_cond_init(&e->cv, NULL);
    sipp_last_error_init(&e->error);

    if ((st = open_context(e, kv, errbuf)) != SIPP_OK) goto fail;
    if ((st = sipp_lora_open(e, errbuf)) != SIPP_OK) goto fail;
    if ((st = alloc_slots(e, errbuf)) != SIPP_OK) goto fail;
    if (p.draft_model && (st = sipp_draft_open(e, errbuf)) != SIPP_OK) goto fail;
    if ((st = open_embedder(e, errbuf)) != SIPP_OK) goto fail;
    e->stepped = stepped;
    if (!stepped) {
        e->thread_started = pthread_create(&e->thread, NULL, engine_main, e) == 0;
        if (!e->thread_started) {
            st = sipp_fail(errbuf, SIPP_ERR_INTERNAL, "cannot start the engine thread");
            goto fail;
        }
    }
    *out = e;
    return SIPP_OK;

fail:
    sipp_engine_free(e);
    return st;
}

sipp_status sipp_engine_new(sipp_model *model, const sipp_engine_params *params, sipp_engine **out,
                            char *errbuf) {
    return engine_create(model, params, false, out, errbuf);
}

sipp_status sipp_engine_new_stepped(sipp_model *model, const sipp_engine_params *params, sipp_engine **out,
                                    char *errbuf) {
    return engine_create(model, params, true, out, errbuf);
}

/* ---- submit ------------------------------------------------------------------------------------ */

static sipp_status check_fits(sipp_engine *e, sipp_request *r, char *err) {
    if (r->n_prompt >= e->n_ctx)
        return sipp_fail(err, SIPP_ERR_CONTEXT_FULL,
                         "the prompt is %d tokens but the context holds %d; shorten it or raise --ctx-size",
                         r->n_prompt, e->n_ctx);
    r->stats.prompt_tokens = r->n_prompt;
    return SIPP_OK;
}

/* The stop strings of a request: its own and those its chat format adds. */
static sipp_status add_format_stops(const sipp_request_params *p, sipp_request *r, char *err) {
    const chat_plan *plan = r->chat.plan;
    if (!plan || plan->n_stops == 0) return SIPP_OK;
    size_t n = p->n_stop + plan->n_stops;
    const char **all = calloc(n, sizeof *all);
    if (!all) return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    for (size_t i = 0; i < p->n_stop; i++)
        all[i] = p->stop[i];
    for (size_t i = 0; i < plan->n_stops; i++)
        all[p->n_stop + i] = plan->stops[i];
    sipp_output_free(&r->out);
    bool ok = sipp_output_init(&r->out, all, n);
    free(all);
    return ok ? SIPP_OK : sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
}

void sipp_engine_set_schema_limits(sipp_engine *e, const sipp_schema_limits *limits) {
    if (!e || !limits) return;
    pthread_mutex_lock(&e->mu);
    e->schema_limits = *limits;
    pthread_mutex_unlock(&e->mu);
}

/* The rendered prompt as tokens: with its images and audio as their spans, when the chat has any
 * (model/mmproj.h); their bytes are not needed past here. While they are decoded the request holds
 * their decoded size from the shared budget (media_budget.h): past it, busy, before any decoding. */
static sipp_status tokenize_prompt(sipp_model *m, const char *text, const sipp_schema_limits *limits,
                                   sipp_request *r, char *err) {
    if (r->chat.n_media == 0)
        return sipp_model_tokenize_alloc(m, text, true, true, &r->prompt, &r->n_prompt, err);
    size_t decoded = 0;
    for (size_t i = 0; i < r->chat.n_media; i++)
        decoded += r->chat.media[i].decoded;
    sipp_status st = SIPP_OK;
    size_t cap = sipp_media_budget_cap(limits->media_budget);
    if (limits->media_budget && decoded > cap)
        st = sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                       "the request's media decode to %zu MB, more than the shared budget of %zu MB "
                       "([limits] media_decoded_budget_mb) holds; send fewer or smaller images or clips",
                       decoded >> 20, cap >> 20);
    else if (!sipp_media_budget_take(limits->media_budget, decoded))
        st = sipp_fail(
            err, SIPP_ERR_BUSY,
            "the request's media decode to %zu MB, and other requests hold the shared budget of %zu MB "
            "([limits] media_decoded_budget_mb) now; try again shortly",
            decoded >> 20, cap >> 20);
    else {
        st = sipp_media_tokenize(m->mmproj, text, r->chat.media, r->chat.n_media, &r->prompt, &r->n_prompt,
                                 &r->media, err);
        sipp_media_budget_give(limits->media_budget, decoded);
    }
    sipp_media_bytes_free(r->chat.media, r->chat.n_media);
    r->chat.media = NULL;
    r->chat.n_media = 0;
    for (int i = 0; st == SIPP_OK && i < sipp_media_n_spans(r->media); i++)
        r->stats.media_tokens += sipp_media_span_get(r->media, i)->n;
    return st;
}

/* The prompt of a request as submit makes it: rendered, tokenized (media spans counted), its grammar
 * and stops; whether it fits the context is checked apart (check_fits). */
static sipp_status render_prompt(sipp_engine *e, const sipp_request_params *p, sipp_request *r, char *err) {
    sipp_model *m = e->model;
    pthread_mutex_lock(&e->mu);
    sipp_schema_limits limits = e->schema_limits;
    pthread_mutex_unlock(&e->mu);
    const char *text = p->prompt;
    if (p->tokens) {
        if (p->prompt || p->messages || p->chat_json)
            return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                             "give one of prompt, messages, chat_json or tokens");
        int n_vocab = m->info.n_vocab;
        for (size_t i = 0; i < p->n_tokens; i++)
            if (p->tokens[i] < 0 || p->tokens[i] >= n_vocab)
                return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                                 "token %zu is %d, outside the vocabulary [0, %d)", i, p->tokens[i], n_vocab);
        if (p->n_tokens == 0) return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "the prompt has no tokens");
        if (!(r->prompt = malloc(p->n_tokens * sizeof *r->prompt)))
            return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
        memcpy(r->prompt, p->tokens, p->n_tokens * sizeof *r->prompt);
        r->n_prompt = (int)p->n_tokens;
    } else {
        if ((p->messages != NULL) + (p->chat_json != NULL) + (p->prompt != NULL) > 1)
            return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "give one of prompt, messages or chat_json");
        if (p->messages && p->n_messages == 0)
            return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "messages is empty");
        if (!text && !p->messages && !p->chat_json)
            return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "no prompt and no messages given");
        /* A chat is rendered by its template into a plan (src/chat); a prompt may carry a grammar. */
        sipp_status st = chat_request_prepare(m, p, &limits, &r->chat, err);
        if (st != SIPP_OK) return st;
        if (r->chat.plan) text = r->chat.plan->prompt;
        if (!*text) return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "the prompt is empty");
        if ((st = tokenize_prompt(m, text, &limits, r, err)) != SIPP_OK) return st;
        if (r->n_prompt == 0) return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "the prompt has no tokens");
    }
    if (p->grammar && p->tokens)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "a grammar needs a prompt or a chat");
    sipp_status st = sipp_request_grammar(m, r, err);
    return st == SIPP_OK ? add_format_stops(p, r, err) : st;
}

static sipp_status prepare_prompt(sipp_engine *e, const sipp_request_params *p, sipp_request *r, char *err) {
    sipp_status st = render_prompt(e, p, r, err);
    return st == SIPP_OK ? check_fits(e, r, err) : st;
}

static sipp_status check_sampling(const sipp_sampling *s, int max_tokens, char *err) {
    if (!(s->temperature >= 0)) return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "temperature must be >= 0");
    if (s->top_k < 0) return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "top_k must be >= 0");
    if (!(s->top_p > 0 && s->top_p <= 1))
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "top_p must be in (0, 1]");
    if (!(s->min_p >= 0 && s->min_p <= 1))
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "min_p must be in [0, 1]");
    if (!(s->repeat_penalty > 0))
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "repeat_penalty must be > 0");
    if (!isfinite(s->frequency_penalty) || !isfinite(s->presence_penalty))
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                         "frequency_penalty and presence_penalty must be finite");
    if (max_tokens == 0 || max_tokens < -1)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "max_tokens must be positive (or -1 for no limit)");
    return SIPP_OK;
}

/* Renders p as submit would, without queueing it: its length and (prompt not NULL) its text. */
static sipp_status render_only(sipp_engine *e, const sipp_request_params *p, int *n_prompt, char **prompt) {
    sipp_request_owner owner = {
        .engine = e, .model = e->model, .wake = sipp_engine_wake, .stepped = e->stepped};
    sipp_request *r = sipp_request_alloc(&owner, p);
    if (!r) return engine_fail(e, SIPP_ERR_NO_MEMORY, "out of memory");
    char err[SIPP_ERROR_SIZE];
    sipp_status st = render_prompt(e, p, r, err);
    if (st == SIPP_OK && n_prompt) *n_prompt = r->n_prompt;
    if (st == SIPP_OK && prompt) {
        const char *text = r->chat.plan ? r->chat.plan->prompt : p->prompt ? p->prompt : "";
        if (!(*prompt = strdup(text))) st = sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    }
    r->engine = NULL; /* never queued */
    sipp_request_free(r);
    return st == SIPP_OK ? SIPP_OK : engine_fail(e, st, "%s", err);
}

sipp_status sipp_engine_infill_tokens(sipp_engine *e, const sipp_infill_request *rq, int32_t **tokens,
                                      size_t *n_tokens) {
    if (tokens) *tokens = NULL;
    if (n_tokens) *n_tokens = 0;
    if (!e || !rq || !tokens || !n_tokens) return SIPP_ERR_INVALID_ARGUMENT;
    char err[SIPP_ERROR_SIZE];
    sipp_status st = sipp_infill_build(e->model, e->n_ctx, rq, tokens, n_tokens, err);
    return st == SIPP_OK ? st : engine_fail(e, st, "%s", err);
}

sipp_status sipp_engine_count_prompt(sipp_engine *e, const sipp_request_params *p, int *n_prompt,
                                     int *n_ctx) {
    if (n_prompt) *n_prompt = 0;
    if (n_ctx) *n_ctx = e ? e->n_ctx : 0;
    if (!e || !p || !n_prompt) return SIPP_ERR_INVALID_ARGUMENT;
    return render_only(e, p, n_prompt, NULL);
}

sipp_status sipp_engine_render_prompt(sipp_engine *e, const sipp_request_params *p, char **prompt,
                                      int *n_prompt) {
    if (prompt) *prompt = NULL;
    if (n_prompt) *n_prompt = 0;
    if (!e || !p || !prompt) return SIPP_ERR_INVALID_ARGUMENT;
    return render_only(e, p, n_prompt, prompt);
}

sipp_status sipp_engine_submit(sipp_engine *e, const sipp_request_params *p, sipp_request **out) {
    *out = NULL;
    if (!e || !p) return SIPP_ERR_INVALID_ARGUMENT;
    char err[SIPP_ERROR_SIZE];
    sipp_status st = check_sampling(&p->sampling, p->max_tokens, err);
    if (st == SIPP_OK) st = sipp_request_check_logprobs(p->logprobs, err);
    if (st != SIPP_OK) return engine_fail(e, st, "%s", err);
    sipp_request_owner owner = {
        .engine = e, .model = e->model, .wake = sipp_engine_wake, .stepped = e->stepped};
    sipp_request *r = sipp_request_alloc(&owner, p);
    if (!r) return engine_fail(e, SIPP_ERR_NO_MEMORY, "out of memory");
    if ((st = prepare_prompt(e, p, r, err)) != SIPP_OK ||
        (st = sipp_lora_of_request(e, p, &r->lora_scales, &r->lora_sig, err)) != SIPP_OK) {
        r->engine = NULL; /* never queued: nothing to wait for */
        sipp_request_free(r);
        return engine_fail(e, st, "%s", err);
    }
    sipp_engine_lock(e);
    if (e->stopping)
        st = SIPP_ERR_CLOSED;
    else if (e->n_queued >= e->params.max_queued)
        st = SIPP_ERR_BUSY;
    if (st == SIPP_OK) {
        if (e->queue_tail)
            e->queue_tail->next = r;
        else
            e->queue_head = r;
        e->queue_tail = r;
        e->n_queued++;
        pthread_cond_signal(&e->cv);
    }
    sipp_engine_unlock(e);
    if (st != SIPP_OK) {
        r->engine = NULL;
        sipp_request_free(r);
        return st == SIPP_ERR_BUSY ? engine_fail(e, st, "the queue is full (%d waiting); try again later",
                                                 e->params.max_queued)
                                   : engine_fail(e, st, "the engine is shutting down");
    }
    *out = r;
    return SIPP_OK;
}

/* ---- the thread -------------------------------------------------------------------------------- */

/* One turn of the engine: queued requests into free slots, cancelled ones out, then one step.
 * With block, waits for work first (the engine thread); without, returns at once when there is none
 * (a stepped engine, whose caller runs the turns). Returns false once the engine is stopping. */
/* The KV cells the slots hold, for the stats: each sequence's cells, so a prefix that slots share
 * (scheduler.c) counts once per slot, and at most the context. Engine thread (it owns n_cache). */
static int kv_cells_used(const sipp_engine *e) {
    long used = 0;
    for (int i = 0; i < e->params.parallel; i++)
        used += e->slots[i].n_cache;
    return used < e->n_ctx ? (int)used : e->n_ctx;
}

/* sipp_engine_erase_idle_slots's work, on the engine thread between steps: idle slots give up their
 * cells, their tokens and their pinned keys. */
static void erase_idle(sipp_engine *e) {
    SIPP_ASSERT_ENGINE_LOCKED(e);
    for (int i = 0; i < e->params.parallel; i++) {
        slot *s = &e->slots[i];
        if (s->req) continue;
        if (s->n_cache > 0) llama_memory_seq_rm(e->mem, s->id, -1, -1);
        s->n_cache = 0;
        free(s->key);
        s->key = NULL;
    }
    e->erase_idle = false;
}

static bool engine_turn(sipp_engine *e, bool block) {
    sipp_request *dropped = NULL;
    int n_start = 0;
    sipp_engine_lock(e);
    for (;;) {
        if (e->erase_idle) erase_idle(e);
        e->stats.kv_cells_used = kv_cells_used(e); /* as the last step left them */
        if (e->stopping) break;
        sipp_sched_assign(e, &dropped, e->starting, e->starting_slot, &n_start);
        if (dropped || n_start || sipp_sched_has_active(e) || !block) break;
        /* Idle: the pool's workers sleep rather than spin (state.h); the next graph wakes them. */
        if (e->threadpool && e->threadpool_pause) e->threadpool_pause(e->threadpool);
        e->parked = true; /* the slots may be saved or restored meanwhile (slot_state.c) */
        sipp_engine_wait(e);
        e->parked = false;
    }
    bool stopping = e->stopping;
    e->stats.running = 0;
    for (int i = 0; i < e->params.parallel; i++)
        e->stats.running += e->slots[i].req != NULL;
    e->stats.queued = e->n_queued;
    sipp_engine_unlock(e);

    while (dropped) {
        sipp_request *r = dropped;
        dropped = r->next;
        sipp_sched_cancel(e, NULL, r);
    }
    for (int k = 0; k < n_start; k++) {
        slot *s = &e->slots[e->starting_slot[k]];
        if (sipp_slot_start(e, s, e->starting[k]) != SIPP_OK)
            sipp_slot_finish(e, s, SIPP_FINISH_ERROR, SIPP_ERR_NO_MEMORY,
                             "out of memory starting the request");
    }
    if (stopping) return false;
    sipp_sched_step(e);
    return true;
}

/* Shutting down: everything still running or queued ends as cancelled. */
static void engine_drain(sipp_engine *e) {
    for (int i = 0; i < e->params.parallel; i++)
        if (e->slots[i].req)
            sipp_slot_finish(e, &e->slots[i], SIPP_FINISH_CANCELLED, SIPP_ERR_CLOSED,
                             "the engine was closed");
    sipp_engine_lock(e);
    sipp_request *q = e->queue_head;
    e->queue_head = e->queue_tail = NULL;
    e->n_queued = 0;
    sipp_engine_unlock(e);
    while (q) {
        sipp_request *r = q;
        q = r->next;
        sipp_request_finish(r, SIPP_FINISH_CANCELLED, SIPP_ERR_CLOSED, "the engine was closed");
    }
}

static void *engine_main(void *arg) {
    sipp_engine *e = arg;
    while (engine_turn(e, true)) {
    }
    engine_drain(e);
    return NULL;
}

sipp_status sipp_engine_step(sipp_engine *e, bool *busy) {
    if (busy) *busy = false;
    if (!e) return SIPP_ERR_INVALID_ARGUMENT;
    if (!e->stepped)
        return engine_fail(e, SIPP_ERR_INVALID_ARGUMENT,
                           "sipp_engine_step drives only engines made by sipp_engine_new_stepped; this one "
                           "has its own thread");
    engine_turn(e, false);
    if (busy) {
        sipp_engine_lock(e);
        *busy = sipp_sched_has_active(e) || e->n_queued > 0;
        sipp_engine_unlock(e);
    }
    return SIPP_OK;
}

void sipp_engine_free(sipp_engine *e) {
    if (!e) return;
    if (e->thread_started) {
        sipp_engine_lock(e);
        e->stopping = true;
        pthread_cond_signal(&e->cv);
        sipp_engine_unlock(e);
        pthread_join(e->thread, NULL);
    } else if (e->stepped && e->slots) {
        e->stopping = true;
        engine_drain(e);
    }
    free(e->starting);
    free(e->starting_slot);
    free(e->spec_p);
    free(e->spec_room);
    if (e->slots) {
        for (int i = 0; i < e->params.parallel; i++) {
            free(e->slots[i].cache);
            free(e->slots[i].dcache);
            free(e->slots[i].dprobs);
            free(e->slots[i].key);
        }
        free(e->slots);
    }
    sipp_embedder_free(e->embedder);
    sipp_draft_close(e);
    if (e->ctx) {
        llama_batch_free(e->batch);
        llama_free(e->ctx);
    }
    sipp_lora_close(e);
    if (e->threadpool) e->threadpool_free(e->threadpool);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    sipp_last_error_destroy(&e->error);
    free(e);
}

void sipp_engine_get_stats(sipp_engine *e, sipp_engine_stats *out) {
    sipp_engine_lock(e);
    *out = e->stats;
    out->queued = e->n_queued;
    out->kv_cells = e->n_ctx;
    out->running = 0;
    for (int i = 0; i < e->params.parallel; i++)
        out->running += e->slots[i].req != NULL;
    out->mean_busy_slots =
        e->stats.decode_steps ? (double)e->busy_slot_steps / (double)e->stats.decode_steps : 0;
    sipp_engine_unlock(e);
}

void sipp_engine_erase_idle_slots(sipp_engine *e) {
    if (!e) return;
    sipp_engine_lock(e);
    e->erase_idle = true;
    pthread_cond_signal(&e->cv);
    sipp_engine_unlock(e);
}

sipp_status sipp_engine_embed_with(sipp_engine *e, const char *const *texts, size_t n_texts,
                                   const sipp_embed_options *options, float **out, int *n_embd,
                                   int *n_tokens) {
    char err[SIPP_ERROR_SIZE];
    sipp_status st = sipp_embed_run(e->embedder, e->model, e->params.ctx_size, e->params.threads, texts,
                                    n_texts, options, out, n_embd, n_tokens, err);
    return st == SIPP_OK ? st : engine_fail(e, st, "%s", err);
}

sipp_status sipp_engine_embed(sipp_engine *e, const char *const *texts, size_t n_texts, bool normalize,
                              float **out, int *n_embd, int *n_tokens) {
    sipp_embed_options o = sipp_embed_default_options();
    o.normalize = normalize;
    return sipp_engine_embed_with(e, texts, n_texts, &o, out, n_embd, n_tokens);
}

sipp_status sipp_engine_rerank_with(sipp_engine *e, const char *query, const char *const *docs, size_t n_docs,
                                    const sipp_embed_options *options, float **scores, int *n_tokens) {
    char err[SIPP_ERROR_SIZE];
    sipp_status st = sipp_rerank_run(e->embedder, e->model, e->params.ctx_size, e->params.threads, query,
                                     docs, n_docs, options, scores, n_tokens, err);
    return st == SIPP_OK ? st : engine_fail(e, st, "%s", err);
}

sipp_status sipp_engine_rerank(sipp_engine *e, const char *query, const char *const *docs, size_t n_docs,
                               float **scores) {
    return sipp_engine_rerank_with(e, query, docs, n_docs, NULL, scores, NULL);
}

/* The model's measured memory and this engine's context buffers (backend/buffers.c). */
void sipp_engine_memory(const sipp_engine *engine, sipp_memory *out) {
    memset(out, 0, sizeof *out);
    if (!engine) return;
    *out = engine->model->mem;
    sipp_memory_merge(out, &engine->buffers);
}
