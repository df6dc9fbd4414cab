/*
 * targets.c: the targets at run time.
 *
 * Local targets load in the background, on one loader thread, one after the other in the order of
 * the config: loading two models at once would only make both slower, and the first target becomes
 * usable sooner. The HTTP server is up meanwhile: /health answers 200 at once, /ready answers 503
 * until every target is loaded, and a request for a target still loading gets 503 with Retry-After.
 * A target whose model fails to load stays failed (its requests get 503 with the reason, and /ready
 * stays 503 naming it) while the other targets serve.
 *
 * A target's state is an atomic that moves LOADING -> READY or LOADING -> FAILED once; the model,
 * engine and error it publishes are written before the state, and read only after it.
 *
 * A target on backend "rpc" whose servers cannot be used yet (not started, unreachable, busy with
 * another client) is WAITING instead of FAILED: not ready, its requests get 503 with the reason,
 * and once the first pass is over the loader tries it again with exponential backoff until it
 * loads or the server shuts down. (A server that dies after the load ends the process with a line
 * naming it, SIPP_RPC_LOST_EXIT: ggml's RPC client cannot survive it; see sipp.h.)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway/targets.h"
#include "gateway/upstream.h"

/* The engine's own queue holds as many requests as the gateway lets wait; admission (admission.c)
 * is the real bound, so the engine refusing with "busy" is the exception. */
#define GW_ENGINE_QUEUE_MIN 1
/* How an rpc target waiting for its servers is retried: first after RETRY_MIN_MS, doubling up to
 * RETRY_MAX_MS, sleeping in slices so that a shutdown is not held up. */
#define GW_RPC_RETRY_MIN_MS 500
#define GW_RPC_RETRY_MAX_MS 30000
#define GW_RPC_RETRY_SLICE_MS 100
#define GW_BACKEND_LIST_MAX 16

static bool load_progress(float progress, void *user) {
    gw_server *srv = user;
    return !atomic_load(&srv->draining);
}

static bool is_rpc(const gw_target_config *c) { return c->backend && strcmp(c->backend, "rpc") == 0; }

/* Waiting helps only when the servers are what is missing, not the rpc module itself. */
static bool rpc_compiled(void) {
    sipp_backend_info b[GW_BACKEND_LIST_MAX];
    int n = sipp_backends_list(b, GW_BACKEND_LIST_MAX);
    for (int i = 0; i < n && i < GW_BACKEND_LIST_MAX; i++)
        if (strcmp(b[i].name, "rpc") == 0) return b[i].compiled;
    return false;
}

static void load_one(gw_server *srv, gw_target *t) {
    const gw_target_config *c = t->cfg;
    char err[SIPP_ERROR_SIZE];
    double t0 = sipp_now_ms();
    sipp_model_params mp = sipp_model_default_params();
    mp.backend = c->backend;
    mp.flash_attn = c->flash_attn;
    mp.gpu_layers = c->gpu_layers;
    mp.rpc_servers = c->rpc_servers;
    mp.tensor_split = c->tensor_split;
    mp.progress = load_progress;
    mp.progress_user = srv;
    sipp_model *m = NULL;
    sipp_status st = sipp_model_load(c->model_path, &mp, &m, err);
    if (st != SIPP_OK) {
        bool wait = is_rpc(c) && st == SIPP_ERR_BACKEND && rpc_compiled() && !atomic_load(&srv->draining);
        snprintf(t->error, sizeof t->error, "%s", err);
        atomic_store(&t->state, wait ? GW_STATE_WAITING : GW_STATE_FAILED);
        fprintf(stderr, "sipp: target '%s' %s: %s\n", c->name,
                wait ? "is waiting for its rpc servers (retrying with backoff)" : "failed to load", err);
        return;
    }
    sipp_engine_params ep = sipp_engine_default_params();
    ep.ctx_size = c->ctx_size;
    ep.parallel = c->parallel;
    ep.threads = c->threads;
    ep.policy = c->policy;
    ep.speculative = c->speculative;
    ep.draft_max = c->draft_max;
    ep.draft_min = c->draft_min;
    int q = srv->cfg->max_queue + srv->cfg->max_concurrent_requests;
    ep.max_queued = q < GW_ENGINE_QUEUE_MIN ? GW_ENGINE_QUEUE_MIN : q;
    sipp_engine *e = NULL;
    if (sipp_engine_new(m, &ep, &e, err) != SIPP_OK) {
        sipp_model_free(m);
        snprintf(t->error, sizeof t->error, "%s", err);
        atomic_store(&t->state, GW_STATE_FAILED);
        fprintf(stderr, "sipp: target '%s' failed to start its engine: %s\n", c->name, err);
        return;
    }
    t->model = m;
    t->engine = e;
    atomic_store(&t->state, GW_STATE_READY);
    const sipp_backend_decision *b = sipp_model_backend(m);
    fprintf(stderr, "sipp: target '%s' ready in %.0f ms: %s on %s (%s), %d slots\n", c->name, sipp_now_ms() - t0,
            c->model_path, b->backend, b->devices, c->parallel);
}

/* Sleeps ms in slices; false when the server began shutting down meanwhile. */
static bool nap(gw_server *srv, int ms) {
    for (int slept = 0; slept < ms; slept += GW_RPC_RETRY_SLICE_MS) {
        if (atomic_load(&srv->draining)) return false;
        struct timespec ts = {0, GW_RPC_RETRY_SLICE_MS * 1000000L};
        nanosleep(&ts, NULL);
    }
    return !atomic_load(&srv->draining);
}

static void retry_waiting(gw_server *srv) {
    int backoff = GW_RPC_RETRY_MIN_MS;
    for (;;) {
        bool any = false;
        for (size_t i = 0; i < srv->n_targets; i++) any |= atomic_load(&srv->targets[i].state) == GW_STATE_WAITING;
        if (!any || !nap(srv, backoff)) break;
        for (size_t i = 0; i < srv->n_targets; i++) {
            gw_target *t = &srv->targets[i];
            if (atomic_load(&t->state) == GW_STATE_WAITING) load_one(srv, t);
        }
        backoff = backoff * 2 > GW_RPC_RETRY_MAX_MS ? GW_RPC_RETRY_MAX_MS : backoff * 2;
    }
    for (size_t i = 0; i < srv->n_targets; i++) {
        gw_target *t = &srv->targets[i];
        if (atomic_load(&t->state) != GW_STATE_WAITING) continue;
        snprintf(t->error, sizeof t->error, "the server is shutting down");
        atomic_store(&t->state, GW_STATE_FAILED);
    }
}

static void *loader_main(void *arg) {
    gw_server *srv = arg;
    for (size_t i = 0; i < srv->n_targets; i++) {
        gw_target *t = &srv->targets[i];
        if (t->cfg->type != GW_TARGET_LOCAL) continue;
        if (atomic_load(&srv->draining)) {
            snprintf(t->error, sizeof t->error, "the server is shutting down");
            atomic_store(&t->state, GW_STATE_FAILED);
            continue;
        }
        load_one(srv, t);
    }
    retry_waiting(srv);
    return NULL;
}

bool gw_targets_start(gw_server *srv, char *err) {
    const gw_config *c = srv->cfg;
    srv->targets = calloc(c->n_targets ? c->n_targets : 1, sizeof *srv->targets);
    if (!srv->targets) return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory") == SIPP_OK;
    srv->n_targets = c->n_targets;
    bool any_local = false;
    for (size_t i = 0; i < c->n_targets; i++) {
        gw_target *t = &srv->targets[i];
        t->cfg = &c->targets[i];
        t->index = (int)i;
        atomic_init(&t->state, GW_STATE_LOADING);
        if (t->cfg->type == GW_TARGET_LOCAL) {
            any_local = true;
            continue;
        }
        t->upstream = gw_upstream_new(t->cfg, err);
        if (!t->upstream) return false;
        atomic_store(&t->state, GW_STATE_READY);
    }
    if (any_local) {
        if (pthread_create(&srv->loader, NULL, loader_main, srv) != 0)
            return sipp_fail(err, SIPP_ERR_INTERNAL, "cannot start the model loader thread") == SIPP_OK;
        srv->loader_started = true;
    }
    return true;
}

void gw_targets_stop(gw_server *srv) {
    if (srv->loader_started) pthread_join(srv->loader, NULL);
    srv->loader_started = false;
    for (size_t i = 0; i < srv->n_targets; i++) {
        gw_target *t = &srv->targets[i];
        sipp_engine_free(t->engine);
        sipp_model_free(t->model);
        gw_upstream_free(t->upstream);
    }
    free(srv->targets);
    srv->targets = NULL;
    srv->n_targets = 0;
}

gw_target *gw_target_find(gw_server *srv, const char *name) {
    for (size_t i = 0; i < srv->n_targets; i++)
        if (strcmp(srv->targets[i].cfg->name, name) == 0) return &srv->targets[i];
    return NULL;
}

bool gw_targets_ready(gw_server *srv) {
    for (size_t i = 0; i < srv->n_targets; i++)
        if (atomic_load(&srv->targets[i].state) != GW_STATE_READY) return false;
    return true;
}
