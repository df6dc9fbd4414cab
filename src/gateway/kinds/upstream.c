/*
 * upstream.c: remote targets (type = "openai_compatible"): another sipp, llama-server, a provider.
 *
 * Forwarding. The body goes to base_url + the route's suffix ("/chat/completions", ...), with its
 * "model" replaced by the target's `model` and the gateway's own Authorization replaced by the
 * upstream's key (api_key_env). The transfer runs on libcurl's multi interface, driven from the
 * connection's thread: the handler drives it until the upstream's status line and headers are in,
 * then answers with that status. A streamed 2xx answer becomes a gw_stream whose pull drives the
 * transfer a little further each time and hands on whatever bytes arrived, unchanged, so SSE
 * passes through with the upstream's own framing and pace. Anything else is read whole and
 * answered with the upstream's status and body.
 *
 * Replicas and ejection. With several base_urls, requests go round-robin over the replicas in
 * rotation. A replica that cannot be reached (connect, send or receive failure before any answer)
 * or that answers 502/503/504 is ejected and the request is tried on the next one; the client
 * sees an error only when every replica failed. A probe thread asks each ejected replica for
 * GET base_url/models every GW_PROBE_INTERVAL_MS and puts it back in rotation when it answers 200.
 * When every replica is ejected, requests still try them (a replica may be back before its probe
 * says so), so a short outage costs at most one failed attempt per replica.
 *
 * Errors: no replica answered: 502; the upstream took longer than timeout_seconds (or what is
 * left of request_timeout_seconds): 504; the upstream's own errors pass through with its status.
 *
 * Supervised targets (supervise.c: a child process serving a target on backend rpc) use the same
 * machinery with one replica, the child. A request is refused with 503 and the target's error
 * while the child is not serving. When a transfer breaks off because the child exited (an rpc
 * server went away), the error, a 502 or a stream's error event, is the child's own last word,
 * which names the host, rather than the socket's; and the replica is not ejected: the supervisor
 * knows better than the probe when the child is back.
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "gateway/http/http.h"
#include "gateway/kinds/kinds.h"
#include "gateway/metrics.h"

#define GW_PROBE_INTERVAL_MS 1000
#define GW_PROBE_TIMEOUT_MS 2000
#define GW_CONNECT_TIMEOUT_MS 5000
#define GW_DRIVE_SLICE_MS 100
#define GW_MAX_UPSTREAM_BODY ((size_t)64 << 20)
#define GW_CONTENT_TYPE_SIZE 128
#define GW_PROBE_PATH "/models"
#define GW_HTTP_OK 200
#define GW_HTTP_CONTINUE 100
#define GW_HTTP_BAD_REQUEST 400
#define GW_LOST_WAIT_MS 3000 /* how long a broken transfer waits to see its child exit */
#define GW_NOT_SERVING_RETRY_S 1

typedef struct upstream_replica {
    char *url;
    bool healthy;
    char last_error[SIPP_ERROR_SIZE];
} upstream_replica;

struct gw_upstream {
    const gw_target_config *cfg;
    pthread_mutex_t mu; /* guards healthy, last_error, next */
    upstream_replica *r;
    size_t n;
    size_t next;
    char *auth; /* "Authorization: Bearer KEY", or NULL */
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

gw_upstream *gw_upstream_new(const gw_target_config *cfg, char *err) {
    pthread_once(&curl_once, curl_init);
    gw_upstream *u = calloc(1, sizeof *u);
    if (!u || !(u->r = calloc(cfg->n_base_urls ? cfg->n_base_urls : 1, sizeof *u->r))) {
        free(u);
        sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
        return NULL;
    }
    u->cfg = cfg;
    pthread_mutex_init(&u->mu, NULL);
    for (size_t i = 0; i < cfg->n_base_urls; i++) {
        u->r[i].url = strdup(cfg->base_urls[i]);
        u->r[i].healthy = true;
    }
    u->n = cfg->n_base_urls;
    const char *key = cfg->api_key_env ? getenv(cfg->api_key_env) : NULL;
    if (key && *key) {
        size_t n = strlen(key) + sizeof "Authorization: Bearer ";
        u->auth = malloc(n);
        if (u->auth) snprintf(u->auth, n, "Authorization: Bearer %s", key);
    }
    return u;
}

void gw_upstream_set_bearer(gw_upstream *u, const char *token) {
    size_t n = strlen(token) + sizeof "Authorization: Bearer ";
    char *auth = malloc(n);
    if (!auth) return;
    snprintf(auth, n, "Authorization: Bearer %s", token);
    free(u->auth);
    u->auth = auth;
}

void gw_upstream_free(gw_upstream *u) {
    if (!u) return;
    for (size_t i = 0; i < u->n; i++)
        free(u->r[i].url);
    free(u->r);
    free(u->auth);
    pthread_mutex_destroy(&u->mu);
    free(u);
}

static void set_health(gw_upstream *u, size_t i, bool healthy, const char *why) {
    pthread_mutex_lock(&u->mu);
    bool was = u->r[i].healthy;
    u->r[i].healthy = healthy;
    if (why) snprintf(u->r[i].last_error, sizeof u->r[i].last_error, "%s", why);
    pthread_mutex_unlock(&u->mu);
    if (was && !healthy)
        fprintf(stderr, "sipp: target '%s': replica %s ejected: %s\n", u->cfg->name, u->r[i].url,
                why ? why : "");
    if (!was && healthy)
        fprintf(stderr, "sipp: target '%s': replica %s is healthy again\n", u->cfg->name, u->r[i].url);
}

/* The next replica to try: round-robin over the healthy ones not tried yet, else any not tried. */
static bool pick(gw_upstream *u, const bool *tried, size_t *out) {
    pthread_mutex_lock(&u->mu);
    bool found = false;
    for (int pass = 0; pass < 2 && !found; pass++)
        for (size_t k = 0; k < u->n && !found; k++) {
            size_t i = (u->next + k) % u->n;
            if (tried[i] || (pass == 0 && !u->r[i].healthy)) continue;
            *out = i;
            found = true;
        }
    if (found) u->next = (*out + 1) % u->n;
    pthread_mutex_unlock(&u->mu);
    return found;
}

/* ---- one transfer ------------------------------------------------------------------------------- */

typedef struct xfer {
    gw_stream base;
    gw_call *call;
    gw_upstream *up;
    gw_target *target;
    uint64_t epoch; /* a supervised target's: its children's exits when this transfer started */
    size_t replica;
    CURLM *multi;
    CURL *easy;
    struct curl_slist *headers;
    char *body;
    sipp_buf in;   /* received, not handed on yet */
    sipp_buf scan; /* a streamed answer's incomplete last line, scanned for usage */
    bool first_seen;
    long status;
    bool headers_done;
    bool done;
    bool too_big;
    bool stopping; /* the server is stopping: end the stream now */
    CURLcode result;
    char content_type[GW_CONTENT_TYPE_SIZE];
    char errbuf[CURL_ERROR_SIZE];
} xfer;

static size_t on_header(char *line, size_t size, size_t n, void *arg) {
    xfer *x = arg;
    size_t len = size * n;
    static const char ct[] = "content-type:";
    if (len > sizeof ct - 1 && strncasecmp(line, ct, sizeof ct - 1) == 0) {
        const char *v = line + sizeof ct - 1;
        size_t vl = len - (sizeof ct - 1);
        while (vl && (*v == ' ' || *v == '\t'))
            v++, vl--;
        while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
            vl--;
        if (vl >= sizeof x->content_type) vl = sizeof x->content_type - 1;
        memcpy(x->content_type, v, vl);
        x->content_type[vl] = '\0';
    }
    if (len <= 2 && (line[0] == '\r' || line[0] == '\n')) { /* the blank line that ends a header block */
        long code = 0;
        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
        if (code >= GW_HTTP_OK || (code > 0 && code != GW_HTTP_CONTINUE)) {
            x->status = code;
            x->headers_done = true;
        }
    }
    return len;
}

static size_t on_body(char *data, size_t size, size_t n, void *arg) {
    xfer *x = arg;
    size_t len = size * n;
    if (x->in.len + len > GW_MAX_UPSTREAM_BODY) {
        x->too_big = true;
        return 0; /* aborts the transfer */
    }
    return sipp_buf_append(&x->in, data, len) ? len : 0;
}

/* Runs the transfer for up to wait_ms. */
static void drive(xfer *x, int wait_ms) {
    int running = 0;
    curl_multi_perform(x->multi, &running);
    if (running && !x->done) {
        curl_multi_poll(x->multi, NULL, 0, wait_ms, NULL);
        curl_multi_perform(x->multi, &running);
    }
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(x->multi, &left)))
        if (m->msg == CURLMSG_DONE) {
            x->done = true;
            x->result = m->data.result;
            if (!x->headers_done && x->result == CURLE_OK) {
                curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &x->status);
                x->headers_done = true;
            }
        }
}

static void xfer_free(xfer *x) {
    if (!x) return;
    if (x->multi && x->easy) curl_multi_remove_handle(x->multi, x->easy);
    if (x->easy) curl_easy_cleanup(x->easy);
    if (x->multi) curl_multi_cleanup(x->multi);
    curl_slist_free_all(x->headers);
    free(x->body);
    sipp_buf_free(&x->in);
    sipp_buf_free(&x->scan);
    free(x);
}

static xfer *xfer_start(gw_call *call, gw_upstream *u, size_t replica, const char *suffix, const char *body,
                        int timeout_ms) {
    xfer *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    x->call = call;
    x->up = u;
    x->replica = replica;
    x->body = body ? strdup(body) : NULL;
    x->multi = curl_multi_init();
    x->easy = curl_easy_init();
    if (!x->multi || !x->easy || (body && !x->body)) {
        xfer_free(x);
        return NULL;
    }
    char url[SIPP_ERROR_SIZE];
    snprintf(url, sizeof url, "%s%s", u->r[replica].url, suffix);
    char rid[sizeof call->request_id + sizeof "x-request-id: "];
    snprintf(rid, sizeof rid, "x-request-id: %s", call->request_id);
    x->headers = curl_slist_append(x->headers, "Content-Type: application/json");
    x->headers = curl_slist_append(x->headers, "Expect:");
    x->headers = curl_slist_append(x->headers, rid);
    if (u->auth) x->headers = curl_slist_append(x->headers, u->auth);
    CURL *e = x->easy;
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->headers);
    if (x->body) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, x->body);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(x->body));
    }
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)GW_CONNECT_TIMEOUT_MS);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf);
    curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
    curl_multi_add_handle(x->multi, e);
    return x;
}

static bool is_timeout(CURLcode c) { return c == CURLE_OPERATION_TIMEDOUT; }
/* Answers that say "this replica cannot serve now" rather than "this request is wrong". */
static bool is_replica_status(long s) {
    return s == gw_error_status(GW_E_UPSTREAM) || s == gw_error_status(GW_E_NOT_READY) ||
           s == gw_error_status(GW_E_TIMEOUT);
}

/* Why a transfer to a supervised target broke off, when its child exited meanwhile: the child's
 * last word (it names the rpc host) into msg. */
static bool child_lost(gw_target *t, uint64_t epoch, char *msg, size_t n) {
    return t->supervisor && gw_supervise_lost(t, epoch, GW_LOST_WAIT_MS, msg, n);
}

/* Takes a failing replica out of rotation, unless it is a supervised child (see the top). */
static void eject(gw_target *t, size_t i, const char *why) {
    if (!t->supervisor) set_health(t->upstream, i, false, why);
}

/* ---- usage, for the metrics --------------------------------------------------------------------- */

/* Records the token counts of an answer (OpenAI's "usage" object, or sipp-native usage fields at
 * the top level). */
static void record_usage(gw_call *call, int target, json_t *j, double ttft_s) {
    json_t *u = json_object_get(j, "usage");
    if (!json_is_object(u)) u = json_is_integer(json_object_get(j, "generated_tokens")) ? j : NULL;
    if (!u) return;
    json_t *gen = json_object_get(u, "completion_tokens");
    if (!gen) gen = json_object_get(u, "generated_tokens");
    json_t *cached = json_object_get(json_object_get(u, "prompt_tokens_details"), "cached_tokens");
    if (!cached) cached = json_object_get(u, "cached_tokens");
    gw_metrics_tokens(call->srv->metrics, target,
                      (int)json_integer_value(json_object_get(u, "prompt_tokens")),
                      (int)json_integer_value(cached), (int)json_integer_value(gen), ttft_s);
}

/* Scans complete "data: {...}" lines of a streamed answer for usage. */
static void scan_stream(xfer *x, int target, const char *data, size_t len) {
    static const char prefix[] = "data: {";
    sipp_buf_append(&x->scan, data, len);
    char *nl;
    while (x->scan.data && (nl = memchr(x->scan.data, '\n', x->scan.len))) {
        size_t n = (size_t)(nl - x->scan.data);
        if (n > sizeof prefix - 1 && memcmp(x->scan.data, prefix, sizeof prefix - 2) == 0 &&
            memmem(x->scan.data, n, "_tokens\"", sizeof "_tokens\"" - 1)) {
            json_t *j = json_loadb(x->scan.data + sizeof prefix - 2, n - (sizeof prefix - 2), 0, NULL);
            if (j) record_usage(x->call, target, j, -1);
            json_decref(j);
        }
        sipp_buf_consume(&x->scan, n + 1);
    }
}

/* ---- the stream --------------------------------------------------------------------------------- */

static bool xs_pull(gw_stream *s, sipp_buf *out, int wait_ms) {
    xfer *x = (xfer *)s;
    if (x->stopping) {
        x->call->error_code = gw_error_code(GW_E_NOT_READY);
        gw_sse_json(
            out, NULL,
            gw_error_json(GW_E_NOT_READY, "the server is shutting down: shutdown_timeout_seconds passed"));
        return false;
    }
    if (x->in.len == 0 && !x->done) drive(x, wait_ms);
    if (x->in.len) {
        if (!x->first_seen) {
            x->first_seen = true;
            gw_metrics_tokens(x->call->srv->metrics, x->call->target, 0, 0, 0,
                              (sipp_now_ms() - x->call->t_start) / 1e3);
        }
        scan_stream(x, x->call->target, x->in.data, x->in.len);
        sipp_buf_append(out, x->in.data, x->in.len);
        x->in.len = 0;
    }
    if (!x->done) return true;
    if (x->result != CURLE_OK) {
        gw_error_kind kind = is_timeout(x->result) ? GW_E_TIMEOUT : GW_E_UPSTREAM;
        char msg[2 * SIPP_ERROR_SIZE], lost[SIPP_ERROR_SIZE];
        if (child_lost(x->target, x->epoch, lost, sizeof lost))
            snprintf(msg, sizeof msg, "model '%s' failed mid-stream: %s", x->target->cfg->name, lost);
        else
            snprintf(msg, sizeof msg, "upstream %s failed mid-stream: %s", x->up->r[x->replica].url,
                     x->errbuf[0] ? x->errbuf : curl_easy_strerror(x->result));
        x->call->error_code = gw_error_code(kind);
        gw_sse_json(out, NULL, gw_error_json(kind, msg));
        if (!is_timeout(x->result)) eject(x->target, x->replica, msg);
        x->result = CURLE_OK; /* reported once */
    }
    return false;
}

/* The server is stopping: the next pull ends the stream with an error event. */
static void xs_stop(gw_stream *s) { ((xfer *)s)->stopping = true; }

static void xs_close(gw_stream *s) { xfer_free((xfer *)s); }

/* ---- forwarding --------------------------------------------------------------------------------- */

/* The body as sent upstream: the parsed tree with "model" replaced (on a shallow copy: the
 * caller's tree is left as it is). */
static char *rewrite_body(json_t *root, const gw_target_config *cfg) {
    json_t *copy = json_is_object(root) ? json_copy(root) : NULL;
    if (!copy) return NULL;
    json_object_set_new(copy, "model", json_string(cfg->remote_model ? cfg->remote_model : cfg->name));
    char *s = json_dumps(copy, JSON_COMPACT);
    json_decref(copy);
    return s;
}

/* Sends body to a replica in rotation, trying the next one when a replica cannot be reached or
 * answers 502/503/504, and waits for the status line. Returns the transfer (*replica is the one
 * that answered), or NULL after replying with the error. */
static xfer *send_to_replicas(gw_call *call, gw_target *t, const char *suffix, const char *body,
                              size_t *replica) {
    gw_upstream *u = t->upstream;
    char why[SIPP_ERROR_SIZE];
    if (t->supervisor && !gw_supervise_serving(t, why, sizeof why)) {
        call->retry_after_s = GW_NOT_SERVING_RETRY_S;
        gw_reply_error(call, GW_E_NOT_READY, "model '%s' is not ready: %s", t->cfg->name, why);
        return NULL;
    }
    uint64_t epoch = t->supervisor ? gw_supervise_epoch(t) : 0;
    bool *tried = calloc(u->n ? u->n : 1, sizeof *tried);
    char last[SIPP_ERROR_SIZE] = "no replica configured";
    size_t i = 0;
    xfer *x = NULL;
    while (tried && pick(u, tried, &i)) {
        tried[i] = true;
        int timeout_ms = gw_call_ms_left(call);
        if (timeout_ms > t->cfg->timeout_seconds * 1000) timeout_ms = t->cfg->timeout_seconds * 1000;
        x = xfer_start(call, u, i, suffix, body, timeout_ms);
        if (!x) break;
        x->target = t;
        x->epoch = epoch;
        while (!x->headers_done && !x->done && !gw_call_abandoned(call))
            drive(x, GW_DRIVE_SLICE_MS);
        if (!x->headers_done && !x->done) { /* the client left */
            xfer_free(x);
            x = NULL;
            gw_reply_error(call, GW_E_NOT_READY, "the request was abandoned");
            break;
        }
        if (x->done && x->result != CURLE_OK && !x->headers_done) {
            snprintf(last, sizeof last, "%s: %s", u->r[i].url,
                     x->errbuf[0] ? x->errbuf : curl_easy_strerror(x->result));
            if (is_timeout(x->result)) {
                xfer_free(x);
                x = NULL;
                gw_reply_error(call, GW_E_TIMEOUT, "model '%s': upstream %s took longer than %d s",
                               t->cfg->name, u->r[i].url, timeout_ms / 1000);
                break;
            }
            if (child_lost(t, epoch, why, sizeof why)) snprintf(last, sizeof last, "%s", why);
            eject(t, i, last);
            xfer_free(x);
            x = NULL;
            continue;
        }
        if (is_replica_status(x->status)) {
            snprintf(last, sizeof last, "%s answered %ld", u->r[i].url, x->status);
            eject(t, i, last);
            bool more = false;
            for (size_t k = 0; k < u->n; k++)
                more = more || !tried[k];
            if (more) {
                xfer_free(x);
                x = NULL;
                continue;
            }
        }
        break;
    }
    free(tried);
    if (!x && !call->replied)
        gw_reply_error(call, GW_E_UPSTREAM, "model '%s': no upstream replica answered (last: %s)",
                       t->cfg->name, last);
    *replica = i;
    return x;
}

/* Reads the rest of a transfer's answer. False after replying when it broke off. */
static bool finish_transfer(gw_call *call, gw_target *t, xfer *x, size_t i) {
    while (!x->done && !gw_call_abandoned(call))
        drive(x, GW_DRIVE_SLICE_MS);
    if (!x->done) {
        gw_reply_error(call, GW_E_NOT_READY, "the request was abandoned");
    } else if (x->too_big) {
        gw_reply_error(call, GW_E_UPSTREAM, "model '%s': the upstream's answer is over %zu bytes",
                       t->cfg->name, GW_MAX_UPSTREAM_BODY);
    } else if (x->result != CURLE_OK) {
        gw_error_kind kind = is_timeout(x->result) ? GW_E_TIMEOUT : GW_E_UPSTREAM;
        char lost[SIPP_ERROR_SIZE];
        if (child_lost(t, x->epoch, lost, sizeof lost))
            gw_reply_error(call, kind, "model '%s' failed: %s", t->cfg->name, lost);
        else
            gw_reply_error(call, kind, "model '%s': upstream %s failed: %s", t->cfg->name,
                           t->upstream->r[i].url, x->errbuf[0] ? x->errbuf : curl_easy_strerror(x->result));
    } else {
        if (x->status >= GW_HTTP_OK && x->status < GW_HTTP_OK + 100) {
            json_t *j = json_loadb(x->in.data ? x->in.data : "", x->in.len, 0, NULL);
            record_usage(call, t->index, j, -1);
            json_decref(j);
        } else if (x->status >= GW_HTTP_BAD_REQUEST) {
            call->error_code = gw_error_code(GW_E_UPSTREAM);
        }
        return true;
    }
    return false;
}

void gw_upstream_forward(gw_call *call, gw_target *t, const char *suffix, json_t *root, bool stream) {
    char *body = rewrite_body(root, t->cfg);
    if (!body) {
        gw_reply_error(call, GW_E_INVALID_JSON, "the body must be a JSON object");
        return;
    }
    size_t i;
    xfer *x = send_to_replicas(call, t, suffix, body, &i);
    free(body);
    if (!x) return;
    /* A short stream may be over already: an event stream is still relayed as one, with a stream's
     * headers, however fast the upstream was. */
    bool sse = strncasecmp(x->content_type, "text/event-stream", strlen("text/event-stream")) == 0;
    if (stream && x->status >= GW_HTTP_OK && x->status < GW_HTTP_OK + 100 && (!x->done || sse)) {
        x->base.pull = xs_pull;
        x->base.stop = xs_stop;
        x->base.close = xs_close;
        gw_reply_stream(call, x->content_type[0] ? x->content_type : "text/event-stream", &x->base);
        return;
    }
    if (finish_transfer(call, t, x, i)) {
        char *text = x->in.data;
        size_t len = x->in.len;
        x->in = (sipp_buf){0};
        gw_reply_text(call, (int)x->status, x->content_type[0] ? x->content_type : "application/json", text,
                      len);
    }
    xfer_free(x);
}

/* Posts body (its "model" set to the upstream's) and waits for the status line: the transfer, or
 * NULL after replying. */
static xfer *post_json(gw_call *call, gw_target *t, const char *suffix, json_t *body, size_t *replica) {
    json_object_set_new(body, "model",
                        json_string(t->cfg->remote_model ? t->cfg->remote_model : t->cfg->name));
    char *text = json_dumps(body, JSON_COMPACT);
    if (!text) {
        gw_reply_error(call, GW_E_INTERNAL, "out of memory");
        return NULL;
    }
    xfer *x = send_to_replicas(call, t, suffix, text, replica);
    free(text);
    return x;
}

/* Reads the whole answer of x and parses it into *status and *answer. False after replying. */
static bool read_answer(gw_call *call, gw_target *t, xfer *x, size_t i, long *status, json_t **answer) {
    if (!finish_transfer(call, t, x, i)) return false;
    *status = x->status;
    *answer = json_loadb(x->in.data ? x->in.data : "", x->in.len, 0, NULL);
    if (*answer) return true;
    gw_reply_error(call, GW_E_UPSTREAM, "model '%s': the upstream's answer (HTTP %ld) is not JSON",
                   t->cfg->name, x->status);
    return false;
}

bool gw_upstream_fetch(gw_call *call, gw_target *t, const char *suffix, json_t *body, long *status,
                       json_t **answer) {
    size_t i;
    xfer *x = post_json(call, t, suffix, body, &i);
    bool ok = x && read_answer(call, t, x, i, status, answer);
    xfer_free(x);
    return ok;
}

gw_stream *gw_upstream_open(gw_call *call, gw_target *t, const char *suffix, json_t *body, long *status,
                            json_t **answer) {
    *answer = NULL;
    size_t i;
    xfer *x = post_json(call, t, suffix, body, &i);
    if (!x) return NULL;
    /* A short stream may be over already: an event stream is still handed on as a stream. */
    bool sse = strncasecmp(x->content_type, "text/event-stream", strlen("text/event-stream")) == 0;
    if (x->status >= GW_HTTP_OK && x->status < GW_HTTP_OK + 100 && (!x->done || sse)) {
        *status = x->status;
        x->base.pull = xs_pull;
        x->base.stop = xs_stop;
        x->base.close = xs_close;
        return &x->base;
    }
    if (!read_answer(call, t, x, i, status, answer)) *answer = NULL;
    xfer_free(x);
    return NULL;
}

/* ---- health --------------------------------------------------------------------------------------- */

static size_t discard(char *data, size_t size, size_t n, void *arg) { return size * n; }

static bool probe(gw_upstream *u, size_t i) {
    CURL *e = curl_easy_init();
    if (!e) return false;
    char url[SIPP_ERROR_SIZE];
    snprintf(url, sizeof url, "%s%s", u->r[i].url, GW_PROBE_PATH);
    struct curl_slist *h = u->auth ? curl_slist_append(NULL, u->auth) : NULL;
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)GW_PROBE_TIMEOUT_MS);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
    long code = 0;
    bool ok = curl_easy_perform(e) == CURLE_OK &&
              curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code) == CURLE_OK && code == GW_HTTP_OK;
    curl_slist_free_all(h);
    curl_easy_cleanup(e);
    return ok;
}

struct gw_prober {
    gw_server *srv;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
};

static void *prober_main(void *arg) {
    struct gw_prober *p = arg;
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        struct timespec ts;
        sipp_deadline_in(&ts, CLOCK_MONOTONIC, GW_PROBE_INTERVAL_MS);
        pthread_cond_timedwait(&p->cv, &p->mu, &ts);
        if (p->stop) break;
        pthread_mutex_unlock(&p->mu);
        for (size_t t = 0; t < p->srv->n_targets; t++) {
            gw_upstream *u = p->srv->targets[t].upstream;
            for (size_t i = 0; u && i < u->n; i++) {
                pthread_mutex_lock(&u->mu);
                bool healthy = u->r[i].healthy;
                pthread_mutex_unlock(&u->mu);
                if (!healthy && probe(u, i)) set_health(u, i, true, NULL);
            }
        }
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

bool gw_probe_start(gw_server *srv) {
    bool any = false;
    for (size_t t = 0; t < srv->n_targets; t++)
        any = any || srv->targets[t].upstream;
    if (!any) return true;
    struct gw_prober *p = calloc(1, sizeof *p);
    if (!p) return false;
    p->srv = srv;
    pthread_mutex_init(&p->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&p->thread, NULL, prober_main, p) != 0) {
        free(p);
        return false;
    }
    srv->prober = p;
    return true;
}

void gw_probe_stop(gw_server *srv) {
    struct gw_prober *p = srv->prober;
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
    srv->prober = NULL;
}

json_t *gw_upstream_describe(gw_upstream *u) {
    json_t *a = json_array();
    pthread_mutex_lock(&u->mu);
    for (size_t i = 0; i < u->n; i++) {
        json_t *o = json_pack("{s:s, s:b}", "url", u->r[i].url, "healthy", u->r[i].healthy);
        if (!u->r[i].healthy) json_object_set_new(o, "last_error", json_string(u->r[i].last_error));
        json_array_append_new(a, o);
    }
    pthread_mutex_unlock(&u->mu);
    return a;
}

void gw_upstream_metrics(gw_upstream *u, const char *target, sipp_buf *out) {
    pthread_mutex_lock(&u->mu);
    for (size_t i = 0; i < u->n; i++)
        sipp_buf_appendf(out, "sipp_upstream_healthy{target=\"%s\",url=\"%s\"} %d\n", target, u->r[i].url,
                         u->r[i].healthy ? 1 : 0);
    pthread_mutex_unlock(&u->mu);
}
