/*
 * transcription.c: OpenAI's /v1/audio/transcriptions and /v1/audio/translations on a target whose
 * kind transcribes clips itself (kinds/whisper.c: a whisper.cpp model, through libsipp's
 * transcriber).
 *
 * The form's fields are checked against their table (api/fields.c, gw_fields_whisper): OpenAI's
 * file, model, language, prompt, response_format (json, text, verbose_json, srt, vtt),
 * temperature, timestamp_granularities[] (segment, and word with verbose_json, as OpenAI asks) and
 * stream, and whisper-server's decoding knobs (temperature_inc, beam_size, best_of, entropy_thold,
 * logprob_thold, no_speech_thold). Decoding defaults are whisper-cli's (sipp.h), so a request with
 * none of them gives the transcript `sipp transcribe` and whisper-cli give. The answer is
 * sipp_transcript_render's bytes, the same as `sipp transcribe --format F` prints.
 *
 * The clip is transcribed on a thread of its own while the connection's thread waits, so that a
 * client that goes away cancels it (whisper's abort callback, through sipp_transcribe_params.cancel)
 * in both forms: waiting for one body, or streaming. stream=true (json or text) starts its reply
 * with the first segment (a clip that fails before it, as bad audio does, is a plain 400), and sends
 * each segment as it is decoded as a transcript.text.delta event, then transcript.text.done with the whole
 * text and the clip's duration as usage, then "data: [DONE]", as OpenAI's streamed transcriptions and
 * llama-server do. [limits] max_audio_seconds is checked from the clip's header before it is
 * decoded, and the clip's decoded size is held from [limits] media_decoded_budget_mb (shared with
 * the chats' images and clips) while it is decoded and transcribed: past it, a 429 (try again).
 *
 * Errors name the field: bytes that are not audio, a truncated clip, zero samples, a clip over the
 * limit are 400s naming 'file'; an unknown language names 'language'. The gateway keeps serving.
 */
#include "gateway/api/api.h"

#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway/fleet/fleet.h"
#include "gateway/http/http.h"
#include "gateway/kinds/kinds.h"

#define FILE_FIELD "file"
#define JSON_TYPE "application/json"
#define TEXT_TYPE "text/plain; charset=utf-8"
#define SSE_TYPE "text/event-stream"
#define WAIT_SLICE_MS 100 /* how often a waiting call looks whether its client went away */
#define LANGUAGE_SIZE 36
#define NUMBER_SIZE 64
#define MAX_DECODERS 8 /* whisper.cpp's WHISPER_MAX_DECODERS: beam_size and best_of at most */

/* One request: what the form asked, and the run on its own thread. The stream's base comes first
 * so that a gw_stream * is a job *. */
typedef struct stt_job {
    gw_stream base;
    gw_call *call;
    gw_target *t;
    unsigned char *clip; /* a copy: a streamed answer outlives the request body */
    size_t clip_len;
    char language[LANGUAGE_SIZE];
    char *prompt;
    sipp_transcribe_params p;
    sipp_transcript_format format;
    bool stream, translate;
    volatile int cancel;
    pthread_t thread;
    bool started;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    sipp_buf events; /* streamed: what the next pull sends */
    int n_deltas;    /* segments sent as events */
    bool finished;
    sipp_status status;
    char err[SIPP_ERROR_SIZE];
    sipp_transcript *tr;
} stt_job;

bool gw_transcription_served(const gw_target *t) { return gw_kind_of(t)->transcribe != NULL; }

/* ---- the form ----------------------------------------------------------------------------------- */

/* A number field of the form and the member of sipp_transcribe_params it sets. */
typedef struct number_field {
    const char *name;
    bool integer;
    double min, max;
    size_t offset;
} number_field;

static const number_field numbers[] = {
    {"temperature", false, 0, 1, offsetof(sipp_transcribe_params, temperature)},
    {"temperature_inc", false, 0, 1, offsetof(sipp_transcribe_params, temperature_inc)},
    {"entropy_thold", false, 0, 100, offsetof(sipp_transcribe_params, entropy_thold)},
    {"logprob_thold", false, -100, 0, offsetof(sipp_transcribe_params, logprob_thold)},
    {"no_speech_thold", false, 0, 1, offsetof(sipp_transcribe_params, no_speech_thold)},
    {"beam_size", true, 1, MAX_DECODERS, offsetof(sipp_transcribe_params, beam_size)},
    {"best_of", true, 1, MAX_DECODERS, offsetof(sipp_transcribe_params, best_of)},
};

static const char *field(json_t *fields, const char *name) {
    return json_string_value(json_object_get(fields, name));
}

static bool parse_numbers(gw_call *call, json_t *fields, sipp_transcribe_params *p) {
    for (size_t i = 0; i < sizeof numbers / sizeof numbers[0]; i++) {
        const number_field *nf = &numbers[i];
        const char *s = field(fields, nf->name);
        if (!s) continue;
        char *end;
        double v = strtod(s, &end);
        if (!*s || *end || !isfinite(v) || v < nf->min || v > nf->max || (nf->integer && v != floor(v)))
            return gw_reply_invalid_field(call, "'%s' is '%.*s'; give %s from %g to %g", nf->name,
                                          NUMBER_SIZE, s, nf->integer ? "a whole number" : "a number",
                                          nf->min, nf->max);
        char *at = (char *)p + nf->offset;
        if (nf->integer)
            *(int *)at = (int)v;
        else
            *(float *)at = (float)v;
    }
    return true;
}

/* timestamp_granularities[]: segment (always there) and word, which OpenAI gives in verbose_json. */
static bool parse_granularities(gw_call *call, json_t *fields, stt_job *j) {
    json_t *g = json_object_get(fields, "timestamp_granularities[]");
    if (!g) g = json_object_get(fields, "timestamp_granularities");
    json_t *list = json_is_array(g) ? json_incref(g) : g ? json_pack("[O]", g) : json_array();
    size_t i;
    json_t *v;
    bool ok = true;
    json_array_foreach(list, i, v) {
        const char *s = json_string_value(v);
        if (s && strcmp(s, "word") == 0)
            j->p.word_timestamps = true;
        else if (!s || strcmp(s, "segment") != 0)
            ok =
                gw_reply_invalid_field(call, "'timestamp_granularities[]' holds '%.*s'; give segment or word",
                                       NUMBER_SIZE, s ? s : "");
        if (!ok) break;
    }
    json_decref(list);
    if (ok && j->p.word_timestamps && j->format != SIPP_TRANSCRIPT_VERBOSE_JSON)
        ok = gw_reply_invalid_field(call,
                                    "'timestamp_granularities[]' word needs response_format verbose_json, "
                                    "which carries the words' times");
    return ok;
}

static bool parse_format_and_stream(gw_call *call, json_t *fields, stt_job *j) {
    const char *f = field(fields, "response_format"), *stream = field(fields, "stream");
    if (f && sipp_transcript_format_parse(f, &j->format) != SIPP_OK)
        return gw_reply_invalid_field(
            call, "'response_format' is '%.*s'; use json, text, verbose_json, srt or vtt", NUMBER_SIZE, f);
    if (stream && strcmp(stream, "true") != 0 && strcmp(stream, "false") != 0)
        return gw_reply_invalid_field(call, "'stream' is '%.*s'; give true or false", NUMBER_SIZE, stream);
    j->stream = stream && strcmp(stream, "true") == 0;
    if (j->stream && j->format != SIPP_TRANSCRIPT_JSON && j->format != SIPP_TRANSCRIPT_TEXT)
        return gw_reply_invalid_field(call,
                                      "'stream' sends the text as events, so it takes response_format json "
                                      "or text; leave stream out for verbose_json, srt and vtt");
    return true;
}

static bool parse_text_fields(gw_call *call, json_t *fields, stt_job *j) {
    const char *lang = field(fields, "language"), *prompt = field(fields, "prompt");
    if (lang && (!*lang || strlen(lang) >= sizeof j->language))
        return gw_reply_invalid_field(call, "'language' must be a language code such as \"en\" (ISO-639-1)");
    if (lang) memcpy(j->language, lang, strlen(lang) + 1);
    j->p.language = *j->language ? j->language : NULL;
    if (prompt && *prompt && !(j->prompt = strdup(prompt))) {
        gw_reply_error(call, GW_E_INTERNAL, "out of memory");
        return false;
    }
    j->p.prompt = j->prompt;
    return true;
}

/* The clip: there and not empty (what it holds is the decoder's to judge). */
static bool take_clip(gw_call *call, const gw_form *form, stt_job *j) {
    const gw_form_part *file = gw_form_get(form, FILE_FIELD);
    if (!file)
        return gw_reply_invalid_field(call,
                                      "'file' is missing: send the audio clip (WAV, MP3 or FLAC) as the "
                                      "form's file field");
    if (file->len == 0) return gw_reply_invalid_field(call, "'file' is empty");
    if (!(j->clip = malloc(file->len))) {
        gw_reply_error(call, GW_E_INTERNAL, "out of memory");
        return false;
    }
    memcpy(j->clip, file->data, file->len);
    j->clip_len = file->len;
    return true;
}

/* ---- the run ------------------------------------------------------------------------------------ */

static void push_event(stt_job *j, json_t *event) {
    pthread_mutex_lock(&j->lock);
    gw_sse_json(&j->events, NULL, event);
    pthread_cond_signal(&j->cond);
    pthread_mutex_unlock(&j->lock);
}

static void on_segment(const sipp_transcript_segment *seg, void *user) {
    stt_job *j = user;
    if (!seg->text || !*seg->text) return;
    push_event(j, json_pack("{s:s, s:s}", "type", "transcript.text.delta", "delta", seg->text));
    pthread_mutex_lock(&j->lock);
    j->n_deltas++;
    pthread_mutex_unlock(&j->lock);
}

/* The error of a failed run, as the client sees it: the clip's and the language's problems are the
 * form's fields. */
static gw_error_kind failure(stt_job *j, char *message, size_t n) {
    if (j->status != SIPP_ERR_INVALID_ARGUMENT) {
        snprintf(message, n, "%s", j->err);
        return gw_error_from_status(j->status);
    }
    bool named = strncmp(j->err, "'", 1) == 0 || strncmp(j->err, "language", strlen("language")) == 0;
    snprintf(message, n, "%s%s", named ? "" : "'file': ", j->err);
    return GW_E_INVALID_FIELD;
}

static void *run_main(void *arg) {
    stt_job *j = arg;
    j->status = gw_kind_of(j->t)->transcribe(j->t, j->clip, j->clip_len, FILE_FIELD, &j->p, &j->tr, j->err);
    if (j->stream && j->status == SIPP_OK) {
        push_event(j, json_pack("{s:s, s:s, s:{s:s, s:f}}", "type", "transcript.text.done", "text",
                                sipp_transcript_text(j->tr), "usage", "type", "duration", "seconds",
                                sipp_transcript_duration(j->tr)));
    } else if (j->stream) {
        char message[SIPP_ERROR_SIZE + 16];
        gw_error_kind kind = failure(j, message, sizeof message);
        push_event(j, gw_error_json(kind, message));
    }
    pthread_mutex_lock(&j->lock);
    if (j->stream) gw_sse_done(&j->events);
    j->finished = true;
    pthread_cond_signal(&j->cond);
    pthread_mutex_unlock(&j->lock);
    return NULL;
}

static bool job_pull(gw_stream *s, sipp_buf *out, int wait_ms) {
    stt_job *j = (stt_job *)s;
    pthread_mutex_lock(&j->lock);
    if (j->events.len == 0 && !j->finished) {
        struct timespec ts;
        sipp_deadline_in(&ts, CLOCK_REALTIME, wait_ms);
        pthread_cond_timedwait(&j->cond, &j->lock, &ts);
    }
    if (j->events.len) {
        sipp_buf_append(out, j->events.data, j->events.len);
        j->events.len = 0;
    }
    bool more = !j->finished || j->events.len;
    pthread_mutex_unlock(&j->lock);
    return more;
}

static void job_close(gw_stream *s) {
    stt_job *j = (stt_job *)s;
    j->cancel = 1;
    if (j->started) pthread_join(j->thread, NULL);
    pthread_mutex_destroy(&j->lock);
    pthread_cond_destroy(&j->cond);
    sipp_buf_free(&j->events);
    sipp_transcript_free(j->tr);
    free(j->clip);
    free(j->prompt);
    free(j);
}

/* The whole answer, once the run has ended. */
static void reply_whole(stt_job *j) {
    if (j->status != SIPP_OK) {
        char message[SIPP_ERROR_SIZE + 16];
        gw_error_kind kind = failure(j, message, sizeof message);
        gw_reply_error(j->call, kind, "%s", message);
        return;
    }
    char *body = sipp_transcript_render(j->tr, j->format, j->translate ? "translate" : "transcribe");
    if (!body) {
        gw_reply_error(j->call, GW_E_INTERNAL, "out of memory rendering the transcript");
        return;
    }
    bool json = j->format == SIPP_TRANSCRIPT_JSON || j->format == SIPP_TRANSCRIPT_VERBOSE_JSON;
    size_t len = strlen(body);
    char *copy = malloc(len + 1); /* gw_reply_text frees with free(); the render's is sipp_free's */
    if (copy) memcpy(copy, body, len + 1);
    sipp_free(body);
    if (!copy)
        gw_reply_error(j->call, GW_E_INTERNAL, "out of memory rendering the transcript");
    else
        gw_reply_text(j->call, 200, json ? JSON_TYPE : TEXT_TYPE, copy, len);
}

/* Waits until the run has a segment to stream or has ended (cancelling it when the client goes
 * away meanwhile). False when it ended in an error before any segment: that is a plain error reply
 * (a 400 naming the field), not a stream. */
static bool first_segment(stt_job *j) {
    bool waiting = true, stream = true;
    while (waiting) {
        pthread_mutex_lock(&j->lock);
        if (!j->finished && j->n_deltas == 0) {
            struct timespec ts;
            sipp_deadline_in(&ts, CLOCK_REALTIME, WAIT_SLICE_MS);
            pthread_cond_timedwait(&j->cond, &j->lock, &ts);
        }
        waiting = !j->finished && j->n_deltas == 0;
        stream = j->n_deltas > 0 || !j->finished || j->status == SIPP_OK;
        pthread_mutex_unlock(&j->lock);
        if (waiting && gw_call_abandoned(j->call)) j->cancel = 1;
    }
    return stream;
}

/* Runs the job on its thread; streams it, or waits for it here (cancelling it when the client goes
 * away) and replies. The job is freed either way. */
static void start(stt_job *j) {
    pthread_mutex_init(&j->lock, NULL);
    pthread_cond_init(&j->cond, NULL);
    j->base.pull = job_pull;
    j->base.close = job_close;
    j->p.cancel = &j->cancel;
    if (j->stream) {
        j->p.on_segment = on_segment;
        j->p.user = j;
    }
    if (pthread_create(&j->thread, NULL, run_main, j) != 0) {
        gw_reply_error(j->call, GW_E_INTERNAL, "cannot start the transcription's thread");
        job_close(&j->base);
        return;
    }
    j->started = true;
    if (j->stream && first_segment(j)) {
        gw_reply_stream(j->call, SSE_TYPE, &j->base);
        return;
    }
    sipp_buf dropped = {0};
    while (job_pull(&j->base, &dropped, WAIT_SLICE_MS))
        if (gw_call_abandoned(j->call)) j->cancel = 1;
    sipp_buf_free(&dropped);
    pthread_join(j->thread, NULL);
    j->started = false;
    reply_whole(j);
    job_close(&j->base);
}

void gw_transcription_run(gw_call *call, const gw_form *form, json_t *fields, bool translate) {
    stt_job *j = calloc(1, sizeof *j);
    if (!j) {
        gw_reply_error(call, GW_E_INTERNAL, "out of memory");
        return;
    }
    j->call = call;
    j->translate = translate;
    j->p = sipp_transcribe_default_params();
    j->p.translate = translate;
    j->p.max_seconds = call->srv->cfg->limits.max_audio_seconds;
    j->p.media_budget = call->srv->media_budget; /* [limits] media_decoded_budget_mb, with the chats' media */
    bool ok = gw_fields_check(call, fields, gw_fields_whisper,
                              translate ? "/v1/audio/translations" : "/v1/audio/transcriptions") &&
              parse_format_and_stream(call, fields, j) && parse_granularities(call, fields, j) &&
              parse_numbers(call, fields, &j->p) && parse_text_fields(call, fields, j) &&
              take_clip(call, form, j) && (j->t = gw_call_target(call, field(fields, "model")));
    if (ok && !j->p.language) j->p.language = j->t->cfg->language; /* the target's default */
    if (!ok) {
        free(j->clip);
        free(j->prompt);
        free(j);
        return;
    }
    start(j);
}
