/*
 * projector.c: sipp-synth --projector, a multimodal projector (an "mmproj" GGUF) with random weights
 * that llama.cpp's mtmd (tools/mtmd/clip.cpp) loads beside a synthetic text model, so that images and
 * audio can be tested where no real vision or audio model can be downloaded.
 *
 * Design
 *   - What mtmd reads.  general.architecture "clip", clip.has_{vision,audio}_encoder,
 *     clip.projector_type, and per modality ("vision" or "audio") clip.M.embedding_length,
 *     feed_forward_length, block_count, projection_dim, attention.head_count and
 *     attention.layer_norm_epsilon; a vision file adds image_size, patch_size, image_mean and
 *     image_std, an audio file num_mel_bins.  Tensor names and shapes follow clip-impl.h's TN_*
 *     names and the graphs of models/llava.cpp and models/whisper-enc.cpp, in ggml order.
 *   - llava (vision, projector type "mlp").  A CLIP ViT: a patch-embedding convolution
 *     {patch, patch, 3, width}, learned position embeddings {width, n_patches}, a pre-norm and
 *     ENC_LAYERS pre-norm blocks with biased attention and a GELU FFN; then LLaVA-1.5's projector
 *     mm.0 {width, n_embd}, GELU, mm.2 {n_embd, n_embd}.  As in LLaVA, mtmd takes the features of
 *     the second-to-last block, so the last block is loaded but not run.  mtmd resizes every image
 *     to image_size square: an image is always (image_size / patch_size)^2 embeddings.
 *   - qwen2a (audio).  Qwen2-Audio's Whisper encoder: two 1-D convolutions over NUM_MEL_BINS mel bins
 *     (the second of stride 2), position embeddings for WHISPER_POSITIONS frames, ENC_LAYERS blocks
 *     (no bias on attn_k, as Whisper), an average pool of 2 and a post-norm, then one linear
 *     projection mm.a.fc into n_embd.  mtmd cuts 16 kHz audio into 30 s chunks of 3000 mel frames
 *     (a shorter clip is padded to one), and a chunk is 3000 / 2 / 2 = 750 embeddings.  Of the audio
 *     projectors at this commit it is the simplest: Ultravox needs frame stacking and a SwiGLU
 *     adapter, the others extra convolutions or norms.
 *   - Weights.  Matrices and kernels are drawn with std 1/sqrt(fan-in), so each layer's output keeps
 *     about the scale of its input and the projected embeddings are O(1) like a text model's; norm
 *     weights are ones, biases zeros, position embeddings small noise.  Matrices take --type (f16 or
 *     f32: mtmd's im2col convolutions take no quantized kernels); norms, biases and position
 *     embeddings stay f32, as llama.cpp's converter writes them.
 */

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "synth.h"

/* the encoder both kinds share: small enough that loading and a warm-up take well under a second */
#define ENC_WIDTH 64
#define ENC_HEADS 4
#define ENC_FF                                                                                               \
    128 /* not ENC_WIDTH: mtmd swaps ffn_up and ffn_down of old llava files when they are equal              \
         */
#define ENC_LAYERS 2
#define ENC_NORM_EPS 1e-5f
#define POS_EMBD_STD 0.02f

#define IMAGE_CHANNELS 3
#define NUM_MEL_BINS 128       /* Qwen2-Audio's */
#define CONV1D_KERNEL 3        /* Whisper's convolutions */
#define WHISPER_POSITIONS 1500 /* 3000 frames of a 30 s chunk, halved by the stride-2 convolution */

/* CLIP's (OpenAI) normalization, what llava's image processor uses */
static const float IMAGE_MEAN[IMAGE_CHANNELS] = {0.48145466f, 0.4578275f, 0.40821073f};
static const float IMAGE_STD[IMAGE_CHANNELS] = {0.26862954f, 0.26130258f, 0.27577711f};

#define MAX_IMAGE_TOKENS 4096 /* (image_size / patch_size)^2: a typo, not a test model, past this */
#define MESSAGE_BUF 256
#define KEY_BUF 128
#define NAME_BUF GGML_MAX_NAME
#define MAX_TENSORS_FIXED 16 /* the tensors outside the blocks, for either kind */
#define MAX_TENSORS_PER_BLOCK 16

enum modality { MODALITY_VISION, MODALITY_AUDIO };

struct projector_kind {
    const char *name; /* --projector NAME */
    const char *type; /* clip.projector_type */
    enum modality modality;
};

static const struct projector_kind KINDS[] = {
    {"llava", "mlp", MODALITY_VISION},
    {"qwen2a", "qwen2a", MODALITY_AUDIO},
};

#define KIND_COUNT (sizeof(KINDS) / sizeof(KINDS[0]))

const struct projector_kind *projector_find(const char *name) {
    for (size_t i = 0; i < KIND_COUNT; i++)
        if (strcmp(KINDS[i].name, name) == 0) return &KINDS[i];
    return NULL;
}

const char *projector_names(void) { return "llava (vision) or qwen2a (audio)"; }

const char *projector_check(const struct options *o) {
    static char msg[MESSAGE_BUF];
    if (o->wtype->type != GGML_TYPE_F16 && o->wtype->type != GGML_TYPE_F32) {
        snprintf(msg, sizeof(msg),
                 "--projector: --type %s is not f16 or f32 (mtmd's convolutions take no "
                 "quantized kernels)",
                 o->wtype->name);
        return msg;
    }
    if (o->projector->modality != MODALITY_VISION) return NULL;
    if (o->image_size % o->patch_size != 0) {
        snprintf(msg, sizeof(msg), "--patch-size %" PRId64 " does not divide --image-size %" PRId64,
                 o->patch_size, o->image_size);
        return msg;
    }
    const int64_t side = o->image_size / o->patch_size;
    if (side * side > MAX_IMAGE_TOKENS) {
        snprintf(msg, sizeof(msg),
                 "--image-size %" PRId64 " / --patch-size %" PRId64 " gives %" PRId64
                 " tokens an image; at most %d",
                 o->image_size, o->patch_size, side * side, MAX_IMAGE_TOKENS);
        return msg;
    }
    return NULL;
}

/* ---------------------------------------------------------------------------------------------- */
/* tensors                                                                                         */

/* A matrix or kernel of the given shape, drawn with std 1/sqrt(fan-in): every dimension but the
 * last (the outputs) feeds each output. */
static void add_weight(struct plan *p, enum ggml_type type, int n_dims, const int64_t ne[4], const char *fmt,
                       ...) __attribute__((format(printf, 5, 6)));
static void add_weight(struct plan *p, enum ggml_type type, int n_dims, const int64_t ne[4], const char *fmt,
                       ...) {
    char name[NAME_BUF];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof(name), fmt, ap);
    va_end(ap);
    int64_t fan_in = 1;
    for (int k = 0; k < n_dims - 1; k++)
        fan_in *= ne[k];
    plan_add_nd(p, name, n_dims, ne, type, 1.0f / sqrtf((float)fan_in));
}

static void add_matrix(struct plan *p, enum ggml_type type, int64_t n_in, int64_t n_out, const char *name) {
    add_weight(p, type, 2, (const int64_t[4]){n_in, n_out, 1, 1}, "%s", name);
}

/* A bias: f32 zeros, of shape {n} (or {1, n} for a convolution's, which broadcasts over positions). */
static void add_bias(struct plan *p, const char *name, int n_dims, int64_t n) {
    const int64_t ne[4] = {n_dims == 1 ? n : 1, n, 1, 1};
    plan_add_nd(p, name, n_dims, ne, GGML_TYPE_F32, 0.0f)->zero = true;
}

/* A layer norm: f32 weight of ones and bias of zeros, named PREFIX.weight and PREFIX.bias. */
static void add_norm(struct plan *p, const char *prefix, int64_t n) {
    char name[NAME_BUF];
    snprintf(name, sizeof(name), "%s.weight", prefix);
    plan_add_nd(p, name, 1, (const int64_t[4]){n, 1, 1, 1}, GGML_TYPE_F32, 0.0f);
    snprintf(name, sizeof(name), "%s.bias", prefix);
    add_bias(p, name, 1, n);
}

/* A linear layer PREFIX.weight {n_in, n_out} and, with_bias, PREFIX.bias {n_out}. */
static void add_linear(struct plan *p, enum ggml_type type, const char *prefix, int64_t n_in, int64_t n_out,
                       bool with_bias) {
    char name[NAME_BUF];
    snprintf(name, sizeof(name), "%s.weight", prefix);
    add_matrix(p, type, n_in, n_out, name);
    if (with_bias) {
        snprintf(name, sizeof(name), "%s.bias", prefix);
        add_bias(p, name, 1, n_out);
    }
}

/* The linear layers of an encoder block: PFX.blk.N.PART.{weight,bias} */
static const struct {
    const char *part;
    int64_t n_in, n_out;
} BLOCK_LINEARS[] = {
    {"attn_q", ENC_WIDTH, ENC_WIDTH},   {"attn_k", ENC_WIDTH, ENC_WIDTH}, {"attn_v", ENC_WIDTH, ENC_WIDTH},
    {"attn_out", ENC_WIDTH, ENC_WIDTH}, {"ffn_up", ENC_WIDTH, ENC_FF},    {"ffn_down", ENC_FF, ENC_WIDTH},
};

/* The transformer blocks of clip.cpp's build_vit and llava graph: PFX.blk.N.* (TN_ATTN_*, TN_LN_*,
 * TN_FFN_*), two layer norms and the linear layers above.  Whisper has no bias on its key projection. */
static void add_blocks(struct plan *p, enum ggml_type type, const char *pfx, bool key_bias) {
    char prefix[NAME_BUF];
    for (int il = 0; il < ENC_LAYERS; il++) {
        for (int norm = 1; norm <= 2; norm++) {
            snprintf(prefix, sizeof(prefix), "%s.blk.%d.ln%d", pfx, il, norm);
            add_norm(p, prefix, ENC_WIDTH);
        }
        for (size_t k = 0; k < sizeof(BLOCK_LINEARS) / sizeof(BLOCK_LINEARS[0]); k++) {
            snprintf(prefix, sizeof(prefix), "%s.blk.%d.%s", pfx, il, BLOCK_LINEARS[k].part);
            const bool bias = key_bias || strcmp(BLOCK_LINEARS[k].part, "attn_k") != 0;
            add_linear(p, type, prefix, BLOCK_LINEARS[k].n_in, BLOCK_LINEARS[k].n_out, bias);
        }
    }
}

static void plan_llava(struct plan *p, const struct options *o) {
    const enum ggml_type wt = o->wtype->type;
    const int64_t side = o->image_size / o->patch_size;
    add_weight(p, wt, 4, (const int64_t[4]){o->patch_size, o->patch_size, IMAGE_CHANNELS, ENC_WIDTH},
               "v.patch_embd.weight");
    plan_add_nd(p, "v.position_embd.weight", 2, (const int64_t[4]){ENC_WIDTH, side * side, 1, 1},
                GGML_TYPE_F32, POS_EMBD_STD);
    add_norm(p, "v.pre_ln", ENC_WIDTH);
    add_blocks(p, wt, "v", true);
    add_linear(p, wt, "mm.0", ENC_WIDTH, o->n_embd, true);
    add_linear(p, wt, "mm.2", o->n_embd, o->n_embd, true);
}

static void plan_qwen2a(struct plan *p, const struct options *o) {
    const enum ggml_type wt = o->wtype->type;
    add_weight(p, wt, 3, (const int64_t[4]){CONV1D_KERNEL, NUM_MEL_BINS, ENC_WIDTH, 1}, "a.conv1d.1.weight");
    add_bias(p, "a.conv1d.1.bias", 2, ENC_WIDTH);
    add_weight(p, wt, 3, (const int64_t[4]){CONV1D_KERNEL, ENC_WIDTH, ENC_WIDTH, 1}, "a.conv1d.2.weight");
    add_bias(p, "a.conv1d.2.bias", 2, ENC_WIDTH);
    plan_add_nd(p, "a.position_embd.weight", 2, (const int64_t[4]){ENC_WIDTH, WHISPER_POSITIONS, 1, 1},
                GGML_TYPE_F32, POS_EMBD_STD);
    add_blocks(p, wt, "a", false);
    add_norm(p, "a.post_ln", ENC_WIDTH);
    add_linear(p, wt, "mm.a.fc", ENC_WIDTH, o->n_embd, true);
}

/* ---------------------------------------------------------------------------------------------- */
/* metadata                                                                                        */

static void set_modality_u32(struct gguf_context *ctx, const char *modality, const char *suffix,
                             int64_t val) {
    char key[KEY_BUF];
    snprintf(key, sizeof(key), "clip.%s.%s", modality, suffix);
    gguf_set_val_u32(ctx, key, (uint32_t)val);
}

static void build_keys(struct gguf_context *ctx, const struct options *o) {
    const bool vision = o->projector->modality == MODALITY_VISION;
    const char *modality = vision ? "vision" : "audio";
    char desc[MESSAGE_BUF];
    snprintf(desc, sizeof(desc),
             "synthetic random-weight %s projector (%s) written by sipp-synth (seed %" PRIu64 ")", modality,
             o->projector->name, o->seed);

    gguf_set_val_str(ctx, "general.architecture", "clip");
    gguf_set_val_str(ctx, "general.name", o->name);
    gguf_set_val_str(ctx, "general.description", desc);
    gguf_set_val_u32(ctx, "general.file_type", o->wtype->file_type);
    gguf_set_val_bool(ctx, "clip.has_vision_encoder", vision);
    gguf_set_val_bool(ctx, "clip.has_audio_encoder", !vision);
    gguf_set_val_str(ctx, "clip.projector_type", o->projector->type);

    set_modality_u32(ctx, modality, "embedding_length", ENC_WIDTH);
    set_modality_u32(ctx, modality, "feed_forward_length", ENC_FF);
    set_modality_u32(ctx, modality, "block_count", ENC_LAYERS);
    set_modality_u32(ctx, modality, "projection_dim", o->n_embd);
    set_modality_u32(ctx, modality, "attention.head_count", ENC_HEADS);
    char key[KEY_BUF];
    snprintf(key, sizeof(key), "clip.%s.attention.layer_norm_epsilon", modality);
    gguf_set_val_f32(ctx, key, ENC_NORM_EPS);

    if (vision) {
        set_modality_u32(ctx, modality, "image_size", o->image_size);
        set_modality_u32(ctx, modality, "patch_size", o->patch_size);
        gguf_set_arr_data(ctx, "clip.vision.image_mean", GGUF_TYPE_FLOAT32, IMAGE_MEAN, IMAGE_CHANNELS);
        gguf_set_arr_data(ctx, "clip.vision.image_std", GGUF_TYPE_FLOAT32, IMAGE_STD, IMAGE_CHANNELS);
    } else {
        set_modality_u32(ctx, modality, "num_mel_bins", NUM_MEL_BINS);
    }
}

bool projector_build(struct gguf_context *ctx, struct plan *p, const struct options *o) {
    p->cap = MAX_TENSORS_FIXED + MAX_TENSORS_PER_BLOCK * (size_t)ENC_LAYERS;
    p->n = 0;
    p->t = calloc(p->cap, sizeof(*p->t));
    if (!p->t) {
        report("out of memory building the tensor plan");
        return false;
    }
    build_keys(ctx, o);
    if (o->projector->modality == MODALITY_VISION) {
        plan_llava(p, o);
    } else {
        plan_qwen2a(p, o);
    }
    return true;
}
