/*
 * whisper_bridge.cpp: libwhisper opened at run time, and its throwing calls inside try blocks (see
 * whisper_bridge.h). The only C++ of the speech layer.
 */
#include "speech/whisper_bridge.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>

#include <cstdio>
#include <cstring>
#include <new>
#include <stdexcept>

#define WHISPER_LIB "libwhisper.so"

static sipp_whisper_api api_table;
static bool api_ok;
static char api_error[SIPP_ERROR_SIZE];
static pthread_once_t api_once = PTHREAD_ONCE_INIT;

static void open_api(void) {
    const char *dir = sipp_runtime_artifact_dir();
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/" WHISPER_LIB, dir ? dir : ".");
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(api_error, sizeof api_error,
                 "this artifact has no %s (%.200s), so it cannot run whisper models; rebuild the artifact "
                 "with make (deps/build-whisper.sh builds it from the pinned whisper.cpp)",
                 WHISPER_LIB, dlerror());
        return;
    }
#define SIPP_WHISPER_RESOLVE(name)                                                                           \
    api_table.name = reinterpret_cast<decltype(api_table.name)>(dlsym(h, #name));                            \
    if (!api_table.name) {                                                                                   \
        snprintf(api_error, sizeof api_error, "%.200s has no %s: not the pinned whisper.cpp's library",      \
                 path, #name);                                                                               \
        return;                                                                                              \
    }
    SIPP_WHISPER_GETTERS(SIPP_WHISPER_RESOLVE)
    SIPP_WHISPER_THROWING(SIPP_WHISPER_RESOLVE)
#undef SIPP_WHISPER_RESOLVE
    api_ok = true;
}

extern "C" const sipp_whisper_api *sipp_whisper_open(char *err) {
    pthread_once(&api_once, open_api);
    if (api_ok) return &api_table;
    snprintf(err, SIPP_ERROR_SIZE, "%s", api_error);
    return nullptr;
}

/* Runs fn, turning whatever it throws into a status with `what` and the exception's message. */
template <typename F> static sipp_status guarded(const char *what, char *err, F fn) {
    try {
        fn();
        return SIPP_OK;
    } catch (const std::bad_alloc &e) {
        snprintf(err, SIPP_ERROR_SIZE, "%s: out of memory (%s)", what, e.what());
        return SIPP_ERR_NO_MEMORY;
    } catch (const std::length_error &e) {
        snprintf(err, SIPP_ERROR_SIZE, "%s: out of memory (%s)", what, e.what());
        return SIPP_ERR_NO_MEMORY;
    } catch (const std::exception &e) {
        snprintf(err, SIPP_ERROR_SIZE, "%s: %s", what, e.what());
        return SIPP_ERR_INTERNAL;
    } catch (...) {
        snprintf(err, SIPP_ERROR_SIZE, "%s: an unknown C++ exception", what);
        return SIPP_ERR_INTERNAL;
    }
}

extern "C" sipp_status sipp_whisper_init(const sipp_whisper_api *api, const char *path,
                                         struct whisper_context_params cp, struct whisper_context **out,
                                         char *err) {
    *out = nullptr;
    return guarded("libwhisper loading the model", err,
                   [&] { *out = api->whisper_init_from_file_with_params_no_state(path, cp); });
}

extern "C" sipp_status sipp_whisper_state_new(const sipp_whisper_api *api, struct whisper_context *ctx,
                                              struct whisper_state **out, char *err) {
    *out = nullptr;
    return guarded("libwhisper creating a state", err, [&] { *out = api->whisper_init_state(ctx); });
}

extern "C" sipp_status sipp_whisper_detect(const sipp_whisper_api *api, struct whisper_context *ctx,
                                           struct whisper_state *state, const float *samples, int n,
                                           int threads, float *probs, int *lang_id, char *err) {
    *lang_id = -1;
    return guarded("libwhisper detecting the language", err, [&] {
        if (api->whisper_pcm_to_mel_with_state(ctx, state, samples, n, threads) != 0)
            throw std::runtime_error("the mel spectrogram failed");
        *lang_id = api->whisper_lang_auto_detect_with_state(ctx, state, 0, threads, probs);
    });
}

extern "C" sipp_status sipp_whisper_full(const sipp_whisper_api *api, struct whisper_context *ctx,
                                         struct whisper_state *state, struct whisper_full_params params,
                                         const float *samples, int n, int *rc, char *err) {
    *rc = -1;
    return guarded("libwhisper transcribing", err,
                   [&] { *rc = api->whisper_full_with_state(ctx, state, params, samples, n); });
}

extern "C" sipp_status sipp_whisper_encode(const sipp_whisper_api *api, struct whisper_context *ctx,
                                           struct whisper_state *state, const float *samples, int n,
                                           int threads, char *err) {
    return guarded("libwhisper encoding the clip", err, [&] {
        if (api->whisper_pcm_to_mel_with_state(ctx, state, samples, n, threads) != 0)
            throw std::runtime_error("the mel spectrogram failed");
        if (api->whisper_encode_with_state(ctx, state, 0, threads) != 0)
            throw std::runtime_error("the encoder failed (its log says why)");
    });
}

extern "C" sipp_status sipp_whisper_decode(const sipp_whisper_api *api, struct whisper_context *ctx,
                                           struct whisper_state *state, const int32_t *tokens, int n_tokens,
                                           int n_past, int threads, char *err) {
    return guarded("libwhisper decoding", err, [&] {
        if (api->whisper_decode_with_state(ctx, state, tokens, n_tokens, n_past, threads) != 0)
            throw std::runtime_error("the decoder failed (its log says why)");
    });
}
