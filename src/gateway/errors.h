/*
 * errors.h: the kinds of error the gateway answers with (errors.c); each has an HTTP status, an
 * OpenAI type, an Anthropic type and a code. Depends on nothing else in the gateway.
 */
#ifndef SIPP_GATEWAY_ERRORS_H
#define SIPP_GATEWAY_ERRORS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "sipp.h"
#include "util/util.h"

typedef enum gw_error_kind {
    GW_E_INVALID_JSON,      /* 400 */
    GW_E_INVALID_FIELD,     /* 400: a field has the wrong type or value; the message names it */
    GW_E_CONTEXT_LENGTH,    /* 400: the prompt does not fit */
    GW_E_BAD_REQUEST,       /* 400: the HTTP request itself (method, headers) is malformed */
    GW_E_MISSING_KEY,       /* 401 */
    GW_E_INVALID_KEY,       /* 401 */
    GW_E_ORIGIN_FORBIDDEN,  /* 403 */
    GW_E_HOST_FORBIDDEN,    /* 403: a Host that is not this server (DNS rebinding) */
    GW_E_ADMIN_ONLY,        /* 403: loading and unloading models needs an admin token */
    GW_E_UNKNOWN_TARGET,    /* 404: also a target the caller's token may not see */
    GW_E_UNKNOWN_ROUTE,     /* 404 */
    GW_E_NOT_FOUND,         /* 404: a stored response, a model in the store, ... named by the request */
    GW_E_METHOD,            /* 405 */
    GW_E_CONFLICT,          /* 409: the request would replace something it may not (a served model file) */
    GW_E_TOO_LARGE,         /* 413 */
    GW_E_URI_TOO_LONG,      /* 414: the request target is longer than the gateway reads */
    GW_E_MEDIA_TYPE,        /* 415: a POST body that is not application/json */
    GW_E_RANGE,             /* 416: a Range header this file cannot satisfy */
    GW_E_RATE_LIMITED,      /* 429 */
    GW_E_QUEUE_FULL,        /* 429 */
    GW_E_HEADERS_TOO_LARGE, /* 431: the request's header (or trailer) is larger than the gateway reads */
    GW_E_INTERNAL,          /* 500 */
    GW_E_NOT_IMPLEMENTED,   /* 501 */
    GW_E_UPSTREAM,          /* 502 */
    GW_E_NOT_READY,         /* 503: the target is loading, failed to load, or the server is stopping */
    GW_E_BUSY,              /* 503: the server holds max_buffered_bytes of incoming bodies */
    GW_E_TIMEOUT,           /* 504 */
    GW_E_COUNT
} gw_error_kind;

int gw_error_status(gw_error_kind kind);
const char *gw_error_type(gw_error_kind kind);
const char *gw_error_code(gw_error_kind kind);
/* {"error":{"message":..., "type":..., "code":...}} (new reference). A message that is not valid
 * UTF-8 (it may echo a client's bytes) has each invalid byte written as "\xNN". */
json_t *gw_error_json(gw_error_kind kind, const char *message);
/* Whose error shape a route answers in: OpenAI's {"error":{"message","type","code"}}, Anthropic's
 * {"type":"error","error":{"type","message"}}, or Ollama's {"error":"..."}. Statuses are the same. */
typedef enum gw_dialect { GW_DIALECT_OPENAI = 0, GW_DIALECT_ANTHROPIC, GW_DIALECT_OLLAMA } gw_dialect;
/* The error body in a dialect (new reference); the message is escaped as gw_error_json does. */
json_t *gw_error_json_in(gw_dialect dialect, gw_error_kind kind, const char *message);
/* The error kind of a failed engine call. */
gw_error_kind gw_error_from_status(sipp_status status);
/* Appends s with every byte that is not part of valid UTF-8, and every control character, written
 * as the four characters "\xNN": what the gateway echoes of a client's input is always valid JSON
 * text and one line. */
bool gw_echo_escape(const char *s, sipp_buf *out);

#endif
