/*
 * request.c: a request as its submitter sees it. The engine thread produces text and results; any
 * other thread reads, waits and cancels through these functions.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/request.h"

#define PIECES_FIRST_CAP 64 /* piece ends a request holds before its first growth */

sipp_request_params sipp_request_default_params(void) {
    sipp_request_params p = {
        .max_tokens = 256,
        .logprobs = -1,
        .sampling = {.temperature = 0.8f,
                     .top_k = 40,
                     .top_p = 0.95f,
                     .min_p = 0.05f,
                     .repeat_penalty = 1.0f,
                     .repeat_last_n = 64,
                     .seed = SIPP_SEED_RANDOM},
    };
    return p;
}

const char *sipp_finish_reason_name(sipp_finish_reason r) {
    switch (r) {
    case SIPP_FINISH_STOP: return "stop";
    case SIPP_FINISH_LENGTH: return "length";
    case SIPP_FINISH_CANCELLED: return "cancelled";
    case SIPP_FINISH_ERROR: return "error";
    default: return "";
    }
}

sipp_request *sipp_request_alloc(const sipp_request_owner *owner, const sipp_request_params *p) {
    sipp_request *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->owner = *owner;
    r->engine = owner->engine;
    r->max_tokens = p->max_tokens;
    r->sampling = p->sampling;
    r->ignore_eos = p->ignore_eos;
    r->on_piece = p->on_piece;
    r->on_finish = p->on_finish;
    r->user = p->user;
    r->top_logprobs = p->logprobs;
    r->chat.thinking_budget = -1;
    r->t_submit = sipp_now_ms();
    r->deadline_ms = p->timeout_ms > 0 ? r->t_submit + p->timeout_ms : 0;
    atomic_init(&r->cancel, false);
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    bool ok = sipp_output_init(&r->out, p->stop, p->n_stop);
    if (p->context_key && *p->context_key) ok = ok && (r->context_key = strdup(p->context_key));
    if (!ok) {
        sipp_request_free(r);
        return NULL;
    }
    return r;
}

/* Records where the piece just appended to r->text ends (r->mu held). Without memory the piece runs
 * into the next one, which only merges two pieces for sipp_request_read_piece. */
static void note_piece_end(sipp_request *r) {
    if (r->n_pieces == r->cap_pieces) {
        size_t cap = r->cap_pieces ? 2 * r->cap_pieces : PIECES_FIRST_CAP;
        size_t *bigger = realloc(r->piece_ends, cap * sizeof *bigger);
        if (!bigger) return;
        r->piece_ends = bigger;
        r->cap_pieces = cap;
    }
    r->piece_ends[r->n_pieces++] = r->text.len;
}

bool sipp_request_publish(sipp_request *r, const char *text, size_t len) {
    if (len == 0) return true;
    pthread_mutex_lock(&r->mu);
    sipp_buf_append(&r->text, text, len);
    note_piece_end(r);
    /* Only a reader needs a piece. Waking a caller who waits for the end (sipp_request_wait) on every
     * token would put a third runnable thread beside the two spinning compute threads of a 2-core
     * machine, once per token, for nothing. */
    if (r->text_waiters > 0) pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    return r->on_piece ? r->on_piece(text, len, r->user) : true;
}

void sipp_request_finish(sipp_request *r, sipp_finish_reason reason, sipp_status status, const char *error) {
    double now = sipp_now_ms();
    sipp_request_stats *s = &r->stats;
    s->generated_tokens = r->n_generated;
    s->total_ms = now - r->t_submit;
    s->queue_ms = (r->t_start ? r->t_start : now) - r->t_submit;
    if (r->t_first) {
        s->ttft_ms = r->t_first - r->t_submit;
        s->prefill_ms = r->t_first - r->t_start;
        s->decode_ms = now - r->t_first;
        int evaluated = s->prompt_tokens - s->cached_tokens;
        s->prefill_tokens_per_s = s->prefill_ms > 0 ? evaluated / (s->prefill_ms / 1e3) : 0;
        /* The first token comes out of the prefill; decode speed counts the ones after it. */
        s->decode_tokens_per_s =
            s->decode_ms > 0 && r->n_generated > 1 ? (r->n_generated - 1) / (s->decode_ms / 1e3) : 0;
    }
    if (r->on_finish) r->on_finish(reason, r->user); /* before waiters wake: they may free r */
    pthread_mutex_lock(&r->mu);
    r->finish = reason;
    r->status = status;
    if (error) sipp_strlcpy(r->error, error, sizeof r->error);
    r->t_end = now;
    r->finished = true;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

void sipp_request_cancel(sipp_request *r) {
    if (!r) return;
    pthread_mutex_lock(&r->mu);
    /* While the request is unfinished the engine is alive (it finishes every request before it
     * goes away), so waking it is safe here and only here. */
    if (!r->finished) {
        atomic_store(&r->cancel, true);
        if (r->engine) r->owner.wake(r->engine);
    }
    pthread_mutex_unlock(&r->mu);
}

static bool is_finished(const sipp_request *r) { return r->finished; }
static bool has_text_or_finished(const sipp_request *r) { return r->finished || r->text.len > r->read_pos; }

/* Waits on r->cv (r->mu held) until cond(r) holds or timeout_ms passes (-1 = forever). */
static bool wait_locked(sipp_request *r, bool (*cond)(const sipp_request *), int timeout_ms) {
    struct timespec ts;
    if (timeout_ms >= 0) sipp_deadline_in(&ts, CLOCK_REALTIME, timeout_ms);
    int rc = 0;
    bool for_text = cond == has_text_or_finished;
    r->text_waiters += for_text;
    while (!cond(r) && rc != ETIMEDOUT)
        rc = timeout_ms < 0 ? pthread_cond_wait(&r->cv, &r->mu) : pthread_cond_timedwait(&r->cv, &r->mu, &ts);
    r->text_waiters -= for_text;
    return cond(r);
}

/* The same for a stepped engine, which has no thread to make progress while its caller waits: the
 * waiter runs the steps itself. An unfinished request's engine is alive, so it is touched only
 * while cond(r) is false (both conditions hold once the request has finished). */
static bool wait_stepping(sipp_request *r, bool (*cond)(const sipp_request *), int timeout_ms) {
    double end = sipp_now_ms() + timeout_ms;
    while (!cond(r) && (timeout_ms < 0 || sipp_now_ms() < end)) {
        pthread_mutex_unlock(&r->mu);
        bool busy = false;
        sipp_engine_step(r->engine, &busy);
        pthread_mutex_lock(&r->mu);
        if (!busy) break; /* nothing queued or running: no step can change the request */
    }
    return cond(r);
}

static bool wait_for(sipp_request *r, bool (*cond)(const sipp_request *), int timeout_ms) {
    if (!cond(r) && r->engine && r->owner.stepped) return wait_stepping(r, cond, timeout_ms);
    return wait_locked(r, cond, timeout_ms);
}

sipp_status sipp_request_wait(sipp_request *r, int timeout_ms) {
    pthread_mutex_lock(&r->mu);
    bool done = wait_for(r, is_finished, timeout_ms);
    pthread_mutex_unlock(&r->mu);
    return done ? SIPP_OK : SIPP_ERR_TIMEOUT;
}

/* What sipp_request_read and sipp_request_read_piece share: text from read_pos, up to the end of the
 * piece it is in when one_piece, cut at a character boundary to fit cap. */
static size_t read_text(sipp_request *r, char *buf, size_t cap, int timeout_ms, bool *finished,
                        bool one_piece) {
    pthread_mutex_lock(&r->mu);
    wait_for(r, has_text_or_finished, timeout_ms);
    while (r->next_piece < r->n_pieces && r->piece_ends[r->next_piece] <= r->read_pos)
        r->next_piece++;
    size_t end = one_piece && r->next_piece < r->n_pieces ? r->piece_ends[r->next_piece] : r->text.len;
    size_t avail = end - r->read_pos, n = avail < cap ? avail : cap;
    if (n < avail) n = sipp_utf8_complete_prefix(r->text.data + r->read_pos, n);
    if (n) memcpy(buf, r->text.data + r->read_pos, n);
    r->read_pos += n;
    if (finished) *finished = r->finished && r->read_pos == r->text.len;
    pthread_mutex_unlock(&r->mu);
    return n;
}

size_t sipp_request_read(sipp_request *r, char *buf, size_t cap, int timeout_ms, bool *finished) {
    return read_text(r, buf, cap, timeout_ms, finished, false);
}

size_t sipp_request_read_piece(sipp_request *r, char *buf, size_t cap, int timeout_ms, bool *finished) {
    return read_text(r, buf, cap, timeout_ms, finished, true);
}

sipp_finish_reason sipp_request_finish_reason(const sipp_request *r) {
    return r->finished ? r->finish : SIPP_FINISH_NONE;
}
sipp_status sipp_request_status(const sipp_request *r) { return r->status; }
const char *sipp_request_error(const sipp_request *r) { return r->error; }
const char *sipp_request_text(const sipp_request *r) { return r->text.data ? r->text.data : ""; }
const char *sipp_request_stop_string(const sipp_request *r) { return r->out.matched; }
void sipp_request_get_stats(const sipp_request *r, sipp_request_stats *s) { *s = r->stats; }

void sipp_request_free(sipp_request *r) {
    if (!r) return;
    if (r->engine) {
        sipp_request_cancel(r);
        sipp_request_wait(r, -1);
    }
    free(r->prompt);
    free(r->lora_scales);
    sipp_media_prompt_free(r->media);
    free(r->context_key);
    chat_request_clear(&r->chat);
    if (r->grammar) llama_sampler_free(r->grammar);
    free(r->logprobs);
    sipp_output_free(&r->out);
    sipp_buf_free(&r->emit);
    sipp_buf_free(&r->text);
    free(r->piece_ends);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

const char *sipp_request_warning(const sipp_request *r) { return r ? r->chat.warning : ""; }
