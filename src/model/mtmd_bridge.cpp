/*
 * mtmd_bridge.cpp: libmtmd's throwing calls, with every exception caught (see mtmd_bridge.h).
 */
#include "model/mtmd_bridge.h"

#include <cstdio>
#include <exception>
#include <new>
#include <stdexcept>

namespace {

/* Runs f; an exception becomes a status naming `what` and the exception's text. */
template <typename F> sipp_status guarded(char *err, const char *what, F &&f) {
    try {
        f();
        return SIPP_OK;
    } catch (const std::bad_alloc &e) {
        snprintf(err, SIPP_ERROR_SIZE, "%s: out of memory (%s)", what, e.what());
        return SIPP_ERR_NO_MEMORY;
    } catch (const std::length_error &e) {
        snprintf(err, SIPP_ERROR_SIZE, "%s: a size past what can be allocated (%s)", what, e.what());
        return SIPP_ERR_NO_MEMORY;
    } catch (const std::exception &e) {
        snprintf(err, SIPP_ERROR_SIZE, "%s: %s", what, e.what());
        return SIPP_ERR_INTERNAL;
    } catch (...) {
        snprintf(err, SIPP_ERROR_SIZE, "%s: an unknown failure in libmtmd", what);
        return SIPP_ERR_INTERNAL;
    }
}

} // namespace

extern "C" {

sipp_status sipp_mtmd_init(sipp_mtmd_init_fn fn, const char *path, const struct llama_model *lm,
                           struct mtmd_context_params params, mtmd_context **out, char *err) {
    *out = nullptr;
    return guarded(err, "libmtmd failed to load the projector", [&] { *out = fn(path, lm, params); });
}

sipp_status sipp_mtmd_image(sipp_mtmd_image_fn fn, sipp_mtmd_opt_fn opt, const mtmd_context *ctx,
                            const unsigned char *buf, size_t len, mtmd_bitmap **out, char *err) {
    *out = nullptr;
    return guarded(err, "libmtmd failed to decode the image",
                   [&] { *out = fn(ctx, buf, len, false, opt()).bitmap; });
}

sipp_status sipp_mtmd_audio(sipp_mtmd_audio_fn fn, size_t n_samples, const float *samples, mtmd_bitmap **out,
                            char *err) {
    *out = nullptr;
    return guarded(err, "libmtmd failed to take the audio samples", [&] { *out = fn(n_samples, samples); });
}

sipp_status sipp_mtmd_chunks(sipp_mtmd_chunks_fn fn, mtmd_input_chunks **out, char *err) {
    *out = nullptr;
    return guarded(err, "libmtmd failed to start a prompt", [&] { *out = fn(); });
}

sipp_status sipp_mtmd_tokenize(sipp_mtmd_tokenize_fn fn, const mtmd_context *ctx, mtmd_input_chunks *chunks,
                               const mtmd_input_text *text, const mtmd_bitmap *const *bitmaps, size_t n,
                               int32_t *out, char *err) {
    *out = -1;
    return guarded(err, "libmtmd failed to prepare the media",
                   [&] { *out = fn(ctx, chunks, text, bitmaps, n); });
}

sipp_status sipp_mtmd_eval(sipp_mtmd_eval_fn fn, mtmd_context *ctx, struct llama_context *lctx,
                           const mtmd_input_chunk *chunk, llama_pos n_past, llama_seq_id seq, int32_t n_batch,
                           llama_pos *new_n_past, int32_t *out, char *err) {
    *out = -1;
    return guarded(err, "libmtmd failed to encode the media",
                   [&] { *out = fn(ctx, lctx, chunk, n_past, seq, n_batch, false, new_n_past); });
}

sipp_status sipp_mtmd_gen_init(sipp_mtmd_gen_init_fn fn, struct llama_context *lctx, mtmd_context *ctx,
                               mtmd_helper_gen_audio **out, char *err) {
    *out = nullptr;
    return guarded(err, "libmtmd failed to start audio generation", [&] { *out = fn(lctx, ctx); });
}

sipp_status sipp_mtmd_gen_input(sipp_mtmd_gen_input_fn fn, mtmd_helper_gen_audio *g,
                                const struct mtmd_helper_gen_audio_inp *inp, int32_t *out, char *err) {
    *out = -1;
    return guarded(err, "libmtmd failed to prepare the text to speak", [&] { *out = fn(g, inp); });
}

sipp_status sipp_mtmd_gen_prompt(sipp_mtmd_gen_prompt_fn fn, mtmd_helper_gen_audio *g, int32_t n_batch,
                                 int32_t *out, char *err) {
    *out = -1;
    return guarded(err, "libmtmd failed to read the text to speak", [&] { *out = fn(g, n_batch); });
}

sipp_status sipp_mtmd_gen_step(sipp_mtmd_gen_step_fn fn, mtmd_helper_gen_audio *g, llama_token sampled,
                               const float *h_in, const float **h_out, bool *stop, int32_t *out, char *err) {
    *out = -1;
    *h_out = nullptr;
    return guarded(err, "libmtmd failed to generate an audio frame",
                   [&] { *out = fn(g, sampled, h_in, h_out, stop); });
}

sipp_status sipp_mtmd_gen_output(sipp_mtmd_gen_output_fn fn, mtmd_helper_gen_audio *g, int32_t *rate,
                                 const char **data, size_t *len, int64_t *n_samples, int32_t *out,
                                 char *err) {
    *out = -1;
    return guarded(err, "libmtmd failed to turn the frames into audio",
                   [&] { *out = fn(g, rate, data, len, n_samples); });
}

sipp_status sipp_mtmd_gen_process(sipp_mtmd_gen_process_fn fn, mtmd_context *ctx,
                                  const struct mtmd_gen_inp *inp, struct mtmd_gen_out *o, int32_t *out,
                                  char *err) {
    *out = -1;
    *o = {};
    return guarded(err, "libmtmd failed a generation step", [&] { *out = fn(ctx, inp, o); });
}

} // extern "C"
