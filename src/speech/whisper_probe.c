/*
 * whisper_probe.c: a whisper.cpp model's encoder and first decoder steps on one backend, for sipp verify
 * (why the decoder's logits stand for the encoder output: whisper_probe.h).
 *
 * The model is loaded as a transcriber is (the same backend policy, the same libwhisper context
 * parameters, the same measured memory), so what verify proves holds for what `sipp transcribe` and
 * the gateway run. The prompt is the one whisper_full decodes a window from when transcribing English
 * with timestamps (whisper-cli's default): <|startoftranscript|>, then on a multilingual model the
 * language and the task. Each token is decoded in its own step after the ones before it (n_past), as
 * whisper_decode keeps only the last token's logits.
 */
#include "speech/whisper_probe.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "speech/speech.h"
#include "util/util.h"

#define PROBE_LANGUAGE "en"

/* The prompt whisper_full starts a window with, for English transcription. */
static void build_prompt(const sipp_transcriber *t, sipp_whisper_probe *p) {
    const sipp_whisper_api *api = t->api;
    p->n_tokens = 0;
    p->tokens[p->n_tokens] = api->whisper_token_sot(t->ctx);
    p->token_names[p->n_tokens++] = "<|startoftranscript|>";
    if (!p->multilingual) return;
    p->tokens[p->n_tokens] = api->whisper_token_lang(t->ctx, api->whisper_lang_id(PROBE_LANGUAGE));
    p->token_names[p->n_tokens++] = "<|" PROBE_LANGUAGE "|>";
    p->tokens[p->n_tokens] = api->whisper_token_transcribe(t->ctx);
    p->token_names[p->n_tokens++] = "<|transcribe|>";
}

/* libwhisper falls back to the CPU, saying so only in its log, when it finds no GPU device of the
 * ordinal it was given: a GPU backend must show its weights on the device. The KV caches' and compute
 * buffers' log lines name no place and are counted on the chosen device whatever happened
 * (transcriber.c), so the weights are what the device holds beyond them. */
static sipp_status check_placed(const sipp_transcriber *t, const char *path, char *errbuf) {
    uint64_t on_devices = 0;
    for (int i = 0; i < t->mem.n_devices; i++)
        on_devices += t->mem.devices[i].bytes;
    if (strcmp(t->backend, "cpu") == 0 || on_devices > t->mem.kv_bytes + t->mem.compute_bytes) return SIPP_OK;
    return sipp_fail(errbuf, SIPP_ERR_BACKEND,
                     "libwhisper placed no weight of '%s' on %s (%s): it found no GPU device and ran on the "
                     "CPU, so backend '%s' was not exercised; check the device with sipp doctor",
                     path, t->device, t->backend, t->backend);
}

/* The clip through the encoder, then the prompt through the decoder, one token a step. */
static sipp_status run_probe(sipp_transcriber *t, struct whisper_state *state, const float *samples, int n,
                             sipp_whisper_probe *p, char *errbuf) {
    const sipp_whisper_api *api = t->api;
    double t0 = sipp_now_ms();
    sipp_status st = sipp_whisper_encode(api, t->ctx, state, samples, n, t->threads, errbuf);
    if (st != SIPP_OK) return st;
    p->encode_ms = sipp_now_ms() - t0;
    t0 = sipp_now_ms();
    for (int i = 0; i < p->n_tokens; i++) {
        if ((st = sipp_whisper_decode(api, t->ctx, state, &p->tokens[i], 1, i, t->threads, errbuf)) !=
            SIPP_OK)
            return st;
        const float *row = api->whisper_get_logits_from_state(state);
        if (!row)
            return sipp_fail(errbuf, SIPP_ERR_INTERNAL, "libwhisper returned no logits after step %d", i);
        memcpy(p->logits + (size_t)i * (size_t)p->n_vocab, row, (size_t)p->n_vocab * sizeof *row);
    }
    p->decode_ms = sipp_now_ms() - t0;
    return SIPP_OK;
}

static void describe(const sipp_transcriber *t, sipp_whisper_probe *p) {
    const sipp_whisper_api *api = t->api;
    p->n_vocab = api->whisper_n_vocab(t->ctx);
    p->multilingual = api->whisper_is_multilingual(t->ctx) != 0;
    sipp_strlcpy(p->model_type, api->whisper_model_type_readable(t->ctx), sizeof p->model_type);
    sipp_strlcpy(p->backend, t->backend, sizeof p->backend);
    sipp_strlcpy(p->reason, t->reason, sizeof p->reason);
    sipp_strlcpy(p->device, t->device, sizeof p->device);
    p->mem = t->mem;
}

sipp_status sipp_whisper_probe_run(const char *path, const sipp_transcriber_params *params,
                                   const float *samples, size_t n_samples, sipp_whisper_probe *out,
                                   char *errbuf) {
    memset(out, 0, sizeof *out);
    if (!samples || n_samples == 0 || n_samples > INT_MAX)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "the clip has no samples, or too many");
    sipp_transcriber_params tp = *params;
    tp.parallel = 1;
    sipp_transcriber *t = NULL;
    double t0 = sipp_now_ms();
    sipp_status st = sipp_transcriber_new(path, &tp, &t, errbuf);
    if (st != SIPP_OK) return st;
    out->load_ms = sipp_now_ms() - t0;
    describe(t, out);
    if ((st = check_placed(t, path, errbuf)) != SIPP_OK) goto done;
    if (out->n_vocab <= 0) {
        st = sipp_fail(errbuf, SIPP_ERR_MODEL, "'%s' has an empty vocabulary", path);
        goto done;
    }
    build_prompt(t, out);
    if (!(out->logits = malloc((size_t)out->n_tokens * (size_t)out->n_vocab * sizeof *out->logits))) {
        st = sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory for the logits of '%s'", path);
        goto done;
    }
    st = run_probe(t, t->states[0], samples, (int)n_samples, out, errbuf); /* the only state, ours alone */
done:
    sipp_transcriber_free(t);
    if (st != SIPP_OK) sipp_whisper_probe_clear(out);
    return st;
}

void sipp_whisper_probe_clear(sipp_whisper_probe *p) {
    free(p->logits);
    p->logits = NULL;
}
