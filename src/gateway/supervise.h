/*
 * supervise.h: targets served by a child `sipp serve` process the gateway supervises (supervise.c):
 * today every local target on backend "rpc", whose process ggml's RPC client ends when a server it
 * placed layers on goes away. Sits on server.h; targets.c starts and stops them, upstream.c forwards
 * to them and asks here why one went away, the routes describe them.
 */
#ifndef SIPP_GATEWAY_SUPERVISE_H
#define SIPP_GATEWAY_SUPERVISE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/server.h"
#include "util/util.h"

/* The variable that carries the child's internal token (its one [[tokens]] entry). */
#define GW_SUPERVISED_TOKEN_ENV "SIPP_SUPERVISED_TOKEN"
/* The descriptor a child finds its listen socket on (bound by the parent, the same port for every
 * child it starts, so the target's address never changes). */
#define GW_SUPERVISED_LISTEN_FD 3

/* True when this gateway serves target cfg through a supervised child (backend "rpc", and this
 * process is not itself such a child). */
bool gw_supervise_wanted(const gw_server *srv, const gw_target_config *cfg);
/* Makes every wanted target of the table a supervised one, in groups of targets that share an rpc
 * server (one child each): its cfg becomes an owned remote one pointing at the child (the caller
 * makes its upstream, with gw_supervise_token), and a thread per group probes the rpc servers,
 * starts the child, watches it, and restarts it with backoff after it exits. */
bool gw_supervise_start(gw_server *srv, char *err);
/* Ends t's child (SIGTERM, then SIGKILL after a grace period), by pid, and joins its thread; the
 * other targets of its group are done with it too. */
void gw_supervise_stop(gw_target *t);
/* t's state, with its error (n bytes of why) when failed or waiting, read under the supervisor's lock. */
int gw_supervise_state(gw_target *t, char *why, size_t n);
/* True when t is supervised and READY; otherwise msg (n bytes) says why not (its state's error). */
bool gw_supervise_serving(gw_target *t, char *msg, size_t n);
/* How many children of t have exited so far: a transfer notes it when it starts. */
uint64_t gw_supervise_epoch(gw_target *t);
/* A transfer to t's child, started at epoch, broke off: waits up to wait_ms for the supervisor to
 * see that child exit, then writes why it went away (its last stderr line, which names the rpc
 * host) to msg. False when it did not exit meanwhile (the break was something else). */
bool gw_supervise_lost(gw_target *t, uint64_t epoch, int wait_ms, char *msg, size_t n);
/* For `sipp serve ... --supervised-target NAME` (serve.c), the child's side: narrows cfg, before
 * validation, to the targets named: the other targets, models directory and tokens go; one token
 * read from GW_SUPERVISED_TOKEN_ENV guards it; it listens on the socket the parent passed
 * (GW_SUPERVISED_LISTEN_FD) and loads its target at start, pinned. False with a line in errs when
 * a target is not there. */
bool gw_config_supervised(gw_config *cfg, const char *const *names, size_t n_names, sipp_buf *errs);
/* The internal token t's child accepts (for its upstream's Authorization). */
const char *gw_supervise_token(gw_target *t);
/* Adds "supervised": {pid, restarts, last_exit} to a target's JSON object. */
void gw_supervise_describe(gw_target *t, json_t *o);
/* The child's own /v1/backends entry for its target (backend, reason, devices, placement: which
 * layers sit on which host), new reference; NULL when it is not serving or does not answer. */
json_t *gw_supervise_backend(gw_target *t);
/* sipp_supervised_restarts_total per supervised target, as Prometheus text (with its header). */
void gw_supervise_metrics(gw_server *srv, sipp_buf *out);
#endif
