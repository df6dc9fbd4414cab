/*
 * format.c: what every route's renderer is given, the same for a local and a remote generation.
 *
 * The OpenAI and native formats render the chat parser's deltas as they are (OpenAI's own shape,
 * or sipp's events mirroring it). The formats of the other APIs (Responses, Messages, Ollama) take
 * typed events instead (text, reasoning, a tool call's start and its arguments), so that no route
 * reads another API's JSON: a parsed delta is turned into those events here, once, and the relay
 * of a remote target's stream (relay.c) gives the same events from the upstream's chunks. The
 * finished answer is typed the same way (gw_view_answer, gw_view_call).
 */
#include "gateway/format.h"

/* A delta's text: a chat's content, or a raw prompt's text. */
static json_t *delta_text(json_t *d) {
    json_t *t = json_object_get(d, "content");
    return t ? t : json_object_get(d, "text");
}

void gw_render_tool_delta(const gw_format *fmt, const gw_gen_view *v, json_t *tc, sipp_buf *out) {
    json_t *fn = json_object_get(tc, "function"), *id = json_object_get(tc, "id");
    if (json_is_string(id))
        fmt->tool_start(v, json_string_value(id), json_string_value(json_object_get(fn, "name")), out);
    json_t *args = json_object_get(fn, "arguments");
    if (json_string_length(args)) fmt->tool_args(v, json_string_value(args), json_string_length(args), out);
}

void gw_render_delta(const gw_format *fmt, const gw_gen_view *v, size_t index, json_t *d, json_t *logprobs,
                     sipp_buf *out) {
    if (fmt->delta) {
        fmt->delta(v, index, d, logprobs, out);
        return;
    }
    json_t *t = json_object_get(d, "reasoning_content");
    if (json_string_length(t)) fmt->reasoning(v, json_string_value(t), json_string_length(t), out);
    t = delta_text(d);
    if (json_string_length(t)) fmt->text(v, json_string_value(t), json_string_length(t), out);
    size_t k;
    json_t *tc;
    json_array_foreach(json_object_get(d, "tool_calls"), k, tc) gw_render_tool_delta(fmt, v, tc, out);
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
    json_t *m = v->choices[0].message;
    const char *text = m ? json_string_value(json_object_get(m, "content")) : v->text;
    a->text = text ? text : "";
    a->reasoning = json_string_value(json_object_get(m, "reasoning_content"));
    a->n_calls = json_array_size(json_object_get(m, "tool_calls"));
}

void gw_view_call(const gw_gen_view *v, size_t k, gw_tool_call *c) {
    json_t *call = json_array_get(json_object_get(v->choices[0].message, "tool_calls"), k);
    json_t *fn = json_object_get(call, "function");
    c->id = json_string_value(json_object_get(call, "id"));
    c->name = json_string_value(json_object_get(fn, "name"));
    c->arguments = json_string_value(json_object_get(fn, "arguments"));
}

json_t *gw_arguments_object(const char *args) {
    json_t *j = args ? json_loads(args, 0, NULL) : NULL;
    if (json_is_object(j)) return j;
    json_decref(j);
    return json_object();
}
