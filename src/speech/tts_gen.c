/*
 * tts_gen.c: speech from a Qwen3-TTS or Pocket TTS pair through libmtmd's audio generation, the way
 * llama-tts (the pinned tools/tts/tts.cpp) makes it.
 *
 * The backbone is a llama.cpp model whose context returns its hidden states (embeddings on). For each
 * piece of text: libmtmd's helper builds the pipeline's prompt (the speaker reference and language
 * where the pipeline takes them) and decodes it; then, frame by frame, the backbone's next token is
 * sampled (codebook 0 for Qwen3-TTS; Pocket TTS reads the hidden state instead), the projector's
 * GEN_CODE step makes the rest of the frame and the next input, and at the end GEN_WAV turns the
 * frames into PCM. Everything follows llama-tts's defaults so that the same seed gives the same
 * samples: its context (the model's training context, batch 2048, embeddings), its sampler chain
 * (the model's suppressed tokens, then llama.cpp common's default order with the TTS example's
 * repeat penalty, top-k 40, top-p 0.95, min-p 0.05, temperature 0.8, then the seeded draw), its frame
 * cap (512) and its float-to-16-bit conversion (clamp, times 32767, truncated).
 *
 * Calls that overlap each take a state of their own, up to n_parallel of them (a backbone context and
 * a projector context with its generation helper, all on the one loaded backbone model), so two
 * requests generate at once instead of one after the other; a call finds a free state under the
 * handle's lock (waiting for one when all are busy) and starts from an empty KV. Each state runs
 * n_threads threads in the backbone and in the projector: on a small machine, parallel states of one
 * thread each keep the cores busy without the spinning of oversubscribed thread pools. With
 * batch_frames, a Qwen3-TTS voice's states share one backbone context instead, a sequence each, and
 * tts_batch.c runs their frames, decoding the rows of calls at once in one batch.
 */
#include "speech/tts_gen.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "llama.h"
#include "model/mmproj.h"
#include "model/mmproj_check.h"
#include "model/model.h"
#include "mtmd-helper.h"
#include "speech/tts_batch.h"
#include "util/util.h"

/* llama-tts's defaults (common_params with LLAMA_EXAMPLE_TTS) */
#define TTS_MAX_FRAMES 512
#define TTS_N_BATCH 2048
#define TTS_TOP_K 40
#define TTS_TOP_P 0.95f
#define TTS_MIN_P 0.05f
#define TTS_TEMP 0.8f
#define TTS_PENALTY_LAST_N (-1)
#define TTS_PENALTY_REPEAT 1.05f
#define TTS_LANGUAGE "en"
#define SPEAKER_MAX_SECONDS 60.0 /* a reference clip longer than this is refused */
#define STATE_WAIT_MS 50         /* a call waiting for a free state looks at its cancel flag this often */
#define QWEN3TTS "qwen3tts"
#define LANGUAGE_TOKEN "<|codec_language_" /* Qwen3-TTS: a language is a codec token of its vocabulary */
#define LANGUAGE_TOKEN_END "|>"
#define LANGUAGES_SIZE 512

/* mtmd-helper-gen.cpp's language codes (tts_lang_codes): a code, or a name as it is, picks the token
 * <|codec_language_NAME|>. */
static const char *const LANGUAGE_CODES[][2] = {
    {"zh", "chinese"}, {"en", "english"},  {"de", "german"}, {"it", "italian"}, {"pt", "portuguese"},
    {"es", "spanish"}, {"ja", "japanese"}, {"ko", "korean"}, {"fr", "french"},  {"ru", "russian"},
};

/* A voice of a pair beyond "default": a reference clip under its name. */
typedef struct named_speaker {
    char *name;
    struct mtmd_bitmap *clip;
} named_speaker;

/* One generation at a time: a context of the backbone (Pocket TTS; a Qwen3-TTS state uses a sequence of
 * the shared backbone instead), a projector context and the helper on them. */
typedef struct gen_state {
    struct llama_context *lctx; /* NULL on the shared backbone */
    sipp_mmproj *mmproj;
    sipp_gen_audio *gen;
    bool busy; /* under the handle's lock */
} gen_state;

struct sipp_tts_gen {
    sipp_model *model;           /* the backbone, loaded without a projector: each state has its own */
    sipp_tts_backbone *backbone; /* Qwen3-TTS: one context, a sequence per state, frames batched */
    gen_state *states;
    int n_states;
    struct mtmd_bitmap *speaker; /* "default"'s reference, NULL without one; read by every state */
    named_speaker *speakers;     /* the other voices, n_speakers of them */
    int n_speakers;
    const char *pipeline;
    int rate;
    sipp_memory memory;             /* the weights' and the states' buffers, by place */
    char languages[LANGUAGES_SIZE]; /* Qwen3-TTS: the language names its vocabulary has, ", " between */
    pthread_mutex_t mu;
    pthread_cond_t free_state;
};

const char *sipp_tts_gen_pipeline(const sipp_tts_gen *g) { return g->pipeline; }
int sipp_tts_gen_rate(const sipp_tts_gen *g) { return g->rate; }
void sipp_tts_gen_memory(const sipp_tts_gen *g, sipp_memory *out) { *out = g->memory; }

void sipp_tts_gen_frames(sipp_tts_gen *g, uint64_t *frames, uint64_t *decodes) {
    *frames = *decodes = 0;
    if (g->backbone) sipp_tts_backbone_counts(g->backbone, frames, decodes);
}

void sipp_tts_gen_free(sipp_tts_gen *g) {
    if (!g) return;
    for (int i = 0; g->states && i < g->n_states; i++) {
        sipp_gen_audio_free(g->states[i].gen);
        if (g->states[i].lctx) llama_free(g->states[i].lctx);
        sipp_mmproj_free(g->states[i].mmproj);
    }
    free(g->states);
    sipp_tts_backbone_free(g->backbone);
    sipp_mmproj_bitmap_free(g->speaker);
    for (int i = 0; g->speakers && i < g->n_speakers; i++) {
        free(g->speakers[i].name);
        sipp_mmproj_bitmap_free(g->speakers[i].clip);
    }
    free(g->speakers);
    sipp_model_free(g->model);
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->free_state);
    free(g);
}

static sipp_status load_speaker(sipp_tts_gen *g, const char *path, struct mtmd_bitmap **out, char *err) {
    sipp_media_bytes item = {.audio = true, .max_seconds = SPEAKER_MAX_SECONDS};
    FILE *f = fopen(path, "rb");
    if (!f) return sipp_fail(err, SIPP_ERR_NOT_FOUND, "cannot read the speaker clip '%s'", path);
    sipp_buf b = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        if (!sipp_buf_append(&b, chunk, n)) break;
    bool bad = ferror(f) || !feof(f);
    fclose(f);
    if (bad) {
        sipp_buf_free(&b);
        return sipp_fail(err, SIPP_ERR_IO, "reading the speaker clip '%s' failed", path);
    }
    item.data = (unsigned char *)b.data;
    item.len = b.len;
    char where[300];
    snprintf(where, sizeof where, "speaker clip '%.250s'", path);
    sipp_status st = sipp_mmproj_audio_bitmap(g->states[0].mmproj, &item, where, out, err);
    sipp_buf_free(&b);
    return st;
}

static int thread_count(int threads) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return threads > 0 ? threads : (cores > 0 ? (int)cores : 1);
}

/* The backbone's context parameters as llama-tts's common_init_from_params makes them, on sipp's
 * backend policy. */
static struct llama_context_params context_params(const sipp_tts_gen *g, const sipp_tts_params *p) {
    struct llama_context_params cp = sipp_model_context_params(g->model);
    cp.n_ctx = 0; /* the model's training context, as llama-tts */
    cp.n_batch = TTS_N_BATCH;
    cp.n_seq_max = 1;
    cp.embeddings = true;
    cp.n_threads = cp.n_threads_batch = thread_count(p->n_threads);
    return cp;
}

/* State s's projector context, its buffers counted into g->memory. */
static sipp_status make_projector(sipp_tts_gen *g, const sipp_tts_params *p, gen_state *s, char *err) {
    sipp_memory mem = {0};
    sipp_status st =
        sipp_mmproj_load(p->mmproj, g->model->lm, g->model->path, !g->model->cpu_only, g->model->flash_attn,
                         thread_count(p->n_threads), &mem, &s->mmproj, err);
    if (st == SIPP_OK) sipp_memory_merge(&g->memory, &mem);
    return st;
}

/* A backbone context for state s, or with batch_frames the one shared by every state (made once, a
 * sequence per state), its buffers counted into g->memory. */
static sipp_status make_context(sipp_tts_gen *g, const sipp_tts_params *p, gen_state *s, char *err) {
    struct llama_context_params cp = context_params(g, p);
    bool shared = p->batch_frames && !strcmp(g->pipeline, QWEN3TTS);
    if (shared && g->backbone) return SIPP_OK;
    sipp_memory mem = {0};
    sipp_status st = SIPP_OK;
    sipp_buffers_capture(&mem);
    if (shared) {
        if (cp.n_ctx == 0) cp.n_ctx = (uint32_t)llama_model_n_ctx_train(g->model->lm);
        st = sipp_tts_backbone_new(g->model, cp, g->n_states, &g->backbone, err);
    } else if (!(s->lctx = llama_init_from_model(g->model->lm, cp))) {
        st = sipp_fail(err, SIPP_ERR_BACKEND, "could not make a context for '%s'", g->model->path);
    }
    sipp_buffers_capture(NULL);
    if (st == SIPP_OK) sipp_memory_merge(&g->memory, &mem);
    return st;
}

/* The context a state's helper decodes into. */
static struct llama_context *state_context(const sipp_tts_gen *g, const gen_state *s) {
    return g->backbone ? sipp_tts_backbone_context(g->backbone) : s->lctx;
}

static sipp_status check_pair(const sipp_tts_params *p, char *err) {
    if (!p->mmproj || !*p->mmproj)
        return sipp_fail(
            err, SIPP_ERR_INVALID_ARGUMENT,
            "'%s' needs its projector: give the pair's mmproj file (sipp speak MODEL --mmproj FILE)",
            p->model);
    return SIPP_OK;
}

/* What the first state's projector generates; false with err when it is not a speech projector. */
static sipp_status check_pipeline(sipp_tts_gen *g, const sipp_tts_params *p, char *err) {
    if (!(g->pipeline = sipp_mmproj_gen_audio(g->states[0].mmproj, &g->rate)))
        return sipp_fail(
            err, SIPP_ERR_MODEL,
            "projector '%s' generates no audio: a speech pair is a Qwen3-TTS or Pocket TTS backbone with "
            "its own mmproj",
            p->mmproj);
    if (g->rate <= 0)
        return sipp_fail(err, SIPP_ERR_MODEL, "projector '%s' declares no sample rate", p->mmproj);
    if (p->batch_frames && strcmp(g->pipeline, QWEN3TTS) != 0)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                         "batch_frames: only a Qwen3-TTS pair batches its frames; '%s' is a %s projector",
                         p->mmproj, g->pipeline);
    return SIPP_OK;
}

/* Qwen3-TTS: the names of the vocabulary's language tokens, into g->languages. */
static void find_languages(sipp_tts_gen *g) {
    const struct llama_vocab *v = llama_model_get_vocab(g->model->lm);
    const size_t pre = strlen(LANGUAGE_TOKEN), post = strlen(LANGUAGE_TOKEN_END);
    size_t used = 0;
    for (llama_token t = 0; t < llama_vocab_n_tokens(v); t++) {
        const char *s = llama_vocab_get_text(v, t);
        const size_t n = strlen(s);
        if (n > pre + post && !strncmp(s, LANGUAGE_TOKEN, pre) && !strcmp(s + n - post, LANGUAGE_TOKEN_END) &&
            used < sizeof g->languages)
            used += (size_t)snprintf(g->languages + used, sizeof g->languages - used, "%s%.*s",
                                     used ? ", " : "", (int)(n - pre - post), s + pre);
    }
}

bool sipp_tts_gen_language_ok(const sipp_tts_gen *g, const char *language, char *why, size_t n) {
    if (!language || !*language) return true;
    if (strcmp(g->pipeline, QWEN3TTS) != 0) {
        snprintf(why, n, "language '%s': a %s model takes no language (it speaks its own); leave it out",
                 language, g->pipeline);
        return false;
    }
    const char *name = language;
    for (size_t i = 0; i < sizeof LANGUAGE_CODES / sizeof *LANGUAGE_CODES; i++)
        if (!strcmp(language, LANGUAGE_CODES[i][0])) name = LANGUAGE_CODES[i][1];
    const size_t len = strlen(name);
    for (const char *p = g->languages; (p = strstr(p, name)) != NULL; p += len)
        if ((p == g->languages || p[-1] == ' ') && (p[len] == ',' || !p[len])) return true;
    snprintf(
        why, n,
        "language '%s' is not one this Qwen3-TTS model speaks (its languages: %s); give one of those, or "
        "its code (en, zh, de, ...)",
        language, g->languages[0] ? g->languages : "none");
    return false;
}

static sipp_status load_states(sipp_tts_gen *g, const sipp_tts_params *p, char *err) {
    g->n_states = p->n_parallel > 0 ? p->n_parallel : 1;
    if (!(g->states = calloc((size_t)g->n_states, sizeof *g->states)))
        return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    sipp_model_memory(g->model, &g->memory);
    sipp_status st = SIPP_OK;
    for (int i = 0; st == SIPP_OK && i < g->n_states; i++) {
        gen_state *s = &g->states[i];
        st = make_projector(g, p, s, err);
        if (st == SIPP_OK && i == 0) st = check_pipeline(g, p, err);
        if (st == SIPP_OK) st = make_context(g, p, s, err);
        if (st == SIPP_OK) st = sipp_gen_audio_new(s->mmproj, state_context(g, s), &s->gen, err);
    }
    return st;
}

/* speaker_names[i] speaks like speaker_paths[i]: checked, then each clip loaded. */
static sipp_status load_named_speakers(sipp_tts_gen *g, const sipp_tts_params *p, char *err) {
    if (!p->speaker_names || !p->speaker_paths)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                         "n_speakers is %d but the names or paths are missing", p->n_speakers);
    for (int i = 0; i < p->n_speakers; i++) {
        const char *name = p->speaker_names[i];
        if (!name || !*name || !strcmp(name, SIPP_TTS_DEFAULT_VOICE) || !p->speaker_paths[i])
            return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                             "speaker %d: give a name other than \"%s\" and a clip", i,
                             SIPP_TTS_DEFAULT_VOICE);
        for (int j = 0; j < i; j++)
            if (!strcmp(name, p->speaker_names[j]))
                return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "speaker '%s' is named twice", name);
    }
    if (!(g->speakers = calloc((size_t)p->n_speakers, sizeof *g->speakers)))
        return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    sipp_status st = SIPP_OK;
    for (int i = 0; st == SIPP_OK && i < p->n_speakers; i++) {
        named_speaker *s = &g->speakers[g->n_speakers++];
        st = (s->name = strdup(p->speaker_names[i])) ? load_speaker(g, p->speaker_paths[i], &s->clip, err)
                                                     : sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    }
    return st;
}

const char *sipp_tts_gen_voice(const sipp_tts_gen *g, size_t i) {
    if (i == 0) return SIPP_TTS_DEFAULT_VOICE;
    return i <= (size_t)g->n_speakers ? g->speakers[i - 1].name : NULL;
}

/* The reference clip of voice (NULL or "default": the target's speaker, if any). */
static struct mtmd_bitmap *speaker_of(const sipp_tts_gen *g, const char *voice) {
    for (int i = 0; voice && i < g->n_speakers; i++)
        if (!strcmp(g->speakers[i].name, voice)) return g->speakers[i].clip;
    return g->speaker;
}

sipp_status sipp_tts_gen_load(const sipp_tts_params *p, sipp_tts_gen **out, char *err) {
    *out = NULL;
    sipp_status st = check_pair(p, err);
    if (st != SIPP_OK) return st;
    sipp_tts_gen *g = calloc(1, sizeof *g);
    if (!g) return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->free_state, NULL);
    sipp_model_params mp = sipp_model_default_params();
    mp.backend = p->backend;
    st = sipp_mmproj_check_file(p->mmproj, NULL, err); /* before the backbone's weights are read */
    if (st == SIPP_OK) st = sipp_model_load(p->model, &mp, &g->model, err);
    if (st == SIPP_OK) st = load_states(g, p, err);
    if (st == SIPP_OK && p->speaker) st = load_speaker(g, p->speaker, &g->speaker, err);
    if (st == SIPP_OK && p->n_speakers > 0) st = load_named_speakers(g, p, err);
    if (st == SIPP_OK && !strcmp(g->pipeline, QWEN3TTS)) find_languages(g);
    if (st != SIPP_OK) {
        sipp_tts_gen_free(g);
        return st;
    }
    *out = g;
    return SIPP_OK;
}

/* The model's suppressed tokens (tokenizer.ggml.suppress_tokens: Qwen3-TTS keeps its backbone to
 * codec tokens and the end this way) as a logit bias of minus infinity, as llama.cpp's common sampler
 * puts them first in its chain; NULL when the model has none. */
static struct llama_sampler *suppress_sampler(const struct llama_vocab *vocab) {
    int32_t n = 0;
    const llama_token *ids = llama_vocab_get_suppress_tokens(vocab, &n);
    if (n <= 0) return NULL;
    llama_logit_bias *bias = malloc((size_t)n * sizeof *bias);
    if (!bias) return NULL;
    for (int32_t i = 0; i < n; i++)
        bias[i] = (llama_logit_bias){.token = ids[i], .bias = -INFINITY};
    struct llama_sampler *s = llama_sampler_init_logit_bias(llama_vocab_n_tokens(vocab), n, bias);
    free(bias);
    return s;
}

/* llama.cpp common's default chain, in its order, with llama-tts's values; the samplers that are off
 * at these values (DRY, top-n-sigma, typical, XTC) change nothing and are left out. */
static struct llama_sampler *make_sampler(const sipp_tts_gen *g, const sipp_speak_options *o) {
    const struct llama_vocab *vocab = llama_model_get_vocab(g->model->lm);
    struct llama_sampler *s = llama_sampler_chain_init(llama_sampler_chain_default_params());
    if (!s) return NULL;
    struct llama_sampler *suppress = suppress_sampler(vocab);
    if (suppress) llama_sampler_chain_add(s, suppress);
    llama_sampler_chain_add(s, llama_sampler_init_penalties(llama_vocab_n_tokens(vocab), TTS_PENALTY_LAST_N,
                                                            TTS_PENALTY_REPEAT, 0.0f, 0.0f));
    llama_sampler_chain_add(s, llama_sampler_init_top_k(o->top_k > 0 ? o->top_k : TTS_TOP_K));
    llama_sampler_chain_add(s, llama_sampler_init_top_p(o->top_p > 0 ? o->top_p : TTS_TOP_P, 0));
    llama_sampler_chain_add(s, llama_sampler_init_min_p(TTS_MIN_P, 0));
    llama_sampler_chain_add(s, llama_sampler_init_temp_ext(TTS_TEMP, 0.0f, 1.0f));
    llama_sampler_chain_add(s, llama_sampler_init_dist(o->seed));
    return s;
}

static bool cancelled(const sipp_speak_options *o) {
    return o->cancel && __atomic_load_n(o->cancel, __ATOMIC_ACQUIRE);
}

/* The frames of one piece, after its prompt: llama-tts's loop. */
static sipp_status frames(gen_state *g, struct llama_sampler *smpl, const sipp_speak_options *o, char *err) {
    sipp_speak_usage *u = o->usage;
    int max = o->max_frames > 0 ? o->max_frames : TTS_MAX_FRAMES;
    llama_token sampled = llama_sampler_sample(smpl, g->lctx, -1);
    const float *h = llama_get_embeddings_ith(g->lctx, -1);
    bool stop = false;
    for (int n = 0; !stop && n < max; n++) {
        if (cancelled(o)) return sipp_fail(err, SIPP_ERR_CANCELLED, "speech cancelled");
        const float *next = NULL;
        sipp_status st = sipp_gen_audio_step(g->gen, sampled, h, &next, &stop, err);
        if (st != SIPP_OK) return st;
        if (!next) break; /* stopped without a frame */
        if (u) u->output_tokens++;
        h = next;
        sampled = llama_sampler_sample(smpl, g->lctx, -1);
    }
    return SIPP_OK;
}

/* llama-tts's WAV writer's conversion: clamped to [-1, 1], times 32767, truncated toward zero. */
static sipp_status to_pcm16(const float *pcm, size_t n, int16_t **out, size_t *n_out, char *err) {
    *out = malloc(n ? n * sizeof **out : 1);
    if (!*out) return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory for %zu samples", n);
    for (size_t i = 0; i < n; i++) {
        float v = pcm[i] < -1.0f ? -1.0f : pcm[i] > 1.0f ? 1.0f : pcm[i];
        (*out)[i] = (int16_t)(v * 32767.0f);
    }
    *n_out = n;
    return SIPP_OK;
}

/* The helper's own loop in the state's context, as llama-tts runs it. */
static sipp_status speak_alone(gen_state *state, const struct mtmd_helper_gen_audio_inp *inp,
                               struct llama_sampler *smpl, const sipp_speak_options *o, int16_t **out,
                               size_t *n, char *err) {
    llama_memory_t mem = llama_get_memory(state->lctx);
    llama_memory_clear(mem, true);
    sipp_status st = sipp_gen_audio_start(state->gen, inp, TTS_N_BATCH, err);
    if (st == SIPP_OK && o->usage) o->usage->input_tokens += (uint64_t)(llama_memory_seq_pos_max(mem, 0) + 1);
    if (st == SIPP_OK) st = frames(state, smpl, o, err);
    const float *pcm;
    size_t n_pcm;
    if (st == SIPP_OK) st = sipp_gen_audio_output(state->gen, &pcm, &n_pcm, err);
    if (st == SIPP_OK) st = to_pcm16(pcm, n_pcm, out, n, err);
    return st;
}

/* batch_frames: the state's sequence of the shared backbone, its frames batched with other calls'. */
static sipp_status speak_batched(sipp_tts_gen *g, gen_state *state,
                                 const struct mtmd_helper_gen_audio_inp *inp, struct llama_sampler *smpl,
                                 const sipp_speak_options *o, int16_t **out, size_t *n, char *err) {
    float *pcm = NULL;
    size_t n_pcm = 0;
    int max = o->max_frames > 0 ? o->max_frames : TTS_MAX_FRAMES;
    sipp_status st = sipp_tts_batch_speak(g->backbone, inp->seq_id, state->gen, inp, smpl, max, o->cancel,
                                          &pcm, &n_pcm, o->usage, err);
    if (st == SIPP_OK) st = to_pcm16(pcm, n_pcm, out, n, err);
    free(pcm);
    return st;
}

static sipp_status speak_in(sipp_tts_gen *g, gen_state *state, const char *text, size_t len,
                            const sipp_speak_options *o, int16_t **out, size_t *n, char *err) {
    struct mtmd_helper_gen_audio_inp inp = {
        .seq_id = g->backbone ? (llama_seq_id)(state - g->states) : 0,
        .prompt = text,
        .prompt_len = len,
        .speaker_ref = speaker_of(g, o->voice),
        .lang = o->language && *o->language ? o->language : TTS_LANGUAGE,
        .top_k = o->top_k > 0 ? o->top_k : TTS_TOP_K,
        .top_p = o->top_p > 0 ? o->top_p : TTS_TOP_P,
        .seed = o->seed,
        .out_type = MTMD_HELPER_GEN_AUDIO_OUTTYPE_PCM,
    };
    sipp_status st = sipp_gen_audio_reseed(state->gen, o->seed, err);
    if (st != SIPP_OK) return st;
    struct llama_sampler *smpl = make_sampler(g, o);
    if (!smpl) return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    st = g->backbone ? speak_batched(g, state, &inp, smpl, o, out, n, err)
                     : speak_alone(state, &inp, smpl, o, out, n, err);
    llama_sampler_free(smpl);
    return st;
}

/* A free state, taken; NULL when the call was cancelled while it waited for one. */
static gen_state *take_state(sipp_tts_gen *g, const sipp_speak_options *o) {
    gen_state *s = NULL;
    pthread_mutex_lock(&g->mu);
    while (!s && !cancelled(o)) {
        for (int i = 0; !s && i < g->n_states; i++)
            if (!g->states[i].busy) s = &g->states[i];
        if (!s) {
            struct timespec ts;
            sipp_deadline_in(&ts, CLOCK_REALTIME, STATE_WAIT_MS);
            pthread_cond_timedwait(&g->free_state, &g->mu, &ts);
        }
    }
    if (s) s->busy = true;
    pthread_mutex_unlock(&g->mu);
    return s;
}

sipp_status sipp_tts_gen_speak(sipp_tts_gen *g, const char *text, size_t len, const sipp_speak_options *o,
                               int16_t **out, size_t *n, char *err) {
    *out = NULL;
    *n = 0;
    gen_state *state = take_state(g, o);
    if (!state) return sipp_fail(err, SIPP_ERR_CANCELLED, "speech cancelled");
    sipp_status st = speak_in(g, state, text, len, o, out, n, err);
    pthread_mutex_lock(&g->mu);
    state->busy = false;
    pthread_cond_signal(&g->free_state);
    pthread_mutex_unlock(&g->mu);
    return st;
}
