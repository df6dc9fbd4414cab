/*
 * whisper_case.h: sipp verify on a whisper.cpp model (whisper_case.c): the clip, one backend's
 * encoder and first decoder steps, and what the manifest records of them.
 */
#ifndef SIPP_VERIFY_WHISPER_CASE_H
#define SIPP_VERIFY_WHISPER_CASE_H

#include <jansson.h>
#include <stddef.h>

#include "sipp.h"
#include "speech/whisper_probe.h"
#include "verify/verify_types.h"

/* One backend's run on a whisper model. */
typedef struct verify_whisper_result {
    char backend[16]; /* as named: "vulkan", "cpu+fa" */
    bool ran;
    bool flash_attn;
    sipp_whisper_probe probe;
    verify_metrics vs_ref; /* the decoder's logits against the reference's */
    double max_rel;        /* vs_ref.max_abs over the largest |logit| of the reference */
} verify_whisper_result;

/* The clip every backend encodes: the WAV, MP3 or FLAC file at audio (decoded and resampled to 16 kHz
 * mono, at most one 30 s window), or with audio NULL a fixed synthetic one made here. *samples is
 * malloc'ed; *clip is the manifest's "clip" object (where it came from, its length, the samples'
 * sha256). SIPP_ERR_INVALID_ARGUMENT naming the file when it is not audio sipp can decode. */
sipp_status verify_whisper_clip(const char *audio, float **samples, size_t *n_samples, json_t **clip,
                                char *err);

/* The model's facts from its file: path, size, sha256, the recipe, the header's hyperparameters and
 * whisper.cpp's name of its size. NULL (message in err) for a file that is not a usable whisper.cpp
 * model: the whole file is walked first, so a forged or truncated file never reaches libwhisper. */
json_t *verify_whisper_model_json(const char *path, char *err);

/* Runs backend (a verify backend label, verify_backend_split) on the clip and, when ref is not NULL,
 * compares its logits with the reference's. */
sipp_status verify_whisper_run(const verify_config *cfg, const char *backend, const float *samples,
                               size_t n_samples, const verify_whisper_result *ref, verify_whisper_result *out,
                               char *err);
void verify_whisper_result_free(verify_whisper_result *r);

/* The manifest's "prompts": the decoder's prompt (its token ids, named). */
json_t *verify_whisper_prompts_json(const verify_whisper_result *ref);
/* One backend's entry of "backends": device, timings, memory, the top logits after each prompt token,
 * and against the reference ("vs_ref") the drift, with "max_rel_diff". */
json_t *verify_whisper_result_json(const verify_whisper_result *r, bool is_ref);

#endif
