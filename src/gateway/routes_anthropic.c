/*
 * routes_anthropic.c: Anthropic's Messages API, what Claude Code speaks: POST /v1/messages and
 * POST /v1/messages/count_tokens.
 *
 * A request becomes a chat-completions body (translate.c): system (a string or text blocks) is the
 * system message, messages with text blocks the turns after it, stop_sequences is stop, and
 * max_tokens (required here, as Anthropic requires it), temperature (0..1), top_p and top_k pass
 * as they are. Unknown fields and content blocks this server cannot honour are refused by name.
 * Errors, before and during a stream, are Anthropic's shape (the route table marks these routes),
 * and clients authenticate with x-api-key as with Authorization: Bearer (auth.c).
 *
 * The reply is a message with one text block; stop_reason is end_turn, max_tokens, or
 * stop_sequence (with the string that matched). usage counts input_tokens as the prompt tokens the
 * engine evaluated and cache_read_input_tokens as those it reused from the KV, which together are
 * the prompt, as Anthropic counts them. A stream sends
 *
 *   message_start, content_block_start, ping, content_block_delta (text_delta) ...,
 *   content_block_stop, message_delta (stop_reason, usage), message_stop
 *
 * and an error after the stream began as "event: error".
 *
 * count_tokens renders the messages through the model's chat template and tokenizes them exactly
 * as a generation would, so its input_tokens equals what /v1/messages then reports.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/gateway.h"
#include "gateway/translate.h"

#define API_NAME "/v1/messages"
#define ID_SIZE 96
#define ANTHROPIC_TEMPERATURE_MAX 1.0

static const gw_rename renames[] = {
    {"stop", "stop_sequences"},
    {NULL, NULL},
};

static const char *const known_fields[] = {
    "model",  "messages", "max_tokens", "system",      "stop_sequences", "temperature",  "top_p", "top_k",
    "stream", "metadata", "tools",      "tool_choice", "thinking",       "service_tier", NULL,
};

static const char *const count_fields[] = {"model",       "messages", "system", "tools",
                                           "tool_choice", "thinking", NULL};

typedef struct msg_state {
    char id[ID_SIZE];
} msg_state;

static const msg_state *state_of(const gw_gen_view *v) { return v->gen->route; }

/* ---- rendering ---------------------------------------------------------------------------------- */

static const char *stop_reason(const gw_gen_view *v) {
    if (sipp_request_finish_reason(v->req) == SIPP_FINISH_LENGTH) return "max_tokens";
    return sipp_request_stop_string(v->req) ? "stop_sequence" : "end_turn";
}

static json_t *stop_sequence(const gw_gen_view *v) {
    const char *s = sipp_request_stop_string(v->req);
    return s ? json_string(s) : json_null();
}

static json_t *usage_json(sipp_request *r) {
    sipp_request_stats s;
    sipp_request_get_stats(r, &s);
    return json_pack("{s:i, s:i, s:i, s:i}", "input_tokens", s.prompt_tokens - s.cached_tokens,
                     "output_tokens", s.generated_tokens, "cache_read_input_tokens", s.cached_tokens,
                     "cache_creation_input_tokens", 0);
}

/* The message object; content, stop_reason (NULL: null) and usage are given. */
static json_t *message(const gw_gen_view *v, json_t *content, const char *reason, json_t *stop,
                       json_t *usage) {
    return json_pack("{s:s, s:s, s:s, s:s, s:o, s:o, s:o, s:o}", "id", state_of(v)->id, "type", "message",
                     "role", "assistant", "model", v->target->cfg->name, "content", content, "stop_reason",
                     reason ? json_string(reason) : json_null(), "stop_sequence", stop, "usage", usage);
}

static json_t *am_whole(const gw_gen_view *v) {
    return message(v, json_pack("[{s:s, s:s}]", "type", "text", "text", v->text), stop_reason(v),
                   stop_sequence(v), usage_json(v->req));
}

static void event(const char *type, json_t *fields, sipp_buf *out) {
    json_object_set_new(fields, "type", json_string(type));
    gw_sse_json(out, type, fields);
}

static void am_begin(const gw_gen_view *v, sipp_buf *out) {
    event("message_start",
          json_pack("{s:o}", "message", message(v, json_array(), NULL, json_null(), usage_json(v->req))),
          out);
    event("content_block_start",
          json_pack("{s:i, s:{s:s, s:s}}", "index", 0, "content_block", "type", "text", "text", ""), out);
    event("ping", json_object(), out);
}

static void am_piece(const gw_gen_view *v, const char *text, size_t len, sipp_buf *out) {
    event("content_block_delta",
          json_pack("{s:i, s:{s:s, s:s%}}", "index", 0, "delta", "type", "text_delta", "text", text, len),
          out);
}

static void am_end(const gw_gen_view *v, sipp_buf *out) {
    event("content_block_stop", json_pack("{s:i}", "index", 0), out);
    event("message_delta",
          json_pack("{s:{s:s, s:o}, s:o}", "delta", "stop_reason", stop_reason(v), "stop_sequence",
                    stop_sequence(v), "usage", usage_json(v->req)),
          out);
    event("message_stop", json_object(), out);
}

static void am_fail(const gw_gen_view *v, gw_error_kind kind, const char *msg, sipp_buf *out) {
    gw_sse_json(out, "error", gw_error_json_in(GW_DIALECT_ANTHROPIC, kind, msg));
}

static const gw_format messages_format = {.id_prefix = "msg_",
                                          .begin = am_begin,
                                          .piece = am_piece,
                                          .end = am_end,
                                          .fail = am_fail,
                                          .whole = am_whole};

/* ---- request translation ------------------------------------------------------------------------ */

static bool refuse(gw_call *call, const char *fmt, ...) SIPP_PRINTF(2, 3);
static bool refuse(gw_call *call, const char *fmt, ...) {
    char msg[SIPP_ERROR_SIZE];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    gw_reply_error(call, GW_E_INVALID_FIELD, "%s", msg);
    return false;
}

/* Text blocks joined; where names the field ("system", "messages[2].content"). */
static bool blocks_text(gw_call *call, json_t *c, const char *where, sipp_buf *out) {
    if (json_is_string(c)) return sipp_buf_append(out, json_string_value(c), json_string_length(c));
    if (!json_is_array(c)) return refuse(call, "'%s' must be a string or an array of content blocks", where);
    size_t k;
    json_t *b;
    json_array_foreach(c, k, b) {
        const char *type = json_string_value(json_object_get(b, "type"));
        if (!json_is_object(b) || !type)
            return refuse(call, "'%s[%zu]' must be a content block with a \"type\"", where, k);
        if (strcmp(type, "thinking") == 0 || strcmp(type, "redacted_thinking") == 0)
            continue; /* see docs/gateway.md */
        if (strcmp(type, "tool_use") == 0 || strcmp(type, "tool_result") == 0)
            return refuse(
                call,
                "'%s[%zu]' is a %s block, which needs tool calling; this server does not support tools yet",
                where, k, type);
        if (strcmp(type, "text") != 0)
            return refuse(call, "'%s[%zu].type' '%s' is not supported; only text blocks are", where, k, type);
        json_t *t = json_object_get(b, "text");
        if (!json_is_string(t)) return refuse(call, "'%s[%zu].text' must be a string", where, k);
        sipp_buf_append(out, json_string_value(t), json_string_length(t));
    }
    return true;
}

static bool add_message(gw_call *call, json_t *messages, const char *role, json_t *content,
                        const char *where) {
    sipp_buf text = {0};
    bool ok = blocks_text(call, content, where, &text);
    if (ok)
        json_array_append_new(messages,
                              json_pack("{s:s, s:s}", "role", role, "content", text.data ? text.data : ""));
    sipp_buf_free(&text);
    return ok;
}

static bool translate_messages(gw_call *call, json_t *root, json_t *chat) {
    json_t *out = json_array();
    json_object_set_new(chat, "messages", out);
    json_t *sys = json_object_get(root, "system");
    if (sys && !json_is_null(sys) && !add_message(call, out, "system", sys, "system")) return false;
    json_t *msgs = json_object_get(root, "messages");
    if (!json_is_array(msgs) || json_array_size(msgs) == 0)
        return refuse(call, "'messages' must be a non-empty array of {\"role\", \"content\"} objects");
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        const char *role = json_string_value(json_object_get(m, "role"));
        if (!json_is_object(m) || !role || (strcmp(role, "user") != 0 && strcmp(role, "assistant") != 0))
            return refuse(call, "'messages[%zu].role' must be \"user\" or \"assistant\"", i);
        char where[64];
        snprintf(where, sizeof where, "messages[%zu].content", i);
        if (!add_message(call, out, role, json_object_get(m, "content"), where)) return false;
    }
    return true;
}

/* Fields that only some values of can be honoured, and Anthropic's own ranges. */
static bool check_options(gw_call *call, json_t *root) {
    json_t *th = json_object_get(root, "thinking");
    if (th && !json_is_null(th)) {
        const char *type = json_string_value(json_object_get(th, "type"));
        if (!type || strcmp(type, "disabled") != 0)
            return refuse(call, "'thinking' is not supported by this server yet (no thinking switch); leave "
                                "it out or use {\"type\": \"disabled\"}");
    }
    json_t *tools = json_object_get(root, "tools");
    if (tools && !json_is_null(tools) && !(json_is_array(tools) && json_array_size(tools) == 0))
        return refuse(call, "'tools' is not supported by this server yet; leave it out");
    json_t *tc = json_object_get(root, "tool_choice");
    if (tc && !json_is_null(tc)) {
        const char *type = json_string_value(json_object_get(tc, "type"));
        if (!type || (strcmp(type, "auto") != 0 && strcmp(type, "none") != 0))
            return refuse(call,
                          "'tool_choice' needs tools, which this server does not support yet; leave it out");
    }
    json_t *t = json_object_get(root, "temperature");
    if (json_is_number(t) && (json_number_value(t) < 0 || json_number_value(t) > ANTHROPIC_TEMPERATURE_MAX))
        return refuse(call, "'temperature' is %g; it must be in [0, 1]", json_number_value(t));
    json_t *md = json_object_get(root, "metadata");
    if (md && !json_is_null(md) && !json_is_object(md)) return refuse(call, "'metadata' must be an object");
    json_t *ss = json_object_get(root, "stop_sequences");
    if (ss && !json_is_null(ss) && !json_is_array(ss)) return refuse(call, "'stop_sequences' must be an array of strings");
    return true;
}

static json_t *translate(gw_call *call, json_t *root, bool counting) {
    json_t *chat = json_object();
    if (!gw_check_fields(call, root, counting ? count_fields : known_fields, API_NAME) ||
        !check_options(call, root) || !translate_messages(call, root, chat)) {
        json_decref(chat);
        return NULL;
    }
    gw_copy_field(root, "model", chat, NULL);
    if (counting) return chat;
    json_t *mt = json_object_get(root, "max_tokens");
    if (!mt || json_is_null(mt)) {
        refuse(call, "'max_tokens' is missing: Messages requests must give the most tokens to generate");
        json_decref(chat);
        return NULL;
    }
    static const char *const same[] = {"max_tokens", "temperature", "top_p", "top_k", "stream", NULL};
    for (const char *const *k = same; *k; k++)
        gw_copy_field(root, *k, chat, NULL);
    gw_copy_field(root, "stop_sequences", chat, "stop");
    return chat;
}

void gw_route_messages(gw_call *call) {
    json_t *root = gw_body_object(call);
    if (!root) return;
    json_t *chat = translate(call, root, false);
    json_decref(root);
    if (!chat) return;
    msg_state *s = calloc(1, sizeof *s);
    if (!s) {
        json_decref(chat);
        gw_reply_error(call, GW_E_INTERNAL, "out of memory");
        return;
    }
    snprintf(s->id, sizeof s->id, "msg_%s", call->request_id);
    gw_run_translated(call, GW_API_CHAT, chat, renames, API_NAME, &messages_format, s, free);
}

void gw_route_messages_count(gw_call *call) {
    json_t *root = gw_body_object(call);
    if (!root) return;
    json_t *chat = translate(call, root, true);
    json_decref(root);
    gw_gen g;
    if (!chat || !gw_decode_tree(call, GW_API_CHAT, chat, renames, &g)) return;
    gw_target *t = gw_translated_target(call, g.model, API_NAME "/count_tokens");
    if (!t) {
        gw_gen_free(&g);
        return;
    }
    char *prompt = NULL;
    size_t n = 0;
    sipp_status st = sipp_chat_render(t->model, NULL, g.messages, g.n_messages, true, &prompt);
    if (st == SIPP_OK) {
        st = sipp_tokenize(t->model, prompt, strlen(prompt), true, true, NULL, 0, &n);
        if (st == SIPP_ERR_INVALID_ARGUMENT) st = SIPP_OK; /* cap 0 only sizes */
    }
    if (st != SIPP_OK)
        gw_reply_error(call, gw_error_from_status(st), "model '%s': %s", t->cfg->name,
                       sipp_model_last_error(t->model));
    else
        gw_reply_json(call, 200, json_pack("{s:I}", "input_tokens", (json_int_t)n));
    sipp_free(prompt);
    gw_gen_free(&g);
}
