/*
 * mmproj.c: a model's multimodal projector through libmtmd, opened at run time (see mmproj.h).
 *
 * The C API sipp calls, all from mtmd.h and mtmd-helper.h at the pinned commit:
 *   load      mtmd_context_params_default, mtmd_init_from_file (it checks the projector's output
 *             width against the text model), mtmd_support_vision/_audio, mtmd_decode_use_mrope,
 *             mtmd_free; mtmd_log_set / mtmd_helper_log_set route its log through sipp's
 *   tokenize  images: mtmd_helper_bitmap_init_from_buf (stb_image; the bitmap's id is the file's
 *             SHA-256); audio: decoded by sipp with the same miniaudio after its header is measured
 *             (audio_decode.h says why), then mtmd_bitmap_init_from_audio and mtmd_bitmap_set_id with
 *             the same id the helper gives; mtmd_tokenize, mtmd_input_chunks_* and mtmd_input_chunk_*
 *             to walk the chunks, mtmd_bitmap_free
 * The calls that can throw go through mtmd_bridge.cpp, which turns an exception into a status.
 *   evaluate  mtmd_helper_eval_chunk_single (mtmd_encode_chunk, then the embeddings decoded into the
 *             sequence in batches, with the attention mask the projector needs)
 */
#include "model/mmproj.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "llama.h"
#include "model/audio_decode.h"
#include "model/mmproj_check.h"
#include "model/mtmd_bridge.h"
#include "mtmd-helper.h"
#include "mtmd.h"
#include "util/sha256.h"
#include "util/util.h"

#define MTMD_LIB "libmtmd.so"
#define PLACEHOLDER_MASK 0x3FFFFFFF /* placeholders are -(1 + (mix & mask)): below 0, never a token */
#define GOLDEN UINT64_C(0x9E3779B97F4A7C15)

/* The entry points sipp uses, resolved from libmtmd.so once per process. */
#define MTMD_FUNCS(X)                                                                                        \
    X(mtmd_context_params_default)                                                                           \
    X(mtmd_init_from_file)                                                                                   \
    X(mtmd_free)                                                                                             \
    X(mtmd_support_vision)                                                                                   \
    X(mtmd_support_audio)                                                                                    \
    X(mtmd_decode_use_mrope)                                                                                 \
    X(mtmd_log_set)                                                                                          \
    X(mtmd_helper_log_set)                                                                                   \
    X(mtmd_helper_init_opt_default)                                                                          \
    X(mtmd_helper_bitmap_init_from_buf)                                                                      \
    X(mtmd_bitmap_free)                                                                                      \
    X(mtmd_bitmap_is_audio)                                                                                  \
    X(mtmd_bitmap_get_id)                                                                                    \
    X(mtmd_bitmap_set_id)                                                                                    \
    X(mtmd_bitmap_init_from_audio)                                                                           \
    X(mtmd_get_audio_sample_rate)                                                                            \
    X(mtmd_input_chunks_init)                                                                                \
    X(mtmd_input_chunks_free)                                                                                \
    X(mtmd_input_chunks_size)                                                                                \
    X(mtmd_input_chunks_get)                                                                                 \
    X(mtmd_input_chunk_get_type)                                                                             \
    X(mtmd_input_chunk_get_tokens_text)                                                                      \
    X(mtmd_input_chunk_get_n_tokens)                                                                         \
    X(mtmd_input_chunk_get_n_pos)                                                                            \
    X(mtmd_input_chunk_get_id)                                                                               \
    X(mtmd_tokenize)                                                                                         \
    X(mtmd_helper_eval_chunk_single)                                                                         \
    X(mtmd_gen_audio_get_info)                                                                               \
    X(mtmd_helper_gen_audio_init)                                                                            \
    X(mtmd_helper_gen_audio_free)                                                                            \
    X(mtmd_helper_gen_audio_set_input)                                                                       \
    X(mtmd_helper_gen_audio_step_prompt)                                                                     \
    X(mtmd_helper_gen_audio_step_gen)                                                                        \
    X(mtmd_helper_gen_audio_get_output)                                                                      \
    X(mtmd_gen_inp_default)                                                                                  \
    X(mtmd_gen_audio_process)

static struct {
#define FIELD(name) __typeof__(name) *name;
    MTMD_FUNCS(FIELD)
#undef FIELD
} api;

static pthread_once_t api_once = PTHREAD_ONCE_INIT;
static char api_error[SIPP_ERROR_SIZE]; /* why libmtmd could not be opened; "" when it was */

/* One entry point into *fn; false after saying which is missing. */
static bool resolve(void *h, const char *path, const char *name, void **fn) {
    if ((*fn = dlsym(h, name))) return true;
    snprintf(api_error, sizeof api_error, "%.200s has no %s: not the libmtmd of llama.cpp %s", path, name,
             sipp_llama_release());
    return false;
}

/* libmtmd.so beside the llama.cpp libraries this process runs (the artifact's directory). */
static void open_api(void) {
    const char *dir = sipp_runtime_artifact_dir();
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/" MTMD_LIB, dir ? dir : ".");
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(api_error, sizeof api_error,
                 "this artifact has no %s (%.200s), so it runs text models only; rebuild it with make",
                 MTMD_LIB, dlerror());
        return;
    }
#define RESOLVE(name)                                                                                        \
    if (!resolve(h, path, #name, (void **)&api.name)) return;
    MTMD_FUNCS(RESOLVE)
#undef RESOLVE
    api.mtmd_log_set(sipp_log_callback, NULL);
    api.mtmd_helper_log_set(sipp_log_callback, NULL);
}

struct sipp_mmproj {
    mtmd_context *ctx;
    pthread_mutex_t mu; /* encoding is not thread-safe: one at a time */
    bool vision, audio;
    char path[PATH_MAX];
    char device[64]; /* where it encodes (sipp_mmproj_device) */
};

struct sipp_media_prompt {
    mtmd_input_chunks *chunks;
    int *chunk_of; /* the chunk of each span */
    sipp_media_span *spans;
    int n_spans;
};

/* libmtmd's own words for a failed load, made into sipp's: the width mismatch names both widths. */
static sipp_status load_failed(const char *text_path, const char *path, const char *why, char *errbuf) {
    int text = 0, proj = 0;
    const char *mm = strstr(why, "mismatch between text model");
    if (mm &&
        sscanf(mm, "mismatch between text model (n_embd = %d) and mmproj (n_embd = %d)", &text, &proj) == 2)
        return sipp_mmproj_width_error(errbuf, path, proj, text_path, text);
    return sipp_fail(errbuf, SIPP_ERR_MODEL, "projector '%s' failed to load: %s", path,
                     *why ? why : "libmtmd gave no reason");
}

sipp_status sipp_mmproj_load(const char *path, const struct llama_model *lm, const char *text_path,
                             bool use_gpu, enum llama_flash_attn_type flash_attn, int n_threads,
                             sipp_memory *mem, sipp_mmproj **out, char *errbuf) {
    *out = NULL;
    pthread_once(&api_once, open_api);
    if (*api_error)
        return sipp_fail(errbuf, SIPP_ERR_BACKEND, "cannot load projector '%s': %s", path, api_error);
    sipp_status st = sipp_mmproj_check_file(path, NULL, errbuf);
    if (st != SIPP_OK) return st;
    sipp_mmproj *p = calloc(1, sizeof *p);
    if (!p) return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory loading '%s'", path);
    struct mtmd_context_params cp = api.mtmd_context_params_default();
    cp.use_gpu = use_gpu;
    cp.print_timings = false;
    cp.warmup = true; /* as llama-server: the encoder's buffers are sized at load, not on the first image */
    cp.flash_attn_type = flash_attn;
    /* libmtmd's default is 4 encoder threads whatever the machine; on 2 cores that is twice the
     * cores, and an encode took twice as long (bench/images.py). The engine's default is the cores. */
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    cp.n_threads = n_threads > 0 ? n_threads : cores > 0 ? (int)cores : 1;
    char why[SIPP_ERROR_SIZE];
    sipp_log_capture(why);
    sipp_buffers_capture(mem);
    st = sipp_mtmd_init(api.mtmd_init_from_file, path, lm, cp, &p->ctx, errbuf);
    sipp_buffers_capture(NULL);
    sipp_log_capture(NULL);
    if (st != SIPP_OK || !p->ctx) {
        free(p);
        return st != SIPP_OK ? st : load_failed(text_path, path, why, errbuf);
    }
    pthread_mutex_init(&p->mu, NULL);
    /* A speech projector places no images: its pipeline (libmtmd's helper) gives a Qwen3-TTS talker its
     * M-RoPE positions itself. */
    if (api.mtmd_decode_use_mrope(p->ctx) && !sipp_mmproj_gen_audio(p, NULL)) {
        sipp_mmproj_free(p);
        return sipp_fail(
            errbuf, SIPP_ERR_MODEL,
            "projector '%s' places images with M-RoPE positions (the Qwen2-VL family), which sipp "
            "does not support yet; use a model whose projector does not",
            path);
    }
    /* clip.cpp's choice of device, repeated: mtmd does not say which it took. */
    ggml_backend_dev_t dev = use_gpu ? ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_GPU) : NULL;
    if (use_gpu && !dev) dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_IGPU);
    sipp_strlcpy(p->device, dev ? ggml_backend_dev_name(dev) : "CPU", sizeof p->device);
    p->vision = api.mtmd_support_vision(p->ctx);
    p->audio = api.mtmd_support_audio(p->ctx);
    sipp_strlcpy(p->path, path, sizeof p->path);
    *out = p;
    return SIPP_OK;
}

void sipp_mmproj_free(sipp_mmproj *p) {
    if (!p) return;
    api.mtmd_free(p->ctx);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

bool sipp_mmproj_vision(const sipp_mmproj *p) { return p && p->vision; }
bool sipp_mmproj_audio(const sipp_mmproj *p) { return p && p->audio; }
const char *sipp_mmproj_device(const sipp_mmproj *p) { return p ? p->device : ""; }

int sipp_mmproj_audio_rate(const sipp_mmproj *p) {
    int rate = p && p->audio ? api.mtmd_get_audio_sample_rate(p->ctx) : 0;
    return rate > 0 ? rate : 0;
}

/* ---- prompts ---------------------------------------------------------------------------------- */

void sipp_media_bytes_free(sipp_media_bytes *items, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(items[i].data);
    free(items);
}

void sipp_media_prompt_free(sipp_media_prompt *mp) {
    if (!mp) return;
    if (mp->chunks) api.mtmd_input_chunks_free(mp->chunks);
    free(mp->chunk_of);
    free(mp->spans);
    free(mp);
}

static uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= UINT64_C(0xBF58476D1CE4E5B9);
    x ^= x >> 27;
    x *= UINT64_C(0x94D049BB133111EB);
    return x ^ (x >> 31);
}

/* The placeholders of a media chunk, from its id (the file's SHA-256 in hex). */
static void placeholders(const char *id, llama_token *out, int n) {
    uint64_t h = 0;
    for (const char *c = id ? id : ""; *c; c++)
        h = mix64(h ^ (unsigned char)*c);
    for (int k = 0; k < n; k++)
        out[k] = -(llama_token)(1 + (mix64(h + GOLDEN * (uint64_t)(k + 1)) & PLACEHOLDER_MASK));
}

/* An audio clip's bitmap: measured and decoded by sipp (audio_decode.h), then given to libmtmd with
 * the id its helper would give the same bytes (their SHA-256), so the placeholders are the same. */
static sipp_status audio_bitmap(const sipp_mmproj *p, const sipp_media_bytes *item, const char *where,
                                mtmd_bitmap **out, char *errbuf) {
    int rate = sipp_mmproj_audio_rate(p);
    if (rate == 0)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                         "%s is an audio clip, but projector '%s' takes images only", where, p->path);
    float *pcm;
    sipp_audio_info info;
    sipp_status st = sipp_audio_decode(item->data, item->len, (uint32_t)rate, item->max_seconds, where, &pcm,
                                       &info, errbuf);
    if (st != SIPP_OK) return st;
    st = sipp_mtmd_audio(api.mtmd_bitmap_init_from_audio, (size_t)info.frames, pcm, out, errbuf);
    free(pcm);
    if (st != SIPP_OK) return st;
    char hex[SIPP_SHA256_HEX];
    sipp_sha256 *h = sipp_sha256_new();
    if (!h) return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory");
    sipp_sha256_update(h, item->data, item->len);
    sipp_sha256_final(h, hex);
    sipp_sha256_free(h);
    api.mtmd_bitmap_set_id(*out, hex);
    return SIPP_OK;
}

/* The bitmap of one item; an error names the item libmtmd cannot read. */
static sipp_status make_bitmap(const sipp_mmproj *p, const sipp_media_bytes *item, size_t i, mtmd_bitmap **bm,
                               char *errbuf) {
    const char *kind = item->audio ? "audio clip" : "image";
    char where[48];
    snprintf(where, sizeof where, "media item %zu", i + 1);
    if (item->audio ? !p->audio : !p->vision)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "%s is an %s, but projector '%s' takes %s only",
                         where, kind, p->path, p->vision ? "images" : "audio");
    if (item->audio) return audio_bitmap(p, item, where, bm, errbuf);
    char why[SIPP_ERROR_SIZE];
    sipp_log_capture(why);
    sipp_status st = sipp_mtmd_image(api.mtmd_helper_bitmap_init_from_buf, api.mtmd_helper_init_opt_default,
                                     p->ctx, item->data, item->len, bm, errbuf);
    sipp_log_capture(NULL);
    if (st != SIPP_OK) return st;
    if (!*bm || api.mtmd_bitmap_is_audio(*bm))
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "%s (%zu bytes) is not a readable %s%s%s", where,
                         item->len, kind, *why ? ": " : "", why);
    return SIPP_OK;
}

/* Walks the chunks into tokens and spans. */
static sipp_status flatten(sipp_media_prompt *mp, llama_token **tokens, int *n_tokens, char *errbuf) {
    size_t n_chunks = api.mtmd_input_chunks_size(mp->chunks), total = 0;
    for (size_t c = 0; c < n_chunks; c++)
        total += api.mtmd_input_chunk_get_n_tokens(api.mtmd_input_chunks_get(mp->chunks, c));
    if (total == 0 || total > INT_MAX / 2)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "the prompt is empty");
    llama_token *t = malloc(total * sizeof *t);
    mp->spans = calloc(n_chunks, sizeof *mp->spans);
    mp->chunk_of = calloc(n_chunks, sizeof *mp->chunk_of);
    if (!t || !mp->spans || !mp->chunk_of) {
        free(t);
        return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory");
    }
    int at = 0;
    for (size_t c = 0; c < n_chunks; c++) {
        const mtmd_input_chunk *ch = api.mtmd_input_chunks_get(mp->chunks, c);
        enum mtmd_input_chunk_type type = api.mtmd_input_chunk_get_type(ch);
        int n = (int)api.mtmd_input_chunk_get_n_tokens(ch);
        if (type == MTMD_INPUT_CHUNK_TYPE_TEXT) {
            size_t nt = 0;
            const llama_token *tt = api.mtmd_input_chunk_get_tokens_text(ch, &nt);
            memcpy(t + at, tt, nt * sizeof *t);
        } else {
            placeholders(api.mtmd_input_chunk_get_id(ch), t + at, n);
            mp->chunk_of[mp->n_spans] = (int)c;
            mp->spans[mp->n_spans++] =
                (sipp_media_span){.start = at, .n = n, .audio = type == MTMD_INPUT_CHUNK_TYPE_AUDIO};
        }
        at += n;
    }
    *tokens = t;
    *n_tokens = at;
    return SIPP_OK;
}

/* The prompt's text and its items' bitmaps into mp's chunks. */
static sipp_status tokenize_bitmaps(sipp_mmproj *p, sipp_media_prompt *mp, const char *text, mtmd_bitmap **bm,
                                    size_t n, char *errbuf) {
    mtmd_input_text in = {.text = text, .text_len = strlen(text), .add_special = true, .parse_special = true};
    char why[SIPP_ERROR_SIZE];
    int32_t rc = -1;
    sipp_log_capture(why);
    sipp_status st = sipp_mtmd_tokenize(api.mtmd_tokenize, p->ctx, mp->chunks, &in,
                                        (const mtmd_bitmap *const *)bm, n, &rc, errbuf);
    sipp_log_capture(NULL);
    if (st != SIPP_OK || rc == 0) return st;
    if (rc == 1)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                         "the chat has %zu media items but its text has another number of '" SIPP_MEDIA_MARKER
                         "' markers; do not write that marker in a message",
                         n);
    return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "the projector could not prepare the media%s%s",
                     *why ? ": " : "", why);
}

sipp_status sipp_media_tokenize(sipp_mmproj *p, const char *text, const sipp_media_bytes *items, size_t n,
                                llama_token **tokens, int *n_tokens, sipp_media_prompt **out, char *errbuf) {
    *tokens = NULL;
    *out = NULL;
    sipp_media_prompt *mp = calloc(1, sizeof *mp);
    mtmd_bitmap **bm = calloc(n ? n : 1, sizeof *bm);
    sipp_status st = SIPP_OK;
    if (!mp || !bm)
        st = sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory");
    else if ((st = sipp_mtmd_chunks(api.mtmd_input_chunks_init, &mp->chunks, errbuf)) == SIPP_OK &&
             !mp->chunks)
        st = sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory");
    for (size_t i = 0; st == SIPP_OK && i < n; i++)
        st = make_bitmap(p, &items[i], i, &bm[i], errbuf);
    if (st == SIPP_OK) st = tokenize_bitmaps(p, mp, text, bm, n, errbuf);
    for (size_t i = 0; bm && i < n; i++)
        if (bm[i]) api.mtmd_bitmap_free(bm[i]);
    free(bm);
    if (st == SIPP_OK) st = flatten(mp, tokens, n_tokens, errbuf);
    if (st != SIPP_OK) {
        sipp_media_prompt_free(mp);
        return st;
    }
    *out = mp;
    return SIPP_OK;
}

int sipp_media_n_spans(const sipp_media_prompt *mp) { return mp ? mp->n_spans : 0; }
const sipp_media_span *sipp_media_span_get(const sipp_media_prompt *mp, int i) { return &mp->spans[i]; }

int sipp_media_span_at(const sipp_media_prompt *mp, int pos) {
    for (int i = 0; mp && i < mp->n_spans; i++)
        if (mp->spans[i].start == pos) return i;
    return -1;
}

int sipp_media_next_start(const sipp_media_prompt *mp, int pos) {
    for (int i = 0; mp && i < mp->n_spans; i++)
        if (mp->spans[i].start >= pos) return mp->spans[i].start;
    return INT_MAX;
}

int sipp_media_align(const sipp_media_prompt *mp, int n) {
    for (int i = 0; mp && i < mp->n_spans; i++)
        if (n > mp->spans[i].start && n < mp->spans[i].start + mp->spans[i].n) return mp->spans[i].start;
    return n;
}

sipp_status sipp_media_eval(sipp_mmproj *p, struct llama_context *ctx, const sipp_media_prompt *mp, int i,
                            llama_seq_id seq_id, int n_batch, double *encode_ms, char *errbuf) {
    const mtmd_input_chunk *ch = api.mtmd_input_chunks_get(mp->chunks, (size_t)mp->chunk_of[i]);
    llama_pos new_pos = 0;
    double t0 = sipp_now_ms();
    char why[SIPP_ERROR_SIZE];
    int32_t rc = -1;
    pthread_mutex_lock(&p->mu);
    sipp_log_capture(why);
    sipp_status st = sipp_mtmd_eval(api.mtmd_helper_eval_chunk_single, p->ctx, ctx, ch, mp->spans[i].start,
                                    seq_id, n_batch, &new_pos, &rc, errbuf);
    sipp_log_capture(NULL);
    pthread_mutex_unlock(&p->mu);
    *encode_ms = sipp_now_ms() - t0;
    if (st != SIPP_OK) return st;
    if (rc == 0) return SIPP_OK;
    if (strstr(why, "decode") || rc == 1)
        return sipp_fail(errbuf, SIPP_ERR_CONTEXT_FULL,
                         "no room in the context for media item %d (%d positions); raise ctx_size", i + 1,
                         mp->spans[i].n);
    return sipp_fail(errbuf, SIPP_ERR_INTERNAL, "the projector failed to encode media item %d%s%s", i + 1,
                     *why ? ": " : "", why);
}

/* ---- audio generation (Qwen3-TTS, Pocket TTS) ------------------------------------------------- */

#define RESEED_MASK 0x5bd1e995u /* any other seed will do */
static sipp_status gen_failed(char *errbuf, const char *what, int32_t rc);

struct sipp_gen_audio {
    mtmd_helper_gen_audio *h;
    mtmd_context *ctx;
    float *zeros; /* a hidden state of n_embd zeros, for sipp_gen_audio_reseed */
};

const char *sipp_mmproj_gen_audio(const sipp_mmproj *p, int *rate) {
    struct mtmd_gen_audio_info info = api.mtmd_gen_audio_get_info(p->ctx);
    if (rate) *rate = info.sample_rate;
    switch (info.type) {
    case MTMD_GEN_AUDIO_TYPE_QWEN3TTS: return "qwen3tts";
    case MTMD_GEN_AUDIO_TYPE_POCKETTTS: return "pockettts";
    default: return NULL;
    }
}

sipp_status sipp_mmproj_audio_bitmap(const sipp_mmproj *p, const sipp_media_bytes *item, const char *where,
                                     struct mtmd_bitmap **out, char *errbuf) {
    return audio_bitmap(p, item, where, out, errbuf);
}

void sipp_mmproj_bitmap_free(struct mtmd_bitmap *b) {
    if (b) api.mtmd_bitmap_free(b);
}

sipp_status sipp_gen_audio_new(sipp_mmproj *p, struct llama_context *lctx, sipp_gen_audio **out,
                               char *errbuf) {
    *out = calloc(1, sizeof **out);
    if (!*out) return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory");
    sipp_status st = sipp_mtmd_gen_init(api.mtmd_helper_gen_audio_init, lctx, p->ctx, &(*out)->h, errbuf);
    (*out)->ctx = p->ctx;
    (*out)->zeros = calloc((size_t)llama_model_n_embd(llama_get_model(lctx)), sizeof(float));
    if (st == SIPP_OK && !(*out)->zeros) st = sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory");
    if (st == SIPP_OK && !(*out)->h)
        st = sipp_fail(errbuf, SIPP_ERR_INTERNAL, "libmtmd could not start audio generation");
    if (st != SIPP_OK) {
        sipp_gen_audio_free(*out);
        *out = NULL;
    }
    return st;
}

void sipp_gen_audio_free(sipp_gen_audio *g) {
    if (!g) return;
    if (g->h) api.mtmd_helper_gen_audio_free(g->h);
    free(g->zeros);
    free(g);
}

/* libmtmd reseeds its projector's generator only when a step's seed differs from the last one, so a
 * second call with the same seed would go on drawing where the first stopped. One GEN_CODE step on a
 * zero hidden state with another seed makes the next step (the call's first) reseed with seed, so
 * every call starts where llama-tts's one generation starts. */
sipp_status sipp_gen_audio_reseed(sipp_gen_audio *g, uint32_t seed, char *errbuf) {
    if (seed == SIPP_SEED_RANDOM) return SIPP_OK;
    struct mtmd_gen_inp inp = api.mtmd_gen_inp_default(g->ctx);
    inp.type = MTMD_GEN_PROCESS_TYPE_GEN_CODE;
    inp.code0 = 0;
    inp.embd = g->zeros;
    inp.seed = seed ^ RESEED_MASK;
    int32_t rc;
    struct mtmd_gen_out out;
    sipp_status st = sipp_mtmd_gen_process(api.mtmd_gen_audio_process, g->ctx, &inp, &out, &rc, errbuf);
    if (st == SIPP_OK && rc != 0) st = gen_failed(errbuf, "starting from the seed", rc);
    return st;
}

/* libmtmd's helper logs why a step failed; the message sipp gives names the step and points there. */
static sipp_status gen_failed(char *errbuf, const char *what, int32_t rc) {
    return sipp_fail(errbuf, SIPP_ERR_MODEL,
                     "libmtmd's audio generation failed %s (code %d; its log says why)", what, (int)rc);
}

sipp_status sipp_gen_audio_input(sipp_gen_audio *g, const struct mtmd_helper_gen_audio_inp *inp,
                                 char *errbuf) {
    int32_t rc;
    sipp_status st = sipp_mtmd_gen_input(api.mtmd_helper_gen_audio_set_input, g->h, inp, &rc, errbuf);
    if (st == SIPP_OK && rc != 0)
        st = gen_failed(errbuf, "preparing the text (a vocabulary without the pipeline's tokens?)", rc);
    return st;
}

sipp_status sipp_gen_audio_prompt(sipp_gen_audio *g, int n_batch, char *errbuf) {
    int32_t rc;
    do {
        sipp_status st =
            sipp_mtmd_gen_prompt(api.mtmd_helper_gen_audio_step_prompt, g->h, n_batch, &rc, errbuf);
        if (st != SIPP_OK) return st;
        if (rc < 0) return gen_failed(errbuf, "reading the text", rc);
    } while (rc > 0);
    return SIPP_OK;
}

sipp_status sipp_gen_audio_start(sipp_gen_audio *g, const struct mtmd_helper_gen_audio_inp *inp, int n_batch,
                                 char *errbuf) {
    sipp_status st = sipp_gen_audio_input(g, inp, errbuf);
    return st == SIPP_OK ? sipp_gen_audio_prompt(g, n_batch, errbuf) : st;
}

sipp_status sipp_gen_audio_step(sipp_gen_audio *g, llama_token sampled, const float *h_in,
                                const float **h_out, bool *stop, char *errbuf) {
    int32_t rc;
    *stop = false;
    sipp_status st =
        sipp_mtmd_gen_step(api.mtmd_helper_gen_audio_step_gen, g->h, sampled, h_in, h_out, stop, &rc, errbuf);
    if (st == SIPP_OK && rc != 0) st = gen_failed(errbuf, "generating a frame", rc);
    return st;
}

sipp_status sipp_gen_audio_code(sipp_gen_audio *g, int32_t code0, const float *h_in, int top_k, float top_p,
                                uint32_t seed, struct mtmd_gen_out *out, char *errbuf) {
    struct mtmd_gen_inp inp = api.mtmd_gen_inp_default(g->ctx);
    inp.type = MTMD_GEN_PROCESS_TYPE_GEN_CODE;
    inp.code0 = code0;
    inp.embd = (float *)h_in; /* read only: libmtmd's field is not const */
    inp.top_k = top_k;
    inp.top_p = top_p;
    inp.seed = seed;
    int32_t rc;
    sipp_status st = sipp_mtmd_gen_process(api.mtmd_gen_audio_process, g->ctx, &inp, out, &rc, errbuf);
    if (st == SIPP_OK && rc != 0) st = gen_failed(errbuf, "generating a frame's codes", rc);
    return st;
}

sipp_status sipp_gen_audio_wav(sipp_gen_audio *g, int32_t *codes, size_t n_codes, uint32_t seed,
                               const void *state, size_t state_size, struct mtmd_gen_out *out, char *errbuf) {
    struct mtmd_gen_inp inp = api.mtmd_gen_inp_default(g->ctx);
    inp.type = MTMD_GEN_PROCESS_TYPE_GEN_WAV;
    inp.codes = codes;
    inp.n_codes = n_codes;
    inp.seed = seed;
    inp.state_data = (const char *)state;
    inp.state_size = state_size;
    int32_t rc;
    sipp_status st = sipp_mtmd_gen_process(api.mtmd_gen_audio_process, g->ctx, &inp, out, &rc, errbuf);
    if (st == SIPP_OK && rc != 0) st = gen_failed(errbuf, "decoding the frames into audio", rc);
    return st;
}

sipp_status sipp_gen_audio_output(sipp_gen_audio *g, const float **pcm, size_t *n, char *errbuf) {
    int32_t rc, rate;
    const char *data;
    size_t len;
    int64_t n_samples;
    sipp_status st = sipp_mtmd_gen_output(api.mtmd_helper_gen_audio_get_output, g->h, &rate, &data, &len,
                                          &n_samples, &rc, errbuf);
    if (st == SIPP_OK && rc != 0) st = gen_failed(errbuf, "decoding the frames into audio", rc);
    if (st != SIPP_OK) return st;
    *pcm = (const float *)data;
    *n = len / sizeof(float);
    return SIPP_OK;
}
