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

#include "gateway/config.h"
#include "sipp.h"

/* WAITING: an rpc target whose servers cannot be used yet (unreachable, busy); the loader tries
 * again with backoff, and its error says why meanwhile. */
typedef enum gw_target_state { GW_STATE_LOADING, GW_STATE_READY, GW_STATE_FAILED, GW_STATE_WAITING } gw_target_state;

typedef struct gw_upstream gw_upstream;
typedef struct gw_metrics gw_metrics;
typedef struct gw_limits gw_limits;
typedef struct gw_admission gw_admission;
struct gw_prober;

typedef struct gw_target {
    const gw_target_config *cfg;
    int index;
    atomic_int state;            /* gw_target_state */
    char error[SIPP_ERROR_SIZE]; /* why it failed; written before state becomes FAILED */
    sipp_model *model;           /* local: set before state becomes READY */
    sipp_engine *engine;
    gw_upstream *upstream; /* remote */
} gw_target;

typedef struct gw_server {
    const gw_config *cfg;
    gw_target *targets;
    size_t n_targets;
    gw_metrics *metrics;
    gw_limits *limits;       /* rate_limit.c */
    gw_admission *admission; /* admission.c */
    atomic_bool draining;    /* SIGTERM seen: new requests get 503 */
    atomic_bool cancel_all;  /* the shutdown deadline passed: in-flight work is cancelled */
    atomic_int in_flight;    /* HTTP requests being handled */
    atomic_int connections;  /* open connections (connection.c) */
    atomic_size_t buffered;  /* bytes of request bodies held while they arrive (connection.c) */
    long long started_unix;  /* for "created" fields */
    pthread_t loader;
    bool loader_started;
    struct gw_prober *prober; /* upstream.c */
} gw_server;

#endif
