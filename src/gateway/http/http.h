/*
 * http.h: the gateway's HTTP room (http/): the listen socket (listener.c), calls, replies and
 * streams on libmicrohttpd (connection.c), multipart bodies (multipart.c), the Range header
 * (range.c), server-sent events (sse.c), bearer tokens (auth.c), the checks before a route
 * (guard.c) and per-client rate limits (rate_limit.c). It knows no route, kind or target: the
 * router is handed to it. What the rest of the gateway includes of http/.
 */
#ifndef SIPP_GATEWAY_HTTP_HTTP_H
#define SIPP_GATEWAY_HTTP_HTTP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/config.h"
#include "gateway/errors.h"
#include "gateway/server.h"
#include "util/util.h"

/*
 * ---- connection.c: the connection and reply layer: HTTP on libmicrohttpd, one call
 * per request, the gw_reply_* functions every route answers with, and streamed replies.
 *
 * This layer knows nothing of routes: the listener gives it a gw_handler, whose dispatch runs once
 * a request's headers and body are in and whose finish runs when the request is over. So the
 * layers above (guard, router, admission, routes) call down into this one and never the reverse.
 */
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
     * sipp-ignored reply header (api/fields.c's gw_ignored_add writes it, at any time before the
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
    void (*route)(gw_call *call);  /* the headers and body are in: reply (with a gw_reply_*) */
    void (*finish)(gw_call *call); /* the request is over, sent or not: give back and record */
} gw_handler;

typedef struct gw_http gw_http;

/* Serves HTTP on listen_fd (which it takes over) with one thread per connection. NULL with a
 * message in err (SIPP_ERROR_SIZE bytes) when the daemon cannot start. */
gw_http *gw_http_start(gw_server *srv, int listen_fd, const gw_handler *handler, char *err);
/* Stops accepting connections at once; open ones carry on. */
void gw_http_quiesce(gw_http *h);
/* Closes every connection and frees the daemon. */
void gw_http_stop(gw_http *h);

/* Names something the server accepted without acting on it (a field, "include[0]", "tools[4]") in
 * the call's sipp-ignored header, once; the gateway's debug log (SIPP_LOG=debug) lists them too. */
void gw_ignored_add(gw_call *call, const char *name);
/* The same with a printf-style name. */
void gw_ignored_addf(gw_call *call, const char *fmt, ...) SIPP_PRINTF(2, 3);

/*
 * ---- listener.c: the listen socket.
 */
/* The descriptor a supervised child finds its listen socket on (bound by the parent, the same port
 * for every child it starts, so the target's address never changes: kinds/supervise.c). */
#define GW_SUPERVISED_LISTEN_FD 3

/* The socket c says to listen on ([server] listen), or for a supervised child the one its parent
 * passed; *port_out is the port it is bound to. -1 with err naming the address and the cause. */
int gw_listen(const gw_config *c, int *port_out, char *err);

/*
 * ---- auth.c: bearer tokens and per-token target scopes.
 */
typedef enum gw_auth_result {
    GW_AUTH_OK,      /* no tokens configured, or a valid one: call->token and call->client are set */
    GW_AUTH_MISSING, /* no Authorization header */
    GW_AUTH_INVALID, /* not "Bearer TOKEN", or no token matches */
} gw_auth_result;

/* Checks the Authorization header without replying. */
gw_auth_result gw_auth_identify(gw_call *call);
/* Replies 401 for a failed identification. */
void gw_auth_refuse(gw_call *call, gw_auth_result why);
/* True when the call's token may use the target: a target it may not use is, to that caller, a
 * target that does not exist. */
bool gw_auth_allows(const gw_call *call, const gw_target_config *target);
/* True when the call may load and unload models: no tokens are configured, or its token has
 * admin = true. */
bool gw_auth_admin(const gw_call *call);
/* Who the call is, for what it keeps (stored responses): its token's caller name, or "" without
 * tokens (where every call is the same, admin, caller). */
const char *gw_auth_caller(const gw_call *call);

/*
 * ---- guard.c: what a request must pass before its route runs: the Host and Origin checks
 * against DNS rebinding and cross-site requests, CORS, the JSON content type of POST bodies, the
 * bearer token and the rate limit.
 */
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

/*
 * ---- range.c: the Range request header of a single-file download, RFC 9110
 * section 14: "bytes=FIRST-LAST", "bytes=FIRST-" and "bytes=-SUFFIX", one range per request.
 * Pure (no I/O), so that it is unit-tested and fuzzed on its own.
 */
typedef enum gw_range_result {
    GW_RANGE_OK,            /* *first and *len are set: answer 206 with that part */
    GW_RANGE_IGNORE,        /* a unit other than bytes, which RFC 9110 says to ignore: answer 200 */
    GW_RANGE_INVALID,       /* not a byte range: answer 416 */
    GW_RANGE_MULTIPLE,      /* more than one range (a multipart reply is not offered): answer 416 */
    GW_RANGE_UNSATISFIABLE, /* starts at or past the end, or a suffix of 0 bytes: answer 416 */
} gw_range_result;

/* Parses value (the header's value) for a file of size bytes. */
gw_range_result gw_range_parse(const char *value, uint64_t size, uint64_t *first, uint64_t *len);
/* Why a result other than GW_RANGE_OK is refused, for the 416's message. */
const char *gw_range_problem(gw_range_result r);

/*
 * ---- multipart.c: multipart/form-data request bodies (RFC 7578 over RFC 2046), as OpenAI's audio
 * route takes them. Depends on nothing else in the gateway.
 */
#define GW_FORM_MAX_PARTS 32
#define GW_FORM_NAME_SIZE 128          /* a field name or a file name, decoded, with its NUL */
#define GW_FORM_TYPE_SIZE 128          /* a part's Content-Type, with its NUL */
#define GW_FORM_BOUNDARY_SIZE (70 + 1) /* RFC 2046: a boundary is 1 to 70 characters */

/* One part of a form: its field name, its file name when it is a file ("" otherwise: has_filename
 * says whether the part gave one), its Content-Type ("" when none) and its bytes, which point into
 * the body given to gw_multipart_parse. */
typedef struct gw_form_part {
    char name[GW_FORM_NAME_SIZE];
    char filename[GW_FORM_NAME_SIZE];
    bool has_filename;
    char content_type[GW_FORM_TYPE_SIZE];
    const char *data;
    size_t len;
} gw_form_part;

typedef struct gw_form {
    gw_form_part parts[GW_FORM_MAX_PARTS];
    size_t n;
} gw_form;

/* The boundary of a Content-Type header value "multipart/form-data; boundary=..." (the parameter
 * quoted or not) into out. False with a message for a 400 (or a 415: *not_form is then true, the
 * type is not multipart/form-data at all) in err. */
bool gw_multipart_boundary(const char *content_type, char out[GW_FORM_BOUNDARY_SIZE], bool *not_form,
                           char *err, size_t errlen);

/* Splits body[0..len) into its parts. The body is the request's, already bounded by
 * max_request_bytes; nothing is copied but the names. False with a message naming the problem
 * (no opening boundary, a part without Content-Disposition or name, no closing boundary, ...) in
 * err; *out is then partly filled and means nothing. */
bool gw_multipart_parse(const char *body, size_t len, const char *boundary, gw_form *out, char *err,
                        size_t errlen);

/* The first part named name, or NULL. */
const gw_form_part *gw_form_get(const gw_form *form, const char *name);

/*
 * ---- rate_limit.c: the per-client token-bucket rate limit.
 */
gw_limits *gw_limits_new(const gw_config *cfg);
void gw_limits_free(gw_limits *l);
/* Takes one request from the client's bucket. False (with the seconds until the next one) when
 * the client is over its rate. Always true without a configured rate limit. */
bool gw_rate_take(gw_limits *l, const char *client, int *retry_after_s);

/*
 * ---- sse.c: server-sent events framing. Depends on nothing else in the gateway.
 */
/* "data: JSON\n\n" (event NULL) or "event: NAME\ndata: JSON\n\n"; steals j. */
bool gw_sse_json(sipp_buf *out, const char *event, json_t *j);
/* "data: [DONE]\n\n" */
bool gw_sse_done(sipp_buf *out);

#endif
