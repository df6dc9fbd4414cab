/*
 * tts_qwen3.c: sipp-synth --tts-pair qwen3tts: a Qwen3-TTS pair (a backbone GGUF and its mmproj) with
 * random weights, which llama.cpp's llama-tts and sipp's speech pipeline load and speak with, so that
 * the pipeline can be checked against llama-tts where no real speech model can be downloaded.
 *
 * Design
 *   - The backbone (PREFIX.gguf) is architecture "qwen3tts" (src/models/qwen3vl.cpp at the pin, which
 *     qwen3tts reuses): Qwen3 blocks (RMS norms, q/k norms, a SwiGLU FFN) under interleaved M-RoPE
 *     (qwen3tts.rope.dimension_sections), and an output head of exactly QWEN3TTS_CODEC_TOKENS rows (the
 *     codec head; llama.cpp fixes that count and pads the logits of the text rows with -inf). Its
 *     vocabulary is as convert_hf_to_gguf.py lays it out: --vocab's tokens, then the text tokens the
 *     pipeline looks up (mtmd-helper-gen.cpp: <|im_start|>, <|im_end|>, <tts_pad>, <tts_text_bos>,
 *     <tts_text_eod>) where --vocab lacks them, then the codec's 3072 control tokens: <|codec_N|>, with
 *     the named ones (pad, bos, eos, think, nothink, think_bos, think_eos, and one language token per
 *     language the pipeline knows) at Qwen3-TTS-12Hz's ids where the converter names them (bos 2149,
 *     eos 2150, chinese 2055) and at free ids of that range otherwise. As the converter writes it, the
 *     end token is the codec's eos, and every codec token past the first CODEBOOK_SIZE but eos is
 *     suppressed (tokenizer.ggml.suppress_tokens), so the backbone samples a code of codebook 0 or the
 *     end. No chat template.
 *   - The projector (PREFIX-mmproj.gguf) holds three parts. The speaker encoder ("qwen3tts_spkenc",
 *     models/qwen3tts-spkenc.cpp): an ECAPA-TDNN over 128 mel bins (the stem TDNN, three SE-Res2Net
 *     blocks of Res2Net scale 8, the aggregation TDNN, attentive statistics pooling and the projection
 *     into the backbone); mtmd loads no projector without an encoder, and --tts-speaker-file runs it.
 *     GEN_CODE, the code predictor ("qwen3tts_gen", models/qwen3tts-gen.cpp): the projection from the
 *     backbone's width, PRED_LAYERS Qwen3 blocks, one embedding table and one head per acoustic
 *     codebook (15, stacked in 3-D tensors: clip.cpp counts the codebooks from them), and the codebook-0
 *     embedding fed back into the backbone. GEN_WAV, code2wav: the split RVQ decoder (codebook 0 and
 *     the 15 others), the causal pre-convolution, the pre-transformer (clip.cpp fixes its 8 layers and
 *     16 heads; the widths come from the tensors), two 2x ConvNeXt upsamplers and the DAC decoder
 *     (four SnakeBeta + transposed-convolution blocks of strides 8, 5, 4, 3 with three dilated residual
 *     units each: 1920 samples a frame at 24 kHz, 12.5 frames a second, as the real decoder). Channel
 *     counts are small; the strides, kernels and counts clip.cpp reads are the real ones.
 *   - The end of speech comes after one frame: the first component of the backbone's input steers the
 *     end token. Every token embedding has PROMPT_COMPONENT there, and the codebook-0 embedding the
 *     code predictor feeds back has FRAME_COMPONENT, far below (the blocks' small residual branches
 *     cannot turn either); the codec head reads that component into the eos row alone, with weight
 *     -STOP_SCALE, and into no code's row. So after the prompt eos is far below every code (a frame
 *     is made), and after that frame far above them all: every piece of text is one frame, 80 ms of
 *     audio (1920 samples), whatever the seed. Fixed and short on purpose: llama-tts runs its
 *     projector on 4 threads whatever the cores, and on a loaded 2-core machine a frame took it 40 s.
 *     With --tts-endless the fed-back embedding has ENDLESS_COMPONENT there instead, so the end stays
 *     far below the codes and every piece runs to the frame cap: the pair that long generations (the
 *     batched backbone, the benchmark) are measured on.
 *   - Weights: matrices and kernels std 1/sqrt(fan-in) (the backbone's residual branches BRANCH_SCALE
 *     of that), embeddings EMBD_STD, norms and SnakeBeta's folded parameters ones, biases zeros, layer
 *     scales LAYER_SCALE; all f32 (mtmd's convolutions take f32 or f16).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "synth.h"

#define CODEBOOKS 16 /* per frame: codebook 0 from the backbone, the rest from the code predictor */
#define ACOUSTIC (CODEBOOKS - 1)
#define CODEBOOK_SIZE 2048 /* the codes of a codebook; the codec tokens past them are specials */
#define SUPPRESSED 1024    /* the codec tokens past CODEBOOK_SIZE, all suppressed but eos */
#define CODEC_EOS 2150
#define EMBD_STD 0.5f
#define PROMPT_COMPONENT 8.0f
#define FRAME_COMPONENT (-24.0f) /* with the tts_pad the pipeline adds to each frame: -16 */
#define ENDLESS_COMPONENT 0.0f   /* --tts-endless: with the tts_pad, PROMPT_COMPONENT: the end never wins */
#define BRANCH_SCALE 0.1f
#define ROPE_SECTION_SHARE 0.3125 /* of the rotated pairs, each of M-RoPE's h and w (20 of 64) */
#define ROPE_SECTIONS 4

#define MEL_BINS 128 /* the speaker encoder's front end (clip.cpp: 24 kHz, n_fft 1024, hop 256) */
#define SPK_WIDTH 16 /* ECAPA's channels; divisible by the Res2Net scale */
#define SPK_SCALE 8
#define SPK_BLOCKS 3
#define SPK_SE 4   /* squeeze-and-excitation bottleneck */
#define SPK_ATTN 8 /* attentive pooling's channels */
#define SPK_STEM_KERNEL 5
#define SPK_RES2_KERNEL 3

#define PRED_WIDTH 32 /* the code predictor */
#define PRED_HEADS 4
#define PRED_HEADS_KV 2
#define PRED_HEAD_DIM 8
#define PRED_FF 64
#define PRED_LAYERS 2
#define PRED_EPS 1e-6f
#define SPK_EPS 1e-5f /* the converter's (ECAPA reads no epsilon) */

#define CB_DIM 16    /* code2wav: a codebook's entries */
#define LATENT 32    /* the RVQ's output */
#define WAV_WIDTH 64 /* the pre-convolution's output, the upsamplers' channels */
#define TFM_WIDTH 32 /* the pre-transformer: 16 heads of 2 */
#define TFM_FF 64
#define TFM_LAYERS 8 /* clip.cpp's wav_tfm_n_layer */
#define UP_BLOCKS 2  /* clip.cpp's wav_upsample_n_block, each 2x with kernel 2 */
#define UP_STRIDE 2
#define UP_FF (4 * WAV_WIDTH)
#define DAC_BLOCKS 4 /* clip.cpp's wav_dac_n_block, each with wav_dac_n_res residual units */
#define DAC_RES 3
#define PRE_KERNEL 3
#define CONV_KERNEL 7
#define LAYER_SCALE 0.1f
#define OUT_GAIN 0.25f /* the last convolution's, so that most samples stay inside [-1, 1] */
#define MAX_QWEN3_TENSORS 384
#define NAME_BUF GGML_MAX_NAME
#define TOKEN_BUF 40

static const int64_t DAC_STRIDES[DAC_BLOCKS] = {8, 5, 4, 3};
static const int64_t DAC_CHANNELS[DAC_BLOCKS + 1] = {32, 16, 8, 4, 4}; /* before each block, and after */

const char *const QWEN3TTS_TEXT_TOKENS[] = {"<|im_start|>", "<|im_end|>", "<tts_pad>", "<tts_text_bos>",
                                            "<tts_text_eod>"};
const int QWEN3TTS_N_TEXT_TOKENS = sizeof QWEN3TTS_TEXT_TOKENS / sizeof *QWEN3TTS_TEXT_TOKENS;

/* The named codec tokens, by id within the codec: the pipeline's, and a language token for each of
 * the languages its --tts-lang codes name. */
static const struct {
    int id;
    const char *text;
} CODEC_NAMED[] = {
    {2148, "<|codec_pad|>"},
    {2149, "<|codec_bos|>"},
    {CODEC_EOS, "<|codec_eos_token|>"},
    {2154, "<|codec_think|>"},
    {2155, "<|codec_nothink|>"},
    {2156, "<|codec_think_bos|>"},
    {2157, "<|codec_think_eos|>"},
    {2050, "<|codec_language_english|>"},
    {2053, "<|codec_language_german|>"},
    {2054, "<|codec_language_spanish|>"},
    {2055, "<|codec_language_chinese|>"},
    {2058, "<|codec_language_japanese|>"},
    {2061, "<|codec_language_french|>"},
    {2064, "<|codec_language_korean|>"},
    {2069, "<|codec_language_russian|>"},
    {2070, "<|codec_language_italian|>"},
    {2071, "<|codec_language_portuguese|>"},
};

/* The texts live as long as the process: the vocabulary's arrays point at them until it is written. */
const char *tts_qwen3_codec_token(int64_t i) {
    static char text[QWEN3TTS_CODEC_TOKENS][TOKEN_BUF];
    for (size_t k = 0; k < sizeof CODEC_NAMED / sizeof *CODEC_NAMED; k++)
        if (CODEC_NAMED[k].id == i) return CODEC_NAMED[k].text;
    snprintf(text[i], sizeof text[i], "<|codec_%" PRId64 "|>", i);
    return text[i];
}

/* ---- the backbone ---------------------------------------------------------------------------- */

void tts_qwen3_backbone_keys(struct gguf_context *ctx, int64_t n_vocab, int64_t head_dim) {
    const int32_t pairs = (int32_t)(head_dim / 2), hw = (int32_t)(pairs * ROPE_SECTION_SHARE);
    const int32_t sections[ROPE_SECTIONS] = {pairs - 2 * hw, hw, hw, 0};
    gguf_set_arr_data(ctx, QWEN3TTS_ARCH ".rope.dimension_sections", GGUF_TYPE_INT32, sections,
                      ROPE_SECTIONS);
    const int64_t codec0 = n_vocab - QWEN3TTS_CODEC_TOKENS, eos = codec0 + CODEC_EOS;
    gguf_set_val_u32(ctx, "tokenizer.ggml.eos_token_id", (uint32_t)eos);
    gguf_set_val_bool(ctx, "tokenizer.ggml.add_eos_token", false);
    int32_t suppress[SUPPRESSED - 1];
    int n = 0;
    for (int64_t id = n_vocab - SUPPRESSED; id < n_vocab; id++)
        if (id != eos) suppress[n++] = (int32_t)id;
    gguf_set_arr_data(ctx, "tokenizer.ggml.suppress_tokens", GGUF_TYPE_INT32, suppress, (size_t)n);
}

/* One Qwen3 block: the residual branches' projections (attn_output, ffn_down) scaled down. */
static void backbone_block(struct plan *p, const struct options *o, int64_t il) {
    const int64_t e = o->n_embd, hd = o->n_embd / o->n_head, kv = hd * o->n_head_kv;
    char pfx[NAME_BUF];
    static const char *const norms[] = {"attn_norm", "ffn_norm"};
    for (int k = 0; k < 2; k++)
        plan_constant(p, e, 1.0f, "blk.%" PRId64 ".%s.weight", il, norms[k]);
    plan_constant(p, hd, 1.0f, "blk.%" PRId64 ".attn_q_norm.weight", il);
    plan_constant(p, hd, 1.0f, "blk.%" PRId64 ".attn_k_norm.weight", il);
    static const char *const in[] = {"attn_q", "attn_k", "attn_v", "ffn_gate", "ffn_up"};
    const int64_t out[] = {e, kv, kv, o->n_ff, o->n_ff};
    for (int k = 0; k < 5; k++) {
        snprintf(pfx, sizeof pfx, "blk.%" PRId64 ".%s", il, in[k]);
        plan_linear(p, pfx, e, out[k], false);
    }
    plan_addf(p, GGML_TYPE_F32, 2, (const int64_t[4]){e, e, 1, 1}, BRANCH_SCALE / sqrtf((float)e),
              "blk.%" PRId64 ".attn_output.weight", il);
    plan_addf(p, GGML_TYPE_F32, 2, (const int64_t[4]){o->n_ff, e, 1, 1}, BRANCH_SCALE / sqrtf((float)o->n_ff),
              "blk.%" PRId64 ".ffn_down.weight", il);
}

void tts_qwen3_backbone_plan(struct plan *p, const struct options *o, int64_t n_vocab) {
    const int64_t e = o->n_embd;
    struct tensor_spec *embd =
        plan_addf(p, GGML_TYPE_F32, 2, (const int64_t[4]){e, n_vocab, 1, 1}, EMBD_STD, "token_embd.weight");
    embd->stop = STOP_COMPONENT; /* every row's first component PROMPT_COMPONENT */
    embd->stop_id = -1;
    embd->value = PROMPT_COMPONENT;
    plan_constant(p, e, 1.0f, "output_norm.weight");
    struct tensor_spec *head =
        plan_addf(p, GGML_TYPE_F32, 2, (const int64_t[4]){e, QWEN3TTS_CODEC_TOKENS, 1, 1},
                  1.0f / sqrtf((float)e), "output.weight");
    head->stop = STOP_COMPONENT; /* the first component read by eos alone, negated */
    head->stop_id = CODEC_EOS;
    head->value = 0.0f;
    for (int64_t il = 0; il < o->n_layer; il++)
        backbone_block(p, o, il);
}

/* ---- the speaker encoder ---------------------------------------------------------------------- */

static void spk_block(struct plan *p, int bid) {
    char pfx[NAME_BUF];
    snprintf(pfx, sizeof pfx, "a.blk.%d.conv_pw1", bid);
    plan_conv(p, pfx, 1, SPK_WIDTH, SPK_WIDTH, SPK_WIDTH);
    for (int x = 0; x < SPK_SCALE - 1; x++) {
        snprintf(pfx, sizeof pfx, "a.blk.%d.res2.%d", bid, x);
        plan_conv(p, pfx, SPK_RES2_KERNEL, SPK_WIDTH / SPK_SCALE, SPK_WIDTH / SPK_SCALE,
                  SPK_WIDTH / SPK_SCALE);
    }
    snprintf(pfx, sizeof pfx, "a.blk.%d.conv_pw2", bid);
    plan_conv(p, pfx, 1, SPK_WIDTH, SPK_WIDTH, SPK_WIDTH);
    snprintf(pfx, sizeof pfx, "a.blk.%d.se_conv1", bid);
    plan_conv(p, pfx, 1, SPK_WIDTH, SPK_SE, SPK_SE);
    snprintf(pfx, sizeof pfx, "a.blk.%d.se_conv2", bid);
    plan_conv(p, pfx, 1, SPK_SE, SPK_WIDTH, SPK_WIDTH);
}

static void plan_speaker(struct plan *p, int64_t e) {
    const int64_t mfa = SPK_BLOCKS * SPK_WIDTH; /* the three blocks' outputs, side by side */
    plan_conv(p, "a.conv1d.0", SPK_STEM_KERNEL, MEL_BINS, SPK_WIDTH, SPK_WIDTH);
    for (int bid = 1; bid <= SPK_BLOCKS; bid++) /* GGUF's block 0 is the stem */
        spk_block(p, bid);
    plan_conv(p, "a.conv_out", 1, mfa, mfa, mfa);
    plan_conv(p, "a.asp_tdnn", 1, 3 * mfa, SPK_ATTN, SPK_ATTN); /* [x, mean, std] */
    plan_conv(p, "a.asp_attn", 1, SPK_ATTN, mfa, mfa);
    plan_conv(p, "mm.a.fc", 1, 2 * mfa, e, e); /* [weighted mean, weighted std] into the backbone */
}

/* ---- the code predictor (GEN_CODE) ------------------------------------------------------------ */

static void pred_block(struct plan *p, int il) {
    char pfx[NAME_BUF];
    plan_constant(p, PRED_WIDTH, 1.0f, "a.gen.code.blk.%d.ln1.weight", il);
    plan_constant(p, PRED_WIDTH, 1.0f, "a.gen.code.blk.%d.ln2.weight", il);
    plan_constant(p, PRED_HEAD_DIM, 1.0f, "a.gen.code.blk.%d.attn_q_norm.weight", il);
    plan_constant(p, PRED_HEAD_DIM, 1.0f, "a.gen.code.blk.%d.attn_k_norm.weight", il);
    static const char *const parts[] = {"attn_q",   "attn_k", "attn_v",  "attn_out",
                                        "ffn_gate", "ffn_up", "ffn_down"};
    const int64_t n_in[] = {PRED_WIDTH, PRED_WIDTH, PRED_WIDTH, PRED_HEADS * PRED_HEAD_DIM,
                            PRED_WIDTH, PRED_WIDTH, PRED_FF};
    const int64_t n_out[] = {PRED_HEADS * PRED_HEAD_DIM,
                             PRED_HEADS_KV * PRED_HEAD_DIM,
                             PRED_HEADS_KV * PRED_HEAD_DIM,
                             PRED_WIDTH,
                             PRED_FF,
                             PRED_FF,
                             PRED_WIDTH};
    for (int k = 0; k < 7; k++) {
        snprintf(pfx, sizeof pfx, "a.gen.code.blk.%d.%s", il, parts[k]);
        plan_linear(p, pfx, n_in[k], n_out[k], false);
    }
}

static void plan_predictor(struct plan *p, int64_t e, bool endless) {
    plan_linear(p, "a.gen.code.proj_in", e, PRED_WIDTH, true);
    for (int il = 0; il < PRED_LAYERS; il++)
        pred_block(p, il);
    plan_constant(p, PRED_WIDTH, 1.0f, "a.gen.code.output_norm.weight");
    plan_addf(p, GGML_TYPE_F32, 3, (const int64_t[4]){e, CODEBOOK_SIZE, ACOUSTIC, 1}, EMBD_STD,
              "a.gen.code.embd.weight");
    plan_addf(p, GGML_TYPE_F32, 3, (const int64_t[4]){PRED_WIDTH, CODEBOOK_SIZE, ACOUSTIC, 1},
              1.0f / sqrtf((float)PRED_WIDTH), "a.gen.code.head.weight");
    struct tensor_spec *fed =
        plan_addf(p, GGML_TYPE_F32, 2, (const int64_t[4]){e, QWEN3TTS_CODEC_TOKENS, 1, 1}, EMBD_STD,
                  "a.gen.code.out_embd.weight");
    fed->stop = STOP_COMPONENT; /* every row's first component FRAME_COMPONENT: the end comes next */
    fed->stop_id = -1;
    fed->value = endless ? ENDLESS_COMPONENT : FRAME_COMPONENT;
}

/* ---- code2wav (GEN_WAV) ----------------------------------------------------------------------- */

static void plan_quantizer(struct plan *p) {
    static const char *const groups[] = {"first", "rest"};
    char pfx[NAME_BUF];
    for (int g = 0; g < 2; g++) {
        snprintf(pfx, sizeof pfx, "a.gen.wav.quant.%s.in_proj", groups[g]);
        plan_linear(p, pfx, LATENT, CB_DIM, false);
        snprintf(pfx, sizeof pfx, "a.gen.wav.quant.%s.out_proj", groups[g]);
        plan_linear(p, pfx, CB_DIM, LATENT, false);
        plan_addf(p, GGML_TYPE_F32, g ? 3 : 2, (const int64_t[4]){CB_DIM, CODEBOOK_SIZE, ACOUSTIC, 1}, 1.0f,
                  "a.gen.wav.quant.%s.codebook.weight", groups[g]);
    }
}

static void tfm_block(struct plan *p, int il) {
    char pfx[NAME_BUF];
    static const char *const parts[] = {"attn_q",   "attn_k", "attn_v",  "attn_out",
                                        "ffn_gate", "ffn_up", "ffn_down"};
    for (int k = 0; k < 7; k++) {
        snprintf(pfx, sizeof pfx, "a.gen.wav.tfm.blk.%d.%s", il, parts[k]);
        plan_linear(p, pfx, k == 6 ? TFM_FF : TFM_WIDTH, k >= 4 && k < 6 ? TFM_FF : TFM_WIDTH, false);
    }
    plan_constant(p, TFM_WIDTH, 1.0f, "a.gen.wav.tfm.blk.%d.ln1.weight", il);
    plan_constant(p, TFM_WIDTH, 1.0f, "a.gen.wav.tfm.blk.%d.ln2.weight", il);
    plan_constant(p, TFM_WIDTH, LAYER_SCALE, "a.gen.wav.tfm.blk.%d.ls1.weight", il);
    plan_constant(p, TFM_WIDTH, LAYER_SCALE, "a.gen.wav.tfm.blk.%d.ls2.weight", il);
}

static void up_block(struct plan *p, int il) {
    char pfx[NAME_BUF];
    snprintf(pfx, sizeof pfx, "a.gen.wav.up.blk.%d.conv", il);
    plan_conv(p, pfx, UP_STRIDE, WAV_WIDTH, WAV_WIDTH, WAV_WIDTH); /* transposed, kernel = stride */
    snprintf(pfx, sizeof pfx, "a.gen.wav.up.blk.%d.dwconv", il);
    plan_conv(p, pfx, CONV_KERNEL, 1, WAV_WIDTH, WAV_WIDTH); /* depthwise */
    snprintf(pfx, sizeof pfx, "a.gen.wav.up.blk.%d.norm", il);
    plan_norm(p, pfx, WAV_WIDTH);
    snprintf(pfx, sizeof pfx, "a.gen.wav.up.blk.%d.pw1", il);
    plan_linear(p, pfx, WAV_WIDTH, UP_FF, true);
    snprintf(pfx, sizeof pfx, "a.gen.wav.up.blk.%d.pw2", il);
    plan_linear(p, pfx, UP_FF, WAV_WIDTH, true);
    plan_constant(p, WAV_WIDTH, LAYER_SCALE, "a.gen.wav.up.blk.%d.gamma", il);
}

/* SnakeBeta's parameters as the converter folds them (exp(alpha), 1 / exp(beta)): ones at zero init. */
static void snake(struct plan *p, const char *prefix, int64_t n) {
    plan_constant(p, n, 1.0f, "%s.alpha", prefix);
    plan_constant(p, n, 1.0f, "%s.beta", prefix);
}

static void dac_block(struct plan *p, int il) {
    const int64_t in = DAC_CHANNELS[il], out = DAC_CHANNELS[il + 1];
    char pfx[NAME_BUF];
    snprintf(pfx, sizeof pfx, "a.gen.wav.dac.blk.%d.snake", il);
    snake(p, pfx, in);
    snprintf(pfx, sizeof pfx, "a.gen.wav.dac.blk.%d.conv", il);
    plan_conv(p, pfx, 2 * DAC_STRIDES[il], out, in, out); /* transposed: {k, out, in}, kernel 2 strides */
    for (int r = 0; r < DAC_RES; r++) {
        snprintf(pfx, sizeof pfx, "a.gen.wav.dac.blk.%d.res.%d.act1", il, r);
        snake(p, pfx, out);
        snprintf(pfx, sizeof pfx, "a.gen.wav.dac.blk.%d.res.%d.conv1", il, r);
        plan_conv(p, pfx, CONV_KERNEL, out, out, out);
        snprintf(pfx, sizeof pfx, "a.gen.wav.dac.blk.%d.res.%d.act2", il, r);
        snake(p, pfx, out);
        snprintf(pfx, sizeof pfx, "a.gen.wav.dac.blk.%d.res.%d.conv2", il, r);
        plan_conv(p, pfx, 1, out, out, out);
    }
}

static void plan_code2wav(struct plan *p) {
    plan_quantizer(p);
    plan_conv(p, "a.gen.wav.pre_conv", PRE_KERNEL, LATENT, WAV_WIDTH, WAV_WIDTH);
    plan_linear(p, "a.gen.wav.tfm.in_proj", WAV_WIDTH, TFM_WIDTH, true);
    for (int il = 0; il < TFM_LAYERS; il++)
        tfm_block(p, il);
    plan_constant(p, TFM_WIDTH, 1.0f, "a.gen.wav.tfm.output_norm.weight");
    plan_linear(p, "a.gen.wav.tfm.out_proj", TFM_WIDTH, WAV_WIDTH, true);
    for (int il = 0; il < UP_BLOCKS; il++)
        up_block(p, il);
    plan_conv(p, "a.gen.wav.dac.entry", CONV_KERNEL, WAV_WIDTH, DAC_CHANNELS[0], DAC_CHANNELS[0]);
    for (int il = 0; il < DAC_BLOCKS; il++)
        dac_block(p, il);
    snake(p, "a.gen.wav.dac.post_snake", DAC_CHANNELS[DAC_BLOCKS]);
    plan_conv(p, "a.gen.wav.dac.post_conv", CONV_KERNEL, DAC_CHANNELS[DAC_BLOCKS], 1, 1);
    p->t[p->n - 2].std *= OUT_GAIN;
}

bool tts_qwen3_projector(struct gguf_context *ctx, struct plan *p, const struct options *o) {
    if (!tts_clip_start(ctx, p, o, MAX_QWEN3_TENSORS, "Qwen3-TTS")) return false;
    gguf_set_val_str(ctx, "clip.audio.projector_type", "qwen3tts_spkenc");
    gguf_set_val_str(ctx, "clip.gen.audio.projector_type", "qwen3tts_gen");
    gguf_set_val_u32(ctx, "clip.audio.num_mel_bins", MEL_BINS);
    /* ECAPA has no attention: clip.cpp reads these keys all the same (the converter's dummies) */
    const struct tts_clip_shape spk = {
        SPK_BLOCKS * SPK_WIDTH, SPK_BLOCKS * SPK_WIDTH, SPK_BLOCKS, 1, o->n_embd, SPK_EPS};
    const struct tts_clip_shape pred = {PRED_WIDTH, PRED_FF, PRED_LAYERS, PRED_HEADS, o->n_embd, PRED_EPS};
    tts_clip_modality(ctx, "audio", &spk);
    tts_clip_modality(ctx, "gen.audio", &pred);
    tts_clip_u32(ctx, "gen.audio", "attention.head_count_kv", PRED_HEADS_KV);
    plan_speaker(p, o->n_embd);
    plan_predictor(p, o->n_embd, o->tts_endless);
    plan_code2wav(p);
    return true;
}
