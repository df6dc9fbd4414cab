/*
 * engine.c: one thread that owns a llama context and serves requests from any thread.
 *
 * Continuous batching. The context holds `parallel` sequences (slots) in one unified KV cache. Every
 * step is a single llama_decode whose batch carries one token for each slot that is generating and,
 * in what is left of the token budget, chunks of the prompts of slots that are still reading theirs.
 * Decoding goes first because a generating slot's next token is the latency users see; prefill
 * fills the rest of the step, in chunks whose size the policy sets (small chunks keep the token
 * pace steady, large ones finish prompts sooner).
 *
 * Prefix reuse. A slot keeps its KV cells when its request ends, along with the tokens they hold.
 * A new request goes to the idle slot whose tokens share the longest prefix with its prompt, and
 * only the rest is evaluated. When another slot, busy or idle, holds a longer prefix, its cells are
 * shared into the new request's sequence (the cache is unified: sharing copies no data). A
 * context_key pins a conversation to one slot, so its next turn finds its history there; two
 * requests with one key never run at once (the second waits in the queue).
 *
 * Failures stay local. A request that is cancelled, times out, or cannot get KV space ends alone;
 * the other slots keep running. The queue is bounded: a full queue refuses at once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "engine/engine_internal.h"

#define DEFAULT_PARALLEL 4
#define DEFAULT_BATCH 512
#define DEFAULT_MAX_QUEUED 64
#define DEFAULT_CTX_CAP 4096
#define PIECE_MAX 256

typedef struct slot {
    int id;                     /* the llama sequence id */
    sipp_request *req;          /* NULL when idle */
    llama_token *cache;         /* the tokens whose KV this sequence holds, in order */
    int n_cache;
    int cap_cache;
    int n_prompt_done;          /* prompt tokens in the KV so far */
    bool generating;            /* prompt done: next_token is to be fed */
    llama_token next_token;
    int i_logits;               /* index of this slot's output in the current batch, or -1 */
    int n_fed;                  /* tokens this slot put in the current batch */
    struct llama_sampler *smpl;
    char *key;                  /* the context_key pinned here, kept after the request ends */
    double last_used;
} slot;

struct sipp_engine {
    sipp_model *model;
    struct llama_context *ctx;
    llama_memory_t mem;
    sipp_engine_params params;
    int n_ctx;
    int n_batch;
    llama_batch batch;

    pthread_t thread;
    bool thread_started;
    bool stepped;               /* no thread: the caller runs steps with sipp_engine_step */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stopping;
    sipp_request *queue_head, *queue_tail;
    int n_queued;
    slot *slots;
    sipp_request **starting; /* the requests one turn moves into slots, and their slots */
    int *starting_slot;
    sipp_engine_stats stats;
    uint64_t busy_slot_steps;

    sipp_embedder *embedder;

    /* A persistent CPU thread pool, as llama-bench and llama-server attach: without one, ggml starts
     * and joins its worker threads for every graph, that is for every generated token. */
    struct ggml_threadpool *threadpool;
    void (*threadpool_free)(struct ggml_threadpool *);

    pthread_mutex_t err_lock;
    char last_error[SIPP_ERROR_SIZE];
};

static void *engine_main(void *arg);

static void attach_threadpool(sipp_engine *e, int threads) {
    ggml_backend_reg_t cpu = ggml_backend_reg_by_name("CPU");
    if (!cpu) return;
    struct ggml_threadpool *(*tp_new)(struct ggml_threadpool_params *) =
        (struct ggml_threadpool *(*)(struct ggml_threadpool_params *))ggml_backend_reg_get_proc_address(cpu, "ggml_threadpool_new");
    e->threadpool_free =
        (void (*)(struct ggml_threadpool *))ggml_backend_reg_get_proc_address(cpu, "ggml_threadpool_free");
    if (!tp_new || !e->threadpool_free) return;
    struct ggml_threadpool_params tpp = ggml_threadpool_params_default(threads);
    e->threadpool = tp_new(&tpp);
    if (e->threadpool) llama_attach_threadpool(e->ctx, e->threadpool, e->threadpool);
}

sipp_engine_params sipp_engine_default_params(void) {
    sipp_engine_params p = {.parallel = DEFAULT_PARALLEL, .max_queued = DEFAULT_MAX_QUEUED};
    return p;
}

static sipp_status engine_fail(sipp_engine *e, sipp_status st, const char *fmt, ...) SIPP_PRINTF(3, 4);
/* Errors of calls on an engine are kept per thread, like errno: two threads whose submits fail at
 * the same moment each read their own message. The engine's copy serves readers on other threads. */
static __thread const sipp_engine *tl_error_engine;
static __thread char tl_error[SIPP_ERROR_SIZE];

static sipp_status engine_fail(sipp_engine *e, sipp_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tl_error, sizeof tl_error, fmt, ap);
    va_end(ap);
    tl_error_engine = e;
    pthread_mutex_lock(&e->err_lock);
    sipp_strlcpy(e->last_error, tl_error, sizeof e->last_error);
    pthread_mutex_unlock(&e->err_lock);
    return st;
}

const char *sipp_engine_last_error(const sipp_engine *e) {
    if (!e) return "";
    return tl_error_engine == e ? tl_error : e->last_error;
}

static sipp_status engine_create(sipp_model *model, const sipp_engine_params *params, bool stepped, sipp_engine **out,
                                 char *errbuf) {
    *out = NULL;
    sipp_engine_params p = params ? *params : sipp_engine_default_params();
    if (!model) return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "no model given");
    if (p.parallel <= 0) p.parallel = DEFAULT_PARALLEL;
    if (p.max_queued <= 0) p.max_queued = DEFAULT_MAX_QUEUED;
    if (p.batch_size <= 0) p.batch_size = DEFAULT_BATCH;
    if (p.threads <= 0) p.threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (p.ctx_size < 0) return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "ctx_size %d is negative", p.ctx_size);
    if (p.ctx_size == 0)
        p.ctx_size = model->info.n_ctx_train > 0 && model->info.n_ctx_train < DEFAULT_CTX_CAP ? model->info.n_ctx_train
                                                                                            : DEFAULT_CTX_CAP;
    if ((size_t)p.parallel > llama_max_parallel_sequences())
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "parallel %d is above llama.cpp's limit of %zu",
                         p.parallel, llama_max_parallel_sequences());

    sipp_engine *e = calloc(1, sizeof *e);
    if (!e) return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory");
    e->model = model;
    e->params = p;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    pthread_mutex_init(&e->err_lock, NULL);

    struct llama_context_params cp = sipp_model_context_params(model);
    cp.n_ctx = (uint32_t)p.ctx_size;
    cp.n_batch = (uint32_t)p.batch_size;
    cp.n_ubatch = (uint32_t)p.batch_size;
    cp.n_seq_max = (uint32_t)p.parallel;
    cp.n_threads = p.threads;
    cp.n_threads_batch = p.threads;
    cp.kv_unified = true;
    char llama_err[SIPP_ERROR_SIZE];
    sipp_log_capture(llama_err);
    e->ctx = llama_init_from_model(model->lm, cp);
    sipp_log_capture(NULL);
    if (!e->ctx) {
        sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "cannot create a context of %d tokens for '%s': %s", p.ctx_size,
                  model->path, *llama_err ? llama_err : "llama.cpp gave no reason; try a smaller --ctx-size");
        sipp_engine_free(e);
        return SIPP_ERR_NO_MEMORY;
    }
    attach_threadpool(e, p.threads);
    e->mem = llama_get_memory(e->ctx);
    /* llama.cpp rounds the context up (to 256 cells) and caps the batch at the context: the engine
     * keeps to the size the caller asked for and to the batch llama.cpp accepts. */
    e->n_ctx = (int)llama_n_ctx(e->ctx) < p.ctx_size ? (int)llama_n_ctx(e->ctx) : p.ctx_size;
    e->n_batch = (int)llama_n_batch(e->ctx) < p.batch_size ? (int)llama_n_batch(e->ctx) : p.batch_size;
    e->batch = llama_batch_init(e->n_batch, 0, 1);
    e->slots = calloc((size_t)p.parallel, sizeof *e->slots);
    if (!e->slots) {
        sipp_engine_free(e);
        return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory");
    }
    for (int i = 0; i < p.parallel; i++) e->slots[i].id = i;
    e->embedder = sipp_embedder_new();
    if (!e->embedder) {
        sipp_engine_free(e);
        return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory");
    }
    if (p.embeddings) {
        float *probe = NULL;
        int n_embd;
        const char *text = "embedding context warm-up";
        sipp_status est = sipp_embed_run(e->embedder, model, p.ctx_size, p.threads, &text, 1, false, &probe, &n_embd,
                                         NULL, errbuf);
        free(probe);
        if (est != SIPP_OK && est != SIPP_ERR_MODEL) {
            sipp_engine_free(e);
            return est;
        }
    }
    e->stats.slots = p.parallel;
    e->starting = calloc((size_t)p.parallel, sizeof *e->starting);
    e->starting_slot = calloc((size_t)p.parallel, sizeof *e->starting_slot);
    if (!e->starting || !e->starting_slot) {
        sipp_engine_free(e);
        return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory");
    }

    e->stepped = stepped;
    if (!stepped) {
        e->thread_started = pthread_create(&e->thread, NULL, engine_main, e) == 0;
        if (!e->thread_started) {
            sipp_engine_free(e);
            return sipp_fail(errbuf, SIPP_ERR_INTERNAL, "cannot start the engine thread");
        }
    }
    *out = e;
    return SIPP_OK;
}

sipp_status sipp_engine_new(sipp_model *model, const sipp_engine_params *params, sipp_engine **out, char *errbuf) {
    return engine_create(model, params, false, out, errbuf);
}

sipp_status sipp_engine_new_stepped(sipp_model *model, const sipp_engine_params *params, sipp_engine **out,
                                    char *errbuf) {
    return engine_create(model, params, true, out, errbuf);
}

void sipp_engine_wake(sipp_engine *e) {
    pthread_mutex_lock(&e->mu);
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
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

static sipp_status prepare_prompt(sipp_engine *e, const sipp_request_params *p, sipp_request *r, char *err) {
    sipp_model *m = e->model;
    char *rendered = NULL;
    const char *text = p->prompt;
    if (p->tokens) {
        if (p->prompt || p->messages)
            return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "give one of prompt, messages or tokens");
        int n_vocab = m->info.n_vocab;
        for (size_t i = 0; i < p->n_tokens; i++)
            if (p->tokens[i] < 0 || p->tokens[i] >= n_vocab)
                return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "token %zu is %d, outside the vocabulary [0, %d)", i,
                                 p->tokens[i], n_vocab);
        if (p->n_tokens == 0) return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "the prompt has no tokens");
        if (!(r->prompt = malloc(p->n_tokens * sizeof *r->prompt)))
            return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
        memcpy(r->prompt, p->tokens, p->n_tokens * sizeof *r->prompt);
        r->n_prompt = (int)p->n_tokens;
        return check_fits(e, r, err);
    }
    if (p->messages) {
        if (p->prompt) return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "give either a prompt or messages, not both");
        if (p->n_messages == 0) return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "messages is empty");
        sipp_status st = sipp_chat_render(m, p->chat_template, p->messages, p->n_messages, true, &rendered);
        if (st != SIPP_OK) return sipp_fail(err, st, "%s", sipp_model_last_error(m));
        text = rendered;
    }
    if (!text) return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "no prompt and no messages given");
    if (!*text) return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "the prompt is empty");
    sipp_status st = sipp_model_tokenize_alloc(m, text, true, true, &r->prompt, &r->n_prompt, err);
    free(rendered);
    if (st != SIPP_OK) return st;
    if (r->n_prompt == 0) return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "the prompt has no tokens");
    return check_fits(e, r, err);
}

static sipp_status check_sampling(const sipp_sampling *s, int max_tokens, char *err) {
    if (!(s->temperature >= 0)) return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "temperature must be >= 0");
    if (s->top_k < 0) return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "top_k must be >= 0");
    if (!(s->top_p > 0 && s->top_p <= 1)) return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "top_p must be in (0, 1]");
    if (!(s->min_p >= 0 && s->min_p <= 1)) return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "min_p must be in [0, 1]");
    if (!(s->repeat_penalty > 0)) return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "repeat_penalty must be > 0");
    if (max_tokens == 0 || max_tokens < -1)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "max_tokens must be positive (or -1 for no limit)");
    return SIPP_OK;
}

sipp_status sipp_engine_submit(sipp_engine *e, const sipp_request_params *p, sipp_request **out) {
    *out = NULL;
    if (!e || !p) return SIPP_ERR_INVALID_ARGUMENT;
    char err[SIPP_ERROR_SIZE];
    sipp_status st = check_sampling(&p->sampling, p->max_tokens, err);
    if (st != SIPP_OK) return engine_fail(e, st, "%s", err);
    sipp_request *r = sipp_request_alloc(e, p);
    if (!r) return engine_fail(e, SIPP_ERR_NO_MEMORY, "out of memory");
    if ((st = prepare_prompt(e, p, r, err)) != SIPP_OK) {
        r->engine = NULL; /* never queued: nothing to wait for */
        sipp_request_free(r);
        return engine_fail(e, st, "%s", err);
    }
    pthread_mutex_lock(&e->mu);
    if (e->stopping) st = SIPP_ERR_CLOSED;
    else if (e->n_queued >= e->params.max_queued) st = SIPP_ERR_BUSY;
    if (st == SIPP_OK) {
        if (e->queue_tail) e->queue_tail->next = r;
        else e->queue_head = r;
        e->queue_tail = r;
        e->n_queued++;
        pthread_cond_signal(&e->cv);
    }
    pthread_mutex_unlock(&e->mu);
    if (st != SIPP_OK) {
        r->engine = NULL;
        sipp_request_free(r);
        return st == SIPP_ERR_BUSY
                   ? engine_fail(e, st, "the queue is full (%d waiting); try again later", e->params.max_queued)
                   : engine_fail(e, st, "the engine is shutting down");
    }
    *out = r;
    return SIPP_OK;
}

/* ---- slots ------------------------------------------------------------------------------------- */

static int common_prefix(const llama_token *a, int na, const llama_token *b, int nb) {
    int n = 0;
    while (n < na && n < nb && a[n] == b[n]) n++;
    return n;
}

static bool cache_reserve(slot *s, int n) {
    if (n <= s->cap_cache) return true;
    int cap = s->cap_cache ? s->cap_cache : 256;
    while (cap < n) cap *= 2;
    llama_token *c = realloc(s->cache, (size_t)cap * sizeof *c);
    if (!c) return false;
    s->cache = c;
    s->cap_cache = cap;
    return true;
}

/* Which idle slot a request should take: the one pinned to its key, else the one sharing the longest
 * prefix with its prompt, preferring unpinned slots, then the least recently used. -1 when none is
 * free, or when its key's slot is busy (it must wait for its own conversation). */
static int pick_slot(sipp_engine *e, const sipp_request *r) {
    if (r->context_key) {
        for (int i = 0; i < e->params.parallel; i++) {
            slot *s = &e->slots[i];
            if (s->key && strcmp(s->key, r->context_key) == 0) return s->req ? -1 : i;
        }
    }
    int best = -1, best_lcp = -1;
    bool best_pinned = true;
    for (int i = 0; i < e->params.parallel; i++) {
        slot *s = &e->slots[i];
        if (s->req) continue;
        int lcp = common_prefix(s->cache, s->n_cache, r->prompt, r->n_prompt);
        bool pinned = s->key != NULL;
        bool better = best < 0 || (best_pinned && !pinned) ||
                      (pinned == best_pinned &&
                       (lcp > best_lcp || (lcp == best_lcp && s->last_used < e->slots[best].last_used)));
        if (better) {
            best = i;
            best_lcp = lcp;
            best_pinned = pinned;
        }
    }
    return best;
}

/* Slot assignment (s->req) changes only under e->mu, so that stats readers see a consistent view. */
static void slot_release(sipp_engine *e, slot *s, const sipp_request *r) {
    if (s->smpl) llama_sampler_free(s->smpl);
    s->smpl = NULL;
    s->generating = false;
    s->last_used = sipp_now_ms();
    pthread_mutex_lock(&e->mu);
    s->req = NULL;
    e->stats.requests_done++;
    e->stats.tokens_out += (uint64_t)r->n_generated;
    pthread_mutex_unlock(&e->mu);
}

/* Ends a slot's request and frees the slot; the KV stays for the next request to reuse. */
static void slot_finish(sipp_engine *e, slot *s, sipp_finish_reason reason, sipp_status status, const char *error) {
    sipp_request *r = s->req;
    if (reason == SIPP_FINISH_STOP || reason == SIPP_FINISH_LENGTH) {
        r->emit.len = 0;
        sipp_output_flush(&r->out, &r->emit);
        sipp_request_publish(r, r->emit.data, r->emit.len);
    }
    slot_release(e, s, r);
    sipp_request_finish(r, reason, status, error);
}

/* How many of a prompt's tokens a slot's KV holds: its common prefix with the slot's tokens, if the
 * sequence still has every cell from position 0 (a sliding-window cache drops old cells), and never
 * the whole prompt: the last prompt token is evaluated again, its logits give the first new token. */
static int usable_prefix(sipp_engine *e, const slot *s, const sipp_request *r) {
    if (s->n_cache == 0 || llama_memory_seq_pos_min(e->mem, s->id) != 0) return 0;
    int n = common_prefix(s->cache, s->n_cache, r->prompt, r->n_prompt);
    return n < r->n_prompt ? n : r->n_prompt - 1;
}

/* The slot (busy or idle) other than `s` whose KV holds the longest prefix of the prompt, if it is
 * longer than `than`; NULL otherwise. */
static slot *prefix_donor(sipp_engine *e, const slot *s, const sipp_request *r, int than, int *n) {
    slot *best = NULL;
    for (int i = 0; i < e->params.parallel; i++) {
        slot *o = &e->slots[i];
        if (o == s) continue;
        int k = usable_prefix(e, o, r);
        if (k > than) {
            best = o;
            than = k;
        }
    }
    *n = than;
    return best;
}

static sipp_status slot_start(sipp_engine *e, slot *s, sipp_request *r) {
    r->t_start = sipp_now_ms();
    if (!cache_reserve(s, r->n_prompt + 1)) return SIPP_ERR_NO_MEMORY;
    int keep = usable_prefix(e, s, r), shared;
    /* A longer prefix in another slot (a system prompt or document that several requests share) is
     * shared instead of evaluated again: in the unified KV cache the cells gain this sequence's id,
     * no data moves, and later removals by either sequence leave the other's cells alone. */
    slot *donor = prefix_donor(e, s, r, keep, &shared);
    if (donor) {
        llama_memory_seq_rm(e->mem, s->id, -1, -1);
        llama_memory_seq_cp(e->mem, donor->id, s->id, 0, shared);
        memcpy(s->cache, donor->cache, (size_t)shared * sizeof *s->cache);
        keep = shared;
    } else if (!llama_memory_seq_rm(e->mem, s->id, keep, -1)) {
        llama_memory_seq_rm(e->mem, s->id, -1, -1);
        keep = 0;
    }
    s->n_cache = keep;
    s->n_prompt_done = keep;
    r->stats.cached_tokens = keep;
    s->generating = false;
    s->smpl = sipp_sampler_new(e->model, &r->sampling, r->ignore_eos);
    return s->smpl ? SIPP_OK : SIPP_ERR_NO_MEMORY;
}

static bool request_expired(sipp_request *r, double now) {
    if (r->deadline_ms > 0 && now >= r->deadline_ms) r->timed_out = true;
    return r->timed_out || atomic_load(&r->cancel);
}

static void finish_cancelled(sipp_engine *e, slot *s, sipp_request *r) {
    const char *why = r->timed_out ? "the request timed out" : "the request was cancelled";
    sipp_status st = r->timed_out ? SIPP_ERR_TIMEOUT : SIPP_ERR_CANCELLED;
    if (s) slot_finish(e, s, SIPP_FINISH_CANCELLED, st, why);
    else sipp_request_finish(r, SIPP_FINISH_CANCELLED, st, why);
}

/* Moves queued requests into free slots; drops queued requests that were cancelled. Called with
 * e->mu held; the requests it finishes or starts are handled after the lock is released. */
static void assign(sipp_engine *e, sipp_request **dropped, sipp_request **starting, int *starting_slot, int *n_start) {
    double now = sipp_now_ms();
    sipp_request **link = &e->queue_head, *prev = NULL;
    while (*link) {
        sipp_request *r = *link;
        int si = request_expired(r, now) ? -2 : pick_slot(e, r);
        if (si == -1) {
            prev = r;
            link = &r->next;
            continue;
        }
        *link = r->next;
        if (e->queue_tail == r) e->queue_tail = prev;
        r->next = NULL;
        e->n_queued--;
        if (si == -2) {
            r->next = *dropped;
            *dropped = r;
        } else {
            /* Reserve the slot and pin its key now, so that a later request with the same key in
             * this very pass sees the slot busy and waits. slot_start runs outside the lock. */
            slot *s = &e->slots[si];
            s->req = r;
            if (r->context_key && (!s->key || strcmp(s->key, r->context_key) != 0)) {
                free(s->key);
                s->key = strdup(r->context_key);
            }
            starting[*n_start] = r;
            starting_slot[(*n_start)++] = si;
        }
    }
}

/* ---- one step ---------------------------------------------------------------------------------- */

static void batch_add(llama_batch *b, llama_token t, llama_pos pos, llama_seq_id seq, bool logits) {
    int i = b->n_tokens++;
    b->token[i] = t;
    b->pos[i] = pos;
    b->n_seq_id[i] = 1;
    b->seq_id[i][0] = seq;
    b->logits[i] = logits;
}

static int prefill_chunk(const sipp_engine *e) {
    switch (e->params.policy) {
    case SIPP_POLICY_LATENCY_FIRST: return e->n_batch / 8 > 0 ? e->n_batch / 8 : 1;
    case SIPP_POLICY_THROUGHPUT_FIRST: return e->n_batch;
    default: return e->n_batch / 2 > 0 ? e->n_batch / 2 : 1;
    }
}

/* A generated token: stop at end-of-generation, release text, stop at a stop string or a limit. */
static void on_token(sipp_engine *e, slot *s, llama_token t) {
    sipp_request *r = s->req;
    r->n_generated++;
    if (!r->ignore_eos && llama_vocab_is_eog(e->model->vocab, t)) {
        slot_finish(e, s, SIPP_FINISH_STOP, SIPP_OK, NULL);
        return;
    }
    char piece[PIECE_MAX];
    int n = sipp_model_token_piece(e->model, t, false, piece, sizeof piece);
    r->emit.len = 0;
    bool stopped = sipp_output_push(&r->out, piece, (size_t)n, &r->emit);
    bool go_on = sipp_request_publish(r, r->emit.data, r->emit.len);
    if (stopped) {
        slot_finish(e, s, SIPP_FINISH_STOP, SIPP_OK, NULL);
    } else if (!go_on) {
        atomic_store(&r->cancel, true);
        finish_cancelled(e, s, r);
    } else if ((r->max_tokens > 0 && r->n_generated >= r->max_tokens) || s->n_cache + 1 >= e->n_ctx) {
        slot_finish(e, s, SIPP_FINISH_LENGTH, SIPP_OK, NULL);
    } else {
        s->next_token = t;
        s->generating = true;
    }
}

/* Out of KV space: the request holding the most cells gives way, the others go on. */
static void evict_largest(sipp_engine *e) {
    slot *victim = NULL;
    for (int i = 0; i < e->params.parallel; i++) {
        slot *s = &e->slots[i];
        if (s->req && (!victim || s->n_cache + s->n_fed > victim->n_cache + victim->n_fed)) victim = s;
    }
    if (!victim) return;
    char msg[SIPP_ERROR_SIZE];
    snprintf(msg, sizeof msg,
             "the context is full (%d tokens shared by %d slots); raise ctx_size or lower parallel or max_tokens",
             e->n_ctx, e->params.parallel);
    llama_memory_seq_rm(e->mem, victim->id, -1, -1);
    victim->n_cache = 0;
    slot_finish(e, victim, SIPP_FINISH_ERROR, SIPP_ERR_CONTEXT_FULL, msg);
}

static void step(sipp_engine *e) {
    llama_batch *b = &e->batch;
    b->n_tokens = 0;
    double now = sipp_now_ms();
    int busy = 0;

    for (int i = 0; i < e->params.parallel; i++) {
        slot *s = &e->slots[i];
        s->i_logits = -1;
        s->n_fed = 0;
        if (!s->req) continue;
        if (request_expired(s->req, now)) {
            finish_cancelled(e, s, s->req);
            continue;
        }
        busy++;
        if (s->generating) {
            s->i_logits = b->n_tokens;
            s->n_fed = 1;
            batch_add(b, s->next_token, s->n_cache, s->id, true);
        }
    }
    int budget = e->n_batch - b->n_tokens;
    int chunk_max = prefill_chunk(e);
    for (int i = 0; i < e->params.parallel && budget > 0; i++) {
        slot *s = &e->slots[i];
        if (!s->req || s->generating) continue;
        sipp_request *r = s->req;
        int left = r->n_prompt - s->n_prompt_done;
        int take = left < budget ? left : budget;
        if (take > chunk_max) take = chunk_max;
        for (int k = 0; k < take; k++) {
            int idx = s->n_prompt_done + k;
            bool last = idx == r->n_prompt - 1;
            if (last) s->i_logits = b->n_tokens;
            batch_add(b, r->prompt[idx], idx, s->id, last);
        }
        s->n_fed = take;
        budget -= take;
    }
    if (b->n_tokens == 0) return;

    int rc = llama_decode(e->ctx, *b);
    if (rc == 1) { /* no KV space for this batch; llama.cpp rolled it back */
        evict_largest(e);
        return;
    }
    if (rc != 0) {
        char msg[SIPP_ERROR_SIZE];
        snprintf(msg, sizeof msg, "llama_decode failed (code %d)", rc);
        for (int i = 0; i < e->params.parallel; i++) {
            slot *s = &e->slots[i];
            if (!s->req || !s->n_fed) continue;
            llama_memory_seq_rm(e->mem, s->id, s->n_cache, -1);
            slot_finish(e, s, SIPP_FINISH_ERROR, SIPP_ERR_INTERNAL, msg);
        }
        return;
    }

    pthread_mutex_lock(&e->mu);
    e->stats.decode_steps++;
    e->busy_slot_steps += (uint64_t)busy;
    pthread_mutex_unlock(&e->mu);

    for (int i = 0; i < e->params.parallel; i++) {
        slot *s = &e->slots[i];
        if (!s->req || !s->n_fed) continue;
        sipp_request *r = s->req;
        /* The fed tokens are now in the KV. */
        if (s->generating) {
            s->cache[s->n_cache++] = s->next_token;
        } else {
            memcpy(s->cache + s->n_cache, r->prompt + s->n_prompt_done, (size_t)s->n_fed * sizeof *s->cache);
            s->n_cache += s->n_fed;
            s->n_prompt_done += s->n_fed;
            pthread_mutex_lock(&e->mu);
            e->stats.tokens_in += (uint64_t)s->n_fed;
            pthread_mutex_unlock(&e->mu);
        }
        if (s->i_logits < 0) continue;
        if (!cache_reserve(s, s->n_cache + 2)) {
            slot_finish(e, s, SIPP_FINISH_ERROR, SIPP_ERR_NO_MEMORY, "out of memory");
            continue;
        }
        llama_token t = sipp_sampling_is_greedy(&r->sampling)
                            ? sipp_sample_argmax(e->model, llama_get_logits_ith(e->ctx, s->i_logits), r->ignore_eos)
                            : llama_sampler_sample(s->smpl, e->ctx, s->i_logits);
        if (!r->t_first) r->t_first = sipp_now_ms();
        on_token(e, s, t);
    }
}

/* ---- the thread -------------------------------------------------------------------------------- */

static bool has_active(const sipp_engine *e) {
    for (int i = 0; i < e->params.parallel; i++)
        if (e->slots[i].req) return true;
    return false;
}

/* One turn of the engine: queued requests into free slots, cancelled ones out, then one step.
 * With block, waits for work first (the engine thread); without, returns at once when there is none
 * (a stepped engine). Returns false once the engine is stopping. */
static bool engine_turn(sipp_engine *e, bool block) {
    sipp_request *dropped = NULL;
    int n_start = 0;
    pthread_mutex_lock(&e->mu);
    for (;;) {
        if (e->stopping) break;
        assign(e, &dropped, e->starting, e->starting_slot, &n_start);
        if (dropped || n_start || has_active(e) || !block) break;
        pthread_cond_wait(&e->cv, &e->mu);
    }
    bool stopping = e->stopping;
    e->stats.running = 0;
    for (int i = 0; i < e->params.parallel; i++) e->stats.running += e->slots[i].req != NULL;
    e->stats.queued = e->n_queued;
    pthread_mutex_unlock(&e->mu);

    while (dropped) {
        sipp_request *r = dropped;
        dropped = r->next;
        finish_cancelled(e, NULL, r);
    }
    for (int k = 0; k < n_start; k++) {
        slot *s = &e->slots[e->starting_slot[k]];
        if (slot_start(e, s, e->starting[k]) != SIPP_OK)
            slot_finish(e, s, SIPP_FINISH_ERROR, SIPP_ERR_NO_MEMORY, "out of memory starting the request");
    }
    if (stopping) return false;
    step(e);
    return true;
}

/* Shutting down: everything still running or queued ends as cancelled. */
static void engine_drain(sipp_engine *e) {
    for (int i = 0; i < e->params.parallel; i++)
        if (e->slots[i].req) slot_finish(e, &e->slots[i], SIPP_FINISH_CANCELLED, SIPP_ERR_CLOSED, "the engine was closed");
    pthread_mutex_lock(&e->mu);
    sipp_request *q = e->queue_head;
    e->queue_head = e->queue_tail = NULL;
    e->n_queued = 0;
    pthread_mutex_unlock(&e->mu);
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
                           "sipp_engine_step drives only engines made by sipp_engine_new_stepped; this one has its own thread");
    engine_turn(e, false);
    if (busy) {
        pthread_mutex_lock(&e->mu);
        *busy = has_active(e) || e->n_queued > 0;
        pthread_mutex_unlock(&e->mu);
    }
    return SIPP_OK;
}

bool sipp_engine_is_stepped(const sipp_engine *e) { return e && e->stepped; }

void sipp_engine_free(sipp_engine *e) {
    if (!e) return;
    if (e->thread_started) {
        pthread_mutex_lock(&e->mu);
        e->stopping = true;
        pthread_cond_signal(&e->cv);
        pthread_mutex_unlock(&e->mu);
        pthread_join(e->thread, NULL);
    } else if (e->stepped && e->slots) {
        e->stopping = true;
        engine_drain(e);
    }
    free(e->starting);
    free(e->starting_slot);
    if (e->slots) {
        for (int i = 0; i < e->params.parallel; i++) {
            free(e->slots[i].cache);
            free(e->slots[i].key);
        }
        free(e->slots);
    }
    sipp_embedder_free(e->embedder);
    if (e->ctx) {
        llama_batch_free(e->batch);
        llama_free(e->ctx);
    }
    if (e->threadpool) e->threadpool_free(e->threadpool);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->err_lock);
    free(e);
}

void sipp_engine_get_stats(sipp_engine *e, sipp_engine_stats *out) {
    pthread_mutex_lock(&e->mu);
    *out = e->stats;
    out->queued = e->n_queued;
    out->running = 0;
    for (int i = 0; i < e->params.parallel; i++) out->running += e->slots[i].req != NULL;
    out->mean_busy_slots = e->stats.decode_steps ? (double)e->busy_slot_steps / (double)e->stats.decode_steps : 0;
    pthread_mutex_unlock(&e->mu);
}

sipp_status sipp_engine_embed(sipp_engine *e, const char *const *texts, size_t n_texts, bool normalize, float **out,
                              int *n_embd, int *n_tokens) {
    char err[SIPP_ERROR_SIZE];
    sipp_status st = sipp_embed_run(e->embedder, e->model, e->params.ctx_size, e->params.threads, texts, n_texts,
                                    normalize, out, n_embd, n_tokens, err);
    return st == SIPP_OK ? st : engine_fail(e, st, "%s", err);
}

sipp_status sipp_engine_rerank(sipp_engine *e, const char *query, const char *const *docs, size_t n_docs,
                               float **scores) {
    char err[SIPP_ERROR_SIZE];
    sipp_status st =
        sipp_rerank_run(e->embedder, e->model, e->params.ctx_size, e->params.threads, query, docs, n_docs, scores, err);
    return st == SIPP_OK ? st : engine_fail(e, st, "%s", err);
}
