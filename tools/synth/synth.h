/*
 * synth.h: what sipp-synth's writers share. sipp-synth.c writes a text model (the default) and owns
 * the flags, the tensor plan and the streaming writer; projector.c writes a multimodal projector
 * (--projector), and tts_pair.c and tts_qwen3.c a speech pair's backbone tensors and projector
 * (--tts-pair pocket, qwen3tts), into the same plan, so that every kind of file gets the same seeded,
 * chunked weights; plan.c holds what they all call (adding a tensor, reporting a problem).
 */
#ifndef SIPP_TOOLS_SYNTH_H
#define SIPP_TOOLS_SYNTH_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "ggml.h"
#include "gguf.h"

#define MAX_SPECIAL 16 /* --add-special tokens */
#define MAX_FAVOUR 6   /* --favour tokens */

struct weight_type {
    const char *name;
    enum ggml_type type;
    uint32_t file_type; /* general.file_type: a llama_ftype */
};

struct named_template;
struct pooling;
struct projector_kind;

struct options {
    const char *out;
    const char *vocab;
    int64_t n_embd; /* the text model's width; a projector's output width */
    int64_t n_layer;
    int64_t n_head;
    int64_t n_head_kv;
    int64_t n_ff;
    int64_t n_ctx;
    uint64_t seed;
    const struct weight_type *wtype;
    const struct named_template *tmpl;
    char *tmpl_file_text; /* --chat-template-file: wins over tmpl */
    const char *name;
    const struct pooling *pooling; /* NULL: no pooling key */
    int64_t layers;                /* --layers: blocks written, the first of n_layer (0 = all) */
    int64_t active_layers; /* --active-layers: blocks past these are perturbed projections (0 = none) */
    double perturb;        /* --perturb: their scale, relative to LAYER_WEIGHT_STD */
    bool perturb_set;
    bool tied_output;               /* --output tied: no output.weight, llama.cpp reuses token_embd */
    const char *stop_token;         /* --stop-token: the token every answer is, at once (NULL = none) */
    int64_t stop_id;                /* its id in the vocabulary (found by open_vocab's caller) */
    const char *favour[MAX_FAVOUR]; /* --favour: tokens that win wherever allowed, the first most */
    int64_t favour_id[MAX_FAVOUR];
    int n_favour;
    const char *special[MAX_SPECIAL]; /* --add-special: control tokens appended to the vocabulary */
    int n_special;
    const struct projector_kind *projector; /* --projector: write this instead of a text model */
    int64_t image_size;                     /* --image-size: a vision projector's square input, pixels */
    int64_t patch_size;                     /* --patch-size: its patch side, pixels */
    const char *tts_pair; /* --tts-pair pocket|qwen3tts: a speech pair, PREFIX(-mmproj).gguf */
    const char *arch;     /* the text model's general.architecture ("llama") */
    bool tts_endless;     /* --tts-endless: a Qwen3-TTS pair whose end token never wins */
    bool rerank;          /* --rerank: a qwen3 reranker (q/k norms, a rank head cls.output, pooling rank) */
    bool fim;             /* --fim: the vocabulary's FIM tokens (Qwen's appended when absent), ids recorded */
    int64_t fim_id[6];    /* their ids, in FIM_TOKENS' order (found by open_text_model) */
};

/* One tensor of the file: its shape in ggml order (ne0 is the row length), type and weights. */
struct tensor_spec {
    char name[GGML_MAX_NAME];
    int64_t ne0; /* row length (input dimension) */
    int64_t ne1; /* rows; 1 for vectors */
    int64_t ne2; /* 1 below three dimensions (convolution kernels have three or four) */
    int64_t ne3;
    int n_dims;
    enum ggml_type type;
    float std;      /* 0: constant NORM_WEIGHT */
    bool zero;      /* all zeros (a bias; a projection of an inactive block, --perturb 0) */
    bool has_value; /* every element is value (a bias that keeps a head from firing) */
    float value;
    /* --stop-token: how the tensor makes one token win everywhere (see STOP_*); STOP_COMPONENT, how
     * --tts-pair qwen3tts steers its end token: every row's first component is value, but row stop_id's,
     * which is -STOP_SCALE */
    enum { STOP_NONE, STOP_EMBD, STOP_NORM, STOP_OUTPUT, STOP_COMPONENT } stop;
    int64_t stop_id;
    const int64_t *favour_id; /* --favour: the output rows that read the large component, in rank order */
    int n_favour;
};

struct plan {
    struct tensor_spec *t;
    size_t n;
    size_t cap;
};

/* plan.c */
#define PROG "sipp-synth"
/* A problem, on stderr as "sipp-synth: ...". */
void report(const char *fmt, ...);
void vreport(const char *fmt, va_list ap);
/* Appends a tensor of up to four dimensions (ne[k] for k >= n_dims is ignored) to a plan with room. */
struct tensor_spec *plan_add_nd(struct plan *p, const char *name, int n_dims, const int64_t ne[4],
                                enum ggml_type type, float std);

/* The seed of a named tensor, and one row of its seeded noise of standard deviation std. */
uint64_t tensor_seed(uint64_t seed, const char *name);
void fill_row(float *dst, int64_t n, uint64_t row_seed, float std);

/* whisper_model.c: sipp-synth --whisper SHAPE, a whisper.cpp model (its own ggml file format). */
int whisper_synth_main(int argc, char **argv);

/* lora.c: sipp-synth --lora-for BASE.gguf, a LoRA adapter with random weights for BASE. */
int lora_synth_main(int argc, char **argv);

/* projector.c */
/* The projector kind --projector NAME names, or NULL; projector_names() lists them for messages. */
const struct projector_kind *projector_find(const char *name);
const char *projector_names(void);
/* Checks the flags a projector needs.  Returns NULL, or a message for a usage error. */
const char *projector_check(const struct options *o);
/* Fills in the projector's keys and tensor plan (p is allocated here).  Returns false after
 * reporting. */
bool projector_build(struct gguf_context *ctx, struct plan *p, const struct options *o);

/* The speech pairs' tensors, all f32, named by printf formats: a weight of std 1/sqrt(fan-in) (every
 * dimension but the last feeds each output), a vector of one value (0: zeros), PREFIX.weight {n_in,
 * n_out} (and PREFIX.bias of zeros), a norm's ones and zeros, a 1-D convolution PREFIX.weight {k, a, b}
 * (a transposed one's is {k, out, in}) and its bias of n_bias zeros (0: none). */
struct tensor_spec *plan_addf(struct plan *p, enum ggml_type type, int n_dims, const int64_t ne[4], float std,
                              const char *fmt, ...) __attribute__((format(printf, 6, 7)));
void plan_weight(struct plan *p, int n_dims, const int64_t ne[4], const char *name);
void plan_constant(struct plan *p, int64_t n, float value, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void plan_linear(struct plan *p, const char *prefix, int64_t n_in, int64_t n_out, bool bias);
void plan_norm(struct plan *p, const char *prefix, int64_t n);
void plan_conv(struct plan *p, const char *prefix, int64_t k, int64_t a, int64_t b, int64_t n_bias);

/* tts_pair.c: --tts-pair pocket */
/* The tensors of a Pocket TTS backbone of o's shape (appended to p, which has room). */
void tts_pair_backbone_plan(struct plan *p, const struct options *o, int64_t n_vocab);
/* The keys and tensor plan of its projector (p is allocated here). Returns false after reporting. */
bool tts_pair_projector(struct gguf_context *ctx, struct plan *p, const struct options *o);

/* What both pairs' projectors share: a speech projector's header (general.*, the encoders it has; p
 * allocated with room for cap tensors; false after reporting), one clip.MODALITY.SUFFIX number, and
 * the shape keys clip.cpp reads for one modality ("audio" or "gen.audio"). */
struct tts_clip_shape {
    int64_t width, ff, layers, heads, projection;
    float eps;
};
bool tts_clip_start(struct gguf_context *ctx, struct plan *p, const struct options *o, size_t cap,
                    const char *what);
void tts_clip_u32(struct gguf_context *ctx, const char *modality, const char *suffix, int64_t v);
void tts_clip_modality(struct gguf_context *ctx, const char *modality, const struct tts_clip_shape *s);

/* tts_qwen3.c: --tts-pair qwen3tts */
#define QWEN3TTS_ARCH "qwen3tts"
/* The text tokens its pipeline looks up (appended when VOCAB lacks them), and the codec's tokens, the
 * last QWEN3TTS_CODEC_TOKENS of the vocabulary: "<|codec_N|>" or a named special's text. */
extern const char *const QWEN3TTS_TEXT_TOKENS[];
extern const int QWEN3TTS_N_TEXT_TOKENS;
#define QWEN3TTS_CODEC_TOKENS 3072
const char *tts_qwen3_codec_token(int64_t i);
/* The backbone's own keys (rope sections, end token, suppressed tokens), once the tokenizer's are in. */
void tts_qwen3_backbone_keys(struct gguf_context *ctx, int64_t n_vocab, int64_t head_dim);
/* The tensors of the backbone (appended to p, which has room), and its projector (as tts_pair's). */
void tts_qwen3_backbone_plan(struct plan *p, const struct options *o, int64_t n_vocab);
bool tts_qwen3_projector(struct gguf_context *ctx, struct plan *p, const struct options *o);

#endif
