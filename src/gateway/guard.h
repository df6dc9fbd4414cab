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
/* The body an authenticated route takes on POST. */
typedef enum gw_body_kind {
    GW_BODY_JSON,   /* application/json */
    GW_BODY_OLLAMA, /* JSON, also without Content-Type, as text/plain or curl -d's form type */
    GW_BODY_FORM,   /* multipart/form-data (OpenAI's audio route) */
} gw_body_kind;
/* Checks a request to an authenticated route: the content type of a POST body (body: what the
 * route takes), the bearer token and the caller's rate. False after replying. */
bool gw_guard_route(gw_call *call, gw_body_kind body);

#endif
