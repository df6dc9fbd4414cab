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
typedef struct gw_gen_view {
    gw_call *call;
    gw_target *target;
    const gw_gen *gen;
    sipp_request *req; /* finished when end/whole are called */
    const char *text;  /* whole text, valid UTF-8: set when end/whole are called */
    const char *id;    /* "chatcmpl-..." etc. */
    long long created;
} gw_gen_view;

struct gw_format {
    const char *id_prefix;
    void (*begin)(const gw_gen_view *v, sipp_buf *out);
    void (*piece)(const gw_gen_view *v, const char *text, size_t len, sipp_buf *out);
    void (*end)(const gw_gen_view *v, sipp_buf *out);
    void (*fail)(const gw_gen_view *v, gw_error_kind kind, const char *message, sipp_buf *out);
    json_t *(*whole)(const gw_gen_view *v);
};

/* Runs g on a ready local target and replies: a stream when g->stream, else one JSON body. Takes
 * over g's contents. */
void gw_generate(gw_call *call, gw_target *target, gw_gen *g, const gw_format *fmt);

#endif
