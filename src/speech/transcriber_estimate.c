/*
 * transcriber_estimate.c: what loading a whisper.cpp model will take, from its file's header alone
 * (sipp_transcriber_estimate), so that the gateway's residency can make room before the first load;
 * once loaded, the transcriber's measured memory (sipp_transcriber_memory) replaces it.
 *
 * The weights are the file's size. Each state (one per clip transcribed at once) holds three KV
 * caches whose sizes are whisper.cpp's own formulas (whisper_init_state: self-attention over the text
 * context, cross-attention and the padding cache over the audio context, rows padded to 256, f16) and
 * four compute buffers whose sizes ggml's allocator decides; those are approximated from the shapes
 * that dominate them (the conv and encoder activations over the audio context, the decoder's logits
 * over the vocabulary and text context), plus what the graphs take whatever the shape. On test-,
 * tiny- and base-shaped models the whole estimate is within 10% above what libwhisper reports, and
 * not below it.
 */
#include <string.h>

#include "backend/backend.h"
#include "speech/speech.h"
#include "store/whisper_file.h"
#include "util/util.h"

#define KV_PAD 256 /* whisper.cpp pads the caches' rows to this */
#define KV_BYTES 2 /* f16 */
#define F32_BYTES 4
#define CONV_FACTOR 6 /* the conv stage: twice the audio context, about three activations */
#define ENCODE_FACTOR 8
#define CROSS_FACTOR 2
#define DECODE_FACTOR 8         /* besides the logits */
#define COMPUTE_BASE (8u << 20) /* what the four graphs take whatever the shape (small models) */
#define PAD(n) (((n) + KV_PAD - 1) / KV_PAD * KV_PAD)

/* One state's KV caches and compute buffers. */
static void state_bytes(const sipp_whisper_hparams *h, uint64_t *kv, uint64_t *compute) {
    const uint64_t text = (uint64_t)h->n_text_state, audio_ctx = (uint64_t)h->n_audio_ctx;
    *kv = 2 * KV_BYTES *
          (text * (uint64_t)h->n_text_layer * (PAD((uint64_t)h->n_text_ctx) + PAD(audio_ctx)) +
           (uint64_t)h->n_audio_state * PAD(audio_ctx));
    *compute = COMPUTE_BASE +
               F32_BYTES * (audio_ctx * (uint64_t)h->n_audio_state * (CONV_FACTOR + ENCODE_FACTOR) +
                            audio_ctx * text * CROSS_FACTOR + (uint64_t)h->n_vocab * (uint64_t)h->n_text_ctx +
                            (uint64_t)h->n_text_ctx * text * DECODE_FACTOR);
}

sipp_status sipp_transcriber_estimate(const char *path, const sipp_transcriber_params *params,
                                      sipp_memory *out, char *errbuf) {
    memset(out, 0, sizeof *out);
    sipp_transcriber_params p = params ? *params : sipp_transcriber_default_params();
    sipp_whisper_hparams h;
    uint64_t weights = 0, kv = 0, compute = 0;
    sipp_status st = sipp_whisper_header_read(path, &h, &weights, errbuf);
    if (st != SIPP_OK) return st;
    sipp_backend_decision d;
    if ((st = sipp_backend_decide(p.backend, p.backend_order, &d, errbuf)) != SIPP_OK) return st;
    state_bytes(&h, &kv, &compute);
    const int states = p.parallel > 0 ? p.parallel : 1;
    const bool host = strcmp(d.backend, "cpu") == 0;
    const char *dev = host ? NULL : d.devices;
    const size_t dev_len = dev ? strcspn(dev, ",") : 0;
    sipp_memory_add(out, dev, dev_len, SIPP_MEMORY_WEIGHTS, weights);
    sipp_memory_add(out, dev, dev_len, SIPP_MEMORY_KV, kv * (uint64_t)states);
    sipp_memory_add(out, dev, dev_len, SIPP_MEMORY_COMPUTE, compute * (uint64_t)states);
    return SIPP_OK;
}
