/*
 * mmproj.h: a model's multimodal projector (an mmproj-*.gguf file: images and audio into the text
 * model's embedding space) through llama.cpp's libmtmd (internal).
 *
 * libmtmd.so is part of the artifact but no package ships it and the browser has none, so it is
 * opened at run time on the first projector load (dlopen, beside libllama.so): a text model never
 * needs it, and an artifact without it refuses a projector saying so.
 *
 * A prompt with media becomes tokens in which each image or audio clip stands as a span of
 * placeholder ids, negative (never a vocabulary id) and derived from the file's SHA-256 and the
 * position in the span. The engine's prefix matching compares them like any token, so a turn that
 * sends the same image again finds its cells in the KV and does not encode it again; a different
 * image differs at its first placeholder. A span is evaluated whole (sipp_media_eval: the projector
 * encodes it, then its embeddings are decoded into the sequence), never in part: a reused prefix that
 * would end inside one is cut back to its start (sipp_media_align).
 */
#ifndef SIPP_MODEL_MMPROJ_H
#define SIPP_MODEL_MMPROJ_H

#include <stdbool.h>
#include <stddef.h>

#include "llama.h"
#include "sipp.h"

struct mtmd_bitmap;
struct mtmd_helper_gen_audio_inp;
struct mtmd_gen_out;

/* The marker a chat's rendered prompt carries where each media item goes (libmtmd's default). */
#define SIPP_MEDIA_MARKER "<__media__>"

/* One decoded file from a chat (src/chat): an image (PNG, JPEG, GIF, BMP) or audio (WAV, MP3, FLAC). */
typedef struct sipp_media_bytes {
    unsigned char *data;
    size_t len;
    bool audio;
    size_t decoded;     /* the bytes its decoding takes, from its header (chat_media.c) */
    double max_seconds; /* an audio clip's length limit, checked again when it is decoded */
} sipp_media_bytes;

/* Frees items[0..n) and the array. */
void sipp_media_bytes_free(sipp_media_bytes *items, size_t n);

/* One media item's placeholders in a prompt. */
typedef struct sipp_media_span {
    int start; /* its first position in the prompt's tokens */
    int n;     /* positions it takes */
    bool audio;
} sipp_media_span;

typedef struct sipp_media_prompt sipp_media_prompt;

typedef struct sipp_mmproj sipp_mmproj;

/* Opens libmtmd and loads the projector at path for the text model lm (loaded from text_path): the
 * file is checked first (a projector GGUF), then libmtmd checks its output width against lm's
 * n_embd. Its buffers are counted into mem. SIPP_ERR_MODEL naming the file and the problem (both
 * widths for a mismatch; what sipp does not support yet: M-RoPE positions); SIPP_ERR_BACKEND when
 * the artifact has no libmtmd. n_threads: its CPU threads (0: the machine's cores). */
sipp_status sipp_mmproj_load(const char *path, const struct llama_model *lm, const char *text_path,
                             bool use_gpu, enum llama_flash_attn_type flash_attn, int n_threads,
                             sipp_memory *mem, sipp_mmproj **out, char *errbuf);
void sipp_mmproj_free(sipp_mmproj *p);
bool sipp_mmproj_vision(const sipp_mmproj *p); /* it takes images */
bool sipp_mmproj_audio(const sipp_mmproj *p);  /* it takes audio */
/* The device that encodes: libmtmd's choice for use_gpu (the first GPU ggml lists, else an
 * integrated one), or "CPU". */
const char *sipp_mmproj_device(const sipp_mmproj *p);
/* The sample rate the projector takes audio at (Hz), or 0 when it takes none. */
int sipp_mmproj_audio_rate(const sipp_mmproj *p);

/* Tokenizes a rendered prompt whose SIPP_MEDIA_MARKERs stand for items[0..n) in order: *tokens
 * (malloc'ed, *n_tokens) with each item's placeholders, and *out the spans and what evaluates them.
 * SIPP_ERR_INVALID_ARGUMENT naming the item that is not a readable image or audio clip, or the
 * kind the projector does not take. [any thread] */
sipp_status sipp_media_tokenize(sipp_mmproj *p, const char *text, const sipp_media_bytes *items, size_t n,
                                llama_token **tokens, int *n_tokens, sipp_media_prompt **out, char *errbuf);
void sipp_media_prompt_free(sipp_media_prompt *mp);

/* The spans, in prompt order. */
int sipp_media_n_spans(const sipp_media_prompt *mp);
const sipp_media_span *sipp_media_span_get(const sipp_media_prompt *mp, int i);

/* The span that starts at pos, or -1. */
int sipp_media_span_at(const sipp_media_prompt *mp, int pos);
/* The first span start at or after pos, or INT_MAX when none is left. */
int sipp_media_next_start(const sipp_media_prompt *mp, int pos);
/* n tokens of the prompt as a reusable prefix: n, or the start of the span n falls inside. */
int sipp_media_align(const sipp_media_prompt *mp, int n);

/* Evaluates span i into sequence seq_id of ctx at its position: the projector encodes the item and
 * its embeddings are decoded in batches of n_batch. *encode_ms: the time it took. Engine thread;
 * calls on one projector are serialised. SIPP_ERR_CONTEXT_FULL when the KV has no room for it. */
sipp_status sipp_media_eval(sipp_mmproj *p, struct llama_context *ctx, const sipp_media_prompt *mp, int i,
                            llama_seq_id seq_id, int n_batch, double *encode_ms, char *errbuf);

/* ---- audio generation: Qwen3-TTS and Pocket TTS pairs, through libmtmd's helper ---------------- */

/* The projector's speech pipeline, "qwen3tts" or "pockettts" (*rate: the Hz it speaks at), or NULL
 * when it generates no audio. */
const char *sipp_mmproj_gen_audio(const sipp_mmproj *p, int *rate);

/* An audio clip (a speaker reference) as libmtmd's bitmap: measured and decoded by sipp at the
 * projector's input rate, as a chat's clip is. Free with sipp_mmproj_bitmap_free. */
sipp_status sipp_mmproj_audio_bitmap(const sipp_mmproj *p, const sipp_media_bytes *item, const char *where,
                                     struct mtmd_bitmap **out, char *errbuf);
void sipp_mmproj_bitmap_free(struct mtmd_bitmap *b);

/* One speech generation state over a llama context of the backbone (mtmd_helper_gen_audio): reused
 * call after call, one call at a time. Every step goes through mtmd_bridge.cpp. */
typedef struct sipp_gen_audio sipp_gen_audio;
sipp_status sipp_gen_audio_new(sipp_mmproj *p, struct llama_context *lctx, sipp_gen_audio **out,
                               char *errbuf);
void sipp_gen_audio_free(sipp_gen_audio *g);
/* Takes the text (inp: llama-tts's fields) and decodes its prompt into the context, n_batch at a time:
 * _input then _prompt. _input builds the prompt (and encodes the speaker) without the llama context;
 * _prompt decodes it into inp->seq_id. */
sipp_status sipp_gen_audio_start(sipp_gen_audio *g, const struct mtmd_helper_gen_audio_inp *inp, int n_batch,
                                 char *errbuf);
sipp_status sipp_gen_audio_input(sipp_gen_audio *g, const struct mtmd_helper_gen_audio_inp *inp,
                                 char *errbuf);
sipp_status sipp_gen_audio_prompt(sipp_gen_audio *g, int n_batch, char *errbuf);
/* One frame from the backbone's sampled token and hidden state; *h_out the next hidden state, *stop at
 * the end of speech. */
sipp_status sipp_gen_audio_step(sipp_gen_audio *g, llama_token sampled, const float *h_in,
                                const float **h_out, bool *stop, char *errbuf);
/* The pieces of a frame for callers that run the backbone themselves (tts_batch.c), as libmtmd's helper
 * makes them: GEN_CODE, the projector's codes and next hidden state for a sampled codebook-0 entry and
 * the backbone's hidden state h_in; GEN_WAV, PCM for buffered codes, carrying the decoder's state
 * (NULL, 0 at the start). *out is libmtmd's, valid until g's next call. */
sipp_status sipp_gen_audio_code(sipp_gen_audio *g, int32_t code0, const float *h_in, int top_k, float top_p,
                                uint32_t seed, struct mtmd_gen_out *out, char *errbuf);
sipp_status sipp_gen_audio_wav(sipp_gen_audio *g, int32_t *codes, size_t n_codes, uint32_t seed,
                               const void *state, size_t state_size, struct mtmd_gen_out *out, char *errbuf);
/* All the audio so far, as floats in [-1, 1] at the pipeline's rate (valid until the next call). */
sipp_status sipp_gen_audio_output(sipp_gen_audio *g, const float **pcm, size_t *n, char *errbuf);
/* Makes the next generation draw from seed afresh (libmtmd keeps drawing across calls otherwise);
 * call before sipp_gen_audio_start. SIPP_SEED_RANDOM: nothing to do. */
sipp_status sipp_gen_audio_reseed(sipp_gen_audio *g, uint32_t seed, char *errbuf);

#endif
