/*
 * transcribe.c: one clip through whisper_full on a state of the transcriber's pool.
 *
 * The parameters are set as whisper-cli sets them from its defaults (examples/cli/cli.cpp of the
 * pinned whisper.cpp: whisper_full_default_params(GREEDY), then beam search when beam_size > 1, best_of
 * and beam_size 5, temperature 0 with a fallback step of 0.2, thresholds 2.4 / -1 / 0.6, an empty
 * initial prompt), so that a clip gives the transcript whisper-cli gives with the same language and
 * threads. Only what a caller asks for differs.
 *
 * The language, when not given, is detected here rather than inside whisper_full: the same two calls
 * whisper_full would make (the mel spectrogram, then whisper_lang_auto_detect_with_state on the first
 * window) give the language and its probability, which whisper_full does not return, and whisper_full
 * then decodes in that language, exactly as it would after detecting it itself.
 *
 * Cancelling: whisper checks abort_callback before each graph it computes and encoder_begin_callback
 * before each window's encoder, so a cancel flag set from any thread stops the clip within one decoder
 * step. New segments reach the caller's callback from inside whisper_full, as they are decoded.
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/audio_decode.h"
#include "model/media_budget.h"
#include "speech/speech.h"
#include "util/util.h"

#define AUTO_LANGUAGE "auto"
#define CENTISECONDS_TO_MS 10                     /* whisper's times are in 10 ms units */
#define WAV_HEADER_MIN 12                         /* "RIFF", the size, "WAVE" */
#define RIFF_PREAMBLE 8                           /* the RIFF size counts what follows "RIFF" and itself */
#define RIFF_SIZE_UNKNOWN 0xFFFFFFFFu             /* a streamed WAV's size field: length not known */
#define TRUNCATION_SLACK (SIPP_WHISPER_RATE / 50) /* 20 ms of frames */

sipp_transcribe_params sipp_transcribe_default_params(void) {
    return (sipp_transcribe_params){
        .temperature = 0.0f,
        .temperature_inc = 0.2f,
        .entropy_thold = 2.4f,
        .logprob_thold = -1.0f,
        .no_speech_thold = 0.6f,
        .beam_size = 5,
        .best_of = 5,
    };
}

/* What whisper's callbacks need: the caller's parameters and where the segments come from. */
struct clip_run {
    sipp_transcriber *t;
    const sipp_transcribe_params *p;
};

static bool cancelled(const sipp_transcribe_params *p) { return p->cancel && *p->cancel; }

static bool on_abort(void *user) { return cancelled(((struct clip_run *)user)->p); }

static bool on_encoder_begin(struct whisper_context *ctx, struct whisper_state *state, void *user) {
    return !cancelled(((struct clip_run *)user)->p);
}

static void on_new_segments(struct whisper_context *ctx, struct whisper_state *state, int n_new, void *user) {
    struct clip_run *run = user;
    const int n = run->t->api->whisper_full_n_segments_from_state(state);
    for (int i = n - n_new; i < n; i++) {
        sipp_transcript_segment seg;
        if (!sipp_transcript_segment_fill(run->t, state, i, run->p->word_timestamps, &seg)) continue;
        run->p->on_segment(&seg, run->p->user);
        sipp_transcript_segment_clear(&seg);
    }
}

/* whisper_full's parameters: whisper-cli's defaults, then what the caller set. */
static struct whisper_full_params full_params(const sipp_transcriber *t, const sipp_transcribe_params *p,
                                              const char *language, int threads, struct clip_run *run) {
    struct whisper_full_params w = t->api->whisper_full_default_params(WHISPER_SAMPLING_GREEDY);
    w.strategy = p->beam_size > 1 ? WHISPER_SAMPLING_BEAM_SEARCH : WHISPER_SAMPLING_GREEDY;
    w.print_realtime = false;
    w.print_progress = false;
    w.print_timestamps = false;
    w.print_special = false;
    w.translate = p->translate;
    w.language = language;
    w.detect_language = false;
    w.n_threads = threads;
    w.token_timestamps = p->word_timestamps;
    w.initial_prompt = p->prompt ? p->prompt : "";
    w.greedy.best_of = p->best_of;
    w.beam_search.beam_size = p->beam_size;
    w.temperature = p->temperature;
    w.temperature_inc = p->temperature_inc;
    w.entropy_thold = p->entropy_thold;
    w.logprob_thold = p->logprob_thold;
    w.no_speech_thold = p->no_speech_thold;
    w.abort_callback = on_abort;
    w.abort_callback_user_data = run;
    w.encoder_begin_callback = on_encoder_begin;
    w.encoder_begin_callback_user_data = run;
    if (p->on_segment) {
        w.new_segment_callback = on_new_segments;
        w.new_segment_callback_user_data = run;
    }
    return w;
}

static sipp_status check_params(const sipp_transcriber *t, const sipp_transcribe_params *p, size_t n_samples,
                                char *errbuf) {
    const double seconds = (double)n_samples / SIPP_WHISPER_RATE;
    if (n_samples == 0)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                         "the clip has no samples; send audio of some length");
    if (n_samples > INT_MAX)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "the clip is too long (%.0f s)", seconds);
    if (p->max_seconds > 0 && seconds > p->max_seconds)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                         "the clip is %.1f s long, over the limit of %.0f s ([limits] max_audio_seconds)",
                         seconds, p->max_seconds);
    if (p->language && *p->language && strcmp(p->language, AUTO_LANGUAGE) != 0 &&
        t->api->whisper_lang_id(p->language) < 0)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                         "language '%s' is not one whisper knows; give an ISO 639-1 code such as en, de, fr, "
                         "or auto to detect it",
                         p->language);
    if (p->beam_size < 1 || p->best_of < 1)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                         "beam_size and best_of must be at least 1 (got %d, %d)", p->beam_size, p->best_of);
    return SIPP_OK;
}

/* The language to decode in: the one given, or the first window's most likely one. */
static sipp_status choose_language(sipp_transcriber *t, struct whisper_state *state,
                                   const sipp_transcribe_params *p, const float *samples, int n, int threads,
                                   sipp_transcript *tr, char *errbuf) {
    if (p->language && *p->language && strcmp(p->language, AUTO_LANGUAGE) != 0) {
        sipp_strlcpy(tr->language, p->language, sizeof tr->language);
        tr->language_prob = 1.0f;
        return SIPP_OK;
    }
    float *probs = calloc((size_t)t->api->whisper_lang_max_id() + 1, sizeof *probs);
    if (!probs) return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory detecting the language");
    int id = -1;
    sipp_status st = sipp_whisper_detect(t->api, t->ctx, state, samples, n, threads, probs, &id, errbuf);
    if (st == SIPP_OK && id < 0)
        st = cancelled(p)
                 ? sipp_fail(errbuf, SIPP_ERR_CANCELLED, "the transcription was cancelled")
                 : sipp_fail(errbuf, SIPP_ERR_INTERNAL, "libwhisper could not detect the clip's language");
    if (st == SIPP_OK) {
        sipp_strlcpy(tr->language, t->api->whisper_lang_str(id), sizeof tr->language);
        tr->language_prob = probs[id];
    }
    free(probs);
    return st;
}

/* The transcript of a finished whisper_full: its segments and their joined text. */
static sipp_status collect(sipp_transcriber *t, struct whisper_state *state, bool words, sipp_transcript *tr,
                           char *errbuf) {
    const int n = t->api->whisper_full_n_segments_from_state(state);
    tr->segments = calloc(n > 0 ? (size_t)n : 1, sizeof *tr->segments);
    sipp_buf text = {0};
    if (!tr->segments)
        return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory collecting the transcript");
    for (int i = 0; i < n; i++) {
        if (!sipp_transcript_segment_fill(t, state, i, words, &tr->segments[i]) ||
            !sipp_buf_append(&text, tr->segments[i].text, strlen(tr->segments[i].text))) {
            sipp_buf_free(&text);
            return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory collecting the transcript");
        }
        tr->n_segments = i + 1;
    }
    /* OpenAI's text has no leading or trailing blank; whisper's segments start with a space */
    const char *s = text.data ? text.data : "";
    while (*s == ' ')
        s++;
    size_t len = strlen(s);
    while (len && (s[len - 1] == ' ' || s[len - 1] == '\n'))
        len--;
    tr->text = strndup(s, len);
    sipp_buf_free(&text);
    return tr->text ? SIPP_OK
                    : sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory collecting the transcript");
}

static sipp_status run_clip(sipp_transcriber *t, struct whisper_state *state, const float *samples, int n,
                            const sipp_transcribe_params *p, sipp_transcript *tr, char *errbuf) {
    const int threads = p->threads > 0 ? p->threads : t->threads;
    sipp_status st = choose_language(t, state, p, samples, n, threads, tr, errbuf);
    if (st != SIPP_OK) return st;
    struct clip_run run = {.t = t, .p = p};
    int rc = 0;
    st = sipp_whisper_full(t->api, t->ctx, state, full_params(t, p, tr->language, threads, &run), samples, n,
                           &rc, errbuf);
    if (st != SIPP_OK) return st;
    if (cancelled(p)) return sipp_fail(errbuf, SIPP_ERR_CANCELLED, "the transcription was cancelled");
    if (rc != 0)
        return sipp_fail(errbuf, SIPP_ERR_INTERNAL, "libwhisper failed to transcribe the clip (code %d)", rc);
    return collect(t, state, p->word_timestamps, tr, errbuf);
}

sipp_status sipp_transcribe_pcm(sipp_transcriber *t, const float *samples, size_t n_samples,
                                const sipp_transcribe_params *params, sipp_transcript **out, char *errbuf) {
    *out = NULL;
    const sipp_transcribe_params defaults = sipp_transcribe_default_params();
    const sipp_transcribe_params *p = params ? params : &defaults;
    if (!t) return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "no transcriber");
    sipp_status st = check_params(t, p, n_samples, errbuf);
    if (st != SIPP_OK) return st;
    if (cancelled(p)) return sipp_fail(errbuf, SIPP_ERR_CANCELLED, "the transcription was cancelled");
    sipp_transcript *tr = calloc(1, sizeof *tr);
    if (!tr) return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory");
    tr->duration = (double)n_samples / SIPP_WHISPER_RATE;
    const int slot = sipp_transcriber_acquire(t);
    st = run_clip(t, t->states[slot], samples, (int)n_samples, p, tr, errbuf);
    sipp_transcriber_release(t, slot);
    if (st != SIPP_OK) {
        sipp_transcript_free(tr);
        return st;
    }
    *out = tr;
    return SIPP_OK;
}

/* A RIFF/WAVE file shorter than its RIFF header says: cut off in transit. miniaudio decodes the bytes
 * present as if the file ended there, so the length it reports cannot tell. */
static bool wav_truncated(const unsigned char *data, size_t n, uint64_t *claimed) {
    if (n < WAV_HEADER_MIN || memcmp(data, "RIFF", 4) != 0 || memcmp(data + 8, "WAVE", 4) != 0) return false;
    *claimed = (uint64_t)data[4] | (uint64_t)data[5] << 8 | (uint64_t)data[6] << 16 | (uint64_t)data[7] << 24;
    if (*claimed == RIFF_SIZE_UNKNOWN || *claimed == 0) return false;
    *claimed += RIFF_PREAMBLE;
    return *claimed > n;
}

/* Takes the clip's decoded size from params->media_budget, measured from its header (the probe
 * names a clip that is not audio or is too long): the file's samples as floats at its own rate
 * and channels, which the decoder holds, and the 16 kHz mono ones transcribed. */
static sipp_status hold_decoded(const unsigned char *data, size_t n, const char *where,
                                const sipp_transcribe_params *p, size_t *held, char *errbuf) {
    sipp_media_budget *budget = p ? p->media_budget : NULL;
    if (!budget) return SIPP_OK;
    sipp_audio_info info;
    sipp_status st = sipp_audio_probe(data, n, SIPP_WHISPER_RATE, p->max_seconds > 0 ? p->max_seconds : 1e9,
                                      where ? where : "the audio", &info, errbuf);
    if (st != SIPP_OK) return st;
    const double bytes = (info.seconds * info.rate * info.channels + (double)info.frames) * sizeof(float);
    const size_t cap = sipp_media_budget_cap(budget);
    if (bytes > (double)cap)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                         "'%s' decodes to %.0f MB, more than the shared budget of %zu MB ([limits] "
                         "media_decoded_budget_mb) holds; send a shorter clip",
                         where ? where : "the audio", bytes / (1 << 20), cap >> 20);
    if (!sipp_media_budget_take(budget, (size_t)bytes))
        return sipp_fail(errbuf, SIPP_ERR_BUSY,
                         "'%s' decodes to %.0f MB, and other requests hold the shared budget of %zu MB "
                         "([limits] media_decoded_budget_mb) now; try again shortly",
                         where ? where : "the audio", bytes / (1 << 20), cap >> 20);
    *held = (size_t)bytes;
    return SIPP_OK;
}

sipp_status sipp_transcribe_bytes(sipp_transcriber *t, const unsigned char *data, size_t n, const char *where,
                                  const sipp_transcribe_params *params, sipp_transcript **out, char *errbuf) {
    *out = NULL;
    const double max_seconds = params ? params->max_seconds : 0;
    uint64_t claimed = 0;
    if (wav_truncated(data, n, &claimed))
        return sipp_fail(
            errbuf, SIPP_ERR_INVALID_ARGUMENT,
            "'%s' is truncated: its WAV header says %llu bytes and %zu arrived; send the whole file",
            where ? where : "the audio", (unsigned long long)claimed, n);
    float *samples = NULL;
    sipp_audio_info info;
    size_t held = 0;
    sipp_status st = hold_decoded(data, n, where, params, &held, errbuf);
    if (st != SIPP_OK) return st;
    st = sipp_audio_decode(data, n, SIPP_WHISPER_RATE, max_seconds > 0 ? max_seconds : 1e9,
                           where ? where : "the audio", &samples, &info, errbuf);
    /* a FLAC or WAV whose header claims more than its bytes hold decodes to zeros at the end; the
     * resampler's own count may differ from the frames read by a few, hence the slack */
    if (st == SIPP_OK && info.decoded + TRUNCATION_SLACK < info.frames)
        st = sipp_fail(
            errbuf, SIPP_ERR_INVALID_ARGUMENT,
            "'%s' is truncated: its header claims %.2f s of audio and its bytes hold %.2f s; send the "
            "whole file",
            where ? where : "the audio", info.seconds, (double)info.decoded / SIPP_WHISPER_RATE);
    if (st == SIPP_OK) st = sipp_transcribe_pcm(t, samples, (size_t)info.frames, params, out, errbuf);
    free(samples);
    sipp_media_budget_give(params ? params->media_budget : NULL, held);
    return st;
}

/* ---- the transcript ------------------------------------------------------------------------------ */

void sipp_transcript_segment_clear(sipp_transcript_segment *seg) {
    free((char *)seg->text);
    free((int32_t *)seg->tokens);
    for (int i = 0; seg->words && i < seg->n_words; i++)
        free((char *)seg->words[i].text);
    free((sipp_transcript_word *)seg->words);
    memset(seg, 0, sizeof *seg);
}

/* A copy of s[0..n) (up to its NUL) with every byte of an invalid UTF-8 sequence replaced by U+FFFD:
 * a segment can end inside a character, and random weights emit any bytes. */
static char *valid_utf8(const char *s, size_t n) {
    sipp_buf b = {0};
    const size_t len = strnlen(s, n);
    if (!sipp_buf_append_utf8(&b, s, len) || !sipp_buf_append(&b, "", 0)) {
        sipp_buf_free(&b);
        return NULL;
    }
    return b.data;
}

/* Closes the word being built (words[nw - 1]) with the text gathered in cur. */
static bool close_word(sipp_transcript_word *words, int nw, sipp_buf *cur) {
    if (nw == 0) return true;
    words[nw - 1].text = valid_utf8(cur->data ? cur->data : "", cur->len);
    sipp_buf_free(cur);
    return words[nw - 1].text != NULL;
}

/* Joins the segment's text tokens into words: a token that starts with a space starts a word. */
static bool fill_words(const sipp_transcriber *t, struct whisper_state *state, int i,
                       sipp_transcript_segment *seg) {
    const int n = t->api->whisper_full_n_tokens_from_state(state, i);
    const whisper_token eot = t->api->whisper_token_eot(t->ctx);
    sipp_transcript_word *words = calloc(n > 0 ? (size_t)n : 1, sizeof *words);
    seg->words = words;
    if (!words) return false;
    int nw = 0;
    bool ok = true;
    sipp_buf cur = {0};
    for (int j = 0; j < n && ok; j++) {
        whisper_token_data d = t->api->whisper_full_get_token_data_from_state(state, i, j);
        if (d.id >= eot) continue;
        const char *piece = t->api->whisper_full_get_token_text_from_state(t->ctx, state, i, j);
        if (piece[0] == ' ' || nw == 0) {
            ok = close_word(words, nw, &cur);
            words[nw++] = (sipp_transcript_word){.t0_ms = d.t0 * CENTISECONDS_TO_MS, .probability = 1.0f};
            piece += piece[0] == ' ';
        }
        ok = ok && sipp_buf_append(&cur, piece, strlen(piece));
        words[nw - 1].t1_ms = d.t1 * CENTISECONDS_TO_MS;
        words[nw - 1].probability *= d.p;
    }
    ok = ok && close_word(words, nw, &cur);
    sipp_buf_free(&cur);
    seg->n_words = nw;
    return ok;
}

bool sipp_transcript_segment_fill(const sipp_transcriber *t, struct whisper_state *state, int i, bool words,
                                  sipp_transcript_segment *seg) {
    memset(seg, 0, sizeof *seg);
    const sipp_whisper_api *api = t->api;
    const int n = api->whisper_full_n_tokens_from_state(state, i);
    const whisper_token eot = api->whisper_token_eot(t->ctx);
    int32_t *tokens = calloc(n > 0 ? (size_t)n : 1, sizeof *tokens);
    seg->text = valid_utf8(api->whisper_full_get_segment_text_from_state(state, i), SIZE_MAX);
    seg->tokens = tokens;
    if (!tokens || !seg->text) goto fail;
    double logprob = 0;
    for (int j = 0; j < n; j++) {
        whisper_token_data d = api->whisper_full_get_token_data_from_state(state, i, j);
        if (d.id >= eot) continue; /* special and timestamp tokens */
        tokens[seg->n_tokens++] = d.id;
        logprob += d.plog;
    }
    seg->t0_ms = api->whisper_full_get_segment_t0_from_state(state, i) * CENTISECONDS_TO_MS;
    seg->t1_ms = api->whisper_full_get_segment_t1_from_state(state, i) * CENTISECONDS_TO_MS;
    seg->avg_logprob = seg->n_tokens ? (float)(logprob / seg->n_tokens) : 0.0f;
    seg->no_speech_prob = api->whisper_full_get_segment_no_speech_prob_from_state(state, i);
    if (words && !fill_words(t, state, i, seg)) goto fail;
    return true;
fail:
    sipp_transcript_segment_clear(seg);
    return false;
}

void sipp_transcript_free(sipp_transcript *tr) {
    if (!tr) return;
    for (int i = 0; i < tr->n_segments; i++)
        sipp_transcript_segment_clear(&tr->segments[i]);
    free(tr->segments);
    free(tr->text);
    free(tr);
}

const char *sipp_transcript_text(const sipp_transcript *tr) { return tr && tr->text ? tr->text : ""; }
const char *sipp_transcript_language(const sipp_transcript *tr) { return tr ? tr->language : ""; }
float sipp_transcript_language_probability(const sipp_transcript *tr) { return tr ? tr->language_prob : 0; }
double sipp_transcript_duration(const sipp_transcript *tr) { return tr ? tr->duration : 0; }
int sipp_transcript_n_segments(const sipp_transcript *tr) { return tr ? tr->n_segments : 0; }

const sipp_transcript_segment *sipp_transcript_segment_borrow(const sipp_transcript *tr, int i) {
    return tr && i >= 0 && i < tr->n_segments ? &tr->segments[i] : NULL;
}
