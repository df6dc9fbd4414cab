/*
 * chat_request.h: chat requests as the engine uses them (internal).
 *
 *   chat_request.c  a request's chat (chat_json or sipp_message[]) checked field by field and
 *                   rendered through the model's (or the request's) template into a chat_plan;
 *                   the model's parsed templates, cached; the public parser and schema functions
 *   chat_bridge.cpp llama.cpp's chat library behind a C interface (chat_bridge.h)
 */
#ifndef SIPP_CHAT_REQUEST_H
#define SIPP_CHAT_REQUEST_H

#include "chat/chat_bridge.h"
#include "model/mmproj.h"
#include "sipp.h"

/* What the engine needs of a request's chat besides the plan. */
typedef struct chat_request {
    chat_plan *plan;
    char *grammar; /* the grammar to enforce (the plan's, or a prompt's grammar/json_schema) */
    bool grammar_lazy;
    bool grammar_prefill;
    int thinking_budget;     /* -1: none */
    sipp_media_bytes *media; /* the chat's images and audio, in the order of their markers (chat_media.c) */
    size_t n_media;
    char warning[SIPP_ERROR_SIZE];
} chat_request;

/* Plans a request: a chat (p->chat_json or p->messages) is rendered into out->plan; a prompt with
 * grammar or json_schema gets its grammar. Nothing to do (a plain prompt) leaves *out zeroed.
 * Errors are SIPP_ERR_INVALID_ARGUMENT naming the field, in err. */
sipp_status chat_request_prepare(sipp_model *m, const sipp_request_params *p,
                                 const sipp_schema_limits *limits, chat_request *out, char *err);
void chat_request_clear(chat_request *c);

/* The public parser (sipp_chat_parser_new) for a plan; NULL plan: not a chat. */
sipp_status sipp_chat_parser_new_from_plan(const chat_plan *plan, sipp_chat_parser **out, char *errbuf);

#endif
