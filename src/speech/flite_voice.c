/*
 * flite_voice.c: speech from flite (CMU's small synthesiser, Debian's flite1-dev), the voice sipp has
 * without any model file.
 *
 * The voices are compiled into their own libraries (libflite_cmu_us_slt.so, ...); each registers on
 * first use. flite is not reentrant (its lexicon and voice registration are global, and its error path
 * is a longjmp through a global jump buffer), so synthesis holds one process-wide lock; flite speaks
 * some hundred times faster than real time, so the lock costs a second caller little. A flite error
 * would exit the process unless cst_errjmp is set: it is set around every call into flite, and a
 * longjmp back becomes an error naming the text's voice (what flite allocated for that utterance is
 * lost, which is better than losing the process).
 *
 * flite's voices draw their unvoiced excitation from libc's rand(), so the same text would sound a
 * little different each time in one process; each utterance starts from srand(FLITE_SEED) under the
 * lock, so a text always gives the same samples (the streamed and the whole clip of one text are equal).
 *
 * Speed is flite's "duration_stretch" on the utterance (the voice's own tempo control: the pitch
 * stays), set on the utterance so that two callers never see each other's speed.
 */
#include "speech/flite_voice.h"

#include <flite/flite.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

#define FLITE_SEED 1 /* libc rand()'s seed at each utterance */

/* The voice libraries' entry points (they ship no header). */
cst_voice *register_cmu_us_kal(const char *voxdir);
cst_voice *register_cmu_us_kal16(const char *voxdir);
cst_voice *register_cmu_us_slt(const char *voxdir);
cst_voice *register_cmu_us_rms(const char *voxdir);
cst_voice *register_cmu_us_awb(const char *voxdir);

typedef struct {
    const char *name;
    cst_voice *(*reg)(const char *voxdir);
    int rate;
    cst_voice *voice; /* registered on first use, under the lock */
} flite_entry;

static flite_entry voices[] = {
    {"kal", register_cmu_us_kal, 8000, NULL},  {"kal16", register_cmu_us_kal16, 16000, NULL},
    {"slt", register_cmu_us_slt, 16000, NULL}, {"rms", register_cmu_us_rms, 16000, NULL},
    {"awb", register_cmu_us_awb, 16000, NULL},
};
#define N_VOICES (sizeof voices / sizeof voices[0])

static pthread_mutex_t flite_lock = PTHREAD_MUTEX_INITIALIZER;
static bool flite_ready;

const char *sipp_flite_voice_name(size_t i) { return i < N_VOICES ? voices[i].name : NULL; }

static flite_entry *find(const char *name) {
    for (size_t i = 0; i < N_VOICES; i++)
        if (name && !strcmp(voices[i].name, name)) return &voices[i];
    return NULL;
}

int sipp_flite_voice_rate(const char *name) {
    flite_entry *v = find(name);
    return v ? v->rate : 0;
}

void sipp_flite_voice_list(char *buf, size_t cap) {
    size_t len = 0;
    if (cap) buf[0] = 0;
    for (size_t i = 0; i < N_VOICES && len < cap; i++) {
        int w = snprintf(buf + len, cap - len, "%s%s", i ? ", " : "", voices[i].name);
        if (w < 0) break;
        len += (size_t)w;
    }
}

/* The utterance's wave, synthesised with the speed set on it; NULL when flite failed. Called with
 * flite_lock held and cst_errjmp set. */
static cst_utterance *synth(cst_voice *voice, const char *text, float speed) {
    cst_utterance *u = new_utterance();
    utt_set_input_text(u, text);
    utt_init(u, voice);
    feat_set_float(u->features, "duration_stretch", 1.0f / speed);
    if (utt_synth(u) == NULL) {
        delete_utterance(u);
        return NULL;
    }
    return u;
}

static sipp_status take_samples(const cst_wave *w, int16_t **out, size_t *n, int *rate, char *err) {
    size_t count = w && w->num_samples > 0 ? (size_t)w->num_samples : 0;
    *out = malloc(count ? count * sizeof **out : 1);
    if (!*out) return sipp_fail(err, SIPP_ERR_NO_MEMORY, "flite: out of memory for %zu samples", count);
    if (count) memcpy(*out, w->samples, count * sizeof **out);
    *n = count;
    *rate = w ? w->sample_rate : 0;
    return SIPP_OK;
}

/* The synthesis itself, with flite_lock held. */
static sipp_status speak_locked(flite_entry *v, const char *text, float speed, int16_t **out, size_t *n,
                                int *rate, char *err) {
    static jmp_buf jump; /* flite's error path; guarded by flite_lock */
    if (!flite_ready) {
        flite_init();
        flite_ready = true;
    }
    cst_errjmp = &jump;
    if (setjmp(jump)) {
        cst_errjmp = NULL;
        return sipp_fail(err, SIPP_ERR_INTERNAL,
                         "flite voice '%s' failed on the text (flite's message is on stderr)", v->name);
    }
    if (!v->voice) v->voice = v->reg(NULL);
    srand(FLITE_SEED);
    cst_utterance *u = v->voice ? synth(v->voice, text, speed) : NULL;
    cst_errjmp = NULL;
    if (!v->voice)
        return sipp_fail(err, SIPP_ERR_INTERNAL, "flite voice '%s' could not be registered", v->name);
    if (!u)
        return sipp_fail(err, SIPP_ERR_INTERNAL, "flite voice '%s' could not synthesise the text", v->name);
    sipp_status st = take_samples(utt_wave(u), out, n, rate, err);
    delete_utterance(u);
    return st;
}

sipp_status sipp_flite_speak(const char *voice, const char *text, float speed, int16_t **out, size_t *n,
                             int *rate, char *err) {
    *out = NULL;
    *n = 0;
    flite_entry *v = find(voice);
    if (!v) {
        char list[128];
        sipp_flite_voice_list(list, sizeof list);
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "unknown flite voice '%s' (the voices: %s)",
                         voice ? voice : "", list);
    }
    pthread_mutex_lock(&flite_lock);
    sipp_status st = speak_locked(v, text, speed, out, n, rate, err);
    pthread_mutex_unlock(&flite_lock);
    if (st == SIPP_OK && *rate <= 0) *rate = v->rate;
    return st;
}
