/*
 * whisper_probe.h: what `sipp verify` compares of a whisper.cpp model on one backend (whisper_probe.c;
 * internal, the speech layer's interface for src/verify, which does not include whisper.h).
 *
 * whisper.cpp 1.9.1 keeps the encoder's output inside the opaque whisper_state (whisper_encode leaves
 * it where the decoder's cross-attention reads it) and exports no getter for it. What it does export
 * is the decoder's logits (whisper_get_logits_from_state), and every decoder position attends to the
 * whole encoder output, so a backend's encoder is checked through them: the clip is encoded once,
 * then the start-of-transcript prompt is decoded one token at a time and the logits after each token
 * are kept, the last row being those the first transcript token is chosen from.
 */
#ifndef SIPP_SPEECH_WHISPER_PROBE_H
#define SIPP_SPEECH_WHISPER_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include "sipp.h"

#define SIPP_WHISPER_PROBE_TOKENS 3 /* <|startoftranscript|>, <|en|>, <|transcribe|> */

typedef struct sipp_whisper_probe {
    int n_vocab;
    int n_tokens;                              /* the prompt: 3 on a multilingual model, else 1 */
    int32_t tokens[SIPP_WHISPER_PROBE_TOKENS]; /* as whisper_full builds it for English transcription */
    const char *token_names[SIPP_WHISPER_PROBE_TOKENS]; /* static, as whisper spells them: "<|en|>" */
    float *logits; /* n_tokens rows of n_vocab: row i after tokens[0..i] */
    bool multilingual;
    char model_type[16]; /* whisper.cpp's name of the size: "tiny" ... "large", or "unknown" */
    char backend[16];    /* the backend the transcriber runs on */
    char reason[256];    /* why the policy chose it */
    char device[64];     /* the ggml device: "CPU", "Vulkan0" */
    double load_ms, encode_ms, decode_ms;
    sipp_memory mem; /* what libwhisper reported allocating, by place */
} sipp_whisper_probe;

/* Loads the model on params' backend (sipp_transcriber_new, one state), encodes the 16 kHz mono
 * samples and decodes the prompt. A GPU backend on which libwhisper placed no weight (it found no GPU
 * device and fell back to the CPU) is SIPP_ERR_BACKEND: a comparison with itself would prove nothing.
 * On success out->logits is malloc'ed (sipp_whisper_probe_clear frees it). */
sipp_status sipp_whisper_probe_run(const char *path, const sipp_transcriber_params *params,
                                   const float *samples, size_t n_samples, sipp_whisper_probe *out,
                                   char *errbuf);
void sipp_whisper_probe_clear(sipp_whisper_probe *p);

#endif
