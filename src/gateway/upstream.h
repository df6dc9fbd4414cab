/*
 * upstream.h: remote targets (upstream.c): proxying with libcurl, replica ejection, health probes.
 */
#ifndef SIPP_GATEWAY_UPSTREAM_H
#define SIPP_GATEWAY_UPSTREAM_H

#include <jansson.h>
#include <stdbool.h>

#include "gateway/connection.h"
#include "gateway/server.h"

gw_upstream *gw_upstream_new(const gw_target_config *cfg, char *err);
void gw_upstream_free(gw_upstream *u);
/* Sends "Authorization: Bearer token" upstream (a supervised child's internal token, supervise.c);
 * before any request uses u. */
void gw_upstream_set_bearer(gw_upstream *u, const char *token);
/* Forwards the call's parsed body (borrowed; its "model" is replaced by the upstream's) to
 * base_url + suffix, on a healthy replica, trying the next one when a replica cannot be reached;
 * replies with the upstream's answer, streamed through when stream is true. */
void gw_upstream_forward(gw_call *call, gw_target *target, const char *suffix, json_t *body, bool stream);
/* Posts body (a JSON object, borrowed; its "model" is set to the upstream's) to base_url + suffix
 * as gw_upstream_forward does, waits for the whole answer and parses it: *status and *answer (new
 * reference) for the caller to translate. False after replying when no answer came. */
bool gw_upstream_fetch(gw_call *call, gw_target *t, const char *suffix, json_t *body, long *status,
                       json_t **answer);
/* Starts/stops the thread that probes ejected replicas (nothing to do without remote targets). */
bool gw_probe_start(gw_server *srv);
void gw_probe_stop(gw_server *srv);
/* {"url":..., "healthy":...} per replica (new reference). */
json_t *gw_upstream_describe(gw_upstream *u);
/* Renders sipp_upstream_healthy gauges. */
void gw_upstream_metrics(gw_upstream *u, const char *target, sipp_buf *out);

#endif
