/*
 * connection.c: the gateway's connection and reply layer, on libmicrohttpd.
 *
 * Threads. The daemon runs one thread per connection (MHD_USE_THREAD_PER_CONNECTION), so a route
 * may block: a non-streamed generation waits for its engine in the handler, and a streamed one
 * waits for the next piece inside MHD's content-reader callback. Neither holds up any other
 * connection, and no event loop has to be threaded through the engine.
 *
 * A request's life. MHD calls on_request once with the headers, then once per chunk of body, then
 * once more when the body is complete; only then does the handler's dispatch run. What is wrong
 * with the HTTP framing itself is answered at the headers, before any body is read, and the
 * connection closed after the answer (check_framing, RFC 9112). Behind a proxy that reads the
 * framing differently, a body read differently is request smuggling: so two different
 * Content-Length headers, or Content-Length beside Transfer-Encoding, are 400. MHD reads only the
 * first Transfer-Encoding line and knows only "chunked": every line is read here as one list, and a
 * coding other than chunked is 501 (MHD would wait for a body it cannot delimit). MHD also lets
 * through HTTP/1.1 without Host (400 here) and cuts the request line at a NUL byte ("G\0T" arrives
 * as the method "G"): method_intact and target_intact see that from where MHD left the pieces of
 * the line in its read buffer. The body is capped at max_request_bytes: an
 * over-long body is read and dropped (so that the client, still sending, is not reset before it
 * can read the answer) and dispatch sees too_large. Every reply carries x-request-id (the client's
 * when it sent a sane one), Retry-After when set, and the CORS headers the guard decided.
 * on_completed runs when MHD is done with the request, whether the reply was sent or the client
 * went away; it closes a stream (cancelling its generation) and runs the handler's finish. That one
 * place is why a client that disconnects mid-stream frees its engine slot within one step.
 *
 * Exhaustion. A connection costs a thread and a descriptor, so what a client can hold is bounded:
 *   - read_timeout_seconds: from its start, or from the end of its previous reply, a connection
 *     gets this long to deliver a whole request (headers and body); a watchdog thread cuts the
 *     ones past it with shutdown(2) (which makes MHD's thread see end of file and close it). This
 *     also ends idle keep-alive connections. A connection whose request is being handled (a long
 *     generation, a stream) is never cut by it.
 *   - max_connections_per_client and max_connections (MHD refuses connections past them); the
 *     latter is lowered at start to leave descriptors for models, engines and upstream sockets.
 *   - max_buffered_bytes: the bodies held while they arrive, all connections together; a body that
 *     would go past it is dropped and answered 503 with Retry-After.
 * The watchdog's table of connections is guarded by one mutex, which MHD's close notification also
 * takes before MHD closes the socket: the watchdog never shuts down a descriptor that has been
 * closed and reused.
 *
 * URLs. MHD percent-decodes the path into a C string, so "%00" would end it early ("/health%00"
 * routed as "/health"); unescape() decodes everything but %00, which stays as it is and matches no
 * route. An absolute-form target ("http://host:port/path", RFC 9112 3.2.2) is routed by its path,
 * and its authority, read before MHD decodes the target in place, stands for Host (absolute_form).
 *
 * Sizes. MHD answers what does not fit its memory per connection with an HTML page of its own, and
 * calls sipp only for what fits; so its memory is set well above the head sipp reads
 * (GW_CONNECTION_MEMORY), and check_sizes answers a head or target over sipp's limits with a JSON
 * 431 or 414 (and trailer_fits a trailer). What MHD 0.9.75 still refuses itself, before any callback
 * (a line it cannot parse, a bad chunk size or Content-Length, an unknown HTTP version), keeps its
 * page: docs/gateway.md lists them.
 *
 * Disconnects. While a route waits (for a permit, an engine, an upstream) it polls the socket: a
 * peer that has closed makes gw_call_abandoned true, and the work is cancelled. When the server
 * cancels everything at the shutdown deadline, a stream is asked to stop: it appends its error
 * event and its end, and the chunked body is closed with its final chunk.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "gateway/http/http.h"
#include "util/assertions.h"

#define GW_STREAM_BLOCK 4096     /* bytes MHD asks a stream for at a time */
#define GW_PULL_SLICE_MS 100     /* how long a stream waits before checking for a disconnect */
#define GW_WATCHDOG_SLICE_MS 250 /* how often the watchdog looks for connections past read_timeout */
#define GW_IDLE_MARGIN_S 60      /* MHD's own idle timeout beyond the request timeout */
#define GW_FD_RESERVE 64         /* descriptors kept for models, engines, upstreams, logs */
#define GW_DISCARD_FACTOR 16     /* an over-long body is read up to this many times the limit */
#define GW_REQUEST_ID_BYTES 16
#define GW_BUSY_RETRY_S 1
#define GW_QUEUE_RETRY_S 1
#define GW_MS_PER_S 1000.0
#define GW_HEX "0123456789abcdef"
#define GW_CHUNKED "chunked"
#define GW_HTTP_1 "HTTP/1."  /* HTTP/1.1 and later 1.x need Host; 1.0 may leave it out */
#define GW_CODING_MAX 65     /* a transfer coding as an error names it */
#define GW_HEADER_MAX 16384  /* the request line and headers read (and a trailer): past it 431 */
#define GW_TARGET_MAX 8192   /* the request target: past it 414 */
#define GW_AUTHORITY_MAX 256 /* an absolute-form target's host[:port] */
/* How far apart in MHD's buffer the pieces of one request line can be: all of its memory. */
#define GW_REQUEST_LINE_MAX GW_CONNECTION_MEMORY
/* MHD's memory per connection: its read buffer, the header lines (about 64 bytes each besides their
 * text), the reply's headers. What does not fit MHD answers with an HTML page of its own (a header
 * too large, a chunk line longer than the buffer). This much holds every request line and header
 * up to GW_HEADER_MAX, even in 4-byte lines, so sipp's own checks answer those, in JSON, and also
 * ones a good way past it (about 5,000 lines), and a chunk line of 300 KB (its extensions, which
 * MHD skips). Pages are touched as they are used; MHD clears the pool between the requests of a
 * kept-alive connection, so such a connection holds all of it. */
#define GW_CONNECTION_MEMORY (384 * 1024)
#define GW_SCHEME_HTTP "http://"
#define GW_SCHEME_HTTPS "https://"

/* One open connection, as the watchdog sees it. */
typedef struct conn_watch {
    int fd;
    double reading_since; /* sipp_now_ms when it began waiting for a request; < 0 while handled */
    bool cut;
    /* The request target as MHD first has it, for this request (MHD then decodes it in place). */
    const char *raw_target;
    size_t raw_target_len;    /* its length up to the first NUL */
    size_t raw_scheme;        /* an absolute-form target's "http://" as sent: its length, else 0 */
    size_t raw_authority_len; /* the authority's length as sent */
    char raw_authority[GW_AUTHORITY_MAX + 1]; /* and its bytes, before decoding (cut to fit) */
    struct conn_watch *prev, *next;
} conn_watch;

struct gw_http {
    gw_server *srv;
    const gw_handler *handler;
    struct MHD_Daemon *daemon;
    pthread_mutex_t mu; /* guards the list and every conn_watch in it */
    conn_watch *conns;
    pthread_t watchdog;
    bool watchdog_started;
    atomic_bool stopping;
};

typedef struct conn_state {
    gw_call call;
    char authority[GW_AUTHORITY_MAX]; /* call.authority's bytes */
    gw_http *http;
    struct MHD_Connection *conn;
    int fd;
    sipp_buf body;
    size_t body_seen; /* bytes received, including dropped ones */
    size_t body_held; /* bytes counted in srv->buffered */
    struct MHD_Response *response;
    gw_stream *stream;
    bool stream_ended;
    bool stream_stopped;
    bool client_gone;
    sipp_buf pending; /* stream bytes not yet given to MHD */
    size_t pending_off;
} conn_state;

static conn_state *state_of(gw_call *call) { return call->priv; }

/* ---- replies ------------------------------------------------------------------------------------ */

/* One reply per call: a second one is a route's bug, caught in debug builds (a release build keeps
 * the first reply and drops the second). An error after a reply is not: reply_error_v drops it. */
void gw_reply_text(gw_call *call, int status, const char *content_type, char *text, size_t len) {
    conn_state *cs = state_of(call);
    SIPP_ASSERT(!call->replied);
    if (call->replied) {
        free(text);
        return;
    }
    call->replied = true;
    call->status = status;
    cs->response = MHD_create_response_from_buffer(len, text ? text : "",
                                                   text ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (cs->response && content_type) MHD_add_response_header(cs->response, "Content-Type", content_type);
}

void gw_reply_json(gw_call *call, int status, json_t *body) {
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!text) {
        status = 500;
        text = strdup("{\"error\":{\"message\":\"out of "
                      "memory\",\"type\":\"server_error\",\"code\":\"internal_error\"}}");
    }
    size_t len = text ? strlen(text) : 0;
    gw_reply_text(call, status, "application/json", text, len);
}

static void reply_error_v(gw_call *call, gw_error_kind kind, const char *fmt, va_list ap) {
    char msg[SIPP_ERROR_SIZE];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (call->replied) return;
    call->error_code = gw_error_code(kind);
    if (kind == GW_E_RATE_LIMITED || kind == GW_E_QUEUE_FULL) {
        if (call->retry_after_s <= 0) call->retry_after_s = GW_QUEUE_RETRY_S;
    }
    gw_reply_json(call, gw_error_status(kind), gw_error_json_in(call->dialect, kind, msg));
}

void gw_reply_error(gw_call *call, gw_error_kind kind, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    reply_error_v(call, kind, fmt, ap);
    va_end(ap);
}

bool gw_reply_invalid_field(gw_call *call, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    reply_error_v(call, GW_E_INVALID_FIELD, fmt, ap);
    va_end(ap);
    return false;
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    conn_state *cs = cls;
    (void)pos;
    for (;;) {
        if (cs->pending_off < cs->pending.len) {
            size_t n = cs->pending.len - cs->pending_off;
            if (n > max) n = max;
            memcpy(buf, cs->pending.data + cs->pending_off, n);
            cs->pending_off += n;
            return (ssize_t)n;
        }
        if (cs->stream_ended) return MHD_CONTENT_READER_END_OF_STREAM;
        /* At the shutdown deadline a stream that can end cleanly is asked to; it then ends within
         * a pull or two, and only a client that is gone too cuts it short. */
        if (!cs->stream_stopped && atomic_load(&cs->call.srv->cancel_all) && cs->stream->stop) {
            cs->stream->stop(cs->stream);
            cs->stream_stopped = true;
        }
        if (cs->stream_stopped ? cs->client_gone : gw_call_abandoned(&cs->call)) {
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
    SIPP_ASSERT(!call->replied);
    if (call->replied) {
        stream->close(stream);
        return;
    }
    call->replied = true;
    call->status = 200;
    cs->stream = stream;
    cs->response =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, GW_STREAM_BLOCK, stream_reader, cs, NULL);
    if (cs->response) {
        MHD_add_response_header(cs->response, "Content-Type", content_type);
        MHD_add_response_header(cs->response, "Cache-Control", "no-cache");
        MHD_add_response_header(cs->response, "X-Accel-Buffering", "no");
    }
}

void gw_reply_file(gw_call *call, int status, const char *content_type, int fd, uint64_t offset,
                   uint64_t len) {
    conn_state *cs = state_of(call);
    SIPP_ASSERT(!call->replied);
    if (call->replied) {
        close(fd);
        return;
    }
    call->replied = true;
    call->status = status;
    /* MHD sends it with sendfile where it can, and closes fd when the response is destroyed. */
    cs->response = MHD_create_response_from_fd_at_offset64(len, fd, offset);
    if (!cs->response) {
        close(fd);
        call->replied = false;
        gw_reply_error(call, GW_E_INTERNAL, "cannot make a reply for a file of %llu bytes",
                       (unsigned long long)len);
        return;
    }
    if (content_type) MHD_add_response_header(cs->response, "Content-Type", content_type);
}

void gw_reply_header(gw_call *call, const char *name, const char *value) {
    conn_state *cs = state_of(call);
    if (cs->response) MHD_add_response_header(cs->response, name, value);
}

/* ---- calls -------------------------------------------------------------------------------------- */

const char *gw_call_header(gw_call *call, const char *name) {
    return MHD_lookup_connection_value(state_of(call)->conn, MHD_HEADER_KIND, name);
}

const char *gw_call_host(gw_call *call) {
    return call->authority ? call->authority : gw_call_header(call, MHD_HTTP_HEADER_HOST);
}

const char *gw_call_header_n(gw_call *call, const char *name, size_t *len) {
    const char *v = NULL;
    *len = 0;
    if (MHD_lookup_connection_value_n(state_of(call)->conn, MHD_HEADER_KIND, name, strlen(name), &v, len) !=
        MHD_YES)
        return NULL;
    return v;
}

const char *gw_call_query(gw_call *call, const char *name) {
    return MHD_lookup_connection_value(state_of(call)->conn, MHD_GET_ARGUMENT_KIND, name);
}

typedef struct query_scan {
    const char *const *known;
    const char *unknown;
} query_scan;

static enum MHD_Result scan_query(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    query_scan *q = cls;
    (void)kind;
    (void)value;
    for (const char *const *k = q->known; *k; k++)
        if (strcmp(*k, key) == 0) return MHD_YES;
    q->unknown = key;
    return MHD_NO;
}

const char *gw_call_query_unknown(gw_call *call, const char *const *known) {
    query_scan q = {.known = known};
    MHD_get_connection_values(state_of(call)->conn, MHD_GET_ARGUMENT_KIND, scan_query, &q);
    return q.unknown;
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
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            cs->client_gone = true;
    }
    return cs->client_gone;
}

int gw_call_ms_left(const gw_call *call) {
    double left = call->t_start + call->srv->cfg->request_timeout_seconds * GW_MS_PER_S - sipp_now_ms();
    return left < 1 ? 1 : (int)left;
}

/* ---- the read-timeout watchdog ------------------------------------------------------------------ */

static conn_watch *watch_of(struct MHD_Connection *conn) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

/* Marks the connection as waiting for a request (since now) or as handling one. */
static void set_reading(gw_http *h, struct MHD_Connection *conn, bool reading) {
    conn_watch *w = watch_of(conn);
    if (!w) return;
    pthread_mutex_lock(&h->mu);
    w->reading_since = reading ? sipp_now_ms() : -1;
    pthread_mutex_unlock(&h->mu);
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    gw_http *h = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        conn_watch *w = calloc(1, sizeof *w);
        if (!w) return; /* not watched: MHD's idle timeout still ends it */
        const union MHD_ConnectionInfo *fi = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        w->fd = fi ? fi->connect_fd : -1;
        w->reading_since = sipp_now_ms();
        pthread_mutex_lock(&h->mu);
        w->next = h->conns;
        if (h->conns) h->conns->prev = w;
        h->conns = w;
        pthread_mutex_unlock(&h->mu);
        *socket_context = w;
        atomic_fetch_add(&h->srv->connections, 1);
        return;
    }
    conn_watch *w = *socket_context;
    if (!w) return;
    pthread_mutex_lock(&h->mu);
    if (w->prev)
        w->prev->next = w->next;
    else
        h->conns = w->next;
    if (w->next) w->next->prev = w->prev;
    pthread_mutex_unlock(&h->mu);
    free(w);
    *socket_context = NULL;
    atomic_fetch_sub(&h->srv->connections, 1);
}

static void *watchdog_main(void *arg) {
    gw_http *h = arg;
    double limit_ms = h->srv->cfg->read_timeout_seconds * GW_MS_PER_S;
    while (!atomic_load(&h->stopping)) {
        struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)GW_WATCHDOG_SLICE_MS * 1000000L};
        nanosleep(&ts, NULL);
        double now = sipp_now_ms();
        pthread_mutex_lock(&h->mu);
        for (conn_watch *w = h->conns; w; w = w->next) {
            if (w->cut || w->fd < 0 || w->reading_since < 0 || now - w->reading_since < limit_ms) continue;
            shutdown(w->fd, SHUT_RDWR);
            w->cut = true;
        }
        pthread_mutex_unlock(&h->mu);
    }
    return NULL;
}

/* ---- requests ----------------------------------------------------------------------------------- */

static void add_headers(conn_state *cs) {
    struct MHD_Response *r = cs->response;
    gw_call *call = &cs->call;
    MHD_add_response_header(r, "x-request-id", call->request_id);
    if (call->retry_after_s > 0) {
        char v[16];
        snprintf(v, sizeof v, "%d", call->retry_after_s);
        MHD_add_response_header(r, "Retry-After", v);
    }
    if (call->allow_origin) {
        MHD_add_response_header(r, "Access-Control-Allow-Origin", call->allow_origin);
        MHD_add_response_header(r, "Vary", "Origin");
        MHD_add_response_header(r, "Access-Control-Expose-Headers",
                                "x-request-id, Retry-After, " GW_IGNORED_HEADER);
    }
    if (call->ignored[0]) MHD_add_response_header(r, GW_IGNORED_HEADER, call->ignored);
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

/* A reply made before the body was read: the connection is closed after it, since the body that
 * may follow cannot be trusted to be delimited. */
static enum MHD_Result refuse_early(conn_state *cs, gw_error_kind kind, const char *fmt, const char *arg) {
    gw_reply_error(&cs->call, kind, fmt, arg);
    gw_reply_header(&cs->call, "Connection", "close");
    return queue_reply(cs);
}

/* A client's x-request-id is echoed when it is short and plain; otherwise one is made. */
static void set_request_id(gw_call *call, const char *given) {
    size_t n = given ? strlen(given) : 0;
    bool ok = n > 0 && n < sizeof call->request_id;
    for (size_t i = 0; ok && i < n; i++) {
        char c = given[i];
        ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' ||
             c == '_' || c == '.' || c == ':';
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
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(call->request_id + 2 * i, 3, "%02x", raw[i]);
}

static void set_client(conn_state *cs) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(cs->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    char *a = cs->call.address;
    snprintf(a, sizeof cs->call.address, "unknown");
    if (sa && sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, a, sizeof cs->call.address);
    else if (sa && sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, a, sizeof cs->call.address);
    snprintf(cs->call.client, sizeof cs->call.client, "%s", a);
    const union MHD_ConnectionInfo *fi = MHD_get_connection_info(cs->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    cs->fd = fi ? fi->connect_fd : -1;
}

/* What on_headers needs from every header line: MHD's lookup returns only the first line of a name,
 * and a second Content-Length, Transfer-Encoding or Host is exactly what a smuggled request uses. */
typedef struct header_scan {
    const char *length; /* the first Content-Length */
    size_t length_len;
    bool length_conflict; /* a Content-Length that differs from the first */
    bool has_te;
    int te_codings;                 /* Transfer-Encoding's list elements, every line together */
    int te_chunked;                 /* how many of them are "chunked" */
    bool te_plain;                  /* one line that is "chunked" alone: the only form MHD reads as chunked */
    char te_unknown[GW_CODING_MAX]; /* the first other coding ("" = none) */
    int hosts;
} header_scan;

static bool is_header(const char *key, size_t key_size, const char *name) {
    return key_size == strlen(name) && strncasecmp(key, name, key_size) == 0;
}

/* Whether v (n bytes) is exactly the chunked coding, in any case. */
static bool is_chunked(const char *v, size_t n) {
    return n == strlen(GW_CHUNKED) && strncasecmp(v, GW_CHUNKED, n) == 0;
}

/* One Transfer-Encoding line: a comma-separated list, its empty elements ignored (RFC 9110 5.6.1). */
static void scan_codings(header_scan *s, const char *v, size_t n) {
    const char *end = v + n;
    while (v < end) {
        const char *comma = memchr(v, ',', (size_t)(end - v));
        const char *e = comma ? comma : end;
        while (v < e && (*v == ' ' || *v == '\t'))
            v++;
        const char *t = e;
        while (t > v && (t[-1] == ' ' || t[-1] == '\t'))
            t--;
        if (t > v) {
            s->te_codings++;
            if (is_chunked(v, (size_t)(t - v)))
                s->te_chunked++;
            else if (!*s->te_unknown)
                snprintf(s->te_unknown, sizeof s->te_unknown, "%.*s", (int)(t - v), v);
        }
        v = comma ? comma + 1 : end;
    }
}

static enum MHD_Result scan_header(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                   const char *value, size_t value_size) {
    header_scan *s = cls;
    (void)kind;
    if (!value) value = "";
    if (is_header(key, key_size, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
        if (!s->length) {
            s->length = value;
            s->length_len = value_size;
        } else if (value_size != s->length_len || memcmp(value, s->length, value_size) != 0) {
            s->length_conflict = true;
        }
    } else if (is_header(key, key_size, MHD_HTTP_HEADER_TRANSFER_ENCODING)) {
        s->te_plain = !s->has_te && is_chunked(value, value_size);
        s->has_te = true;
        scan_codings(s, value, value_size);
    } else if (is_header(key, key_size, MHD_HTTP_HEADER_HOST)) {
        s->hosts++;
    }
    return MHD_YES;
}

/* MHD ends the method at its first NUL byte, so "G\0T" would arrive as "G". In MHD's read buffer
 * the method is followed by the NUL that replaced the space after it, then by the target: any byte
 * but a space between the two means the method went on past a NUL. When the target is not laid out
 * after the method in one request line (another MHD), nothing can be told and the check passes. */
static bool method_intact(const char *method, const char *url) {
    uintptr_t m = (uintptr_t)method, u = (uintptr_t)url, end = m + strlen(method) + 1;
    if (u < end || u - m > GW_REQUEST_LINE_MAX) return true;
    for (const char *p = method + (end - m); (uintptr_t)p < u; p++)
        if (*p != ' ') return false;
    return true;
}

/* The length of an absolute-form target's scheme and "://" (RFC 9112 3.2.2), 0 for another form. */
static size_t scheme_length(const char *target) {
    if (strncasecmp(target, GW_SCHEME_HTTP, strlen(GW_SCHEME_HTTP)) == 0) return strlen(GW_SCHEME_HTTP);
    if (strncasecmp(target, GW_SCHEME_HTTPS, strlen(GW_SCHEME_HTTPS)) == 0) return strlen(GW_SCHEME_HTTPS);
    return 0;
}

/* MHD_OPTION_URI_LOG_CALLBACK, called with the request target before MHD splits off the query and
 * decodes it: kept for target_intact, and an absolute-form target's authority copied for
 * absolute_form. */
static void *on_target(void *cls, const char *uri, struct MHD_Connection *conn) {
    (void)cls;
    conn_watch *w = watch_of(conn);
    if (w) {
        w->raw_target = uri;
        w->raw_target_len = strlen(uri);
        w->raw_scheme = scheme_length(uri);
        w->raw_authority_len = w->raw_scheme ? strcspn(uri + w->raw_scheme, "/?#") : 0;
        size_t n = w->raw_authority_len < GW_AUTHORITY_MAX ? w->raw_authority_len : GW_AUTHORITY_MAX;
        memcpy(w->raw_authority, uri + w->raw_scheme, n);
        w->raw_authority[n] = '\0';
    }
    return NULL;
}

/* The target, like the method, is cut at a NUL byte ("/health\0junk" would route as "/health"). The
 * version follows it in the read buffer, after the NUL that replaced the space between them: a target
 * that ends sooner went on past a NUL. As in method_intact, another layout passes. */
static bool target_intact(struct MHD_Connection *conn, const char *version) {
    conn_watch *w = watch_of(conn);
    if (!w || !w->raw_target || !version || !*version) return true;
    uintptr_t t = (uintptr_t)w->raw_target, v = (uintptr_t)version;
    return v <= t || v - t > GW_REQUEST_LINE_MAX || w->raw_target_len + 1 == v - t;
}

/* The target as MHD first had it is kept for one request only (it points into MHD's buffer). */
static void forget_target(struct MHD_Connection *conn) {
    conn_watch *w = watch_of(conn);
    if (w) w->raw_target = NULL;
}

/* An absolute-form target ("GET http://host:port/health", as a proxy sends it; servers must take it)
 * is routed by its path, and its authority stands for Host (gw_call_host), which the guard checks.
 * The authority is read from the target as sent, before percent-decoding: one that decoding would
 * change, one with user information, or an empty one is refused. Returns false after replying. */
static bool absolute_form(conn_state *cs) {
    gw_call *call = &cs->call;
    conn_watch *w = watch_of(cs->conn);
    if (!w || !w->raw_scheme) return true;
    const char *url = call->path, *auth = w->raw_authority;
    size_t scheme = w->raw_scheme, n = w->raw_authority_len;
    bool plain = n > 0 && n < sizeof cs->authority && strlen(url) >= scheme + n &&
                 strncmp(url + scheme, auth, n) == 0 && (url[scheme + n] == '/' || !url[scheme + n]) &&
                 !strpbrk(auth, "@%");
    if (!plain) {
        gw_reply_error(
            call, GW_E_BAD_REQUEST,
            "the request target is an absolute URL whose authority '%s' is not a plain host[:port]; "
            "send the path ('/v1/...') with a Host header",
            auth);
        return false;
    }
    memcpy(cs->authority, auth, n + 1);
    call->authority = cs->authority;
    call->path = url[scheme + n] ? url + scheme + n : "/";
    return true;
}

/* The request line and headers, and the target alone, within what sipp reads: MHD's memory holds
 * more (GW_CONNECTION_MEMORY), so that these are answered here, in JSON. */
static enum MHD_Result check_sizes(conn_state *cs) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(cs->conn, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    size_t head = ci ? ci->header_size : 0;
    conn_watch *w = watch_of(cs->conn);
    size_t target = w && w->raw_target ? w->raw_target_len : strlen(cs->call.path);
    bool long_target = target > GW_TARGET_MAX;
    if (!long_target && head <= GW_HEADER_MAX) return MHD_YES;
    char msg[SIPP_ERROR_SIZE];
    snprintf(msg, sizeof msg, "the request %s %zu bytes, over the %d this server reads; send %s",
             long_target ? "target is" : "line and headers are", long_target ? target : head,
             long_target ? GW_TARGET_MAX : GW_HEADER_MAX,
             long_target ? "a shorter URL (a long input goes in the body)" : "fewer or shorter headers");
    return refuse_early(cs, long_target ? GW_E_URI_TOO_LONG : GW_E_HEADERS_TOO_LARGE, "%s", msg);
}

/* A chunked body's trailer fields, counted as the headers are (MHD keeps them as footers). */
static enum MHD_Result add_field_size(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                      const char *value, size_t value_size) {
    (void)kind;
    (void)key;
    (void)value;
    *(size_t *)cls += key_size + value_size + strlen(": \r\n");
    return MHD_YES;
}

static bool trailer_fits(conn_state *cs) {
    size_t size = 0;
    MHD_get_connection_values_n(cs->conn, MHD_FOOTER_KIND, add_field_size, &size);
    if (size <= GW_HEADER_MAX) return true;
    gw_reply_error(&cs->call, GW_E_HEADERS_TOO_LARGE,
                   "the chunked body's trailer fields are %zu bytes, over the %d this server reads; send "
                   "fewer or none",
                   size, GW_HEADER_MAX);
    gw_reply_header(&cs->call, "Connection", "close");
    return false;
}

/* The request line and the framing, as RFC 9112 wants them; a refusal closes the connection. */
static enum MHD_Result check_framing(conn_state *cs, const char *version, header_scan *hs) {
    gw_call *call = &cs->call;
    if (!method_intact(call->method, call->path))
        return refuse_early(cs, GW_E_BAD_REQUEST, "%s",
                            "the request line holds a NUL byte in its method; send a method such as GET");
    if (!target_intact(cs->conn, version))
        return refuse_early(cs, GW_E_BAD_REQUEST, "%s",
                            "the request line holds a NUL byte in its target; send the path percent-encoded");
    if (hs->hosts > 1)
        return refuse_early(cs, GW_E_BAD_REQUEST, "%s",
                            "the request has more than one Host header; send one");
    if (hs->hosts == 0 && version && strncmp(version, GW_HTTP_1, strlen(GW_HTTP_1)) == 0 &&
        strcmp(version, MHD_HTTP_VERSION_1_0) != 0)
        return refuse_early(cs, GW_E_BAD_REQUEST, "an %s request needs a Host header; send 'Host: NAME:PORT'",
                            version);
    if (hs->length_conflict)
        return refuse_early(cs, GW_E_BAD_REQUEST, "%s",
                            "the request has two different Content-Length headers; send one");
    if (!hs->has_te) return MHD_YES;
    /* Content-Length beside Transfer-Encoding is how one request hides another from a proxy that
     * reads the other header (RFC 9112 6.3): refused, and the connection closed, whatever follows. */
    if (hs->length)
        return refuse_early(cs, GW_E_BAD_REQUEST, "%s",
                            "the request has both Content-Length and Transfer-Encoding; send one of them");
    if (*hs->te_unknown)
        return refuse_early(cs, GW_E_NOT_IMPLEMENTED,
                            "Transfer-Encoding '%s' is not supported; send the body as it is, or chunked",
                            hs->te_unknown);
    /* MHD delimits a body only for one line that is exactly "chunked"; a list that means the same
     * ("chunked, ", trailing spaces, two lines) would leave it waiting for a body it cannot find the
     * end of. */
    if (hs->te_codings == 0 || hs->te_chunked != 1 || !hs->te_plain)
        return refuse_early(cs, GW_E_BAD_REQUEST, "%s",
                            "Transfer-Encoding must be one line naming chunked once; send "
                            "'Transfer-Encoding: chunked'");
    return MHD_YES;
}

static void release_body(conn_state *cs) {
    if (cs->body_held) atomic_fetch_sub(&cs->call.srv->buffered, cs->body_held);
    cs->body_held = 0;
    sipp_buf_free(&cs->body);
}

/* The first call of a request: its headers are in. Returns MHD_YES to go on reading the body. */
static enum MHD_Result on_headers(conn_state *cs, const char *version) {
    gw_call *call = &cs->call;
    const gw_config *cfg = call->srv->cfg;
    struct MHD_Connection *conn = cs->conn;
    enum MHD_Result rc = check_sizes(cs);
    if (rc != MHD_YES || call->replied) return rc;
    header_scan hs = {0};
    MHD_get_connection_values_n(conn, MHD_HEADER_KIND, scan_header, &hs);
    rc = check_framing(cs, version, &hs);
    if (rc != MHD_YES || call->replied) return rc;
    if (!absolute_form(cs)) {
        gw_reply_header(call, "Connection", "close");
        return queue_reply(cs);
    }
    unsigned long long announced = hs.length ? strtoull(hs.length, NULL, 10) : 0;
    if (announced > cfg->max_request_bytes) {
        call->too_large = true;
        /* A client that waits for "100 Continue", or announces an absurd size, is answered before
         * its body (MHD then closes the connection). Others are read to the end and dropped, since
         * closing on a client still sending resets the connection before it can read the 413. */
        const char *expect = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
        if ((expect && strcasecmp(expect, "100-continue") == 0) ||
            announced / GW_DISCARD_FACTOR > cfg->max_request_bytes) {
            cs->http->handler->route(call);
            return queue_reply(cs);
        }
    }
    return MHD_YES;
}

/* A chunk of body. Returns MHD_NO to close the connection. */
static enum MHD_Result on_body(conn_state *cs, const char *data, size_t n) {
    gw_call *call = &cs->call;
    const gw_config *cfg = call->srv->cfg;
    cs->body_seen += n;
    if (!call->too_large && !call->busy && cs->body.len + n > cfg->max_request_bytes) call->too_large = true;
    if (!call->too_large && !call->busy) {
        size_t before = atomic_fetch_add(&call->srv->buffered, n);
        cs->body_held += n;
        if (before + n > cfg->max_buffered_bytes) {
            call->busy = true;
            call->retry_after_s = GW_BUSY_RETRY_S;
        }
    }
    if (call->too_large || call->busy) {
        release_body(cs);
        /* A dropped body is read to its end, so that the client, still sending, can read the
         * answer; past this much it is cut off instead. */
        if (cs->body_seen / GW_DISCARD_FACTOR > cfg->max_request_bytes) {
            gw_error_kind kind = call->too_large ? GW_E_TOO_LARGE : GW_E_BUSY;
            call->status = gw_error_status(kind);
            call->error_code = gw_error_code(kind);
            return MHD_NO;
        }
        return MHD_YES;
    }
    return sipp_buf_append(&cs->body, data, n) ? MHD_YES : MHD_NO;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
    gw_http *h = cls;
    gw_server *srv = h->srv;
    conn_state *cs = *con_cls;
    if (!cs) {
        cs = calloc(1, sizeof *cs);
        if (!cs) return MHD_NO;
        *con_cls = cs;
        atomic_fetch_add(&srv->in_flight, 1);
        cs->http = h;
        cs->conn = conn;
        cs->call.srv = srv;
        cs->call.priv = cs;
        cs->call.method = method;
        cs->call.path = url;
        cs->call.t_start = sipp_now_ms();
        cs->call.target = -1;
        set_request_id(&cs->call, MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "x-request-id"));
        set_client(cs);
        enum MHD_Result rc = on_headers(cs, version);
        forget_target(conn);
        return rc;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        return on_body(cs, upload_data, n);
    }
    if (cs->call.replied) return MHD_YES;
    set_reading(h, conn, false);
    cs->call.body = cs->body.data ? cs->body.data : "";
    cs->call.body_len = cs->body.len;
    if (trailer_fits(cs)) h->handler->route(&cs->call);
    /* The route has parsed what it needs (a stream keeps its JSON tree, not these bytes): the body
     * is given back now rather than when a long stream ends. */
    release_body(cs);
    cs->call.body = "";
    cs->call.body_len = 0;
    return queue_reply(cs);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    gw_http *h = cls;
    conn_state *cs = *con_cls;
    if (!cs) return;
    *con_cls = NULL;
    set_reading(h, conn, true);
    if (cs->client_gone || toe != MHD_REQUEST_TERMINATED_COMPLETED_OK) cs->client_gone = true;
    if (cs->stream) cs->stream->close(cs->stream);
    cs->stream = NULL;
    h->handler->finish(&cs->call);
    if (cs->response) MHD_destroy_response(cs->response);
    release_body(cs);
    sipp_buf_free(&cs->pending);
    free(cs);
    atomic_fetch_sub(&h->srv->in_flight, 1);
}

bool gw_call_client_gone(const gw_call *call) { return state_of((gw_call *)call)->client_gone; }

static void mhd_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    fputs("sipp: http: ", stderr);
    vfprintf(stderr, fmt, ap);
}

static int hex_value(char c) {
    const char *p = c ? strchr(GW_HEX, c >= 'A' && c <= 'F' ? c - 'A' + 'a' : c) : NULL;
    return p ? (int)(p - GW_HEX) : -1;
}

/* Percent-decodes s in place, except "%00", which is kept so that the path does not end there. */
static size_t unescape(void *cls, struct MHD_Connection *conn, char *s) {
    (void)cls;
    (void)conn;
    char *w = s;
    for (const char *r = s; *r; r++) {
        int hi = r[0] == '%' ? hex_value(r[1]) : -1, lo = hi >= 0 ? hex_value(r[2]) : -1;
        if (hi >= 0 && lo >= 0 && (hi | lo) != 0) {
            *w++ = (char)(hi * 16 + lo);
            r += 2;
        } else {
            *w++ = *r;
        }
    }
    *w = '\0';
    return (size_t)(w - s);
}

/* ---- the daemon --------------------------------------------------------------------------------- */

/* Every connection holds a descriptor, so max_connections (with GW_FD_RESERVE more for models,
 * engines and upstream sockets) must fit under RLIMIT_NOFILE: the soft limit is raised toward the
 * hard one as far as that needs (as servers commonly do; 1024 is a common soft default), and
 * max_connections is lowered, with a line on stderr, when even the hard limit is too low. */
static unsigned connection_cap(const gw_config *cfg) {
    unsigned cap = (unsigned)cfg->max_connections;
    rlim_t want = (rlim_t)cap + GW_FD_RESERVE;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= want) return cap;
    struct rlimit raised = rl;
    raised.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= want ? want : rl.rlim_max;
    if (raised.rlim_cur > rl.rlim_cur && setrlimit(RLIMIT_NOFILE, &raised) == 0) rl = raised;
    if (rl.rlim_cur >= want) return cap;
    unsigned room = rl.rlim_cur > GW_FD_RESERVE ? (unsigned)(rl.rlim_cur - GW_FD_RESERVE) : 1;
    fprintf(stderr,
            "sipp: max_connections lowered from %u to %u (the descriptor limit is %llu; raise it with ulimit "
            "-n)\n",
            cap, room, (unsigned long long)rl.rlim_cur);
    return room;
}

gw_http *gw_http_start(gw_server *srv, int listen_fd, const gw_handler *handler, char *err) {
    gw_http *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(err, SIPP_ERROR_SIZE, "out of memory");
        close(listen_fd);
        return NULL;
    }
    const gw_config *cfg = srv->cfg;
    h->srv = srv;
    h->handler = handler;
    pthread_mutex_init(&h->mu, NULL);
    unsigned idle = (unsigned)(cfg->request_timeout_seconds + GW_IDLE_MARGIN_S);
    h->daemon = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_ITC | MHD_USE_ERROR_LOG, 0,
        NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h, MHD_OPTION_LISTEN_SOCKET,
        listen_fd, MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_NOTIFY_CONNECTION, on_connection,
        h, MHD_OPTION_UNESCAPE_CALLBACK, unescape, h, MHD_OPTION_URI_LOG_CALLBACK, on_target, h,
        MHD_OPTION_CONNECTION_TIMEOUT, idle, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)GW_CONNECTION_MEMORY,
        MHD_OPTION_CONNECTION_LIMIT, connection_cap(cfg), MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        (unsigned)cfg->max_connections_per_client, MHD_OPTION_END);
    if (!h->daemon) {
        snprintf(err, SIPP_ERROR_SIZE, "cannot start the HTTP server on %s", cfg->host);
        close(listen_fd);
        pthread_mutex_destroy(&h->mu);
        free(h);
        return NULL;
    }
    h->watchdog_started = pthread_create(&h->watchdog, NULL, watchdog_main, h) == 0;
    return h;
}

void gw_http_quiesce(gw_http *h) {
    MHD_socket ls = MHD_quiesce_daemon(h->daemon);
    /* MHD's polling thread may still hold the socket in poll() for a moment, and close() alone leaves
     * it listening until that returns; shutdown() stops it accepting at once. */
    if (ls != MHD_INVALID_SOCKET) {
        shutdown(ls, SHUT_RDWR);
        close(ls);
    }
}

void gw_http_stop(gw_http *h) {
    if (!h) return;
    atomic_store(&h->stopping, true);
    if (h->watchdog_started) pthread_join(h->watchdog, NULL);
    MHD_stop_daemon(h->daemon);
    pthread_mutex_destroy(&h->mu);
    free(h);
}
