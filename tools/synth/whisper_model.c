/*
 * whisper_model.c: `sipp-synth --whisper SHAPE`, a whisper.cpp model with random weights.
 *
 * whisper.cpp reads its own "ggml" file format, not GGUF (src/whisper.cpp, whisper_model_load): the
 * magic 0x67676d6c, eleven int32 hyper-parameters, the mel filter bank (n_mel x n_fft floats), the
 * vocabulary (a count, then length-prefixed byte strings), and every tensor as n_dims, name length,
 * type, the dimensions in ggml order, the name and the data. A file missing any tensor, or with one of
 * another shape, is refused by the loader, so this writes exactly the set the loader creates.
 *
 * The vocabulary is GPT-2's (the text tokens of Whisper's own tokenizer are GPT-2's byte-level BPE),
 * read from llama.cpp's ggml-vocab-gpt-2.gguf and turned from its byte-to-unicode form back into raw
 * bytes, as whisper.cpp's converter stores them. 50,257 tokens are written and n_vocab is 51,865 (a
 * multilingual model), so the loader appends the special tokens itself at the ids it hard-codes:
 * end of text 50,257, start of transcript 50,258, 99 languages, translate and transcribe 50,358/9,
 * and the 1,501 timestamp tokens from 50,364. The mel filters are the real ones (librosa's Slaney
 * filter bank for 16 kHz, n_fft 400, as Whisper's mel_filters.npz), so features are what a real model
 * sees; the weights are seeded noise (fill_row, as for text models) with unit layer norms, zero biases
 * and sinusoidal encoder positions. The token embedding is scaled so that logits have a spread of
 * about LOGIT_SPREAD: decoding is then confident enough to pass whisper's log-probability threshold at
 * some windows and fall back at others, which exercises both paths.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "synth.h"

#define WHISPER_MAGIC 0x67676d6cu
#define WHISPER_N_VOCAB 51865 /* multilingual: the loader places 99 languages and timestamps */
#define WHISPER_TEXT_TOKENS 50257
#define WHISPER_SAMPLE_RATE 16000
#define WHISPER_N_FFT 400
#define WHISPER_N_MEL 80
#define WHISPER_AUDIO_CTX 1500 /* 30 s of 10 ms frames, halved by the second convolution */
#define WEIGHT_STD 0.02f
#define LOGIT_SPREAD 8.0f
#define WHISPER_TOKEN_EOT 50257 /* multilingual ids, as the loader places them */
#define WHISPER_TOKEN_BEG 50364 /* the first timestamp token, 0.00 s */
#define TIMESTAMP_BOOST 2.4f    /* about ten tokens, then end of text (test shape) */
#define POSITION_SPREAD 64.0f   /* the decoder's positions outweigh the previous token: no loops */
#define CROSS_SCALE                                                                                          \
    10.0f /* cross-attention's value and output weights, in WEIGHT_STD: the audio                            \
             must move the logits, or every clip would decode alike */
#define GGML_FTYPE_F32 0
#define GGML_FTYPE_F16 1
#define GPT2_VOCAB_FILE "ggml-vocab-gpt-2.gguf"

struct whisper_shape {
    const char *name;
    int32_t n_state, n_head, n_audio_layer, n_text_layer, n_text_ctx;
};

/* tiny and base are the published models' shapes; test is a small one for fast tests (its text
 * context of 64 caps a window's decoding at 28 tokens). */
static const struct whisper_shape SHAPES[] = {
    {"tiny", 384, 6, 4, 4, 448},
    {"base", 512, 8, 6, 6, 448},
    {"test", 64, 2, 2, 2, 64},
};

struct wfile {
    FILE *f;
    const char *path;
    bool ok;
    uint64_t seed;
    bool f16;
};

static void put(struct wfile *w, const void *p, size_t n) {
    if (w->ok && fwrite(p, 1, n, w->f) != n) {
        report("--out %s: write failed: %s", w->path, strerror(errno));
        w->ok = false;
    }
}

static void put_i32(struct wfile *w, int32_t v) { put(w, &v, sizeof v); }

/* Slaney's mel scale, as librosa's default (htk=False). */
static double hz_to_mel(double f) {
    const double f_sp = 200.0 / 3, min_log_hz = 1000.0, logstep = log(6.4) / 27.0;
    return f < min_log_hz ? f / f_sp : min_log_hz / f_sp + log(f / min_log_hz) / logstep;
}

static double mel_to_hz(double m) {
    const double f_sp = 200.0 / 3, min_log_hz = 1000.0, logstep = log(6.4) / 27.0;
    const double min_log_mel = min_log_hz / f_sp;
    return m < min_log_mel ? f_sp * m : min_log_hz * exp(logstep * (m - min_log_mel));
}

/* librosa.filters.mel(sr=16000, n_fft=400, n_mels=80) with Slaney normalisation. */
static void write_mel_filters(struct wfile *w) {
    const int n_fft = WHISPER_N_FFT / 2 + 1;
    double mel_f[WHISPER_N_MEL + 2];
    const double mel_max = hz_to_mel(WHISPER_SAMPLE_RATE / 2.0);
    for (int i = 0; i < WHISPER_N_MEL + 2; i++)
        mel_f[i] = mel_to_hz(mel_max * i / (WHISPER_N_MEL + 1));
    put_i32(w, WHISPER_N_MEL);
    put_i32(w, n_fft);
    for (int m = 0; m < WHISPER_N_MEL; m++) {
        const double enorm = 2.0 / (mel_f[m + 2] - mel_f[m]);
        for (int k = 0; k < n_fft; k++) {
            const double freq = (double)k * WHISPER_SAMPLE_RATE / WHISPER_N_FFT;
            const double lower = (freq - mel_f[m]) / (mel_f[m + 1] - mel_f[m]);
            const double upper = (mel_f[m + 2] - freq) / (mel_f[m + 2] - mel_f[m + 1]);
            const double v = fmax(0.0, fmin(lower, upper)) * enorm;
            const float fv = (float)v;
            put(w, &fv, sizeof fv);
        }
    }
}

/* GPT-2's byte-level alphabet: the code point a byte is written as in the vocabulary's strings. */
static int byte_codepoint(int b) {
    if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) return b;
    int n = 0;
    for (int c = 0; c < b; c++)
        if (!((c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF))) n++;
    return 256 + n;
}

/* Decodes one byte-level token into raw bytes (out has room for strlen(s) bytes). */
static size_t token_bytes(const char *s, unsigned char *out, const int *cp_to_byte) {
    size_t n = 0;
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int cp = *p, len = 1;
        if (*p >= 0xF0)
            cp = *p & 0x07, len = 4;
        else if (*p >= 0xE0)
            cp = *p & 0x0F, len = 3;
        else if (*p >= 0xC0)
            cp = *p & 0x1F, len = 2;
        for (int k = 1; k < len && p[k]; k++)
            cp = (cp << 6) | (p[k] & 0x3F);
        out[n++] = cp < 512 && cp_to_byte[cp] >= 0 ? (unsigned char)cp_to_byte[cp] : '?';
        p += len;
    }
    return n;
}

static bool write_vocab(struct wfile *w, const char *vocab_path) {
    struct gguf_init_params params = {.no_alloc = true, .ctx = NULL};
    struct gguf_context *g = gguf_init_from_file(vocab_path, params);
    const int64_t id = g ? gguf_find_key(g, "tokenizer.ggml.tokens") : -1;
    if (id < 0 || gguf_get_arr_n(g, id) < WHISPER_TEXT_TOKENS) {
        report("--vocab %s: not GPT-2's tokenizer file (%s from build/llama/vocab/)", vocab_path,
               GPT2_VOCAB_FILE);
        if (g) gguf_free(g);
        return false;
    }
    int cp_to_byte[512];
    for (int i = 0; i < 512; i++)
        cp_to_byte[i] = -1;
    for (int b = 0; b < 256; b++)
        cp_to_byte[byte_codepoint(b)] = b;
    put_i32(w, WHISPER_TEXT_TOKENS);
    unsigned char buf[1024];
    for (int i = 0; i < WHISPER_TEXT_TOKENS && w->ok; i++) {
        const char *s = gguf_get_arr_str(g, id, i);
        const size_t n = strlen(s) < sizeof buf ? token_bytes(s, buf, cp_to_byte) : 0;
        put_i32(w, (int32_t)n);
        put(w, buf, n);
    }
    gguf_free(g);
    return w->ok;
}

/* The token embedding's spread for token r: end of text (and the timestamp tokens) stand out, so that
 * decoding ends a window after some tokens: a window that reaches its token limit without end of text or
 * a timestamp is a "repetition loop" to whisper, decoded again at every fallback temperature, which
 * made one short clip take minutes. */
static float token_std(int64_t r, float std) {
    return r == WHISPER_TOKEN_EOT || r >= WHISPER_TOKEN_BEG ? std * TIMESTAMP_BOOST : std;
}

/* One tensor: header, then the data row by row. kind: 'w' noise of std, 't' the token embedding
 * (token_std), 'n' ones, 'z' zeros, 'p' sinusoidal positions. */
static void write_tensor(struct wfile *w, const char *name, int n_dims, int32_t ne0, int32_t ne1, int32_t ne2,
                         bool f16, char kind, float std) {
    const int32_t ne[3] = {ne0, ne1, ne2};
    put_i32(w, n_dims);
    put_i32(w, (int32_t)strlen(name));
    put_i32(w, f16 ? GGML_TYPE_F16 : GGML_TYPE_F32);
    for (int i = 0; i < n_dims; i++)
        put_i32(w, ne[i]);
    put(w, name, strlen(name));
    float *row = malloc(sizeof(float) * (size_t)ne0);
    ggml_fp16_t *half = malloc(sizeof(ggml_fp16_t) * (size_t)ne0);
    if (!row || !half) {
        report("out of memory writing %s", name);
        w->ok = false;
    }
    const int64_t rows = (int64_t)ne1 * ne2;
    const uint64_t seed = tensor_seed(w->seed, name);
    for (int64_t r = 0; r < rows && w->ok; r++) {
        for (int32_t i = 0; i < ne0; i++) {
            const double t = (double)r / pow(10000.0, (double)(2 * (i / 2)) / ne0);
            row[i] = kind == 'n' ? 1.0f : kind == 'p' ? (float)(i % 2 ? cos(t) : sin(t)) : 0.0f;
        }
        if (kind == 'w' || kind == 't')
            fill_row(row, ne0, seed + (uint64_t)r, kind == 't' ? token_std(r, std) : std);
        if (f16) {
            ggml_fp32_to_fp16_row(row, half, ne0);
            put(w, half, sizeof(ggml_fp16_t) * (size_t)ne0);
        } else {
            put(w, row, sizeof(float) * (size_t)ne0);
        }
    }
    free(row);
    free(half);
}

/* The tensors of one attention block (self or cross) of width n under prefix "P.attn". */
static void write_attention(struct wfile *w, const char *prefix, int32_t n, float vo_scale) {
    static const char *const parts[] = {"query", "key", "value", "out"};
    char name[128];
    snprintf(name, sizeof name, "%s_ln.weight", prefix);
    write_tensor(w, name, 1, n, 1, 1, false, 'n', 0);
    snprintf(name, sizeof name, "%s_ln.bias", prefix);
    write_tensor(w, name, 1, n, 1, 1, false, 'z', 0);
    for (int k = 0; k < 4; k++) {
        snprintf(name, sizeof name, "%s.%s.weight", prefix, parts[k]);
        write_tensor(w, name, 2, n, n, 1, w->f16, 'w', WEIGHT_STD * (k >= 2 ? vo_scale : 5));
        if (k == 1) continue; /* the key projection has no bias */
        snprintf(name, sizeof name, "%s.%s.bias", prefix, parts[k]);
        write_tensor(w, name, 1, n, 1, 1, false, 'z', 0);
    }
}

static void write_block(struct wfile *w, const char *side, int layer, int32_t n, bool cross) {
    char prefix[96], name[128];
    snprintf(prefix, sizeof prefix, "%s.blocks.%d.attn", side, layer);
    write_attention(w, prefix, n, 5);
    if (cross) {
        snprintf(prefix, sizeof prefix, "%s.blocks.%d.cross_attn", side, layer);
        write_attention(w, prefix, n, CROSS_SCALE);
    }
    snprintf(name, sizeof name, "%s.blocks.%d.mlp_ln.weight", side, layer);
    write_tensor(w, name, 1, n, 1, 1, false, 'n', 0);
    snprintf(name, sizeof name, "%s.blocks.%d.mlp_ln.bias", side, layer);
    write_tensor(w, name, 1, n, 1, 1, false, 'z', 0);
    snprintf(name, sizeof name, "%s.blocks.%d.mlp.0.weight", side, layer);
    write_tensor(w, name, 2, n, 4 * n, 1, w->f16, 'w', WEIGHT_STD * 5);
    snprintf(name, sizeof name, "%s.blocks.%d.mlp.0.bias", side, layer);
    write_tensor(w, name, 1, 4 * n, 1, 1, false, 'z', 0);
    snprintf(name, sizeof name, "%s.blocks.%d.mlp.2.weight", side, layer);
    write_tensor(w, name, 2, 4 * n, n, 1, w->f16, 'w', WEIGHT_STD * 2.5f);
    snprintf(name, sizeof name, "%s.blocks.%d.mlp.2.bias", side, layer);
    write_tensor(w, name, 1, n, 1, 1, false, 'z', 0);
}

static void write_tensors(struct wfile *w, const struct whisper_shape *s) {
    const int32_t n = s->n_state;
    write_tensor(w, "encoder.positional_embedding", 2, n, WHISPER_AUDIO_CTX, 1, false, 'p', 0);
    write_tensor(w, "encoder.conv1.weight", 3, 3, WHISPER_N_MEL, n, w->f16, 'w', WEIGHT_STD * 5);
    write_tensor(w, "encoder.conv1.bias", 2, 1, n, 1, false, 'z', 0);
    write_tensor(w, "encoder.conv2.weight", 3, 3, n, n, w->f16, 'w', WEIGHT_STD * 5);
    write_tensor(w, "encoder.conv2.bias", 2, 1, n, 1, false, 'z', 0);
    for (int l = 0; l < s->n_audio_layer; l++)
        write_block(w, "encoder", l, n, false);
    write_tensor(w, "encoder.ln_post.weight", 1, n, 1, 1, false, 'n', 0);
    write_tensor(w, "encoder.ln_post.bias", 1, n, 1, 1, false, 'z', 0);
    write_tensor(w, "decoder.positional_embedding", 2, n, s->n_text_ctx, 1, false, 'w',
                 POSITION_SPREAD / sqrtf((float)n));
    write_tensor(w, "decoder.token_embedding.weight", 2, n, WHISPER_N_VOCAB, 1, w->f16, 't',
                 LOGIT_SPREAD / sqrtf((float)n));
    for (int l = 0; l < s->n_text_layer; l++)
        write_block(w, "decoder", l, n, true);
    write_tensor(w, "decoder.ln.weight", 1, n, 1, 1, false, 'n', 0);
    write_tensor(w, "decoder.ln.bias", 1, n, 1, 1, false, 'z', 0);
}

static void whisper_usage(FILE *f) {
    fprintf(f,
            "usage: sipp-synth --whisper tiny|base|test --out FILE --vocab %s [--type f16|f32]"
            " [--seed N]\n",
            GPT2_VOCAB_FILE);
}

static const struct whisper_shape *find_shape(const char *name) {
    for (size_t i = 0; i < sizeof SHAPES / sizeof SHAPES[0]; i++)
        if (strcmp(SHAPES[i].name, name) == 0) return &SHAPES[i];
    return NULL;
}

struct whisper_args {
    const struct whisper_shape *shape;
    const char *out, *vocab;
    bool f16;
    uint64_t seed;
};

static bool parse_whisper_args(int argc, char **argv, struct whisper_args *a) {
    *a = (struct whisper_args){.f16 = true, .seed = 1};
    for (int i = 1; i < argc; i += 2) { /* FLAG VALUE pairs */
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return false;
        if (!v) {
            report("%s needs a value", argv[i]);
            return false;
        }
        if (strcmp(argv[i], "--whisper") == 0) {
            a->shape = find_shape(v);
            if (!a->shape) report("--whisper: unknown shape '%s' (expected tiny, base or test)", v);
        } else if (strcmp(argv[i], "--out") == 0)
            a->out = v;
        else if (strcmp(argv[i], "--vocab") == 0)
            a->vocab = v;
        else if (strcmp(argv[i], "--seed") == 0)
            a->seed = strtoull(v, NULL, 10);
        else if (strcmp(argv[i], "--type") == 0 && (strcmp(v, "f16") == 0 || strcmp(v, "f32") == 0))
            a->f16 = strcmp(v, "f16") == 0;
        else {
            report("--whisper does not take %s %s", argv[i], v);
            return false;
        }
    }
    if (a->shape && (!a->out || !a->vocab)) report("--whisper needs --out FILE and --vocab FILE");
    return a->shape && a->out && a->vocab;
}

int whisper_synth_main(int argc, char **argv) {
    struct whisper_args a;
    if (!parse_whisper_args(argc, argv, &a)) {
        whisper_usage(stderr);
        return 2;
    }
    const struct whisper_shape *s = a.shape;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.partial", a.out);
    struct wfile w = {.f = fopen(tmp, "wb"), .path = a.out, .ok = true, .seed = a.seed, .f16 = a.f16};
    if (!w.f) {
        report("--out %s: cannot create it: %s", a.out, strerror(errno));
        return 1;
    }
    const int32_t hparams[] = {WHISPER_N_VOCAB,
                               WHISPER_AUDIO_CTX,
                               s->n_state,
                               s->n_head,
                               s->n_audio_layer,
                               s->n_text_ctx,
                               s->n_state,
                               s->n_head,
                               s->n_text_layer,
                               WHISPER_N_MEL,
                               a.f16 ? GGML_FTYPE_F16 : GGML_FTYPE_F32};
    const uint32_t magic = WHISPER_MAGIC;
    put(&w, &magic, sizeof magic);
    put(&w, hparams, sizeof hparams);
    write_mel_filters(&w);
    if (write_vocab(&w, a.vocab)) write_tensors(&w, s);
    if (fclose(w.f) != 0 && w.ok) {
        report("--out %s: %s", a.out, strerror(errno));
        w.ok = false;
    }
    if (w.ok && rename(tmp, a.out) != 0) {
        report("--out %s: cannot rename into place: %s", a.out, strerror(errno));
        w.ok = false;
    }
    if (!w.ok) remove(tmp);
    return w.ok ? 0 : 1;
}
