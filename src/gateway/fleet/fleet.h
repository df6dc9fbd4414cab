/*
 * fleet.h: the targets at run time (fleet/): the table and its readiness (targets.c), which
 * models are loaded (residency.c; what it says of them, listing.c) within what each place may hold
 * (budgets.c), who may run now (admission.c), the one path from a route to a target's kind
 * (dispatch.c), files that change under a target (model_watch.c, sigbus_guard.c), saved slots
 * (slot_dir.c), SIGHUP's reload (reload.c) and `serve --check` (check.c). What the rest of the
 * gateway includes of fleet/.
 */
#ifndef SIPP_GATEWAY_FLEET_FLEET_H
#define SIPP_GATEWAY_FLEET_FLEET_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/config.h"
#include "gateway/field_names.h"
#include "gateway/http/http.h"
#include "gateway/kinds/kinds.h"
#include "gateway/request_parse.h"
#include "gateway/server.h"
#include "util/util.h"

/*
 * ---- admission.c: which target a generation runs on and whether it may run now: the
 * target lookup as the caller's token sees it, readiness, and the permits of
 * max_concurrent_requests with a queue of max_queue.
 */
gw_admission *gw_admission_new(const gw_config *cfg);
void gw_admission_free(gw_admission *a);

typedef enum gw_admit_result {
    GW_ADMIT_OK,
    GW_ADMIT_QUEUE_FULL,
    GW_ADMIT_TIMEOUT,
    GW_ADMIT_ABANDONED
} gw_admit_result;
/* Waits for one of max_concurrent_requests permits until deadline_ms (sipp_now_ms clock); at most
 * max_queue calls wait. abandoned() is polled while waiting. */
gw_admit_result gw_admit(gw_admission *a, double deadline_ms, bool (*abandoned)(void *), void *arg);
void gw_release(gw_admission *a);
/* How many calls hold a permit / wait for one. */
void gw_admission_counts(gw_admission *a, int *active, int *queued);

/* The target a generation names as the call's token sees it (NULL name: the only target), or NULL
 * after replying 400 (no name and several targets) or 404 (unknown or hidden by the token's scope). */
gw_target *gw_call_lookup(gw_call *call, const char *name);
/* gw_call_lookup, then checks the target is ready and takes an admission permit (waiting in the
 * queue when needed). On failure it has replied and returns NULL. */
gw_target *gw_call_target(gw_call *call, const char *name);
/* Gives back the call's permit, if it holds one (the request is over). */
void gw_call_release(gw_call *call);

/*
 * ---- budgets.c: what the loaded models may hold per place, the estimates, ctx_size "auto".
 */
typedef struct gw_place_budget {
    char name[32]; /* device name; "" = host */
    uint64_t budget;
} gw_place_budget;
typedef struct gw_budgets {
    gw_place_budget places[1 + SIPP_MEMORY_MAX_DEVICES]; /* [0] is the host */
    int n_places;
} gw_budgets;
/* The budgets a gateway with cfg starts with: the host's, then each GPU device's. */
void gw_budgets_init(gw_budgets *b, const gw_config *cfg);
/* The budget of place name ("" = host), or NULL for a place the budgets do not know. */
const gw_place_budget *gw_budgets_find(const gw_budgets *b, const char *name);
/* What m takes at place ("" = the host). */
uint64_t gw_place_bytes(const sipp_memory *m, const char *place);
/* [{"place","budget_bytes","from"}]: the budgets a gateway with cfg would start with (doctor). */
json_t *gw_budgets_json(const gw_config *cfg);
/* Total RAM minus the margin: the host budget without memory_budget_mb. */
uint64_t gw_budgets_default_host(void);
/* What a load of c with ctx_size tokens of context will take, from its files' headers (its kind's
 * estimate; nothing for a kind that loads nothing). */
sipp_status gw_estimate_at(const gw_target_config *c, int ctx_size, sipp_memory *out, char *err);
/* Resolves each local target's ctx_size "auto" (gw_target_config.ctx_auto) to a number of tokens,
 * the largest context whose estimate fits the budgets with the model alone, and says so on stderr.
 * Before the targets start. */
void gw_budgets_fit_contexts(gw_config *cfg);

/*
 * ---- check.c: what `sipp serve --check` finds beyond the file's own keys.
 * Depends only on config.h.
 */
/* Checks a validated configuration against what it names, reading only file headers: every local
 * target's model as a load would check it first, its projector (a projector, of the model's width),
 * and with aliases, aliases that can never route (one that is another target's name, or that an
 * earlier alias of another target always catches: a mistake --check names, which a running server
 * survives, so a reload leaves it out). Problems are appended to errs as "CONFIG: target 'NAME': ..."
 * lines; false when there was any. */
bool gw_config_check_deep(const gw_config *cfg, const char *config, bool aliases, sipp_buf *errs);

/*
 * ---- dispatch.c: the one path from a route's request to its answer.
 */
/* Decodes body (stolen; NULL: the call's body, parsed here) for d->api, resolves its target with
 * the caller's scope, and forwards the request to a remote target or runs it on a local one.
 * Replies always. */
void gw_dispatch_run(gw_call *call, json_t *body, const gw_dispatch *d);

/* gw_dispatch_run for a route of an API remote targets speak (OpenAI's, sipp's native), on the
 * call's own body: a remote target is forwarded it at its own path (/v1/chat/completions at
 * base_url + "/chat/completions", /v1/query at base_url + "/query", ...). */
void gw_dispatch_call(gw_call *call, gw_api api, const gw_format *fmt);

/*
 * ---- listing.c: what residency says of the targets: their states and residency objects, the views
 * the kinds describe them from, the budgets with what is held, and the /metrics lines.
 */
/* t's state, and why it failed or waits (out, n bytes; "" otherwise), read together (a load may be writing
 * the reason meanwhile). */
int gw_residency_state(gw_server *srv, gw_target *t, char *out, size_t n);
/* Adds state, memory, last use and deadline to a local target's JSON object. */
void gw_residency_describe(gw_server *srv, gw_target *t, json_t *o);
/* Opens one description of t (/v1/models, /v1/backends, Ollama's show) for its kind: its state, and
 * for a resident kind its residency object and a hold that keeps it loaded while the kind reads it.
 * gw_target_view_close ends it. */
void gw_target_view_open(gw_server *srv, gw_target *t, gw_target_view *v);
void gw_target_view_close(gw_server *srv, gw_target *t, gw_target_view *v);
/* t's state and why it failed or waits ("" when neither): its kind's own, else residency's. */
int gw_target_status(gw_server *srv, gw_target *t, char *why, size_t n);
/* [{"place","budget_bytes","held_bytes"}] (new reference). */
json_t *gw_residency_budgets(gw_server *srv);
/* The residency counters and memory gauges, as Prometheus text. */
void gw_residency_metrics(gw_server *srv, sipp_buf *out);

/*
 * ---- model_watch.c: the local targets' files watched for changes, which it reports to
 * residency.c. Sits on server.h; targets.c starts and stops it.
 */
typedef struct gw_model_watch gw_model_watch;

/* Starts the thread that watches every local target's model, mmproj and draft files and their
 * directories. NULL (after a line on stderr) when inotify cannot be used: a changed file is then
 * seen at its target's next request. */
gw_model_watch *gw_model_watch_start(gw_server *srv);
/* Stops and frees it (NULL: nothing). */
void gw_model_watch_stop(gw_model_watch *w);

/*
 * ---- reload.c: SIGHUP: the configuration file read again and applied while the gateway serves
 *. Sits on residency and targets; gateway.c calls it when the signal comes.
 */
/* How the configuration is made again: `sipp serve` reads its file and applies its command line
 * as it did at start, validated and checked as --check does. build fills out (initialised by the
 * caller with gw_config_init) or returns false with one problem a line in errs. */
typedef struct gw_reloader {
    bool (*build)(void *arg, gw_config *out, sipp_buf *errs);
    void *arg;
} gw_reloader;

/* Reads the configuration again (rl NULL: there is no file; says so) and applies it: targets
 * added, removed or changed are loaded, drained and unloaded as on a start and a stop, the others
 * serve on untouched. A file with problems changes nothing (they are logged). Settings the running
 * server took at start keep their values, each logged as needing a restart. */
void gw_reload(gw_server *srv, const gw_reloader *rl);
/* Frees what reloads replaced, after the targets have stopped. */
void gw_reloads_free(gw_server *srv);

/*
 * ---- residency.c: which local models are loaded: loading on demand, admission by
 * measured memory with least-recently-used eviction of idle models, keep-alive, pins, and the
 * models directory's new files. Sits on server.h; targets.c starts it, admission.c takes and gives
 * back uses, the routes describe it.
 */
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
/* What residency holds of t, copied under its lock (listing.c renders it). */
typedef struct gw_target_facts {
    const gw_target_config *cfg; /* its configuration then (a reload keeps the old one alive) */
    int state;                   /* GW_STATE_* */
    char error[SIPP_ERROR_SIZE]; /* why it failed, waits or changed; "" otherwise */
    double keep_alive_s;         /* its keep-alive now (a request's, else its config's); < 0 forever */
    bool keep_alive_set;         /* a request set it */
    int uses;
    bool measured_valid, ever_loaded;
    sipp_memory measured, estimate;
    double last_use_unix, deadline_unix, last_load_ms;
    uint64_t loads, unloads, evictions;
} gw_target_facts;
void gw_residency_facts(gw_server *srv, gw_target *t, gw_target_facts *out);
/* The budgets, what the loaded models hold at each of their places, and the counters, copied under
 * residency's lock. */
typedef struct gw_residency_report {
    gw_budgets budgets;
    uint64_t held[1 + SIPP_MEMORY_MAX_DEVICES]; /* per place of budgets */
    uint64_t loads, load_failures, unloads, evictions, load_seconds_count;
    double load_seconds_sum;
} gw_residency_report;
void gw_residency_totals(gw_server *srv, gw_residency_report *out);

/*
 * ---- sigbus_guard.c: one line naming the model file, and exit status 75, when a request reads a mapped
 * model file that was cut short under it. Sits on server.h; residency.c tells it
 * where the loaded targets' files are mapped.
 */
/* The exit status after such a SIGBUS: EX_TEMPFAIL, as a lost rpc server (SIPP_RPC_LOST_EXIT). */
#define GW_MAPPED_FILE_LOST_EXIT SIPP_RPC_LOST_EXIT

/* Installs the SIGBUS handler (once per process). */
void gw_sigbus_guard_install(void);
/* Rebuilds the table of mappings from /proc/self/maps: every range that maps a file of a loaded
 * target (matched by device and inode, as its last load recorded them). Called with the residency
 * lock held, after a load. */
void gw_sigbus_guard_refresh(gw_server *srv);

/*
 * ---- slot_dir.c: where a gateway keeps the saved slots of the models it unloads, for
 * residency.c's sipp_engine_save_slots / sipp_engine_restore_slots.
 */
/* Makes this gateway's directory (gw-PID) under [server] slot_state_dir or the default, and removes
 * those of gateways that are no longer running. False (nothing is saved) with the reason logged when
 * it cannot, or when slot_state_max_mb is 0. */
bool gw_slot_dir_open(const gw_config *cfg, char *root, size_t n);
/* The directory of one target under root. */
void gw_slot_dir_target(const char *root, int index, char *out, size_t n);
/* Removes root with everything in it (the server is stopping). */
void gw_slot_dir_remove(const char *root);

/*
 * ---- targets.c: the targets at run time: the table, remote targets' upstreams, readiness;
 * the local models' loading is residency.h's.
 */
/* Targets reloads of the configuration may add while the server runs, all reloads together (a target
 * removed and added again takes its old entry back when it has drained). */
#define GW_MAX_RELOAD_ADDED 64

/* Entries the target table has room for: the config's, GW_MAX_DISCOVERED with a models directory,
 * and GW_MAX_RELOAD_ADDED with a configuration file (reload.c). */
size_t gw_targets_capacity(const gw_config *c);
/* Makes every remote target's upstream and starts residency.c, which loads the start-up targets in
 * the background (one after the other, in config order) and the others on demand. */
bool gw_targets_start(gw_server *srv, char *err);
/* Waits for the loader and frees engines, models and upstreams. */
void gw_targets_stop(gw_server *srv);
gw_target *gw_target_find(gw_server *srv, const char *name);
bool gw_targets_ready(gw_server *srv);
/* The one target in the configuration, or NULL when there are several (or none). */
gw_target *gw_targets_only(gw_server *srv);

#endif
