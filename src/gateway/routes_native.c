/*
 * routes_native.c: sipp's own routes: POST /v1/query (a raw prompt), /v1/chat (messages) and
 * /v1/embed.
 *
 * They stream by default, as server-sent events with names, which a browser's EventSource or any
 * SSE reader can dispatch on:
 *
 *   event: token   data: {"text": "..."}
 *   event: usage   data: {"prompt_tokens", "cached_tokens", "generated_tokens", "ttft_ms",
 *                         "prefill_tokens_per_s", "decode_tokens_per_s", "total_ms"}
 *   event: done    data: {"id", "model", "finish_reason", "context_key"}
 *   event: error   data: {"error": {"message", "type", "code"}}
 *
 * With "stream": false the answer is one JSON object with the text, finish_reason, usage and
 * context_key. A "context_key" pins a conversation to one engine slot, so that its next turn
 * evaluates only the new tokens; it is echoed in "done".
 */
#include <string.h>

#include "gateway/routes.h"

static json_t *native_usage(const gw_gen_view *v) {
    sipp_request_stats s;
    sipp_request_get_stats(v->req, &s);
    return json_pack("{s:i, s:i, s:i, s:f, s:f, s:f, s:f, s:f}", "prompt_tokens", s.prompt_tokens, "cached_tokens",
                     s.cached_tokens, "generated_tokens", s.generated_tokens, "ttft_ms", s.ttft_ms, "prefill_tokens_per_s",
                     s.prefill_tokens_per_s, "decode_tokens_per_s", s.decode_tokens_per_s, "queue_ms", s.queue_ms,
                     "total_ms", s.total_ms);
}

static json_t *context_key(const gw_gen_view *v) {
    return v->gen->context_key ? json_string(v->gen->context_key) : json_null();
}

static void native_begin(const gw_gen_view *v, sipp_buf *out) {}

static void native_piece(const gw_gen_view *v, const char *text, size_t len, sipp_buf *out) {
    gw_sse_json(out, "token", json_pack("{s:s%}", "text", text, len));
}

static void native_end(const gw_gen_view *v, sipp_buf *out) {
    gw_sse_json(out, "usage", native_usage(v));
    gw_sse_json(out, "done", json_pack("{s:s, s:s, s:s, s:o}", "id", v->id, "model", v->target->cfg->name, "finish_reason",
                                       sipp_finish_reason_name(sipp_request_finish_reason(v->req)), "context_key",
                                       context_key(v)));
}

static void native_fail(const gw_gen_view *v, gw_error_kind kind, const char *message, sipp_buf *out) {
    gw_sse_json(out, "error", gw_error_json(kind, message));
}

static json_t *native_whole(const gw_gen_view *v) {
    return json_pack("{s:s, s:s, s:s, s:s, s:o, s:o}", "id", v->id, "model", v->target->cfg->name, "text", v->text,
                     "finish_reason", sipp_finish_reason_name(sipp_request_finish_reason(v->req)), "usage",
                     native_usage(v), "context_key", context_key(v));
}

static const gw_format native_format = {.id_prefix = "sipp-",
                                        .begin = native_begin,
                                        .piece = native_piece,
                                        .end = native_end,
                                        .fail = native_fail,
                                        .whole = native_whole};

void gw_route_native_query(gw_call *call) { gw_run_generation(call, GW_API_NATIVE_QUERY, "/query", &native_format); }
void gw_route_native_chat(gw_call *call) { gw_run_generation(call, GW_API_NATIVE_CHAT, "/chat", &native_format); }
void gw_route_native_embed(gw_call *call) { gw_run_generation(call, GW_API_NATIVE_EMBED, "/embed", NULL); }
