/*
 * tts_gen.h: speech from a Qwen3-TTS or Pocket TTS pair with libmtmd's audio generation (internal to
 * src/speech; tts.c is its only caller).
 */
#ifndef SIPP_SPEECH_TTS_GEN_H
#define SIPP_SPEECH_TTS_GEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sipp.h"

#define SIPP_TTS_DEFAULT_VOICE "default" /* a pair's own voice, or its speaker's */

typedef struct sipp_tts_gen sipp_tts_gen;

/* Loads params->model and params->mmproj; err: SIPP_ERROR_SIZE bytes. */
sipp_status sipp_tts_gen_load(const sipp_tts_params *params, sipp_tts_gen **out, char *err);
void sipp_tts_gen_free(sipp_tts_gen *g);

const char *sipp_tts_gen_pipeline(const sipp_tts_gen *g); /* "qwen3tts" or "pockettts" */
int sipp_tts_gen_rate(const sipp_tts_gen *g);
void sipp_tts_gen_memory(const sipp_tts_gen *g, sipp_memory *out); /* by place, measured at load */
/* Its voices: "default", then the named speakers; NULL past the end. */
const char *sipp_tts_gen_voice(const sipp_tts_gen *g, size_t i);
void sipp_tts_gen_frames(sipp_tts_gen *g, uint64_t *frames, uint64_t *decodes); /* sipp_tts_frames */

/* Whether the pipeline speaks language (a code or a name; NULL or empty: the default): Qwen3-TTS's
 * vocabulary has a token for each language it speaks; Pocket TTS takes none. False with why. */
bool sipp_tts_gen_language_ok(const sipp_tts_gen *g, const char *language, char *why, size_t n);

/* Speaks text[0..len) as llama-tts does: *out malloc'ed samples (*n) at the pipeline's rate. Stops with
 * SIPP_ERR_CANCELLED between frames once *o->cancel is set. Calls at once on one g take states
 * of their own (n_parallel), and wait for one when all are busy. */
sipp_status sipp_tts_gen_speak(sipp_tts_gen *g, const char *text, size_t len, const sipp_speak_options *o,
                               int16_t **out, size_t *n, char *err);

#endif
