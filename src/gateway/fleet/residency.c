/*
 * residency.c: which local models are loaded, loading them on demand and unloading idle ones.
 *
 * A local target is UNLOADED, LOADING, READY (loaded) or FAILED. A call that needs its engine takes
 * a use of it (gw_residency_acquire) and gives it back when the HTTP request is over
 * (gw_residency_release); a target with a use is never unloaded. Taking a use of an UNLOADED target
 * loads it on the calling thread; calls arriving meanwhile wait for that one load (a condition
 * variable) until their request_timeout_seconds, so eight first requests make one load. A load that
 * fails leaves the target FAILED with the reason, which every waiting call and later call gets,
 * until an explicit POST /v1/models/{name}/load, or a change of its file, tries again; other
 * targets are not touched.
 *
 * Files that change. A loaded model's weights are mapped from its file. When model_watch.c reports
 * a change, or a call finds the file is not what the load saw (device, inode, size, modification
 * time; compared before every use is granted), a READY target becomes CHANGED: no new use, calls
 * wait as for a load. Once the file has been quiet FILE_SETTLE_MS and the old engine has no use, the
 * keeper unloads it (without saving its conversations), checks the files (sipp_model_check) and
 * loads them again, or marks the target FAILED naming the file. sigbus_guard.c covers the call that
 * was already reading the old mapping.
 *
 * Admission by memory. Before a load the target's need is known per place (host RAM, each GPU
 * device): what its last load measured (the backend buffers llama.cpp allocated, sipp_engine_memory)
 * or, before its first load, the estimate from the GGUF header (sipp_memory_estimate). The places'
 * budgets are [server] memory_budget_mb for the host (default: total RAM minus HOST_MARGIN) and each
 * device's free memory at start minus $SIPP_GPU_MARGIN_MB. When the need does not fit next to what
 * the loaded and loading targets hold, idle targets are unloaded least recently used first until it
 * does; a target with uses (running or queued requests) is never chosen, nor a pinned one. The plan
 * is made in full before anything is unloaded: when even every candidate would not make room, the
 * call gets a 503 that names the target, its need, the budget and what is held by whom, and nothing
 * is evicted. max_loaded_models caps the count the same way.
 *
 * Idle unloads. keep_alive (seconds) after its last use a target is unloaded by the keeper thread,
 * which sleeps until the nearest deadline; 0 unloads as soon as the last use ends, -1 never. A
 * pinned target is unloaded only on request (POST .../unload). An unload asked for while a target
 * is in use happens when its last use ends.
 *
 * Saved slots. Unloading a target saves the KV of its idle context-keyed conversations
 * (sipp_engine_save_slots, into this gateway's directory of them, slot_dir.c) before its engine is
 * freed, outside the lock; its next load restores them (sipp_engine_restore_slots), so that a
 * conversation does not read its history again after an eviction or a keep_alive unload.
 *
 * Contexts that fit. A target with ctx_size = "auto" gets, before the gateway starts, the largest
 * context (a multiple of 256, at most the model's trained one) whose estimate fits the budgets with
 * the model alone (gw_budgets_fit_contexts): written into its config, so that every later reader
 * (the load, the estimate, the routes) sees a number of tokens.
 *
 * New files. With a models directory, GET /v1/models and a request naming an unknown model list the
 * directory again; a model not yet served becomes an on-demand target (targets.c keeps room).
 *
 * Locking. One mutex guards every target's residency fields (uses, times, memory figures, the
 * model and engine pointers while they change). The state is an atomic as well, so that /ready and
 * /metrics can read it without the lock; code that reads a target's model or engine holds a use
 * (gw_residency_peek for the routes that only describe it). Loads and unloads run outside the lock.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gateway/fleet/fleet.h"
#include "gateway/kinds/kinds.h"
#include "gateway/models_dir.h"
#include "util/assertions.h"

#define MIB ((uint64_t)1 << 20)
#define WAIT_SLICE_MS 100        /* a waiting call checks for its client leaving this often */
#define KEEPER_MAX_SLEEP_MS 1000 /* the keeper re-checks at least this often */
/* A load that does not fit beside models in use waits this long for one of those uses to end
 * before it is refused: a client's next request can arrive before the server has finished with
 * its last one (the reply is sent before the connection's completion is seen). */
#define NO_ROOM_GRACE_MS 2000
/* An rpc target waiting for its servers is tried again after RPC_RETRY_MIN_MS, doubling up to
 * RPC_RETRY_MAX_MS. */
#define RPC_RETRY_MIN_MS 500
#define RPC_RETRY_MAX_MS 30000
#define VICTIM_NAME_SIZE 256 /* a target name as the unload logs it */
/* A target's changed file is looked at once no change has been seen for this long: a copy or a
 * download writes in many steps, and a reload from a half-written file would only fail. */
#define FILE_SETTLE_MS 500

typedef struct gw_residency gw_residency;

struct gw_residency {
    pthread_mutex_t mu;
    pthread_cond_t changed; /* a load finished, a use ended, a deadline moved, or stopping */
    pthread_t keeper;
    bool keeper_started;
    bool stop;
    bool startup_done;
    gw_budgets budgets;        /* what each place (the host, each device) may hold */
    char slots_root[PATH_MAX]; /* this gateway's saved slots (slot_dir.c); "" = none are saved */
    uint64_t slots_max_bytes;
    /* metrics */
    uint64_t loads, load_failures, unloads, evictions;
    double load_seconds_sum;
    uint64_t load_seconds_count;
};

static void estimate(gw_target *t);
static void record_files(gw_target *t);
static bool files_changed(gw_target *t, double now);
static const char *out_of_service(const gw_target *t);
static void set_idle_deadline(gw_target *t);
static gw_target *add_entry(gw_server *srv, const gw_target_config *tc, gw_target_config *owned,
                            gw_upstream *upstream);

static double now_ms(void) { return sipp_now_ms(); }

/* ---- memory per place (budgets.c has the budgets) ----------------------------------------------- */

/* What a target holds (loaded or loading) or would need: its last measurement, else the estimate. */
static const sipp_memory *charge_of(const gw_target *t) {
    return t->measured_valid ? &t->measured : &t->estimate;
}

static bool holds(const gw_target *t) {
    int s = atomic_load(&t->state);
    return gw_kind_of(t)->resident && (s == GW_STATE_READY || s == GW_STATE_LOADING ||
                                       (s == GW_STATE_CHANGED && gw_target_holds_load(t)));
}

/* ---- loading and unloading (outside the lock) --------------------------------------------------- */

/* What targets loaded, taken from them under the lock and released after it (freeing an engine joins
 * its thread, which must not happen under the lock every call takes). */
typedef struct victim {
    const gw_kind *kind;
    gw_loaded loaded;
    char slots_dir[PATH_MAX]; /* where its idle slots are saved first; "" = nowhere */
    uint64_t slots_max_bytes;
    char name[VICTIM_NAME_SIZE];
    struct victim *next;
} victim;
typedef struct victims {
    victim *head;
    size_t n;
} victims;

/* Unloads t (idle, READY) under the lock: what its kind loaded goes to v. */
static void take_unload(gw_residency *r, gw_target *t, victims *v, const char *why) {
    SIPP_ASSERT_HELD(&r->mu);
    victim *x = malloc(sizeof *x);
    gw_loaded loaded = {.model = t->model, .engine = t->engine, .handle = t->handle};
    if (x) {
        x->kind = gw_kind_of(t);
        x->loaded = loaded;
        snprintf(x->name, sizeof x->name, "%s", t->cfg->name);
        x->slots_max_bytes = r->slots_max_bytes;
        *x->slots_dir = '\0';
        if (*r->slots_root) gw_slot_dir_target(r->slots_root, t->index, x->slots_dir, sizeof x->slots_dir);
        x->next = v->head;
        v->head = x;
        v->n++;
    } else { /* no memory for a list node: release it here, under the lock, rather than leak it */
        gw_kind_of(t)->release(&loaded);
    }
    t->engine = NULL;
    t->model = NULL;
    t->handle = NULL;
    t->unload_when_idle = false;
    t->n_unloads++;
    r->unloads++;
    atomic_store(&t->state, GW_STATE_UNLOADED);
    fprintf(stderr, "sipp: target '%s' unloaded (%s)\n", t->cfg->name, why);
}

/* Hands the pages of what an unload freed back to the system. glibc keeps freed memory in its arenas
 * (spread over the arenas of the threads that loaded, decoded and freed) and returns only the top
 * of a heap on its own. Measured here on a tiny model: without this, RSS after an unload grew about
 * 9 MiB a cycle, all of it anonymous; heaptrack found 2.05 MB still allocated at exit after 2 cycles
 * and after 6 alike, so it is freed memory the allocator holds, not a leak, and with malloc_trim
 * RSS stays flat (BENCHMARKS.md). A gateway that swaps models would otherwise hold the sum of its
 * past loads and go past its memory budget. malloc_trim(0) walks every arena. */
static void give_back_freed(void) {
#ifdef __GLIBC__
    malloc_trim(0);
#endif
}

static void free_victims(victims *v) {
    while (v->head) {
        victim *x = v->head;
        v->head = x->next;
        int saved = 0;
        char err[SIPP_ERROR_SIZE];
        if (*x->slots_dir && x->kind->save_state &&
            x->kind->save_state(&x->loaded, x->slots_dir, x->slots_max_bytes, &saved, err) != SIPP_OK)
            fprintf(stderr, "sipp: target '%s': its idle conversations were not all saved: %s\n", x->name,
                    err);
        if (saved)
            fprintf(stderr, "sipp: target '%s': saved %d idle conversation%s for its next load\n", x->name,
                    saved, saved == 1 ? "" : "s");
        x->kind->release(&x->loaded);
        free(x);
    }
    if (v->n) give_back_freed();
    v->n = 0;
}

/* ---- the plan: what to evict so that t fits --------------------------------------------------- */

static bool evictable(const gw_target *c, const gw_target *for_t) {
    return c != for_t && gw_kind_of(c)->resident && atomic_load(&c->state) == GW_STATE_READY &&
           c->uses == 0 && c->peeks == 0 && !c->cfg->pin;
}

/* Whether every place fits t's need next to what is held, without the targets marked out[]. */
static bool fits(const gw_server *srv, const gw_target *t, const bool *out, const char **short_place) {
    const gw_residency *r = srv->residency;
    const sipp_memory *need = charge_of(t);
    for (int p = 0; p < r->budgets.n_places; p++) {
        const char *place = r->budgets.places[p].name;
        uint64_t held = 0;
        for (size_t i = 0; i < srv->n_targets; i++)
            if (holds(&srv->targets[i]) && !out[i] && &srv->targets[i] != t)
                held += gw_place_bytes(charge_of(&srv->targets[i]), place);
        if (held + gw_place_bytes(need, place) > r->budgets.places[p].budget) {
            *short_place = place;
            return false;
        }
    }
    /* a device the budgets do not know (it appeared after start, or the estimate names it) */
    for (int d = 0; d < need->n_devices; d++)
        if (!gw_budgets_find(&r->budgets, need->devices[d].name) && need->devices[d].bytes) {
            *short_place = need->devices[d].name;
            return false;
        }
    if (srv->cfg->max_loaded_models > 0) {
        int loaded = 0;
        for (size_t i = 0; i < srv->n_targets; i++)
            if (holds(&srv->targets[i]) && !out[i] && &srv->targets[i] != t) loaded++;
        if (loaded + 1 > srv->cfg->max_loaded_models) {
            *short_place = NULL;
            return false;
        }
    }
    return true;
}

static void describe_refusal(const gw_server *srv, const gw_target *t, const char *place, char *msg,
                             size_t n) {
    const gw_residency *r = srv->residency;
    sipp_buf b = {0};
    if (!place) {
        sipp_buf_appendf(&b,
                         "model '%s' cannot be loaded: max_loaded_models (%d) are loaded and none is idle",
                         t->cfg->name, srv->cfg->max_loaded_models);
    } else {
        const gw_place_budget *pb = gw_budgets_find(&r->budgets, place);
        const char *where = *place ? place : "host";
        sipp_buf_appendf(&b,
                         "model '%s' needs %" PRIu64 " MiB of %s memory (%s); the budget is %" PRIu64 " MiB",
                         t->cfg->name, (gw_place_bytes(charge_of(t), place) + MIB - 1) / MIB, where,
                         t->measured_valid ? "measured at its last load" : "estimated from its file",
                         pb ? pb->budget / MIB : 0);
        if (!pb) sipp_buf_appendf(&b, " (the device was not seen at start)");
    }
    sipp_buf_appendf(&b, "; held:");
    int listed = 0;
    for (size_t i = 0; i < srv->n_targets; i++) {
        const gw_target *c = &srv->targets[i];
        if (!holds(c)) continue;
        const char *why = c->cfg->pin                                  ? "pinned"
                          : c->uses                                    ? "serving"
                          : atomic_load(&c->state) == GW_STATE_LOADING ? "loading"
                                                                       : "idle";
        sipp_buf_appendf(&b, "%s '%s' %" PRIu64 " MiB (%s)", listed++ ? "," : "", c->cfg->name,
                         (gw_place_bytes(charge_of(c), place ? place : "") + MIB - 1) / MIB, why);
    }
    if (!listed) sipp_buf_appendf(&b, " nothing");
    sipp_buf_appendf(
        &b, "; raise [server] memory_budget_mb, unload a model, or give this one a smaller ctx_size");
    snprintf(msg, n, "%s", b.data ? b.data : "");
    sipp_buf_free(&b);
}

/* Under the lock: chooses idle targets, least recently used first, until t fits, and unloads them
 * into v. False (nothing unloaded, msg set) when it cannot fit. */
static bool make_room(gw_server *srv, gw_target *t, victims *v, char *msg, size_t n) {
    SIPP_ASSERT_HELD(&srv->residency->mu);
    bool *out = calloc(srv->n_targets ? srv->n_targets : 1, sizeof *out);
    size_t *chosen = calloc(srv->n_targets ? srv->n_targets : 1, sizeof *chosen), n_chosen = 0;
    if (!out || !chosen) {
        free(out);
        free(chosen);
        snprintf(msg, n, "out of memory planning the load of model '%s'", t->cfg->name);
        return false;
    }
    const char *place = NULL;
    while (!fits(srv, t, out, &place)) {
        gw_target *lru = NULL;
        for (size_t i = 0; i < srv->n_targets; i++) {
            gw_target *c = &srv->targets[i];
            if (!out[i] && evictable(c, t) && (!lru || c->last_use_ms < lru->last_use_ms)) lru = c;
        }
        if (!lru) {
            describe_refusal(srv, t, place, msg, n);
            free(out);
            free(chosen);
            return false;
        }
        out[lru->index] = true;
        chosen[n_chosen++] = (size_t)lru->index;
    }
    free(out);
    for (size_t k = 0; k < n_chosen; k++) {
        gw_target *c = &srv->targets[chosen[k]];
        c->n_evictions++;
        srv->residency->evictions++;
        char why[SIPP_ERROR_SIZE];
        snprintf(why, sizeof why, "evicted, least recently used, to make room for '%s'", t->cfg->name);
        take_unload(srv->residency, c, v, why);
    }
    free(chosen);
    return true;
}

/* ---- the load, by the first caller -------------------------------------------------------------- */

/* Called with the lock held and t UNLOADED (or FAILED, for an explicit load, or WAITING, for the
 * keeper's retry); returns with it held. On success t is READY; on failure t is FAILED (the model did
 * not load), WAITING (an rpc target's servers cannot be used yet) or UNLOADED (it did not fit,
 * *no_room), msg says why. */
/* Its conversations saved when it was last evicted, back into what a load made (outside the lock). */
static void restore_saved(const gw_target *t, const gw_kind *kind, gw_loaded *loaded, const char *root) {
    char dir[PATH_MAX], err[SIPP_ERROR_SIZE];
    int restored = 0;
    gw_slot_dir_target(root, t->index, dir, sizeof dir);
    if (kind->restore_state(loaded, dir, &restored, err) != SIPP_OK)
        fprintf(stderr, "sipp: target '%s': its saved conversations were not restored: %s\n", t->cfg->name,
                err);
    if (restored)
        fprintf(stderr, "sipp: target '%s': restored %d saved conversation%s\n", t->cfg->name, restored,
                restored == 1 ? "" : "s");
}

static bool load_locked(gw_server *srv, gw_target *t, bool *no_room, char *msg, size_t n) {
    gw_residency *r = srv->residency;
    SIPP_ASSERT_HELD(&r->mu);
    *no_room = false;
    victims v = {.n = 0};
    if (!make_room(srv, t, &v, msg, n)) {
        *no_room = true;
        return false;
    }
    atomic_store(&t->state, GW_STATE_LOADING);
    t->error[0] = '\0';
    record_files(t); /* before the load reads them: a change meanwhile is seen after it */
    pthread_mutex_unlock(&r->mu);

    free_victims(&v);
    const gw_kind *kind = gw_kind_of(t);
    double t0 = now_ms();
    gw_loaded loaded = {.model = NULL};
    sipp_memory measured;
    memset(&measured, 0, sizeof measured);
    char err[SIPP_ERROR_SIZE];
    bool wait = false;
    bool ok = kind->load(srv, t->cfg, &loaded, &measured, &wait, err);
    double secs = (now_ms() - t0) / 1e3;
    if (ok && *r->slots_root && kind->restore_state) restore_saved(t, kind, &loaded, r->slots_root);
    if (ok) {
        char what[SIPP_ERROR_SIZE] = "";
        if (kind->describe_load) kind->describe_load(&loaded, t->cfg, what, sizeof what);
        fprintf(stderr, "sipp: target '%s' ready in %.0f ms: %s%s%s\n", t->cfg->name, secs * 1e3,
                t->cfg->model_path ? t->cfg->model_path : kind->name, *what ? " on " : "", what);
    } else {
        fprintf(stderr, "sipp: target '%s' %s: %s\n", t->cfg->name,
                wait ? "is waiting for its rpc servers (retrying with backoff)" : "failed to load", err);
    }

    pthread_mutex_lock(&r->mu);
    r->load_seconds_sum += secs;
    r->load_seconds_count++;
    if (ok) {
        t->model = loaded.model;
        t->engine = loaded.engine;
        t->handle = loaded.handle;
        t->measured = measured;
        t->measured_valid = true;
        t->last_load_ms = secs * 1e3;
        t->last_use_ms = now_ms();
        t->last_use_unix = sipp_unix_now();
        t->ever_loaded = true;
        t->n_loads++;
        r->loads++;
        atomic_store(&t->state, GW_STATE_READY);
        gw_sigbus_guard_refresh(srv); /* where its files are mapped now, for a SIGBUS's one line */
    } else {
        snprintf(t->error, sizeof t->error, "%s", err);
        snprintf(msg, n, "model '%s' failed to load: %s", t->cfg->name, err);
        r->load_failures++;
        atomic_store(&t->state, wait ? GW_STATE_WAITING : GW_STATE_FAILED);
    }
    pthread_cond_broadcast(&r->changed);
    return ok;
}

/* Whether a loaded target has a use: room may come when it ends. */
static bool busy_holder(const gw_server *srv) {
    for (size_t i = 0; i < srv->n_targets; i++)
        if (holds(&srv->targets[i]) && srv->targets[i].uses > 0) return true;
    return false;
}

/* ---- files that change under a target (model_watch.c sees the changes) --------------------------- */

static void file_id_of(const char *path, gw_file_id *id) {
    struct stat st;
    memset(id, 0, sizeof *id);
    if (!path || stat(path, &st) != 0) return;
    id->exists = true;
    id->dev = (unsigned long long)st.st_dev;
    id->ino = (unsigned long long)st.st_ino;
    id->size = (long long)st.st_size;
    id->mtime_s = (long long)st.st_mtim.tv_sec;
    id->mtime_ns = (long long)st.st_mtim.tv_nsec;
}

static void record_files(gw_target *t) {
    for (int k = 0; k < GW_TARGET_FILES; k++)
        file_id_of(gw_target_file(t->cfg, k), &t->files[k]);
}

/* How file k of t differs from what its last load found; NULL when it does not. */
static const char *file_change(const gw_target *t, int k) {
    const char *path = gw_target_file(t->cfg, k);
    if (!path) return NULL;
    gw_file_id now;
    file_id_of(path, &now);
    const gw_file_id *was = &t->files[k];
    if (!now.exists) return was->exists ? "removed" : NULL;
    if (!was->exists || now.dev != was->dev || now.ino != was->ino) return "replaced by another file";
    if (now.size < was->size) return "truncated in place";
    if (now.size != was->size || now.mtime_s != was->mtime_s || now.mtime_ns != was->mtime_ns)
        return "written in place";
    return NULL;
}

/* A READY target whose files are not what it loaded becomes CHANGED: out of service before another
 * request reaches weights that may be gone from under its mapping, its error naming the file and how,
 * until the keeper reloads it once the file is quiet. True when it did. Lock held. */
static bool files_changed(gw_target *t, double now) {
    for (int k = 0; k < GW_TARGET_FILES; k++) {
        const char *how = file_change(t, k);
        if (!how) continue;
        snprintf(t->error, sizeof t->error,
                 "its file %s was %s while it was loaded; it is out of service until the file is a whole "
                 "model again and it has loaded from it (replace a model by renaming a new file over it)",
                 gw_target_file(t->cfg, k), how);
        t->file_pending = true;
        t->file_event_ms = now;
        atomic_store(&t->state, GW_STATE_CHANGED);
        fprintf(stderr, "sipp: target '%s': %s\n", t->cfg->name, t->error);
        return true;
    }
    return false;
}

/* What a call waiting on t waits for, for its timeout's message. */
static const char *out_of_service(const gw_target *t) {
    return atomic_load(&t->state) == GW_STATE_CHANGED ? "out of service (its file or configuration changed)"
                                                      : "loading";
}

void gw_residency_file_event(gw_server *srv, gw_target *t) {
    if (!gw_kind_of(t)->resident) return;
    gw_residency *r = srv->residency;
    pthread_mutex_lock(&r->mu);
    double now = now_ms();
    t->file_pending = true;
    t->file_event_ms = now;
    if (atomic_load(&t->state) == GW_STATE_READY) files_changed(t, now);
    pthread_cond_broadcast(&r->changed);
    pthread_mutex_unlock(&r->mu);
}

/* Whether t's files can be loaded as they are now, as its kind judges (each file readable when it
 * does not say). err names the file that cannot. Outside the lock (it reads headers). */
static bool files_whole(const gw_target_config *c, char *err) {
    const gw_kind *kind = gw_kind_of_config(c);
    if (kind->files_whole) return kind->files_whole(c, err);
    for (int k = 0; k < GW_TARGET_FILES; k++) {
        const char *f = gw_target_file(c, k);
        if (f && access(f, R_OK) != 0) {
            snprintf(err, SIPP_ERROR_SIZE, "cannot read %s: %s", f, strerror(errno));
            return false;
        }
    }
    return true;
}

/* The saved conversations of t were computed with the weights it had: a new file makes them wrong. */
static void forget_saved_slots(gw_residency *r, const gw_target *t) {
    if (!*r->slots_root) return;
    char dir[PATH_MAX];
    gw_slot_dir_target(r->slots_root, t->index, dir, sizeof dir);
    gw_slot_dir_remove(dir);
}

/* After a check of t's files outside the lock (held on entry and on return): FAILED naming the file
 * when they are not whole, else loaded again when it was loaded, failed or loads at start-up. */
static void load_changed(gw_server *srv, gw_target *t, bool whole, bool again, bool configured,
                         const char *err) {
    if (!whole) {
        snprintf(t->error, sizeof t->error,
                 "its files cannot be loaded now: %s; it is tried again when the file changes", err);
        srv->residency->load_failures++;
        atomic_store(&t->state, GW_STATE_FAILED);
        fprintf(stderr, "sipp: target '%s' failed: %s\n", t->cfg->name, t->error);
        return;
    }
    atomic_store(&t->state, GW_STATE_UNLOADED);
    if (!again) return; /* an on-demand target loads from the new file on its next request */
    fprintf(stderr, "sipp: target '%s': loading %s %s\n", t->cfg->name,
            configured ? "with its new configuration from" : "again from its changed file",
            t->cfg->model_path);
    bool no_room;
    char msg[SIPP_ERROR_SIZE];
    t->uses++; /* not chosen to make room while it loads */
    if (!load_locked(srv, t, &no_room, msg, sizeof msg) && no_room) {
        snprintf(t->error, sizeof t->error, "%s", msg);
        atomic_store(&t->state, GW_STATE_FAILED);
    }
    t->uses--;
    if (atomic_load(&t->state) == GW_STATE_READY) set_idle_deadline(t);
}

/* Lock held, t idle: its old engine goes (without saving its conversations), its files are checked
 * and it loads from them (load_changed). Lets the lock go meanwhile; t stays CHANGED until then. */
static void reload_changed(gw_server *srv, gw_target *t, int was) {
    gw_residency *r = srv->residency;
    victims v = {.n = 0};
    bool configured = t->next_cfg != NULL;
    if (configured) { /* a reload changed or added it: from now on it is what the new file says */
        t->cfg = t->next_cfg;
        t->next_cfg = NULL;
    }
    bool again = gw_target_holds_load(t) || was == GW_STATE_FAILED || t->cfg->load == GW_LOAD_STARTUP;
    if (gw_target_holds_load(t)) {
        take_unload(r, t, &v, configured ? "its configuration changed" : "its file changed");
        if (v.head) v.head->slots_dir[0] = '\0';
    }
    snprintf(t->error, sizeof t->error, "%s: its files are checked before it loads again",
             configured ? "its configuration changed" : "its file changed");
    atomic_store(&t->state, GW_STATE_CHANGED); /* calls wait meanwhile instead of loading it themselves */
    t->measured_valid = false;                 /* a new file: its estimate until it loads */
    pthread_mutex_unlock(&r->mu);
    free_victims(&v);
    forget_saved_slots(r, t);
    char err[SIPP_ERROR_SIZE] = "";
    bool whole = files_whole(t->cfg, err);
    sipp_memory est;
    char est_err[SIPP_ERROR_SIZE];
    if (!whole || gw_estimate_at(t->cfg, t->cfg->ctx_size, &est, est_err) != SIPP_OK)
        memset(&est, 0, sizeof est);
    pthread_mutex_lock(&r->mu);
    t->estimate = est;
    if (r->stop || atomic_load(&srv->draining) || !gw_target_listed(t)) { /* or a reload removed it */
        atomic_store(&t->state, GW_STATE_UNLOADED);
        pthread_cond_broadcast(&r->changed);
        return;
    }
    load_changed(srv, t, whole, again, configured, err);
    pthread_cond_broadcast(&r->changed);
}

/* Lock held. The first target whose files changed, have been quiet for FILE_SETTLE_MS and have no
 * use of its old engine left is reloaded from them. True when one was (the lock was let go); *next
 * is lowered to when the next one settles. A use's release wakes the keeper. */
static bool settle_files(gw_server *srv, double now, double *next) {
    for (size_t i = 0; i < srv->n_targets; i++) {
        gw_target *t = &srv->targets[i];
        if (!t->file_pending || !gw_kind_of(t)->resident || !gw_target_listed(t)) continue;
        int s = atomic_load(&t->state);
        if (s == GW_STATE_LOADING || s == GW_STATE_WAITING) continue; /* seen after that load */
        double at = t->file_event_ms + FILE_SETTLE_MS;
        if (at > now) {
            if (at < *next) *next = at;
            continue;
        }
        if (gw_target_holds_load(t) && (t->uses || t->peeks)) continue;
        t->file_pending = false;
        if (s == GW_STATE_READY && !t->next_cfg && !files_changed(t, now)) continue; /* attributes only */
        t->file_pending = false; /* files_changed set it again */
        reload_changed(srv, t, s);
        return true;
    }
    return false;
}

/* ---- reloads of the configuration (reload.c) ------------------------------------------------------ */

/* A retired entry named name that holds nothing and has no call left: a target of that name added
 * again takes it back, so that its metrics go on. Lock held. */
static gw_target *drained_entry(gw_server *srv, const char *name) {
    for (size_t i = 0; i < srv->n_targets; i++) {
        gw_target *t = &srv->targets[i];
        if (gw_target_listed(t) || gw_target_holds_load(t) || t->upstream || t->supervisor || t->uses ||
            t->peeks || t->waiting || atomic_load(&t->state) == GW_STATE_LOADING)
            continue;
        if (strcmp(t->cfg->name, name) == 0) return t;
    }
    return NULL;
}

/* A drained entry made new for cfg. Lock held. */
static void revive(gw_target *t, const gw_target_config *cfg) {
    t->cfg = cfg;
    t->error[0] = '\0';
    t->ever_loaded = t->measured_valid = t->unload_when_idle = t->keep_alive_override_set = false;
    t->deadline_ms = t->deadline_unix = -1;
    atomic_store(&t->state, GW_STATE_UNLOADED);
    estimate(t);
    atomic_store(&t->retired, false);
}

bool gw_residency_add(gw_server *srv, const gw_target_config *cfg, gw_upstream *upstream) {
    gw_residency *r = srv->residency;
    pthread_mutex_lock(&r->mu);
    gw_target *t = upstream ? NULL : drained_entry(srv, cfg->name);
    if (t)
        revive(t, cfg);
    else
        t = add_entry(srv, cfg, NULL, upstream);
    if (t && !upstream) { /* the keeper loads it, at once when it loads at start-up */
        t->next_cfg = cfg;
        t->file_pending = true;
        t->file_event_ms = now_ms() - FILE_SETTLE_MS;
    }
    pthread_cond_broadcast(&r->changed);
    pthread_mutex_unlock(&r->mu);
    return t != NULL;
}

void gw_residency_retire(gw_server *srv, gw_target *t) {
    gw_residency *r = srv->residency;
    victims v = {.n = 0};
    pthread_mutex_lock(&r->mu);
    atomic_store(&t->retired, true);
    t->file_pending = false;
    t->next_cfg = NULL;
    if (gw_target_holds_load(t) && !t->uses && !t->peeks)
        take_unload(r, t, &v, "removed from the configuration");
    else if (gw_target_holds_load(t) || atomic_load(&t->state) == GW_STATE_LOADING)
        t->unload_when_idle = true; /* the keeper unloads it when its last call ends */
    pthread_cond_broadcast(&r->changed);
    pthread_mutex_unlock(&r->mu);
    free_victims(&v);
}

void gw_residency_reconfigure(gw_server *srv, gw_target *t, const gw_target_config *cfg, bool reload) {
    gw_residency *r = srv->residency;
    pthread_mutex_lock(&r->mu);
    if (!reload) {
        t->cfg = cfg;
        if (t->next_cfg) t->next_cfg = cfg;
        if (!t->uses) set_idle_deadline(t); /* its keep_alive may be another */
    } else {
        t->next_cfg = cfg;
        t->file_pending = true;
        t->file_event_ms = now_ms() - FILE_SETTLE_MS;
        if (atomic_load(&t->state) == GW_STATE_READY) {
            snprintf(t->error, sizeof t->error,
                     "its configuration changed: it loads again with the new settings once its running "
                     "requests end");
            atomic_store(&t->state, GW_STATE_CHANGED);
        }
    }
    pthread_cond_broadcast(&r->changed);
    pthread_mutex_unlock(&r->mu);
}

/* ---- uses --------------------------------------------------------------------------------------- */

gw_acquire_result gw_residency_acquire(gw_server *srv, gw_target *t, double deadline_ms,
                                       bool (*abandoned)(void *), void *arg, char *msg, size_t n) {
    if (!gw_kind_of(t)->resident) return GW_ACQUIRE_OK;
    gw_residency *r = srv->residency;
    double room_deadline = now_ms() + NO_ROOM_GRACE_MS;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        if (atomic_load(&srv->draining) || r->stop) {
            pthread_mutex_unlock(&r->mu);
            snprintf(msg, n, "the server is shutting down");
            return GW_ACQUIRE_NOT_READY;
        }
        int s = atomic_load(&t->state);
        if (!gw_target_listed(t) && s != GW_STATE_READY) { /* found before a reload removed it */
            snprintf(msg, n, "model '%s' was removed from the configuration", t->cfg->name);
            pthread_mutex_unlock(&r->mu);
            return GW_ACQUIRE_FAILED;
        }
        if (s == GW_STATE_READY && files_changed(t, now_ms())) continue; /* CHANGED now: wait for it */
        if (s == GW_STATE_READY) {
            t->uses++;
            pthread_mutex_unlock(&r->mu);
            return GW_ACQUIRE_OK;
        }
        if (s == GW_STATE_FAILED) {
            snprintf(msg, n, "model '%s' failed to load: %s", t->cfg->name, t->error);
            pthread_mutex_unlock(&r->mu);
            return GW_ACQUIRE_FAILED;
        }
        if (s == GW_STATE_WAITING) { /* the keeper retries it; waiting here would only hold the call */
            snprintf(msg, n, "model '%s' is waiting for its rpc servers (retrying): %s", t->cfg->name,
                     t->error);
            pthread_mutex_unlock(&r->mu);
            return GW_ACQUIRE_WAITING;
        }
        if (s == GW_STATE_UNLOADED) {
            bool no_room;
            t->uses++; /* so that it is not chosen to make room for another while it loads */
            bool ok = load_locked(srv, t, &no_room, msg, n);
            if (!ok) t->uses--;
            if (!ok && no_room && now_ms() < room_deadline && now_ms() < deadline_ms && busy_holder(srv)) {
                /* a use that is ending (its reply sent, its connection closing) frees room soon */
                struct timespec until;
                sipp_deadline_in(&until, CLOCK_MONOTONIC, WAIT_SLICE_MS);
                pthread_cond_timedwait(&r->changed, &r->mu, &until);
                continue;
            }
            pthread_mutex_unlock(&r->mu);
            return ok ? GW_ACQUIRE_OK : no_room ? GW_ACQUIRE_NO_ROOM : GW_ACQUIRE_FAILED;
        }
        /* LOADING: wait for that load; CHANGED: for its file to settle and the reload from it */
        double left = deadline_ms - now_ms();
        if (left <= 0) {
            snprintf(msg, n, "model '%s' was still %s after request_timeout_seconds (%d)", t->cfg->name,
                     out_of_service(t), srv->cfg->request_timeout_seconds);
            pthread_mutex_unlock(&r->mu);
            return GW_ACQUIRE_TIMEOUT;
        }
        if (abandoned && abandoned(arg)) {
            pthread_mutex_unlock(&r->mu);
            snprintf(msg, n, "the client left while model '%s' was loading", t->cfg->name);
            return GW_ACQUIRE_ABANDONED;
        }
        t->waiting++;
        struct timespec until;
        sipp_deadline_in(&until, CLOCK_MONOTONIC, left < WAIT_SLICE_MS ? (int)left : WAIT_SLICE_MS);
        pthread_cond_timedwait(&r->changed, &r->mu, &until);
        t->waiting--;
    }
}

/* Seconds t stays loaded after its last use; < 0 forever. Lock held. */
static double keep_alive_of(const gw_target *t) {
    return t->keep_alive_override_set ? t->keep_alive_override : (double)t->cfg->keep_alive_s;
}

static void set_idle_deadline(gw_target *t) {
    double ka = keep_alive_of(t);
    t->deadline_ms = ka < 0 ? -1 : t->last_use_ms + ka * 1e3;
    t->deadline_unix = ka < 0 ? -1 : t->last_use_unix + ka;
}

void gw_residency_release(gw_server *srv, gw_target *t) {
    if (!gw_kind_of(t)->resident) return;
    gw_residency *r = srv->residency;
    pthread_mutex_lock(&r->mu);
    if (t->uses > 0) t->uses--;
    t->last_use_ms = now_ms();
    t->last_use_unix = sipp_unix_now();
    set_idle_deadline(t);
    pthread_cond_broadcast(&r->changed);
    pthread_mutex_unlock(&r->mu);
}

bool gw_residency_peek(gw_server *srv, gw_target *t) {
    if (!gw_kind_of(t)->resident) return false;
    gw_residency *r = srv->residency;
    pthread_mutex_lock(&r->mu);
    bool ok = atomic_load(&t->state) == GW_STATE_READY;
    if (ok) t->peeks++;
    pthread_mutex_unlock(&r->mu);
    return ok;
}

void gw_residency_unpeek(gw_server *srv, gw_target *t) {
    gw_residency *r = srv->residency;
    pthread_mutex_lock(&r->mu);
    if (t->peeks > 0) t->peeks--;
    pthread_cond_broadcast(&r->changed);
    pthread_mutex_unlock(&r->mu);
}

static void keep_alive_set(gw_server *srv, gw_target *t, bool set, double seconds) {
    if (!gw_kind_of(t)->resident) return;
    gw_residency *r = srv->residency;
    pthread_mutex_lock(&r->mu);
    t->keep_alive_override = seconds < 0 ? GW_KEEP_ALIVE_FOREVER : seconds;
    t->keep_alive_override_set = set;
    if (t->uses == 0) set_idle_deadline(t);
    pthread_cond_broadcast(&r->changed);
    pthread_mutex_unlock(&r->mu);
}

void gw_residency_keep_alive(gw_server *srv, gw_target *t, double seconds) {
    keep_alive_set(srv, t, true, seconds);
}

void gw_residency_keep_alive_default(gw_server *srv, gw_target *t) { keep_alive_set(srv, t, false, 0); }

bool gw_residency_loaded(gw_server *srv, gw_target *t, gw_resident *out) {
    memset(out, 0, sizeof *out);
    if (!gw_kind_of(t)->resident) return false;
    gw_residency *r = srv->residency;
    pthread_mutex_lock(&r->mu);
    bool loaded = atomic_load(&t->state) == GW_STATE_READY;
    if (loaded) {
        double ka = keep_alive_of(t);
        bool forever = ka < 0 || (t->cfg->pin && !t->keep_alive_override_set);
        /* in use: its keep_alive starts when the last use ends, which is not known yet */
        out->unload_at = forever ? -1 : t->uses ? sipp_unix_now() + ka : t->deadline_unix;
        const sipp_memory *m = charge_of(t);
        out->total_bytes = sipp_memory_total(m);
        out->device_bytes = out->total_bytes - m->host_bytes;
    }
    pthread_mutex_unlock(&r->mu);
    return loaded;
}

/* ---- explicit load and unload ------------------------------------------------------------------- */

gw_acquire_result gw_residency_load(gw_server *srv, gw_target *t, double deadline_ms, char *msg, size_t n) {
    gw_residency *r = srv->residency;
    pthread_mutex_lock(&r->mu);
    if (atomic_load(&t->state) == GW_STATE_FAILED) atomic_store(&t->state, GW_STATE_UNLOADED); /* try again */
    pthread_mutex_unlock(&r->mu);
    gw_acquire_result ar = gw_residency_acquire(srv, t, deadline_ms, NULL, NULL, msg, n);
    if (ar == GW_ACQUIRE_OK) gw_residency_release(srv, t);
    return ar;
}

bool gw_residency_unload(gw_server *srv, gw_target *t, bool *deferred) {
    gw_residency *r = srv->residency;
    victims v = {.n = 0};
    *deferred = false;
    pthread_mutex_lock(&r->mu);
    int s = atomic_load(&t->state);
    bool loaded = s == GW_STATE_READY || s == GW_STATE_LOADING;
    if (s == GW_STATE_READY && t->uses == 0 && t->peeks == 0) {
        take_unload(r, t, &v, "asked to");
    } else if (loaded) {
        t->unload_when_idle = true;
        *deferred = true;
    }
    pthread_cond_broadcast(&r->changed);
    pthread_mutex_unlock(&r->mu);
    free_victims(&v);
    return loaded;
}

/* ---- the keeper: start-up loads, then idle deadlines -------------------------------------------- */

static bool idle_expired(const gw_target *t, double now) {
    int s = atomic_load(&t->state);
    bool loaded =
        s == GW_STATE_READY || (s == GW_STATE_CHANGED && gw_target_holds_load(t) && !gw_target_listed(t));
    if (!gw_kind_of(t)->resident || !loaded || t->uses || t->peeks) return false;
    if (t->unload_when_idle) return true;
    if (t->cfg->pin && !t->keep_alive_override_set) return false;
    return t->deadline_ms >= 0 && t->deadline_ms <= now;
}

/* A local target waiting for its rpc servers (a supervised one, remote here, is its supervisor's). */
static bool local_waiting(const gw_target *t) {
    return gw_kind_of(t)->resident && atomic_load(&t->state) == GW_STATE_WAITING;
}

static bool any_waiting(const gw_server *srv) {
    for (size_t i = 0; i < srv->n_targets; i++)
        if (local_waiting(&srv->targets[i])) return true;
    return false;
}

/* rpc targets waiting for their servers are tried again at *retry_at, the wait doubling up to
 * RPC_RETRY_MAX_MS; true when it tried (the lock was let go meanwhile). Lock held. */
static bool retry_waiting(gw_server *srv, double now, double *retry_at, int *backoff) {
    SIPP_ASSERT_HELD(&srv->residency->mu);
    if (!any_waiting(srv)) {
        *retry_at = now + KEEPER_MAX_SLEEP_MS;
        *backoff = RPC_RETRY_MIN_MS;
        return false;
    }
    if (now < *retry_at) return false;
    for (size_t i = 0; i < srv->n_targets && !srv->residency->stop && !atomic_load(&srv->draining); i++) {
        gw_target *t = &srv->targets[i];
        if (!local_waiting(t)) continue;
        bool no_room;
        char msg[SIPP_ERROR_SIZE];
        if (!load_locked(srv, t, &no_room, msg, sizeof msg) && no_room) {
            snprintf(t->error, sizeof t->error, "%s", msg);
            atomic_store(&t->state, GW_STATE_FAILED);
        }
        if (atomic_load(&t->state) == GW_STATE_READY) set_idle_deadline(t);
    }
    *backoff = *backoff * 2 > RPC_RETRY_MAX_MS ? RPC_RETRY_MAX_MS : *backoff * 2;
    *retry_at = now_ms() + *backoff;
    return true;
}

static void *keeper_main(void *arg) {
    gw_server *srv = arg;
    gw_residency *r = srv->residency;
    pthread_mutex_lock(&r->mu);
    /* start-up targets, one after the other in the config's order: two loads at once only make both
     * slower, and the first target is usable sooner */
    for (size_t i = 0; i < srv->n_targets && !r->stop && !atomic_load(&srv->draining); i++) {
        gw_target *t = &srv->targets[i];
        if (!gw_kind_of(t)->resident || t->cfg->load != GW_LOAD_STARTUP) continue;
        if (atomic_load(&t->state) != GW_STATE_UNLOADED) continue;
        bool no_room;
        char msg[SIPP_ERROR_SIZE];
        if (!load_locked(srv, t, &no_room, msg, sizeof msg) && no_room) {
            snprintf(t->error, sizeof t->error, "%s", msg);
            atomic_store(&t->state, GW_STATE_FAILED);
            fprintf(stderr, "sipp: target '%s' not loaded at start-up: %s\n", t->cfg->name, msg);
        }
        if (atomic_load(&t->state) == GW_STATE_READY) set_idle_deadline(t);
    }
    r->startup_done = true;
    pthread_cond_broadcast(&r->changed);
    int rpc_backoff = RPC_RETRY_MIN_MS;
    double rpc_retry_at = now_ms() + rpc_backoff;
    while (!r->stop) {
        victims v = {.n = 0};
        double now = now_ms(), next = now + KEEPER_MAX_SLEEP_MS;
        if (retry_waiting(srv, now, &rpc_retry_at, &rpc_backoff)) continue;
        if (settle_files(srv, now, &next)) continue;
        if (rpc_retry_at < next) next = rpc_retry_at;
        for (size_t i = 0; i < srv->n_targets; i++) {
            gw_target *t = &srv->targets[i];
            if (idle_expired(t, now))
                take_unload(r, t, &v,
                            !gw_target_listed(t)  ? "removed from the configuration"
                            : t->unload_when_idle ? "asked to"
                                                  : "keep_alive passed");
            else if (atomic_load(&t->state) == GW_STATE_READY && !t->uses && t->deadline_ms >= 0 &&
                     t->deadline_ms < next)
                next = t->deadline_ms;
        }
        if (v.n) {
            pthread_mutex_unlock(&r->mu);
            free_victims(&v);
            pthread_mutex_lock(&r->mu);
            continue;
        }
        struct timespec until;
        double wait = next - now;
        sipp_deadline_in(&until, CLOCK_MONOTONIC, wait < 1 ? 1 : (int)wait);
        pthread_cond_timedwait(&r->changed, &r->mu, &until);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

/* ---- life ---------------------------------------------------------------------------------------- */

bool gw_residency_start(gw_server *srv, char *err) {
    gw_residency *r = calloc(1, sizeof *r);
    if (!r) return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory") == SIPP_OK;
    pthread_mutex_init(&r->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&r->changed, &ca);
    pthread_condattr_destroy(&ca);
    gw_budgets_init(&r->budgets, srv->cfg);
    if (gw_slot_dir_open(srv->cfg, r->slots_root, sizeof r->slots_root))
        r->slots_max_bytes = (uint64_t)srv->cfg->slot_state_max_mb * MIB;
    srv->residency = r;
    for (size_t i = 0; i < srv->n_targets; i++) {
        gw_target *t = &srv->targets[i];
        if (!gw_kind_of(t)->resident) continue;
        t->deadline_ms = -1;
        t->deadline_unix = -1;
        estimate(t);
    }
    if (pthread_create(&r->keeper, NULL, keeper_main, srv) != 0)
        return sipp_fail(err, SIPP_ERR_INTERNAL, "cannot start the model keeper thread") == SIPP_OK;
    r->keeper_started = true;
    return true;
}

/* Targets waiting for their rpc servers will not get them now: they fail, so that nothing waits for
 * them and /ready says so. Lock held. */
static void fail_waiting(gw_server *srv) {
    SIPP_ASSERT_HELD(&srv->residency->mu);
    for (size_t i = 0; i < srv->n_targets; i++) {
        gw_target *t = &srv->targets[i];
        if (atomic_load(&t->state) != GW_STATE_WAITING) continue;
        char was[SIPP_ERROR_SIZE];
        snprintf(was, sizeof was, "%s", t->error);
        snprintf(t->error, sizeof t->error, "the server stopped while it waited for its rpc servers (%.*s)",
                 (int)(sizeof t->error / 2), was);
        atomic_store(&t->state, GW_STATE_FAILED);
        fprintf(stderr, "sipp: target '%s' failed: %s\n", t->cfg->name, t->error);
    }
}

void gw_residency_stop(gw_server *srv) {
    gw_residency *r = srv->residency;
    if (!r) return;
    pthread_mutex_lock(&r->mu);
    r->stop = true;
    fail_waiting(srv);
    pthread_cond_broadcast(&r->changed);
    pthread_mutex_unlock(&r->mu);
    if (r->keeper_started) pthread_join(r->keeper, NULL);
    pthread_mutex_lock(&r->mu);
    fail_waiting(srv); /* one the keeper's last retry left waiting */
    pthread_mutex_unlock(&r->mu);
    gw_slot_dir_remove(r->slots_root);
    pthread_cond_destroy(&r->changed);
    pthread_mutex_destroy(&r->mu);
    free(r);
    srv->residency = NULL;
}

bool gw_residency_startup_ready(gw_server *srv) {
    gw_residency *r = srv->residency;
    pthread_mutex_lock(&r->mu);
    bool ready = r->startup_done;
    for (size_t i = 0; ready && i < srv->n_targets; i++) {
        const gw_target *t = &srv->targets[i];
        if (gw_kind_of(t)->resident && t->cfg->load == GW_LOAD_STARTUP && gw_target_listed(t) &&
            (atomic_load(&t->state) == GW_STATE_FAILED || !t->ever_loaded))
            ready = false;
    }
    pthread_mutex_unlock(&r->mu);
    return ready;
}

/* ---- estimates ------------------------------------------------------------------------------------ */

static void estimate(gw_target *t) {
    char err[SIPP_ERROR_SIZE];
    /* a header that cannot be read estimates nothing; its load then fails with the reason */
    if (gw_estimate_at(t->cfg, t->cfg->ctx_size, &t->estimate, err) != SIPP_OK)
        memset(&t->estimate, 0, sizeof t->estimate);
}

/* ---- new files in the models directory ---------------------------------------------------------- */

static bool served(const gw_server *srv, const char *name) {
    for (size_t i = 0; i < srv->n_targets; i++)
        if (gw_target_listed(&srv->targets[i]) && strcmp(srv->targets[i].cfg->name, name) == 0) return true;
    return false;
}

/* A new entry at the end of the table for tc (owned: freed with the table), published whole once it
 * is; a remote one serves through upstream at once. NULL when the table is full. Lock held. */
static gw_target *add_entry(gw_server *srv, const gw_target_config *tc, gw_target_config *owned,
                            gw_upstream *upstream) {
    size_t k = srv->n_targets;
    if (k >= srv->max_targets) return NULL;
    gw_target *t = &srv->targets[k];
    memset(t, 0, sizeof *t);
    t->cfg = tc;
    t->owned_cfg = owned;
    t->index = (int)k;
    t->deadline_ms = t->deadline_unix = -1;
    t->upstream = upstream;
    atomic_init(&t->state, upstream ? GW_STATE_READY : GW_STATE_UNLOADED);
    if (gw_kind_of_config(tc)->resident) estimate(t);
    srv->n_targets = k + 1; /* published whole */
    return t;
}

void gw_residency_rescan(gw_server *srv) {
    const char *dir = srv->cfg->models_dir;
    if (!dir) return;
    sipp_store_model *found = NULL;
    size_t n = 0;
    char err[SIPP_ERROR_SIZE];
    if (sipp_store_list(dir, &found, &n, err) != SIPP_OK)
        return; /* the directory went away: keep what is known */
    gw_residency *r = srv->residency;
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < n; i++) {
        if (served(srv, found[i].name) || !gw_discoverable(&found[i]) ||
            !gw_models_dir_allows(dir, &found[i], srv->cfg->models_follow_symlinks))
            continue;
        size_t k = srv->n_targets;
        if (k >= srv->max_targets) {
            fprintf(stderr,
                    "sipp: '%s' in %s is not served: the server has room for %d new models; restart it\n",
                    found[i].name, dir, GW_MAX_DISCOVERED);
            continue;
        }
        gw_target_config *tc = calloc(1, sizeof *tc);
        if (!tc || !gw_target_config_discovered(tc, found[i].name, found[i].path,
                                                srv->cfg->discovered_keep_alive_s)) {
            if (tc) gw_target_config_free(tc);
            free(tc);
            break;
        }
        tc->max_tokens = srv->cfg->discovered_max_tokens;
        add_entry(srv, tc, tc, NULL);
        fprintf(stderr, "sipp: new model '%s' (%s), loaded on first use\n", tc->name, tc->model_path);
    }
    pthread_mutex_unlock(&r->mu);
    sipp_store_list_free(found, n);
    gw_models_dir_report(dir);
}

/* ---- what listing.c reads -------------------------------------------------------------------- */

void gw_residency_facts(gw_server *srv, gw_target *t, gw_target_facts *f) {
    gw_residency *r = srv->residency;
    pthread_mutex_lock(&r->mu);
    f->cfg = t->cfg;
    f->state = atomic_load(&t->state);
    snprintf(f->error, sizeof f->error, "%s",
             f->state == GW_STATE_FAILED || f->state == GW_STATE_WAITING || f->state == GW_STATE_CHANGED
                 ? t->error
                 : "");
    f->keep_alive_s = keep_alive_of(t);
    f->keep_alive_set = t->keep_alive_override_set;
    f->uses = t->uses;
    f->measured_valid = t->measured_valid;
    f->measured = t->measured;
    f->estimate = t->estimate;
    f->ever_loaded = t->ever_loaded;
    f->last_use_unix = t->last_use_unix;
    f->deadline_unix = t->deadline_unix;
    f->last_load_ms = t->last_load_ms;
    f->loads = t->n_loads;
    f->unloads = t->n_unloads;
    f->evictions = t->n_evictions;
    pthread_mutex_unlock(&r->mu);
}

void gw_residency_totals(gw_server *srv, gw_residency_report *out) {
    gw_residency *r = srv->residency;
    pthread_mutex_lock(&r->mu);
    out->budgets = r->budgets;
    for (int p = 0; p < r->budgets.n_places; p++) {
        out->held[p] = 0;
        for (size_t i = 0; i < srv->n_targets; i++)
            if (holds(&srv->targets[i]))
                out->held[p] += gw_place_bytes(charge_of(&srv->targets[i]), r->budgets.places[p].name);
    }
    out->loads = r->loads;
    out->load_failures = r->load_failures;
    out->unloads = r->unloads;
    out->evictions = r->evictions;
    out->load_seconds_sum = r->load_seconds_sum;
    out->load_seconds_count = r->load_seconds_count;
    pthread_mutex_unlock(&r->mu);
}
