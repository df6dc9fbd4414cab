/*
 * router.c: the route table, and the gw_handler the connection layer runs every request with.
 *
 * route_call: the error shape of the path's route (OpenAI's, Anthropic's or Ollama's; set first, so
 * that even the guard's refusals and a 413 come in it), the guard's checks on every request, the CORS
 * preflight, the refusals that need no route (draining, an over-long body, the server's body memory full),
 * then the table. A path the table knows with another method is a 405 with Allow; an unknown path a 404. HEAD
 * is GET without the body (MHD leaves the body out): health checks and `curl -I` use it.
 *
 * finish: runs once per request, whatever became of it: gives back the admission permit, records
 * the request in the metrics and writes the log line.
 *
 * To add a route, add one line to the table (and its handler to api/api.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/api/api.h"
#include "gateway/fleet/fleet.h"
#include "gateway/http/http.h"
#include "gateway/metrics.h"

#define GW_MS_PER_S 1000.0
#define GW_ALLOW_SIZE 64 /* a path's methods, for Allow */

/* Flags: whether the route needs a token, and whose error shape it answers in (an Ollama route
 * also takes the bodies Ollama's clients send, a form route multipart/form-data: see gw_guard_route). A path
 * ending in '*' matches every longer path that starts with what comes before it (the route reads call->path).
 */
enum { ROUTE_OPEN = 0, ROUTE_AUTH = 1, ROUTE_ANTHROPIC = 2, ROUTE_OLLAMA = 4, ROUTE_FORM = 8 };
#define ROUTE_WILDCARD '*'

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
    {"GET", "/browser/*", gw_route_browser, ROUTE_OPEN},
    {"GET", "/health", gw_route_health, ROUTE_OPEN},
    {"GET", "/ready", gw_route_ready, ROUTE_OPEN},
    {"GET", "/metrics", gw_route_metrics, ROUTE_OPEN},
    {"GET", "/v1/models", gw_route_models, ROUTE_AUTH},
    {"GET", "/v1/backends", gw_route_backends, ROUTE_AUTH},
    {"GET", "/v1/mcp/tools", gw_route_mcp_tools, ROUTE_AUTH},
    {"GET", "/lora-adapters", gw_route_lora_get, ROUTE_AUTH},
    {"POST", "/lora-adapters", gw_route_lora_set, ROUTE_AUTH},
    {"POST", "/v1/chat/completions", gw_route_chat_completions, ROUTE_AUTH},
    {"POST", "/v1/completions", gw_route_completions, ROUTE_AUTH},
    {"POST", "/v1/embeddings", gw_route_embeddings, ROUTE_AUTH},
    {"POST", "/v1/audio/transcriptions", gw_route_transcriptions, ROUTE_AUTH | ROUTE_FORM},
    {"POST", "/v1/audio/translations", gw_route_translations, ROUTE_AUTH | ROUTE_FORM},
    {"POST", "/v1/audio/speech", gw_route_speech, ROUTE_AUTH},
    {"POST", "/v1/query", gw_route_native_query, ROUTE_AUTH},
    {"POST", "/v1/chat", gw_route_native_chat, ROUTE_AUTH},
    {"POST", "/v1/embed", gw_route_native_embed, ROUTE_AUTH},
    {"POST", "/v1/responses", gw_route_responses, ROUTE_AUTH},
    {"GET", "/v1/responses/*", gw_route_response_get, ROUTE_AUTH},
    {"DELETE", "/v1/responses/*", gw_route_response_delete, ROUTE_AUTH},
    {"POST", "/v1/messages", gw_route_messages, ROUTE_AUTH | ROUTE_ANTHROPIC},
    {"POST", "/v1/messages/count_tokens", gw_route_messages_count, ROUTE_AUTH | ROUTE_ANTHROPIC},
    {"GET", "/api/version", gw_route_ollama_version, ROUTE_OPEN | ROUTE_OLLAMA},
    {"GET", "/api/tags", gw_route_ollama_tags, ROUTE_AUTH | ROUTE_OLLAMA},
    {"POST", "/api/show", gw_route_ollama_show, ROUTE_AUTH | ROUTE_OLLAMA},
    {"GET", "/api/ps", gw_route_ollama_ps, ROUTE_AUTH | ROUTE_OLLAMA},
    {"POST", "/api/chat", gw_route_ollama_chat, ROUTE_AUTH | ROUTE_OLLAMA},
    {"POST", "/api/generate", gw_route_ollama_generate, ROUTE_AUTH | ROUTE_OLLAMA},
    {"POST", "/api/embed", gw_route_ollama_embed, ROUTE_AUTH | ROUTE_OLLAMA},
    {"POST", "/api/embeddings", gw_route_ollama_embed, ROUTE_AUTH | ROUTE_OLLAMA},
    {"POST", "/api/pull", gw_route_ollama_pull, ROUTE_AUTH | ROUTE_OLLAMA},
    {"GET", "/v1/catalog", gw_route_catalog, ROUTE_AUTH},
    {"DELETE", "/api/delete", gw_route_ollama_delete, ROUTE_AUTH | ROUTE_OLLAMA},
    /* llama-server's own routes (api/llama_server.c) */
    {"POST", "/v1/rerank", gw_route_rerank, ROUTE_AUTH},
    {"POST", "/rerank", gw_route_rerank, ROUTE_AUTH},
    {"POST", "/v1/reranking", gw_route_rerank, ROUTE_AUTH},
    {"POST", "/tokenize", gw_route_tokenize, ROUTE_AUTH},
    {"POST", "/detokenize", gw_route_detokenize, ROUTE_AUTH},
    {"POST", "/apply-template", gw_route_apply_template, ROUTE_AUTH},
    {"POST", "/infill", gw_route_infill, ROUTE_AUTH},
    {"POST", "/v1/chat/completions/input_tokens", gw_route_chat_input_tokens, ROUTE_AUTH},
    {"POST", "/v1/responses/input_tokens", gw_route_responses_input_tokens, ROUTE_AUTH},
    {"GET", "/props", gw_route_props, ROUTE_AUTH},
    {"GET", "/slots", gw_route_slots, ROUTE_AUTH},
    {"POST", "/slots/*", gw_route_slot_action, ROUTE_AUTH},
};

static bool path_matches(const char *route_path, const char *path) {
    size_t n = strlen(route_path);
    if (n && route_path[n - 1] == ROUTE_WILDCARD) return strncmp(route_path, path, n - 1) == 0 && path[n - 1];
    return strcmp(route_path, path) == 0;
}

static gw_dialect route_dialect(int flags) {
    return flags & ROUTE_ANTHROPIC ? GW_DIALECT_ANTHROPIC
           : flags & ROUTE_OLLAMA  ? GW_DIALECT_OLLAMA
                                   : GW_DIALECT_OPENAI;
}

#define MODELS_PREFIX "/v1/models/"

static bool method_matches(const char *route_method, const char *method) {
    return strcmp(route_method, method) == 0 ||
           (strcmp(route_method, "GET") == 0 && strcmp(method, "HEAD") == 0);
}

/* Adds method (and HEAD with GET) to the list of a path's methods, "GET, HEAD, DELETE". */
static void add_method(char allowed[GW_ALLOW_SIZE], const char *method) {
    size_t n = strlen(allowed);
    snprintf(allowed + n, GW_ALLOW_SIZE - n, "%s%s%s", n ? ", " : "", method,
             strcmp(method, "GET") == 0 ? ", HEAD" : "");
}

static void run(gw_call *call, int flags, void (*fn)(gw_call *)) {
    gw_body_kind body = flags & ROUTE_OLLAMA ? GW_BODY_OLLAMA
                        : flags & ROUTE_FORM ? GW_BODY_FORM
                                             : GW_BODY_JSON;
    if ((flags & ROUTE_AUTH) == 0 || gw_guard_route(call, body)) fn(call);
}

static void route_model(gw_call *call) { gw_route_model(call, call->path + strlen(MODELS_PREFIX)); }

/* POST /v1/models/{name}/load, /unload and /erase_slots */
static void route_model_residency(gw_call *call) {
    const char *rest = call->path + strlen(MODELS_PREFIX);
    const char *slash = strrchr(rest, '/');
    gw_route_model_residency(call, rest, (size_t)(slash - rest), slash + 1);
}

/* GET /v1/models/{name}/file, unless a target is named all of "{name}/file" */
static void route_model_file(gw_call *call) {
    const char *rest = call->path + strlen(MODELS_PREFIX);
    if (gw_target_find(call->srv, rest)) {
        gw_route_model(call, rest);
        return;
    }
    gw_route_model_file(call, rest, (size_t)(strrchr(rest, '/') - rest));
}

static bool is_residency_path(const char *path) {
    const char *slash = strrchr(path + strlen(MODELS_PREFIX), '/');
    return slash && (strcmp(slash, "/load") == 0 || strcmp(slash, "/unload") == 0 ||
                     strcmp(slash, "/erase_slots") == 0);
}

static void route_call(gw_call *call) {
    gw_server *srv = call->srv;
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) /* every error in the route's shape */
        if (path_matches(routes[i].path, call->path)) call->dialect = route_dialect(routes[i].flags);
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
    char allowed[GW_ALLOW_SIZE] = ""; /* the path's methods, when the path is known */
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        if (!path_matches(routes[i].path, call->path)) continue;
        add_method(allowed, routes[i].method);
        if (!method_matches(routes[i].method, call->method)) continue;
        run(call, routes[i].flags, routes[i].fn);
        return;
    }
    if (!*allowed && strncmp(call->path, MODELS_PREFIX, strlen(MODELS_PREFIX)) == 0 &&
        is_residency_path(call->path)) {
        if (strcmp(call->method, "POST") == 0) {
            run(call, ROUTE_AUTH, route_model_residency);
            return;
        }
        add_method(allowed, "POST");
    } else if (!*allowed && strncmp(call->path, MODELS_PREFIX, strlen(MODELS_PREFIX)) == 0) {
        if (method_matches("GET", call->method)) {
            run(call, ROUTE_AUTH,
                gw_model_file_path(call->path + strlen(MODELS_PREFIX)) ? route_model_file : route_model);
            return;
        }
        add_method(allowed, "GET");
    }
    if (*allowed) {
        gw_reply_error(call, GW_E_METHOD, "%s is not allowed on %s; use %s", call->method, call->path,
                       allowed);
        gw_reply_header(call, "Allow", allowed);
        return;
    }
    gw_reply_error(call, GW_E_UNKNOWN_ROUTE, "no route %s %s; see docs/gateway.md for the routes",
                   call->method, call->path);
}

/* SIPP_LOG=debug (as for the runtime's log, cli_runtime_init) adds what each request had ignored. */
static bool debug_log(void) {
    const char *lvl = getenv("SIPP_LOG");
    return lvl && strcmp(lvl, "debug") == 0;
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
    if (call->ignored[0] && debug_log())
        fprintf(stderr, "sipp: debug: id=%s ignored: %s\n", call->request_id, call->ignored);
}

const gw_handler gw_router = {.route = route_call, .finish = finish};
