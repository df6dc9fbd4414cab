/*
 * targets.c: the target table at run time.
 *
 * Remote targets get their upstream here, at start. Local targets start UNLOADED and are loaded by
 * residency.c: the start-up ones (load = "startup", the default of configured targets) one after the
 * other in config order by its keeper thread, the others on their first request. The HTTP server is
 * up meanwhile: /health answers 200 at once, /ready answers 503 until every start-up target has
 * loaded (and while one of them has failed), and a request for a target that is loading waits for
 * that load. A target whose model fails to load stays failed (its requests get 503 with the reason)
 * while the other targets serve.
 *
 * With a models directory the table has room for GW_MAX_DISCOVERED more: a file that appears there
 * becomes a target on the next GET /v1/models (residency.c), published by incrementing n_targets
 * after its entry is complete, so a reader sees every entry below n_targets whole.
 *
 * A target on backend "rpc" whose servers cannot be used yet (not started, unreachable, busy with
 * another client) is WAITING instead of FAILED: not ready, its requests get 503 with the reason,
 * and it is tried again with exponential backoff until it loads or the server shuts down. In the
 * gateway such a target is served by a supervised child process (supervise.c), because a server
 * that dies after the load ends the process that loaded it (SIPP_RPC_LOST_EXIT: ggml's RPC client
 * cannot survive it; see sipp.h): the child goes, the gateway and its other targets stay, and the
 * child is started again when the servers answer. The child itself (a gateway with
 * supervised_child set) loads the target in its own process, with residency.c's keeper retrying.
 */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway/fleet/fleet.h"
#include "gateway/kinds/kinds.h"

size_t gw_targets_capacity(const gw_config *c) {
    return c->n_targets + (c->models_dir ? GW_MAX_DISCOVERED : 0) +
           (c->path && !c->supervised_child ? GW_MAX_RELOAD_ADDED : 0);
}

bool gw_targets_start(gw_server *srv, char *err) {
    const gw_config *c = srv->cfg;
    srv->max_targets = gw_targets_capacity(c);
    srv->targets = calloc(srv->max_targets ? srv->max_targets : 1, sizeof *srv->targets);
    if (!srv->targets) return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory") == SIPP_OK;
    srv->n_targets = c->n_targets;
    for (size_t i = 0; i < c->n_targets; i++) {
        gw_target *t = &srv->targets[i];
        t->cfg = &c->targets[i];
        t->index = (int)i;
        atomic_init(&t->state, GW_STATE_UNLOADED);
        if (gw_kind_of(t)->resident) continue; /* rpc ones: gw_supervise_start, below */
        t->upstream = gw_upstream_new(t->cfg, err);
        if (!t->upstream) return false;
        atomic_store(&t->state, GW_STATE_READY);
    }
    if (!gw_supervise_start(srv, err)) return false;
    for (size_t i = 0; i < c->n_targets; i++) {
        gw_target *t = &srv->targets[i];
        if (!t->supervisor) continue;
        if (!(t->upstream = gw_upstream_new(t->cfg, err))) return false;
        gw_upstream_set_bearer(t->upstream, gw_supervise_token(t));
    }
    gw_sigbus_guard_install();
    if (!gw_residency_start(srv, err)) return false;
    srv->watch = gw_model_watch_start(srv); /* NULL: the files are checked at each request instead */
    return true;
}

void gw_targets_stop(gw_server *srv) {
    gw_model_watch_stop(srv->watch);
    srv->watch = NULL;
    gw_residency_stop(srv);
    for (size_t i = 0; i < srv->n_targets; i++)
        gw_supervise_stop(&srv->targets[i]); /* ends its child, by pid, while its upstream is still here */
    for (size_t i = 0; i < srv->n_targets; i++) {
        gw_target *t = &srv->targets[i];
        if (gw_target_holds_load(t)) {
            gw_loaded loaded = {.model = t->model, .engine = t->engine, .handle = t->handle};
            gw_kind_of(t)->release(&loaded);
        }
        gw_upstream_free(t->upstream);
        if (t->owned_cfg) gw_target_config_free(t->owned_cfg);
        free(t->owned_cfg);
    }
    free(srv->targets);
    srv->targets = NULL;
    srv->n_targets = 0;
}

/* A target's own name first, then its aliases, in config order: the first glob that matches wins,
 * so a config lists specific aliases ("gpt-5-mini") before broad ones ("gpt-5*"). */
gw_target *gw_target_find(gw_server *srv, const char *name) {
    size_t n = srv->n_targets;
    for (size_t i = 0; i < n; i++)
        if (gw_target_listed(&srv->targets[i]) && strcmp(srv->targets[i].cfg->name, name) == 0)
            return &srv->targets[i];
    for (size_t i = 0; i < n; i++) {
        if (!gw_target_listed(&srv->targets[i])) continue;
        const gw_target_config *c = srv->targets[i].cfg;
        for (size_t k = 0; k < c->n_aliases; k++)
            if (fnmatch(c->aliases[k], name, 0) == 0) return &srv->targets[i];
    }
    return NULL;
}

gw_target *gw_targets_only(gw_server *srv) {
    gw_target *only = NULL;
    for (size_t i = 0; i < srv->n_targets; i++) {
        if (!gw_target_listed(&srv->targets[i])) continue;
        if (only) return NULL;
        only = &srv->targets[i];
    }
    return only;
}

/* The start-up targets of residency.c, and the supervised ones that load at start-up serving. */
bool gw_targets_ready(gw_server *srv) {
    for (size_t i = 0; i < srv->n_targets; i++) {
        const gw_target *t = &srv->targets[i];
        if (t->supervisor && t->cfg->load == GW_LOAD_STARTUP && atomic_load(&t->state) != GW_STATE_READY)
            return false;
    }
    return gw_residency_startup_ready(srv);
}
