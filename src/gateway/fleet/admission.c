/*
 * admission.c: which target a generation runs on, and whether it may run now.
 *
 * Lookup. A request names its target in "model" (or names none when the server has one target).
 * A target the caller's token is not scoped to is, to that caller, a target that does not exist:
 * the same 404 and message as an unknown name, and the "'model' is missing" error lists only the
 * targets the caller may use, so that a scoped token learns nothing of the others.
 *
 * Admission. At most max_concurrent_requests generations run at once (across targets); up to
 * max_queue more wait for a permit, in arrival order of wake-up, until their request deadline;
 * beyond that a request is refused at once with 429. Waiters poll for their client going away.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway/fleet/fleet.h"
#include "gateway/http/http.h"
#include "gateway/metrics.h"

#define GW_ADMIT_SLICE_MS 100
#define GW_LOADING_RETRY_S 2
#define GW_QUEUE_RETRY_S 1
#define GW_MAX_MODEL_NAME 256
#define GW_MS_PER_S 1000.0

struct gw_admission {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int max_active, max_queue;
    int active, queued;
};

gw_admission *gw_admission_new(const gw_config *cfg) {
    gw_admission *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    pthread_mutex_init(&a->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&a->cv, &ca);
    pthread_condattr_destroy(&ca);
    a->max_active = cfg->max_concurrent_requests;
    a->max_queue = cfg->max_queue;
    return a;
}

void gw_admission_free(gw_admission *a) {
    if (!a) return;
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->cv);
    free(a);
}

gw_admit_result gw_admit(gw_admission *l, double deadline_ms, bool (*abandoned)(void *), void *arg) {
    pthread_mutex_lock(&l->mu);
    if (l->active < l->max_active) {
        l->active++;
        pthread_mutex_unlock(&l->mu);
        return GW_ADMIT_OK;
    }
    if (l->queued >= l->max_queue) {
        pthread_mutex_unlock(&l->mu);
        return GW_ADMIT_QUEUE_FULL;
    }
    l->queued++;
    gw_admit_result r = GW_ADMIT_OK;
    while (l->active >= l->max_active) {
        if (sipp_now_ms() >= deadline_ms) {
            r = GW_ADMIT_TIMEOUT;
            break;
        }
        pthread_mutex_unlock(&l->mu);
        bool gone = abandoned && abandoned(arg);
        pthread_mutex_lock(&l->mu);
        if (gone) {
            r = GW_ADMIT_ABANDONED;
            break;
        }
        struct timespec ts;
        sipp_deadline_in(&ts, CLOCK_MONOTONIC, GW_ADMIT_SLICE_MS);
        pthread_cond_timedwait(&l->cv, &l->mu, &ts);
    }
    l->queued--;
    if (r == GW_ADMIT_OK) l->active++;
    pthread_mutex_unlock(&l->mu);
    return r;
}

void gw_release(gw_admission *l) {
    pthread_mutex_lock(&l->mu);
    l->active--;
    pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

void gw_admission_counts(gw_admission *l, int *active, int *queued) {
    pthread_mutex_lock(&l->mu);
    *active = l->active;
    *queued = l->queued;
    pthread_mutex_unlock(&l->mu);
}

/* ---- calls -------------------------------------------------------------------------------------- */

static bool abandoned_cb(void *arg) { return gw_call_abandoned(arg); }

gw_target *gw_call_lookup(gw_call *call, const char *name) {
    gw_server *srv = call->srv;
    gw_target *only = name ? NULL : gw_targets_only(srv);
    if (only) return only;
    if (!name) {
        sipp_buf names = {0};
        for (size_t i = 0; i < srv->n_targets; i++)
            if (gw_target_listed(&srv->targets[i]) && gw_auth_allows(call, srv->targets[i].cfg))
                sipp_buf_appendf(&names, "%s%s", names.len ? ", " : "", srv->targets[i].cfg->name);
        gw_reply_error(call, GW_E_INVALID_FIELD, "'model' is missing: name one of the targets (%s)",
                       names.data ? names.data : "");
        sipp_buf_free(&names);
        return NULL;
    }
    gw_target *t = gw_target_find(srv, name);
    if (!t && srv->cfg->models_dir) { /* a file that appeared since */
        gw_residency_rescan(srv);
        t = gw_target_find(srv, name);
    }
    if (!t || !gw_auth_allows(call, t->cfg)) {
        gw_reply_error(call, GW_E_UNKNOWN_TARGET,
                       "the model '%.*s' does not exist on this server; GET /v1/models lists them",
                       GW_MAX_MODEL_NAME, name);
        return NULL;
    }
    return t;
}

gw_target *gw_call_target(gw_call *call, const char *name) {
    gw_server *srv = call->srv;
    gw_target *t = gw_call_lookup(call, name);
    if (!t) return NULL;
    call->target = t->index;
    double deadline = call->t_start + srv->cfg->request_timeout_seconds * GW_MS_PER_S;
    /* A use of the target before the permit: a queued request keeps its model from being evicted. */
    char why[SIPP_ERROR_SIZE];
    gw_acquire_result res = gw_residency_acquire(srv, t, deadline, abandoned_cb, call, why, sizeof why);
    switch (res) {
    case GW_ACQUIRE_OK:
        call->resident = true;
        /* with the use held, so that a keep_alive of 0 cannot unload it before this request runs */
        if (call->keep_alive == GW_KEEP_ALIVE_GIVEN) gw_residency_keep_alive(srv, t, call->keep_alive_s);
        if (call->keep_alive == GW_KEEP_ALIVE_DEFAULT) gw_residency_keep_alive_default(srv, t);
        break;
    case GW_ACQUIRE_NO_ROOM:
    case GW_ACQUIRE_WAITING:
        call->retry_after_s = GW_LOADING_RETRY_S;
        gw_reply_error(call, GW_E_NOT_READY, "%s", why);
        return NULL;
    case GW_ACQUIRE_TIMEOUT: gw_reply_error(call, GW_E_TIMEOUT, "%s", why); return NULL;
    case GW_ACQUIRE_FAILED:
    case GW_ACQUIRE_NOT_READY:
    case GW_ACQUIRE_ABANDONED:
    default: gw_reply_error(call, GW_E_NOT_READY, "%s", why); return NULL;
    }
    gw_metrics_queued(srv->metrics, t->index, 1);
    gw_admit_result ar = gw_admit(srv->admission, deadline, abandoned_cb, call);
    gw_metrics_queued(srv->metrics, t->index, -1);
    switch (ar) {
    case GW_ADMIT_OK:
        call->admitted = true;
        gw_metrics_active(srv->metrics, t->index, 1);
        return t;
    case GW_ADMIT_QUEUE_FULL:
        call->retry_after_s = GW_QUEUE_RETRY_S;
        gw_reply_error(
            call, GW_E_QUEUE_FULL,
            "the server is at max_concurrent_requests (%d) with max_queue (%d) requests waiting; retry later",
            srv->cfg->max_concurrent_requests, srv->cfg->max_queue);
        return NULL;
    case GW_ADMIT_TIMEOUT:
        gw_reply_error(call, GW_E_TIMEOUT, "the request waited request_timeout_seconds (%d) for a free slot",
                       srv->cfg->request_timeout_seconds);
        return NULL;
    case GW_ADMIT_ABANDONED:
    default:
        gw_reply_error(call, GW_E_NOT_READY, "the request was abandoned (client gone or server stopping)");
        return NULL;
    }
}

void gw_call_release(gw_call *call) {
    if (call->resident) {
        call->resident = false;
        gw_residency_release(call->srv, &call->srv->targets[call->target]);
    }
    if (!call->admitted) return;
    call->admitted = false;
    gw_release(call->srv->admission);
    gw_metrics_active(call->srv->metrics, call->target, -1);
}
