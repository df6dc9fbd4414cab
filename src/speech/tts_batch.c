/*
 * tts_batch.c: one backbone context for a Qwen3-TTS voice's calls, their frames decoded together in
 * one batch.
 *
 * llama-tts's loop (libmtmd's helper, mtmd-helper-gen.cpp) makes a frame of one generation at a time:
 * the projector's GEN_CODE step turns the sampled codebook-0 entry and the backbone's hidden state into
 * the frame's codes and the next input, and the backbone decodes that one row. With several calls at
 * once in contexts of their own, the backbone's weights are read once per call and frame. Here the
 * calls share one context, a sequence each. A call runs its GEN_CODE on its own projector (in its own
 * thread, so the projectors work side by side), hands its row to the backbone and waits; when every
 * call that is generating has handed one in, the last of them decodes all the rows in one batch and
 * samples each call's next entry with that call's sampler, then wakes the others. A call's prompt is
 * decoded by the helper into its sequence under the same lock, between rounds.
 *
 * The frame is the helper's step: GEN_CODE with the pipeline's code of the sampled token, its codes
 * buffered and turned into PCM by GEN_WAV every WAV_WINDOW_FRAMES frames and at the end (the decoder's
 * state carried across), and the next row the projector's hidden state plus the <tts_pad> token's
 * embedding, at the next position (M-RoPE: the same position in each of its four sections). One call
 * alone decodes the rows llama-tts decodes, in the same order, with the same draws: the same samples.
 */
#include "speech/tts_batch.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "ggml.h"
#include "gguf.h"
#include "mtmd-helper.h"
#include "mtmd.h"
#include "util/util.h"

#define TTS_N_BATCH 2048     /* llama-tts's batch, for the prompt */
#define WAV_WINDOW_FRAMES 72 /* the helper's window_frames: clip.cpp's code2wav attention window */
#define MROPE_SECTIONS 4     /* positions per row for an M-RoPE backbone */
#define CODEC_0 "<|codec_0|>"
#define CODEC_EOS "<|codec_eos_token|>"
#define TTS_PAD "<tts_pad>"
#define TOKEN_EMBD "token_embd.weight"

/* A call's row in the round being gathered; what the decode gives back is written into it. */
typedef struct bb_row {
    const float *embd; /* n_embd floats */
    llama_pos pos;
    llama_seq_id seq;
    struct llama_sampler *smpl;
    llama_token sampled; /* out */
    float *h;            /* out: the row's hidden state, n_embd floats */
    sipp_status status;  /* out */
    bool done;
} bb_row;

struct sipp_tts_backbone {
    struct llama_context *lctx;
    const struct llama_vocab *vocab;
    int n_embd, n_seq, n_pos; /* n_pos: positions per row */
    llama_token codec_0, codec_eos;
    float *pad; /* <tts_pad>'s embedding row, added to every generated frame's row */
    pthread_mutex_t mu;
    pthread_cond_t decoded;
    int n_active;               /* calls past their prompt and before their end: a round waits for each */
    int n_pending;              /* rows handed in for the next decode */
    uint64_t n_rows, n_decodes; /* the frames' rows decoded so far, and in how many decodes */
    bb_row **pending;           /* n_seq */
    /* the batch's arrays, n_seq rows */
    float *embd;
    llama_pos *pos;
    int32_t *n_seq_id;
    llama_seq_id *seq_id_of;
    llama_seq_id **seq_id;
    int8_t *logits;
    char err[SIPP_ERROR_SIZE]; /* the last round's failure */
};

struct llama_context *sipp_tts_backbone_context(const sipp_tts_backbone *bb) {
    return bb->lctx;
}

void sipp_tts_backbone_counts(sipp_tts_backbone *bb, uint64_t *rows, uint64_t *decodes) {
    pthread_mutex_lock(&bb->mu);
    *rows = bb->n_rows;
    *decodes = bb->n_decodes;
    pthread_mutex_unlock(&bb->mu);
}

void sipp_tts_backbone_free(sipp_tts_backbone *bb) {
    if (!bb) return;
    if (bb->lctx) llama_free(bb->lctx);
    free(bb->pad);
    free(bb->pending);
    free(bb->embd);
    free(bb->pos);
    free(bb->n_seq_id);
    free(bb->seq_id_of);
    free(bb->seq_id);
    free(bb->logits);
    pthread_mutex_destroy(&bb->mu);
    pthread_cond_destroy(&bb->decoded);
    free(bb);
}

static llama_token find_token(const struct llama_vocab *v, const char *text) {
    for (llama_token t = 0; t < llama_vocab_n_tokens(v); t++)
        if (!strcmp(llama_vocab_get_text(v, t), text)) return t;
    return LLAMA_TOKEN_NULL;
}

/* Row `token` of the model file's token embedding, as floats (the helper reads the same row from the
 * loaded tensor, converted by ggml's to_float). */
static sipp_status embedding_row(const char *path, llama_token token, int n_embd, float *out, char *err) {
    struct ggml_context *meta = NULL;
    struct gguf_init_params gp = {.no_alloc = true, .ctx = &meta};
    struct gguf_context *g = gguf_init_from_file(path, gp);
    if (!g) return sipp_fail(err, SIPP_ERR_MODEL, "cannot read the GGUF file '%s'", path);
    sipp_status st = SIPP_OK;
    int64_t id = gguf_find_tensor(g, TOKEN_EMBD);
    struct ggml_tensor *t = id >= 0 ? ggml_get_tensor(meta, TOKEN_EMBD) : NULL;
    const struct ggml_type_traits *tr = t ? ggml_get_type_traits(t->type) : NULL;
    void *row = NULL;
    if (!t || t->ne[0] != n_embd || token < 0 || token >= t->ne[1] ||
        (t->type != GGML_TYPE_F32 && !tr->to_float))
        st = sipp_fail(err, SIPP_ERR_MODEL, "'%s' has no token embedding row %d of %d values", path,
                       (int)token, n_embd);
    else if (!(row = malloc(t->nb[1])))
        st = sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    FILE *f = st == SIPP_OK ? fopen(path, "rb") : NULL;
    if (st == SIPP_OK && !f) st = sipp_fail(err, SIPP_ERR_IO, "cannot open '%s'", path);
    if (st == SIPP_OK) {
        long long at =
            (long long)(gguf_get_data_offset(g) + gguf_get_tensor_offset(g, id) + (size_t)token * t->nb[1]);
        if (fseeko(f, (off_t)at, SEEK_SET) != 0 || fread(row, 1, t->nb[1], f) != t->nb[1])
            st = sipp_fail(err, SIPP_ERR_MODEL, "'%s' ends inside its token embedding", path);
    }
    if (st == SIPP_OK && t->type == GGML_TYPE_F32)
        memcpy(out, row, (size_t)n_embd * sizeof *out);
    else if (st == SIPP_OK)
        tr->to_float(row, out, n_embd);
    if (f) fclose(f);
    free(row);
    gguf_free(g);
    ggml_free(meta);
    return st;
}

static sipp_status alloc_batch(sipp_tts_backbone *bb) {
    size_t n = (size_t)bb->n_seq;
    bb->pending = calloc(n, sizeof *bb->pending);
    bb->embd = calloc(n * (size_t)bb->n_embd, sizeof *bb->embd);
    bb->pos = calloc(n * (size_t)bb->n_pos, sizeof *bb->pos);
    bb->n_seq_id = calloc(n, sizeof *bb->n_seq_id);
    bb->seq_id_of = calloc(n, sizeof *bb->seq_id_of);
    bb->seq_id = calloc(n + 1, sizeof *bb->seq_id);
    bb->logits = calloc(n, sizeof *bb->logits);
    bool ok = bb->pending && bb->embd && bb->pos && bb->n_seq_id && bb->seq_id_of && bb->seq_id && bb->logits;
    return ok ? SIPP_OK : SIPP_ERR_NO_MEMORY;
}

sipp_status sipp_tts_backbone_new(const sipp_model *m, struct llama_context_params cp, int n_seq,
                                  sipp_tts_backbone **out, char *err) {
    *out = NULL;
    sipp_tts_backbone *bb = calloc(1, sizeof *bb);
    if (!bb) return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    pthread_mutex_init(&bb->mu, NULL);
    pthread_cond_init(&bb->decoded, NULL);
    bb->vocab = llama_model_get_vocab(m->lm);
    bb->n_embd = llama_model_n_embd(m->lm);
    bb->n_seq = n_seq;
    enum llama_rope_type rope = llama_model_rope_type(m->lm);
    bb->n_pos = rope == LLAMA_ROPE_TYPE_MROPE || rope == LLAMA_ROPE_TYPE_IMROPE ? MROPE_SECTIONS : 1;
    bb->codec_0 = find_token(bb->vocab, CODEC_0);
    bb->codec_eos = find_token(bb->vocab, CODEC_EOS);
    llama_token pad = find_token(bb->vocab, TTS_PAD);
    sipp_status st = SIPP_OK;
    if (bb->codec_0 == LLAMA_TOKEN_NULL || bb->codec_eos == LLAMA_TOKEN_NULL || pad == LLAMA_TOKEN_NULL)
        st = sipp_fail(err, SIPP_ERR_MODEL, "'%s' lacks the Qwen3-TTS tokens %s, %s or %s", m->path, CODEC_0,
                       CODEC_EOS, TTS_PAD);
    else if (!(bb->pad = malloc((size_t)bb->n_embd * sizeof *bb->pad)) || alloc_batch(bb) != SIPP_OK)
        st = sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    if (st == SIPP_OK) st = embedding_row(m->path, pad, bb->n_embd, bb->pad, err);
    if (st == SIPP_OK) {
        cp.n_seq_max = (uint32_t)n_seq;
        cp.n_ctx *= (uint32_t)n_seq; /* each sequence keeps the whole context llama-tts has */
        cp.kv_unified = false;
        if (!(bb->lctx = llama_init_from_model(m->lm, cp)))
            st = sipp_fail(err, SIPP_ERR_BACKEND, "could not make a context for '%s'", m->path);
    }
    if (st != SIPP_OK) {
        sipp_tts_backbone_free(bb);
        return st;
    }
    *out = bb;
    return SIPP_OK;
}

/* The pending rows, decoded in one batch; each row's next entry sampled with its call's sampler and
 * its hidden state copied out before the next decode. Under bb->mu. */
static void decode_round(sipp_tts_backbone *bb) {
    const int n = bb->n_pending;
    for (int i = 0; i < n; i++) {
        const bb_row *r = bb->pending[i];
        memcpy(bb->embd + (size_t)i * bb->n_embd, r->embd, (size_t)bb->n_embd * sizeof *bb->embd);
        for (int s = 0; s < bb->n_pos; s++)
            bb->pos[i + s * n] = r->pos;
        bb->n_seq_id[i] = 1;
        bb->seq_id_of[i] = r->seq;
        bb->seq_id[i] = &bb->seq_id_of[i];
        bb->logits[i] = 1;
    }
    bb->seq_id[n] = NULL;
    struct llama_batch batch = {.n_tokens = n,
                                .embd = bb->embd,
                                .pos = bb->pos,
                                .n_seq_id = bb->n_seq_id,
                                .seq_id = bb->seq_id,
                                .logits = bb->logits};
    bool ok = llama_decode(bb->lctx, batch) == 0;
    bb->n_rows += (uint64_t)n;
    bb->n_decodes++;
    for (int i = 0; i < n; i++) {
        bb_row *r = bb->pending[i];
        const float *h = ok ? llama_get_embeddings_ith(bb->lctx, i) : NULL;
        if (h) {
            r->sampled = llama_sampler_sample(r->smpl, bb->lctx, i);
            memcpy(r->h, h, (size_t)bb->n_embd * sizeof *r->h);
            r->status = SIPP_OK;
        } else {
            r->status = SIPP_ERR_BACKEND;
        }
        r->done = true;
    }
    bb->n_pending = 0;
    pthread_cond_broadcast(&bb->decoded);
}

/* Hands r to the next round and waits for its decode. */
static sipp_status step(sipp_tts_backbone *bb, bb_row *r, char *err) {
    pthread_mutex_lock(&bb->mu);
    r->done = false;
    bb->pending[bb->n_pending++] = r;
    if (bb->n_pending == bb->n_active) decode_round(bb);
    while (!r->done)
        pthread_cond_wait(&bb->decoded, &bb->mu);
    pthread_mutex_unlock(&bb->mu);
    return r->status == SIPP_OK ? SIPP_OK : sipp_fail(err, r->status, "the speech backbone's decode failed");
}

/* A call ends (its last frame, an error or a cancel): the round no longer waits for it. */
static void leave(sipp_tts_backbone *bb) {
    pthread_mutex_lock(&bb->mu);
    bb->n_active--;
    if (bb->n_pending > 0 && bb->n_pending == bb->n_active) decode_round(bb);
    pthread_mutex_unlock(&bb->mu);
}

/* The prompt into sequence seq (emptied first), its first entry sampled and hidden state copied: the
 * call joins the rounds. */
static sipp_status join(sipp_tts_backbone *bb, int seq, sipp_gen_audio *gen, struct llama_sampler *smpl,
                        llama_token *sampled, float *h, llama_pos *pos, char *err) {
    pthread_mutex_lock(&bb->mu);
    llama_memory_t mem = llama_get_memory(bb->lctx);
    llama_memory_seq_rm(mem, seq, -1, -1);
    sipp_status st = sipp_gen_audio_prompt(gen, TTS_N_BATCH, err);
    const float *last = st == SIPP_OK ? llama_get_embeddings_ith(bb->lctx, -1) : NULL;
    if (st == SIPP_OK && !last)
        st = sipp_fail(err, SIPP_ERR_BACKEND, "the speech backbone gave no hidden state");
    if (st == SIPP_OK) {
        *sampled = llama_sampler_sample(smpl, bb->lctx, -1);
        memcpy(h, last, (size_t)bb->n_embd * sizeof *h);
        *pos = llama_memory_seq_pos_max(mem, seq) + 1;
        bb->n_active++;
    }
    pthread_mutex_unlock(&bb->mu);
    return st;
}

/* A call's buffers: its codes since the last GEN_WAV, the decoder's state, its PCM. */
typedef struct call_audio {
    int32_t *codes;
    size_t n_codes, cap_codes;
    size_t codes_per_frame;
    sipp_buf state;
    float *pcm;
    size_t n_pcm, cap_pcm;
} call_audio;

static bool grow(void **p, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 1024;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * size);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

/* GEN_WAV over the buffered codes, its PCM appended and the decoder's state kept. */
static sipp_status flush_wav(sipp_gen_audio *gen, uint32_t seed, call_audio *a, char *err) {
    if (!a->n_codes) return SIPP_OK;
    struct mtmd_gen_out out;
    sipp_status st = sipp_gen_audio_wav(gen, a->codes, a->n_codes, seed, a->state.len ? a->state.data : NULL,
                                        a->state.len, &out, err);
    if (st != SIPP_OK) return st;
    if (!grow((void **)&a->pcm, &a->cap_pcm, a->n_pcm + out.n_samples, sizeof *a->pcm))
        return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory for the audio");
    if (out.n_samples) memcpy(a->pcm + a->n_pcm, out.audio, out.n_samples * sizeof *a->pcm);
    a->n_pcm += out.n_samples;
    a->state.len = 0;
    if (out.state_size && !sipp_buf_append(&a->state, out.state_data, out.state_size))
        return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    a->n_codes = 0;
    return SIPP_OK;
}

/* The frame's codes buffered (and turned into PCM at each window's end). */
static sipp_status keep_codes(sipp_gen_audio *gen, uint32_t seed, const struct mtmd_gen_out *out,
                              call_audio *a, char *err) {
    if (!grow((void **)&a->codes, &a->cap_codes, a->n_codes + out->n_codes, sizeof *a->codes))
        return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    if (out->n_codes) memcpy(a->codes + a->n_codes, out->codes, out->n_codes * sizeof *a->codes);
    a->n_codes += out->n_codes;
    a->codes_per_frame = out->n_codes;
    if (a->codes_per_frame && a->n_codes / a->codes_per_frame >= WAV_WINDOW_FRAMES)
        return flush_wav(gen, seed, a, err);
    return SIPP_OK;
}

static bool is_cancelled(const volatile bool *cancel) {
    return cancel && __atomic_load_n(cancel, __ATOMIC_ACQUIRE);
}

/* The frames after the prompt, each row decoded in a round with the other calls'. */
static sipp_status frames(sipp_tts_backbone *bb, int seq, sipp_gen_audio *gen,
                          const struct mtmd_helper_gen_audio_inp *inp, bb_row *row, float *next,
                          int max_frames, const volatile bool *cancel, call_audio *a, char *err) {
    sipp_status st = SIPP_OK;
    for (int n = 0; st == SIPP_OK && n < max_frames; n++) {
        if (is_cancelled(cancel)) return sipp_fail(err, SIPP_ERR_CANCELLED, "speech cancelled");
        if (row->sampled == bb->codec_eos || llama_vocab_is_eog(bb->vocab, row->sampled)) break;
        struct mtmd_gen_out out;
        st = sipp_gen_audio_code(gen, row->sampled - bb->codec_0, row->h, inp->top_k, inp->top_p, inp->seed,
                                 &out, err);
        if (st == SIPP_OK) st = keep_codes(gen, inp->seed, &out, a, err);
        if (st != SIPP_OK) break;
        for (int i = 0; i < bb->n_embd; i++)
            next[i] = out.embd[i] + bb->pad[i];
        row->embd = next;
        row->seq = seq;
        st = step(bb, row, err);
        row->pos++;
    }
    return st;
}

sipp_status sipp_tts_batch_speak(sipp_tts_backbone *bb, int seq, sipp_gen_audio *gen,
                                 const struct mtmd_helper_gen_audio_inp *inp, struct llama_sampler *smpl,
                                 int max_frames, const volatile bool *cancel, float **pcm, size_t *n,
                                 sipp_speak_usage *usage, char *err) {
    *pcm = NULL;
    *n = 0;
    call_audio a = {0};
    bb_row row = {.smpl = smpl, .seq = seq};
    float *h = malloc((size_t)bb->n_embd * sizeof *h), *next = malloc((size_t)bb->n_embd * sizeof *next);
    sipp_status st =
        h && next ? sipp_gen_audio_input(gen, inp, err) : sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    if (st == SIPP_OK) {
        row.h = h;
        st = join(bb, seq, gen, smpl, &row.sampled, h, &row.pos, err);
        llama_pos prompt = row.pos;
        if (st == SIPP_OK) {
            st = frames(bb, seq, gen, inp, &row, next, max_frames, cancel, &a, err);
            leave(bb);
        }
        if (st == SIPP_OK && usage) {
            usage->input_tokens += (uint64_t)prompt;
            usage->output_tokens += (uint64_t)(row.pos - prompt);
        }
    }
    if (st == SIPP_OK) st = flush_wav(gen, inp->seed, &a, err);
    free(h);
    free(next);
    free(a.codes);
    sipp_buf_free(&a.state);
    if (st != SIPP_OK) {
        free(a.pcm);
        return st;
    }
    *pcm = a.pcm;
    *n = a.n_pcm;
    return SIPP_OK;
}
