/*
 * state.h: an engine's state, which every part of the engine reads (engine.c owns its life).
 *
 * Locking: engine->mu guards the queue, the slots' assignment and the engine stats. request->mu
 * guards what a request's readers see (text, finished, results). The engine thread never holds
 * both at once except engine->mu then request->mu, in that order.
 *
 * These rules are checked, not only written: engine->mu is taken with sipp_engine_lock, and in a
 * debug build (make DEBUG=1, and the sanitizer builds of make test) it records the thread that holds
 * it, so "called with engine->mu held" is SIPP_ASSERT_ENGINE_LOCKED, as SQLite asserts
 * sqlite3BtreeHoldsMutex. Both are SIPP_ASSERT (util/assertions.h, shared with every layer); a
 * release build compiles the checks out.
 */
#ifndef SIPP_ENGINE_STATE_H
#define SIPP_ENGINE_STATE_H

#include <pthread.h>
#include <stdatomic.h>

#include "engine/embed.h"
#include "engine/request.h"
#include "engine/slot.h"
#include "engine/spec_cost.h"
#include "llama.h"
#include "model/model.h"
#include "sipp.h"
#include "util/assertions.h"
#include "util/last_error.h"

/* An engine's LoRA adapters and the set of scales running (engine/lora.h says how). */
typedef struct sipp_lora_state {
    size_t n;             /* the model's adapters (model.h) */
    float *defaults;      /* under mu: the scales of a request that picks none */
    float *running;       /* under mu: the scales of the requests in slots */
    uint64_t running_sig; /* under mu */
    float *applied;       /* engine thread: what the context has */
    bool applied_set;
} sipp_lora_state;

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
    bool stepped;       /* no thread: the caller runs turns with sipp_engine_step */
    pthread_mutex_t mu; /* taken with sipp_engine_lock (below), so that debug builds know its holder */
    pthread_cond_t cv;
#ifdef SIPP_DEBUG
    _Atomic(pthread_t) mu_owner; /* the thread holding mu, valid while mu_held */
    atomic_bool mu_held;
#endif
    bool stopping;
    bool parked;     /* the engine thread waits for work (under mu): it touches no slot (slot_state.c) */
    bool erase_idle; /* under mu: sipp_engine_erase_idle_slots asked the next turn to empty idle slots */
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
     * and joins its worker threads for every graph, that is for every generated token. Its workers
     * spin between graphs (ggml's poll); an engine with nothing to do pauses it, so that they sleep
     * instead of holding a core for about a tenth of a second after every request. */
    struct ggml_threadpool *threadpool;
    void (*threadpool_free)(struct ggml_threadpool *);
    void (*threadpool_pause)(struct ggml_threadpool *);

    sipp_lora_state lora; /* the LoRA adapters and the set of scales running (lora.c) */

    sipp_last_error error;
};

/* ---- engine->mu, with its holder checked in debug builds ---------------------------------------- */

#ifdef SIPP_DEBUG
/* Whether the calling thread holds engine->mu (debug builds). Another thread's holding reads false:
 * the owner is stored before mu_held is set and mu_held is cleared before the owner changes. */
static inline bool sipp_engine_holds_lock(const sipp_engine *e) {
    return atomic_load(&e->mu_held) && pthread_equal(atomic_load(&e->mu_owner), pthread_self());
}
#define SIPP_ASSERT_ENGINE_LOCKED(e) SIPP_ASSERT(sipp_engine_holds_lock(e))
#define SIPP_ASSERT_ENGINE_UNLOCKED(e) SIPP_ASSERT(!sipp_engine_holds_lock(e))
static inline void sipp_engine_note_locked(sipp_engine *e) {
    atomic_store(&e->mu_owner, pthread_self());
    atomic_store(&e->mu_held, true);
}
static inline void sipp_engine_note_unlocking(sipp_engine *e) {
    SIPP_ASSERT_ENGINE_LOCKED(e);
    atomic_store(&e->mu_held, false);
}
#else
#define SIPP_ASSERT_ENGINE_LOCKED(e) ((void)0)
#define SIPP_ASSERT_ENGINE_UNLOCKED(e) ((void)0)
#define sipp_engine_note_locked(e) ((void)0)
#define sipp_engine_note_unlocking(e) ((void)0)
#endif

/* engine->mu, never taken twice by one thread nor after a request->mu (the order above). */
static inline void sipp_engine_lock(sipp_engine *e) {
    SIPP_ASSERT_ENGINE_UNLOCKED(e);
    pthread_mutex_lock(&e->mu);
    sipp_engine_note_locked(e);
}
static inline void sipp_engine_unlock(sipp_engine *e) {
    sipp_engine_note_unlocking(e);
    pthread_mutex_unlock(&e->mu);
}
/* pthread_cond_wait on engine->cv: the lock is given up while waiting, and so is its owner. */
static inline void sipp_engine_wait(sipp_engine *e) {
    sipp_engine_note_unlocking(e);
    pthread_cond_wait(&e->cv, &e->mu);
    sipp_engine_note_locked(e);
}

/* Wakes the engine thread (after a cancel). */
static inline void sipp_engine_wake(sipp_engine *e) {
    sipp_engine_lock(e);
    pthread_cond_signal(&e->cv);
    sipp_engine_unlock(e);
}

/* Whether the engine was made by sipp_engine_new_stepped (its waiters run its steps). */
static inline bool sipp_engine_is_stepped(const sipp_engine *e) { return e && e->stepped; }

#endif
