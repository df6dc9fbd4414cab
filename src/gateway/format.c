/*
 * format.c: what every route's renderer is given, the same for a local and a remote generation.
 *
 * The chat parser's deltas reach the renderers typed (sipp_chat_delta), never as JSON: the OpenAI
 * and native formats render each delta whole (OpenAI's own shape, or sipp's events mirroring it);
 * the formats of the other APIs (Responses, Messages, Ollama) take typed events instead (text,
 * reasoning, a tool call's start and its arguments), which a delta is turned into here, once, and
 * the relay of a remote target's stream (relay.c) gives the same deltas from the upstream's chunks.
 * The finished answer is typed the same way (gw_message, built once at the end; gw_view_answer,
 * gw_view_call), and made JSON only by the renderers that print an OpenAI message
 * (gw_message_json).
 */
#include "gateway/format.h"

#include <stdlib.h>
#include <string.h>

void gw_render_delta(const gw_format *fmt, const gw_gen_view *v, size_t index, const sipp_chat_delta *d,
                     json_t *logprobs, sipp_buf *out) {
    if (fmt->delta) {
        fmt->delta(v, index, d, logprobs, out);
        return;
    }
    if (d->reasoning && *d->reasoning) fmt->reasoning(v, d->reasoning, strlen(d->reasoning), out);
    if (d->content && *d->content) fmt->text(v, d->content, strlen(d->content), out);
    if (d->tool_index < 0) return;
    if (d->tool_id) fmt->tool_start(v, d->tool_id, d->tool_name, out);
    if (d->tool_arguments && *d->tool_arguments)
        fmt->tool_args(v, d->tool_arguments, strlen(d->tool_arguments), out);
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

void gw_view_answer(const gw_gen_view *v, gw_answer *a) {
    const gw_message *m = &v->choices[0].message;
    const char *text = m->set ? m->content : v->text;
    a->text = text ? text : "";
    a->reasoning = m->reasoning;
    a->n_calls = m->n_calls;
}

void gw_view_call(const gw_gen_view *v, size_t k, gw_tool_call *c) { *c = v->choices[0].message.calls[k]; }

/* ---- the finished answer ----------------------------------------------------------------------- */

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

bool gw_message_add_call(gw_message *m, const char *id, const char *name, const char *arguments) {
    gw_tool_call *grown = realloc(m->calls, (m->n_calls + 1) * sizeof *grown);
    if (!grown) return false;
    m->calls = grown;
    m->calls[m->n_calls++] = (gw_tool_call){dup_or_null(id), dup_or_null(name), dup_or_null(arguments)};
    return true;
}

void gw_message_clear(gw_message *m) {
    for (size_t i = 0; i < m->n_calls; i++) {
        free((char *)m->calls[i].id);
        free((char *)m->calls[i].name);
        free((char *)m->calls[i].arguments);
    }
    free(m->calls);
    free(m->content);
    free(m->reasoning);
    memset(m, 0, sizeof *m);
}

bool gw_message_from_parser(gw_message *m, const sipp_chat_parser *p) {
    gw_message_clear(m);
    m->set = true;
    m->content = strdup(sipp_chat_parser_content(p));
    m->reasoning = dup_or_null(sipp_chat_parser_reasoning(p));
    bool ok = m->content != NULL;
    const char *id, *name, *args;
    for (size_t i = 0; ok && sipp_chat_parser_tool_call(p, i, &id, &name, &args); i++)
        ok = gw_message_add_call(m, id, name, args);
    return ok;
}

bool gw_message_plain(gw_message *m, const char *text) {
    gw_message_clear(m);
    m->set = true;
    return (m->content = strdup(text)) != NULL;
}

bool gw_message_from_openai(gw_message *m, json_t *msg) {
    gw_message_clear(m);
    m->set = true;
    m->content = dup_or_null(json_string_value(json_object_get(msg, "content")));
    m->reasoning = dup_or_null(json_string_value(json_object_get(msg, "reasoning_content")));
    bool ok = true;
    size_t k;
    json_t *call;
    json_array_foreach(json_object_get(msg, "tool_calls"), k, call) {
        json_t *fn = json_object_get(call, "function");
        if (!ok) break;
        ok = gw_message_add_call(m, json_string_value(json_object_get(call, "id")),
                                 json_string_value(json_object_get(fn, "name")),
                                 json_string_value(json_object_get(fn, "arguments")));
    }
    return ok;
}

json_t *gw_message_json(const gw_message *m) {
    json_t *o = json_pack("{s:s, s:s?}", "role", "assistant", "content", m->content);
    if (m->reasoning && *m->reasoning) json_object_set_new(o, "reasoning_content", json_string(m->reasoning));
    if (m->n_calls) {
        json_t *calls = json_array();
        for (size_t i = 0; i < m->n_calls; i++)
            json_array_append_new(calls, json_pack("{s:s?, s:s, s:{s:s?, s:s?}}", "id", m->calls[i].id,
                                                   "type", "function", "function", "name", m->calls[i].name,
                                                   "arguments", m->calls[i].arguments));
        json_object_set_new(o, "tool_calls", calls);
    }
    return o;
}

json_t *gw_arguments_object(const char *args) {
    json_t *j = args ? json_loads(args, 0, NULL) : NULL;
    if (json_is_object(j)) return j;
    json_decref(j);
    return json_object();
}
