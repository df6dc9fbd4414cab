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
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/targets.h"
#include "gateway/upstream.h"

/* The engine's own queue holds as many requests as the gateway lets wait; admission (admission.c)
 * is the real bound, so the engine refusing with "busy" is the exception. */
#define GW_ENGINE_QUEUE_MIN 1

static bool load_progress(float progress, void *user) {
    gw_server *srv = user;
    return !atomic_load(&srv->draining);
}

static void load_one(gw_server *srv, gw_target *t) {
    const gw_target_config *c = t->cfg;
    char err[SIPP_ERROR_SIZE];
    double t0 = sipp_now_ms();
    sipp_model_params mp = sipp_model_default_params();
    mp.backend = c->backend;
    mp.flash_attn = c->flash_attn;
    mp.gpu_layers = c->gpu_layers;
    mp.progress = load_progress;
    mp.progress_user = srv;
    sipp_model *m = NULL;
    if (sipp_model_load(c->model_path, &mp, &m, err) != SIPP_OK) {
        snprintf(t->error, sizeof t->error, "%s", err);
        atomic_store(&t->state, GW_STATE_FAILED);
        fprintf(stderr, "sipp: target '%s' failed to load: %s\n", c->name, err);
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
