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
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "backend/backend.h"
#include "speech/speech.h"
#include "util/util.h"

#define WHISPER_FILE_MAGIC 0x67676d6cu
#define KV_PAD 256 /* whisper.cpp pads the caches' rows to this */
#define KV_BYTES 2 /* f16 */
#define F32_BYTES 4
#define CONV_FACTOR 6 /* the conv stage: twice the audio context, about three activations */
#define ENCODE_FACTOR 8
#define CROSS_FACTOR 2
#define DECODE_FACTOR 8         /* besides the logits */
#define COMPUTE_BASE (8u << 20) /* what the four graphs take whatever the shape (small models) */
#define PAD(n) (((n) + KV_PAD - 1) / KV_PAD * KV_PAD)

/* The header's hyperparameters, in the file's order after the magic. */
typedef struct whisper_hparams {
    int32_t n_vocab, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer;
    int32_t n_text_ctx, n_text_state, n_text_head, n_text_layer, n_mels, ftype;
} whisper_hparams;

static sipp_status read_header(const char *path, whisper_hparams *h, uint64_t *file_bytes, char *errbuf) {
    FILE *f = fopen(path, "rb");
    if (!f) return sipp_fail(errbuf, SIPP_ERR_NOT_FOUND, "whisper model '%s' cannot be opened", path);
    uint32_t magic = 0;
    bool ok = fread(&magic, sizeof magic, 1, f) == 1 && magic == WHISPER_FILE_MAGIC &&
              fread(h, sizeof *h, 1, f) == 1;
    struct stat st;
    ok = ok && fstat(fileno(f), &st) == 0;
    fclose(f);
    if (!ok || h->n_audio_ctx <= 0 || h->n_audio_state <= 0 || h->n_text_ctx <= 0 || h->n_text_state <= 0 ||
        h->n_text_layer <= 0 || h->n_vocab <= 0)
        return sipp_fail(errbuf, SIPP_ERR_MODEL,
                         "'%s' is not a whisper.cpp model (no ggml magic and header at its start)", path);
    *file_bytes = (uint64_t)st.st_size;
    return SIPP_OK;
}

/* One state's KV caches and compute buffers. */
static void state_bytes(const whisper_hparams *h, uint64_t *kv, uint64_t *compute) {
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
    whisper_hparams h;
    uint64_t weights = 0, kv = 0, compute = 0;
    sipp_status st = read_header(path, &h, &weights, errbuf);
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
