/*
 * synth.h: what sipp-synth's two writers share. sipp-synth.c writes a text model (the default) and
 * owns the flags, the tensor plan and the streaming writer; projector.c writes a multimodal projector
 * (--projector) into the same plan, so that both kinds of file get the same seeded, chunked weights;
 * plan.c holds what both call (adding a tensor, reporting a problem).
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
    const char *tts_pair;                   /* --tts-pair pocket: a speech pair, PREFIX(-mmproj).gguf */
    const char *arch;                       /* the text model's general.architecture ("llama") */
    bool rerank;       /* --rerank: a qwen3 reranker (q/k norms, a rank head cls.output, pooling rank) */
    bool fim;          /* --fim: the vocabulary's FIM tokens (Qwen's appended when absent), ids recorded */
    int64_t fim_id[6]; /* their ids, in FIM_TOKENS' order (found by open_text_model) */
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
    /* --stop-token: how the tensor makes one token win everywhere (see STOP_*) */
    enum { STOP_NONE, STOP_EMBD, STOP_NORM, STOP_OUTPUT } stop;
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

/* tts_pair.c */
/* The tensors of a Pocket TTS backbone of o's shape (appended to p, which has room). */
void tts_pair_backbone_plan(struct plan *p, const struct options *o, int64_t n_vocab);
/* The keys and tensor plan of its projector (p is allocated here). Returns false after reporting. */
bool tts_pair_projector(struct gguf_context *ctx, struct plan *p, const struct options *o);

#endif
