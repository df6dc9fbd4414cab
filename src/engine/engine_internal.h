/*
 * engine_internal.h: the structures shared by the engine's files (internal).
 *
 *   engine.c    the engine's life, the queue and the thread
 *   scheduler.c which request goes to which slot, and what each step decodes (one llama_decode)
 *   request.c   a request's life as its submitter sees it: reading text, waiting, stats, freeing
 *   sampling.c  the sampler of a request: its chain, grammar, reasoning budget and logprobs
 *   slot_state.c    idle context-keyed slots saved to files while the model is unloaded, and restored
 *   request_json.c  a request's logprobs and chat parser as JSON (jansson; the browser's is
 *               src/wasm/chat_browser.c)
 *
 * Locking: engine->mu guards the queue, the slots' assignment and the engine stats. request->mu
 * guards what a request's readers see (text, finished, results). The engine thread never holds
 * both at once except engine->mu then request->mu, in that order.
 */
#ifndef SIPP_ENGINE_INTERNAL_H
#define SIPP_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "chat/chat_request.h"
#include "engine/spec_cost.h"
#include "engine/stop_filter.h"
#include "llama.h"
#include "model/model.h"
#include "sipp.h"
#include "util/last_error.h"
#include "util/util.h"

struct sipp_request {
    sipp_engine *engine;
    struct sipp_request *next; /* queue link, guarded by engine->mu */

    /* Set at submit, read-only after. */
    llama_token *prompt;
    int n_prompt;
    int max_tokens;
    sipp_sampling sampling;
    bool ignore_eos;
    char *context_key;
    double deadline_ms; /* absolute, 0 = none */
    sipp_piece_fn on_piece;
    sipp_finish_fn on_finish;
    void *user;
    chat_request chat;             /* the chat's plan and the grammar to enforce (src/chat) */
    struct llama_sampler *grammar; /* made (and so checked) at submit; the slot's sampler takes it */
    int top_logprobs;              /* -1: no logprobs */

    /* Engine thread only. */
    sipp_output out;
    sipp_buf emit;
    int n_generated;

    atomic_bool cancel;
    bool timed_out;

    /* Guarded by mu. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    sipp_buf text;
    size_t read_pos;
    int text_waiters; /* readers waiting for text (sipp_request_read): a piece wakes only them */
    bool finished;
    sipp_finish_reason finish;
    sipp_status status;
    char error[SIPP_ERROR_SIZE];
    sipp_request_stats stats;
    double t_submit, t_start, t_first, t_end;
    struct sipp_logprob *logprobs; /* one per generated token when top_logprobs >= 0 */
    size_t n_logprobs, cap_logprobs;
};

/* One generated token's log-probability and its most likely alternatives. */
typedef struct sipp_logprob {
    llama_token token;
    float logprob;
    int n_top;
    llama_token top[SIPP_MAX_TOP_LOGPROBS];
    float top_logprob[SIPP_MAX_TOP_LOGPROBS];
} sipp_logprob;

/* A request's sampler: the chain of its sampling parameters, and beside it the grammar (checked on
 * the chain's pick first, applied to the whole vocabulary only when it rejects the pick) and the
 * reasoning budget. */
typedef struct sipp_sampler {
    struct llama_sampler *chain;
    struct llama_sampler *grammar; /* NULL: unconstrained */
    struct llama_sampler *budget;  /* NULL: no thinking budget */
    llama_token_data *cand;        /* n_vocab candidates, reused every token */
    int n_vocab;
    bool greedy_in_place; /* argmax over the logits, nothing else to apply */
    /* Speculative sampling (temperature > 0, no penalty, grammar, budget or logprobs): the chain
     * without its draw, a distribution's room and the generator of the acceptance tests. */
    bool spec_sampled;
    struct llama_sampler *transform;
    float *probs;
    uint64_t rng;
} sipp_sampler;

typedef struct sipp_embedder sipp_embedder;

/* A slot is one llama sequence of the engine's context. Engine thread only, except `req`, which
 * changes under engine->mu so that stats readers see a consistent view. */
typedef struct slot {
    int id;             /* the llama sequence id */
    sipp_request *req;  /* NULL when idle */
    llama_token *cache; /* the tokens whose KV this sequence holds, in order */
    int n_cache;
    int cap_cache;
    int n_prompt_done; /* prompt tokens in the KV so far */
    bool generating;   /* prompt done: next_token is to be fed */
    llama_token next_token;
    int i_logits; /* index of this slot's output in the current batch, or -1 */
    int n_fed;    /* tokens this slot put in the current batch */
    sipp_sampler *smpl;
    llama_token draft[SIPP_DRAFT_MAX]; /* speculation's proposal riding behind next_token this step */
    int n_draft;
    int draft_room;      /* the most tokens this step may propose (0: the slot does not speculate) */
    llama_token *dcache; /* the tokens whose KV this slot's draft sequence holds, in order (draft.c) */
    int n_dcache;
    int cap_dcache;
    int d_logits;       /* index of this slot's output in the current draft batch, or -1 */
    float *dprobs;      /* a sampled request's draft distributions, draft_max rows of n_vocab (draft.c) */
    spec_accept accept; /* the request's acceptance of proposals so far, for the cut-off (spec_cost.c) */
    char *key;          /* the context_key pinned here, kept after the request ends */
    double last_used;
} slot;

struct sipp_engine {
    sipp_model *model;
    struct llama_context *ctx;
    llama_memory_t mem;
    sipp_memory buffers; /* the context's KV, output and compute buffers (memory.c) */
    sipp_engine_params params;
    sipp_schema_limits schema_limits; /* under mu: sipp_engine_set_schema_limits */
    int n_ctx;
    int n_batch;
    llama_batch batch;

    pthread_t thread;
    bool thread_started;
    bool stepped; /* no thread: the caller runs turns with sipp_engine_step */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stopping;
    bool parked; /* the engine thread waits for work (under mu): it touches no slot (slot_state.c) */
    sipp_request *queue_head, *queue_tail;
    int n_queued;
    slot *slots;
    sipp_request **starting; /* the requests one turn moves into slots, and their slots */
    int *starting_slot;
    sipp_engine_stats stats;
    uint64_t busy_slot_steps;

    sipp_embedder *embedder;
    bool spec_ngram; /* params.speculative is "ngram" */

    /* Speculation by a draft model (draft.c): the draft, its context (one sequence per slot, the
     * slot's id) and its batch. NULL without params.draft_model. */
    sipp_model *draft;
    struct llama_context *dctx;
    llama_memory_t dmem;
    llama_batch dbatch;

    /* The draft cut-off (params.draft_cutoff "auto", spec_cost.c): the measured cost lines of the
     * target's generation steps and of the draft's decodes, and the step counts that pace
     * exploration (scheduler.c). */
    bool spec_auto;
    spec_fit target_fit, draft_fit;
    spec_accept accept_history; /* every request's verifications, decayed: a new request's prior */
    bool draft_warm;            /* the draft has decoded once: its weights are paged in */
    unsigned spec_tick;         /* warm-up steps */
    unsigned spec_since;        /* steps since the last exploration, and the plain steps between two */
    unsigned spec_gap;
    double *spec_p; /* the chooser's inputs, one per generating slot: acceptance and room */
    int *spec_room;

    /* A persistent CPU thread pool, as llama-bench and llama-server attach: without one, ggml starts
     * and joins its worker threads for every graph, that is for every generated token. */
    struct ggml_threadpool *threadpool;
    void (*threadpool_free)(struct ggml_threadpool *);

    sipp_last_error error;
};

/* Builds the sampler chain of a request. NULL on allocation failure. */
struct llama_sampler *sipp_sampler_chain_new(const sipp_model *model, const sipp_sampling *s,
                                             bool ignore_eos);

/* The sampler of a request (takes r->grammar). NULL with err on failure. */
sipp_sampler *sipp_sampler_new(const sipp_model *model, sipp_request *r, char *err);
void sipp_sampler_free(sipp_sampler *ss);
/* Samples the token of output idx, records its logprobs when the request wants them, and accepts
 * it into every sampler. LLAMA_TOKEN_NULL when the grammar cannot take the token. */
llama_token sipp_sampler_sample(sipp_sampler *ss, sipp_engine *e, struct llama_context *ctx, int idx,
                                sipp_request *r);
/* Makes the grammar sampler a request asks for (r->chat), checking the GBNF. */
sipp_status sipp_request_grammar(const sipp_model *m, sipp_request *r, char *err);

/* Speculative sampling (sampling.c). The distribution the request draws from at these logits (its
 * chain without the draw), dense over the vocabulary; a uniform number in [0, 1) of the sampler's
 * own generator; a token drawn in proportion to non-negative weights (not normalised). */
void sipp_sampler_probs(sipp_sampler *ss, const float *logits, float *probs);
double sipp_sampler_uniform(sipp_sampler *ss);
llama_token sipp_sampler_draw(sipp_sampler *ss, const float *weights);

/* SIPP_OK when a request may ask for `logprobs` (-1: none), else the reason in err. */
sipp_status sipp_request_check_logprobs(int logprobs, char *err);

/* Greedy without penalties: the token is the argmax of the logits, read in place (the chain's
 * result, without its copy of the whole vocabulary). ignore_eos excludes end-of-generation tokens. */
bool sipp_sampling_is_greedy(const sipp_sampling *s);
llama_token sipp_sample_argmax(const sipp_model *model, const float *logits, bool ignore_eos);

/* Prompt lookup (speculative.c): up to max tokens that followed the latest earlier occurrence of
 * the last few tokens of hist[0..n); returns how many were written to out. */
int sipp_spec_ngram(const llama_token *hist, int n, int max, llama_token *out);

/* The length of the common prefix of a[0..na) and b[0..nb). */
int sipp_common_prefix(const llama_token *a, int na, const llama_token *b, int nb);
/* Grows *tokens (capacity *cap) to hold at least n tokens, doubling from 256; false when out of memory. */
bool sipp_tokens_reserve(llama_token **tokens, int *cap, int n);
/* Appends one token of sequence seq at pos to batch b, with or without its logits. */
void sipp_batch_add(llama_batch *b, llama_token t, llama_pos pos, llama_seq_id seq, bool logits);

/* The draft model (draft.c). sipp_draft_open loads params.draft_model on the target's backend,
 * checks that it shares the target's vocabulary and makes its context; sipp_draft_close frees them. */
sipp_status sipp_draft_open(sipp_engine *e, char *errbuf);
void sipp_draft_close(sipp_engine *e);
/* Writes the draft model's proposal into s->draft / s->n_draft for every generating slot whose
 * draft_room > 0 (at most draft_room tokens each), in batched draft decodes shared by the slots. The
 * history of a slot is s->cache[0..n_cache] (next_token at n_cache). */
void sipp_draft_propose(sipp_engine *e);

/* Allocates a request and takes copies of what it needs from params (prompt tokens are set by the
 * engine). */
sipp_request *sipp_request_alloc(sipp_engine *engine, const sipp_request_params *params);

/* Appends released text: visible to readers, and given to the piece callback. Returns false when
 * the callback asked to stop. Engine thread only. */
bool sipp_request_publish(sipp_request *r, const char *text, size_t len);

/* Ends the request: records results and wakes waiters. The engine must not touch r afterwards. */
void sipp_request_finish(sipp_request *r, sipp_finish_reason reason, sipp_status status, const char *error);

/* Decodes tokens[from .. from+n) as sequence 0 at their own positions, in one llama_decode; outputs
 * for every token or only the last. Returns llama_decode's code. For the side contexts (embeddings,
 * inspection); the engine's batches carry many sequences and build their own. */
int sipp_decode_range(struct llama_context *ctx, const llama_token *tokens, int from, int n, bool all_logits);

/* The embedding context (embed.c). */
sipp_embedder *sipp_embedder_new(void);
void sipp_embedder_free(sipp_embedder *em);
sipp_status sipp_embed_run(sipp_embedder *em, sipp_model *m, int ctx_size, int threads,
                           const char *const *texts, size_t n_texts, const sipp_embed_options *opt,
                           float **out, int *n_embd, int *n_tokens, char *err);
sipp_status sipp_rerank_run(sipp_embedder *em, sipp_model *m, int ctx_size, int threads, const char *query,
                            const char *const *docs, size_t n_docs, const sipp_embed_options *opt,
                            float **scores, char *err);

/* Wakes the engine thread (after a cancel). */
void sipp_engine_wake(sipp_engine *engine);

/* The scheduler (scheduler.c), driven by the engine thread. */

/* Moves queued requests into free slots (reserving each slot, pinning its key) and unlinks the
 * queued requests that were cancelled or expired into *dropped. Called with engine->mu held; the
 * caller starts (sipp_slot_start) and drops (sipp_sched_cancel) them after releasing the lock.
 * `starting` and `starting_slot` hold room for one entry per slot. */
void sipp_sched_assign(sipp_engine *e, sipp_request **dropped, sipp_request **starting, int *starting_slot,
                       int *n_start);

/* Prepares a slot reserved by sipp_sched_assign for its request: reuses the longest cached prefix
 * (its own or another slot's) and builds the sampler. SIPP_ERR_NO_MEMORY on allocation failure. */
sipp_status sipp_slot_start(sipp_engine *e, slot *s, sipp_request *r);

/* Ends a slot's request and frees the slot; the KV stays for the next request to reuse. */
void sipp_slot_finish(sipp_engine *e, slot *s, sipp_finish_reason reason, sipp_status status,
                      const char *error);

/* Ends a cancelled or timed-out request, in slot s or (s NULL) still queued. */
void sipp_sched_cancel(sipp_engine *e, slot *s, sipp_request *r);

/* One step: a batch of every generating slot's next token and prompt chunks, one llama_decode,
 * then sampling and text release for every slot that produced logits. */
void sipp_sched_step(sipp_engine *e);

/* Whether any slot holds a request. */
bool sipp_sched_has_active(const sipp_engine *e);

/* Whether the engine was made by sipp_engine_new_stepped (its waiters run its steps). */
bool sipp_engine_is_stepped(const sipp_engine *engine);

#endif
