/*
 * engine_internal.h: the structures shared by the engine's files (internal).
 *
 *   engine.c    the thread, the queue, slots and the scheduler (one llama_decode per step)
 *   request.c   a request's life as its submitter sees it: reading text, waiting, stats, freeing
 *   sampling.c  the sampler chain built from a request's sampling parameters
 *
 * Locking: engine->mu guards the queue, the slots' assignment and the engine stats. request->mu
 * guards what a request's readers see (text, finished, results). The engine thread never holds
 * both at once except engine->mu then request->mu, in that order.
 */
#ifndef SIPP_ENGINE_INTERNAL_H
#define SIPP_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "engine/model.h"
#include "engine/stop_filter.h"
#include "llama.h"
#include "sipp.h"
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
    bool finished;
    sipp_finish_reason finish;
    sipp_status status;
    char error[SIPP_ERROR_SIZE];
    sipp_request_stats stats;
    double t_submit, t_start, t_first, t_end;
};

/* Builds the sampler chain of a request. NULL on allocation failure. */
struct llama_sampler *sipp_sampler_new(const sipp_model *model, const sipp_sampling *s, bool ignore_eos);

/* Greedy without penalties: the token is the argmax of the logits, read in place (the chain's
 * result, without its copy of the whole vocabulary). ignore_eos excludes end-of-generation tokens. */
bool sipp_sampling_is_greedy(const sipp_sampling *s);
llama_token sipp_sample_argmax(const sipp_model *model, const float *logits, bool ignore_eos);

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
typedef struct sipp_embedder sipp_embedder;
sipp_embedder *sipp_embedder_new(void);
void sipp_embedder_free(sipp_embedder *em);
sipp_status sipp_embed_run(sipp_embedder *em, sipp_model *m, int ctx_size, int threads, const char *const *texts,
                           size_t n_texts, bool normalize, float **out, int *n_embd, int *n_tokens, char *err);
sipp_status sipp_rerank_run(sipp_embedder *em, sipp_model *m, int ctx_size, int threads, const char *query,
                            const char *const *docs, size_t n_docs, float **scores, char *err);

/* Wakes the engine thread (after a cancel). */
void sipp_engine_wake(sipp_engine *engine);

/* Whether the engine was made by sipp_engine_new_stepped (its waiters run its steps). */
bool sipp_engine_is_stepped(const sipp_engine *engine);

#endif
