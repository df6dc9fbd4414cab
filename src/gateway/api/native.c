/*
 * native.c: sipp's own routes: POST /v1/query (a raw prompt), /v1/chat (messages) and
 * /v1/embed.
 *
 * They stream by default, as server-sent events with names, which a browser's EventSource or any
 * SSE reader can dispatch on:
 *
 *   event: token     data: {"text": "..."}
 *   event: reasoning data: {"text": "..."}            (chats: the reasoning, separated)
 *   event: tool_call data: {"index", "id"?, "name"?, "arguments"}  (chats: a tool call, in pieces)
 *   event: usage   data: {"prompt_tokens", "cached_tokens", "generated_tokens", "ttft_ms",
 *                         "prefill_tokens_per_s", "decode_tokens_per_s", "total_ms"; with images
 *                         or audio also "media_tokens", "media_encoded", "encode_ms"}
 *   event: done    data: {"id", "model", "finish_reason", "context_key"}
 *   event: error   data: {"error": {"message", "type", "code"}}
 *
 * With "stream": false the answer is one JSON object with the text, finish_reason, usage and
 * context_key; a chat's also has "message" (content, reasoning_content, tool_calls) and "done" has
 * it too. The native routes take the same tools, response_format, grammar and reasoning fields as
 * chat completions, and the same content parts (image_url with a data: URL, input_audio). A "context_key"
 * pins a conversation to one engine slot, so that its next turn evaluates only the new tokens; it is echoed
 * in "done".
 */
#include <string.h>

#include "gateway/api/api.h"

static json_t *native_usage(const gw_gen_view *v) {
    sipp_request_stats s;
    sipp_request_get_stats(v->req, &s);
    json_t *u =
        json_pack("{s:i, s:i, s:i, s:f, s:f, s:f, s:f, s:f, s:i, s:i, s:i, s:i, s:s}", "prompt_tokens",
                  s.prompt_tokens, "cached_tokens", s.cached_tokens, "generated_tokens", s.generated_tokens,
                  "ttft_ms", s.ttft_ms, "prefill_tokens_per_s", s.prefill_tokens_per_s, "decode_tokens_per_s",
                  s.decode_tokens_per_s, "queue_ms", s.queue_ms, "total_ms", s.total_ms, "draft_tokens",
                  s.draft_tokens, "accepted_tokens", s.accepted_tokens, "draft_steps", s.draft_steps,
                  "cutoff_steps", s.cutoff_steps, "speculation", *s.speculation ? s.speculation : "none");
    if (v->gen->n_images || v->gen->n_audio) { /* images and audio: their positions and encoding */
        json_object_set_new(u, "media_tokens", json_integer(s.media_tokens));
        json_object_set_new(u, "media_encoded", json_integer(s.media_encoded));
        json_object_set_new(u, "encode_ms", json_real(s.encode_ms));
    }
    return u;
}

static json_t *context_key(const gw_gen_view *v) {
    return v->gen->context_key ? json_string(v->gen->context_key) : json_null();
}

static void native_begin(const gw_gen_view *v, sipp_buf *out) {}

static void native_piece(const gw_gen_view *v, const char *text, size_t len, sipp_buf *out) {
    gw_sse_json(out, "token", json_pack("{s:s%}", "text", text, len));
}

/* Chats: content as token events, reasoning and tool calls as their own events. */
static void native_delta(const gw_gen_view *v, size_t index, const sipp_chat_delta *d, json_t *logprobs,
                         sipp_buf *out) {
    if (d->content) gw_sse_json(out, "token", json_pack("{s:s}", "text", d->content));
    if (d->reasoning) gw_sse_json(out, "reasoning", json_pack("{s:s}", "text", d->reasoning));
    if (d->tool_index >= 0) {
        json_t *ev = json_pack("{s:I}", "index", (json_int_t)d->tool_index);
        if (d->tool_id) json_object_set_new(ev, "id", json_string(d->tool_id));
        if (d->tool_name) json_object_set_new(ev, "name", json_string(d->tool_name));
        if (d->tool_name || d->tool_arguments)
            json_object_set_new(ev, "arguments", json_string(d->tool_arguments ? d->tool_arguments : ""));
        gw_sse_json(out, "tool_call", ev);
    }
}

static json_t *done_json(const gw_gen_view *v, json_t *o) {
    if (v->choices[0].message.set) json_object_set_new(o, "message", gw_message_json(&v->choices[0].message));
    return o;
}

static void native_end(const gw_gen_view *v, sipp_buf *out) {
    gw_sse_json(out, "usage", native_usage(v));
    gw_sse_json(
        out, "done",
        done_json(v, json_pack("{s:s, s:s, s:s, s:o}", "id", v->id, "model", v->target->cfg->name,
                               "finish_reason", v->choices[0].finish, "context_key", context_key(v))));
}

static void native_fail(const gw_gen_view *v, gw_error_kind kind, const char *message, sipp_buf *out) {
    gw_sse_json(out, "error", gw_error_json(kind, message));
}

static json_t *native_whole(const gw_gen_view *v) {
    return done_json(v,
                     json_pack("{s:s, s:s, s:s, s:s, s:o, s:o}", "id", v->id, "model", v->target->cfg->name,
                               "text", v->text, "finish_reason", v->choices[0].finish, "usage",
                               native_usage(v), "context_key", context_key(v)));
}

static const gw_format native_format = GW_DELTA_FORMAT(native, "sipp-", native_fail);

void gw_route_native_query(gw_call *call) { gw_dispatch_call(call, GW_API_NATIVE_QUERY, &native_format); }
void gw_route_native_chat(gw_call *call) { gw_dispatch_call(call, GW_API_NATIVE_CHAT, &native_format); }
void gw_route_native_embed(gw_call *call) { gw_dispatch_call(call, GW_API_NATIVE_EMBED, NULL); }
