/*
 * sipp-synth: writes a llama-architecture GGUF model with random weights, for tests and benchmarks.
 *
 * No real model can be downloaded where sipp is tested, so this tool fabricates one that llama.cpp
 * loads and runs like any other: a real tokenizer (copied from one of llama.cpp's tokenizer-only
 * vocab files, e.g. ggml-vocab-llama-bpe.gguf), the standard LLM_ARCH_LLAMA hyperparameters and
 * tensors, and weights drawn from a seeded PRNG.
 *
 * Design
 *   - Metadata.  A gguf_context gets general.* and llama.* keys built from the flags, every
 *     tokenizer.* key of the vocab file (scalars and arrays, copied type for type), minus any chat
 *     template the vocab carries; --chat-template then adds one of the built-in Jinja templates.
 *   - Tensor layout.  Shapes follow llama.cpp's src/models/llama.cpp, in ggml order (ne0 is the
 *     input/row dimension): token_embd {n_embd, n_vocab}, per layer attn_norm {n_embd},
 *     attn_q {n_embd, n_embd}, attn_k/attn_v {n_embd, n_embd_kv}, attn_output {n_embd, n_embd},
 *     ffn_norm {n_embd}, ffn_gate/ffn_up {n_embd, n_ff}, ffn_down {n_ff, n_embd}; then
 *     output_norm {n_embd} and output {n_embd, n_vocab}.  Norms are F32 (all ones); every matrix,
 *     token_embd included, is stored in the chosen --type.
 *   - Streaming.  Tensor descriptors live in a no_alloc ggml context, so gguf_add_tensor computes
 *     the offsets without any data.  The header, KV section and tensor infos are written with
 *     gguf_write_to_file_ptr(only_meta = true) (which pads to the data alignment); the data is then
 *     appended one tensor at a time, in chunks of rows, each tensor padded to the alignment.  Peak
 *     memory is the vocab metadata plus one chunk (tens of MB), whatever the model size.  The file
 *     is written under a temporary name next to --out and renamed into place when complete.
 *   - Weights.  Every row has its own PRNG stream, seeded from (--seed, tensor name, row index) with
 *     splitmix64, so the bytes depend only on the flags: never on the thread count or chunking.  Each
 *     value is an Irwin-Hall sum of four 16-bit uniforms (cheap and normal-ish), scaled to a std of
 *     0.02 for layer matrices, larger for token_embd (so the current token stays visible through the
 *     residual stream) and for output (so the logits have a std of about 2 and greedy decoding does
 *     not settle on one token).  Rows are generated and quantized (ggml_quantize_chunk) by a few
 *     worker threads, one contiguous slice of the chunk each.
 *
 *   - Speculative pairs.  Because a row's values depend only on the seed, the tensor's name and the
 *     row, `--layers K` writes exactly the first K blocks of the model the other flags describe
 *     (same embeddings, output and tokenizer, block_count K): a draft of it.  `--active-layers K`
 *     makes the target of such a draft: the blocks past the first K get attention-output and
 *     FFN-down projections of zeros scaled up by `--perturb S` (noise of S times the layer std), so
 *     with S = 0 those blocks add nothing to the residual stream and the target's logits are the
 *     draft's (greedy acceptance 100%), and a larger S moves the target away from its draft.
 *
 * Exit status: 0 on success, 1 on runtime errors (unreadable vocab, I/O), 2 on bad usage.
 */

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/splitmix.h"
#include "ggml.h"
#include "gguf.h"
#include "llama.h" /* only for the LLAMA_FTYPE_* and LLAMA_POOLING_TYPE_* values; nothing is called */
#include "synth.h"

enum {
    EXIT_USAGE = 2,
    EXIT_RUNTIME = 1,
};

/* defaults: a tiny model that loads and runs in well under a second */
#define DEFAULT_N_EMBD 256
#define DEFAULT_N_LAYER 4
#define DEFAULT_N_HEAD 8
#define DEFAULT_N_HEAD_KV 4
#define DEFAULT_N_FF 768
#define DEFAULT_N_CTX 4096
#define DEFAULT_SEED 42
#define DEFAULT_NAME "sipp-synth"
#define DEFAULT_TEMPLATE "chatml"
#define DEFAULT_IMAGE_SIZE 48 /* --projector llava: 48 px in 8 px patches, 36 tokens an image */
#define DEFAULT_PATCH_SIZE 8

/* upper bounds on the flags, to reject typos before they turn into terabyte files */
#define MAX_DIM (1 << 16) /* n_embd, n_ff */
#define MAX_HEADS 1024
#define MAX_LAYERS 512 /* LLAMA_MAX_LAYERS in llama.cpp */
#define MAX_CTX (1 << 24)
#define MAX_IMAGE_SIZE 8192 /* mtmd's own cap on clip.vision.image_size */
#define MAX_PERTURB 100.0   /* --perturb: far past where the target forgets its draft */

/* fixed hyperparameters */
#define RMS_NORM_EPS 1e-5f
#define ROPE_FREQ_BASE 10000.0f
#define NORM_WEIGHT 1.0f

/* weight scales: std of layer matrices and token embeddings, and the target std of the logits */
#define LAYER_WEIGHT_STD 0.02f
#define EMBD_WEIGHT_STD 0.5f
#define OUTPUT_LOGIT_STD 2.0f

/* FNV-1a, 64-bit, for tensor names */
#define FNV_OFFSET UINT64_C(0xCBF29CE484222325)
#define FNV_PRIME UINT64_C(0x100000001B3)

/* Irwin-Hall: the sum of IH_LANES uniform IH_LANE_BITS-bit lanes of one 64-bit draw */
#define IH_LANES 4
#define IH_LANE_BITS 16
#define IH_LANE_MASK ((UINT64_C(1) << IH_LANE_BITS) - 1)
#define IH_LANE_RANGE ((double)(IH_LANE_MASK + 1))
#define UNIFORM_VARIANCE (1.0 / 12.0)

/* streaming: elements generated per worker thread per chunk, and the thread cap */
#define CHUNK_ELEMS_PER_THREAD ((int64_t)1 << 22)
#define MAX_THREADS 16

#define TOKEN_TYPE_CONTROL 3 /* llama_token_type's LLAMA_TOKEN_TYPE_CONTROL, as GGUF stores it */

#define KEY_BUF 256
#define ERR_BUF 512
#define DESC_BUF 256
#define TMP_SUFFIX ".XXXXXX"
#define OUT_FILE_MODE 0644
#define TOKENIZER_PREFIX "tokenizer."
/* --tts-pair pocket (tts_pair.c): the backbone's architecture, the token its pipeline starts audio
 * with, and the tensors a block has beyond a llama block's (biased norms, no gate) */
#define TTS_PAIR_ARCH "pockettts"
#define TTS_PAIR_AUDIO_BOS "<|audio_bos|>"
#define TTS_PAIR_EXTRA 4
#define TTS_PAIR_PROJECTOR_SUFFIX "-mmproj.gguf"
#define TTS_PAIR_BACKBONE_SUFFIX ".gguf"
#define TEMPLATE_KEY "tokenizer.chat_template"
/* --rerank: Qwen3's reranker shape (what convert_hf_to_gguf.py makes of Qwen3-Reranker): a qwen3
 * model whose rank head cls.output scores "yes" and "no" (at the output's scale), softmaxed; the
 * score is P(yes). */
#define RERANK_ARCH "qwen3"
#define RERANK_LABELS 2
#define NO_VALUE (-1) /* struct flag.max of a flag that takes no value */
#define TOKENS_KEY "tokenizer.ggml.tokens"
#define SCORES_KEY "tokenizer.ggml.scores"
#define TOKEN_TYPE_KEY "tokenizer.ggml.token_type"
#define STOP_EMBD_VALUE 16.0f /* --stop-token: the first embedding component, far above the noise */
#define STOP_SCALE 8.0f       /* --stop-token: the final norm's and the stop token's output weight */

/* ---------------------------------------------------------------------------------------------- */
/* chat templates                                                                                  */

/* the standard ChatML template */
static const char TEMPLATE_CHATML[] =
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/* Meta Llama 3 Instruct */
static const char TEMPLATE_LLAMA3[] =
    "{% set loop_messages = messages %}"
    "{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}"
    "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";

struct named_template {
    const char *name;
    const char *text; /* NULL: no template key */
};

static const struct named_template TEMPLATES[] = {
    {"chatml", TEMPLATE_CHATML},
    {"llama3", TEMPLATE_LLAMA3},
    {"none", NULL},
};

/* ---------------------------------------------------------------------------------------------- */
/* options                                                                                         */

static const struct weight_type WEIGHT_TYPES[] = {
    {"f16", GGML_TYPE_F16, LLAMA_FTYPE_MOSTLY_F16}, /* the default: the first */
    {"q8_0", GGML_TYPE_Q8_0, LLAMA_FTYPE_MOSTLY_Q8_0},
    {"q4_0", GGML_TYPE_Q4_0, LLAMA_FTYPE_MOSTLY_Q4_0},
    {"f32", GGML_TYPE_F32, LLAMA_FTYPE_ALL_F32},
};

struct pooling {
    const char *name;
    uint32_t value;
};

static const struct pooling POOLINGS[] = {
    {"none", LLAMA_POOLING_TYPE_NONE}, {"mean", LLAMA_POOLING_TYPE_MEAN}, {"cls", LLAMA_POOLING_TYPE_CLS},
    {"last", LLAMA_POOLING_TYPE_LAST}, {"rank", LLAMA_POOLING_TYPE_RANK},
};

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

/* The whole of a text file (malloc'ed), or NULL when it cannot be read or is empty. */
static char *read_text_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (len + 1 == cap) {
            char *bigger = realloc(buf, cap * 2);
            if (!bigger) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    fclose(f);
    if (!buf || len == 0) {
        free(buf);
        return NULL;
    }
    buf[len] = '\0';
    return buf;
}

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: " PROG " --out FILE --vocab VOCAB.gguf [options]\n"
        "       " PROG " --out FILE --projector KIND [--n-embd N] [projector options]\n"
        "       " PROG " --out PREFIX --tts-pair pocket|qwen3tts --vocab VOCAB.gguf [backbone shape]\n"
        "       " PROG " --out FILE --whisper tiny|base|test --vocab ggml-vocab-gpt-2.gguf [--type f16|f32]\n"
        "       " PROG " --out A.gguf --lora-for BASE.gguf [--rank R] [--seed N] [--std S]\n"
        "\n"
        "Writes a llama-architecture GGUF model with random weights and the tokenizer of VOCAB.gguf\n"
        "(one of llama.cpp's tokenizer-only files, e.g. ggml-vocab-llama-bpe.gguf), or with --projector\n"
        "a multimodal projector (an mmproj file) that llama.cpp's mtmd loads beside such a model, or with\n"
        "--whisper a whisper.cpp speech-to-text model (its ggml format) of that shape.\n"
        "\n"
        "  --out FILE              output model file (required)\n"
        "  --vocab VOCAB.gguf      tokenizer source (required)\n"
        "  --n-embd N              embedding width (default %d)\n"
        "  --n-layer N             number of blocks (default %d)\n"
        "  --n-head N              attention heads; must divide --n-embd (default %d)\n"
        "  --n-head-kv N           KV heads; must divide --n-head (default %d)\n"
        "  --n-ff N                feed-forward width (default %d)\n"
        "  --n-ctx N               training context length (default %d)\n"
        "  --type f32|f16|q8_0|q4_0\n"
        "                          weight type of the matrices; norms stay f32 (default f16); f32 for a\n"
        "                          model to train with sipp-train (llama.cpp trains only f32 tensors)\n"
        "  --seed N                PRNG seed; equal flags give byte-identical files (default %d)\n"
        "  --chat-template NAME    chatml, llama3 or none (default " DEFAULT_TEMPLATE ")\n"
        "  --chat-template-file F  a Jinja template file (e.g. llama.cpp's models/templates/*.jinja)\n"
        "  --name NAME             general.name (default " DEFAULT_NAME ")\n"
        "  --pooling TYPE          none|mean|cls|last|rank: writes llama.pooling_type (default: unset)\n"
        "  --rerank                a reranker as llama-server --rerank loads it: Qwen3's architecture\n"
        "                          (qwen3), a rank head cls.output with labels yes and no, pooling rank\n"
        "  --fim                   record the vocabulary's fill-in-the-middle token ids\n"
        "                          (tokenizer.ggml.fim_*_token_id; Qwen's <|fim_prefix|>, ... appended\n"
        "                          as control tokens when the vocabulary has none of its own)\n"
        "  --layers K              write only the first K blocks: the draft of the model the other\n"
        "                          flags describe (same seed, embeddings and output)\n"
        "  --output separate|tied  the output projection: its own matrix (default), or tied to the\n"
        "                          token embeddings (no output.weight; llama.cpp reuses token_embd)\n"
        "  --stop-token TEXT       a model that ends every answer at once: the vocabulary's token TEXT\n"
        "                          (e.g. \"<|im_end|>\") wins at every position (for tests of clients\n"
        "                          that need a finished turn; the rest of the weights stay random)\n"
        "  --favour TEXT           a token that wins wherever a grammar allows it (repeatable, at most\n"
        "                          6; the first given wins over the next): all other logits are equal,\n"
        "                          so where none is allowed the pick is uniform among the allowed (for\n"
        "                          tests of grammars that only end on a rare token, such as a newline)\n"
        "  --add-special TEXT      append TEXT to the vocabulary as a control token (repeatable), e.g.\n"
        "                          \"<|im_start|>\" and \"<|im_end|>\" for a ChatML model of a vocabulary\n"
        "                          without them (llama.cpp ends a turn at \"<|im_end|>\")\n"
        "  --active-layers K       blocks past the first K add only --perturb S times noise (their\n"
        "                          attention-output and FFN-down projections): the target of that draft\n"
        "  --perturb S             the scale of that noise, relative to the layers' (default 0: none)\n"
        "  --tts-pair pocket       a Pocket TTS speech pair instead: PREFIX.gguf (the backbone, of the\n"
        "                          shape the flags give, VOCAB's tokenizer plus <|audio_bos|>) and\n"
        "                          PREFIX-mmproj.gguf (its flow net and mimi decoder), which llama-tts\n"
        "                          and sipp speak load; f32 weights\n"
        "  --tts-pair qwen3tts     a Qwen3-TTS speech pair: PREFIX.gguf (the talker, VOCAB's tokenizer\n"
        "                          plus its text tokens and 3072 codec tokens) and PREFIX-mmproj.gguf\n"
        "                          (speaker encoder, code predictor, code2wav); it ends each piece of\n"
        "                          text after one frame (80 ms); f32 weights\n"
        "  --tts-endless           with --tts-pair qwen3tts: the end token never wins, so every piece\n"
        "                          of text runs to the frame cap (llama-tts's 512, or the caller's)\n"
        "  --help                  print this help\n"
        "\n"
        "Projectors (random weights, the same flags give the same bytes; --n-embd is the width of the\n"
        "text model the projector feeds, --type f16 or f32, --seed and --name as above):\n"
        "  --projector llava       vision: a CLIP ViT and LLaVA's two-layer MLP (clip.projector_type\n"
        "                          \"mlp\"); mtmd resizes each image to --image-size square, and an\n"
        "                          image costs (image size / patch size)^2 tokens\n"
        "  --projector qwen2a      audio: Qwen2-Audio's Whisper encoder and linear projection\n"
        "                          (clip.projector_type \"qwen2a\"); 16 kHz audio in 30 s chunks, each\n"
        "                          750 tokens (mtmd pads a shorter clip to one chunk)\n"
        "  --image-size N          llava: the square input, in pixels (default %d)\n"
        "  --patch-size N          llava: the patch side, in pixels; divides --image-size (default %d)\n",
        DEFAULT_N_EMBD, DEFAULT_N_LAYER, DEFAULT_N_HEAD, DEFAULT_N_HEAD_KV, DEFAULT_N_FF, DEFAULT_N_CTX,
        DEFAULT_SEED, DEFAULT_IMAGE_SIZE, DEFAULT_PATCH_SIZE);
}

static void die_usage(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vreport(fmt, ap);
    va_end(ap);
    exit(EXIT_USAGE);
}

static int64_t parse_int(const char *flag, const char *s, int64_t max) {
    char *end = NULL;
    errno = 0;
    const long long v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0') {
        die_usage("%s: '%s' is not an integer", flag, s);
    }
    if (v <= 0 || v > max) {
        die_usage("%s: %lld is out of range (1..%" PRId64 ")", flag, v, max);
    }
    return (int64_t)v;
}

static uint64_t parse_seed(const char *s) {
    char *end = NULL;
    errno = 0;
    const unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || s[0] == '-') {
        die_usage("--seed: '%s' is not a non-negative integer", s);
    }
    return (uint64_t)v;
}

/* ---- the options: one row per flag (src/cli/options.c is the model) ------------------------------
 *
 * A row names the flag, which file it describes (both, the text model only, or the projector only:
 * a flag of the other kind is refused), and how its value is read: a whole number in 1..max into an
 * int64_t field of struct options, or a setter of its own. */

enum flag_kind { FOR_BOTH, FOR_TEXT, FOR_PROJECTOR };

struct flag {
    const char *name;
    enum flag_kind kind;
    void (*set)(struct options *o, const struct flag *f, const char *val);
    size_t field; /* set_whole: offsetof the int64_t it fills */
    int64_t max;  /* set_whole: the largest value */
};

static void set_whole(struct options *o, const struct flag *f, const char *val) {
    *(int64_t *)(void *)((char *)o + f->field) = parse_int(f->name, val, f->max);
}

static bool is_qwen3(const struct options *o) { return o->tts_pair && strcmp(o->tts_pair, "qwen3tts") == 0; }

static const char *nonempty(const struct flag *f, const char *val, const char *what) {
    if (!*val) die_usage("%s: empty %s", f->name, what);
    return val;
}

static void set_out(struct options *o, const struct flag *f, const char *val) {
    o->out = nonempty(f, val, "file name");
}

static void set_vocab(struct options *o, const struct flag *f, const char *val) {
    o->vocab = nonempty(f, val, "file name");
}

static void set_seed(struct options *o, const struct flag *f, const char *val) { o->seed = parse_seed(val); }

static void set_name(struct options *o, const struct flag *f, const char *val) { o->name = val; }

static void set_type(struct options *o, const struct flag *f, const char *val) {
    o->wtype = NULL;
    for (size_t k = 0; k < COUNT_OF(WEIGHT_TYPES); k++)
        if (strcmp(val, WEIGHT_TYPES[k].name) == 0) o->wtype = &WEIGHT_TYPES[k];
    if (!o->wtype) die_usage("--type: unknown type '%s' (expected f32, f16, q8_0 or q4_0)", val);
}

static void set_template(struct options *o, const struct flag *f, const char *val) {
    o->tmpl = NULL;
    for (size_t k = 0; k < COUNT_OF(TEMPLATES); k++)
        if (strcmp(val, TEMPLATES[k].name) == 0) o->tmpl = &TEMPLATES[k];
    if (!o->tmpl) die_usage("--chat-template: unknown template '%s' (expected chatml, llama3 or none)", val);
}

static void set_template_file(struct options *o, const struct flag *f, const char *val) {
    free(o->tmpl_file_text);
    o->tmpl_file_text = read_text_file(val);
    if (!o->tmpl_file_text) die_usage("--chat-template-file: cannot read '%s' (or it is empty)", val);
}

static void set_tts_pair(struct options *o, const struct flag *f, const char *val) {
    if (o->tts_pair) die_usage("--tts-pair: give one pair");
    if (strcmp(val, "pocket") != 0 && strcmp(val, "qwen3tts") != 0)
        die_usage("--tts-pair: unknown pair '%s' (expected pocket or qwen3tts)", val);
    o->tts_pair = val;
    if (is_qwen3(o)) return; /* its text tokens are appended where the vocabulary lacks them */
    if (o->n_special == MAX_SPECIAL) die_usage("--add-special: at most %d tokens", MAX_SPECIAL - 1);
    o->special[o->n_special++] = TTS_PAIR_AUDIO_BOS; /* the token the pipeline starts audio with */
}

static void set_pooling(struct options *o, const struct flag *f, const char *val) {
    o->pooling = NULL;
    for (size_t k = 0; k < COUNT_OF(POOLINGS); k++)
        if (strcmp(val, POOLINGS[k].name) == 0) o->pooling = &POOLINGS[k];
    if (!o->pooling)
        die_usage("--pooling: unknown pooling '%s' (expected none, mean, cls, last or rank)", val);
}

static void set_perturb(struct options *o, const struct flag *f, const char *val) {
    char *end;
    errno = 0;
    o->perturb = strtod(val, &end);
    if (errno || end == val || *end || !(o->perturb >= 0 && o->perturb <= MAX_PERTURB))
        die_usage("--perturb: '%s' is not a number in [0, %g]", val, MAX_PERTURB);
    o->perturb_set = true;
}

static void set_output(struct options *o, const struct flag *f, const char *val) {
    if (strcmp(val, "tied") != 0 && strcmp(val, "separate") != 0)
        die_usage("--output: unknown '%s' (expected separate or tied)", val);
    o->tied_output = strcmp(val, "tied") == 0;
}

static void set_stop_token(struct options *o, const struct flag *f, const char *val) {
    o->stop_token = nonempty(f, val, "token text");
}

static void set_favour(struct options *o, const struct flag *f, const char *val) {
    nonempty(f, val, "token text");
    if (o->n_favour == MAX_FAVOUR) die_usage("--favour: at most %d tokens", MAX_FAVOUR);
    o->favour[o->n_favour++] = val;
}

static void set_add_special(struct options *o, const struct flag *f, const char *val) {
    nonempty(f, val, "token text");
    if (o->n_special == MAX_SPECIAL) die_usage("--add-special: at most %d tokens", MAX_SPECIAL);
    o->special[o->n_special++] = val;
}

static void set_rerank(struct options *o, const struct flag *f, const char *val) { o->rerank = true; }
static void set_tts_endless(struct options *o, const struct flag *f, const char *val) {
    o->tts_endless = true;
}

static void set_fim(struct options *o, const struct flag *f, const char *val) { o->fim = true; }

static void set_projector(struct options *o, const struct flag *f, const char *val) {
    o->projector = projector_find(val);
    if (!o->projector) die_usage("--projector: unknown kind '%s' (expected %s)", val, projector_names());
}

#define WHOLE(flag, kind, member, max)                                                                       \
    { flag, kind, set_whole, offsetof(struct options, member), max }

static const struct flag FLAGS[] = {
    {"--out", FOR_BOTH, set_out, 0, 0},
    WHOLE("--n-embd", FOR_BOTH, n_embd, MAX_DIM),
    {"--type", FOR_BOTH, set_type, 0, 0},
    {"--seed", FOR_BOTH, set_seed, 0, 0},
    {"--name", FOR_BOTH, set_name, 0, 0},
    {"--vocab", FOR_TEXT, set_vocab, 0, 0},
    WHOLE("--n-layer", FOR_TEXT, n_layer, MAX_LAYERS),
    WHOLE("--n-head", FOR_TEXT, n_head, MAX_HEADS),
    WHOLE("--n-head-kv", FOR_TEXT, n_head_kv, MAX_HEADS),
    WHOLE("--n-ff", FOR_TEXT, n_ff, MAX_DIM),
    WHOLE("--n-ctx", FOR_TEXT, n_ctx, MAX_CTX),
    {"--chat-template", FOR_TEXT, set_template, 0, 0},
    {"--chat-template-file", FOR_TEXT, set_template_file, 0, 0},
    {"--pooling", FOR_TEXT, set_pooling, 0, 0},
    WHOLE("--layers", FOR_TEXT, layers, MAX_LAYERS),
    WHOLE("--active-layers", FOR_TEXT, active_layers, MAX_LAYERS),
    {"--perturb", FOR_TEXT, set_perturb, 0, 0},
    {"--output", FOR_TEXT, set_output, 0, 0},
    {"--stop-token", FOR_TEXT, set_stop_token, 0, 0},
    {"--add-special", FOR_TEXT, set_add_special, 0, 0},
    {"--favour", FOR_TEXT, set_favour, 0, 0},
    {"--rerank", FOR_TEXT, set_rerank, 0, NO_VALUE},
    {"--fim", FOR_TEXT, set_fim, 0, NO_VALUE},
    {"--tts-pair", FOR_TEXT, set_tts_pair, 0, 0},
    {"--tts-endless", FOR_TEXT, set_tts_endless, 0, NO_VALUE},
    {"--projector", FOR_PROJECTOR, set_projector, 0, 0},
    WHOLE("--image-size", FOR_PROJECTOR, image_size, MAX_IMAGE_SIZE),
    WHOLE("--patch-size", FOR_PROJECTOR, patch_size, MAX_IMAGE_SIZE),
};

/* The row of arg ("--flag" or "--flag=VALUE"); *val is what follows '=', or NULL. */
static const struct flag *find_flag(const char *arg, const char **val) {
    const char *eq = strchr(arg, '=');
    const size_t n = eq ? (size_t)(eq - arg) : strlen(arg);
    *val = eq ? eq + 1 : NULL;
    for (size_t k = 0; k < COUNT_OF(FLAGS); k++)
        if (strlen(FLAGS[k].name) == n && strncmp(arg, FLAGS[k].name, n) == 0) return &FLAGS[k];
    die_usage("unknown flag '%.*s' (see --help)", (int)(n < KEY_BUF ? n : strlen(arg)), arg);
    return NULL;
}

/* The shape rules of a text model, once every flag is read. */
static void check_text_model(const struct options *o) {
    if (!o->vocab) die_usage("--vocab is required (see --help)");
    if (o->layers > o->n_layer)
        die_usage("--layers %" PRId64 " is more than --n-layer %" PRId64, o->layers, o->n_layer);
    if (o->active_layers >= o->n_layer)
        die_usage("--active-layers %" PRId64 " leaves no block of --n-layer %" PRId64 " to perturb",
                  o->active_layers, o->n_layer);
    if (o->perturb_set && !o->active_layers) die_usage("--perturb needs --active-layers K");
    if (o->layers && o->active_layers && o->layers > o->active_layers)
        die_usage("--layers %" PRId64 " is more than --active-layers %" PRId64
                  ": the draft holds only active blocks",
                  o->layers, o->active_layers);
    if (o->tied_output && (o->stop_token || o->n_favour))
        die_usage("--stop-token and --favour need the output matrix of its own: leave out --output tied");
    if (o->stop_token && o->n_favour) die_usage("--stop-token and --favour do not go together: give one");
    if (o->tts_pair && (o->stop_token || o->n_favour || o->layers || o->active_layers || o->tied_output))
        die_usage("--tts-pair writes a whole speech pair of its own make: leave out --stop-token, --favour, "
                  "--layers, --active-layers and --output tied");
    if (o->tts_endless && !is_qwen3(o)) die_usage("--tts-endless goes with --tts-pair qwen3tts");
    if (o->rerank && (o->tts_pair || o->layers || o->active_layers))
        die_usage(
            "--rerank writes a whole qwen3 reranker: leave out --tts-pair, --layers and --active-layers");
    if (o->n_embd % o->n_head != 0)
        die_usage("--n-embd %" PRId64 " is not divisible by --n-head %" PRId64, o->n_embd, o->n_head);
    if (o->n_head % o->n_head_kv != 0)
        die_usage("--n-head %" PRId64 " is not divisible by --n-head-kv %" PRId64, o->n_head, o->n_head_kv);
    if ((o->n_embd / o->n_head) % 2 != 0)
        die_usage("--n-embd / --n-head = %" PRId64 " must be even (RoPE rotates pairs)",
                  o->n_embd / o->n_head);
    const int64_t blck = ggml_blck_size(o->wtype->type);
    if (o->n_embd % blck != 0)
        die_usage("--n-embd %" PRId64 " must be a multiple of %" PRId64 " for --type %s", o->n_embd, blck,
                  o->wtype->name);
    if (o->n_ff % blck != 0)
        die_usage("--n-ff %" PRId64 " must be a multiple of %" PRId64 " for --type %s", o->n_ff, blck,
                  o->wtype->name);
}

static void parse_args(int argc, char **argv, struct options *o) {
    *o = (struct options){
        .n_embd = DEFAULT_N_EMBD,
        .n_layer = DEFAULT_N_LAYER,
        .n_head = DEFAULT_N_HEAD,
        .n_head_kv = DEFAULT_N_HEAD_KV,
        .n_ff = DEFAULT_N_FF,
        .n_ctx = DEFAULT_N_CTX,
        .seed = DEFAULT_SEED,
        .wtype = &WEIGHT_TYPES[0],
        .tmpl = &TEMPLATES[0],
        .name = DEFAULT_NAME,
        .pooling = NULL,
        .image_size = DEFAULT_IMAGE_SIZE,
        .patch_size = DEFAULT_PATCH_SIZE,
    };
    const char *text_flag = NULL;      /* the first flag given that only a text model takes */
    const char *projector_flag = NULL; /* the first that only a projector takes, --projector aside */
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *val;
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            usage(stdout);
            exit(0);
        }
        if (strncmp(arg, "--", 2) != 0) die_usage("unexpected argument '%s' (see --help)", arg);
        const struct flag *f = find_flag(arg, &val);
        if (f->kind == FOR_TEXT && !text_flag) text_flag = f->name;
        if (f->kind == FOR_PROJECTOR && f->set != set_projector && !projector_flag) projector_flag = f->name;
        if (val && f->max == NO_VALUE) die_usage("%s takes no value", f->name);
        if (!val && f->max != NO_VALUE) {
            if (i + 1 >= argc) die_usage("%s needs a value", f->name);
            val = argv[++i];
        }
        f->set(o, f, val);
    }
    if (!o->out) die_usage("--out is required (see --help)");
    if (o->projector) {
        if (text_flag) die_usage("%s describes a text model; it does not apply to --projector", text_flag);
        const char *problem = projector_check(o);
        if (problem) die_usage("%s", problem);
        return;
    }
    if (projector_flag) die_usage("%s needs --projector", projector_flag);
    check_text_model(o);
}

/* ---------------------------------------------------------------------------------------------- */
/* ggml log capture: keeps the last error so that it can be quoted in our own message              */

static char g_last_ggml_error[ERR_BUF];

static void ggml_log_quiet(enum ggml_log_level level, const char *text, void *user_data) {
    if (level == GGML_LOG_LEVEL_ERROR) {
        snprintf(g_last_ggml_error, sizeof(g_last_ggml_error), "%s", text);
        const size_t n = strlen(g_last_ggml_error);
        if (n > 0 && g_last_ggml_error[n - 1] == '\n') g_last_ggml_error[n - 1] = '\0';
    }
}

/* ---------------------------------------------------------------------------------------------- */
/* metadata                                                                                        */

static bool has_prefix(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

/* tokenizer.chat_template and tokenizer.chat_template.NAME */
static bool is_template_key(const char *key) {
    return strcmp(key, TEMPLATE_KEY) == 0 ||
           (has_prefix(key, TEMPLATE_KEY) && key[strlen(TEMPLATE_KEY)] == '.');
}

/* Copies one key of src into dst, type for type.  Returns false on an unsupported type. */
static bool copy_kv(struct gguf_context *dst, const struct gguf_context *src, int64_t id) {
    const char *key = gguf_get_key(src, id);
    const enum gguf_type type = gguf_get_kv_type(src, id);

    switch (type) {
    case GGUF_TYPE_UINT8: gguf_set_val_u8(dst, key, gguf_get_val_u8(src, id)); return true;
    case GGUF_TYPE_INT8: gguf_set_val_i8(dst, key, gguf_get_val_i8(src, id)); return true;
    case GGUF_TYPE_UINT16: gguf_set_val_u16(dst, key, gguf_get_val_u16(src, id)); return true;
    case GGUF_TYPE_INT16: gguf_set_val_i16(dst, key, gguf_get_val_i16(src, id)); return true;
    case GGUF_TYPE_UINT32: gguf_set_val_u32(dst, key, gguf_get_val_u32(src, id)); return true;
    case GGUF_TYPE_INT32: gguf_set_val_i32(dst, key, gguf_get_val_i32(src, id)); return true;
    case GGUF_TYPE_FLOAT32: gguf_set_val_f32(dst, key, gguf_get_val_f32(src, id)); return true;
    case GGUF_TYPE_UINT64: gguf_set_val_u64(dst, key, gguf_get_val_u64(src, id)); return true;
    case GGUF_TYPE_INT64: gguf_set_val_i64(dst, key, gguf_get_val_i64(src, id)); return true;
    case GGUF_TYPE_FLOAT64: gguf_set_val_f64(dst, key, gguf_get_val_f64(src, id)); return true;
    case GGUF_TYPE_BOOL: gguf_set_val_bool(dst, key, gguf_get_val_bool(src, id)); return true;
    case GGUF_TYPE_STRING: gguf_set_val_str(dst, key, gguf_get_val_str(src, id)); return true;
    case GGUF_TYPE_ARRAY: break;
    default: return false;
    }

    const enum gguf_type arr_type = gguf_get_arr_type(src, id);
    const size_t n = gguf_get_arr_n(src, id);
    if (arr_type == GGUF_TYPE_STRING) {
        /* the strings stay owned by src, which outlives dst's writing */
        const char **strs = malloc((n ? n : 1) * sizeof(*strs));
        if (!strs) return false;
        for (size_t i = 0; i < n; i++) {
            strs[i] = gguf_get_arr_str(src, id, i);
        }
        gguf_set_arr_str(dst, key, strs, n);
        free(strs);
        return true;
    }
    if (arr_type == GGUF_TYPE_ARRAY || arr_type >= GGUF_TYPE_COUNT) {
        return false; /* nested arrays do not occur in tokenizer metadata */
    }
    gguf_set_arr_data(dst, key, arr_type, gguf_get_arr_data(src, id), n);
    return true;
}

/* Opens the vocab file and checks that it has a token list.  Returns NULL after reporting. */
static struct gguf_context *open_vocab(const char *path, int64_t *n_vocab) {
    struct stat st;
    if (stat(path, &st) != 0) {
        report("--vocab %s: %s", path, strerror(errno));
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        report("--vocab %s: not a regular file", path);
        return NULL;
    }

    g_last_ggml_error[0] = '\0';
    struct gguf_init_params params = {.no_alloc = true, .ctx = NULL};
    struct gguf_context *vocab = gguf_init_from_file(path, params);
    if (!vocab) {
        report("--vocab %s: not a readable GGUF file%s%s%s", path, g_last_ggml_error[0] ? " (" : "",
               g_last_ggml_error, g_last_ggml_error[0] ? ")" : "");
        return NULL;
    }

    const int64_t id = gguf_find_key(vocab, TOKENS_KEY);
    if (id < 0 || gguf_get_kv_type(vocab, id) != GGUF_TYPE_ARRAY ||
        gguf_get_arr_type(vocab, id) != GGUF_TYPE_STRING || gguf_get_arr_n(vocab, id) == 0) {
        report("--vocab %s: no " TOKENS_KEY " string array; not a tokenizer file", path);
        gguf_free(vocab);
        return NULL;
    }
    if (gguf_get_arr_n(vocab, id) > (size_t)INT32_MAX) {
        report("--vocab %s: %zu tokens is too many", path, gguf_get_arr_n(vocab, id));
        gguf_free(vocab);
        return NULL;
    }
    *n_vocab = (int64_t)gguf_get_arr_n(vocab, id);
    return vocab;
}

/* The text model's architecture, the prefix of its keys ("llama", or "pockettts" for --tts-pair). */
static const char *arch = "llama";

static void set_llama_u32(struct gguf_context *ctx, const char *suffix, int64_t val) {
    char key[KEY_BUF];
    snprintf(key, sizeof(key), "%s.%s", arch, suffix);
    gguf_set_val_u32(ctx, key, (uint32_t)val);
}

static void set_llama_f32(struct gguf_context *ctx, const char *suffix, float val) {
    char key[KEY_BUF];
    snprintf(key, sizeof(key), "%s.%s", arch, suffix);
    gguf_set_val_f32(ctx, key, val);
}

/* The id of the token whose text is `text` in the vocab file, or -1. */
static int64_t find_token(const struct gguf_context *vocab, const char *text) {
    const int64_t tokens = gguf_find_key(vocab, TOKENS_KEY);
    const int64_t n = (int64_t)gguf_get_arr_n(vocab, tokens);
    for (int64_t i = 0; i < n; i++)
        if (strcmp(gguf_get_arr_str(vocab, tokens, (size_t)i), text) == 0) return i;
    return -1;
}

/* --fim: the FIM tokens llama.cpp knows by these keys, and the texts of two families: Qwen's (appended
 * when the vocabulary has neither) and StarCoder's (<fim_prefix>, ...). */
static const struct {
    const char *key;
    const char *qwen;
    const char *starcoder;
} FIM_TOKENS[] = {
    {"tokenizer.ggml.fim_pre_token_id", "<|fim_prefix|>", "<fim_prefix>"},
    {"tokenizer.ggml.fim_suf_token_id", "<|fim_suffix|>", "<fim_suffix>"},
    {"tokenizer.ggml.fim_mid_token_id", "<|fim_middle|>", "<fim_middle>"},
    {"tokenizer.ggml.fim_pad_token_id", "<|fim_pad|>", "<fim_pad>"},
    {"tokenizer.ggml.fim_rep_token_id", "<|repo_name|>", "<reponame>"},
    {"tokenizer.ggml.fim_sep_token_id", "<|file_sep|>", NULL},
};

/* --fim: finds the ids of the vocabulary's FIM tokens, or queues Qwen's as --add-special tokens (the
 * ids they will get: n_vocab on). False after reporting. */
static bool resolve_fim(struct options *o, const struct gguf_context *vocab, int64_t n_vocab) {
    bool starcoder = find_token(vocab, FIM_TOKENS[0].starcoder) >= 0;
    bool qwen = find_token(vocab, FIM_TOKENS[0].qwen) >= 0;
    for (size_t k = 0; k < COUNT_OF(FIM_TOKENS); k++) {
        const char *text = starcoder && !qwen ? FIM_TOKENS[k].starcoder : FIM_TOKENS[k].qwen;
        o->fim_id[k] = text ? find_token(vocab, text) : -1;
        if (o->fim_id[k] >= 0 || starcoder || qwen || !text) continue;
        if (o->n_special == MAX_SPECIAL) {
            report("--fim: no room for Qwen's FIM tokens beside %d --add-special tokens", o->n_special);
            return false;
        }
        o->fim_id[k] = n_vocab + o->n_special;
        o->special[o->n_special++] = text;
    }
    return true;
}

/* --tts-pair qwen3tts: queues the text tokens its pipeline looks up that the vocabulary lacks as
 * --add-special tokens (they come before the codec's). False after reporting. */
static bool resolve_qwen3(struct options *o, const struct gguf_context *vocab) {
    for (int k = 0; k < QWEN3TTS_N_TEXT_TOKENS; k++) {
        if (find_token(vocab, QWEN3TTS_TEXT_TOKENS[k]) >= 0) continue;
        if (o->n_special == MAX_SPECIAL) {
            report("--tts-pair qwen3tts: no room for its text tokens beside %d --add-special tokens",
                   o->n_special);
            return false;
        }
        o->special[o->n_special++] = QWEN3TTS_TEXT_TOKENS[k];
    }
    return true;
}

/* The i-th control token appended to the vocab: --add-special's, then a Qwen3-TTS backbone's codec. */
static const char *appended(const struct options *o, size_t i) {
    return i < (size_t)o->n_special ? o->special[i] : tts_qwen3_codec_token((int64_t)i - o->n_special);
}

/* --add-special (and --tts-pair qwen3tts): rewrites the token, score and type arrays (copied from the
 * vocab) with the control tokens appended; a vocabulary without scores (a BPE one) keeps none.
 * Returns false after reporting. */
static bool append_special(struct gguf_context *ctx, const struct gguf_context *vocab,
                           const struct options *o) {
    const int64_t tokens = gguf_find_key(vocab, TOKENS_KEY);
    const int64_t scores = gguf_find_key(vocab, SCORES_KEY);
    const int64_t types = gguf_find_key(vocab, TOKEN_TYPE_KEY);
    const size_t n_added = (size_t)o->n_special + (is_qwen3(o) ? QWEN3TTS_CODEC_TOKENS : 0);
    const size_t n = gguf_get_arr_n(vocab, tokens), total = n + n_added;
    if ((scores >= 0 &&
         (gguf_get_arr_type(vocab, scores) != GGUF_TYPE_FLOAT32 || gguf_get_arr_n(vocab, scores) != n)) ||
        types < 0 || gguf_get_arr_type(vocab, types) != GGUF_TYPE_INT32 ||
        gguf_get_arr_n(vocab, types) != n) {
        report(
            "--add-special: %s has no per-token types (or scores that do not match) to extend; use another "
            "vocabulary",
            o->vocab);
        return false;
    }
    const char **strs = malloc(total * sizeof(*strs));
    float *score = malloc(total * sizeof(*score));
    int32_t *type = malloc(total * sizeof(*type));
    bool ok = strs && score && type;
    if (ok) {
        for (size_t i = 0; i < n; i++)
            strs[i] = gguf_get_arr_str(vocab, tokens, i);
        if (scores >= 0) memcpy(score, gguf_get_arr_data(vocab, scores), n * sizeof(*score));
        memcpy(type, gguf_get_arr_data(vocab, types), n * sizeof(*type));
        for (size_t k = 0; k < n_added; k++) {
            strs[n + k] = appended(o, k);
            score[n + k] = 0.0f;
            type[n + k] = TOKEN_TYPE_CONTROL;
        }
        gguf_set_arr_str(ctx, TOKENS_KEY, strs, total);
        if (scores >= 0) gguf_set_arr_data(ctx, SCORES_KEY, GGUF_TYPE_FLOAT32, score, total);
        gguf_set_arr_data(ctx, TOKEN_TYPE_KEY, GGUF_TYPE_INT32, type, total);
    } else {
        report("out of memory extending the vocabulary");
    }
    free(strs);
    free(score);
    free(type);
    return ok;
}

/* Fills in every key.  Returns false after reporting. */
static bool build_metadata(struct gguf_context *ctx, const struct gguf_context *vocab,
                           const struct options *o, int64_t n_vocab) {
    char desc[DESC_BUF];
    snprintf(desc, sizeof(desc), "synthetic random-weight model written by " PROG " (seed %" PRIu64 ")",
             o->seed);

    arch = is_qwen3(o) ? QWEN3TTS_ARCH : o->tts_pair ? TTS_PAIR_ARCH : o->rerank ? RERANK_ARCH : "llama";
    gguf_set_val_str(ctx, "general.architecture", arch);
    gguf_set_val_str(ctx, "general.name", o->name);
    gguf_set_val_str(ctx, "general.description", desc);
    gguf_set_val_u32(ctx, "general.file_type", o->wtype->file_type);
    if (ggml_is_quantized(o->wtype->type)) {
        gguf_set_val_u32(ctx, "general.quantization_version", GGML_QNT_VERSION);
    }

    set_llama_u32(ctx, "context_length", o->n_ctx);
    set_llama_u32(ctx, "embedding_length", o->n_embd);
    set_llama_u32(ctx, "block_count", o->layers ? o->layers : o->n_layer);
    set_llama_u32(ctx, "feed_forward_length", o->n_ff);
    set_llama_u32(ctx, "attention.head_count", o->n_head);
    set_llama_u32(ctx, "attention.head_count_kv", o->n_head_kv);
    set_llama_u32(ctx, "rope.dimension_count", o->n_embd / o->n_head);
    set_llama_f32(ctx, "attention.layer_norm_rms_epsilon", RMS_NORM_EPS);
    if (o->tts_pair) set_llama_f32(ctx, "attention.layer_norm_epsilon", RMS_NORM_EPS);
    set_llama_f32(ctx, "rope.freq_base", ROPE_FREQ_BASE);
    set_llama_u32(ctx, "vocab_size", n_vocab);
    if (o->pooling || o->rerank) {
        set_llama_u32(ctx, "pooling_type", o->pooling ? o->pooling->value : LLAMA_POOLING_TYPE_RANK);
    }
    if (o->rerank) {
        char key[KEY_BUF];
        const char *labels[RERANK_LABELS] = {"yes", "no"};
        snprintf(key, sizeof(key), "%s.classifier.output_labels", arch);
        gguf_set_arr_str(ctx, key, labels, RERANK_LABELS);
    }

    for (int64_t i = 0; i < gguf_get_n_kv(vocab); i++) {
        const char *key = gguf_get_key(vocab, i);
        if (!has_prefix(key, TOKENIZER_PREFIX) || is_template_key(key)) {
            continue;
        }
        if (!copy_kv(ctx, vocab, i)) {
            report("--vocab %s: cannot copy key %s (type %s)", o->vocab, key,
                   gguf_type_name(gguf_get_kv_type(vocab, i)));
            return false;
        }
    }

    if ((o->n_special || is_qwen3(o)) && !append_special(ctx, vocab, o)) return false;
    if (is_qwen3(o)) { /* its own end token and suppressed tokens, and no chat template */
        tts_qwen3_backbone_keys(ctx, n_vocab, o->n_embd / o->n_head);
        return true;
    }
    for (size_t k = 0; o->fim && k < COUNT_OF(FIM_TOKENS); k++)
        if (o->fim_id[k] >= 0) gguf_set_val_u32(ctx, FIM_TOKENS[k].key, (uint32_t)o->fim_id[k]);

    if (o->tmpl_file_text) {
        gguf_set_val_str(ctx, TEMPLATE_KEY, o->tmpl_file_text);
    } else if (o->tmpl->text) {
        gguf_set_val_str(ctx, TEMPLATE_KEY, o->tmpl->text);
    }
    return true;
}

/* ---------------------------------------------------------------------------------------------- */
/* tensor plan                                                                                     */

static void plan_add(struct plan *p, const char *name, int n_dims, int64_t ne0, int64_t ne1,
                     enum ggml_type type, float std) {
    plan_add_nd(p, name, n_dims, (const int64_t[4]){ne0, ne1, 1, 1}, type, std);
}

/* The rows of a tensor: every dimension past the first. */
static int64_t spec_rows(const struct tensor_spec *s) { return s->ne1 * s->ne2 * s->ne3; }

enum {
    GLOBAL_TENSORS = 3, /* token_embd, output_norm, output */
    TENSORS_PER_LAYER = 9,
    RERANK_EXTRA = 2, /* --rerank: a block's attn_q_norm and attn_k_norm (qwen3) */
};

static bool plan_build(struct plan *p, const struct options *o, int64_t n_vocab) {
    const int64_t n_layer = o->layers ? o->layers : o->n_layer;
    p->cap = GLOBAL_TENSORS + TENSORS_PER_LAYER * (size_t)n_layer;
    if (o->rerank) p->cap += RERANK_EXTRA * (size_t)n_layer + 1;
    p->n = 0;
    p->t =
        calloc(p->cap + (o->tts_pair ? TTS_PAIR_EXTRA * (size_t)n_layer + GLOBAL_TENSORS : 0), sizeof(*p->t));
    if (!p->t) return false;
    if (o->tts_pair) {
        (is_qwen3(o) ? tts_qwen3_backbone_plan : tts_pair_backbone_plan)(p, o, n_vocab);
        return true;
    }

    const enum ggml_type wt = o->wtype->type;
    const int64_t n_embd = o->n_embd;
    const int64_t n_embd_kv = o->n_embd / o->n_head * o->n_head_kv;
    const int64_t n_ff = o->n_ff;
    const float output_std = OUTPUT_LOGIT_STD / sqrtf((float)n_embd);

    /* Tied, the embeddings are also the output projection: at the output's scale, so that the
     * first logits are as spread as a separate output's (a token's own embedding, still in the
     * residual stream, would otherwise win by the square of the larger scale). */
    plan_add(p, "token_embd.weight", 2, n_embd, n_vocab, wt, o->tied_output ? output_std : EMBD_WEIGHT_STD);
    for (int64_t i = 0; i < n_layer; i++) {
        char name[GGML_MAX_NAME];
        /* An inactive block's projections into the residual stream: --perturb times the noise. */
        const bool inactive = o->active_layers && i >= o->active_layers;
        const float proj_std = inactive ? (float)(LAYER_WEIGHT_STD * o->perturb) : LAYER_WEIGHT_STD;
#define LAYER_TENSOR(suffix, nd, a, b, type, std)                                                            \
    snprintf(name, sizeof(name), "blk.%" PRId64 "." suffix ".weight", i);                                    \
    plan_add(p, name, nd, a, b, type, std)
        LAYER_TENSOR("attn_norm", 1, n_embd, 1, GGML_TYPE_F32, 0.0f);
        LAYER_TENSOR("attn_q", 2, n_embd, n_embd, wt, LAYER_WEIGHT_STD);
        LAYER_TENSOR("attn_k", 2, n_embd, n_embd_kv, wt, LAYER_WEIGHT_STD);
        LAYER_TENSOR("attn_v", 2, n_embd, n_embd_kv, wt, LAYER_WEIGHT_STD);
        LAYER_TENSOR("attn_output", 2, n_embd, n_embd, wt, proj_std);
        p->t[p->n - 1].zero = proj_std == 0.0f;
        LAYER_TENSOR("ffn_norm", 1, n_embd, 1, GGML_TYPE_F32, 0.0f);
        LAYER_TENSOR("ffn_gate", 2, n_embd, n_ff, wt, LAYER_WEIGHT_STD);
        LAYER_TENSOR("ffn_down", 2, n_ff, n_embd, wt, proj_std);
        p->t[p->n - 1].zero = proj_std == 0.0f;
        LAYER_TENSOR("ffn_up", 2, n_embd, n_ff, wt, LAYER_WEIGHT_STD);
        if (o->rerank) {
            LAYER_TENSOR("attn_q_norm", 1, n_embd / o->n_head, 1, GGML_TYPE_F32, 0.0f);
            LAYER_TENSOR("attn_k_norm", 1, n_embd / o->n_head, 1, GGML_TYPE_F32, 0.0f);
        }
#undef LAYER_TENSOR
    }
    plan_add(p, "output_norm.weight", 1, n_embd, 1, GGML_TYPE_F32, 0.0f);
    if (o->rerank) plan_add(p, "cls.output.weight", 2, n_embd, RERANK_LABELS, GGML_TYPE_F32, output_std);
    if (o->tied_output) return true;
    plan_add(p, "output.weight", 2, n_embd, n_vocab, wt, output_std);
    if (o->stop_token || o->n_favour) {
        p->t[0].stop = STOP_EMBD;
        p->t[p->n - 2].stop = STOP_NORM;
        p->t[p->n - 1].stop = STOP_OUTPUT;
        p->t[p->n - 1].stop_id = o->stop_token ? o->stop_id : -1;
        p->t[p->n - 1].favour_id = o->favour_id;
        p->t[p->n - 1].n_favour = o->n_favour;
    }
    return true;
}

/* Registers every tensor's descriptor (no data) with the gguf context. */
static bool plan_register(const struct plan *p, struct gguf_context *gctx) {
    struct ggml_init_params ip = {
        .mem_size = p->n * ggml_tensor_overhead(),
        .mem_buffer = NULL,
        .no_alloc = true,
    };
    struct ggml_context *ctx = ggml_init(ip);
    if (!ctx) return false;
    for (size_t i = 0; i < p->n; i++) {
        const struct tensor_spec *s = &p->t[i];
        const int64_t ne[4] = {s->ne0, s->ne1, s->ne2, s->ne3};
        struct ggml_tensor *t = ggml_new_tensor(ctx, s->type, s->n_dims, ne);
        ggml_set_name(t, s->name);
        gguf_add_tensor(gctx, t); /* copies the descriptor */
    }
    ggml_free(ctx);
    return true;
}

/* ---------------------------------------------------------------------------------------------- */
/* weights                                                                                         */

static uint64_t name_hash(const char *s) {
    uint64_t h = FNV_OFFSET;
    for (; *s; s++) {
        h = (h ^ (uint8_t)*s) * FNV_PRIME;
    }
    return h;
}

uint64_t tensor_seed(uint64_t seed, const char *name) {
    return splitmix_mix(splitmix_mix(seed) ^ name_hash(name));
}

void fill_row(float *dst, int64_t n, uint64_t row_seed, float std) {
    const double mean = IH_LANES * (IH_LANE_RANGE - 1.0) / 2.0;
    const double sigma = IH_LANE_RANGE * sqrt(IH_LANES * UNIFORM_VARIANCE);
    const float scale = (float)(std / sigma);
    uint64_t state = row_seed;
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = splitmix_next(&state);
        uint64_t sum = 0;
        for (int l = 0; l < IH_LANES; l++) {
            sum += r & IH_LANE_MASK;
            r >>= IH_LANE_BITS;
        }
        dst[i] = (float)((double)sum - mean) * scale;
    }
}

struct job {
    const struct tensor_spec *spec;
    uint64_t seed; /* the tensor's seed */
    int64_t row0;  /* first row of this slice, within the tensor */
    int64_t nrows;
    float *scratch; /* nrows * ne0 floats */
    uint8_t *dst;   /* nrows rows of the output type */
};

static void *job_run(void *arg) {
    const struct job *j = arg;
    const struct tensor_spec *s = j->spec;
    if (j->nrows <= 0) return NULL;

    for (int64_t r = 0; r < j->nrows; r++) {
        float *row = j->scratch + r * s->ne0;
        /* --stop-token: every embedding carries a large first component, which the blocks' small
         * weights cannot turn negative; the final norm keeps only that component, and the output
         * reads it into the stop token's logit alone, so that token wins at every position. */
        if (s->stop == STOP_NORM || s->stop == STOP_OUTPUT) {
            memset(row, 0, (size_t)s->ne0 * sizeof *row);
            if (s->stop == STOP_NORM || j->row0 + r == s->stop_id) row[0] = STOP_SCALE;
            for (int k = 0; k < s->n_favour; k++) /* --favour: one step of the scale between ranks */
                if (j->row0 + r == s->favour_id[k]) row[0] = STOP_SCALE - (float)k;
            continue;
        }
        if (s->zero) {
            memset(row, 0, (size_t)s->ne0 * sizeof *row);
        } else if (s->has_value) {
            for (int64_t i = 0; i < s->ne0; i++)
                row[i] = s->value;
        } else if (s->std == 0.0f) {
            for (int64_t i = 0; i < s->ne0; i++)
                row[i] = NORM_WEIGHT;
        } else {
            fill_row(row, s->ne0, splitmix_mix(j->seed + (uint64_t)(j->row0 + r) * SPLITMIX_GAMMA), s->std);
        }
        if (s->stop == STOP_EMBD) row[0] = STOP_EMBD_VALUE;
        if (s->stop == STOP_COMPONENT) row[0] = j->row0 + r == s->stop_id ? -STOP_SCALE : s->value;
    }
    if (s->type == GGML_TYPE_F32) {
        memcpy(j->dst, j->scratch, (size_t)(j->nrows * s->ne0) * sizeof(float));
    } else {
        ggml_quantize_chunk(s->type, j->scratch, j->dst, 0, j->nrows, s->ne0, NULL);
    }
    return NULL;
}

static int thread_count(void) {
    int n = 1;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        n = CPU_COUNT(&set);
    } else {
        const long online = sysconf(_SC_NPROCESSORS_ONLN);
        n = online > 0 ? (int)online : 1;
    }
    if (n < 1) n = 1;
    if (n > MAX_THREADS) n = MAX_THREADS;
    return n;
}

struct writer {
    FILE *f;
    const char *path;
    int n_threads;
    float *scratch; /* n_threads * CHUNK_ELEMS_PER_THREAD floats (at least one row each) */
    uint8_t *out;   /* one chunk of output rows */
    int64_t scratch_per_thread;
    size_t out_cap;
};

static bool write_bytes(struct writer *w, const void *data, size_t n) {
    if (n > 0 && fwrite(data, 1, n, w->f) != n) {
        report("%s: write failed: %s", w->path, strerror(errno));
        return false;
    }
    return true;
}

/* Generates and writes one tensor, chunk by chunk, then pads to the alignment. */
static bool write_tensor(struct writer *w, const struct tensor_spec *s, uint64_t seed, size_t alignment) {
    const size_t row_size = ggml_row_size(s->type, s->ne0);
    const int64_t rows_per_thread = w->scratch_per_thread / s->ne0;
    const int64_t chunk_rows = rows_per_thread * w->n_threads;
    const uint64_t tseed = tensor_seed(seed, s->name);

    const int64_t rows = spec_rows(s);
    for (int64_t r0 = 0; r0 < rows; r0 += chunk_rows) {
        const int64_t nrows = rows - r0 < chunk_rows ? rows - r0 : chunk_rows;
        const int64_t per = (nrows + w->n_threads - 1) / w->n_threads;

        struct job jobs[MAX_THREADS];
        pthread_t tids[MAX_THREADS];
        bool started[MAX_THREADS] = {false};
        for (int t = 0; t < w->n_threads; t++) {
            const int64_t a = r0 + t * per;
            const int64_t b = a + per < r0 + nrows ? a + per : r0 + nrows;
            jobs[t] = (struct job){
                .spec = s,
                .seed = tseed,
                .row0 = a,
                .nrows = b > a ? b - a : 0,
                .scratch = w->scratch + (size_t)t * (size_t)w->scratch_per_thread,
                .dst = w->out + (size_t)(a - r0) * row_size,
            };
        }
        /* worker 0 runs on this thread; the others get their own, or run here if none starts */
        for (int t = 1; t < w->n_threads; t++) {
            if (jobs[t].nrows > 0) {
                started[t] = pthread_create(&tids[t], NULL, job_run, &jobs[t]) == 0;
            }
        }
        job_run(&jobs[0]);
        for (int t = 1; t < w->n_threads; t++) {
            if (started[t]) {
                pthread_join(tids[t], NULL);
            } else {
                job_run(&jobs[t]);
            }
        }
        if (!write_bytes(w, w->out, (size_t)nrows * row_size)) return false;
    }

    static const uint8_t zeros[GGUF_DEFAULT_ALIGNMENT] = {0};
    const size_t nbytes = (size_t)rows * row_size;
    size_t pad = (alignment - nbytes % alignment) % alignment;
    while (pad > 0) {
        const size_t n = pad < sizeof(zeros) ? pad : sizeof(zeros);
        if (!write_bytes(w, zeros, n)) return false;
        pad -= n;
    }
    return true;
}

static bool writer_init(struct writer *w, const struct plan *p) {
    int64_t max_ne0 = 0;
    size_t max_row = 0;
    for (size_t i = 0; i < p->n; i++) {
        if (p->t[i].ne0 > max_ne0) max_ne0 = p->t[i].ne0;
        const size_t rs = ggml_row_size(p->t[i].type, p->t[i].ne0);
        if (rs > max_row) max_row = rs;
    }
    w->n_threads = thread_count();
    w->scratch_per_thread = CHUNK_ELEMS_PER_THREAD > max_ne0 ? CHUNK_ELEMS_PER_THREAD : max_ne0;
    w->scratch = malloc((size_t)w->n_threads * (size_t)w->scratch_per_thread * sizeof(float));
    /* output rows per chunk never exceed the rows the scratch holds, for any tensor */
    int64_t max_chunk_bytes = 0;
    for (size_t i = 0; i < p->n; i++) {
        const int64_t rows = (w->scratch_per_thread / p->t[i].ne0) * w->n_threads;
        const int64_t bytes = rows * (int64_t)ggml_row_size(p->t[i].type, p->t[i].ne0);
        if (bytes > max_chunk_bytes) max_chunk_bytes = bytes;
    }
    w->out_cap = (size_t)max_chunk_bytes;
    w->out = malloc(w->out_cap);
    if (!w->scratch || !w->out) {
        report("out of memory allocating %zu bytes of chunk buffers",
               (size_t)w->n_threads * (size_t)w->scratch_per_thread * sizeof(float) + w->out_cap);
        return false;
    }
    return true;
}

/* ---------------------------------------------------------------------------------------------- */

/* Writes the whole file to w->f.  Returns false after reporting. */
static bool write_model(struct writer *w, struct gguf_context *gctx, const struct plan *p, uint64_t seed) {
    g_last_ggml_error[0] = '\0';
    if (!gguf_write_to_file_ptr(gctx, w->f, /*only_meta =*/true)) {
        report("%s: writing the GGUF header failed%s%s", w->path, g_last_ggml_error[0] ? ": " : "",
               g_last_ggml_error);
        return false;
    }
    const off_t data_start = ftello(w->f);
    const size_t alignment = gguf_get_alignment(gctx);
    if (data_start < 0 || (size_t)data_start % alignment != 0) {
        report("%s: unexpected data offset %lld", w->path, (long long)data_start);
        return false;
    }

    for (size_t i = 0; i < p->n; i++) {
        const off_t expect = data_start + (off_t)gguf_get_tensor_offset(gctx, (int64_t)i);
        if (ftello(w->f) != expect) {
            report("%s: tensor %s would land at %lld instead of %lld", w->path, p->t[i].name,
                   (long long)ftello(w->f), (long long)expect);
            return false;
        }
        if (!write_tensor(w, &p->t[i], seed, alignment)) return false;
    }
    if (fflush(w->f) != 0) {
        report("%s: write failed: %s", w->path, strerror(errno));
        return false;
    }
    return true;
}

/* Opens --vocab and resolves --stop-token and --add-special against it; *n_vocab counts the added
 * tokens.  Returns NULL after reporting. */
static struct gguf_context *open_text_model(struct options *o, int64_t *n_vocab) {
    struct gguf_context *vocab = open_vocab(o->vocab, n_vocab);
    if (!vocab) return NULL;
    if (o->stop_token) {
        o->stop_id = find_token(vocab, o->stop_token);
        for (int k = 0; k < o->n_special && o->stop_id < 0; k++)
            if (strcmp(o->special[k], o->stop_token) == 0) o->stop_id = *n_vocab + k;
        if (o->stop_id < 0) {
            report(
                "--stop-token: '%s' is not a token of %s; give one of its tokens, e.g. its end-of-turn token",
                o->stop_token, o->vocab);
            goto fail;
        }
    }

    for (int k = 0; k < o->n_favour; k++) {
        o->favour_id[k] = find_token(vocab, o->favour[k]);
        if (o->favour_id[k] < 0) {
            report("--favour: '%s' is not a token of %s (byte-level vocabularies spell a leading space as "
                   "U+0120)",
                   o->favour[k], o->vocab);
            goto fail;
        }
    }

    if (o->fim && !resolve_fim(o, vocab, *n_vocab)) goto fail;
    if (is_qwen3(o) && !resolve_qwen3(o, vocab)) goto fail;
    for (int k = 0; k < o->n_special; k++) {
        bool twice = false;
        for (int j = 0; j < k; j++)
            twice = twice || strcmp(o->special[j], o->special[k]) == 0;
        if (twice || find_token(vocab, o->special[k]) >= 0) {
            report("--add-special: '%s' is already a token of %s", o->special[k],
                   twice ? "the list" : o->vocab);
            goto fail;
        }
    }
    *n_vocab += o->n_special + (is_qwen3(o) ? QWEN3TTS_CODEC_TOKENS : 0);

    return vocab;

fail:
    gguf_free(vocab);
    return NULL;
}

/* Writes one file to out: the text model (or backbone) o describes, or its projector. */
static int write_one(struct options *o, const char *out, bool projector) {
    int rc = EXIT_RUNTIME;
    int64_t n_vocab = 0;
    struct gguf_context *vocab = NULL;
    struct gguf_context *gctx = NULL;
    struct plan plan = {0};
    struct writer w = {0};
    char *tmp_path = NULL;
    bool tmp_created = false;

    gctx = gguf_init_empty();
    if (!gctx) goto done;
    if (projector && o->tts_pair) {
        if (!(is_qwen3(o) ? tts_qwen3_projector : tts_pair_projector)(gctx, &plan, o)) goto done;
    } else if (projector) {
        if (!projector_build(gctx, &plan, o)) goto done;
    } else {
        vocab = open_text_model(o, &n_vocab);
        if (!vocab || !build_metadata(gctx, vocab, o, n_vocab)) goto done;
        if (!plan_build(&plan, o, n_vocab)) {
            report("out of memory building the tensor plan");
            goto done;
        }
    }
    if (!plan_register(&plan, gctx)) {
        report("out of memory registering the tensor plan");
        goto done;
    }
    if (!writer_init(&w, &plan)) goto done;

    /* write next to --out under a unique name, rename into place once complete */
    const size_t tmp_len = strlen(out) + sizeof(TMP_SUFFIX);
    tmp_path = malloc(tmp_len);
    if (!tmp_path) goto done;
    snprintf(tmp_path, tmp_len, "%s" TMP_SUFFIX, out);
    const int fd = mkstemp(tmp_path);
    if (fd < 0) {
        report("--out %s: cannot create a file there: %s", out, strerror(errno));
        goto done;
    }
    tmp_created = true;
    /* mkstemp makes the file private; a failure here is not fatal, the file just stays so */
    (void)fchmod(fd, OUT_FILE_MODE);
    w.f = fdopen(fd, "wb");
    if (!w.f) {
        report("--out %s: %s", out, strerror(errno));
        close(fd);
        goto done;
    }
    w.path = out;

    if (!write_model(&w, gctx, &plan, o->seed)) goto done;
    const int close_rc = fclose(w.f);
    w.f = NULL;
    if (close_rc != 0) {
        report("--out %s: write failed: %s", out, strerror(errno));
        goto done;
    }
    if (rename(tmp_path, out) != 0) {
        report("--out %s: cannot rename %s into place: %s", out, tmp_path, strerror(errno));
        goto done;
    }
    tmp_created = false;
    rc = 0;

done:
    if (w.f) fclose(w.f);
    if (tmp_created) unlink(tmp_path);
    free(tmp_path);
    free(w.scratch);
    free(w.out);
    free(plan.t);
    if (gctx) gguf_free(gctx);
    if (vocab) gguf_free(vocab);
    return rc;
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--whisper") == 0) return whisper_synth_main(argc, argv);
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--lora-for") == 0) return lora_synth_main(argc, argv);
    struct options o;
    parse_args(argc, argv, &o);
    ggml_log_set(ggml_log_quiet, NULL);
    if (!o.tts_pair) return write_one(&o, o.out, o.projector != NULL);

    /* --tts-pair: --out is the prefix of the two files */
    size_t n = strlen(o.out) + sizeof(TTS_PAIR_PROJECTOR_SUFFIX);
    char *backbone = malloc(n), *proj = malloc(n);
    int rc = EXIT_RUNTIME;
    if (backbone && proj) {
        snprintf(backbone, n, "%s" TTS_PAIR_BACKBONE_SUFFIX, o.out);
        snprintf(proj, n, "%s" TTS_PAIR_PROJECTOR_SUFFIX, o.out);
        rc = write_one(&o, backbone, false);
        if (rc == 0) rc = write_one(&o, proj, true);
    }
    free(backbone);
    free(proj);
    return rc;
}
