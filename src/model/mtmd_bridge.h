/*
 * mtmd_bridge.h: the calls into llama.cpp's libmtmd that can throw, behind one C++ file that lets no
 * exception cross into C (internal).
 *
 * libmtmd is C++ behind a C API, and some of its entry points allocate with std::vector or new: a
 * size taken from a file (an image's pixels, an audio clip's samples, a projector's tensors) that
 * cannot be had throws std::bad_alloc or std::length_error, and an exception reaching C code ends the
 * process (terminate). Each call below runs the libmtmd function it is given (mmproj.c resolves them
 * at run time) inside a try block and turns any exception into a sipp_status with its message, as
 * src/chat/chat_bridge.cpp does for llama.cpp's chat library. The calls that cannot throw (getters,
 * frees) are made from mmproj.c directly.
 */
#ifndef SIPP_MODEL_MTMD_BRIDGE_H
#define SIPP_MODEL_MTMD_BRIDGE_H

#include <stddef.h>

#include "mtmd-helper.h"
#include "mtmd.h"
#include "sipp.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef mtmd_context *(*sipp_mtmd_init_fn)(const char *, const struct llama_model *,
                                           struct mtmd_context_params);
typedef struct mtmd_helper_bitmap_wrapper (*sipp_mtmd_image_fn)(const mtmd_context *, const unsigned char *,
                                                                size_t, bool, struct mtmd_helper_init_opt);
typedef struct mtmd_helper_init_opt (*sipp_mtmd_opt_fn)(void);
typedef mtmd_bitmap *(*sipp_mtmd_audio_fn)(size_t, const float *);
typedef mtmd_input_chunks *(*sipp_mtmd_chunks_fn)(void);
typedef int32_t (*sipp_mtmd_tokenize_fn)(const mtmd_context *, mtmd_input_chunks *, const mtmd_input_text *,
                                         const mtmd_bitmap *const *, size_t);
typedef int32_t (*sipp_mtmd_eval_fn)(mtmd_context *, struct llama_context *, const mtmd_input_chunk *,
                                     llama_pos, llama_seq_id, int32_t, bool, llama_pos *);

/* Audio generation (libmtmd's helper: Qwen3-TTS, Pocket TTS). */
typedef mtmd_helper_gen_audio *(*sipp_mtmd_gen_init_fn)(struct llama_context *, mtmd_context *);
typedef int32_t (*sipp_mtmd_gen_input_fn)(mtmd_helper_gen_audio *, const struct mtmd_helper_gen_audio_inp *);
typedef int32_t (*sipp_mtmd_gen_prompt_fn)(mtmd_helper_gen_audio *, int32_t);
typedef int32_t (*sipp_mtmd_gen_step_fn)(mtmd_helper_gen_audio *, llama_token, const float *, const float **,
                                         bool *);
typedef int32_t (*sipp_mtmd_gen_output_fn)(mtmd_helper_gen_audio *, int32_t *, const char **, size_t *,
                                           int64_t *);
typedef int32_t (*sipp_mtmd_gen_process_fn)(mtmd_context *, const struct mtmd_gen_inp *,
                                            struct mtmd_gen_out *);

/* Each returns SIPP_OK with the function's result in *out, or, when it threw, SIPP_ERR_NO_MEMORY
 * (std::bad_alloc, std::length_error) or SIPP_ERR_INTERNAL (anything else) with "what: the
 * exception's message" in err. */
sipp_status sipp_mtmd_init(sipp_mtmd_init_fn fn, const char *path, const struct llama_model *lm,
                           struct mtmd_context_params params, mtmd_context **out, char *err);
sipp_status sipp_mtmd_image(sipp_mtmd_image_fn fn, sipp_mtmd_opt_fn opt, const mtmd_context *ctx,
                            const unsigned char *buf, size_t len, mtmd_bitmap **out, char *err);
sipp_status sipp_mtmd_audio(sipp_mtmd_audio_fn fn, size_t n_samples, const float *samples, mtmd_bitmap **out,
                            char *err);
sipp_status sipp_mtmd_chunks(sipp_mtmd_chunks_fn fn, mtmd_input_chunks **out, char *err);
sipp_status sipp_mtmd_tokenize(sipp_mtmd_tokenize_fn fn, const mtmd_context *ctx, mtmd_input_chunks *chunks,
                               const mtmd_input_text *text, const mtmd_bitmap *const *bitmaps, size_t n,
                               int32_t *out, char *err);
sipp_status sipp_mtmd_eval(sipp_mtmd_eval_fn fn, mtmd_context *ctx, struct llama_context *lctx,
                           const mtmd_input_chunk *chunk, llama_pos n_past, llama_seq_id seq, int32_t n_batch,
                           llama_pos *new_n_past, int32_t *out, char *err);

/* The audio generation helper's calls, each of which builds vectors, encodes or decodes: *out is the
 * call's own return value (0 for success, as libmtmd's header says). */
sipp_status sipp_mtmd_gen_init(sipp_mtmd_gen_init_fn fn, struct llama_context *lctx, mtmd_context *ctx,
                               mtmd_helper_gen_audio **out, char *err);
sipp_status sipp_mtmd_gen_input(sipp_mtmd_gen_input_fn fn, mtmd_helper_gen_audio *g,
                                const struct mtmd_helper_gen_audio_inp *inp, int32_t *out, char *err);
sipp_status sipp_mtmd_gen_prompt(sipp_mtmd_gen_prompt_fn fn, mtmd_helper_gen_audio *g, int32_t n_batch,
                                 int32_t *out, char *err);
sipp_status sipp_mtmd_gen_step(sipp_mtmd_gen_step_fn fn, mtmd_helper_gen_audio *g, llama_token sampled,
                               const float *h_in, const float **h_out, bool *stop, int32_t *out, char *err);
sipp_status sipp_mtmd_gen_output(sipp_mtmd_gen_output_fn fn, mtmd_helper_gen_audio *g, int32_t *rate,
                                 const char **data, size_t *len, int64_t *n_samples, int32_t *out, char *err);

sipp_status sipp_mtmd_gen_process(sipp_mtmd_gen_process_fn fn, mtmd_context *ctx,
                                  const struct mtmd_gen_inp *inp, struct mtmd_gen_out *o, int32_t *out,
                                  char *err);

#ifdef __cplusplus
}
#endif

#endif
