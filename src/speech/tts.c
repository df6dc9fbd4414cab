/*
 * tts.c: the voice handle of sipp.h (sipp_tts_*): text in, 16-bit PCM out, a sentence at a time.
 *
 * One handle stands for either engine: flite (flite_voice.c) or a Qwen3-TTS / Pocket TTS pair through
 * libmtmd (tts_gen.c). What they share lives here: checking a call's options, splitting the text at
 * sentence ends (speech_split.c), and shaping each sentence's samples on the way out: resampled to the
 * rate the caller asked for, played faster or slower by resampling where the engine has no tempo
 * control of its own, handed to the caller's callback as soon as the sentence is done, and gathered
 * for a caller that wants the whole clip. One resampler runs over the whole call, so the sentences
 * join without a seam and the length is exactly what sipp_resampled_length says.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sipp.h"
#include "speech/flite_voice.h"
#include "speech/resample.h"
#include "speech/tts_gen.h"
#include "util/last_error.h"
#include "util/util.h"

#define FLITE_MODEL "flite"
#define FLITE_DEFAULT_VOICE "slt"
#define RATE_MIN 8000
#define RATE_MAX 192000
/* A sentence longer than this is cut at a space: the GGUF pipelines stop at llama-tts's frame cap, and
 * a shorter part keeps the first audio early. */
#define GEN_PART_BYTES 400
#define VOICE_LIST_SIZE 512

struct sipp_tts {
    sipp_tts_gen *gen; /* NULL for flite */
    char voice[32];    /* flite's default voice */
    sipp_last_error error;
};

sipp_tts_params sipp_tts_default_params(void) {
    sipp_tts_params p = {0};
    return p;
}

sipp_speak_options sipp_speak_default_options(void) {
    sipp_speak_options o = {0};
    o.speed = 1.0f;
    o.seed = SIPP_SEED_RANDOM;
    return o;
}

static bool is_flite(const char *model) { return model && !strcmp(model, FLITE_MODEL); }

sipp_status sipp_tts_new(const sipp_tts_params *params, sipp_tts **out, char *err) {
    *out = NULL;
    if (!params || !params->model || !*params->model)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                         "no voice model given: name \"flite\" or a TTS GGUF with its "
                         "mmproj");
    sipp_tts *t = calloc(1, sizeof *t);
    if (!t) return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    sipp_last_error_init(&t->error);
    if (is_flite(params->model)) {
        const char *v = params->voice ? params->voice : FLITE_DEFAULT_VOICE;
        if (!sipp_flite_voice_rate(v)) {
            char list[128];
            sipp_flite_voice_list(list, sizeof list);
            sipp_tts_free(t);
            return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "unknown flite voice '%s' (the voices: %s)", v,
                             list);
        }
        sipp_strlcpy(t->voice, v, sizeof t->voice);
    } else {
        sipp_status st = sipp_tts_gen_load(params, &t->gen, err);
        if (st != SIPP_OK) {
            sipp_tts_free(t);
            return st;
        }
    }
    *out = t;
    return SIPP_OK;
}

void sipp_tts_free(sipp_tts *t) {
    if (!t) return;
    sipp_tts_gen_free(t->gen);
    sipp_last_error_destroy(&t->error);
    free(t);
}

static sipp_status tts_fail(sipp_tts *t, sipp_status st, const char *fmt, ...) SIPP_PRINTF(3, 4);
static sipp_status tts_fail(sipp_tts *t, sipp_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    sipp_last_error_setv(&t->error, st, fmt, ap);
    va_end(ap);
    return st;
}

const char *sipp_tts_last_error(const sipp_tts *t) { return t ? sipp_last_error_get(&t->error) : ""; }

const char *sipp_tts_pipeline(const sipp_tts *t) {
    return t->gen ? sipp_tts_gen_pipeline(t->gen) : FLITE_MODEL;
}

int sipp_tts_sample_rate(const sipp_tts *t) {
    return t->gen ? sipp_tts_gen_rate(t->gen) : sipp_flite_voice_rate(t->voice);
}

const char *sipp_tts_voice_borrow(const sipp_tts *t, size_t i) {
    if (t->gen) return sipp_tts_gen_voice(t->gen, i);
    return sipp_flite_voice_name(i);
}

void sipp_tts_memory(const sipp_tts *t, sipp_memory *out) {
    memset(out, 0, sizeof *out);
    if (t->gen) sipp_tts_gen_memory(t->gen, out);
}

void sipp_tts_frames(sipp_tts *t, uint64_t *frames, uint64_t *decodes) {
    *frames = *decodes = 0;
    if (t->gen) sipp_tts_gen_frames(t->gen, frames, decodes);
}

uint64_t sipp_tts_memory_bytes(const sipp_tts *t) {
    sipp_memory m;
    sipp_tts_memory(t, &m);
    return sipp_memory_total(&m);
}

/* ---- one call ---------------------------------------------------------------------------------- */

typedef struct speak_call {
    sipp_tts *tts;
    const sipp_speak_options *o;
    const char *voice; /* flite's */
    int native_rate, rate;
    sipp_resampler *rs; /* NULL when the samples go out as the engine made them */
    int16_t *all;       /* what the caller gets back, when it asked */
    size_t n_all, cap_all;
    bool keep;
} speak_call;

static bool cancelled(const sipp_speak_options *o) {
    return o->cancel && __atomic_load_n(o->cancel, __ATOMIC_ACQUIRE);
}

static bool pair_voice(const sipp_tts_gen *g, const char *voice) {
    for (size_t i = 0; sipp_tts_gen_voice(g, i); i++)
        if (!strcmp(sipp_tts_gen_voice(g, i), voice)) return true;
    return false;
}

/* "default, alloy, ..." */
static void pair_voices(const sipp_tts_gen *g, char *out, size_t n) {
    size_t used = 0;
    out[0] = 0;
    for (size_t i = 0; sipp_tts_gen_voice(g, i) && used < n; i++)
        used += (size_t)snprintf(out + used, n - used, "%s%s", i ? ", " : "", sipp_tts_gen_voice(g, i));
}

static sipp_status check_options(sipp_tts *t, const char *text, const sipp_speak_options *o, speak_call *c) {
    if (!text) return tts_fail(t, SIPP_ERR_INVALID_ARGUMENT, "no text to speak");
    if (!sipp_utf8_valid(text, strlen(text)))
        return tts_fail(t, SIPP_ERR_INVALID_ARGUMENT, "the text is not UTF-8");
    if (!(o->speed >= SIPP_SPEED_MIN && o->speed <= SIPP_SPEED_MAX))
        return tts_fail(t, SIPP_ERR_INVALID_ARGUMENT, "speed %g is out of range: give %.2f to %.1f", o->speed,
                        SIPP_SPEED_MIN, SIPP_SPEED_MAX);
    if (o->sample_rate && (o->sample_rate < RATE_MIN || o->sample_rate > RATE_MAX))
        return tts_fail(t, SIPP_ERR_INVALID_ARGUMENT,
                        "sample rate %d Hz is out of range: give %d to %d, or 0", o->sample_rate, RATE_MIN,
                        RATE_MAX);
    c->voice = o->voice && *o->voice ? o->voice : t->voice;
    if (t->gen) {
        if (o->voice && *o->voice && !pair_voice(t->gen, o->voice)) {
            char list[VOICE_LIST_SIZE];
            pair_voices(t->gen, list, sizeof list);
            return tts_fail(t, SIPP_ERR_INVALID_ARGUMENT,
                            "unknown voice '%s' for this %s model (the voices: %s)", o->voice,
                            sipp_tts_gen_pipeline(t->gen), list);
        }
        char why[SIPP_ERROR_SIZE];
        if (!sipp_tts_gen_language_ok(t->gen, o->language, why, sizeof why))
            return tts_fail(t, SIPP_ERR_INVALID_ARGUMENT, "%s", why);
        c->native_rate = sipp_tts_gen_rate(t->gen);
    } else if (o->language && *o->language && strcmp(o->language, "en") && strcmp(o->language, "english")) {
        return tts_fail(t, SIPP_ERR_INVALID_ARGUMENT,
                        "language '%s': flite's voices speak English only; give en or leave it out",
                        o->language);
    } else if (!(c->native_rate = sipp_flite_voice_rate(c->voice))) {
        char list[128];
        sipp_flite_voice_list(list, sizeof list);
        return tts_fail(t, SIPP_ERR_INVALID_ARGUMENT, "unknown flite voice '%s' (the voices: %s)", c->voice,
                        list);
    }
    c->rate = o->sample_rate ? o->sample_rate : c->native_rate;
    return SIPP_OK;
}

/* flite changes its tempo itself; the GGUF pipelines are sped up by resampling. */
static double resample_speed(const speak_call *c) { return c->tts->gen ? c->o->speed : 1.0; }

/* Hands a piece on: to the callback, and into the clip the caller gets back. */
static sipp_status deliver(speak_call *c, const int16_t *s, size_t n) {
    if (!n) return SIPP_OK;
    if (c->o->on_audio && !c->o->on_audio(s, n, c->rate, c->o->user))
        return tts_fail(c->tts, SIPP_ERR_CANCELLED, "speech stopped by its receiver");
    if (!c->keep) return SIPP_OK;
    if (c->n_all + n > c->cap_all) {
        size_t cap = c->cap_all ? c->cap_all : 16384;
        while (cap < c->n_all + n)
            cap *= 2;
        int16_t *a = realloc(c->all, cap * sizeof *a);
        if (!a) return tts_fail(c->tts, SIPP_ERR_NO_MEMORY, "out of memory for %zu samples", c->n_all + n);
        c->all = a;
        c->cap_all = cap;
    }
    memcpy(c->all + c->n_all, s, n * sizeof *s);
    c->n_all += n;
    return SIPP_OK;
}

/* The engine's samples of one part (final: the last part), resampled when the call needs it. */
static sipp_status shape(speak_call *c, const int16_t *s, size_t n, bool final) {
    if (!c->rs) return deliver(c, s, n);
    int16_t *out = NULL;
    size_t n_out = 0, cap = 0;
    if (!sipp_resample(c->rs, s, n, final, &out, &n_out, &cap)) {
        free(out);
        return tts_fail(c->tts, SIPP_ERR_NO_MEMORY, "out of memory resampling %zu samples", n);
    }
    sipp_status st = deliver(c, out, n_out);
    free(out);
    return st;
}

static sipp_status speak_part(speak_call *c, const char *text, size_t len, bool final) {
    if (cancelled(c->o)) return tts_fail(c->tts, SIPP_ERR_CANCELLED, "speech cancelled");
    char err[SIPP_ERROR_SIZE];
    int16_t *s = NULL;
    size_t n = 0;
    sipp_status st;
    if (c->tts->gen) {
        st = sipp_tts_gen_speak(c->tts->gen, text, len, c->o, &s, &n, err);
    } else {
        char *piece = malloc(len + 1);
        if (!piece) return tts_fail(c->tts, SIPP_ERR_NO_MEMORY, "out of memory");
        memcpy(piece, text, len);
        piece[len] = 0;
        int rate;
        st = sipp_flite_speak(c->voice, piece, c->o->speed, &s, &n, &rate, err);
        free(piece);
    }
    if (st != SIPP_OK) {
        free(s);
        return tts_fail(c->tts, st, "%s", err);
    }
    st = shape(c, s, n, final);
    free(s);
    return st;
}

static sipp_status speak_parts(speak_call *c, const char *text) {
    size_t *parts, n_parts;
    if (sipp_speech_split(text, c->tts->gen ? GEN_PART_BYTES : 0, &parts, &n_parts) != SIPP_OK)
        return tts_fail(c->tts, SIPP_ERR_NO_MEMORY, "out of memory");
    if (!n_parts) {
        free(parts);
        return tts_fail(c->tts, SIPP_ERR_INVALID_ARGUMENT, "the text is empty: give something to say");
    }
    sipp_status st = SIPP_OK;
    for (size_t i = 0; i < n_parts && st == SIPP_OK; i++)
        st = speak_part(c, text + parts[2 * i], parts[2 * i + 1], i + 1 == n_parts);
    free(parts);
    return st;
}

sipp_status sipp_tts_speak(sipp_tts *t, const char *text, const sipp_speak_options *options,
                           int16_t **samples, size_t *n_samples, int *sample_rate) {
    if (!t) return SIPP_ERR_INVALID_ARGUMENT;
    sipp_speak_options defaults = sipp_speak_default_options();
    speak_call c = {.tts = t, .o = options ? options : &defaults, .keep = samples != NULL};
    if (samples) *samples = NULL;
    if (n_samples) *n_samples = 0;
    if (c.o->usage) memset(c.o->usage, 0, sizeof *c.o->usage);
    sipp_status st = check_options(t, text, c.o, &c);
    if (st != SIPP_OK) return st;
    double speed = resample_speed(&c);
    if (c.rate != c.native_rate || speed != 1.0) {
        c.rs = sipp_resampler_new(c.native_rate, c.rate, speed);
        if (!c.rs) return tts_fail(t, SIPP_ERR_NO_MEMORY, "out of memory");
    }
    st = speak_parts(&c, text);
    sipp_resampler_free(c.rs);
    if (st != SIPP_OK) {
        free(c.all);
        return st;
    }
    if (samples) {
        *samples = c.all ? c.all : calloc(1, sizeof **samples);
        if (n_samples) *n_samples = c.n_all;
    }
    if (sample_rate) *sample_rate = c.rate;
    return SIPP_OK;
}
