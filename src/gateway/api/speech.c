/*
 * speech.c: OpenAI's POST /v1/audio/speech: text in, audio out, from a target whose kind
 * speaks (the tts kind: a Qwen3-TTS / Pocket TTS pair, or flite).
 *
 * The body is OpenAI's: model, input, voice, response_format, speed, instructions, stream_format,
 * and sipp's seed (a pair's sampling seed, so that the API gives the samples `sipp speak --seed`
 * gives). Every field is checked against the route's table (api/fields.c, docs/api-fields.md):
 * instructions is named in sipp-ignored (neither pipeline has a style input), aac is a 400 (Debian
 * has no AAC encoder sipp links), input is bounded by [limits] max_speech_chars (characters, as
 * OpenAI counts them). The voice is resolved by the target's kind before anything is loaded, so
 * an unknown voice is a 400 listing the target's voices; a request to a target that does not speak
 * (a chat model) is a 400 naming it, and a chat request to a speech target is refused by its kind.
 *
 * The speech runs on a thread of its own (one per request, like a download of /api/pull), through
 * admission and residency like any generation: the kind's speak hands each sentence's samples to
 * the encoder (sipp_audio_encoder: WAV, PCM, FLAC, MP3, Opus) as soon as it is ready, and the
 * encoder's bytes gather in the job. Then, by stream_format:
 *   (none)  the whole file, with exact headers (WAV sizes, FLAC's sample count), once it is done;
 *   audio   the bytes as they are made (chunked), a WAV's sizes as placeholders, as ffmpeg writes
 *           one to a pipe;
 *   sse     OpenAI's events: speech.audio.delta with each piece of encoded audio in base64, then
 *           speech.audio.done with its usage (a pair's prompt rows in, frames out; flite: zeros), or
 *           an error event when the speech fails midway.
 * A streamed reply starts once the first audio is ready, so a speech that fails at once is still
 * an error status. A client that goes away cancels the speech: within one sentence for flite, one
 * frame for a pair.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway/api/api.h"
#include "util/base64.h"

#define API_NAME "/v1/audio/speech"
#define DEFAULT_FORMAT "mp3" /* OpenAI's default response_format */
#define VOICE_SIZE 64
#define LANGUAGE_SIZE 64
#define WAIT_SLICE_MS 50 /* how often a waiting route looks for a client that went away */
#define SSE_TYPE "text/event-stream"
#define FALLBACK_RATE 24000 /* an encoder for a speech that made no sample at all */

typedef enum { STREAM_NONE, STREAM_AUDIO, STREAM_SSE } stream_kind;

/* A request, as checked. */
typedef struct speech_req {
    const char *model; /* NULL: the only target */
    const char *input;
    const char *voice;    /* NULL: the target's default */
    const char *language; /* sipp's own: NULL, the model's default (a Qwen3-TTS pair's English) */
    sipp_audio_format format;
    double speed;
    uint32_t seed;
    stream_kind stream;
} speech_req;

typedef struct speech_job {
    gw_stream base;
    gw_target *t;
    const gw_kind *kind;
    char *text;
    char voice[VOICE_SIZE];
    char language[LANGUAGE_SIZE];
    sipp_speak_options o;
    stream_kind stream;
    sipp_audio_format format;
    sipp_audio_encoder *enc;
    pthread_t thread;
    bool started;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    sipp_buf out; /* bytes not yet handed to the reply */
    bool finished, error_sent;
    volatile bool cancel;   /* o.cancel */
    sipp_speak_usage usage; /* o.usage: speech.audio.done's */
    sipp_status status;
    char err[SIPP_ERROR_SIZE];
} speech_job;

/* ---- the request ------------------------------------------------------------------------------ */

static size_t utf8_chars(const char *s) {
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static bool get_string(gw_call *call, json_t *root, const char *key, const char **out) {
    json_t *v = json_object_get(root, key);
    *out = NULL;
    if (!v || json_is_null(v)) return true;
    if (json_is_string(v)) *out = json_string_value(v);
    return json_is_string(v) || gw_reply_invalid_field(call, "'%s' must be a string", key);
}

static bool check_format(gw_call *call, const char *name, speech_req *r) {
    if (!name) name = DEFAULT_FORMAT;
    if (strcmp(name, "aac") == 0)
        return gw_reply_invalid_field(
            call, "'response_format': aac cannot be encoded here (no AAC encoder among the "
                  "libraries sipp uses); use mp3, opus, flac, wav or pcm");
    if (sipp_audio_format_parse(name, &r->format) == SIPP_OK) return true;
    return gw_reply_invalid_field(call, "'response_format': '%.32s' is not one of mp3, opus, flac, wav, pcm",
                                  name);
}

static bool check_numbers(gw_call *call, json_t *root, speech_req *r) {
    json_t *speed = json_object_get(root, "speed"), *seed = json_object_get(root, "seed");
    r->speed = 1.0;
    r->seed = SIPP_SEED_RANDOM;
    if (speed && !json_is_null(speed)) {
        r->speed = json_is_number(speed) ? json_number_value(speed) : NAN;
        if (!(r->speed >= SIPP_SPEED_MIN && r->speed <= SIPP_SPEED_MAX))
            return gw_reply_invalid_field(call, "'speed' must be a number from %.2f to %.1f", SIPP_SPEED_MIN,
                                          SIPP_SPEED_MAX);
    }
    if (seed && !json_is_null(seed)) {
        json_int_t v = json_is_integer(seed) ? json_integer_value(seed) : -1;
        if (v < 0 || v > (json_int_t)UINT32_MAX)
            return gw_reply_invalid_field(call, "'seed' must be a whole number from 0 to %u", UINT32_MAX);
        r->seed = (uint32_t)v;
    }
    return true;
}

static bool check_stream(gw_call *call, const char *name, speech_req *r) {
    r->stream = !name ? STREAM_NONE : strcmp(name, "audio") == 0 ? STREAM_AUDIO : STREAM_SSE;
    return !name || r->stream == STREAM_AUDIO || strcmp(name, "sse") == 0 ||
           gw_reply_invalid_field(call, "'stream_format': '%.32s' is not one of audio, sse", name);
}

static bool check_input(gw_call *call, const char *input) {
    size_t max = call->srv->cfg->max_speech_chars, n = input ? utf8_chars(input) : 0;
    if (!input) return gw_reply_invalid_field(call, "'input' is missing: give the text to speak");
    if (!input[strspn(input, " \t\r\n")])
        return gw_reply_invalid_field(call, "'input' is empty: give the text to speak");
    return n <= max || gw_reply_invalid_field(call,
                                              "'input' has %zu characters, more than this server's [limits] "
                                              "max_speech_chars (%zu); split the text into shorter requests",
                                              n, max);
}

/* language: a code or a name, which the model then takes or refuses (sipp_tts_speak's check). */
static bool check_language(gw_call *call, const char *language) {
    return !language || (*language && strlen(language) < LANGUAGE_SIZE) ||
           gw_reply_invalid_field(call, "'language' must be a language's code or name (en, zh, german, ...)");
}

/* voice: a name, or OpenAI's custom voice object {"id": NAME}. */
static bool get_voice(gw_call *call, json_t *root, const char **out) {
    json_t *v = json_object_get(root, "voice"), *id = json_object_get(v, "id");
    if (json_is_object(v) && json_is_string(id)) {
        *out = json_string_value(id);
        return true;
    }
    return get_string(call, root, "voice", out);
}

/* Reads and checks the body's fields; false after replying 400. */
static bool parse_request(gw_call *call, json_t *root, speech_req *r) {
    const char *format = NULL, *stream = NULL;
    return gw_fields_check(call, root, gw_fields_speech, API_NAME) &&
           get_string(call, root, "model", &r->model) && get_string(call, root, "input", &r->input) &&
           check_input(call, r->input) && get_voice(call, root, &r->voice) &&
           get_string(call, root, "response_format", &format) && check_format(call, format, r) &&
           get_string(call, root, "stream_format", &stream) && check_stream(call, stream, r) &&
           get_string(call, root, "language", &r->language) && check_language(call, r->language) &&
           check_numbers(call, root, r);
}

/* ---- the speech, on its thread ---------------------------------------------------------------- */

static bool encoded(const void *data, size_t n, void *user) {
    speech_job *j = user;
    bool ok = true;
    pthread_mutex_lock(&j->lock);
    if (j->stream == STREAM_SSE) {
        char *b64 = sipp_base64_encode(data, n);
        ok = b64 &&
             gw_sse_json(&j->out, NULL, json_pack("{s:s, s:s}", "type", "speech.audio.delta", "audio", b64));
        free(b64);
    } else {
        ok = sipp_buf_append(&j->out, data, n);
    }
    pthread_cond_signal(&j->cond);
    pthread_mutex_unlock(&j->lock);
    return ok && !j->cancel;
}

static bool make_encoder(speech_job *j, int rate) {
    if (j->enc) return true;
    j->status =
        sipp_audio_encoder_new(j->format, rate, j->stream != STREAM_NONE, encoded, j, &j->enc, j->err);
    return j->status == SIPP_OK;
}

static bool on_audio(const int16_t *samples, size_t n, int rate, void *user) {
    speech_job *j = user;
    if (!make_encoder(j, rate)) return false;
    if (sipp_audio_encoder_write(j->enc, samples, n) == SIPP_OK) return !j->cancel;
    j->status = SIPP_ERR_INTERNAL;
    snprintf(j->err, sizeof j->err, "encoding: %s", sipp_audio_encoder_last_error(j->enc));
    return false;
}

static void *speech_main(void *arg) {
    speech_job *j = arg;
    char err[SIPP_ERROR_SIZE];
    sipp_status st = j->kind->speak(j->t, j->text, &j->o, err);
    if (j->status == SIPP_OK && st != SIPP_OK) { /* else the encoder's failure stopped it */
        j->status = st;
        snprintf(j->err, sizeof j->err, "%s", err);
    }
    if (j->status == SIPP_OK && make_encoder(j, FALLBACK_RATE) &&
        sipp_audio_encoder_finish(j->enc) != SIPP_OK) {
        j->status = SIPP_ERR_INTERNAL;
        snprintf(j->err, sizeof j->err, "encoding: %s", sipp_audio_encoder_last_error(j->enc));
    }
    pthread_mutex_lock(&j->lock);
    if (j->status == SIPP_OK && j->stream == STREAM_SSE)
        gw_sse_json(&j->out, NULL,
                    json_pack("{s:s, s:{s:I, s:I, s:I}}", "type", "speech.audio.done", "usage",
                              "input_tokens", (json_int_t)j->usage.input_tokens, "output_tokens",
                              (json_int_t)j->usage.output_tokens, "total_tokens",
                              (json_int_t)(j->usage.input_tokens + j->usage.output_tokens)));
    j->finished = true;
    pthread_cond_signal(&j->cond);
    pthread_mutex_unlock(&j->lock);
    return NULL;
}

/* ---- the reply -------------------------------------------------------------------------------- */

/* Waits (j->lock held, and released meanwhile) up to wait_ms for a signal: more bytes, or the end. */
static void wait_locked(speech_job *j, int wait_ms) {
    struct timespec ts;
    sipp_deadline_in(&ts, CLOCK_REALTIME, wait_ms);
    pthread_cond_timedwait(&j->cond, &j->lock, &ts);
}

static bool speech_pull(gw_stream *s, sipp_buf *out, int wait_ms) {
    speech_job *j = (speech_job *)s;
    pthread_mutex_lock(&j->lock);
    if (!j->out.len && !j->finished) wait_locked(j, wait_ms);
    if (j->finished && j->status != SIPP_OK && j->stream == STREAM_SSE && !j->error_sent) {
        j->error_sent = true; /* the speech failed after its first audio went out */
        json_t *e = gw_error_json_in(GW_DIALECT_OPENAI, gw_error_from_status(j->status), j->err);
        json_object_set_new(e, "type", json_string("error"));
        gw_sse_json(&j->out, NULL, e);
    }
    sipp_buf_append(out, j->out.data, j->out.len);
    j->out.len = 0;
    bool more = !j->finished;
    pthread_mutex_unlock(&j->lock);
    return more;
}

static void speech_close(gw_stream *s) {
    speech_job *j = (speech_job *)s;
    j->cancel = true;
    if (j->started) pthread_join(j->thread, NULL);
    sipp_audio_encoder_free(j->enc);
    pthread_mutex_destroy(&j->lock);
    pthread_cond_destroy(&j->cond);
    sipp_buf_free(&j->out);
    free(j->text);
    free(j);
}

static speech_job *job_new(gw_target *t, const speech_req *r, const char *voice) {
    speech_job *j = calloc(1, sizeof *j);
    if (!j || !(j->text = strdup(r->input))) {
        free(j);
        return NULL;
    }
    pthread_mutex_init(&j->lock, NULL);
    pthread_cond_init(&j->cond, NULL);
    j->base.pull = speech_pull;
    j->base.close = speech_close;
    j->t = t;
    j->kind = gw_kind_of(t);
    j->stream = r->stream;
    j->format = r->format;
    sipp_strlcpy(j->voice, voice, sizeof j->voice);
    j->o = sipp_speak_default_options();
    j->o.voice = *j->voice ? j->voice : NULL;
    const char *language = r->language ? r->language : t->cfg->language; /* the target's default */
    sipp_strlcpy(j->language, language ? language : "", sizeof j->language);
    j->o.language = *j->language ? j->language : NULL;
    j->o.speed = (float)r->speed;
    j->o.seed = r->seed;
    j->o.cancel = &j->cancel;
    j->o.usage = &j->usage;
    j->o.on_audio = on_audio;
    j->o.user = j;
    return j;
}

/* Waits for the first bytes (streamed) or the end (not), cancelling when the client goes away. */
static void wait_for(gw_call *call, speech_job *j) {
    pthread_mutex_lock(&j->lock);
    while (!j->finished && !(j->stream != STREAM_NONE && j->out.len)) {
        wait_locked(j, WAIT_SLICE_MS);
        if (gw_call_abandoned(call)) j->cancel = true;
    }
    pthread_mutex_unlock(&j->lock);
}

static void reply(gw_call *call, speech_job *j) {
    wait_for(call, j);
    if (j->finished && j->status != SIPP_OK && (!j->out.len || j->stream == STREAM_NONE)) {
        gw_reply_error(call, gw_error_from_status(j->status), "%s", j->err);
    } else if (j->stream != STREAM_NONE) {
        gw_reply_stream(call, j->stream == STREAM_SSE ? SSE_TYPE : sipp_audio_format_mime(j->format),
                        &j->base);
        return; /* the connection closes the job */
    } else {
        gw_reply_text(call, 200, sipp_audio_format_mime(j->format), j->out.data, j->out.len);
        j->out = (sipp_buf){0};
    }
    speech_close(&j->base);
}

/* The target for r: one that speaks, with the voice it asks for; NULL after replying. */
static gw_target *speaking_target(gw_call *call, const speech_req *r, char *voice) {
    gw_target *t = gw_call_lookup(call, r->model);
    if (!t) return NULL;
    const gw_kind *k = gw_kind_of(t);
    char err[SIPP_ERROR_SIZE];
    if (!k->speak) {
        gw_reply_error(call, GW_E_INVALID_FIELD,
                       "'model': '%s' does not speak: it is a %s target (a chat model); %s needs a "
                       "text-to-speech target: recipe = \"flite\" or \"tts\" in its [[targets]] section "
                       "(sipp serve --voice adds one named 'voice')",
                       t->cfg->name, k->name, API_NAME);
        return NULL;
    }
    if (!k->speech_voice(t, r->voice, voice, VOICE_SIZE, err, sizeof err)) {
        gw_reply_invalid_field(call, "%s", err);
        return NULL;
    }
    return gw_call_target(call, r->model);
}

void gw_route_speech(gw_call *call) {
    json_t *root = gw_body_object(call);
    if (!root) return;
    speech_req r = {0};
    char voice[VOICE_SIZE];
    gw_target *t = parse_request(call, root, &r) ? speaking_target(call, &r, voice) : NULL;
    speech_job *j = t ? job_new(t, &r, voice) : NULL;
    if (t && !j) {
        gw_reply_error(call, GW_E_INTERNAL, "out of memory");
    } else if (j && pthread_create(&j->thread, NULL, speech_main, j) != 0) {
        gw_reply_error(call, GW_E_INTERNAL, "cannot start the speech thread");
        speech_close(&j->base);
    } else if (j) {
        j->started = true;
        reply(call, j);
    }
    json_decref(root);
}
