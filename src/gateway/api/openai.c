/*
 * openai.c: the OpenAI-compatible routes: GET /v1/models (and /v1/models/ID),
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

#include "gateway/api/api.h"
#include "gateway/kinds/kinds.h"
#include "util/chat_delta_json.h"

#define GW_OWNER "sipp"

/* ---- usage -------------------------------------------------------------------------------------- */

/* OpenAI's usage, plus sipp's own timings under "sipp" (clients ignore fields they do not know). */
static json_t *usage_json(sipp_request *r) {
    sipp_request_stats s;
    sipp_request_get_stats(r, &s);
    return json_pack("{s:i, s:i, s:i, s:{s:i}, s:{s:f, s:f, s:f, s:f, s:f, s:i, s:i, s:i, s:i, s:s}}",
                     "prompt_tokens", s.prompt_tokens, "completion_tokens", s.generated_tokens,
                     "total_tokens", s.prompt_tokens + s.generated_tokens, "prompt_tokens_details",
                     "cached_tokens", s.cached_tokens, "sipp", "ttft_ms", s.ttft_ms, "prefill_tokens_per_s",
                     s.prefill_tokens_per_s, "decode_tokens_per_s", s.decode_tokens_per_s, "queue_ms",
                     s.queue_ms, "total_ms", s.total_ms, "draft_tokens", s.draft_tokens, "accepted_tokens",
                     s.accepted_tokens, "draft_steps", s.draft_steps, "cutoff_steps", s.cutoff_steps,
                     "speculation", *s.speculation ? s.speculation : "none");
}

static json_t *chunk(const gw_gen_view *v, const char *object, json_t *choice) {
    json_t *j = json_pack("{s:s, s:s, s:I, s:s, s:[o]}", "id", v->id, "object", object, "created",
                          (json_int_t)v->created, "model", v->target->cfg->name, "choices", choice);
    if (j && v->gen->include_usage) json_object_set_new(j, "usage", json_null());
    return j;
}

static void usage_chunk(const gw_gen_view *v, const char *object, sipp_buf *out) {
    if (!v->gen->include_usage) return;
    json_t *j = json_pack("{s:s, s:s, s:I, s:s, s:[], s:o}", "id", v->id, "object", object, "created",
                          (json_int_t)v->created, "model", v->target->cfg->name, "choices", "usage",
                          usage_json(v->req));
    gw_sse_json(out, NULL, j);
}

static void stream_fail(const gw_gen_view *v, gw_error_kind kind, const char *message, sipp_buf *out) {
    gw_sse_json(out, NULL, gw_error_json(kind, message));
}

/* ---- chat completions --------------------------------------------------------------------------- */

#define CHAT_CHUNK "chat.completion.chunk"

/* OpenAI's choice logprobs object for chats ({"content": [...]}), or null. Steals entries. */
static json_t *chat_logprobs(json_t *entries) {
    return entries ? json_pack("{s:o, s:n}", "content", entries, "refusal") : json_null();
}

static void chat_begin(const gw_gen_view *v, sipp_buf *out) {
    for (size_t i = 0; i < v->n_choices; i++) {
        json_t *choice = json_pack("{s:I, s:{s:s, s:s}, s:n, s:n}", "index", (json_int_t)i, "delta", "role",
                                   "assistant", "content", "", "logprobs", "finish_reason");
        gw_sse_json(out, NULL, chunk(v, CHAT_CHUNK, choice));
    }
}

static void chat_piece(const gw_gen_view *v, const char *text, size_t len, sipp_buf *out) {
    json_t *choice = json_pack("{s:i, s:{s:s%}, s:n, s:n}", "index", 0, "delta", "content", text, len,
                               "logprobs", "finish_reason");
    gw_sse_json(out, NULL, chunk(v, CHAT_CHUNK, choice));
}

static void chat_delta(const gw_gen_view *v, size_t index, const sipp_chat_delta *delta, json_t *logprobs,
                       sipp_buf *out) {
    json_t *choice =
        json_pack("{s:I, s:o, s:o, s:n}", "index", (json_int_t)index, "delta", sipp_openai_delta_json(delta),
                  "logprobs", chat_logprobs(json_incref(logprobs)), "finish_reason");
    gw_sse_json(out, NULL, chunk(v, CHAT_CHUNK, choice));
}

static void chat_end(const gw_gen_view *v, sipp_buf *out) {
    for (size_t i = 0; i < v->n_choices; i++) {
        json_t *choice = json_pack("{s:I, s:{}, s:n, s:s}", "index", (json_int_t)i, "delta", "logprobs",
                                   "finish_reason", v->choices[i].finish);
        gw_sse_json(out, NULL, chunk(v, CHAT_CHUNK, choice));
    }
    usage_chunk(v, CHAT_CHUNK, out);
    gw_sse_done(out);
}

/* Usage over every choice: the prompt once (the choices share it), the completions summed. */
static json_t *usage_all(const gw_gen_view *v) {
    json_t *u = usage_json(v->req);
    int generated = 0;
    for (size_t i = 0; i < v->n_choices; i++) {
        sipp_request_stats s;
        sipp_request_get_stats(v->choices[i].req, &s);
        generated += s.generated_tokens;
    }
    json_int_t prompt = json_integer_value(json_object_get(u, "prompt_tokens"));
    json_object_set_new(u, "completion_tokens", json_integer(generated));
    json_object_set_new(u, "total_tokens", json_integer(prompt + generated));
    const char *warning = sipp_request_warning(v->req);
    if (*warning) json_object_set_new(json_object_get(u, "sipp"), "warning", json_string(warning));
    return u;
}

static json_t *chat_whole(const gw_gen_view *v) {
    json_t *choices = json_array();
    for (size_t i = 0; i < v->n_choices; i++) {
        const gw_choice *c = &v->choices[i];
        json_array_append_new(choices,
                              json_pack("{s:I, s:o, s:o, s:s}", "index", (json_int_t)i, "message",
                                        gw_message_json(&c->message), "logprobs",
                                        chat_logprobs(json_incref(c->logprobs)), "finish_reason", c->finish));
    }
    return json_pack("{s:s, s:s, s:I, s:s, s:o, s:o}", "id", v->id, "object", "chat.completion", "created",
                     (json_int_t)v->created, "model", v->target->cfg->name, "choices", choices, "usage",
                     usage_all(v));
}

static const gw_format chat_format = GW_DELTA_FORMAT(chat, "chatcmpl-", stream_fail);

/* ---- text completions --------------------------------------------------------------------------- */

#define TEXT_OBJECT "text_completion"

/* The legacy completions logprobs: parallel arrays of tokens, their logprobs and their top
 * alternatives as {token: logprob} objects, and text offsets. */
static json_t *text_logprobs(const json_t *entries, size_t offset) {
    if (!entries) return json_null();
    json_t *tokens = json_array(), *lps = json_array(), *tops = json_array(), *offsets = json_array();
    size_t i;
    json_t *e;
    json_array_foreach(entries, i, e) {
        const char *tok = json_string_value(json_object_get(e, "token"));
        json_array_append(tokens, json_object_get(e, "token"));
        json_array_append(lps, json_object_get(e, "logprob"));
        json_t *top = json_object(), *alt;
        size_t k;
        json_array_foreach(json_object_get(e, "top_logprobs"), k, alt) {
            json_object_set(top, json_string_value(json_object_get(alt, "token")),
                            json_object_get(alt, "logprob"));
        }
        json_array_append_new(tops, top);
        json_array_append_new(offsets, json_integer((json_int_t)offset));
        offset += tok ? strlen(tok) : 0;
    }
    return json_pack("{s:o, s:o, s:o, s:o}", "tokens", tokens, "token_logprobs", lps, "top_logprobs", tops,
                     "text_offset", offsets);
}

static void text_begin(const gw_gen_view *v, sipp_buf *out) {}

static void text_piece(const gw_gen_view *v, const char *text, size_t len, sipp_buf *out) {
    json_t *choice =
        json_pack("{s:s%, s:i, s:n, s:n}", "text", text, len, "index", 0, "logprobs", "finish_reason");
    gw_sse_json(out, NULL, chunk(v, TEXT_OBJECT, choice));
}

static void text_delta(const gw_gen_view *v, size_t index, const sipp_chat_delta *delta, json_t *logprobs,
                       sipp_buf *out) {
    json_t *choice = json_pack("{s:s?, s:I, s:o, s:n}", "text", delta->content, "index", (json_int_t)index,
                               "logprobs", text_logprobs(logprobs, 0), "finish_reason");
    gw_sse_json(out, NULL, chunk(v, TEXT_OBJECT, choice));
}

static void text_end(const gw_gen_view *v, sipp_buf *out) {
    for (size_t i = 0; i < v->n_choices; i++) {
        json_t *choice = json_pack("{s:s, s:I, s:n, s:s}", "text", "", "index", (json_int_t)i, "logprobs",
                                   "finish_reason", v->choices[i].finish);
        gw_sse_json(out, NULL, chunk(v, TEXT_OBJECT, choice));
    }
    usage_chunk(v, TEXT_OBJECT, out);
    gw_sse_done(out);
}

static json_t *text_whole(const gw_gen_view *v) {
    json_t *choices = json_array();
    for (size_t i = 0; i < v->n_choices; i++) {
        const gw_choice *c = &v->choices[i];
        json_array_append_new(choices, json_pack("{s:s, s:I, s:o, s:s}", "text", c->text, "index",
                                                 (json_int_t)i, "logprobs", text_logprobs(c->logprobs, 0),
                                                 "finish_reason", c->finish));
    }
    return json_pack("{s:s, s:s, s:I, s:s, s:o, s:o}", "id", v->id, "object", TEXT_OBJECT, "created",
                     (json_int_t)v->created, "model", v->target->cfg->name, "choices", choices, "usage",
                     usage_all(v));
}

static const gw_format text_format = GW_DELTA_FORMAT(text, "cmpl-", stream_fail);

/* ---- the routes -------------------------------------------------------------------------------- */

void gw_route_chat_completions(gw_call *call) { gw_dispatch_call(call, GW_API_CHAT, &chat_format); }
void gw_route_completions(gw_call *call) { gw_dispatch_call(call, GW_API_COMPLETION, &text_format); }
void gw_route_embeddings(gw_call *call) { gw_dispatch_call(call, GW_API_EMBEDDINGS, NULL); }

/* ---- models ------------------------------------------------------------------------------------- */

/* OpenAI's model object, plus sipp's residency under "sipp" for local targets (state, memory, last
 * use, keep-alive deadline), what a local target takes besides text under "capabilities"
 * (the kind's capabilities), for a loaded one how its chats are rendered under "meta", and with
 * [web] serve_model_files where its GGUF is served under "browser_file" (api/model_file.c). */
static json_t *model_json(gw_call *call, gw_target *t) {
    json_t *o = json_pack("{s:s, s:s, s:I, s:s}", "id", t->cfg->name, "object", "model", "created",
                          (json_int_t)call->srv->started_unix, "owned_by", GW_OWNER);
    gw_target_view v;
    gw_target_view_open(call->srv, t, &v);
    gw_kind_of(t)->describe_model(call, t, &v, o);
    gw_target_view_close(call->srv, t, &v);
    if (t->cfg->n_aliases) {
        json_t *aliases = json_array();
        for (size_t k = 0; k < t->cfg->n_aliases; k++)
            json_array_append_new(aliases, json_string(t->cfg->aliases[k]));
        json_object_set_new(o, "aliases", aliases);
    }
    json_t *file = gw_model_file_json(call, t); /* NULL unless served (a local, single-file target) */
    if (file) json_object_set_new(o, "browser_file", file);
    return o;
}

void gw_route_models(gw_call *call) {
    gw_residency_rescan(call->srv);
    json_t *data = json_array();
    for (size_t i = 0; i < call->srv->n_targets; i++) {
        gw_target *t = &call->srv->targets[i];
        if (gw_target_listed(t) && gw_auth_allows(call, t->cfg))
            json_array_append_new(data, model_json(call, t));
    }
    gw_reply_json(call, 200, json_pack("{s:s, s:o}", "object", "list", "data", data));
}

void gw_route_model(gw_call *call, const char *id) {
    gw_target *t = gw_call_lookup(call, id);
    if (t) gw_reply_json(call, 200, model_json(call, t));
}
