/*
 * generate.c: one generation on a local target, for every route that generates text.
 *
 * The routes differ only in how they render (OpenAI chunks, OpenAI bodies, sipp-native events);
 * that is a gw_format. Everything else is here: turning a gw_gen into sipp_request_params,
 * submitting, and then either
 *   - waiting for the end on the connection's thread, cancelling if the client goes away, and
 *     replying with one JSON body, or
 *   - replying with a stream whose pull reads the engine's text with sipp_request_read_piece (no
 *     callback on the engine thread, so a slow client never slows the engine) and renders it: one
 *     event per piece the engine published (a token's text), as OpenAI streams one chunk per
 *     token, also when the connection's thread runs late on a busy machine.
 * A stream that is closed before its request finished (the client went away, or the server is
 * stopping) cancels the request; sipp_request_free waits for the engine to let go of it, which
 * frees the slot within one engine step.
 *
 * The request's deadline is what is left of request_timeout_seconds; past it the engine ends the
 * request as timed out, which is a 504 (or an error event when the stream has already begun).
 *
 * Chats. A chat is given to the engine as its OpenAI body (gw_gen.chat, as chat_json), and each
 * choice's answer is parsed by libsipp's chat parser (llama.cpp's parser for the template's format)
 * as it streams: a format with a delta callback receives parsed deltas (content, reasoning_content,
 * tool_calls) with the logprobs of the tokens since the last one, a format of typed events the
 * same deltas as events (format.c); at the end every choice has its
 * parsed message and a finish_reason that is "tool_calls" when the answer called tools. The
 * non-streamed answer runs the same parser over the whole text, so the deltas of a stream add up
 * to the message of the same request not streamed.
 *
 * n > 1 is n requests with the same prompt, side by side, so n may not exceed the target's slots
 * (parallel). The engine reads their prompt once: the first slot evaluates it, the others wait for
 * it and share its cells (scheduler.c), warm or cold.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway/field_names.h"
#include "gateway/kinds/kinds.h"
#include "gateway/metrics.h"
#include "util/logprobs_json.h"

#define GW_READ_CHUNK 4096
#define GW_WAIT_SLICE_MS 100
#define GW_ID_SIZE 96
#define GW_FIELD_NAME_SIZE 64
#define COUNT_MAX_TOKENS 1 /* a counting run stops after its prompt and one token */

/* TURN: between two turns of a route that runs tools itself (gw_format.next_turn). */
typedef enum { PHASE_BEGIN, PHASE_BODY, PHASE_TURN, PHASE_DONE } phase;

typedef struct gen_stream {
    gw_stream base;
    gw_call *call;
    gw_target *target;
    gw_gen gen;
    const gw_format *fmt;
    char *chat_json;
    gw_choice *choices;
    size_t n;
    bool *done; /* streaming: the choice's end has been rendered */
    gw_gen_view view;
    char id[GW_ID_SIZE];
    phase phase;
    bool recorded;
    bool stopping; /* the server is stopping: the requests were cancelled to end the stream */
    char buf[GW_READ_CHUNK];
} gen_stream;

static void record(gw_call *call, gw_target *t, sipp_request *r) {
    sipp_request_stats s;
    sipp_request_get_stats(r, &s);
    gw_metrics_tokens(call->srv->metrics, t->index, s.prompt_tokens, s.cached_tokens, s.generated_tokens,
                      s.generated_tokens > 0 ? s.ttft_ms / 1e3 : -1);
    gw_metrics_media(call->srv->metrics, t->index, s.media_tokens, s.media_encoded, s.encode_ms / 1e3);
}

static void record_all(gen_stream *gs) {
    if (gs->recorded) return;
    for (size_t i = 0; i < gs->n; i++)
        if (gs->choices[i].req) record(gs->call, gs->target, gs->choices[i].req);
    gs->recorded = true;
}

/* The error a finished-but-failed request maps to. */
static gw_error_kind failure_kind(gw_call *call, sipp_request *r) {
    sipp_status st = sipp_request_status(r);
    if (st == SIPP_ERR_TIMEOUT) return GW_E_TIMEOUT;
    if (st == SIPP_ERR_CONTEXT_FULL && sipp_request_finish_reason(r) == SIPP_FINISH_ERROR)
        return GW_E_CONTEXT_LENGTH;
    if (st == SIPP_ERR_CANCELLED || st == SIPP_ERR_CLOSED) return GW_E_NOT_READY;
    return gw_error_from_status(st);
}

static bool succeeded(sipp_request *r) {
    sipp_finish_reason fr = sipp_request_finish_reason(r);
    return fr == SIPP_FINISH_STOP || fr == SIPP_FINISH_LENGTH;
}

/* The logprob entries of request r from token `from` on, in OpenAI's shape (NULL when none);
 * *next: the `from` of the next call. */
static json_t *logprobs_from(sipp_request *r, size_t from, size_t *next) {
    sipp_logprob_entry *e = NULL;
    size_t n = 0;
    *next = sipp_request_logprobs(r, from, &e, &n);
    json_t *j = e ? sipp_logprobs_json(e, n) : NULL;
    sipp_free(e);
    return j;
}

/* The logprob entries of choice c not yet handed out (new reference, NULL when none). */
static json_t *new_logprobs(gw_choice *c) {
    return logprobs_from(c->req, c->n_logprobs_sent, &c->n_logprobs_sent);
}

/* Whether fmt renders parsed deltas (else raw pieces of text). */
static bool by_delta(const gw_format *fmt) { return fmt->delta || fmt->text; }

/* What a parsed delta of choice i is rendered into; logprobs go with the first delta of a feed. */
typedef struct delta_sink {
    gen_stream *gs;
    size_t i;
    sipp_buf *out;
    json_t *logprobs; /* the tokens' since the last delta (NULL once handed on) */
    size_t n;         /* deltas rendered */
} delta_sink;

static void render_one(const sipp_chat_delta *d, void *user) {
    delta_sink *k = user;
    gw_render_delta(k->gs->fmt, &k->gs->view, k->i, d, k->n++ == 0 ? k->logprobs : NULL, k->out);
}

/* Feeds text to a chat choice's parser and hands each parsed delta to the format, typed. A final
 * text the parser cannot read leaves the message as plain content (the model did not follow its
 * format); a raw prompt's text is one delta of content. */
static void feed(gen_stream *gs, size_t i, const char *text, size_t len, bool is_final, sipp_buf *out) {
    gw_choice *c = &gs->choices[i];
    delta_sink k = {.gs = gs, .i = i, .out = out};
    if (out) k.logprobs = new_logprobs(c);
    if (c->parser && sipp_chat_parser_feed_deltas(c->parser, text, len, is_final, out ? render_one : NULL,
                                                  &k) != SIPP_OK) {
        sipp_chat_parser_free(c->parser);
        c->parser = NULL; /* from here on the answer is plain text */
    }
    if (out && !c->parser && len) {
        char *plain = strndup(text, len);
        if (plain) render_one(&(sipp_chat_delta){.content = plain, .tool_index = -1}, &k);
        free(plain);
    }
    if (k.logprobs && k.n == 0) /* logprobs of tokens whose text is not out yet */
        c->n_logprobs_sent -= json_array_size(k.logprobs);
    json_decref(k.logprobs);
}

/* Sets a finished choice's text, message, finish_reason and logprobs. */
static void finalize(gen_stream *gs, gw_choice *c) {
    const char *t = sipp_request_text(c->req);
    c->text = t; /* valid UTF-8, as sipp.h promises */
    c->finish = sipp_finish_reason_name(sipp_request_finish_reason(c->req));
    if (gs->gen.chat) {
        if (c->parser)
            gw_message_from_parser(&c->message, c->parser);
        else
            gw_message_plain(&c->message, c->text);
        if (c->parser && sipp_chat_parser_n_tool_calls(c->parser) > 0 &&
            sipp_request_finish_reason(c->req) == SIPP_FINISH_STOP)
            c->finish = "tool_calls";
    }
    json_decref(c->logprobs);
    size_t all;
    c->logprobs = logprobs_from(c->req, 0, &all);
}

static void finalize_all(gen_stream *gs) {
    for (size_t i = 0; i < gs->n; i++)
        finalize(gs, &gs->choices[i]);
    gs->view.text = gs->choices[0].text;
}

/* The first choice that failed, or NULL. */
static gw_choice *failed_choice(gen_stream *gs) {
    for (size_t i = 0; i < gs->n; i++)
        if (!succeeded(gs->choices[i].req)) return &gs->choices[i];
    return NULL;
}

static sipp_status submit_one(gw_target *t, gen_stream *gs, sipp_request_params *p, sipp_request **req);
static void to_params(const gen_stream *gs, size_t i, int timeout_ms, sipp_request_params *p);

/* The next turn of choice 0 (chat stolen): the finished request is recorded and freed, and chat
 * submitted in its place. False with err when it could not be. */
static bool next_request(gen_stream *gs, json_t *chat, char *err, size_t cap) {
    record_all(gs);
    gw_choice *c = &gs->choices[0];
    sipp_request_free(c->req);
    sipp_chat_parser_free(c->parser);
    gw_message_clear(&c->message);
    json_decref(c->logprobs);
    memset(c, 0, sizeof *c);
    gs->done[0] = false;
    gs->recorded = false;
    json_decref(gs->gen.chat);
    gs->gen.chat = chat;
    /* The route may give the next turn less room (Responses: max_output_tokens spans the turns). */
    json_t *max = json_object_get(chat, "max_tokens");
    if (json_is_integer(max) && json_integer_value(max) > 0 && json_integer_value(max) < gs->gen.max_tokens)
        gs->gen.max_tokens = (int)json_integer_value(max);
    free(gs->chat_json);
    gs->chat_json = json_dumps(chat, JSON_COMPACT);
    if (!gs->chat_json) {
        snprintf(err, cap, "out of memory");
        return false;
    }
    sipp_request_params p;
    to_params(gs, 0, gw_call_ms_left(gs->call), &p);
    sipp_status st = submit_one(gs->target, gs, &p, &c->req);
    if (st == SIPP_OK)
        st = sipp_chat_parser_new(c->req, &c->parser, err);
    else
        snprintf(err, cap, "%s", sipp_engine_last_error(gs->target->engine));
    gs->view.req = c->req;
    return st == SIPP_OK;
}

static void stream_fail(gen_stream *gs, gw_error_kind kind, const char *message, sipp_buf *out) {
    gs->call->error_code = gw_error_code(kind);
    gs->fmt->fail(&gs->view, kind, message, out);
    record_all(gs);
    gs->phase = PHASE_DONE;
}

static void stream_end(gen_stream *gs, sipp_buf *out) {
    gs->fmt->end(&gs->view, out);
    record_all(gs);
    gs->phase = PHASE_DONE;
}

/* Between turns: what the route did, and whether the stream goes on (true) or ends here. */
static bool stream_turn(gen_stream *gs, sipp_buf *out) {
    json_t *chat = NULL;
    gw_turn t = gs->fmt->next_turn(&gs->view, out, &chat);
    gs->phase = t == GW_TURN_AGAIN ? PHASE_TURN : PHASE_BODY;
    if (t != GW_TURN_NEXT) return t == GW_TURN_AGAIN;
    char err[SIPP_ERROR_SIZE] = "";
    if (!next_request(gs, chat, err, sizeof err)) stream_fail(gs, GW_E_INTERNAL, err, out);
    return true;
}

/* The end of a turn: the route's next turn (true: the stream goes on), or the end or failure. */
static bool stream_finish(gen_stream *gs, sipp_buf *out) {
    finalize_all(gs);
    gw_choice *bad = failed_choice(gs);
    if (!bad && gs->fmt->next_turn && stream_turn(gs, out)) return true;
    if (!bad) {
        stream_end(gs, out);
    } else {
        gw_error_kind kind = failure_kind(gs->call, bad->req);
        gs->call->error_code = gw_error_code(kind);
        gs->fmt->fail(&gs->view, kind,
                      gs->stopping ? "the server is shutting down: shutdown_timeout_seconds passed"
                                   : sipp_request_error(bad->req),
                      out);
        record_all(gs);
        gs->phase = PHASE_DONE;
    }
    return false;
}

/* Reads what choice i has; returns whether it gave anything. */
static bool pull_choice(gen_stream *gs, size_t i, sipp_buf *out, int wait_ms) {
    gw_choice *c = &gs->choices[i];
    bool finished = false;
    size_t n = sipp_request_read_piece(c->req, gs->buf, sizeof gs->buf, wait_ms, &finished);
    if (n) {
        {
            if (by_delta(gs->fmt))
                feed(gs, i, gs->buf, n, false, out);
            else
                gs->fmt->piece(&gs->view, gs->buf, n, out);
        }
    }
    if (finished) {
        if (by_delta(gs->fmt) && succeeded(c->req)) feed(gs, i, "", 0, true, out);
        gs->done[i] = true;
    }
    return n > 0 || finished;
}

static bool gs_pull(gw_stream *s, sipp_buf *out, int wait_ms) {
    gen_stream *gs = (gen_stream *)s;
    switch (gs->phase) {
    case PHASE_BEGIN:
        gs->fmt->begin(&gs->view, out);
        gs->phase = PHASE_BODY;
        return true;
    case PHASE_DONE: return false;
    case PHASE_TURN:
        if (stream_turn(gs, out)) return gs->phase != PHASE_DONE;
        stream_end(gs, out);
        return false;
    case PHASE_BODY: break;
    }
    /* Every choice that has something gives it; if none had, wait on the first still running. */
    bool any = false;
    size_t first = gs->n;
    for (size_t i = 0; i < gs->n; i++) {
        if (gs->done[i]) continue;
        if (first == gs->n) first = i;
        any = pull_choice(gs, i, out, 0) || any;
    }
    if (first == gs->n) return stream_finish(gs, out) && gs->phase != PHASE_DONE;
    if (!any) pull_choice(gs, first, out, wait_ms);
    for (size_t i = 0; i < gs->n; i++)
        if (!gs->done[i]) return true;
    return stream_finish(gs, out) && gs->phase != PHASE_DONE;
}

static void gs_stop(gw_stream *s) {
    gen_stream *gs = (gen_stream *)s;
    gs->stopping = true;
    for (size_t i = 0; i < gs->n; i++)
        if (gs->choices[i].req) sipp_request_cancel(gs->choices[i].req);
}

static void gs_close(gw_stream *s) {
    gen_stream *gs = (gen_stream *)s;
    for (size_t i = 0; i < gs->n; i++)
        if (gs->choices[i].req) sipp_request_cancel(gs->choices[i].req);
    for (size_t i = 0; i < gs->n; i++) {
        gw_choice *c = &gs->choices[i];
        if (c->req) {
            sipp_request_wait(c->req, -1);
            if (!gs->recorded) record(gs->call, gs->target, c->req);
            sipp_request_free(c->req);
        }
        sipp_chat_parser_free(c->parser);
        gw_message_clear(&c->message);
        json_decref(c->logprobs);
    }
    free(gs->choices);
    free(gs->done);
    free(gs->chat_json);
    gw_gen_free(&gs->gen);
    free(gs);
}

static void to_params(const gen_stream *gs, size_t i, int timeout_ms, sipp_request_params *p) {
    const gw_gen *g = &gs->gen;
    *p = sipp_request_default_params();
    p->prompt = g->chat || g->messages || g->prompt_tokens ? NULL : g->prompt;
    p->tokens = g->prompt_tokens; /* infill: the prompt built from its parts */
    p->n_tokens = g->n_prompt_tokens;
    p->chat_json = gs->chat_json;
    p->chat_template = gs->target->cfg->chat_template;
    p->max_tokens = g->max_tokens;
    p->sampling = g->sampling;
    /* n choices of one request differ by their seed when it is fixed (else each draws its own). */
    if (g->sampling.seed != SIPP_SEED_RANDOM && i > 0) p->sampling.seed = (uint32_t)(g->sampling.seed + i);
    p->stop = g->n_stop ? g->stop : NULL;
    p->n_stop = g->n_stop;
    p->ignore_eos = g->ignore_eos;
    p->context_key = g->context_key;
    p->timeout_ms = timeout_ms;
    p->grammar = g->chat ? NULL : g->grammar;
    p->json_schema = g->chat ? NULL : g->json_schema;
    p->logprobs = g->logprobs;
    p->lora = g->n_lora ? g->lora : NULL;
    p->n_lora = g->n_lora;
}

/* n within the target's slots, and the chat as the engine takes it. False after replying. */
static bool check_choices(gw_call *call, gw_target *t, gen_stream *gs) {
    sipp_engine_stats es;
    sipp_engine_get_stats(t->engine, &es);
    if (gs->gen.n > es.slots) {
        gw_reply_error(call, GW_E_INVALID_FIELD,
                       "'n' is %d but model '%s' decodes at most %d sequences at once (its parallel); ask "
                       "for at most %d "
                       "or raise the target's parallel",
                       gs->gen.n, t->cfg->name, es.slots, es.slots);
        return false;
    }
    if (gs->gen.n > 1 && gs->gen.context_key) {
        gw_reply_error(call, GW_E_INVALID_FIELD,
                       "'n' > 1 cannot be combined with 'context_key' (one slot per key)");
        return false;
    }
    if (gs->gen.chat && !(gs->chat_json = json_dumps(gs->gen.chat, JSON_COMPACT))) {
        gw_reply_error(call, GW_E_INTERNAL, "out of memory");
        return false;
    }
    return true;
}

/* A chat whose template refuses it (a system message among the turns, which some templates take
 * only at the start) is tried once more with those messages folded into the system prompt, as
 * llama-server's templates do with a system prompt they cannot place. */
static sipp_status submit_one(gw_target *t, gen_stream *gs, sipp_request_params *p, sipp_request **req) {
    sipp_status st = sipp_engine_submit(t->engine, p, req);
    if (st != SIPP_ERR_INVALID_ARGUMENT || !gs->gen.chat || !gw_chat_fold_system(gs->gen.chat)) return st;
    char *json = json_dumps(gs->gen.chat, JSON_COMPACT);
    if (!json) return st;
    free(gs->chat_json);
    gs->chat_json = json;
    p->chat_json = json;
    return sipp_engine_submit(t->engine, p, req);
}

static bool submit_all(gw_call *call, gw_target *t, gen_stream *gs) {
    int timeout = gw_call_ms_left(call);
    for (size_t i = 0; i < gs->n; i++) {
        sipp_request_params p;
        to_params(gs, i, timeout, &p);
        gw_choice *c = &gs->choices[i];
        sipp_status st = submit_one(t, gs, &p, &c->req);
        char err[SIPP_ERROR_SIZE] = "";
        if (st == SIPP_OK && gs->gen.chat) st = sipp_chat_parser_new(c->req, &c->parser, err);
        if (st != SIPP_OK) {
            if (!*err) sipp_strlcpy(err, sipp_engine_last_error(t->engine), sizeof err);
            gw_rename_fields(err, sizeof err, gs->fmt->renames); /* in the client's API's names */
            gw_reply_error(call, gw_error_from_status(st), "model '%s': %s", t->cfg->name, err);
            return false;
        }
    }
    gs->view.req = gs->choices[0].req;
    return true;
}

/* The target's max_tokens: the default of a request that gives none, and the ceiling of one that
 * asks for more, which is then named in sipp-ignored by its own API's field ('max_output_tokens',
 * 'options.num_predict'). Agents rarely send a limit, and a runaway generation would otherwise run
 * to the end of the context. */
static void cap_output(gw_call *call, const gw_target *t, gw_gen *g, const gw_format *fmt) {
    int cap = t->cfg->max_tokens;
    if (cap <= 0 || (g->max_tokens > 0 && g->max_tokens <= cap)) return;
    if (g->max_tokens > 0) {
        char name[GW_FIELD_NAME_SIZE] = "'max_tokens'";
        if (!json_object_get(g->root, "max_tokens") && json_object_get(g->root, "max_completion_tokens"))
            snprintf(name, sizeof name, "'max_completion_tokens'");
        if (fmt->renames) gw_rename_fields(name, sizeof name, fmt->renames);
        size_t n = strlen(name);
        if (n >= 2 && name[0] == '\'' && name[n - 1] == '\'') {
            name[n - 1] = '\0';
            gw_ignored_add(call, name + 1);
        }
    }
    g->max_tokens = cap;
}

/* Waits for every choice (cancelling them when the client goes away); false with the reply when one
 * failed. */
static bool wait_all(gen_stream *gs) {
    for (size_t i = 0; i < gs->n; i++)
        while (sipp_request_wait(gs->choices[i].req, GW_WAIT_SLICE_MS) != SIPP_OK)
            if (gw_call_abandoned(gs->call))
                for (size_t k = 0; k < gs->n; k++)
                    sipp_request_cancel(gs->choices[k].req);
    gw_choice *bad = failed_choice(gs);
    if (!bad) return true;
    gw_reply_error(gs->call, failure_kind(gs->call, bad->req), "model '%s': %s", gs->target->cfg->name,
                   sipp_request_error(bad->req));
    return false;
}

/* The route's next turn of a finished answer (not streamed): NULL when the answer is final. */
static json_t *whole_turn(gen_stream *gs) {
    if (!gs->fmt->next_turn) return NULL;
    sipp_buf scratch = {0};
    json_t *chat = NULL;
    gw_turn t;
    while ((t = gs->fmt->next_turn(&gs->view, &scratch, &chat)) == GW_TURN_AGAIN)
        scratch.len = 0;
    sipp_buf_free(&scratch);
    return t == GW_TURN_NEXT ? chat : NULL;
}

/* A request not streamed: every turn waited for, then one reply. */
static void reply_whole(gen_stream *gs) {
    for (;;) {
        if (!wait_all(gs)) return;
        for (size_t i = 0; i < gs->n; i++) {
            const char *text = sipp_request_text(gs->choices[i].req);
            feed(gs, i, text, strlen(text), true, NULL);
        }
        finalize_all(gs);
        json_t *chat = whole_turn(gs);
        if (!chat) break;
        char err[SIPP_ERROR_SIZE] = "";
        if (!next_request(gs, chat, err, sizeof err)) {
            gw_reply_error(gs->call, GW_E_INTERNAL, "model '%s': %s", gs->target->cfg->name, err);
            return;
        }
    }
    if (gs->fmt->reply)
        gs->fmt->reply(&gs->view);
    else
        gw_reply_json(gs->call, 200, gs->fmt->whole(&gs->view));
}

void gw_generate(gw_call *call, gw_target *t, gw_gen *g, const gw_format *fmt) {
    cap_output(call, t, g, fmt);
    gen_stream *gs = calloc(1, sizeof *gs);
    size_t n = g->n > 0 ? (size_t)g->n : 1;
    if (gs) {
        gs->choices = calloc(n, sizeof *gs->choices);
        gs->done = calloc(n, sizeof *gs->done);
    }
    if (!gs || !gs->choices || !gs->done) {
        if (gs) {
            free(gs->choices);
            free(gs->done);
            free(gs);
        }
        gw_gen_free(g);
        gw_reply_error(call, GW_E_INTERNAL, "out of memory");
        return;
    }
    gs->n = n;
    gs->gen = *g; /* the stream owns the request body from here on */
    memset(g, 0, sizeof *g);
    gs->call = call;
    gs->target = t;
    gs->fmt = fmt;
    gs->base.pull = gs_pull;
    gs->base.stop = gs_stop;
    gs->base.close = gs_close;
    snprintf(gs->id, sizeof gs->id, "%s%s", fmt->id_prefix, call->request_id);
    gs->view = (gw_gen_view){.call = call,
                             .target = t,
                             .gen = &gs->gen,
                             .id = gs->id,
                             .created = (long long)time(NULL),
                             .choices = gs->choices,
                             .n_choices = n};
    if (!check_choices(call, t, gs) || !submit_all(call, t, gs)) {
        gs_close(&gs->base);
        return;
    }
    if (gs->gen.stream) {
        gw_reply_stream(call, fmt->content_type ? fmt->content_type : "text/event-stream", &gs->base);
        return;
    }
    reply_whole(gs);
    gs_close(&gs->base);
}

/* ---- counting a prompt's tokens (Messages' count_tokens) ------------------------------------- */

/* Waits for a counting run (one token) and replies with its prompt's length. */
static void count_reply(gw_call *call, gw_target *t, sipp_request *r) {
    while (sipp_request_wait(r, GW_WAIT_SLICE_MS) != SIPP_OK)
        if (gw_call_abandoned(call)) sipp_request_cancel(r);
    sipp_request_stats stats;
    sipp_request_get_stats(r, &stats);
    sipp_finish_reason fr = sipp_request_finish_reason(r);
    if (fr == SIPP_FINISH_STOP || fr == SIPP_FINISH_LENGTH)
        gw_reply_json(call, 200, json_pack("{s:i}", "input_tokens", stats.prompt_tokens));
    else
        gw_reply_error(call,
                       sipp_request_status(r) == SIPP_ERR_CONTEXT_FULL
                           ? GW_E_CONTEXT_LENGTH
                           : gw_error_from_status(sipp_request_status(r)),
                       "model '%s': %s", t->cfg->name, sipp_request_error(r));
}

/* A prompt longer than the context is counted all the same (an agent learns how much to trim): the
 * count, the context, and that it does not fit, in fields Anthropic's shape leaves room for. */
static bool count_past_context(gw_call *call, gw_target *t, const sipp_request_params *p) {
    int n = 0, ctx = 0;
    if (sipp_engine_count_prompt(t->engine, p, &n, &ctx) != SIPP_OK || n < ctx) return false;
    gw_reply_json(
        call, 200,
        json_pack("{s:i, s:i, s:b}", "input_tokens", n, "context_window", ctx, "exceeds_context_window", 1));
    return true;
}

/* Submits the counting run of chat_json (and again with the system turns folded when the template
 * wants them first, as generate.c does), then replies. */
static void count_run(gw_call *call, gw_target *t, gw_gen *g, char *chat_json, const gw_rename *renames) {
    sipp_request_params p = sipp_request_default_params();
    p.chat_json = chat_json;
    p.chat_template = t->cfg->chat_template;
    p.max_tokens = COUNT_MAX_TOKENS;
    p.timeout_ms = gw_call_ms_left(call);
    sipp_request *r = NULL;
    char *folded = NULL;
    sipp_status st = sipp_engine_submit(t->engine, &p, &r);
    if (st == SIPP_ERR_INVALID_ARGUMENT && gw_chat_fold_system(g->chat)) {
        p.chat_json = folded = json_dumps(g->chat, JSON_COMPACT);
        st = folded ? sipp_engine_submit(t->engine, &p, &r) : st;
    }
    if (st == SIPP_OK) {
        count_reply(call, t, r);
        sipp_request_free(r);
    } else if (st != SIPP_ERR_CONTEXT_FULL || !count_past_context(call, t, &p)) {
        char err[SIPP_ERROR_SIZE];
        sipp_strlcpy(err, sipp_engine_last_error(t->engine), sizeof err);
        gw_rename_fields(err, sizeof err, renames);
        gw_reply_error(call, gw_error_from_status(st), "model '%s': %s", t->cfg->name, err);
    }
    free(folded);
}

void gw_count_tokens(gw_call *call, gw_target *t, gw_gen *g, const gw_rename *renames) {
    char *chat_json = json_dumps(g->chat, JSON_COMPACT);
    if (!chat_json) {
        gw_reply_error(call, GW_E_INTERNAL, "out of memory");
        return;
    }
    count_run(call, t, g, chat_json, renames);
    free(chat_json);
}
