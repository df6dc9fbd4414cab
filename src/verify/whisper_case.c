/*
 * whisper_case.c: sipp verify on a whisper.cpp model, the recipe whispercpp.
 *
 * A whisper model is two networks: the encoder turns 30 s of log-mel spectrogram into 1500 audio
 * states, and the decoder reads them through cross-attention at every position. Each backend encodes
 * one fixed clip and decodes the start-of-transcript prompt one token at a time (the speech layer's
 * probe, src/speech/whisper_probe.c), and the decoder's logits after each prompt token are compared
 * with the reference backend's by the same measures as a llama model's (distance.c), plus the largest
 * difference relative to the largest logit. whisper.cpp 1.9.1 exports no getter for the encoder's
 * output, so the encoder is checked through those logits: every row depends on all of its output,
 * and the first row (after <|startoftranscript|> alone) on little else.
 *
 * The clip is a file (--audio) or a fixed synthetic one: a voiced buzz (a 140 Hz fundamental and its
 * harmonics) in syllable-like bursts over quiet noise, made here from integer arithmetic and libm's
 * sin, so every run and every backend starts from the same samples, whose sha256 the manifest records.
 */
#include "verify/whisper_case.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model/audio_decode.h"
#include "util/util.h"
#include "util/whisper_info_json.h"
#include "verify/backend_run.h"
#include "verify/distance.h"

#define RATE 16000                   /* whisper's sample rate */
#define WINDOW_SECONDS 30.0          /* the encoder's window: a longer --audio is refused */
#define UNBOUNDED_SECONDS 1e9        /* measured first, refused above with verify's own reason */
#define MAX_AUDIO_BYTES (256u << 20) /* a 30 s clip of any format sipp decodes is far smaller */
#define CLIP_SECONDS 5
#define CLIP_F0 140.0 /* a speaking voice's fundamental, Hz */
#define CLIP_HARMONICS 12
#define CLIP_HARMONIC_SUM 3.103211 /* sum of 1/h for h = 1..12: the buzz's peak before scaling */
#define CLIP_SYLLABLE_HZ 4.0
#define CLIP_PEAK 0.5
#define CLIP_NOISE 0.01
#define LCG_MUL 1664525u /* Numerical Recipes' generator: the noise is the same everywhere */
#define LCG_ADD 1013904223u
#define LCG_BITS 24
#define TWO_PI 6.283185307179586

/* The built-in clip (see the top of the file). */
static float *synth_clip(size_t *n) {
    const size_t total = (size_t)RATE * CLIP_SECONDS;
    float *s = malloc(total * sizeof *s);
    if (!s) return NULL;
    uint32_t lcg = 1;
    for (size_t i = 0; i < total; i++) {
        const double t = (double)i / RATE;
        double buzz = 0;
        for (int h = 1; h <= CLIP_HARMONICS; h++)
            buzz += sin(TWO_PI * CLIP_F0 * h * t) / h;
        const double envelope = 0.5 - 0.5 * cos(TWO_PI * CLIP_SYLLABLE_HZ * t);
        lcg = lcg * LCG_MUL + LCG_ADD;
        const double noise = ((double)(lcg >> (32 - LCG_BITS)) / (1u << LCG_BITS) - 0.5) * 2 * CLIP_NOISE;
        s[i] = (float)(CLIP_PEAK * envelope * buzz / CLIP_HARMONIC_SUM + noise);
    }
    *n = total;
    return s;
}

static sipp_status read_audio(const char *path, unsigned char **data, size_t *n, char *err) {
    struct stat st;
    FILE *f = fopen(path, "rb");
    *data = NULL;
    *n = 0;
    if (!f || fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        sipp_status s = sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "--audio '%s' cannot be read: %s", path,
                                  f ? "not a regular file" : strerror(errno));
        if (f) fclose(f);
        return s;
    }
    if ((uint64_t)st.st_size > MAX_AUDIO_BYTES || st.st_size == 0) {
        fclose(f);
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                         "--audio '%s' is %lld bytes; give a clip of at most %g s", path,
                         (long long)st.st_size, WINDOW_SECONDS);
    }
    *data = malloc((size_t)st.st_size);
    *n = *data ? fread(*data, 1, (size_t)st.st_size, f) : 0;
    fclose(f);
    if (*data && *n == (size_t)st.st_size) return SIPP_OK;
    const sipp_status failed = *data ? SIPP_ERR_IO : SIPP_ERR_NO_MEMORY;
    free(*data);
    *data = NULL;
    return sipp_fail(err, failed, "--audio '%s' could not be read whole", path);
}

/* The file decoded as the transcriber decodes a clip (miniaudio, 16 kHz mono). */
static sipp_status file_clip(const char *path, float **samples, size_t *n_samples, char *err) {
    unsigned char *data = NULL;
    size_t n = 0;
    sipp_status st = read_audio(path, &data, &n, err);
    if (st != SIPP_OK) return st;
    sipp_audio_info info;
    char where[SIPP_PATH_MAX + 16];
    snprintf(where, sizeof where, "--audio %s", path);
    st = sipp_audio_probe(data, n, RATE, UNBOUNDED_SECONDS, where, &info, err);
    if (st == SIPP_OK && info.seconds > WINDOW_SECONDS)
        st = sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                       "--audio '%s' is %.1f s long; verify encodes one window of %g s: give a shorter clip",
                       path, info.seconds, WINDOW_SECONDS);
    if (st == SIPP_OK) st = sipp_audio_decode(data, n, RATE, WINDOW_SECONDS, where, samples, &info, err);
    free(data);
    if (st != SIPP_OK) return st;
    *n_samples = (size_t)info.frames;
    if (*n_samples > 0) return SIPP_OK;
    free(*samples);
    *samples = NULL;
    return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "--audio '%s' holds no samples", path);
}

sipp_status verify_whisper_clip(const char *audio, float **samples, size_t *n_samples, json_t **clip,
                                char *err) {
    *samples = NULL;
    *clip = NULL;
    sipp_status st = SIPP_OK;
    if (audio)
        st = file_clip(audio, samples, n_samples, err);
    else if (!(*samples = synth_clip(n_samples)))
        st = sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    if (st != SIPP_OK) return st;
    char sha[SIPP_SHA256_HEX], file_sha[SIPP_SHA256_HEX] = "";
    sipp_sha256_hex(*samples, *n_samples * sizeof **samples, sha);
    if (audio && sipp_store_file_sha256(audio, file_sha, NULL, err) != SIPP_OK) return SIPP_ERR_IO;
    *clip = json_pack("{s:s, s:s?, s:s?, s:I, s:i, s:f, s:s}", "source", audio ? "file" : "builtin", "path",
                      audio, "sha256", audio ? file_sha : NULL, "samples", (json_int_t)*n_samples, "rate",
                      RATE, "seconds", (double)*n_samples / RATE, "samples_sha256", sha);
    return *clip ? SIPP_OK : sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
}

json_t *verify_whisper_model_json(const char *path, char *err) {
    sipp_whisper_info w;
    char sha[SIPP_SHA256_HEX], abs[SIPP_PATH_MAX];
    if (sipp_whisper_inspect(path, &w, err) != SIPP_OK ||
        sipp_store_file_sha256(path, sha, NULL, err) != SIPP_OK)
        return NULL;
    json_t *model = json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:o}", "path", path, "abs_path",
                              realpath(path, abs) ? abs : path, "size_bytes", (json_int_t)w.file_bytes,
                              "sha256", sha, "format", "whisper.cpp", "recipe", SIPP_RECIPE_WHISPERCPP,
                              "whisper", sipp_whisper_info_json(&w));
    if (!model) sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    return model;
}

/* Against the reference: the same vocabulary and prompt, then the distance of every row. */
static sipp_status compare(const verify_whisper_result *ref, verify_whisper_result *out, char *err) {
    const sipp_whisper_probe *a = &ref->probe, *b = &out->probe;
    if (a->n_vocab != b->n_vocab || a->n_tokens != b->n_tokens ||
        memcmp(a->tokens, b->tokens, (size_t)a->n_tokens * sizeof *a->tokens) != 0)
        return sipp_fail(
            err, SIPP_ERR_INTERNAL,
            "backend '%s' read the model with %d tokens and a %d-token prompt, '%s' with %d and %d",
            out->backend, b->n_vocab, b->n_tokens, ref->backend, a->n_vocab, a->n_tokens);
    verify_metrics_add(&out->vs_ref, a->logits, b->logits, a->n_tokens, a->n_vocab);
    verify_metrics_finish(&out->vs_ref);
    const double peak = verify_max_magnitude(a->logits, (size_t)a->n_tokens * (size_t)a->n_vocab);
    out->max_rel = peak > 0 ? out->vs_ref.max_abs / peak : INFINITY;
    return SIPP_OK;
}

sipp_status verify_whisper_run(const verify_config *cfg, const char *backend, const float *samples,
                               size_t n_samples, const verify_whisper_result *ref, verify_whisper_result *out,
                               char *err) {
    char name[sizeof out->backend];
    const char *flash_attn = NULL;
    snprintf(out->backend, sizeof out->backend, "%s", backend);
    verify_backend_split(backend, name, sizeof name, &flash_attn);
    sipp_transcriber_params tp = sipp_transcriber_default_params();
    tp.backend = name;
    tp.threads = cfg->threads;
    if (flash_attn) tp.flash_attn = strcmp(flash_attn, "on") == 0;
    out->flash_attn = tp.flash_attn;
    verify_progress(cfg, backend, "loading the whisper model, encoding the clip, decoding the prompt");
    char why[SIPP_ERROR_SIZE];
    sipp_status st = sipp_whisper_probe_run(cfg->model_path, &tp, samples, n_samples, &out->probe, why);
    if (st != SIPP_OK) return sipp_fail(err, st, "backend '%s': %s", backend, why);
    out->ran = true;
    if (ref && (st = compare(ref, out, err)) != SIPP_OK) return st;
    verify_progress(cfg, backend, "done");
    return SIPP_OK;
}

void verify_whisper_result_free(verify_whisper_result *r) { sipp_whisper_probe_clear(&r->probe); }

json_t *verify_whisper_prompts_json(const verify_whisper_result *ref) {
    const sipp_whisper_probe *p = &ref->probe;
    json_t *tokens = json_array();
    char text[SIPP_WHISPER_PROBE_TOKENS * 32] = "";
    size_t used = 0;
    for (int i = 0; i < p->n_tokens; i++) {
        json_array_append_new(tokens, json_integer(p->tokens[i]));
        used += (size_t)snprintf(text + used, sizeof text - used, "%s", p->token_names[i]);
    }
    return json_pack("[{s:s, s:o}]", "text", text, "tokens", tokens);
}

/* After each prompt token: the top tokens and their logits. */
static json_t *top_json(const sipp_whisper_probe *p) {
    json_t *rows = json_array();
    for (int r = 0; r < p->n_tokens; r++) {
        int32_t ids[VERIFY_TOPK];
        float values[VERIFY_TOPK];
        verify_topk(p->logits + (size_t)r * (size_t)p->n_vocab, p->n_vocab, VERIFY_TOPK, ids, values);
        json_t *jids = json_array(), *jvals = json_array();
        for (int k = 0; k < VERIFY_TOPK; k++) {
            json_array_append_new(jids, json_integer(ids[k]));
            json_array_append_new(jvals, isfinite(values[k]) ? json_real(values[k]) : json_null());
        }
        json_array_append_new(
            rows, json_pack("{s:s, s:o, s:o}", "after", p->token_names[r], "ids", jids, "logits", jvals));
    }
    return rows;
}

static json_t *memory_json(const sipp_memory *m) {
    json_t *devs = json_object();
    for (int i = 0; i < m->n_devices; i++)
        json_object_set_new(devs, m->devices[i].name, json_integer((json_int_t)m->devices[i].bytes));
    return json_pack("{s:I, s:o, s:I, s:I, s:I}", "host_bytes", (json_int_t)m->host_bytes, "device_bytes",
                     devs, "weights_bytes", (json_int_t)m->weights_bytes, "kv_bytes", (json_int_t)m->kv_bytes,
                     "compute_bytes", (json_int_t)m->compute_bytes);
}

json_t *verify_whisper_result_json(const verify_whisper_result *r, bool is_ref) {
    const sipp_whisper_probe *p = &r->probe;
    json_t *b = json_pack("{s:{s:s, s:s, s:s}, s:s, s:b, s:f, s:f, s:f, s:o, s:o}", "device", "name",
                          p->device, "backend", p->backend, "reason", p->reason, "model", p->model_type,
                          "flash_attn", r->flash_attn, "load_ms", p->load_ms, "encode_ms", p->encode_ms,
                          "decode_ms", p->decode_ms, "memory", memory_json(&p->mem), "top", top_json(p));
    if (b && !is_ref) {
        json_t *v = verify_metrics_json(&r->vs_ref);
        json_object_set_new(v, "max_rel_diff", isfinite(r->max_rel) ? json_real(r->max_rel) : json_null());
        json_object_set_new(b, "vs_ref", v);
    }
    return b;
}
