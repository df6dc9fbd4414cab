/*
 * format.h: what a route renders a generation with (a gw_format), and the view of the generation
 * it is given (format.c); the generation itself is local (generate.c) or remote (relay.c).
 */
#ifndef SIPP_GATEWAY_FORMAT_H
#define SIPP_GATEWAY_FORMAT_H

#include "gateway/request_parse.h"
#include "gateway/server.h"

typedef struct gw_call gw_call; /* a request being answered (http/http.h) */

/* How a route renders a generation: as SSE chunks and as one JSON body. */
typedef struct gw_format gw_format;

/* What a route that runs tools itself does between model turns (gw_format.next_turn). */
typedef enum gw_turn {
    GW_TURN_FINAL, /* the answer is final: end (or whole) renders it */
    GW_TURN_AGAIN, /* call next_turn again once what it rendered is sent (a stream's progress events) */
    GW_TURN_NEXT   /* run *chat on the same target as the next turn, rendered by the same format */
} gw_turn;

/* A tool call of an answer: id, name and arguments (a JSON text). */
typedef struct gw_tool_call {
    const char *id;
    const char *name;
    const char *arguments;
} gw_tool_call;

/* A chat's finished answer, typed (built once, at the end: from the chat parser for a local target,
 * from the upstream's message or chunks for a remote one). Owns its strings. */
typedef struct gw_message {
    bool set;        /* a chat's answer (false: a raw prompt's, which has only text) */
    char *content;   /* NULL: the answer's content is null (a remote answer with only tool calls) */
    char *reasoning; /* NULL when none */
    gw_tool_call *calls;
    size_t n_calls;
} gw_message;

/* One choice of a generation (gw_gen.n of them). Set when end/whole are called, except req. */
typedef struct gw_choice {
    sipp_request *req;
    sipp_chat_parser *parser; /* chats: parses the answer as it streams */
    const char *text;         /* the whole text, valid UTF-8 */
    gw_message message;       /* chats: the parsed answer */
    json_t *logprobs;         /* the tokens' logprobs (OpenAI's content[] entries), or NULL */
    const char *finish;       /* "stop", "length" or "tool_calls" */
    size_t n_logprobs_sent;   /* streaming: logprob entries already sent */
} gw_choice;

typedef struct gw_gen_view {
    gw_call *call;
    gw_target *target;
    const gw_gen *gen;
    sipp_request *req; /* choice 0's; finished when end/whole are called */
    const char *text;  /* choice 0's whole text, valid UTF-8: set when end/whole are called */
    const char *id;    /* "chatcmpl-..." etc. */
    long long created;
    gw_choice *choices; /* gen->n of them */
    size_t n_choices;
    /* A remote target's answer translated back (relay.c): req is NULL, and these are the
     * upstream's counts. */
    bool remote;
    sipp_request_stats remote_stats;
} gw_gen_view;

struct gw_format {
    const char *id_prefix;
    const char *content_type;        /* NULL: text/event-stream */
    const struct gw_rename *renames; /* translated APIs: field names in engine errors (rename.h) */
    void (*begin)(const gw_gen_view *v, sipp_buf *out);
    void (*piece)(const gw_gen_view *v, const char *text, size_t len, sipp_buf *out);
    /* Optional. When set, the stream is rendered choice by choice through delta instead of piece:
     * for chats delta is one parsed delta (content, reasoning, a tool call's start or arguments:
     * sipp_chat_delta, typed), for prompts a delta of content alone, the prompt's text; logprobs
     * holds the entries of the tokens since the last call (or NULL). Both are borrowed. */
    void (*delta)(const gw_gen_view *v, size_t index, const sipp_chat_delta *delta, json_t *logprobs,
                  sipp_buf *out);
    /* Typed events, for the APIs that are not OpenAI's (Responses, Messages, Ollama), set instead of
     * piece and delta: the stream of choice 0 (those APIs ask for one) as answer text, reasoning
     * text, and tool calls, each started (id and name; name may be NULL) and then given its
     * arguments in fragments. text is never empty and text[len] is '\0'. Local and remote targets
     * give the same events (generate.c, relay.c); a tool call ends where the next event or the end
     * begins, and the usage and finish come with end (gw_view_stats, choices[0].finish). */
    void (*text)(const gw_gen_view *v, const char *text, size_t len, sipp_buf *out);
    void (*reasoning)(const gw_gen_view *v, const char *text, size_t len, sipp_buf *out);
    void (*tool_start)(const gw_gen_view *v, const char *id, const char *name, sipp_buf *out);
    void (*tool_args)(const gw_gen_view *v, const char *args, size_t len, sipp_buf *out);
    void (*end)(const gw_gen_view *v, sipp_buf *out);
    void (*fail)(const gw_gen_view *v, gw_error_kind kind, const char *message, sipp_buf *out);
    json_t *(*whole)(const gw_gen_view *v);
    /* Optional: called when choice 0's turn ended well (streamed: after its last event; not
     * streamed: with out a scratch buffer), before end or whole. A route that runs tools on the
     * model's behalf (Responses' MCP tools) runs them here and returns GW_TURN_NEXT with *chat the
     * next turn's chat body (a new reference): the conversation with the calls and their results.
     * The local targets' path (generate.c) takes it; a remote target's answer is final. */
    gw_turn (*next_turn)(const gw_gen_view *v, sipp_buf *out, json_t **chat);
    /* Optional: replies with the finished answer not streamed itself, for a body that is not always
     * JSON (the transcription route's text/plain); NULL: whole's JSON with 200. */
    void (*reply)(const gw_gen_view *v);
};

/* A route's format from its callbacks, named by one prefix P, so that an API's renderer is written
 * once, as functions: P_begin, P_piece, P_delta, P_end and P_whole for OpenAI-shaped output (fail
 * given, as formats share it), or P_begin, P_text, P_reasoning, P_tool_start, P_tool_args, P_end,
 * P_fail and P_whole for typed events. content_type NULL is text/event-stream. */
#define GW_DELTA_FORMAT(P, prefix, fail_fn)                                                                  \
    {                                                                                                        \
        .id_prefix = (prefix), .begin = P##_begin, .piece = P##_piece, .delta = P##_delta, .end = P##_end,   \
        .fail = (fail_fn), .whole = P##_whole                                                                \
    }
#define GW_EVENT_FORMAT(P, prefix, type, renames_)                                                           \
    {                                                                                                        \
        .id_prefix = (prefix), .content_type = (type), .renames = (renames_), .begin = P##_begin,            \
        .text = P##_text, .reasoning = P##_reasoning, .tool_start = P##_tool_start,                          \
        .tool_args = P##_tool_args, .end = P##_end, .fail = P##_fail, .whole = P##_whole                     \
    }

/* Renders one parsed delta of choice index (borrowed, as gw_format.delta takes it) with fmt:
 * through delta, or as its typed events. */
void gw_render_delta(const gw_format *fmt, const gw_gen_view *v, size_t index, const sipp_chat_delta *delta,
                     json_t *logprobs, sipp_buf *out);

/* The finished answer: from a chat parser (its content, reasoning and calls); as plain text (a
 * chat whose answer did not follow its template's format); from an OpenAI assistant message (a
 * remote target's, borrowed). False when out of memory. gw_message_clear frees it. */
bool gw_message_from_parser(gw_message *m, const sipp_chat_parser *p);
bool gw_message_plain(gw_message *m, const char *text);
bool gw_message_from_openai(gw_message *m, json_t *message);
/* Adds a tool call (copies of the strings; NULL is ""). */
bool gw_message_add_call(gw_message *m, const char *id, const char *name, const char *arguments);
void gw_message_clear(gw_message *m);
/* The answer as an OpenAI assistant message (new reference): {"role":"assistant", "content",
 * "reasoning_content" when there is some, "tool_calls" when there are some}. */
json_t *gw_message_json(const gw_message *m);

/* A generation's counts: the engine's, or a remote target's. */
void gw_view_stats(const gw_gen_view *v, sipp_request_stats *stats);
/* The stop string that ended it (NULL when none, and for remote targets, which do not say). */
const char *gw_view_stop_string(const gw_gen_view *v);

/* Choice 0's finished answer (when end or whole are called), read once here so that no route reads
 * the chat message's JSON: text is its content (a raw prompt's whole text), "" when none; reasoning
 * its reasoning text, NULL when none; n_calls how many tool calls it made. Borrowed from v. */
typedef struct gw_answer {
    const char *text;
    const char *reasoning;
    size_t n_calls;
} gw_answer;
/* Its tool call k (< n_calls): id, name and arguments (JSON text); each NULL when the answer (a
 * remote target's) lacks it. Borrowed from v. */
void gw_view_answer(const gw_gen_view *v, gw_answer *a);
void gw_view_call(const gw_gen_view *v, size_t k, gw_tool_call *c);
/* A tool call's arguments as a JSON object (new reference): {} when they are not one (an answer cut
 * off by its token limit). */
json_t *gw_arguments_object(const char *args);

#endif
