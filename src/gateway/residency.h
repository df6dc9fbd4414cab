/*
 * residency.h: which local models are loaded (residency.c): loading on demand, admission by
 * measured memory with least-recently-used eviction of idle models, keep-alive, pins, and the
 * models directory's new files. Sits on server.h; targets.c starts it, admission.c takes and gives
 * back uses, the routes describe it.
 */
#ifndef SIPP_GATEWAY_RESIDENCY_H
#define SIPP_GATEWAY_RESIDENCY_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "gateway/server.h"
#include "util/util.h"

#define GW_MAX_DISCOVERED 256 /* targets a models directory may gain while the server runs */

typedef enum gw_acquire_result {
    GW_ACQUIRE_OK,
    GW_ACQUIRE_NO_ROOM,   /* 503: it does not fit next to the models in use */
    GW_ACQUIRE_FAILED,    /* 503: its load failed (the reason is in the message) */
    GW_ACQUIRE_NOT_READY, /* 503: the server is stopping */
    GW_ACQUIRE_TIMEOUT,   /* 504: it was still loading at the deadline */
    GW_ACQUIRE_WAITING,   /* 503: an rpc target waiting for its servers (retried with backoff) */
    GW_ACQUIRE_ABANDONED,
} gw_acquire_result;

/* Makes the budgets, estimates every local target's memory, and starts the keeper thread, which
 * loads the start-up targets in config order and then unloads idle ones at their deadlines. */
bool gw_residency_start(gw_server *srv, char *err);
void gw_residency_stop(gw_server *srv);
/* True once every start-up target has loaded (one evicted since still counts) and none has failed. */
bool gw_residency_startup_ready(gw_server *srv);
/* Takes a use of t, loading it (evicting idle models to make room) when it is unloaded and waiting
 * until deadline_ms when another call is loading it. Anything but OK leaves msg (n bytes) saying
 * why. Remote targets always succeed. */
gw_acquire_result gw_residency_acquire(gw_server *srv, gw_target *t, double deadline_ms,
                                       bool (*abandoned)(void *), void *arg, char *msg, size_t n);
/* Gives back a use: it now counts as used at this moment; its keep_alive starts. */
void gw_residency_release(gw_server *srv, gw_target *t);
/* A use that does not count as one (for describing the engine): true when t is loaded. */
bool gw_residency_peek(gw_server *srv, gw_target *t);
void gw_residency_unpeek(gw_server *srv, gw_target *t);
/* Sets how long t stays loaded after its last use from now on (Ollama's keep_alive): seconds,
 * 0 = unload as soon as it is idle, < 0 = forever (a pinned target too). */
void gw_residency_keep_alive(gw_server *srv, gw_target *t, double seconds);
/* Back to the keep_alive of t's config (an Ollama request that gives none). */
void gw_residency_keep_alive_default(gw_server *srv, gw_target *t);

/* A loaded target as Ollama's /api/ps shows it. */
typedef struct gw_resident {
    double unload_at;      /* unix seconds; -1 = it stays loaded */
    uint64_t total_bytes;  /* what its load measured (its estimate while it loads) */
    uint64_t device_bytes; /* the part on GPU devices */
} gw_resident;
/* True (filling out) when t is loaded now. */
bool gw_residency_loaded(gw_server *srv, gw_target *t, gw_resident *out);
/* Loads t (again, when it failed) and waits for it. */
gw_acquire_result gw_residency_load(gw_server *srv, gw_target *t, double deadline_ms, char *msg, size_t n);
/* Unloads t now, or when its last use ends (*deferred). False when it was not loaded. */
bool gw_residency_unload(gw_server *srv, gw_target *t, bool *deferred);
/* A file of t (its model, mmproj or draft) or its directory entry changed (model_watch.c): when t
 * is loaded and the file is not what it loaded, t is out of service at once (CHANGED); once the file
 * has been quiet a while and t's last use has ended, the keeper reloads t from it, or marks it FAILED
 * naming the file when it is not a whole model. A FAILED target is tried again the same way. */
void gw_residency_file_event(gw_server *srv, gw_target *t);
/* A reload of the configuration (reload.c). Adds a target: a local one is loaded by the keeper as at
 * start (a start-up one at once), a remote one serves through upstream. A retired entry of the same
 * name that has drained is taken back. False when the table has no room. */
bool gw_residency_add(gw_server *srv, const gw_target_config *cfg, gw_upstream *upstream);
/* Takes t out of the configuration: no longer found nor listed; unloaded now when idle, or when its
 * last call ends (the running ones finish). */
void gw_residency_retire(gw_server *srv, gw_target *t);
/* t's configuration becomes cfg: at once when reload is false (how it loads is the same), else t is
 * out of service (CHANGED; new calls wait) until its running calls end, then unloaded and loaded
 * with cfg as at start. */
void gw_residency_reconfigure(gw_server *srv, gw_target *t, const gw_target_config *cfg, bool reload);
/* Adds a target for every new model in the config's models_dir (GET /v1/models, unknown names). */
void gw_residency_rescan(gw_server *srv);
/* t's state, and why it failed or waits (out, n bytes; "" otherwise), read together under the lock:
 * a load may be writing the reason meanwhile. */
int gw_residency_state(gw_server *srv, gw_target *t, char *out, size_t n);
/* Adds state, memory, last use and deadline to a local target's JSON object. */
void gw_residency_describe(gw_server *srv, gw_target *t, json_t *o);
/* [{"place","budget_bytes","held_bytes"}] (new reference). */
json_t *gw_residency_budgets(gw_server *srv);
/* The residency counters and memory gauges, as Prometheus text. */
void gw_residency_metrics(gw_server *srv, sipp_buf *out);
/* [{"place","budget_bytes","from"}]: the budgets a gateway with cfg would start with (doctor). */
json_t *gw_budgets_json(const gw_config *cfg);
/* unloaded, loading, loaded, failed, waiting, changed */
const char *gw_state_name(int state);
/* Resolves each local target's ctx_size "auto" (gw_target_config.ctx_auto) to a number of tokens,
 * the largest context whose estimate fits the budgets with the model alone, and says so on stderr.
 * Before the targets start. */
void gw_residency_fit_contexts(gw_config *cfg);
/* Total RAM minus the margin: the host budget without memory_budget_mb. */
uint64_t gw_residency_default_host_budget(void);

#endif
