/*
 * whisper_bridge.h: libwhisper (whisper.cpp), opened at run time, behind one C++ file that lets no
 * exception cross into C (internal).
 *
 * libwhisper is C++ behind a C API. Its loader and its decoder allocate with std::vector and new from
 * sizes a model file claims (a vocabulary of 2^31 tokens, a tensor of absurd shape) and throw
 * std::bad_alloc or std::runtime_error; an exception reaching C code ends the process. The calls that
 * can throw (loading, creating a state, the mel spectrogram, language detection, decoding) run inside a
 * try block here and end as a sipp_status with the exception's message. The getters and frees, which do
 * not allocate, are called from C through the table sipp_whisper_api() returns.
 *
 * libwhisper.so sits in the artifact beside libggml (deps/build-whisper.sh builds it against that
 * ggml); it is opened once per process with dlopen, like libmtmd (src/model/mmproj.c). An artifact
 * without it still runs llama models, and a transcriber says which module is missing and how to build
 * it.
 */
#ifndef SIPP_SPEECH_WHISPER_BRIDGE_H
#define SIPP_SPEECH_WHISPER_BRIDGE_H

#include <stddef.h>
#include <stdint.h>

#include "sipp.h"
#include "whisper.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The entry points that cannot throw, resolved from libwhisper.so. */
#define SIPP_WHISPER_GETTERS(X)                                                                              \
    X(whisper_free)                                                                                          \
    X(whisper_free_state)                                                                                    \
    X(whisper_context_default_params)                                                                        \
    X(whisper_full_default_params)                                                                           \
    X(whisper_log_set)                                                                                       \
    X(whisper_lang_id)                                                                                       \
    X(whisper_lang_str)                                                                                      \
    X(whisper_lang_max_id)                                                                                   \
    X(whisper_token_eot)                                                                                     \
    X(whisper_full_n_segments_from_state)                                                                    \
    X(whisper_full_get_segment_t0_from_state)                                                                \
    X(whisper_full_get_segment_t1_from_state)                                                                \
    X(whisper_full_get_segment_text_from_state)                                                              \
    X(whisper_full_get_segment_no_speech_prob_from_state)                                                    \
    X(whisper_full_n_tokens_from_state)                                                                      \
    X(whisper_full_get_token_text_from_state)                                                                \
    X(whisper_full_get_token_data_from_state)                                                                \
    X(whisper_n_vocab)                                                                                       \
    X(whisper_is_multilingual)                                                                               \
    X(whisper_model_type_readable)                                                                           \
    X(whisper_token_sot)                                                                                     \
    X(whisper_token_lang)                                                                                    \
    X(whisper_token_transcribe)                                                                              \
    X(whisper_get_logits_from_state)

/* The entry points that can throw: called only through the sipp_whisper_* functions below. */
#define SIPP_WHISPER_THROWING(X)                                                                             \
    X(whisper_init_from_file_with_params_no_state)                                                           \
    X(whisper_init_state)                                                                                    \
    X(whisper_pcm_to_mel_with_state)                                                                         \
    X(whisper_lang_auto_detect_with_state)                                                                   \
    X(whisper_full_with_state)                                                                               \
    X(whisper_encode_with_state)                                                                             \
    X(whisper_decode_with_state)

typedef struct sipp_whisper_api {
#define SIPP_WHISPER_FIELD(name) __typeof__(name) *name;
    SIPP_WHISPER_GETTERS(SIPP_WHISPER_FIELD)
    SIPP_WHISPER_THROWING(SIPP_WHISPER_FIELD)
#undef SIPP_WHISPER_FIELD
} sipp_whisper_api;

/* Opens libwhisper.so from the artifact in use (once per process) and returns its table, or NULL with
 * the reason in err: the module missing (and `make` to build it) or an entry point missing. */
const sipp_whisper_api *sipp_whisper_open(char *err);

/* Each returns SIPP_OK with the result, or SIPP_ERR_NO_MEMORY (std::bad_alloc, std::length_error) or
 * SIPP_ERR_INTERNAL (anything else thrown) with "what: the exception's message" in err. */
sipp_status sipp_whisper_init(const sipp_whisper_api *api, const char *path, struct whisper_context_params cp,
                              struct whisper_context **out, char *err);
sipp_status sipp_whisper_state_new(const sipp_whisper_api *api, struct whisper_context *ctx,
                                   struct whisper_state **out, char *err);
/* The mel spectrogram of the samples, then the language of the first window: its id and, in probs
 * (whisper_lang_max_id() + 1 floats), every language's probability. */
sipp_status sipp_whisper_detect(const sipp_whisper_api *api, struct whisper_context *ctx,
                                struct whisper_state *state, const float *samples, int n, int threads,
                                float *probs, int *lang_id, char *err);
/* whisper_full_with_state; *rc is its return (0: done, else failed or aborted). */
sipp_status sipp_whisper_full(const sipp_whisper_api *api, struct whisper_context *ctx,
                              struct whisper_state *state, struct whisper_full_params params,
                              const float *samples, int n, int *rc, char *err);

/* The mel spectrogram of the samples, then the encoder on its first window (whisper_encode_with_state at
 * offset 0): the encoder output stays in the state, where the decoder's cross-attention reads it. */
sipp_status sipp_whisper_encode(const sipp_whisper_api *api, struct whisper_context *ctx,
                                struct whisper_state *state, const float *samples, int n, int threads,
                                char *err);
/* One decoder step: n_tokens tokens after n_past kept ones; the last token's logits are then
 * api->whisper_get_logits_from_state(state) (n_vocab floats). */
sipp_status sipp_whisper_decode(const sipp_whisper_api *api, struct whisper_context *ctx,
                                struct whisper_state *state, const int32_t *tokens, int n_tokens, int n_past,
                                int threads, char *err);

#ifdef __cplusplus
}
#endif
#endif
