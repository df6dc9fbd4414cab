/*
 * generate.c: one generation on a local target, for every route that generates text.
 *
 * The routes differ only in how they render (OpenAI chunks, OpenAI bodies, sipp-native events);
 * that is a gw_format. Everything else is here: turning a gw_gen into sipp_request_params,
 * submitting, and then either
 *   - waiting for the end on the connection's thread, cancelling if the client goes away, and
 *     replying with one JSON body, or
 *   - replying with a stream whose pull reads the engine's text with sipp_request_read (no
 *     callback on the engine thread, so a slow client never slows the engine) and renders it.
 * A stream that is closed before its request finished (the client went away, or the server is
 * stopping) cancels the request; sipp_request_free waits for the engine to let go of it, which
 * frees the slot within one engine step.
 *
 * The request's deadline is what is left of request_timeout_seconds; past it the engine ends the
 * request as timed out, which is a 504 (or an error event when the stream has already begun).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway/generate.h"
#include "gateway/metrics.h"

#define GW_READ_CHUNK 4096
#define GW_WAIT_SLICE_MS 100
#define GW_ID_SIZE 96

typedef enum { PHASE_BEGIN, PHASE_BODY, PHASE_DONE } phase;

typedef struct gen_stream {
    gw_stream base;
    gw_call *call;
    gw_target *target;
    gw_gen gen;
    const gw_format *fmt;
    sipp_request *req;
    gw_gen_view view;
    char id[GW_ID_SIZE];
    phase phase;
    bool recorded;
    bool stopping; /* the server is stopping: the request was cancelled to end the stream */
    char buf[GW_READ_CHUNK];
} gen_stream;

/* Sets the view's whole text once the request has finished (valid UTF-8, as sipp.h promises). */
static void set_text(gen_stream *gs) { gs->view.text = sipp_request_text(gs->req); }

static void record(gw_call *call, gw_target *t, sipp_request *r) {
    sipp_request_stats s;
    sipp_request_get_stats(r, &s);
    gw_metrics_tokens(call->srv->metrics, t->index, s.prompt_tokens, s.cached_tokens, s.generated_tokens,
                      s.generated_tokens > 0 ? s.ttft_ms / 1e3 : -1);
}

/* The error a finished-but-failed request maps to. */
static gw_error_kind failure_kind(gw_call *call, sipp_request *r) {
    sipp_status st = sipp_request_status(r);
    if (st == SIPP_ERR_TIMEOUT) return GW_E_TIMEOUT;
    if (st == SIPP_ERR_CONTEXT_FULL && sipp_request_finish_reason(r) == SIPP_FINISH_ERROR) return GW_E_CONTEXT_LENGTH;
    if (st == SIPP_ERR_CANCELLED || st == SIPP_ERR_CLOSED) return GW_E_NOT_READY;
    return gw_error_from_status(st);
}

static bool gs_pull(gw_stream *s, sipp_buf *out, int wait_ms) {
    gen_stream *gs = (gen_stream *)s;
    switch (gs->phase) {
    case PHASE_BEGIN:
        gs->fmt->begin(&gs->view, out);
        gs->phase = PHASE_BODY;
        return true;
    case PHASE_DONE:
        return false;
    case PHASE_BODY:
        break;
    }
    bool finished = false;
    size_t n = sipp_request_read(gs->req, gs->buf, sizeof gs->buf, wait_ms, &finished);
    if (n) gs->fmt->piece(&gs->view, gs->buf, n, out);
    if (!finished) return true;
    set_text(gs);
    sipp_finish_reason fr = sipp_request_finish_reason(gs->req);
    if (fr == SIPP_FINISH_STOP || fr == SIPP_FINISH_LENGTH) {
        gs->fmt->end(&gs->view, out);
    } else {
        gw_error_kind kind = failure_kind(gs->call, gs->req);
        gs->call->error_code = gw_error_code(kind);
        gs->fmt->fail(&gs->view, kind,
                      gs->stopping ? "the server is shutting down: shutdown_timeout_seconds passed" : sipp_request_error(gs->req),
                      out);
    }
    record(gs->call, gs->target, gs->req);
    gs->recorded = true;
    gs->phase = PHASE_DONE;
    return false;
}

static void gs_stop(gw_stream *s) {
    gen_stream *gs = (gen_stream *)s;
    gs->stopping = true;
    if (gs->req) sipp_request_cancel(gs->req);
}

static void gs_close(gw_stream *s) {
    gen_stream *gs = (gen_stream *)s;
    if (gs->req) {
        sipp_request_cancel(gs->req);
        sipp_request_wait(gs->req, -1);
        if (!gs->recorded) record(gs->call, gs->target, gs->req);
        sipp_request_free(gs->req);
    }
    gw_gen_free(&gs->gen);
    free(gs);
}

static void to_params(const gw_gen *g, int timeout_ms, sipp_request_params *p) {
    *p = sipp_request_default_params();
    p->prompt = g->messages ? NULL : g->prompt;
    p->messages = g->messages;
    p->n_messages = g->n_messages;
    p->max_tokens = g->max_tokens;
    p->sampling = g->sampling;
    p->stop = g->n_stop ? g->stop : NULL;
    p->n_stop = g->n_stop;
    p->ignore_eos = g->ignore_eos;
    p->context_key = g->context_key;
    p->timeout_ms = timeout_ms;
}

void gw_generate(gw_call *call, gw_target *t, gw_gen *g, const gw_format *fmt) {
    gen_stream *gs = calloc(1, sizeof *gs);
    if (!gs) {
        gw_gen_free(g);
        gw_reply_error(call, GW_E_INTERNAL, "out of memory");
        return;
    }
    gs->gen = *g; /* the stream owns the request body from here on */
    memset(g, 0, sizeof *g);
    gs->call = call;
    gs->target = t;
    gs->fmt = fmt;
    gs->base.pull = gs_pull;
    gs->base.stop = gs_stop;
    gs->base.close = gs_close;
    snprintf(gs->id, sizeof gs->id, "%s%s", fmt->id_prefix, call->request_id);
    gs->view = (gw_gen_view){.call = call, .target = t, .gen = &gs->gen, .id = gs->id, .created = (long long)time(NULL)};

    sipp_request_params p;
    to_params(&gs->gen, gw_call_ms_left(call), &p);
    sipp_status st = sipp_engine_submit(t->engine, &p, &gs->req);
    if (st != SIPP_OK) {
        gw_error_kind kind = gw_error_from_status(st);
        gw_reply_error(call, kind, "model '%s': %s", t->cfg->name, sipp_engine_last_error(t->engine));
        gs_close(&gs->base);
        return;
    }
    gs->view.req = gs->req;
    if (gs->gen.stream) {
        gw_reply_stream(call, "text/event-stream", &gs->base);
        return;
    }
    while (sipp_request_wait(gs->req, GW_WAIT_SLICE_MS) != SIPP_OK)
        if (gw_call_abandoned(call)) sipp_request_cancel(gs->req);
    sipp_finish_reason fr = sipp_request_finish_reason(gs->req);
    if (fr == SIPP_FINISH_STOP || fr == SIPP_FINISH_LENGTH) {
        set_text(gs);
        gw_reply_json(call, 200, fmt->whole(&gs->view));
    } else {
        gw_error_kind kind = failure_kind(call, gs->req);
        gw_reply_error(call, kind, "model '%s': %s", t->cfg->name, sipp_request_error(gs->req));
    }
    gs_close(&gs->base);
}
