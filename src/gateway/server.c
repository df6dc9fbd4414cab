/*
 * server.c: the gateway's HTTP plumbing on libmicrohttpd.
 *
 * Threads. The daemon runs one thread per connection (MHD_USE_THREAD_PER_CONNECTION), so a route
 * may block: a non-streamed generation waits for its engine in the handler, and a streamed one
 * waits for the next piece inside MHD's content-reader callback. Neither holds up any other
 * connection, and no event loop has to be threaded through the engine.
 *
 * A request's life. MHD calls on_request once with the headers, then once per chunk of body, then
 * once more when the body is complete; only then is the route run. The body is capped at
 * max_request_bytes: an over-long body is read and dropped (so that the client, still sending, is
 * not reset before it can read the answer) and answered with 413. Every reply carries x-request-id
 * (the client's when it sent a sane one) and, for an allowed Origin, the CORS headers.
 * on_completed runs when MHD is done with the request, whether the reply was sent or the client
 * went away; it closes a stream (cancelling its generation), gives back the admission permit and
 * records the request in the metrics. That one place is why a client that disconnects mid-stream
 * frees its engine slot within one step.
 *
 * Disconnects. While a route waits (for a permit, an engine, an upstream) it polls the socket: a
 * peer that has closed makes gw_call_abandoned true, and the work is cancelled.
 *
 * Shutdown. SIGTERM and SIGINT are blocked in every thread and taken by the main thread with
 * sigtimedwait. On the first, the daemon stops accepting (MHD_quiesce_daemon), new requests on
 * open connections get 503, and in-flight requests get shutdown_timeout_seconds to finish; then
 * cancel_all is raised, which every wait loop checks, and the daemon is stopped. A second signal
 * skips the wait. The exit status is 0.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "gateway/gateway.h"

#define GW_STREAM_BLOCK 4096      /* bytes MHD asks a stream for at a time */
#define GW_PULL_SLICE_MS 100      /* how long a stream waits before checking for a disconnect */
#define GW_SIGNAL_SLICE_MS 200    /* the main thread's wait between checks */
#define GW_DRAIN_POLL_MS 50
#define GW_CANCEL_GRACE_MS 5000   /* after cancelling, how long requests get to end */
#define GW_IDLE_MARGIN_S 60       /* connection idle timeout beyond the request timeout */
#define GW_CONNECTION_LIMIT 1024
#define GW_LISTEN_BACKLOG 128
#define GW_DISCARD_FACTOR 16      /* an over-long body is read up to this many times the limit */
#define GW_REQUEST_ID_BYTES 16
#define GW_CORS_MAX_AGE "600"
#define GW_LOADING_RETRY_S 2
#define GW_QUEUE_RETRY_S 1
#define GW_MAX_MODEL_NAME 256

typedef struct conn_state {
    gw_call call;
    struct MHD_Connection *conn;
    int fd;
    sipp_buf body;
    size_t body_seen;  /* bytes received, including dropped ones */
    bool too_large;
    struct MHD_Response *response;
    gw_stream *stream;
    bool stream_ended;
    bool client_gone;
    sipp_buf pending; /* stream bytes not yet given to MHD */
    size_t pending_off;
    const char *allow_origin; /* the Origin to echo, or "*" */
} conn_state;

/* ---- replies ------------------------------------------------------------------------------------ */

static conn_state *state_of(gw_call *call) { return call->priv; }

void gw_reply_text(gw_call *call, int status, const char *content_type, char *text, size_t len) {
    conn_state *cs = state_of(call);
    if (call->replied) {
        free(text);
        return;
    }
    call->replied = true;
    call->status = status;
    cs->response = MHD_create_response_from_buffer(len, text ? text : "", text ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (cs->response && content_type) MHD_add_response_header(cs->response, "Content-Type", content_type);
}

void gw_reply_json(gw_call *call, int status, json_t *body) {
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!text) {
        status = 500;
        text = strdup("{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"code\":\"internal_error\"}}");
    }
    size_t len = text ? strlen(text) : 0;
    gw_reply_text(call, status, "application/json", text, len);
}

void gw_reply_error(gw_call *call, gw_error_kind kind, const char *fmt, ...) {
    char msg[SIPP_ERROR_SIZE];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (call->replied) return;
    call->error_code = gw_error_code(kind);
    if (kind == GW_E_RATE_LIMITED || kind == GW_E_QUEUE_FULL) {
        if (call->retry_after_s <= 0) call->retry_after_s = GW_QUEUE_RETRY_S;
    }
    gw_reply_json(call, gw_error_status(kind), gw_error_json(kind, msg));
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    conn_state *cs = cls;
    for (;;) {
        if (cs->pending_off < cs->pending.len) {
            size_t n = cs->pending.len - cs->pending_off;
            if (n > max) n = max;
            memcpy(buf, cs->pending.data + cs->pending_off, n);
            cs->pending_off += n;
            return (ssize_t)n;
        }
        if (cs->stream_ended) return MHD_CONTENT_READER_END_OF_STREAM;
        if (gw_call_abandoned(&cs->call)) {
            cs->client_gone = true;
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        cs->pending.len = 0;
        cs->pending_off = 0;
        if (!cs->stream->pull(cs->stream, &cs->pending, GW_PULL_SLICE_MS)) cs->stream_ended = true;
    }
}

void gw_reply_stream(gw_call *call, const char *content_type, gw_stream *stream) {
    conn_state *cs = state_of(call);
    if (call->replied) {
        stream->close(stream);
        return;
    }
    call->replied = true;
    call->status = 200;
    cs->stream = stream;
    cs->response = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, GW_STREAM_BLOCK, stream_reader, cs, NULL);
    if (cs->response) {
        MHD_add_response_header(cs->response, "Content-Type", content_type);
        MHD_add_response_header(cs->response, "Cache-Control", "no-cache");
        MHD_add_response_header(cs->response, "X-Accel-Buffering", "no");
    }
}

/* ---- calls -------------------------------------------------------------------------------------- */

const char *gw_call_header(gw_call *call, const char *name) {
    return MHD_lookup_connection_value(state_of(call)->conn, MHD_HEADER_KIND, name);
}

bool gw_call_abandoned(gw_call *call) {
    conn_state *cs = state_of(call);
    if (atomic_load(&call->srv->cancel_all) || cs->client_gone) return true;
    if (cs->fd < 0) return false;
    struct pollfd p = {.fd = cs->fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) {
        cs->client_gone = true;
        return true;
    }
    if (p.revents & POLLIN) {
        char c;
        ssize_t n = recv(cs->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) cs->client_gone = true;
    }
    return cs->client_gone;
}

int gw_call_ms_left(const gw_call *call) {
    double left = call->t_start + call->srv->cfg->request_timeout_seconds * 1000.0 - sipp_now_ms();
    return left < 1 ? 1 : (int)left;
}

static bool abandoned_cb(void *arg) { return gw_call_abandoned(arg); }

gw_target *gw_call_target(gw_call *call, const char *name) {
    gw_server *srv = call->srv;
    gw_target *t = NULL;
    if (!name && srv->n_targets == 1) t = &srv->targets[0];
    if (!name && !t) {
        sipp_buf names = {0};
        for (size_t i = 0; i < srv->n_targets; i++) sipp_buf_appendf(&names, "%s%s", i ? ", " : "", srv->targets[i].cfg->name);
        gw_reply_error(call, GW_E_INVALID_FIELD, "'model' is missing: name one of the targets (%s)", names.data ? names.data : "");
        sipp_buf_free(&names);
        return NULL;
    }
    if (!t) t = gw_target_find(srv, name);
    if (!t && srv->cfg->models_dir) { /* a file that appeared since */
        gw_residency_rescan(srv);
        t = gw_target_find(srv, name);
    }
    if (!t) {
        gw_reply_error(call, GW_E_UNKNOWN_TARGET, "the model '%.*s' does not exist on this server; GET /v1/models lists them",
                       GW_MAX_MODEL_NAME, name);
        return NULL;
    }
    call->target = t->index;
    if (!gw_auth_allows(call, t->cfg)) {
        gw_reply_error(call, GW_E_FORBIDDEN_TARGET, "the token of '%s' is not allowed to use model '%s'",
                       call->token ? call->token->caller : "?", t->cfg->name);
        return NULL;
    }
    double deadline = call->t_start + srv->cfg->request_timeout_seconds * 1000.0;
    char why[SIPP_ERROR_SIZE];
    gw_acquire_result res = gw_residency_acquire(srv, t, deadline, abandoned_cb, call, why, sizeof why);
    switch (res) {
    case GW_ACQUIRE_OK: call->resident = true; break;
    case GW_ACQUIRE_NO_ROOM:
    case GW_ACQUIRE_FAILED:
    case GW_ACQUIRE_NOT_READY:
        if (res == GW_ACQUIRE_NO_ROOM) call->retry_after_s = GW_LOADING_RETRY_S;
        gw_reply_error(call, GW_E_NOT_READY, "%s", why);
        return NULL;
    case GW_ACQUIRE_TIMEOUT: gw_reply_error(call, GW_E_TIMEOUT, "%s", why); return NULL;
    case GW_ACQUIRE_ABANDONED:
    default: gw_reply_error(call, GW_E_NOT_READY, "%s", why); return NULL;
    }
    gw_metrics_queued(srv->metrics, t->index, 1);
    gw_admit_result ar = gw_admit(srv->limits, deadline, abandoned_cb, call);
    gw_metrics_queued(srv->metrics, t->index, -1);
    switch (ar) {
    case GW_ADMIT_OK:
        call->admitted = true;
        gw_metrics_active(srv->metrics, t->index, 1);
        return t;
    case GW_ADMIT_QUEUE_FULL:
        call->retry_after_s = GW_QUEUE_RETRY_S;
        gw_reply_error(call, GW_E_QUEUE_FULL,
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

/* ---- routing ------------------------------------------------------------------------------------ */

void gw_reply_header(gw_call *call, const char *name, const char *value) {
    conn_state *cs = state_of(call);
    if (cs->response) MHD_add_response_header(cs->response, name, value);
}

enum { ROUTE_OPEN = 0, ROUTE_AUTH = 1 };

static const struct route {
    const char *method;
    const char *path;
    void (*fn)(gw_call *call);
    int flags;
} routes[] = {
    {"GET", "/", gw_route_web, ROUTE_OPEN},
    {"GET", "/index.html", gw_route_web, ROUTE_OPEN},
    {"GET", "/app.js", gw_route_web, ROUTE_OPEN},
    {"GET", "/style.css", gw_route_web, ROUTE_OPEN},
    {"GET", "/favicon.svg", gw_route_web, ROUTE_OPEN},
    {"GET", "/health", gw_route_health, ROUTE_OPEN},
    {"GET", "/ready", gw_route_ready, ROUTE_OPEN},
    {"GET", "/metrics", gw_route_metrics, ROUTE_OPEN},
    {"GET", "/v1/models", gw_route_models, ROUTE_AUTH},
    {"GET", "/v1/backends", gw_route_backends, ROUTE_AUTH},
    {"POST", "/v1/chat/completions", gw_route_chat_completions, ROUTE_AUTH},
    {"POST", "/v1/completions", gw_route_completions, ROUTE_AUTH},
    {"POST", "/v1/embeddings", gw_route_embeddings, ROUTE_AUTH},
    {"POST", "/v1/query", gw_route_native_query, ROUTE_AUTH},
    {"POST", "/v1/chat", gw_route_native_chat, ROUTE_AUTH},
    {"POST", "/v1/embed", gw_route_native_embed, ROUTE_AUTH},
};

#define MODELS_PREFIX "/v1/models/"

static bool origin_allowed(const gw_config *c, const char *origin, const char **echo) {
    for (size_t i = 0; i < c->n_allowed_origins; i++) {
        if (strcmp(c->allowed_origins[i], "*") == 0) {
            *echo = "*";
            return true;
        }
        if (strcmp(c->allowed_origins[i], origin) == 0) {
            *echo = c->allowed_origins[i];
            return true;
        }
    }
    return false;
}

/* HEAD is GET without the body (MHD leaves the body out): health checks and `curl -I` use it. */
static bool method_matches(const char *route_method, const char *method) {
    return strcmp(route_method, method) == 0 || (strcmp(route_method, "GET") == 0 && strcmp(method, "HEAD") == 0);
}

static bool guard(gw_call *call, int flags) {
    if ((flags & ROUTE_AUTH) == 0) return true;
    int retry = 0;
    if (!gw_auth_check(call)) {
        gw_rate_take(call->srv->limits, call->client, &retry); /* failed guesses count against the IP */
        return false;
    }
    if (!gw_rate_take(call->srv->limits, call->client, &retry)) {
        call->retry_after_s = retry;
        gw_reply_error(call, GW_E_RATE_LIMITED, "'%s' is over the rate limit of %d requests per minute; retry in %d s",
                       call->client, call->srv->cfg->rate_requests_per_minute, retry);
        return false;
    }
    return true;
}

static void dispatch(conn_state *cs) {
    gw_call *call = &cs->call;
    gw_server *srv = call->srv;
    const char *origin = gw_call_header(call, "Origin");
    const char *echo = NULL;
    bool cors_ok = origin && origin_allowed(srv->cfg, origin, &echo);
    if (cors_ok) cs->allow_origin = echo;
    if (strcmp(call->method, "OPTIONS") == 0) {
        if (origin && !cors_ok) {
            gw_reply_error(call, GW_E_ORIGIN_FORBIDDEN, "origin '%s' is not in [server] allowed_origins", origin);
            return;
        }
        gw_reply_text(call, 204, NULL, NULL, 0);
        return;
    }
    if (atomic_load(&srv->draining)) {
        gw_reply_error(call, GW_E_NOT_READY, "the server is shutting down");
        return;
    }
    if (cs->too_large) {
        gw_reply_error(call, GW_E_TOO_LARGE, "the request body is over max_request_bytes (%zu bytes); send less",
                       srv->cfg->max_request_bytes);
        return;
    }
    const char *allowed = NULL; /* the path's method, when the path is known */
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        if (strcmp(routes[i].path, call->path) != 0) continue;
        allowed = routes[i].method;
        if (!method_matches(routes[i].method, call->method)) continue;
        if (guard(call, routes[i].flags)) routes[i].fn(call);
        return;
    }
    if (!allowed && strncmp(call->path, MODELS_PREFIX, strlen(MODELS_PREFIX)) == 0) {
        const char *rest = call->path + strlen(MODELS_PREFIX);
        const char *slash = strrchr(rest, '/');
        if (slash && (strcmp(slash, "/load") == 0 || strcmp(slash, "/unload") == 0)) {
            if (strcmp(call->method, "POST") == 0) {
                if (guard(call, ROUTE_AUTH)) gw_route_model_residency(call, rest, (size_t)(slash - rest), slash + 1);
                return;
            }
            gw_reply_error(call, GW_E_METHOD, "%s is not allowed on %s; use POST", call->method, call->path);
            gw_reply_header(call, "Allow", "POST");
            return;
        }
        if (method_matches("GET", call->method)) {
            if (guard(call, ROUTE_AUTH)) gw_route_model(call, call->path + strlen(MODELS_PREFIX));
            return;
        }
        allowed = "GET";
    }
    if (allowed) {
        gw_reply_error(call, GW_E_METHOD, "%s is not allowed on %s; use %s", call->method, call->path, allowed);
        gw_reply_header(call, "Allow", strcmp(allowed, "GET") == 0 ? "GET, HEAD" : allowed);
        return;
    }
    gw_reply_error(call, GW_E_UNKNOWN_ROUTE, "no route %s %s; see docs/gateway.md for the routes", call->method, call->path);
}

static void add_headers(conn_state *cs) {
    struct MHD_Response *r = cs->response;
    gw_call *call = &cs->call;
    MHD_add_response_header(r, "x-request-id", call->request_id);
    if (call->retry_after_s > 0) {
        char v[16];
        snprintf(v, sizeof v, "%d", call->retry_after_s);
        MHD_add_response_header(r, "Retry-After", v);
    }
    if (cs->allow_origin) {
        MHD_add_response_header(r, "Access-Control-Allow-Origin", cs->allow_origin);
        MHD_add_response_header(r, "Vary", "Origin");
        MHD_add_response_header(r, "Access-Control-Expose-Headers", "x-request-id, Retry-After");
        if (strcmp(call->method, "OPTIONS") == 0) {
            MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
            MHD_add_response_header(r, "Access-Control-Allow-Headers", "Authorization, Content-Type, x-request-id");
            MHD_add_response_header(r, "Access-Control-Max-Age", GW_CORS_MAX_AGE);
        }
    }
    if (atomic_load(&call->srv->draining)) MHD_add_response_header(r, "Connection", "close");
}

static enum MHD_Result queue_reply(conn_state *cs) {
    if (!cs->call.replied) gw_reply_error(&cs->call, GW_E_INTERNAL, "the route gave no reply");
    if (!cs->response) return MHD_NO;
    add_headers(cs);
    enum MHD_Result rc = MHD_queue_response(cs->conn, (unsigned)cs->call.status, cs->response);
    MHD_destroy_response(cs->response);
    cs->response = NULL;
    return rc;
}

/* A client's x-request-id is echoed when it is short and plain; otherwise one is made. */
static void set_request_id(gw_call *call, const char *given) {
    size_t n = given ? strlen(given) : 0;
    bool ok = n > 0 && n < sizeof call->request_id;
    for (size_t i = 0; ok && i < n; i++) {
        char c = given[i];
        ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '_' ||
             c == '.' || c == ':';
    }
    if (ok) {
        memcpy(call->request_id, given, n + 1);
        return;
    }
    unsigned char raw[GW_REQUEST_ID_BYTES];
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw) {
        static atomic_ullong counter;
        unsigned long long v = atomic_fetch_add(&counter, 1) ^ (unsigned long long)time(NULL);
        memcpy(raw, &v, sizeof v);
        memcpy(raw + sizeof v, &v, sizeof v);
    }
    for (size_t i = 0; i < sizeof raw; i++) snprintf(call->request_id + 2 * i, 3, "%02x", raw[i]);
}

static void set_client(conn_state *cs) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(cs->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    snprintf(cs->call.client, sizeof cs->call.client, "unknown");
    if (sa && sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, cs->call.client, sizeof cs->call.client);
    else if (sa && sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, cs->call.client, sizeof cs->call.client);
    const union MHD_ConnectionInfo *fi = MHD_get_connection_info(cs->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    cs->fd = fi ? fi->connect_fd : -1;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls) {
    gw_server *srv = cls;
    conn_state *cs = *con_cls;
    if (!cs) {
        cs = calloc(1, sizeof *cs);
        if (!cs) return MHD_NO;
        *con_cls = cs;
        atomic_fetch_add(&srv->in_flight, 1);
        cs->conn = conn;
        cs->call.srv = srv;
        cs->call.priv = cs;
        cs->call.method = method;
        cs->call.path = url;
        cs->call.t_start = sipp_now_ms();
        cs->call.target = -1;
        set_request_id(&cs->call, MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "x-request-id"));
        set_client(cs);
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        unsigned long long announced = cl ? strtoull(cl, NULL, 10) : 0;
        if (announced > srv->cfg->max_request_bytes) {
            cs->too_large = true;
            /* A client that waits for "100 Continue", or announces an absurd size, is answered
             * before its body (MHD then closes the connection). Others are read to the end and
             * dropped, since closing on a client still sending resets the connection before it
             * can read the 413. */
            const char *expect = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
            if ((expect && strcasecmp(expect, "100-continue") == 0) ||
                announced / GW_DISCARD_FACTOR > srv->cfg->max_request_bytes) {
                dispatch(cs);
                return queue_reply(cs);
            }
        }
        return MHD_YES;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        cs->body_seen += n;
        if (!cs->too_large && cs->body.len + n > srv->cfg->max_request_bytes) cs->too_large = true;
        if (cs->too_large) {
            sipp_buf_free(&cs->body);
            /* A body of unannounced length is read and dropped, so that the client, still sending,
             * can read the 413; past this much it is cut off instead. */
            if (cs->body_seen / GW_DISCARD_FACTOR > srv->cfg->max_request_bytes) {
                cs->call.status = gw_error_status(GW_E_TOO_LARGE);
                cs->call.error_code = gw_error_code(GW_E_TOO_LARGE);
                return MHD_NO;
            }
            return MHD_YES;
        }
        if (!sipp_buf_append(&cs->body, upload_data, n)) return MHD_NO;
        return MHD_YES;
    }
    if (cs->call.replied) return MHD_YES;
    cs->call.body = cs->body.data ? cs->body.data : "";
    cs->call.body_len = cs->body.len;
    dispatch(cs);
    return queue_reply(cs);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe) {
    gw_server *srv = cls;
    conn_state *cs = *con_cls;
    if (!cs) return;
    *con_cls = NULL;
    gw_call *call = &cs->call;
    bool gone = cs->client_gone || toe != MHD_REQUEST_TERMINATED_COMPLETED_OK;
    if (cs->stream) cs->stream->close(cs->stream);
    if (call->admitted) {
        gw_release(srv->limits);
        gw_metrics_active(srv->metrics, call->target, -1);
    }
    if (call->resident) gw_residency_release(srv, &srv->targets[call->target]);
    double secs = (sipp_now_ms() - call->t_start) / 1e3;
    int status = call->replied || call->status ? call->status : 0;
    gw_metrics_request(srv->metrics, call->target, status, call->error_code, secs);
    fprintf(stderr, "sipp: %s \"%s %s\" %d %.1f ms%s%s id=%s%s\n", call->client, call->method, call->path, status,
            secs * 1e3, call->target >= 0 ? " target=" : "", call->target >= 0 ? srv->targets[call->target].cfg->name : "",
            call->request_id, gone ? " (client gone)" : "");
    if (cs->response) MHD_destroy_response(cs->response);
    sipp_buf_free(&cs->body);
    sipp_buf_free(&cs->pending);
    free(cs);
    atomic_fetch_sub(&srv->in_flight, 1);
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
    fputs("sipp: http: ", stderr);
    vfprintf(stderr, fmt, ap);
}

/* ---- listening ---------------------------------------------------------------------------------- */

static int open_listener(const gw_config *c, int *port_out, char *err) {
    char port[16];
    snprintf(port, sizeof port, "%d", c->port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(c->host, port, &hints, &res);
    if (rc != 0) {
        snprintf(err, SIPP_ERROR_SIZE, "cannot resolve listen host '%s': %s", c->host, gai_strerror(rc));
        return -1;
    }
    int fd = -1, saved = 0;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            saved = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, GW_LISTEN_BACKLOG) != 0) {
            saved = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0) {
        snprintf(err, SIPP_ERROR_SIZE, "cannot listen on %s:%d: %s%s", c->host, c->port, strerror(saved),
                 saved == EADDRINUSE ? " (another server uses the port: pick another with --port or [server] listen)" : "");
        return -1;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    *port_out = c->port;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
        *port_out = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port : ((struct sockaddr_in *)&ss)->sin_port);
    return fd;
}

/* Waits for SIGTERM/SIGINT up to ms; true when one came. */
static bool wait_signal(const sigset_t *set, int ms) {
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    return sigtimedwait(set, NULL, &ts) > 0;
}

static void shutdown_gracefully(gw_server *srv, struct MHD_Daemon *d, const sigset_t *set) {
    atomic_store(&srv->draining, true);
    MHD_socket ls = MHD_quiesce_daemon(d);
    /* MHD's polling thread may still hold the socket in poll() for a moment, and close() alone leaves
     * it listening until that returns; shutdown() stops it accepting at once. */
    if (ls != MHD_INVALID_SOCKET) {
        shutdown(ls, SHUT_RDWR);
        close(ls);
    }
    int n = atomic_load(&srv->in_flight);
    fprintf(stderr, "sipp: shutting down: %d request%s in flight, waiting up to %d s\n", n, n == 1 ? "" : "s",
            srv->cfg->shutdown_timeout_seconds);
    double deadline = sipp_now_ms() + srv->cfg->shutdown_timeout_seconds * 1000.0;
    while (atomic_load(&srv->in_flight) > 0 && sipp_now_ms() < deadline)
        if (wait_signal(set, GW_DRAIN_POLL_MS)) break; /* a second signal: stop waiting */
    if ((n = atomic_load(&srv->in_flight)) > 0) {
        fprintf(stderr, "sipp: cancelling %d request%s still running\n", n, n == 1 ? "" : "s");
        atomic_store(&srv->cancel_all, true);
        double grace = sipp_now_ms() + GW_CANCEL_GRACE_MS;
        while (atomic_load(&srv->in_flight) > 0 && sipp_now_ms() < grace) wait_signal(set, GW_DRAIN_POLL_MS);
    }
    atomic_store(&srv->cancel_all, true);
    MHD_stop_daemon(d);
}

int gw_serve(gw_config *cfg) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL); /* before any thread starts: they all inherit it */
    struct sigaction ign = {.sa_handler = SIG_IGN};
    sigaction(SIGPIPE, &ign, NULL);

    gw_server srv = {.cfg = cfg, .started_unix = (long long)time(NULL)};
    char err[SIPP_ERROR_SIZE];
    int port = 0;
    int lfd = open_listener(cfg, &port, err);
    if (lfd < 0) {
        fprintf(stderr, "sipp: %s\n", err);
        return 1;
    }
    srv.metrics = gw_metrics_new(gw_targets_capacity(cfg));
    srv.limits = gw_limits_new(cfg);
    if (!srv.metrics || !srv.limits || !gw_targets_start(&srv, err)) {
        fprintf(stderr, "sipp: %s\n", srv.metrics && srv.limits ? err : "out of memory");
        close(lfd);
        gw_targets_stop(&srv);
        gw_metrics_free(srv.metrics);
        gw_limits_free(srv.limits);
        return 1;
    }
    unsigned idle = (unsigned)(cfg->request_timeout_seconds + GW_IDLE_MARGIN_S);
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_ITC | MHD_USE_ERROR_LOG, 0, NULL, NULL,
        on_request, &srv, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, &srv, MHD_OPTION_LISTEN_SOCKET, lfd,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, &srv, MHD_OPTION_CONNECTION_TIMEOUT, idle,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)GW_CONNECTION_LIMIT, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "sipp: cannot start the HTTP server on %s:%d\n", cfg->host, port);
        close(lfd);
        atomic_store(&srv.draining, true);
        gw_targets_stop(&srv);
        gw_metrics_free(srv.metrics);
        gw_limits_free(srv.limits);
        return 1;
    }
    gw_probe_start(&srv);
    bool v6 = strchr(cfg->host, ':') != NULL;
    fprintf(stderr, "sipp: listening on http://%s%s%s:%d (%zu target%s)\n", v6 ? "[" : "", cfg->host, v6 ? "]" : "", port,
            cfg->n_targets, cfg->n_targets == 1 ? "" : "s");
    while (!wait_signal(&set, GW_SIGNAL_SLICE_MS)) {
    }
    shutdown_gracefully(&srv, d, &set);
    gw_probe_stop(&srv);
    gw_targets_stop(&srv);
    gw_metrics_free(srv.metrics);
    gw_limits_free(srv.limits);
    fprintf(stderr, "sipp: stopped\n");
    return 0;
}
