/*
 * server.h: the state one running gateway shares between its layers: the configuration, the
 * target table and the handles of the modules that own the rest (metrics, rate limits, admission,
 * upstream probing). Only forward declarations of those modules: this header sits just above
 * config.h, and every layer that needs the server reads it without pulling in any other layer.
 *
 * Shared state is either immutable after start (the configuration, the target table's layout) or
 * atomic (a target's state, the shutdown flags) or guarded by the lock of the module that owns it.
 */
#ifndef SIPP_GATEWAY_SERVER_H
#define SIPP_GATEWAY_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/config.h"
#include "sipp.h"

/* UNLOADED: a local target not in memory (residency.c loads it on demand). WAITING: an rpc target
 * whose servers cannot be used yet (unreachable, busy); the keeper tries again with backoff, and its
 * error says why meanwhile. CHANGED: a file it was loaded from changed on disk (model_watch.c): out
 * of service until the file is quiet and it is reloaded from it (or FAILED, when the file is no
 * longer a whole model); its error says which file and how. */
typedef enum gw_target_state {
    GW_STATE_UNLOADED,
    GW_STATE_LOADING,
    GW_STATE_READY,
    GW_STATE_FAILED,
    GW_STATE_WAITING,
    GW_STATE_CHANGED
} gw_target_state;

/* The files a local target is loaded from: the model, its mmproj and its draft model. */
#define GW_TARGET_FILES 3

/* A file as a load saw it: a change of any field means that the file is not what was loaded. */
typedef struct gw_file_id {
    bool exists;
    unsigned long long dev, ino;
    long long size, mtime_s, mtime_ns;
} gw_file_id;

typedef struct gw_upstream gw_upstream;
typedef struct gw_metrics gw_metrics;
typedef struct gw_limits gw_limits;
typedef struct gw_admission gw_admission;
struct gw_prober;
struct gw_residency;
struct gw_supervisor;
struct gw_model_watch;
struct gw_reloads;
struct gw_mcp;

typedef struct gw_target {
    const gw_target_config *_Atomic cfg; /* replaced (atomically) when a reload changes the target */
    int index;
    atomic_int state;            /* gw_target_state */
    char error[SIPP_ERROR_SIZE]; /* why it failed; written before state becomes FAILED */
    sipp_model *model;           /* local: set before state becomes READY; read only with a use held */
    sipp_engine *engine;
    void *handle;                     /* what another resident kind loaded (kinds/): as engine is read */
    gw_upstream *upstream;            /* remote */
    struct gw_supervisor *supervisor; /* served by a child process (supervise.c); upstream points at it */
    /* residency (residency.c), under its lock */
    int uses;    /* calls running on it or waiting for it to load */
    int peeks;   /* routes describing its engine */
    int waiting; /* calls waiting for its load */
    double last_use_ms, last_use_unix;
    double deadline_ms, deadline_unix; /* keep_alive ends; -1 = none */
    double keep_alive_override;        /* seconds, < 0 forever: set by a request (Ollama's keep_alive) */
    bool keep_alive_override_set;
    bool unload_when_idle;
    bool ever_loaded;
    sipp_memory estimate; /* from the GGUF header */
    sipp_memory measured; /* the backend buffers of its last load */
    bool measured_valid;
    double last_load_ms;
    uint64_t n_loads, n_unloads, n_evictions;
    gw_target_config *owned_cfg; /* cfg, when found by a rescan (freed with the table) */
    /* its files as its last load found them, and a change model_watch.c saw since (residency lock) */
    gw_file_id files[GW_TARGET_FILES];
    bool file_pending;    /* a change to look at once the file has been quiet a while */
    double file_event_ms; /* when the last change was seen */
    /* a reload of the configuration (reload.c) */
    atomic_bool retired;              /* removed from it: not found nor listed; unloaded once idle */
    const gw_target_config *next_cfg; /* changed: what it loads with once idle (residency lock) */
} gw_target;

/* Whether a resident target holds what its kind loaded (a llama engine, another kind's handle). */
static inline bool gw_target_holds_load(const gw_target *t) { return t->engine || t->handle; }

/* Whether t is in the configuration (listed, found by name): not retired by a reload. */
static inline bool gw_target_listed(const gw_target *t) { return !atomic_load(&t->retired); }

/* File k (0 .. GW_TARGET_FILES - 1) of a local target: its model, mmproj, draft; NULL when it has none. */
static inline const char *gw_target_file(const gw_target_config *c, int k) {
    return k == 0 ? c->model_path : k == 1 ? c->mmproj : c->draft_model;
}

typedef struct gw_server {
    const gw_config *_Atomic cfg; /* replaced (atomically) by a reload (SIGHUP); old ones live until exit */
    gw_target *targets;           /* room for max_targets; the first n_targets are listed */
    _Atomic size_t n_targets;     /* grows (under the residency lock) when a models directory gains a file */
    size_t max_targets;
    gw_metrics *metrics;
    gw_limits *limits;               /* rate_limit.c */
    gw_admission *admission;         /* admission.c */
    atomic_bool draining;            /* SIGTERM seen: new requests get 503 */
    atomic_bool cancel_all;          /* the shutdown deadline passed: in-flight work is cancelled */
    atomic_int in_flight;            /* HTTP requests being handled */
    atomic_int connections;          /* open connections (connection.c) */
    atomic_size_t buffered;          /* bytes of request bodies held while they arrive (connection.c) */
    long long started_unix;          /* for "created" fields */
    struct gw_residency *residency;  /* residency.c */
    struct gw_prober *prober;        /* upstream.c */
    struct gw_responses *responses;  /* responses_store.c */
    struct gw_model_watch *watch;    /* model_watch.c */
    struct gw_reloads *reloads;      /* reload.c: what reloads replaced, freed at the end */
    sipp_media_budget *media_budget; /* [limits] media_decoded_budget_mb, shared by every target's engine */
    struct gw_mcp *mcp;              /* mcp_client.c: the [[mcp]] servers as the gateway started with them */
} gw_server;

#endif
