/*
 * router.c: the route table, and the gw_handler the connection layer runs every request with.
 *
 * dispatch: the guard's checks on every request, the CORS preflight, the refusals that need no
 * route (draining, an over-long body, the server's body memory full), then the table. A path the
 * table knows with another method is a 405 with Allow; an unknown path a 404. HEAD is GET without
 * the body (MHD leaves the body out): health checks and `curl -I` use it.
 *
 * finish: runs once per request, whatever became of it: gives back the admission permit, records
 * the request in the metrics and writes the log line.
 *
 * To add a route, add one line to the table (and its handler to routes.h).
 */
#include <stdio.h>
#include <string.h>

#include "gateway/admission.h"
#include "gateway/guard.h"
#include "gateway/metrics.h"
#include "gateway/router.h"
#include "gateway/routes.h"

#define GW_MS_PER_S 1000.0

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

static bool method_matches(const char *route_method, const char *method) {
    return strcmp(route_method, method) == 0 ||
           (strcmp(route_method, "GET") == 0 && strcmp(method, "HEAD") == 0);
}

static void run(gw_call *call, int flags, void (*fn)(gw_call *)) {
    if ((flags & ROUTE_AUTH) == 0 || gw_guard_route(call)) fn(call);
}

static void route_model(gw_call *call) { gw_route_model(call, call->path + strlen(MODELS_PREFIX)); }

/* POST /v1/models/{name}/load and /unload */
static void route_model_residency(gw_call *call) {
    const char *rest = call->path + strlen(MODELS_PREFIX);
    const char *slash = strrchr(rest, '/');
    gw_route_model_residency(call, rest, (size_t)(slash - rest), slash + 1);
}

static bool is_residency_path(const char *path) {
    const char *slash = strrchr(path + strlen(MODELS_PREFIX), '/');
    return slash && (strcmp(slash, "/load") == 0 || strcmp(slash, "/unload") == 0);
}

static void dispatch(gw_call *call) {
    gw_server *srv = call->srv;
    if (!gw_guard_request(call)) return;
    if (strcmp(call->method, "OPTIONS") == 0) {
        gw_guard_preflight(call);
        return;
    }
    if (atomic_load(&srv->draining)) {
        gw_reply_error(call, GW_E_NOT_READY, "the server is shutting down");
        return;
    }
    if (call->too_large) {
        gw_reply_error(call, GW_E_TOO_LARGE,
                       "the request body is over max_request_bytes (%zu bytes); send less",
                       srv->cfg->max_request_bytes);
        return;
    }
    if (call->busy) {
        gw_reply_error(call, GW_E_BUSY,
                       "the server holds max_buffered_bytes (%zu) of incoming request bodies; retry shortly",
                       srv->cfg->max_buffered_bytes);
        return;
    }
    const char *allowed = NULL; /* the path's method, when the path is known */
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        if (strcmp(routes[i].path, call->path) != 0) continue;
        allowed = routes[i].method;
        if (!method_matches(routes[i].method, call->method)) continue;
        run(call, routes[i].flags, routes[i].fn);
        return;
    }
    if (!allowed && strncmp(call->path, MODELS_PREFIX, strlen(MODELS_PREFIX)) == 0 && is_residency_path(call->path)) {
        if (strcmp(call->method, "POST") == 0) {
            run(call, ROUTE_AUTH, route_model_residency);
            return;
        }
        allowed = "POST";
    } else if (!allowed && strncmp(call->path, MODELS_PREFIX, strlen(MODELS_PREFIX)) == 0) {
        if (method_matches("GET", call->method)) {
            run(call, ROUTE_AUTH, route_model);
            return;
        }
        allowed = "GET";
    }
    if (allowed) {
        gw_reply_error(call, GW_E_METHOD, "%s is not allowed on %s; use %s", call->method, call->path,
                       allowed);
        gw_reply_header(call, "Allow", strcmp(allowed, "GET") == 0 ? "GET, HEAD" : allowed);
        return;
    }
    gw_reply_error(call, GW_E_UNKNOWN_ROUTE, "no route %s %s; see docs/gateway.md for the routes",
                   call->method, call->path);
}

static void finish(gw_call *call) {
    gw_server *srv = call->srv;
    gw_call_release(call);
    double secs = (sipp_now_ms() - call->t_start) / GW_MS_PER_S;
    int status = call->replied || call->status ? call->status : 0;
    gw_metrics_request(srv->metrics, call->target, status, call->error_code, secs);
    sipp_buf line = {0};
    gw_echo_escape(call->path, &line);
    fprintf(stderr, "sipp: %s \"%s %s\" %d %.1f ms%s%s id=%s%s\n", call->client, call->method,
            line.data ? line.data : "", status, secs * GW_MS_PER_S, call->target >= 0 ? " target=" : "",
            call->target >= 0 ? srv->targets[call->target].cfg->name : "", call->request_id,
            gw_call_client_gone(call) ? " (client gone)" : "");
    sipp_buf_free(&line);
}

const gw_handler gw_router = {.dispatch = dispatch, .finish = finish};
