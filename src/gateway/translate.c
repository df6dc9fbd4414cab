/*
 * translate.c: what the Responses, Messages and Ollama routes share.
 *
 * Each of those APIs is a translation layer over the chat-completions route, not a second request
 * parser: a route rebuilds its request as a chat-completions body (a JSON tree), and that body goes
 * through gw_decode(GW_API_CHAT) like any request to /v1/chat/completions. So every field the chat
 * layer supports is supported in every API, and every refusal comes from one place. A refusal
 * names the field in chat-completions terms ('max_tokens'); the route gives a table of renames so
 * that the client reads its own API's name ('max_output_tokens', 'options.num_predict').
 *
 * What a route renders is its own (a gw_format plus state in gw_gen.route); the generation itself
 * (admission, the engine, streaming, cancelling on disconnect) is generate.c's, the same as for
 * chat completions.
 *
 * Remote targets (an OpenAI-compatible upstream): the same chat-completions body, with tools and
 * everything else the route translated, goes to the upstream's /chat/completions (through
 * upstream.c's replicas), and its answer (choices[0].message with content, reasoning_content and
 * tool_calls, finish_reason, usage) is rendered by the route's own format, so a remote target is
 * reachable through every API. The upstream is asked for the whole answer; a client that asked for
 * a stream gets the full event sequence when it is in (replayed as the deltas a local stream would
 * have had), not token by token. An upstream's error keeps its status with its message, in the
 * route's shape.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway/translate.h"

#define ID_SIZE 96
#define UPSTREAM_CHAT_SUFFIX "/chat/completions"
#define HTTP_OK 200
#define HTTP_BAD_REQUEST 400
#define HTTP_NOT_FOUND 404
#define HTTP_TOO_MANY 429
#define HTTP_GATEWAY_TIMEOUT 504

bool gw_decode_tree(gw_call *call, gw_api api, json_t *chat, const gw_rename *renames, gw_gen *g) {
    gw_error_kind kind;
    char err[SIPP_ERROR_SIZE];
    bool ok = gw_decode(api, chat, g, &kind, err, sizeof err); /* g takes a reference of its own */
    json_decref(chat);
    if (!ok) {
        gw_rename_fields(err, sizeof err, renames);
        gw_reply_error(call, kind, "%s", err);
    }
    return ok;
}

gw_target *gw_translated_target(gw_call *call, const char *name, const char *api_name) {
    gw_target *t = gw_call_target(call, name);
    if (t && t->cfg->type == GW_TARGET_REMOTE) {
        gw_reply_error(call, GW_E_NOT_IMPLEMENTED,
                       "model '%s' is a remote (openai_compatible) target, which %s does not reach yet; "
                       "use /v1/chat/completions for it",
                       t->cfg->name, api_name);
        return NULL;
    }
    return t;
}

void gw_view_stats(const gw_gen_view *v, sipp_request_stats *stats) {
    if (v->req)
        sipp_request_get_stats(v->req, stats);
    else
        *stats = v->remote_stats;
}

const char *gw_view_stop_string(const gw_gen_view *v) {
    return v->req ? sipp_request_stop_string(v->req) : NULL;
}

/* ---- remote targets ----------------------------------------------------------------------------- */

/* The error kind of an upstream's error status. */
static gw_error_kind upstream_kind(long status) {
    switch (status) {
    case HTTP_BAD_REQUEST: return GW_E_INVALID_FIELD;
    case HTTP_NOT_FOUND: return GW_E_UNKNOWN_TARGET;
    case HTTP_TOO_MANY: return GW_E_RATE_LIMITED;
    case HTTP_GATEWAY_TIMEOUT: return GW_E_TIMEOUT;
    default: return GW_E_UPSTREAM;
    }
}

static void add_delta(const gw_format *fmt, const gw_gen_view *v, json_t *d, sipp_buf *out) {
    fmt->delta(v, 0, d, NULL, out);
    json_decref(d);
}

/* The answer as the deltas a local stream would have given: reasoning, content, then each tool
 * call's start and its arguments. */
static void replay(const gw_format *fmt, const gw_gen_view *v, json_t *m, sipp_buf *out) {
    json_t *r = json_object_get(m, "reasoning_content"), *c = json_object_get(m, "content");
    if (json_string_length(r)) add_delta(fmt, v, json_pack("{s:O}", "reasoning_content", r), out);
    if (json_string_length(c)) add_delta(fmt, v, json_pack("{s:O}", "content", c), out);
    size_t k;
    json_t *call;
    json_array_foreach(json_object_get(m, "tool_calls"), k, call) {
        json_t *fn = json_object_get(call, "function");
        const char *id = json_string_value(json_object_get(call, "id")),
                   *name = json_string_value(json_object_get(fn, "name"));
        add_delta(fmt, v,
                  json_pack("{s:[{s:I, s:s, s:s, s:{s:s}}]}", "tool_calls", "index", (json_int_t)k, "id",
                            id ? id : "", "type", "function", "function", "name", name ? name : ""),
                  out);
        const char *args = json_string_value(json_object_get(fn, "arguments"));
        if (args && *args)
            add_delta(fmt, v,
                      json_pack("{s:[{s:I, s:{s:s}}]}", "tool_calls", "index", (json_int_t)k, "function",
                                "arguments", args),
                      out);
    }
}

/* Sends the chat-completions body to a remote target (not streamed) and renders its answer in the
 * route's API: as one body, or, when the client asked for a stream, as the whole event sequence
 * at once (the upstream's answer is complete before it is translated). */
static void run_remote(gw_call *call, gw_target *t, gw_gen *g, json_t *body, gw_api api,
                       const gw_format *fmt) {
    if (api != GW_API_CHAT) {
        gw_reply_error(
            call, GW_E_NOT_IMPLEMENTED,
            "model '%s' is a remote target: raw prompts are not forwarded; use /v1/completions for it",
            t->cfg->name);
        return;
    }
    json_object_del(body, "context_key"); /* sipp's own: the upstream's slots are its business */
    json_object_del(body, "stream_options");
    json_object_set_new(body, "stream", json_false());
    long status = 0;
    json_t *ans = NULL;
    if (!gw_upstream_fetch(call, t, UPSTREAM_CHAT_SUFFIX, body, &status, &ans)) return;
    json_t *choice = json_array_get(json_object_get(ans, "choices"), 0);
    json_t *m = json_object_get(choice, "message");
    if (status != HTTP_OK || !json_is_object(m)) {
        json_t *e = json_object_get(ans, "error");
        const char *msg = json_string_value(json_object_get(e, "message"));
        char text[SIPP_ERROR_SIZE];
        sipp_strlcpy(text,
                     msg                    ? msg
                     : json_string_value(e) ? json_string_value(e)
                                            : "(no message)",
                     sizeof text);
        gw_rename_fields(text, sizeof text, fmt->renames); /* the upstream names chat-completions fields */
        gw_reply_error(call, status == HTTP_OK ? GW_E_UPSTREAM : upstream_kind(status),
                       "model '%s': the upstream answered %ld: %s", t->cfg->name, status, text);
        json_decref(ans);
        return;
    }
    json_t *usage = json_object_get(ans, "usage");
    const char *finish = json_string_value(json_object_get(choice, "finish_reason"));
    const char *content = json_string_value(json_object_get(m, "content"));
    char id[ID_SIZE];
    snprintf(id, sizeof id, "%s%s", fmt->id_prefix, call->request_id);
    gw_choice c = {.message = m,
                   .text = content ? content : "",
                   .finish = finish && (strcmp(finish, "length") == 0 || strcmp(finish, "tool_calls") == 0)
                                 ? finish
                                 : "stop"};
    gw_gen_view v = {.call = call,
                     .target = t,
                     .gen = g,
                     .text = c.text,
                     .id = id,
                     .created = (long long)time(NULL),
                     .choices = &c,
                     .n_choices = 1,
                     .remote = true};
    v.remote_stats.prompt_tokens = (int)json_integer_value(json_object_get(usage, "prompt_tokens"));
    v.remote_stats.generated_tokens = (int)json_integer_value(json_object_get(usage, "completion_tokens"));
    v.remote_stats.cached_tokens = (int)json_integer_value(
        json_object_get(json_object_get(usage, "prompt_tokens_details"), "cached_tokens"));
    if (!g->stream) {
        gw_reply_json(call, HTTP_OK, fmt->whole(&v));
    } else {
        sipp_buf out = {0};
        fmt->begin(&v, &out);
        replay(fmt, &v, m, &out);
        fmt->end(&v, &out);
        gw_reply_text(call, HTTP_OK, fmt->content_type ? fmt->content_type : "text/event-stream", out.data,
                      out.len);
    }
    json_decref(ans);
}

void gw_run_translated(gw_call *call, gw_api api, json_t *chat, const gw_rename *renames,
                       const char *api_name, const gw_format *fmt, void *route, void (*route_free)(void *)) {
    json_t *body = json_deep_copy(chat); /* what a remote target is sent */
    gw_gen g;
    if (!gw_decode_tree(call, api, chat, renames, &g)) {
        json_decref(body);
        if (route_free) route_free(route);
        return;
    }
    g.route = route;
    g.route_free = route_free;
    gw_target *t = gw_call_target(call, g.model);
    if (t && t->cfg->type == GW_TARGET_REMOTE) run_remote(call, t, &g, body, api, fmt);
    json_decref(body);
    if (!t || t->cfg->type == GW_TARGET_REMOTE) {
        gw_gen_free(&g);
        return;
    }
    gw_generate(call, t, &g, fmt);
}

json_t *gw_body_object(gw_call *call) {
    char err[SIPP_ERROR_SIZE];
    json_t *root = gw_parse_body(call->body, call->body_len, err, sizeof err);
    if (!root) {
        gw_reply_error(call, GW_E_INVALID_JSON, "%s", err);
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        gw_reply_error(call, GW_E_INVALID_FIELD, "the body must be a JSON object");
        return NULL;
    }
    return root;
}

bool gw_copy_field(json_t *from, const char *key, json_t *to, const char *as) {
    json_t *v = json_object_get(from, key);
    if (!v) return false;
    json_object_set(to, as ? as : key, v);
    return true;
}

bool gw_check_fields(gw_call *call, json_t *root, const char *const *known, const char *api) {
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        bool found = false;
        for (const char *const *k = known; *k && !found; k++)
            found = strcmp(*k, key) == 0;
        if (!found) {
            gw_reply_error(call, GW_E_INVALID_FIELD,
                           "'%s' is not supported by %s on this server; leave it out", key, api);
            return false;
        }
    }
    return true;
}

void gw_iso_time(double unix_s, char *out, size_t cap) {
    time_t secs = (time_t)unix_s;
    struct tm tm;
    gmtime_r(&secs, &tm);
    char base[GW_TIME_SIZE];
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    long nanos = (long)((unix_s - (double)secs) * 1e9);
    if (nanos < 0) nanos = 0;
    snprintf(out, cap, "%s.%09ldZ", base, nanos);
}

double gw_unix_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}
