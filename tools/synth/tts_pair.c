/*
 * tts_pair.c: sipp-synth --tts-pair pocket: a Pocket TTS pair (a backbone GGUF and its mmproj) with
 * random weights, which llama.cpp's llama-tts and sipp's speech pipeline load and speak with, so that
 * the pipeline can be checked against llama-tts where no real speech model can be downloaded.
 *
 * Design
 *   - The backbone (PREFIX.gguf) is architecture "pockettts" (src/models/pockettts.cpp at the pin):
 *     pre-norm blocks with biased layer norms, separate q/k/v, a GELU FFN without gate, a biased
 *     output norm and no output head (llama.cpp reuses the token embeddings). Its tokenizer is --vocab's
 *     with "<|audio_bos|>" appended, the one token the pipeline looks up (mtmd-helper-gen.cpp).
 *   - The projector (PREFIX-mmproj.gguf) holds both halves: the speaker encoder (projector
 *     "pockettts_spkenc", clip.has_audio_encoder: a reference clip into voice rows; mtmd loads no
 *     projector without an encoder) and the generator ("pockettts_gen", clip.has_gen_audio_encoder).
 *     GEN_CODE is the flow net (models/pockettts-gen.cpp: input projection, two timestep embedders,
 *     FLOW_BLOCKS AdaLN blocks, the final AdaLN and projection) from the backbone's hidden state to a
 *     LATENT-wide latent, the end-of-speech head and the input linear back into the backbone. GEN_WAV
 *     is the mimi decoder: the quantizer's output projection, the depthwise 16x upsampling, MIMI_LAYERS
 *     transformer blocks with layer scales, and the SEANet decoder whose strides clip.cpp fixes at
 *     6, 5, 4 (1920 samples a frame at 24 kHz, 12.5 frames a second). Kernel sizes and channel counts
 *     are read from the tensors' shapes, so they are small here.
 *   - The end-of-speech head has a bias of EOS_BIAS, far below the pipeline's threshold (-4): the
 *     random head never fires, and every piece of text runs to the pipeline's frame budget, which
 *     makes the length of the audio depend only on the text.
 *   - Weights: matrices and kernels std 1/sqrt(fan-in), norms ones, biases zeros, layer scales
 *     LAYER_SCALE, the latent's mean 0 and std 1; all f32 (mtmd's convolutions take f32 or f16).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "synth.h"

#define LATENT 32       /* the flow's latent width, pocket-tts's */
#define FLOW_WIDTH 64   /* the flow net's channels */
#define FLOW_HIDDEN 128 /* its blocks' MLP width */
#define FLOW_FREQS 32   /* each timestep embedder's frequencies (cos and sin: twice as wide) */
#define FLOW_BLOCKS 2
#define MIMI_WIDTH 32 /* the mimi decoder's transformer */
#define MIMI_HEADS 2
#define MIMI_FF 64
#define MIMI_LAYERS 1
#define MIMI_UPSAMPLE 16 /* clip.cpp's mimi_downsample */
#define SEANET_STAGES 3  /* clip.cpp's seanet ratios {4, 5, 6}, walked backwards by the decoder */
#define SEANET_KERNEL 7  /* conv_in and conv_out */
#define RES_KERNEL 3
#define NORM_EPS 1e-5f
#define EOS_BIAS 100.0f
#define LAYER_SCALE 0.1f
#define MAX_PAIR_TENSORS 128
#define NAME_BUF GGML_MAX_NAME

static const int64_t DECODER_STRIDES[SEANET_STAGES] = {6, 5, 4};
static const int64_t SEANET_CHANNELS[SEANET_STAGES + 1] = {32, 16, 8, 4}; /* before each stage, and after */

/* ---- the backbone ---------------------------------------------------------------------------- */

void tts_pair_backbone_plan(struct plan *p, const struct options *o, int64_t n_vocab) {
    const int64_t e = o->n_embd, kv = o->n_embd / o->n_head * o->n_head_kv;
    char pfx[NAME_BUF];
    plan_weight(p, 2, (const int64_t[4]){e, n_vocab, 1, 1}, "token_embd.weight");
    plan_norm(p, "output_norm", e);
    for (int64_t il = 0; il < o->n_layer; il++) {
        snprintf(pfx, sizeof pfx, "blk.%" PRId64 ".attn_norm", il);
        plan_norm(p, pfx, e);
        snprintf(pfx, sizeof pfx, "blk.%" PRId64 ".ffn_norm", il);
        plan_norm(p, pfx, e);
        static const char *const attn[] = {"attn_q", "attn_k", "attn_v", "attn_output"};
        for (int k = 0; k < 4; k++) {
            snprintf(pfx, sizeof pfx, "blk.%" PRId64 ".%s", il, attn[k]);
            plan_linear(p, pfx, e, k == 1 || k == 2 ? kv : e, false);
        }
        snprintf(pfx, sizeof pfx, "blk.%" PRId64 ".ffn_up", il);
        plan_linear(p, pfx, e, o->n_ff, false);
        snprintf(pfx, sizeof pfx, "blk.%" PRId64 ".ffn_down", il);
        plan_linear(p, pfx, o->n_ff, e, false);
    }
}

/* ---- the projector ---------------------------------------------------------------------------- */

static void plan_flow(struct plan *p, int64_t e) {
    char pfx[NAME_BUF];
    plan_linear(p, "a.gen.flow.input_proj", LATENT, FLOW_WIDTH, true);
    plan_linear(p, "a.gen.flow.cond_embd", e, FLOW_WIDTH, true);
    for (int i = 0; i < 2; i++) {
        plan_addf(p, GGML_TYPE_F32, 1, (const int64_t[4]){FLOW_FREQS, 1, 1, 1}, 1.0f,
                  "a.gen.flow.time.%d.freqs", i);
        snprintf(pfx, sizeof pfx, "a.gen.flow.time.%d.up", i);
        plan_linear(p, pfx, 2 * FLOW_FREQS, FLOW_WIDTH, true);
        snprintf(pfx, sizeof pfx, "a.gen.flow.time.%d.down", i);
        plan_linear(p, pfx, FLOW_WIDTH, FLOW_WIDTH, true);
        plan_constant(p, FLOW_WIDTH, 1.0f, "a.gen.flow.time.%d.norm", i);
    }
    for (int il = 0; il < FLOW_BLOCKS; il++) {
        snprintf(pfx, sizeof pfx, "a.gen.flow.blk.%d.norm", il);
        plan_norm(p, pfx, FLOW_WIDTH);
        snprintf(pfx, sizeof pfx, "a.gen.flow.blk.%d.ada", il);
        plan_linear(p, pfx, FLOW_WIDTH, 3 * FLOW_WIDTH, true);
        snprintf(pfx, sizeof pfx, "a.gen.flow.blk.%d.up", il);
        plan_linear(p, pfx, FLOW_WIDTH, FLOW_HIDDEN, true);
        snprintf(pfx, sizeof pfx, "a.gen.flow.blk.%d.down", il);
        plan_linear(p, pfx, FLOW_HIDDEN, FLOW_WIDTH, true);
    }
    plan_linear(p, "a.gen.flow.final.ada", FLOW_WIDTH, 2 * FLOW_WIDTH, true);
    plan_linear(p, "a.gen.flow.final.proj", FLOW_WIDTH, LATENT, true);
    plan_linear(p, "a.gen.out_eos", e, 1, false);
    plan_constant(p, 1, EOS_BIAS, "a.gen.out_eos.bias");
    plan_linear(p, "a.gen.input_linear", LATENT, e, false);
    plan_constant(p, LATENT, 0.0f, "a.gen.emb_mean");
    plan_constant(p, LATENT, 1.0f, "a.gen.emb_std");
}

/* The mimi transformer blocks of both halves: PFX.blk.N.* with layer scales (no biases but the norms'). */
static void plan_mimi_blocks(struct plan *p, const char *pfx_root) {
    char pfx[NAME_BUF];
    for (int il = 0; il < MIMI_LAYERS; il++) {
        static const char *const parts[] = {"attn_q", "attn_k", "attn_v", "attn_out"};
        for (int k = 0; k < 4; k++) {
            snprintf(pfx, sizeof pfx, "%s.blk.%d.%s", pfx_root, il, parts[k]);
            plan_linear(p, pfx, MIMI_WIDTH, MIMI_WIDTH, false);
        }
        snprintf(pfx, sizeof pfx, "%s.blk.%d.ln1", pfx_root, il);
        plan_norm(p, pfx, MIMI_WIDTH);
        snprintf(pfx, sizeof pfx, "%s.blk.%d.ln2", pfx_root, il);
        plan_norm(p, pfx, MIMI_WIDTH);
        plan_constant(p, MIMI_WIDTH, LAYER_SCALE, "%s.blk.%d.ls1.weight", pfx_root, il);
        plan_constant(p, MIMI_WIDTH, LAYER_SCALE, "%s.blk.%d.ls2.weight", pfx_root, il);
        snprintf(pfx, sizeof pfx, "%s.blk.%d.ffn_up", pfx_root, il);
        plan_linear(p, pfx, MIMI_WIDTH, MIMI_FF, false);
        snprintf(pfx, sizeof pfx, "%s.blk.%d.ffn_down", pfx_root, il);
        plan_linear(p, pfx, MIMI_FF, MIMI_WIDTH, false);
    }
}

static void plan_mimi(struct plan *p) {
    char pfx[NAME_BUF];
    plan_linear(p, "a.gen.wav.quant_out", LATENT, MIMI_WIDTH, false);
    plan_weight(p, 3, (const int64_t[4]){2 * MIMI_UPSAMPLE, 1, MIMI_WIDTH, 1},
                "a.gen.wav.upsample.weight"); /* depthwise */
    plan_mimi_blocks(p, "a.gen.wav.tfm");
    plan_conv(p, "a.gen.wav.seanet.conv_in", SEANET_KERNEL, MIMI_WIDTH, SEANET_CHANNELS[0],
              SEANET_CHANNELS[0]);
    for (int i = 0; i < SEANET_STAGES; i++) {
        const int64_t in = SEANET_CHANNELS[i], out = SEANET_CHANNELS[i + 1];
        snprintf(pfx, sizeof pfx, "a.gen.wav.seanet.blk.%d.scale_conv", i);
        plan_conv(p, pfx, 2 * DECODER_STRIDES[i], out, in, out); /* transposed: {k, out, in} */
        snprintf(pfx, sizeof pfx, "a.gen.wav.seanet.blk.%d.res_conv1", i);
        plan_conv(p, pfx, RES_KERNEL, out, out / 2, out / 2);
        snprintf(pfx, sizeof pfx, "a.gen.wav.seanet.blk.%d.res_conv2", i);
        plan_conv(p, pfx, 1, out / 2, out, out);
    }
    plan_conv(p, "a.gen.wav.seanet.conv_out", SEANET_KERNEL, SEANET_CHANNELS[SEANET_STAGES], 1, 1);
}

/* The speaker encoder (models/pockettts-spkenc.cpp): the SEANet encoder from the 24 kHz waveform
 * (strides 4, 5, 6, channels growing as the decoder's shrink), the mimi transformer, the 16x
 * downsampling to 12.5 Hz and the projection into the backbone. mtmd loads no projector without an
 * encoder of its own, so the pair carries one. */
static void plan_spkenc(struct plan *p, int64_t e) {
    static const int64_t strides[SEANET_STAGES] = {4, 5, 6};
    char pfx[NAME_BUF];
    plan_conv(p, "a.seanet.conv_in", SEANET_KERNEL, 1, SEANET_CHANNELS[SEANET_STAGES],
              SEANET_CHANNELS[SEANET_STAGES]);
    for (int i = 0; i < SEANET_STAGES; i++) {
        const int64_t in = SEANET_CHANNELS[SEANET_STAGES - i], out = SEANET_CHANNELS[SEANET_STAGES - i - 1];
        snprintf(pfx, sizeof pfx, "a.seanet.blk.%d.res_conv1", i);
        plan_conv(p, pfx, RES_KERNEL, in, in / 2, in / 2);
        snprintf(pfx, sizeof pfx, "a.seanet.blk.%d.res_conv2", i);
        plan_conv(p, pfx, 1, in / 2, in, in);
        snprintf(pfx, sizeof pfx, "a.seanet.blk.%d.scale_conv", i);
        plan_conv(p, pfx, 2 * strides[i], in, out, out);
    }
    plan_conv(p, "a.seanet.conv_out", SEANET_KERNEL, SEANET_CHANNELS[0], MIMI_WIDTH, MIMI_WIDTH);
    plan_mimi_blocks(p, "a");
    plan_weight(p, 3, (const int64_t[4]){2 * MIMI_UPSAMPLE, MIMI_WIDTH, LATENT, 1},
                "a.downsample.conv.weight");
    plan_linear(p, "a.speaker_proj", LATENT, e, false);
}

void tts_clip_u32(struct gguf_context *ctx, const char *modality, const char *suffix, int64_t v) {
    char key[NAME_BUF * 2];
    snprintf(key, sizeof key, "clip.%s.%s", modality, suffix);
    gguf_set_val_u32(ctx, key, (uint32_t)v);
}

void tts_clip_modality(struct gguf_context *ctx, const char *modality, const struct tts_clip_shape *s) {
    char key[NAME_BUF * 2];
    tts_clip_u32(ctx, modality, "embedding_length", s->width);
    tts_clip_u32(ctx, modality, "feed_forward_length", s->ff);
    tts_clip_u32(ctx, modality, "block_count", s->layers);
    tts_clip_u32(ctx, modality, "attention.head_count", s->heads);
    tts_clip_u32(ctx, modality, "projection_dim", s->projection);
    snprintf(key, sizeof key, "clip.%s.attention.layer_norm_epsilon", modality);
    gguf_set_val_f32(ctx, key, s->eps);
}

bool tts_clip_start(struct gguf_context *ctx, struct plan *p, const struct options *o, size_t cap,
                    const char *what) {
    p->cap = cap;
    p->n = 0;
    p->t = calloc(p->cap, sizeof *p->t);
    if (!p->t) {
        report("out of memory building the tensor plan");
        return false;
    }
    char desc[256];
    snprintf(desc, sizeof desc,
             "synthetic random-weight %s projector written by sipp-synth (seed %" PRIu64 ")", what, o->seed);
    gguf_set_val_str(ctx, "general.architecture", "clip");
    gguf_set_val_str(ctx, "general.name", o->name);
    gguf_set_val_str(ctx, "general.description", desc);
    gguf_set_val_u32(ctx, "general.file_type", 0); /* all f32 */
    gguf_set_val_bool(ctx, "clip.has_vision_encoder", false);
    gguf_set_val_bool(ctx, "clip.has_audio_encoder", true);
    gguf_set_val_bool(ctx, "clip.has_gen_audio_encoder", true);
    return true;
}

bool tts_pair_projector(struct gguf_context *ctx, struct plan *p, const struct options *o) {
    if (!tts_clip_start(ctx, p, o, MAX_PAIR_TENSORS, "Pocket TTS")) return false;
    gguf_set_val_str(ctx, "clip.audio.projector_type", "pockettts_spkenc");
    gguf_set_val_str(ctx, "clip.gen.audio.projector_type", "pockettts_gen");
    gguf_set_val_str(ctx, "clip.gen.audio.model_variant", "english");
    gguf_set_val_u32(ctx, "clip.audio.num_mel_bins", 1); /* the waveform itself */
    const struct tts_clip_shape mimi = {MIMI_WIDTH, MIMI_FF, MIMI_LAYERS, MIMI_HEADS, o->n_embd, NORM_EPS};
    tts_clip_modality(ctx, "audio", &mimi);
    tts_clip_modality(ctx, "gen.audio", &mimi);
    plan_spkenc(p, o->n_embd);
    plan_flow(p, o->n_embd);
    plan_mimi(p);
    return true;
}
