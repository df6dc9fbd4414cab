/*
 * tts_batch.h: one backbone context shared by a Qwen3-TTS voice's calls, their frames decoded together
 * in one batch (internal to src/speech; tts_gen.c is its only caller).
 */
#ifndef SIPP_SPEECH_TTS_BATCH_H
#define SIPP_SPEECH_TTS_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "llama.h"
#include "model/mmproj.h"
#include "model/model.h"
#include "sipp.h"

typedef struct sipp_tts_backbone sipp_tts_backbone;

/* A context of m made from cp with one sequence for each of n_seq calls (cp.n_ctx is each sequence's),
 * and the Qwen3-TTS tokens and embedding row its frames need (from m's vocabulary and m->path).
 * err: SIPP_ERROR_SIZE bytes. */
sipp_status sipp_tts_backbone_new(const sipp_model *m, struct llama_context_params cp, int n_seq,
                                  sipp_tts_backbone **out, char *err);
void sipp_tts_backbone_free(sipp_tts_backbone *bb);
struct llama_context *sipp_tts_backbone_context(const sipp_tts_backbone *bb);
/* The frames' rows decoded so far and the decodes they took (rows / decodes: the mean batch). */
void sipp_tts_backbone_counts(sipp_tts_backbone *bb, uint64_t *rows, uint64_t *decodes);

/* One piece of text on sequence seq, as llama-tts speaks it: inp's prompt through gen (a helper on the
 * backbone's context, with its own projector), then frame by frame until the end token or max_frames,
 * each frame's backbone row decoded in one batch with the other calls' rows. *pcm malloc'ed floats
 * (*n) at the pipeline's rate; usage (or NULL) gains the prompt's rows and the frames. Stops with
 * SIPP_ERR_CANCELLED between frames once *cancel is set. */
sipp_status sipp_tts_batch_speak(sipp_tts_backbone *bb, int seq, sipp_gen_audio *gen,
                                 const struct mtmd_helper_gen_audio_inp *inp, struct llama_sampler *smpl,
                                 int max_frames, const volatile bool *cancel, float **pcm, size_t *n,
                                 sipp_speak_usage *usage, char *err);

#endif
