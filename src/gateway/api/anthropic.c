/*
 * anthropic.c: Anthropic's Messages API, what Claude Code speaks: POST /v1/messages and
 * POST /v1/messages/count_tokens.
 *
 * A request becomes a chat-completions body (translate.c): system (a string or text blocks) is the
 * system message; messages' text blocks are turns, an assistant's tool_use blocks its tool_calls,
 * a user's tool_result blocks tool messages (before the user's text), a user's image blocks with a
 * base64 source (or, with [media] fetch, a url source) chat image parts among its text; tools
 * (input_schema) are function tools; tool_choice auto | any | tool | none is chat's auto | required | a named
 * function | none; thinking is the template's thinking switch and budget; stop_sequences is stop;
 * max_tokens (required here, as Anthropic requires it), temperature (0..1), top_p and top_k pass
 * as they are; a system message among the turns stays where it stands; thinking adaptive and
 * output_config.effort are the template's switch and effort. Bookkeeping and hints (metadata,
 * cache_control, clear-thinking context_management, thinking.display) and server tools are
 * accepted and named in sipp-ignored (api/fields.c); unknown fields and blocks this server cannot
 * honour are refused by name. Errors,
 * before and during a stream, are Anthropic's shape (the route table marks these routes), and
 * clients authenticate with x-api-key as with Authorization: Bearer (auth.c).
 *
 * The reply is a message whose content is a thinking block, a text block and tool_use blocks (from
 * the chat layer's parsed answer); stop_reason is end_turn, max_tokens, stop_sequence (with the
 * string that matched) or tool_use. usage counts input_tokens as the prompt tokens the engine
 * evaluated and cache_read_input_tokens as those it reused from the KV, which together are the
 * prompt, as Anthropic counts them. A stream sends message_start, then per block
 * content_block_start, content_block_delta (thinking_delta, text_delta, input_json_delta) ...,
 * content_block_stop (with a ping after the first block's start), then message_delta (stop_reason,
 * usage) and message_stop; an error after the stream began is "event: error".
 *
 * count_tokens has the engine render and tokenize the request exactly as a generation would (it
 * runs it for one token), so its input_tokens equals what /v1/messages then reports. A prompt too
 * long for the context cannot run, and is counted without running (sipp_engine_count_prompt): its
 * input_tokens, with context_window and exceeds_context_window: true beside it, so that an agent
 * learns how much to trim rather than only that it must.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/api/api.h"

#define API_NAME "/v1/messages"
#define ID_SIZE 96
#define ANTHROPIC_TEMPERATURE_MAX 1.0
#define TOOL_ERROR_PREFIX "Error: "
#define CLEAR_THINKING_PREFIX "clear_thinking"
#define FIELD_PATH_SIZE 96 /* "messages[12].content[3].content" and the like */

static const gw_rename renames[] = {
    {"stop", "stop_sequences"},
    {"tools[*].function.parameters", "tools[*].input_schema"},
    {"tools[*].function", "tools[*]"},
    {"tool_choice.function", "tool_choice"},
    {"thinking_budget_tokens", "thinking.budget_tokens"},
    {NULL, NULL},
};

typedef enum block_kind { BLOCK_NONE, BLOCK_THINKING, BLOCK_TEXT, BLOCK_TOOL } block_kind;

typedef struct msg_state {
    char id[ID_SIZE];
    /* streaming: the open content block */
    block_kind open;
    int index; /* of the open block; -1 before the first */
} msg_state;

static msg_state *state_of(const gw_gen_view *v) { return v->gen->route; }

/* ---- rendering ---------------------------------------------------------------------------------- */

static const char *stop_reason(const gw_gen_view *v) {
    const char *f = v->choices[0].finish;
    if (strcmp(f, "length") == 0) return "max_tokens";
    if (strcmp(f, "tool_calls") == 0) return "tool_use";
    return gw_view_stop_string(v) ? "stop_sequence" : "end_turn";
}

static json_t *stop_sequence(const gw_gen_view *v) {
    const char *s = gw_view_stop_string(v);
    return s ? json_string(s) : json_null();
}

static json_t *usage_json(const gw_gen_view *v) {
    sipp_request_stats s;
    gw_view_stats(v, &s);
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

/* The content blocks of a finished answer: thinking, text (when there is some, or nothing else),
 * then one tool_use per tool call. */
static json_t *content_blocks(const gw_gen_view *v) {
    json_t *out = json_array();
    gw_answer a;
    gw_view_answer(v, &a);
    if (a.reasoning && *a.reasoning)
        json_array_append_new(
            out, json_pack("{s:s, s:s, s:s}", "type", "thinking", "thinking", a.reasoning, "signature", ""));
    if (*a.text || a.n_calls == 0)
        json_array_append_new(out, json_pack("{s:s, s:s}", "type", "text", "text", a.text));
    for (size_t k = 0; k < a.n_calls; k++) {
        gw_tool_call c;
        gw_view_call(v, k, &c);
        json_array_append_new(out, json_pack("{s:s, s:s, s:s, s:o}", "type", "tool_use", "id", c.id, "name",
                                             c.name, "input", gw_arguments_object(c.arguments)));
    }
    return out;
}

static json_t *am_whole(const gw_gen_view *v) {
    return message(v, content_blocks(v), stop_reason(v), stop_sequence(v), usage_json(v));
}

static void event(const char *type, json_t *fields, sipp_buf *out) {
    json_object_set_new(fields, "type", json_string(type));
    gw_sse_json(out, type, fields);
}

static void close_block(msg_state *s, sipp_buf *out) {
    if (s->open == BLOCK_NONE) return;
    event("content_block_stop", json_pack("{s:i}", "index", s->index), out);
    s->open = BLOCK_NONE;
}

/* Opens a block of kind k described by block (stolen). */
static void open_block(msg_state *s, block_kind k, json_t *block, sipp_buf *out) {
    close_block(s, out);
    s->open = k;
    s->index++;
    event("content_block_start", json_pack("{s:i, s:o}", "index", s->index, "content_block", block), out);
    if (s->index == 0) event("ping", json_object(), out); /* where Anthropic's own streams send it */
}

static void block_delta(msg_state *s, json_t *delta, sipp_buf *out) {
    event("content_block_delta", json_pack("{s:i, s:o}", "index", s->index, "delta", delta), out);
}

static void am_begin(const gw_gen_view *v, sipp_buf *out) {
    msg_state *s = state_of(v);
    s->index = -1;
    /* Nothing is streamed yet: output_tokens is 0 here, whatever the engine has made meanwhile (on a
     * busy machine it may have finished before this first event is written); message_delta counts. */
    json_t *usage = usage_json(v);
    json_object_set_new(usage, "output_tokens", json_integer(0));
    event("message_start", json_pack("{s:o}", "message", message(v, json_array(), NULL, json_null(), usage)),
          out);
}

static void am_reasoning(const gw_gen_view *v, const char *text, size_t len, sipp_buf *out) {
    msg_state *s = state_of(v);
    if (s->open != BLOCK_THINKING)
        open_block(s, BLOCK_THINKING,
                   json_pack("{s:s, s:s, s:s}", "type", "thinking", "thinking", "", "signature", ""), out);
    block_delta(s, json_pack("{s:s, s:s%}", "type", "thinking_delta", "thinking", text, len), out);
}

static void am_text(const gw_gen_view *v, const char *text, size_t len, sipp_buf *out) {
    msg_state *s = state_of(v);
    if (s->open != BLOCK_TEXT)
        open_block(s, BLOCK_TEXT, json_pack("{s:s, s:s}", "type", "text", "text", ""), out);
    block_delta(s, json_pack("{s:s, s:s%}", "type", "text_delta", "text", text, len), out);
}

static void am_tool_start(const gw_gen_view *v, const char *id, const char *name, sipp_buf *out) {
    open_block(
        state_of(v), BLOCK_TOOL,
        json_pack("{s:s, s:s, s:s, s:{}}", "type", "tool_use", "id", id, "name", name ? name : "", "input"),
        out);
}

/* Arguments before any call started (a malformed upstream) have no block to go in. */
static void am_tool_args(const gw_gen_view *v, const char *args, size_t len, sipp_buf *out) {
    msg_state *s = state_of(v);
    if (s->open == BLOCK_TOOL)
        block_delta(s, json_pack("{s:s, s:s%}", "type", "input_json_delta", "partial_json", args, len), out);
}

static void am_end(const gw_gen_view *v, sipp_buf *out) {
    msg_state *s = state_of(v);
    if (s->index < 0) open_block(s, BLOCK_TEXT, json_pack("{s:s, s:s}", "type", "text", "text", ""), out);
    close_block(s, out);
    event("message_delta",
          json_pack("{s:{s:s, s:o}, s:o}", "delta", "stop_reason", stop_reason(v), "stop_sequence",
                    stop_sequence(v), "usage", usage_json(v)),
          out);
    event("message_stop", json_object(), out);
}

static void am_fail(const gw_gen_view *v, gw_error_kind kind, const char *msg, sipp_buf *out) {
    gw_sse_json(out, "error", gw_error_json_in(GW_DIALECT_ANTHROPIC, kind, msg));
}

static const gw_format messages_format = GW_EVENT_FORMAT(am, "msg_", NULL, renames);

/* ---- request translation ------------------------------------------------------------------------ */

/* What one turn's content blocks become: its text, thinking and tool calls (assistant), or its
 * text and tool results (user). */
typedef struct turn {
    sipp_buf text;
    sipp_buf thinking;
    json_t *calls;   /* assistant: chat tool_calls */
    json_t *results; /* user: chat tool messages */
    json_t *parts;   /* user, with images: chat content parts (text before the last image), else NULL */
} turn;

/* An image block's source as a chat image part in *out: base64 data of a media type, or with
 * [media] fetch a url source, an http(s) URL the gateway fetches (media_fetch.c). */
static bool source_part(gw_call *call, json_t *src, const char *where, json_t **out) {
    const char *type = json_string_value(json_object_get(src, "type"));
    json_t *media = json_object_get(src, "media_type"), *data = json_object_get(src, "data");
    json_t *url = json_object_get(src, "url");
    bool fetch = call->srv->cfg->media_fetch;
    if (!json_is_object(src) || !type)
        return gw_reply_invalid_field(
            call,
            "'%s.source' must be {\"type\": \"base64\", \"media_type\": \"image/png\", \"data\": \"...\"}",
            where);
    if (strcmp(type, "url") == 0 && !fetch)
        return gw_reply_invalid_field(
            call,
            "'%s.source' is a url source: fetching remote images is off on this server ([media] fetch = "
            "true in its config turns it on); send the image as {\"type\": \"base64\", \"media_type\", "
            "\"data\"}",
            where);
    if (strcmp(type, "url") == 0) {
        if (!json_is_string(url) || !gw_image_url_remote(json_string_value(url)))
            return gw_reply_invalid_field(call, "'%s.source.url' must be the image's http(s) URL", where);
        *out = gw_image_part(json_string_value(url));
        return true;
    }
    if (strcmp(type, "base64") != 0)
        return gw_reply_invalid_field(call, "'%s.source.type' '%s' is not supported; use base64%s", where,
                                      type, fetch ? " or url" : "");
    if (!json_is_string(media))
        return gw_reply_invalid_field(call, "'%s.source.media_type' must be a string such as \"image/png\"",
                                      where);
    if (!json_is_string(data) || !json_string_length(data))
        return gw_reply_invalid_field(call, "'%s.source.data' must be the image as a base64 string", where);
    *out = gw_image_part_base64(json_string_value(media), json_string_value(data));
    return true;
}

/* An image block becomes a chat image part, in its place among the text (media_parts.c). */
static bool image_block(gw_call *call, json_t *b, const char *where, turn *t) {
    json_t *part = NULL;
    if (!source_part(call, json_object_get(b, "source"), where, &part)) return false;
    if (!t->parts) t->parts = json_array();
    gw_parts_add_text(t->parts, t->text.data, t->text.len);
    sipp_buf_free(&t->text);
    json_array_append_new(t->parts, part);
    return true;
}

static bool text_of(gw_call *call, json_t *c, const char *where, sipp_buf *out);

static bool tool_result(gw_call *call, json_t *b, const char *where, turn *t) {
    json_t *id = json_object_get(b, "tool_use_id"), *err = json_object_get(b, "is_error");
    if (!json_is_string(id)) return gw_reply_invalid_field(call, "'%s.tool_use_id' must be a string", where);
    if (err && !json_is_boolean(err))
        return gw_reply_invalid_field(call, "'%s.is_error' must be true or false", where);
    sipp_buf text = {0};
    char inner[FIELD_PATH_SIZE + sizeof ".content"];
    snprintf(inner, sizeof inner, "%s.content", where);
    /* A tool's failure reaches the model as such: chat templates have no flag for it. */
    if (json_is_true(err)) sipp_buf_append(&text, TOOL_ERROR_PREFIX, strlen(TOOL_ERROR_PREFIX));
    json_t *content = json_object_get(b, "content");
    bool ok = !content || json_is_null(content) || text_of(call, content, inner, &text);
    if (ok)
        json_array_append_new(t->results, json_pack("{s:s, s:O, s:s}", "role", "tool", "tool_call_id", id,
                                                    "content", text.data ? text.data : ""));
    sipp_buf_free(&text);
    return ok;
}

static bool tool_use(gw_call *call, json_t *b, const char *where, turn *t) {
    json_t *id = json_object_get(b, "id"), *name = json_object_get(b, "name"),
           *input = json_object_get(b, "input");
    if (!json_is_string(id)) return gw_reply_invalid_field(call, "'%s.id' must be a string", where);
    if (!json_is_string(name)) return gw_reply_invalid_field(call, "'%s.name' must be a string", where);
    if (!json_is_object(input)) return gw_reply_invalid_field(call, "'%s.input' must be an object", where);
    char *args = json_dumps(input, JSON_COMPACT);
    json_array_append_new(t->calls, json_pack("{s:O, s:s, s:{s:O, s:s}}", "id", id, "type", "function",
                                              "function", "name", name, "arguments", args ? args : "{}"));
    free(args);
    return true;
}

/* Content blocks into t; role says which blocks may appear. where names the field. */
static bool blocks(gw_call *call, json_t *c, const char *role, const char *where, turn *t) {
    if (json_is_string(c)) return sipp_buf_append(&t->text, json_string_value(c), json_string_length(c));
    if (!json_is_array(c))
        return gw_reply_invalid_field(call, "'%s' must be a string or an array of content blocks", where);
    size_t k;
    json_t *b;
    json_array_foreach(c, k, b) {
        char here[FIELD_PATH_SIZE];
        snprintf(here, sizeof here, "%s[%zu]", where, k);
        const char *type = json_string_value(json_object_get(b, "type"));
        bool assistant = role && strcmp(role, "assistant") == 0, user = role && strcmp(role, "user") == 0;
        if (!json_is_object(b) || !type)
            return gw_reply_invalid_field(call, "'%s' must be a content block with a \"type\"", here);
        if (json_object_get(b, "cache_control")) gw_ignored_add(call, "cache_control");
        if (assistant && strcmp(type, "thinking") == 0) {
            json_t *th = json_object_get(b, "thinking");
            if (!json_is_string(th))
                return gw_reply_invalid_field(call, "'%s.thinking' must be a string", here);
            sipp_buf_append(&t->thinking, json_string_value(th), json_string_length(th));
        } else if (assistant && strcmp(type, "redacted_thinking") == 0) {
            continue; /* nothing readable to give the template */
        } else if (assistant && strcmp(type, "tool_use") == 0) {
            if (!tool_use(call, b, here, t)) return false;
        } else if (user && strcmp(type, "tool_result") == 0) {
            if (!tool_result(call, b, here, t)) return false;
        } else if (user && strcmp(type, "image") == 0) {
            if (!image_block(call, b, here, t)) return false;
        } else if (strcmp(type, "text") == 0) {
            json_t *tx = json_object_get(b, "text");
            if (!json_is_string(tx)) return gw_reply_invalid_field(call, "'%s.text' must be a string", here);
            sipp_buf_append(&t->text, json_string_value(tx), json_string_length(tx));
        } else {
            return gw_reply_invalid_field(call, "'%s.type' '%s' is not supported here; use text%s blocks",
                                          here, type,
                                          assistant ? ", thinking or tool_use"
                                          : user    ? ", image or tool_result"
                                                    : "");
        }
    }
    return true;
}

/* Text blocks only (system, and a tool result's content). */
static bool text_of(gw_call *call, json_t *c, const char *where, sipp_buf *out) {
    turn t = {0};
    bool ok = blocks(call, c, NULL, where, &t);
    if (ok && t.text.len) sipp_buf_append(out, t.text.data, t.text.len);
    sipp_buf_free(&t.text);
    sipp_buf_free(&t.thinking);
    return ok;
}

static bool add_turn(gw_call *call, json_t *messages, const char *role, json_t *content, const char *where) {
    turn t = {.calls = json_array(), .results = json_array()};
    bool ok = blocks(call, content, role, where, &t);
    if (ok) {
        json_array_extend(messages, t.results); /* tool results answer the calls before them */
        bool has_text = t.text.len > 0 || t.parts || json_array_size(t.results) == 0;
        if (t.parts) gw_parts_add_text(t.parts, t.text.data, t.text.len);
        if (has_text || json_array_size(t.calls)) {
            json_t *m =
                json_pack("{s:s, s:o}", "role", role, "content",
                          t.parts ? json_incref(t.parts) : json_string(t.text.data ? t.text.data : ""));
            if (json_array_size(t.calls)) json_object_set(m, "tool_calls", t.calls);
            if (t.thinking.len) json_object_set_new(m, "reasoning_content", json_string(t.thinking.data));
            json_array_append_new(messages, m);
        }
    }
    json_decref(t.calls);
    json_decref(t.results);
    json_decref(t.parts);
    sipp_buf_free(&t.text);
    sipp_buf_free(&t.thinking);
    return ok;
}

static bool translate_messages(gw_call *call, json_t *root, json_t *chat) {
    json_t *out = json_array();
    json_object_set_new(chat, "messages", out);
    json_t *sys = json_object_get(root, "system");
    if (sys && !json_is_null(sys)) {
        sipp_buf text = {0};
        bool ok = text_of(call, sys, "system", &text);
        if (ok)
            json_array_append_new(
                out, json_pack("{s:s, s:s}", "role", "system", "content", text.data ? text.data : ""));
        sipp_buf_free(&text);
        if (!ok) return false;
    }
    json_t *msgs = json_object_get(root, "messages");
    if (!json_is_array(msgs) || json_array_size(msgs) == 0)
        return gw_reply_invalid_field(
            call, "'messages' must be a non-empty array of {\"role\", \"content\"} objects");
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        const char *role = json_string_value(json_object_get(m, "role"));
        if (!json_is_object(m) || !role ||
            (strcmp(role, "user") != 0 && strcmp(role, "assistant") != 0 && strcmp(role, "system") != 0))
            return gw_reply_invalid_field(
                call, "'messages[%zu].role' must be \"user\", \"assistant\" or \"system\"", i);
        char where[64];
        snprintf(where, sizeof where, "messages[%zu].content", i);
        /* A system message among the turns (Claude Code sends them) stays where it stands, as a chat
         * system message: the template renders it there, or folds it into the system prompt when
         * it only takes one at the start, as llama-server's templates do. */
        if (strcmp(role, "system") == 0) {
            sipp_buf text = {0};
            bool ok = text_of(call, json_object_get(m, "content"), where, &text);
            if (ok)
                json_array_append_new(
                    out, json_pack("{s:s, s:s}", "role", "system", "content", text.data ? text.data : ""));
            sipp_buf_free(&text);
            if (!ok) return false;
            continue;
        }
        if (!add_turn(call, out, role, json_object_get(m, "content"), where)) return false;
    }
    return true;
}

/* A custom tool is a function tool; a server tool (web_search_..., code_execution_..., bash_... and
 * the like) the provider would run, and sipp does not, so it is left out; forcing it is refused.
 * forced is the name tool_choice forces (NULL: none). */
static gw_tool_fate custom_tool(gw_call *call, json_t *t, size_t i, json_t *out, void *forced) {
    const char *type = json_string_value(json_object_get(t, "type"));
    if (!json_is_object(t)) {
        gw_reply_invalid_field(call, "'tools[%zu]' must be an object", i);
        return GW_TOOL_REFUSED;
    }
    if (json_object_get(t, "cache_control")) gw_ignored_add(call, "cache_control");
    if (json_object_get(t, "defer_loading")) gw_ignored_addf(call, "tools[%zu].defer_loading", i);
    if (!type || strcmp(type, "custom") == 0) {
        json_array_append_new(out, gw_function_tool(t, json_object_get(t, "name"), "input_schema", false));
        return GW_TOOL_ADDED;
    }
    const char *name = json_string_value(json_object_get(t, "name"));
    if (name && forced && strcmp(name, forced) == 0) {
        gw_reply_invalid_field(call,
                               "'tool_choice.name' '%s' is a server tool (tools[%zu], %s), "
                               "which this server does not run; force a custom tool",
                               name, i, type);
        return GW_TOOL_REFUSED;
    }
    return GW_TOOL_LEFT_OUT;
}

/* tools -> chat's function tools; tool_choice auto | any | tool | none. */
static bool translate_tools(gw_call *call, json_t *root, json_t *chat) {
    json_t *tc = json_object_get(root, "tool_choice");
    const char *forced = json_string_value(json_object_get(tc, "type")) &&
                                 strcmp(json_string_value(json_object_get(tc, "type")), "tool") == 0
                             ? json_string_value(json_object_get(tc, "name"))
                             : NULL;
    if (!gw_translate_tools(call, json_object_get(root, "tools"), chat,
                            "'tools' must be an array of {\"name\", \"input_schema\"} tools", custom_tool,
                            (void *)forced))
        return false;
    bool parallel = true; /* Anthropic's default */
    if (tc && !json_is_null(tc)) {
        const char *type = json_string_value(json_object_get(tc, "type"));
        json_t *dp = json_object_get(tc, "disable_parallel_tool_use");
        if (!json_is_object(tc) || !type)
            return gw_reply_invalid_field(call, "'tool_choice' must be an object with a \"type\"");
        if (dp && !json_is_boolean(dp))
            return gw_reply_invalid_field(call,
                                          "'tool_choice.disable_parallel_tool_use' must be true or false");
        parallel = !json_is_true(dp);
        if (strcmp(type, "auto") == 0 || strcmp(type, "none") == 0) {
            json_object_set_new(chat, "tool_choice", json_string(type));
        } else if (strcmp(type, "any") == 0) {
            json_object_set_new(chat, "tool_choice", json_string("required"));
        } else if (strcmp(type, "tool") == 0) {
            json_t *name = json_object_get(tc, "name");
            if (!json_is_string(name))
                return gw_reply_invalid_field(call, "'tool_choice.name' must name one of the tools");
            if (!gw_forced_tool_listed(call, chat, json_string_value(name), "tool")) return false;
            json_object_set_new(chat, "tool_choice",
                                json_pack("{s:s, s:{s:O}}", "type", "function", "function", "name", name));
        } else {
            return gw_reply_invalid_field(call, "'tool_choice.type' is '%s'; use auto, any, tool or none",
                                          type);
        }
    }
    if (json_array_size(json_object_get(chat, "tools")))
        json_object_set_new(chat, "parallel_tool_calls", json_boolean(parallel));
    return true;
}

/* The chat's template arguments, made on first use. */
static json_t *template_kwargs(json_t *chat) {
    json_t *kw = json_object_get(chat, "chat_template_kwargs");
    if (!kw) json_object_set_new(chat, "chat_template_kwargs", kw = json_object());
    return kw;
}

/* thinking -> the template's thinking switch and the reasoning budget: enabled (with budget_tokens,
 * the budget), adaptive (thinking on, the model decides how long), disabled. display only says
 * whether the provider would show the thinking: sipp shows what the model wrote. */
static bool translate_thinking(gw_call *call, json_t *root, json_t *chat) {
    json_t *th = json_object_get(root, "thinking");
    if (!th || json_is_null(th)) return true;
    const char *type = json_string_value(json_object_get(th, "type"));
    if (!json_is_object(th) || !type)
        return gw_reply_invalid_field(call,
                                      "'thinking' must be {\"type\": \"enabled\", \"budget_tokens\": N}, "
                                      "{\"type\": \"adaptive\"} or {\"type\": \"disabled\"}");
    if (json_object_get(th, "display")) gw_ignored_add(call, "thinking.display");
    if (strcmp(type, "disabled") == 0) {
        json_object_set_new(template_kwargs(chat), "enable_thinking", json_false());
        return true;
    }
    if (strcmp(type, "adaptive") == 0) {
        json_object_set_new(template_kwargs(chat), "enable_thinking", json_true());
        return true;
    }
    if (strcmp(type, "enabled") != 0)
        return gw_reply_invalid_field(call, "'thinking.type' is '%s'; use enabled, adaptive or disabled",
                                      type);
    json_t *budget = json_object_get(th, "budget_tokens");
    if (!json_is_integer(budget) || json_integer_value(budget) < 1)
        return gw_reply_invalid_field(call, "'thinking.budget_tokens' must be a positive integer");
    json_object_set_new(template_kwargs(chat), "enable_thinking", json_true());
    json_object_set(chat, "thinking_budget_tokens", budget);
    return true;
}

/* output_config.effort as the template's reasoning effort: low, medium, high; xhigh and max are
 * high, the most a template takes. */
static bool translate_effort(gw_call *call, json_t *v, json_t *chat) {
    static const char *const levels[][2] = {
        {"low", "low"}, {"medium", "medium"}, {"high", "high"}, {"xhigh", "high"}, {"max", "high"}};
    const char *e = json_string_value(v), *to = NULL;
    for (size_t i = 0; e && i < sizeof levels / sizeof levels[0] && !to; i++)
        if (strcmp(e, levels[i][0]) == 0) to = levels[i][1];
    if (!to)
        return gw_reply_invalid_field(call, "'output_config.effort' must be low, medium, high, xhigh or max");
    json_object_set_new(template_kwargs(chat), "reasoning_effort", json_string(to));
    return true;
}

/* output_config's keys; its format (if any) in *format, which output_format must not also give. */
static bool translate_output_config(gw_call *call, json_t *oc, json_t *chat, json_t **format) {
    if (!json_is_object(oc))
        return gw_reply_invalid_field(call,
                                      "'output_config' must be an object such as {\"effort\": \"high\"}");
    const char *key;
    json_t *v;
    json_object_foreach(oc, key, v) {
        if (strcmp(key, "effort") == 0) {
            if (!translate_effort(call, v, chat)) return false;
        } else if (strcmp(key, "format") == 0) {
            if (*format && !json_is_null(*format))
                return gw_reply_invalid_field(
                    call, "give either 'output_config.format' or 'output_format', not both");
            *format = v;
        } else if (strcmp(key, "task_budget") == 0) {
            gw_ignored_add(call, "output_config.task_budget");
        } else {
            return gw_reply_invalid_field(
                call, "'output_config.%s' is not supported; only effort, format and task_budget are", key);
        }
    }
    return true;
}

/* output_config: effort is the template's reasoning effort, format a JSON schema the answer must
 * follow; task_budget is advisory (a countdown the provider shows its model) and ignored.
 * output_format is the older form of output_config.format. */
static bool translate_output(gw_call *call, json_t *root, json_t *chat) {
    json_t *oc = json_object_get(root, "output_config"), *format = json_object_get(root, "output_format");
    if (oc && !json_is_null(oc) && !translate_output_config(call, oc, chat, &format)) return false;
    if (!format || json_is_null(format)) return true;
    const char *type = json_string_value(json_object_get(format, "type"));
    json_t *schema = json_object_get(format, "schema");
    if (!type || strcmp(type, "json_schema") != 0 || !json_is_object(schema))
        return gw_reply_invalid_field(call, "'output_config.format' must be {\"type\": \"json_schema\", "
                                            "\"schema\": {...}}");
    json_object_set_new(chat, "response_format",
                        json_pack("{s:s, s:{s:s, s:O}}", "type", "json_schema", "json_schema", "name",
                                  "output", "schema", schema));
    return true;
}

/* context_management edits: clearing old thinking only drops what chat templates already drop
 * from past turns, so it changes nothing here and is ignored; clearing tool uses would change what
 * the model is given and is refused. */
static bool check_context_management(gw_call *call, json_t *root) {
    json_t *cm = json_object_get(root, "context_management");
    if (!cm || json_is_null(cm)) return true;
    json_t *edits = json_object_get(cm, "edits");
    if (!json_is_object(cm) || (edits && !json_is_array(edits)))
        return gw_reply_invalid_field(call, "'context_management' must be {\"edits\": [...]}");
    size_t i;
    json_t *e;
    json_array_foreach(edits, i, e) {
        const char *type = json_string_value(json_object_get(e, "type"));
        if (!type || strncmp(type, CLEAR_THINKING_PREFIX, strlen(CLEAR_THINKING_PREFIX)) != 0)
            return gw_reply_invalid_field(
                call,
                "'context_management.edits[%zu].type' '%s' is not supported: it would change what the model "
                "is given; only clear_thinking edits are accepted (leave the others out)",
                i, type ? type : "?");
    }
    gw_ignored_add(call, "context_management");
    return true;
}

/* Anthropic's own ranges and shapes. */
static bool check_options(gw_call *call, json_t *root) {
    json_t *t = json_object_get(root, "temperature");
    if (json_is_number(t) && (json_number_value(t) < 0 || json_number_value(t) > ANTHROPIC_TEMPERATURE_MAX))
        return gw_reply_invalid_field(call, "'temperature' is %g; it must be in [0, 1]",
                                      json_number_value(t));
    json_t *md = json_object_get(root, "metadata");
    if (md && !json_is_null(md) && !json_is_object(md))
        return gw_reply_invalid_field(call, "'metadata' must be an object");
    json_t *ss = json_object_get(root, "stop_sequences");
    if (ss && !json_is_null(ss) && !json_is_array(ss))
        return gw_reply_invalid_field(call, "'stop_sequences' must be an array of strings");
    return true;
}

static json_t *translate(gw_call *call, json_t *root, bool counting) {
    if (counting && json_object_get(root, "max_tokens")) {
        gw_reply_invalid_field(call, "'max_tokens' is not a field of count_tokens; leave it out");
        return NULL;
    }
    json_t *chat = json_object();
    if (!gw_fields_check(call, root, gw_fields_messages, API_NAME) || !check_options(call, root) ||
        !check_context_management(call, root) || !translate_messages(call, root, chat) ||
        !translate_tools(call, root, chat) || !translate_thinking(call, root, chat) ||
        !translate_output(call, root, chat)) {
        json_decref(chat);
        return NULL;
    }
    gw_copy_field(root, "model", chat, NULL);
    if (counting) return chat;
    json_t *mt = json_object_get(root, "max_tokens");
    if (!mt || json_is_null(mt)) {
        gw_reply_invalid_field(
            call, "'max_tokens' is missing: Messages requests must give the most tokens to generate");
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
    gw_dispatch_run(
        call, chat,
        &(gw_dispatch){.api = GW_API_CHAT, .fmt = &messages_format, .route = s, .route_free = free});
}

/* The prompt's tokens as a generation would count them: the request is rendered and tokenized by
 * the engine exactly as for /v1/messages (template, tools, thinking switch) and stopped after one
 * token. Its prefill also warms the slot's KV for the request that usually follows. */
void gw_route_messages_count(gw_call *call) {
    json_t *root = gw_body_object(call);
    if (!root) return;
    json_t *chat = translate(call, root, true);
    json_decref(root);
    if (chat)
        gw_dispatch_run(call, chat,
                        &(gw_dispatch){.api = GW_API_CHAT, .fmt = &messages_format, .count_only = true});
}
