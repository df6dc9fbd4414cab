/*
 * request.h: a request as the engine keeps it (request.c: its life as its submitter sees it;
 * request_json.c: its logprobs and chat parser as JSON).
 */
#ifndef SIPP_ENGINE_REQUEST_H
#define SIPP_ENGINE_REQUEST_H

#include <pthread.h>
#include <stdatomic.h>

#include "chat/chat_request.h"
#include "engine/stop_filter.h"
#include "llama.h"
#include "sipp.h"
#include "util/util.h"

/* What a request needs of its engine, given by the engine at submit (engine.c). The request layer
 * sits below the engine's state and scheduler and reaches its engine only through these, so
 * request.c includes nothing of the engine's. */
typedef struct sipp_request_owner {
    sipp_engine *engine;
    const sipp_model *model;
    void (*wake)(sipp_engine *engine); /* wakes the engine thread after a cancel */
    bool stepped;                      /* no engine thread: a waiter runs the steps (sipp_engine_step) */
} sipp_request_owner;

struct sipp_request {
    sipp_engine *engine; /* NULL once it can no longer be waited on (never queued) */
    sipp_request_owner owner;
    struct sipp_request *next; /* queue link, guarded by engine->mu */

    /* Set at submit, read-only after. */
    llama_token *prompt;
    int n_prompt;
    sipp_media_prompt *media; /* the prompt's image and audio spans (model/mmproj.h); NULL for none */
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
    float *lora_scales;            /* one per engine adapter (NULL: the engine has none), lora.c */
    uint64_t lora_sig;

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
    size_t *piece_ends; /* where each published piece ends in text (sipp_request_read_piece) */
    size_t n_pieces, cap_pieces, next_piece;
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

/* Allocates a request and takes copies of what it needs from params (prompt tokens are set by the
 * engine). */
sipp_request *sipp_request_alloc(const sipp_request_owner *owner, const sipp_request_params *params);

/* Appends released text: visible to readers, and given to the piece callback. Returns false when
 * the callback asked to stop. Engine thread only. */
bool sipp_request_publish(sipp_request *r, const char *text, size_t len);

/* Ends the request: records results and wakes waiters. The engine must not touch r afterwards. */
void sipp_request_finish(sipp_request *r, sipp_finish_reason reason, sipp_status status, const char *error);

/* SIPP_OK when a request may ask for `logprobs` (-1: none), else the reason in err (request_json.c). */
sipp_status sipp_request_check_logprobs(int logprobs, char *err);

#endif
