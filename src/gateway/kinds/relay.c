/*
 * relay.c: a remote target's answer, rendered by a route's own gw_format.
 *
 * A remote target (an OpenAI-compatible upstream) reached through an API that is not its own (the
 * Responses, Messages and Ollama routes) is sent the chat-completions body the route translated,
 * with tools and everything else, at the upstream's /chat/completions (through upstream.c's
 * replicas), and its answer (choices[0].message with content, reasoning_content and tool_calls,
 * finish_reason, usage) is rendered by the route's format, so a remote target is reachable through
 * every API. A client that asked for a stream gets one piece by piece: the upstream is asked to
 * stream too, and each of its chat chunks is rendered as it arrives (its delta given to the
 * route's format as the typed events a local stream gives it: text, reasoning, a tool call's start
 * and arguments; the whole message assembled alongside for the format's closing events). An
 * upstream that answers a stream request with one body has it replayed as the same events. An upstream's
 * error keeps its status with its message, in the route's shape; one mid-stream ends the stream with the
 * route's failure event.
 *
 * The OpenAI and native routes do not come here: their remote targets are forwarded the client's
 * body as it came, and answer in the same API (upstream.c's gw_upstream_forward).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway/field_names.h"
#include "gateway/kinds/kinds.h"

#define ID_SIZE 96
#define FINISH_SIZE 16
#define SSE_DATA "data: "
#define SSE_DONE "[DONE]"
#define UPSTREAM_CHAT_SUFFIX "/chat/completions"
#define HTTP_OK 200
#define HTTP_BAD_REQUEST 400
#define HTTP_NOT_FOUND 404
#define HTTP_TOO_MANY 429
#define HTTP_GATEWAY_TIMEOUT 504

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

/* The answer as the events a local stream would have given: reasoning, content, then each tool
 * call's start and its arguments. */
static void replay(const gw_format *fmt, const gw_gen_view *v, const gw_message *m, sipp_buf *out) {
    if (m->reasoning && *m->reasoning) fmt->reasoning(v, m->reasoning, strlen(m->reasoning), out);
    if (m->content && *m->content) fmt->text(v, m->content, strlen(m->content), out);
    for (size_t k = 0; k < m->n_calls; k++) {
        const gw_tool_call *c = &m->calls[k];
        fmt->tool_start(v, c->id ? c->id : "", c->name ? c->name : "", out);
        if (c->arguments && *c->arguments) fmt->tool_args(v, c->arguments, strlen(c->arguments), out);
    }
}

/* The error message of an upstream's error body ({"error": {"message"}} or {"error": "..."}),
 * in the route's field names, into text. */
static void upstream_message(json_t *ans, const gw_format *fmt, char *text, size_t cap) {
    json_t *e = json_object_get(ans, "error");
    const char *msg = json_string_value(json_object_get(e, "message"));
    sipp_strlcpy(text, msg ? msg : json_string_value(e) ? json_string_value(e) : "(no message)", cap);
    gw_rename_fields(text, cap, fmt->renames); /* the upstream names chat-completions fields */
}

static const char *finish_of(const char *finish) {
    return finish && (strcmp(finish, "length") == 0 || strcmp(finish, "tool_calls") == 0) ? finish : "stop";
}

/* The upstream's token counts; of the times only the total is known here (the call's so far). */
static void usage_into(const gw_call *call, json_t *usage, sipp_request_stats *st) {
    st->total_ms = sipp_now_ms() - call->t_start;
    st->prompt_tokens = (int)json_integer_value(json_object_get(usage, "prompt_tokens"));
    st->generated_tokens = (int)json_integer_value(json_object_get(usage, "completion_tokens"));
    st->cached_tokens = (int)json_integer_value(
        json_object_get(json_object_get(usage, "prompt_tokens_details"), "cached_tokens"));
}

/* ---- a remote stream, relayed chunk by chunk ---------------------------------------------------- */

typedef struct relay {
    gw_stream base;
    gw_stream *up; /* the upstream's SSE bytes (upstream.c) */
    const gw_format *fmt;
    gw_gen gen; /* taken over from the route */
    gw_gen_view v;
    gw_choice c;
    char id[ID_SIZE];
    char finish[FINISH_SIZE];
    sipp_buf line;              /* the upstream's incomplete last line */
    sipp_buf content, thinking; /* the answer so far */
    json_t *calls;              /* its tool calls so far, by index */
    bool begun, done, ended;    /* done: the upstream sent [DONE]; ended: the closing events are out */
} relay;

/* Adds a tool-call delta entry to the calls assembled so far. */
static void merge_call(json_t *calls, json_t *d) {
    size_t k = (size_t)json_integer_value(json_object_get(d, "index"));
    while (json_array_size(calls) <= k)
        json_array_append_new(calls, json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", "", "type", "function",
                                               "function", "name", "", "arguments", ""));
    json_t *call = json_array_get(calls, k), *fn = json_object_get(call, "function");
    json_t *dfn = json_object_get(d, "function");
    if (json_string_length(json_object_get(d, "id"))) json_object_set(call, "id", json_object_get(d, "id"));
    if (json_string_length(json_object_get(dfn, "name")))
        json_object_set(fn, "name", json_object_get(dfn, "name"));
    const char *args = json_string_value(json_object_get(dfn, "arguments"));
    if (args && *args) {
        sipp_buf b = {0};
        sipp_buf_appendf(&b, "%s%s", json_string_value(json_object_get(fn, "arguments")), args);
        json_object_set_new(fn, "arguments", json_string(b.data ? b.data : ""));
        sipp_buf_free(&b);
    }
}

/* One chat chunk of the upstream (another server's JSON): its delta rendered as the typed deltas a
 * local stream gives, and kept for the closing events. */
static void relay_chunk(relay *r, json_t *chunk, sipp_buf *out) {
    json_t *usage = json_object_get(chunk, "usage");
    if (json_is_object(usage)) usage_into(r->v.call, usage, &r->v.remote_stats);
    json_t *choice = json_array_get(json_object_get(chunk, "choices"), 0);
    const char *finish = json_string_value(json_object_get(choice, "finish_reason"));
    if (finish) sipp_strlcpy(r->finish, finish, sizeof r->finish);
    json_t *d = json_object_get(choice, "delta");
    json_t *th = json_object_get(d, "reasoning_content"), *tx = json_object_get(d, "content");
    sipp_chat_delta text = {.tool_index = -1};
    if (json_string_length(th)) {
        sipp_buf_append(&r->thinking, json_string_value(th), json_string_length(th));
        text.reasoning = json_string_value(th);
    }
    if (json_string_length(tx)) {
        sipp_buf_append(&r->content, json_string_value(tx), json_string_length(tx));
        text.content = json_string_value(tx);
    }
    if (text.reasoning || text.content) gw_render_delta(r->fmt, &r->v, 0, &text, NULL, out);
    size_t k;
    json_t *e;
    json_array_foreach(json_object_get(d, "tool_calls"), k, e) {
        merge_call(r->calls, e);
        json_t *fn = json_object_get(e, "function");
        sipp_chat_delta call = {.tool_index = (long)json_integer_value(json_object_get(e, "index")),
                                .tool_id = json_string_value(json_object_get(e, "id")),
                                .tool_name = json_string_value(json_object_get(fn, "name")),
                                .tool_arguments = json_string_value(json_object_get(fn, "arguments"))};
        gw_render_delta(r->fmt, &r->v, 0, &call, NULL, out);
    }
}

/* One complete line of the upstream's stream. */
static void relay_line(relay *r, const char *line, size_t n, sipp_buf *out) {
    size_t p = sizeof SSE_DATA - 1;
    if (n < p || memcmp(line, SSE_DATA, p) != 0) return; /* event names, comments, blank lines */
    if (n - p == sizeof SSE_DONE - 1 && memcmp(line + p, SSE_DONE, n - p) == 0) {
        r->done = true;
        return;
    }
    json_t *j = json_loadb(line + p, n - p, 0, NULL);
    if (json_object_get(j, "error")) {
        char text[SIPP_ERROR_SIZE];
        upstream_message(j, r->fmt, text, sizeof text);
        r->v.call->error_code = gw_error_code(GW_E_UPSTREAM);
        r->fmt->fail(&r->v, GW_E_UPSTREAM, text, out);
        r->ended = true;
    } else if (json_is_object(j)) {
        relay_chunk(r, j, out);
    }
    json_decref(j);
}

/* The closing events, from the answer assembled. */
static void relay_end(relay *r, sipp_buf *out) {
    gw_message *m = &r->c.message;
    gw_message_clear(m);
    m->set = true;
    if (r->content.len || !json_array_size(r->calls))
        m->content = strdup(r->content.data ? r->content.data : "");
    if (r->thinking.len) m->reasoning = strdup(r->thinking.data);
    size_t k;
    json_t *call;
    json_array_foreach(r->calls, k, call) {
        json_t *fn = json_object_get(call, "function");
        gw_message_add_call(m, json_string_value(json_object_get(call, "id")),
                            json_string_value(json_object_get(fn, "name")),
                            json_string_value(json_object_get(fn, "arguments")));
    }
    r->c.text = m->content ? m->content : "";
    r->c.finish = finish_of(r->finish);
    r->v.text = r->c.text;
    r->v.remote_stats.total_ms = sipp_now_ms() - r->v.call->t_start;
    r->fmt->end(&r->v, out);
}

static bool relay_pull(gw_stream *s, sipp_buf *out, int wait_ms) {
    relay *r = (relay *)s;
    if (r->ended) return false;
    if (!r->begun) {
        r->begun = true;
        r->fmt->begin(&r->v, out);
        return true;
    }
    sipp_buf raw = {0};
    bool more = r->up->pull(r->up, &raw, wait_ms);
    sipp_buf_append(&r->line, raw.data ? raw.data : "", raw.len);
    sipp_buf_free(&raw);
    char *nl;
    while (!r->ended && r->line.data && (nl = memchr(r->line.data, '\n', r->line.len))) {
        size_t n = (size_t)(nl - r->line.data);
        relay_line(r, r->line.data, n && r->line.data[n - 1] == '\r' ? n - 1 : n, out);
        sipp_buf_consume(&r->line, n + 1);
    }
    if (r->ended) return false;
    if (more && !r->done) return true;
    relay_end(r, out);
    r->ended = true;
    return false;
}

static void relay_stop(gw_stream *s) {
    relay *r = (relay *)s;
    if (r->up->stop) r->up->stop(r->up);
}

static void relay_close(gw_stream *s) {
    relay *r = (relay *)s;
    r->up->close(r->up);
    sipp_buf_free(&r->line);
    sipp_buf_free(&r->content);
    sipp_buf_free(&r->thinking);
    json_decref(r->calls);
    gw_message_clear(&r->c.message);
    gw_gen_free(&r->gen);
    free(r);
}

/* Replies with a relay of the upstream's stream; takes over g. */
static void start_relay(gw_call *call, gw_target *t, gw_gen *g, const gw_format *fmt, gw_stream *up) {
    relay *r = calloc(1, sizeof *r);
    if (!r || !(r->calls = json_array())) {
        free(r);
        up->close(up);
        gw_reply_error(call, GW_E_INTERNAL, "out of memory");
        return;
    }
    r->up = up;
    r->fmt = fmt;
    r->gen = *g;
    memset(g, 0, sizeof *g);
    snprintf(r->id, sizeof r->id, "%s%s", fmt->id_prefix, call->request_id);
    r->c.text = "";
    r->c.finish = "stop";
    r->v = (gw_gen_view){.call = call,
                         .target = t,
                         .gen = &r->gen,
                         .text = "",
                         .id = r->id,
                         .created = (long long)time(NULL),
                         .choices = &r->c,
                         .n_choices = 1,
                         .remote = true};
    r->base.pull = relay_pull;
    r->base.stop = relay_stop;
    r->base.close = relay_close;
    gw_reply_stream(call, fmt->content_type ? fmt->content_type : "text/event-stream", &r->base);
}

/* ---- a remote answer ---------------------------------------------------------------------------- */

/* A translated request's custom tools (Responses' freeform tools, which the translation made chat's
 * {"type": "custom"} tools) go upstream as functions of one string, "input", the grammar in the
 * description: an upstream need not know chat's custom tools, and sipp cannot enforce a grammar
 * there, so the grammar is named in sipp-ignored. Their calls come back as that function's. */
static void custom_tools_as_functions(gw_call *call, json_t *body) {
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(body, "tools"), i, t) {
        json_t *c = json_object_get(t, "custom");
        const char *type = json_string_value(json_object_get(t, "type"));
        if (!type || strcmp(type, "custom") != 0 || !json_is_object(c)) continue;
        json_t *g = json_object_get(json_object_get(c, "format"), "grammar");
        const char *d = json_string_value(json_object_get(c, "description"));
        const char *def = json_string_value(json_object_get(g, "definition"));
        sipp_buf desc = {0};
        sipp_buf_appendf(&desc, "%s%sA freeform tool: put its whole input, as plain text, in \"input\".",
                         d ? d : "", d ? "\n\n" : "");
        if (def) {
            const char *syntax = json_string_value(json_object_get(g, "syntax"));
            sipp_buf_appendf(&desc, " The input follows this %s grammar:\n%s", syntax ? syntax : "", def);
            gw_ignored_addf(call, "tools[%zu].format", i);
        }
        json_t *fn = json_pack("{s:O, s:s, s:{s:s, s:{s:{s:s}}, s:[s]}}", "name", json_object_get(c, "name"),
                               "description", desc.data ? desc.data : "", "parameters", "type", "object",
                               "properties", "input", "type", "string", "required", "input");
        sipp_buf_free(&desc);
        if (fn)
            json_array_set_new(json_object_get(body, "tools"), i,
                               json_pack("{s:s, s:o}", "type", "function", "function", fn));
    }
    json_t *tc = json_object_get(body, "tool_choice");
    if (json_is_object(json_object_get(tc, "custom")))
        json_object_set_new(body, "tool_choice",
                            json_pack("{s:s, s:{s:O}}", "type", "function", "function", "name",
                                      json_object_get(json_object_get(tc, "custom"), "name")));
}

void gw_relay(gw_call *call, gw_target *t, gw_gen *g, json_t *body, gw_api api, const gw_format *fmt) {
    if (api != GW_API_CHAT) {
        gw_reply_error(
            call, GW_E_NOT_IMPLEMENTED,
            "model '%s' is a remote target: raw prompts are not forwarded; use /v1/completions for it",
            t->cfg->name);
        return;
    }
    json_object_del(body, "context_key"); /* sipp's own: the upstream's slots are its business */
    if (fmt->renames) custom_tools_as_functions(call, body); /* a translated API's */
    json_object_del(body, "stream_options");
    json_object_set_new(body, "stream", json_boolean(g->stream));
    long status = 0;
    json_t *ans = NULL;
    if (g->stream) {
        json_object_set_new(body, "stream_options", json_pack("{s:b}", "include_usage", 1));
        gw_stream *up = gw_upstream_open(call, t, UPSTREAM_CHAT_SUFFIX, body, &status, &ans);
        if (up) {
            start_relay(call, t, g, fmt, up);
            return;
        }
        if (!ans) return;
    } else if (!gw_upstream_fetch(call, t, UPSTREAM_CHAT_SUFFIX, body, &status, &ans)) {
        return;
    }
    json_t *choice = json_array_get(json_object_get(ans, "choices"), 0);
    json_t *m = json_object_get(choice, "message");
    if (status != HTTP_OK || !json_is_object(m)) {
        char text[SIPP_ERROR_SIZE];
        upstream_message(ans, fmt, text, sizeof text);
        gw_reply_error(call, status == HTTP_OK ? GW_E_UPSTREAM : upstream_kind(status),
                       "model '%s': the upstream answered %ld: %s", t->cfg->name, status, text);
        json_decref(ans);
        return;
    }
    const char *content = json_string_value(json_object_get(m, "content"));
    char id[ID_SIZE];
    snprintf(id, sizeof id, "%s%s", fmt->id_prefix, call->request_id);
    gw_choice c = {.text = content ? content : "",
                   .finish = finish_of(json_string_value(json_object_get(choice, "finish_reason")))};
    gw_message_from_openai(&c.message, m);
    gw_gen_view v = {.call = call,
                     .target = t,
                     .gen = g,
                     .text = c.text,
                     .id = id,
                     .created = (long long)time(NULL),
                     .choices = &c,
                     .n_choices = 1,
                     .remote = true};
    usage_into(call, json_object_get(ans, "usage"), &v.remote_stats);
    if (!g->stream && fmt->reply) {
        fmt->reply(&v);
    } else if (!g->stream) {
        gw_reply_json(call, HTTP_OK, fmt->whole(&v));
    } else {
        sipp_buf out = {0};
        fmt->begin(&v, &out);
        replay(fmt, &v, &c.message, &out);
        fmt->end(&v, &out);
        gw_reply_text(call, HTTP_OK, fmt->content_type ? fmt->content_type : "text/event-stream", out.data,
                      out.len);
    }
    gw_message_clear(&c.message);
    json_decref(ans);
}
