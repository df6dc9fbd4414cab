/*
 * routes_openai.c: the OpenAI-compatible routes: GET /v1/models (and /v1/models/ID),
 * POST /v1/chat/completions, /v1/completions and /v1/embeddings.
 *
 * The shapes are OpenAI's, so that its clients work unchanged: a chat stream opens with a chunk
 * whose delta carries the role, sends one chunk per piece of text, closes with an empty delta and
 * the finish_reason, then (with stream_options.include_usage) a chunk with empty choices and the
 * usage, then "data: [DONE]". An error after the stream began is sent as a data line holding an
 * {"error": ...} object, which OpenAI's clients raise as an API error.
 *
 * A remote target gets the body as it came (with the model name swapped for the upstream's), so
 * options the gateway itself does not implement still reach servers that do.
 */
#include <string.h>

#include "gateway/routes.h"

#define GW_OWNER "sipp"

/* ---- usage -------------------------------------------------------------------------------------- */

/* OpenAI's usage, plus sipp's own timings under "sipp" (clients ignore fields they do not know). */
static json_t *usage_json(sipp_request *r) {
    sipp_request_stats s;
    sipp_request_get_stats(r, &s);
    return json_pack("{s:i, s:i, s:i, s:{s:i}, s:{s:f, s:f, s:f, s:f, s:f}}", "prompt_tokens", s.prompt_tokens,
                     "completion_tokens", s.generated_tokens, "total_tokens", s.prompt_tokens + s.generated_tokens,
                     "prompt_tokens_details", "cached_tokens", s.cached_tokens, "sipp", "ttft_ms", s.ttft_ms,
                     "prefill_tokens_per_s", s.prefill_tokens_per_s, "decode_tokens_per_s", s.decode_tokens_per_s,
                     "queue_ms", s.queue_ms, "total_ms", s.total_ms);
}

static const char *finish_name(sipp_request *r) { return sipp_finish_reason_name(sipp_request_finish_reason(r)); }

static json_t *chunk(const gw_gen_view *v, const char *object, json_t *choice) {
    json_t *j = json_pack("{s:s, s:s, s:I, s:s, s:[o]}", "id", v->id, "object", object, "created", (json_int_t)v->created,
                          "model", v->target->cfg->name, "choices", choice);
    if (j && v->gen->include_usage) json_object_set_new(j, "usage", json_null());
    return j;
}

static void usage_chunk(const gw_gen_view *v, const char *object, sipp_buf *out) {
    if (!v->gen->include_usage) return;
    json_t *j = json_pack("{s:s, s:s, s:I, s:s, s:[], s:o}", "id", v->id, "object", object, "created",
                          (json_int_t)v->created, "model", v->target->cfg->name, "choices", "usage", usage_json(v->req));
    gw_sse_json(out, NULL, j);
}

static void stream_fail(const gw_gen_view *v, gw_error_kind kind, const char *message, sipp_buf *out) {
    gw_sse_json(out, NULL, gw_error_json(kind, message));
}

/* ---- chat completions --------------------------------------------------------------------------- */

#define CHAT_CHUNK "chat.completion.chunk"

static void chat_begin(const gw_gen_view *v, sipp_buf *out) {
    json_t *choice = json_pack("{s:i, s:{s:s, s:s}, s:n, s:n}", "index", 0, "delta", "role", "assistant", "content", "",
                               "logprobs", "finish_reason");
    gw_sse_json(out, NULL, chunk(v, CHAT_CHUNK, choice));
}

static void chat_piece(const gw_gen_view *v, const char *text, size_t len, sipp_buf *out) {
    json_t *choice = json_pack("{s:i, s:{s:s%}, s:n, s:n}", "index", 0, "delta", "content", text, len, "logprobs",
                               "finish_reason");
    gw_sse_json(out, NULL, chunk(v, CHAT_CHUNK, choice));
}

static void chat_end(const gw_gen_view *v, sipp_buf *out) {
    json_t *choice = json_pack("{s:i, s:{}, s:n, s:s}", "index", 0, "delta", "logprobs", "finish_reason", finish_name(v->req));
    gw_sse_json(out, NULL, chunk(v, CHAT_CHUNK, choice));
    usage_chunk(v, CHAT_CHUNK, out);
    gw_sse_done(out);
}

static json_t *chat_whole(const gw_gen_view *v) {
    return json_pack("{s:s, s:s, s:I, s:s, s:[{s:i, s:{s:s, s:s}, s:n, s:s}], s:o}", "id", v->id, "object",
                     "chat.completion", "created", (json_int_t)v->created, "model", v->target->cfg->name, "choices",
                     "index", 0, "message", "role", "assistant", "content", v->text, "logprobs",
                     "finish_reason", finish_name(v->req), "usage", usage_json(v->req));
}

static const gw_format chat_format = {
    .id_prefix = "chatcmpl-", .begin = chat_begin, .piece = chat_piece, .end = chat_end, .fail = stream_fail, .whole = chat_whole};

/* ---- text completions --------------------------------------------------------------------------- */

#define TEXT_OBJECT "text_completion"

static void text_begin(const gw_gen_view *v, sipp_buf *out) {}

static void text_piece(const gw_gen_view *v, const char *text, size_t len, sipp_buf *out) {
    json_t *choice = json_pack("{s:s%, s:i, s:n, s:n}", "text", text, len, "index", 0, "logprobs", "finish_reason");
    gw_sse_json(out, NULL, chunk(v, TEXT_OBJECT, choice));
}

static void text_end(const gw_gen_view *v, sipp_buf *out) {
    json_t *choice = json_pack("{s:s, s:i, s:n, s:s}", "text", "", "index", 0, "logprobs", "finish_reason", finish_name(v->req));
    gw_sse_json(out, NULL, chunk(v, TEXT_OBJECT, choice));
    usage_chunk(v, TEXT_OBJECT, out);
    gw_sse_done(out);
}

static json_t *text_whole(const gw_gen_view *v) {
    return json_pack("{s:s, s:s, s:I, s:s, s:[{s:s, s:i, s:n, s:s}], s:o}", "id", v->id, "object", TEXT_OBJECT, "created",
                     (json_int_t)v->created, "model", v->target->cfg->name, "choices", "text", v->text,
                     "index", 0, "logprobs", "finish_reason", finish_name(v->req), "usage", usage_json(v->req));
}

static const gw_format text_format = {
    .id_prefix = "cmpl-", .begin = text_begin, .piece = text_piece, .end = text_end, .fail = stream_fail, .whole = text_whole};

/* ---- shared flow -------------------------------------------------------------------------------- */

void gw_run_generation(gw_call *call, gw_api api, const char *upstream_suffix, const gw_format *fmt) {
    char err[SIPP_ERROR_SIZE];
    json_t *root = gw_parse_body(call->body, call->body_len, err, sizeof err);
    if (!root) {
        gw_reply_error(call, GW_E_INVALID_JSON, "%s", err);
        return;
    }
    gw_gen g;
    gw_error_kind kind;
    if (!gw_decode(api, root, &g, &kind, err, sizeof err)) {
        /* A remote target may accept what sipp does not (tools, logprobs, ...): route on the model
         * the same tree names. */
        const char *model = gw_body_model(root);
        gw_target *t = model ? gw_target_find(call->srv, model) : NULL;
        if (t && t->cfg->type == GW_TARGET_REMOTE && json_is_object(root)) {
            bool stream = gw_body_stream(root, api == GW_API_NATIVE_QUERY || api == GW_API_NATIVE_CHAT);
            if (gw_call_target(call, model)) gw_upstream_forward(call, t, upstream_suffix, root, stream);
        } else {
            gw_reply_error(call, kind, "%s", err);
        }
        json_decref(root);
        return;
    }
    json_decref(root); /* g holds its own reference */
    gw_target *t = gw_call_target(call, g.model);
    if (!t) {
        gw_gen_free(&g);
        return;
    }
    if (t->cfg->type == GW_TARGET_REMOTE) {
        gw_upstream_forward(call, t, upstream_suffix, g.root, g.stream);
        gw_gen_free(&g);
        return;
    }
    if (api == GW_API_EMBEDDINGS || api == GW_API_NATIVE_EMBED) {
        gw_embed(call, t, &g);
        gw_gen_free(&g);
        return;
    }
    gw_generate(call, t, &g, fmt);
}

void gw_route_chat_completions(gw_call *call) { gw_run_generation(call, GW_API_CHAT, "/chat/completions", &chat_format); }
void gw_route_completions(gw_call *call) { gw_run_generation(call, GW_API_COMPLETION, "/completions", &text_format); }
void gw_route_embeddings(gw_call *call) { gw_run_generation(call, GW_API_EMBEDDINGS, "/embeddings", NULL); }

/* ---- models ------------------------------------------------------------------------------------- */

/* OpenAI's model object, plus sipp's residency under "sipp" for local targets (state, memory, last
 * use, keep-alive deadline). */
static json_t *model_json(gw_call *call, gw_target *t) {
    json_t *o = json_pack("{s:s, s:s, s:I, s:s}", "id", t->cfg->name, "object", "model", "created",
                          (json_int_t)call->srv->started_unix, "owned_by", GW_OWNER);
    if (t->cfg->type == GW_TARGET_LOCAL) {
        json_t *r = json_object();
        gw_residency_describe(call->srv, t, r);
        json_object_set_new(o, "sipp", r);
        json_object_set(o, "state", json_object_get(r, "state"));
    }
    return o;
}

void gw_route_models(gw_call *call) {
    gw_residency_rescan(call->srv);
    json_t *data = json_array();
    for (size_t i = 0; i < call->srv->n_targets; i++) {
        gw_target *t = &call->srv->targets[i];
        if (gw_auth_allows(call, t->cfg)) json_array_append_new(data, model_json(call, t));
    }
    gw_reply_json(call, 200, json_pack("{s:s, s:o}", "object", "list", "data", data));
}

void gw_route_model(gw_call *call, const char *id) {
    gw_target *t = gw_call_lookup(call, id);
    if (t) gw_reply_json(call, 200, model_json(call, t));
}
