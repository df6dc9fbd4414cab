/*
 * guard.h: what a request must pass before its route runs (guard.c): the Host and Origin checks
 * against DNS rebinding and cross-site requests, CORS, the JSON content type of POST bodies, the
 * bearer token and the rate limit.
 */
#ifndef SIPP_GATEWAY_GUARD_H
#define SIPP_GATEWAY_GUARD_H

#include <stdbool.h>

#include "gateway/connection.h"

/* Checks every request (any route, known or not): the method is an HTTP token, the Host is this
 * server's, and the Origin is allowed; sets call->allow_origin. False after replying. */
bool gw_guard_request(gw_call *call);
/* Answers a CORS preflight (OPTIONS). */
void gw_guard_preflight(gw_call *call);
/* Checks a request to an authenticated route: the content type of a POST body, the bearer token
 * and the caller's rate. False after replying. */
bool gw_guard_route(gw_call *call);

#endif
