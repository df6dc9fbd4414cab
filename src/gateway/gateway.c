/*
 * gateway.c: the top of the gateway (gw_serve): the server's modules started over the listen socket
 * (http/listener.c), signals and the graceful shutdown.
 *
 * Shutdown. SIGTERM, SIGINT and SIGHUP are blocked in every thread and taken by the main thread
 * with sigtimedwait. SIGHUP reads the configuration file again and applies it (reload.c) and the
 * server goes on; SIGTERM and SIGINT drain. On the first of those, the daemon
 * stops accepting, new requests on open connections get 503, and in-flight requests get
 * shutdown_timeout_seconds to finish; then cancel_all is raised, which every wait loop checks:
 * a stream ends with an error event and its proper end, a waiting request with 503. After a grace
 * period the daemon is stopped. The exit status is 0.
 *
 * A second signal exits at once (status 0, "sipp: second signal: exiting now" on stderr), whatever
 * the drain is waiting on: a thread started at the first signal takes the next one and calls _exit.
 * The main thread cannot do it itself, since the steps of a drain (stopping the HTTP server, the
 * engines) wait on threads that may be busy in llama.cpp code that cannot be interrupted.
 * Supervised children die with the parent (PR_SET_PDEATHSIG); lock files are reclaimed by pid.
 */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "gateway/api/api.h"
#include "gateway/fleet/fleet.h"
#include "gateway/gateway.h"
#include "gateway/http/http.h"
#include "gateway/kinds/kinds.h"
#include "gateway/mcp_client.h"
#include "gateway/metrics.h"

#define GW_SIGNAL_SLICE_MS 200 /* the main thread's wait between checks */
#define GW_DRAIN_POLL_MS 50
#define GW_CANCEL_GRACE_MS 5000 /* after cancelling, how long requests get to end */
#define GW_MS_PER_S 1000.0

/* Waits for one of the signals of set up to ms; the signal, or 0 when none came. */
static int wait_signal(const sigset_t *set, int ms) {
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    int sig = sigtimedwait(set, NULL, &ts);
    return sig > 0 ? sig : 0;
}

static void sleep_ms(int ms) {
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The thread that ends the process on the second stop signal (the set stays blocked everywhere). */
static void *second_signal(void *arg) {
    const sigset_t *set = arg;
    int sig = 0;
    while (sigwait(set, &sig) != 0) {
    }
    static const char msg[] = "sipp: second signal: exiting now\n";
    ssize_t unused = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)unused;
    _exit(0);
    return NULL;
}

static void shutdown_gracefully(gw_server *srv, gw_http *http, const sigset_t *set) {
    static sigset_t watched; /* the watcher outlives this frame */
    watched = *set;
    sigdelset(&watched, SIGHUP); /* stays blocked: a reload asked for during the drain is not a stop */
    pthread_t watcher;
    bool watching = pthread_create(&watcher, NULL, second_signal, &watched) == 0;
    if (watching) pthread_detach(watcher);
    atomic_store(&srv->draining, true);
    gw_http_quiesce(http);
    int n = atomic_load(&srv->in_flight);
    fprintf(stderr, "sipp: shutting down: %d request%s in flight, waiting up to %d s\n", n, n == 1 ? "" : "s",
            srv->cfg->shutdown_timeout_seconds);
    double deadline = sipp_now_ms() + srv->cfg->shutdown_timeout_seconds * GW_MS_PER_S;
    while (atomic_load(&srv->in_flight) > 0 && sipp_now_ms() < deadline) {
        if (!watching && wait_signal(&watched, GW_DRAIN_POLL_MS)) break; /* a second signal: stop waiting */
        if (watching) sleep_ms(GW_DRAIN_POLL_MS);
    }
    if ((n = atomic_load(&srv->in_flight)) > 0) {
        fprintf(stderr, "sipp: cancelling %d request%s still running\n", n, n == 1 ? "" : "s");
        atomic_store(&srv->cancel_all, true);
        double grace = sipp_now_ms() + GW_CANCEL_GRACE_MS;
        while (atomic_load(&srv->in_flight) > 0 && sipp_now_ms() < grace)
            sleep_ms(GW_DRAIN_POLL_MS);
    }
    atomic_store(&srv->cancel_all, true);
    gw_http_stop(http);
}

static void free_modules(gw_server *srv) {
    gw_targets_stop(srv);
    gw_reloads_free(srv); /* the configurations reloads made: the targets pointed into them */
    gw_metrics_free(srv->metrics);
    gw_limits_free(srv->limits);
    gw_admission_free(srv->admission);
    gw_responses_free(srv->responses);
    sipp_media_budget_free(srv->media_budget);
    gw_mcp_free(srv->mcp); /* stops their children */
}

int gw_serve(gw_config *cfg, const gw_reloader *reload) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL); /* before any thread starts: they all inherit it */
    struct sigaction ign = {.sa_handler = SIG_IGN};
    sigaction(SIGPIPE, &ign, NULL);

    gw_budgets_fit_contexts(cfg); /* before anything reads a target's ctx_size */
    gw_server srv = {.cfg = cfg, .started_unix = (long long)time(NULL)};
    char err[SIPP_ERROR_SIZE];
    int port = 0;
    int lfd = gw_listen(cfg, &port, err);
    if (lfd < 0) {
        fprintf(stderr, "sipp: %s\n", err);
        return 1;
    }
    srv.metrics = gw_metrics_new(gw_targets_capacity(cfg));
    srv.limits = gw_limits_new(cfg);
    srv.admission = gw_admission_new(cfg);
    srv.responses = gw_responses_new(cfg);
    srv.media_budget = sipp_media_budget_new(cfg->media_decoded_budget);
    srv.mcp = gw_mcp_new(cfg);
    bool made = srv.metrics && srv.limits && srv.admission && srv.responses && srv.media_budget && srv.mcp;
    if (!made || !gw_targets_start(&srv, err)) {
        fprintf(stderr, "sipp: %s\n", made ? err : "out of memory");
        close(lfd);
        free_modules(&srv);
        return 1;
    }
    gw_http *http = gw_http_start(&srv, lfd, &gw_router, err);
    if (!http) {
        fprintf(stderr, "sipp: %s:%d\n", err, port);
        atomic_store(&srv.draining, true);
        free_modules(&srv);
        return 1;
    }
    gw_probe_start(&srv);
    bool v6 = strchr(cfg->host, ':') != NULL;
    fprintf(stderr, "sipp: listening on http://%s%s%s:%d (%zu target%s)\n", v6 ? "[" : "", cfg->host,
            v6 ? "]" : "", port, cfg->n_targets, cfg->n_targets == 1 ? "" : "s");
    for (int sig = 0; sig != SIGTERM && sig != SIGINT;) {
        sig = wait_signal(&set, GW_SIGNAL_SLICE_MS);
        if (sig == SIGHUP) gw_reload(&srv, reload);
    }
    shutdown_gracefully(&srv, http, &set);
    gw_probe_stop(&srv);
    free_modules(&srv);
    fprintf(stderr, "sipp: stopped\n");
    return 0;
}
