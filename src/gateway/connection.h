/*
 * connection.h: the connection and reply layer (connection.c): HTTP on libmicrohttpd, one call
 * per request, the gw_reply_* functions every route answers with, and streamed replies.
 *
 * This layer knows nothing of routes: the listener gives it a gw_handler, whose dispatch runs once
 * a request's headers and body are in and whose finish runs when the request is over. So the
 * layers above (guard, router, admission, routes) call down into this one and never the reverse.
 */
#ifndef SIPP_GATEWAY_CONNECTION_H
#define SIPP_GATEWAY_CONNECTION_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/errors.h"
#include "gateway/server.h"
#include "util/util.h"

/* A stream of reply bytes (server-sent events) produced on the connection's thread. */
typedef struct gw_stream gw_stream;
struct gw_stream {
    /* Appends what comes next to out, waiting up to wait_ms for it. Returns false once the stream
     * has ended and everything has been appended. */
    bool (*pull)(gw_stream *s, sipp_buf *out, int wait_ms);
    /* Asks the stream to end now because the server is stopping: the following pulls append the
     * stream's error event and its proper end (e.g. "data: [DONE]") and return false. NULL: the
     * stream cannot end cleanly, and the connection is closed instead. */
    void (*stop)(gw_stream *s);
    /* Ends the stream, cancelling its work if it has not finished, and frees it. */
    void (*close)(gw_stream *s);
};

typedef struct gw_call gw_call;

#define GW_IGNORED_SIZE 1024
#define GW_IGNORED_HEADER "sipp-ignored"

/* One HTTP request as the layers above see it (connection.c owns it). */
struct gw_call {
    gw_server *srv;
    const char *method;
    const char *path;      /* decoded, without the query; an absolute-form target's path alone */
    const char *authority; /* an absolute-form target's host[:port], which stands for Host; else NULL */
    char request_id[64];
    char client[64];              /* rate-limit identity: the caller's name with a token, else the IP */
    char address[64];             /* the peer's IP address */
    const gw_token_config *token; /* NULL without authentication */
    const char *body;             /* the request body, NUL-terminated; valid while dispatch runs */
    size_t body_len;
    bool too_large; /* the body is over max_request_bytes (and was dropped) */
    bool busy;      /* the body would take the server over max_buffered_bytes */
    double t_start;
    int target;         /* index of the target it names, -1 if none */
    gw_dialect dialect; /* the error shape of the route (set by the router from its table) */
    bool admitted;
    bool resident; /* holds a use of its target (residency.c) */
    /* Ollama's keep_alive, given to its target once the call holds a use of it (gw_call_target): NONE leaves
     * the target's as it is, DEFAULT returns it to the config's, GIVEN sets keep_alive_s (< 0 forever). */
    enum { GW_KEEP_ALIVE_NONE, GW_KEEP_ALIVE_DEFAULT, GW_KEEP_ALIVE_GIVEN } keep_alive;
    double keep_alive_s;
    const char *allow_origin; /* set by the guard: the Origin to echo in CORS headers, or "*" */
    /* What the request carried that the server accepted without acting on it, ", "-separated: the
     * sipp-ignored reply header (api_fields.c's gw_ignored_add writes it, at any time before the
     * request ends; the header goes out with the reply's headers). */
    char ignored[GW_IGNORED_SIZE];
    /* the reply, set by exactly one gw_reply_* call */
    int status;
    const char *error_code;
    int retry_after_s; /* > 0: a Retry-After header */
    bool replied;
    void *priv; /* connection.c's state */
};

/* Replies. Each takes ownership of what it is given. */
void gw_reply_json(gw_call *call, int status, json_t *body);
void gw_reply_error(gw_call *call, gw_error_kind kind, const char *fmt, ...) SIPP_PRINTF(3, 4);
/* A GW_E_INVALID_FIELD reply (the message names the field); returns false, so a request
 * translation can `return gw_reply_invalid_field(call, ...)` where it fails. */
bool gw_reply_invalid_field(gw_call *call, const char *fmt, ...) SIPP_PRINTF(2, 3);
void gw_reply_text(gw_call *call, int status, const char *content_type, char *text, size_t len);
void gw_reply_stream(gw_call *call, const char *content_type, gw_stream *stream);
/* len bytes of the open file fd from offset (a model file, a range of it); the reply closes fd.
 * HEAD gets the headers and Content-Length without the bytes. */
void gw_reply_file(gw_call *call, int status, const char *content_type, int fd, uint64_t offset,
                   uint64_t len);
/* Adds a header to the reply a gw_reply_* call has just made (a no-op without one). */
void gw_reply_header(gw_call *call, const char *name, const char *value);

/* A request header (case-insensitive name), or NULL. */
const char *gw_call_header(gw_call *call, const char *name);
/* The host the request names: an absolute-form target's authority (RFC 9112 3.2.2: the server
 * uses it and ignores Host), else the Host header; NULL when neither is there (HTTP/1.0). */
const char *gw_call_host(gw_call *call);
/* The same with its length, which is more than strlen when the value holds a NUL byte. */
const char *gw_call_header_n(gw_call *call, const char *name, size_t *len);
/* A query-string parameter of the URL (?name=value, decoded), or NULL. */
const char *gw_call_query(gw_call *call, const char *name);
/* The first query-string parameter not in known (a NULL-terminated list), or NULL if all are. */
const char *gw_call_query_unknown(gw_call *call, const char *const *known);
/* True when the client has closed its connection, or the server is cancelling everything. */
bool gw_call_abandoned(gw_call *call);
/* True when the peer went away before the reply was sent (for the log line). */
bool gw_call_client_gone(const gw_call *call);
/* Milliseconds left before the request times out (request_timeout_seconds), at least 1. */
int gw_call_ms_left(const gw_call *call);

/* What the layers above do with a call. */
typedef struct gw_handler {
    void (*dispatch)(gw_call *call); /* the headers and body are in: reply (with a gw_reply_*) */
    void (*finish)(gw_call *call);   /* the request is over, sent or not: give back and record */
} gw_handler;

typedef struct gw_http gw_http;

/* Serves HTTP on listen_fd (which it takes over) with one thread per connection. NULL with a
 * message in err (SIPP_ERROR_SIZE bytes) when the daemon cannot start. */
gw_http *gw_http_start(gw_server *srv, int listen_fd, const gw_handler *handler, char *err);
/* Stops accepting connections at once; open ones carry on. */
void gw_http_quiesce(gw_http *h);
/* Closes every connection and frees the daemon. */
void gw_http_stop(gw_http *h);

#endif
