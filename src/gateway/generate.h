/*
 * generate.h: a generation on a local target, rendered by a route's gw_format (generate.c).
 */
#ifndef SIPP_GATEWAY_GENERATE_H
#define SIPP_GATEWAY_GENERATE_H

#include "gateway/connection.h"
#include "gateway/request_parse.h"
#include "gateway/server.h"

/* How a route renders a generation: as SSE chunks and as one JSON body. */
typedef struct gw_format gw_format;
/* One choice of a generation (gw_gen.n of them). Set when end/whole are called, except req. */
typedef struct gw_choice {
    sipp_request *req;
    sipp_chat_parser *parser; /* chats: parses the answer as it streams */
    const char *text;         /* the whole text, valid UTF-8 */
    json_t *message;        /* chats: {"role":"assistant", "content", "reasoning_content"?, "tool_calls"?} */
    json_t *logprobs;       /* the tokens' logprobs (OpenAI's content[] entries), or NULL */
    const char *finish;     /* "stop", "length" or "tool_calls" */
    size_t n_logprobs_sent; /* streaming: logprob entries already sent */
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
    /* A remote target's answer translated back (translate.c): req is NULL, and these are the
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
     * for chats delta is one parsed OpenAI chat delta ({"content"}, {"reasoning_content"} or
     * {"tool_calls":[{"index","id","type","function":{"name","arguments"}}]}), for prompts
     * {"text"}; logprobs holds the entries of the tokens since the last call (or NULL). Both are
     * borrowed. */
    void (*delta)(const gw_gen_view *v, size_t index, json_t *delta, json_t *logprobs, sipp_buf *out);
    void (*end)(const gw_gen_view *v, sipp_buf *out);
    void (*fail)(const gw_gen_view *v, gw_error_kind kind, const char *message, sipp_buf *out);
    json_t *(*whole)(const gw_gen_view *v);
};

/* Runs g on a ready local target and replies: a stream when g->stream, else one JSON body. Takes
 * over g's contents. */
void gw_generate(gw_call *call, gw_target *target, gw_gen *g, const gw_format *fmt);

#endif
