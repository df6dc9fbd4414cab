/*
 * tts.c: the tts kind, text to speech in this process (kinds.h), through libsipp's voice handle
 * (sipp_tts, sipp.h). Two recipes stand behind it:
 *   tts    a Qwen3-TTS or Pocket TTS pair (model + mmproj) generated through libmtmd as llama-tts
 *          does, with an optional reference clip of the voice to speak in (speaker = "FILE") and
 *          more voices, each a clip under a name (speakers = { alloy = "FILE", ... });
 *   flite  Debian's flite: no model file, its voices built in (voice = "slt" is the default).
 * Residency loads, counts and evicts it like any resident kind: load makes the handle (measured:
 * what the pair's weights and context took; flite holds nothing worth counting beyond a constant),
 * release frees it after its last use, estimate reads the pair's GGUF headers.
 *
 * It answers POST /v1/audio/speech (api/speech.c) and nothing else: a chat, completion or
 * embedding sent to it is a 400 naming the mismatch, before anything is loaded for it. Voices are
 * resolved before the load too: the target's own names (flite's voices; a pair's "default" and its
 * speakers), and
 * OpenAI's voice names through one table (below, and docs/speech.md).
 *
 * Several requests at once each call sipp_tts_speak on the one handle: flite's synthesis is
 * serialised process-wide (flite is not reentrant); a pair generates `parallel` requests at once,
 * each in a state of its own (a backbone context and a projector context, threads each), and more
 * wait for a free one.
 */
#include <stdio.h>
#include <string.h>

#include "gateway/kinds/kinds.h"

#define RECIPE_FLITE "flite"
#define FLITE_MODEL "flite"
#define PAIR_VOICE "default" /* the one voice of a GGUF pair (sipp_tts_voice_borrow) */
#define FLITE_BYTES                                                                                          \
    ((uint64_t)4 << 20) /* what a flite voice holds while it speaks: counted, not measured                   \
                         */
#define VOICE_LIST_SIZE 256

/* OpenAI's voice names and the flite voice each is spoken with (docs/speech.md has the same table):
 * the lighter voices go to slt (US English, female), the deeper ones to rms (US English, male), the
 * storytelling ones to awb (Scottish English, male) and the plain ones to kal16. A GGUF pair has one
 * voice, its speaker reference, which every name speaks with. */
static const struct {
    const char *openai, *flite;
} openai_voices[] = {
    {"alloy", "slt"},   {"ash", "rms"},   {"ballad", "awb"}, {"coral", "slt"}, {"echo", "kal16"},
    {"fable", "awb"},   {"nova", "slt"},  {"onyx", "rms"},   {"sage", "slt"},  {"shimmer", "slt"},
    {"verse", "kal16"}, {"marin", "slt"}, {"cedar", "rms"},
};

static bool is_flite(const gw_target_config *c) { return c->recipe && strcmp(c->recipe, RECIPE_FLITE) == 0; }

/* The handle's parameters for c (flite: no model file). */
static sipp_tts_params tts_params(const gw_target_config *c) {
    sipp_tts_params p = sipp_tts_default_params();
    p.model = is_flite(c) ? FLITE_MODEL : c->model_path;
    p.mmproj = is_flite(c) ? NULL : c->mmproj;
    p.speaker = c->speaker;
    p.voice = c->voice;
    p.backend = c->backend;
    p.n_threads = c->threads;
    p.n_parallel = c->parallel;
    p.batch_frames = c->batch_frames;
    p.speaker_names = (const char *const *)c->speaker_names;
    p.speaker_paths = (const char *const *)c->speaker_paths;
    p.n_speakers = c->n_speakers;
    return p;
}

static bool tts_load(gw_server *srv, const gw_target_config *c, gw_loaded *out, sipp_memory *measured,
                     bool *wait, char *err) {
    (void)srv;
    *wait = false;
    sipp_tts_params p = tts_params(c);
    sipp_tts *tts = NULL;
    if (sipp_tts_new(&p, &tts, err) != SIPP_OK) return false;
    sipp_tts_memory(tts, measured);
    if (is_flite(c)) measured->host_bytes = FLITE_BYTES;
    out->handle = tts;
    return true;
}

static void tts_release(gw_loaded *l) {
    sipp_tts_free(l->handle);
    l->handle = NULL;
}

/* A pair: its backbone's and projector's tensors and one context at the backbone's own size, from
 * the headers. flite: its constant. */
static sipp_status tts_estimate(const gw_target_config *c, int ctx_size, sipp_memory *out, char *err) {
    memset(out, 0, sizeof *out);
    if (is_flite(c)) {
        out->host_bytes = FLITE_BYTES;
        return SIPP_OK;
    }
    sipp_model_params mp = sipp_model_default_params();
    mp.backend = c->backend;
    mp.mmproj = c->mmproj;
    sipp_engine_params ep = sipp_engine_default_params();
    ep.ctx_size = ctx_size;
    ep.parallel = 1;
    sipp_status st = sipp_memory_estimate(c->model_path, &mp, &ep, out, err);
    /* each of its parallel states is a context and a projector: counted whole, an upper bound */
    int n = c->parallel > 0 ? c->parallel : 1;
    out->host_bytes *= (uint64_t)n;
    for (int i = 0; i < out->n_devices; i++)
        out->devices[i].bytes *= (uint64_t)n;
    return st;
}

/* A request of another API: this target speaks only. */
static bool refuse_chat(gw_call *call, const gw_target *t) {
    gw_reply_error(call, GW_E_INVALID_FIELD,
                   "model '%s' is a text-to-speech target (recipe \"%s\"): it speaks, and does not chat, "
                   "complete or embed; send its text to POST /v1/audio/speech, or name a chat model here",
                   t->cfg->name, t->cfg->recipe ? t->cfg->recipe : "tts");
    return false;
}

static void tts_answer(gw_call *call, const gw_dispatch *d, gw_target *t, gw_gen *g, json_t *sent) {
    (void)d, (void)g, (void)sent;
    refuse_chat(call, t);
}

static bool tts_media_ready(gw_call *call, const gw_target *t, gw_gen *g) {
    (void)g;
    return refuse_chat(call, t);
}

/* The voices a target of config c speaks with, without loading it: a flite handle holds nothing (its
 * voices are built into the library), so one is made to list them; a pair has "default" and its
 * configured speakers. */
static sipp_tts *voice_lister(const gw_target_config *c) {
    sipp_tts_params p = sipp_tts_default_params();
    p.model = FLITE_MODEL;
    sipp_tts *flite = NULL;
    char err[SIPP_ERROR_SIZE];
    return is_flite(c) && sipp_tts_new(&p, &flite, err) == SIPP_OK ? flite : NULL;
}

static const char *voice_at(const sipp_tts *flite, const gw_target_config *c, size_t i) {
    if (flite) return sipp_tts_voice_borrow(flite, i);
    if (i == 0) return PAIR_VOICE;
    return i <= (size_t)c->n_speakers ? c->speaker_names[i - 1] : NULL;
}

/* "slt, kal, ..." */
static void voice_names(const sipp_tts *flite, const gw_target_config *c, char *out, size_t n) {
    size_t used = 0;
    out[0] = 0;
    for (size_t i = 0; voice_at(flite, c, i) && used < n; i++)
        used += (size_t)snprintf(out + used, n - used, "%s%s", i ? ", " : "", voice_at(flite, c, i));
}

/* The target's own name for asked: one of its voices, or OpenAI's name mapped; NULL when neither. */
static const char *own_voice(const sipp_tts *flite, const gw_target_config *c, const char *asked) {
    for (size_t i = 0; voice_at(flite, c, i); i++)
        if (strcmp(voice_at(flite, c, i), asked) == 0) return voice_at(flite, c, i);
    for (size_t i = 0; i < sizeof openai_voices / sizeof *openai_voices; i++)
        if (strcmp(openai_voices[i].openai, asked) == 0) return flite ? openai_voices[i].flite : PAIR_VOICE;
    return NULL;
}

static bool tts_speech_voice(const gw_target *t, const char *asked, char *voice, size_t n, char *err,
                             size_t en) {
    voice[0] = 0;
    if (!asked || !*asked) return true;
    sipp_tts *flite = voice_lister(t->cfg);
    const char *own = own_voice(flite, t->cfg, asked);
    if (own) sipp_strlcpy(voice, own, n);
    if (!own) {
        char names[VOICE_LIST_SIZE];
        voice_names(flite, t->cfg, names, sizeof names);
        snprintf(err, en,
                 "'voice': '%.64s' is not a voice of model '%s' (its voices: %s; OpenAI's names alloy, ash, "
                 "ballad, coral, echo, fable, nova, onyx, sage, shimmer, verse, marin and cedar map to them: "
                 "docs/speech.md)",
                 asked, t->cfg->name, names);
    }
    sipp_tts_free(flite);
    return own != NULL;
}

static sipp_status tts_speak(gw_target *t, const char *text, const sipp_speak_options *o, char *err) {
    sipp_tts *tts = t->handle;
    sipp_status st = sipp_tts_speak(tts, text, o, NULL, NULL, NULL);
    if (st != SIPP_OK) snprintf(err, SIPP_ERROR_SIZE, "%s", sipp_tts_last_error(tts));
    return st;
}

/* Its residency, capabilities ["speech"], recipe and voices (under "sipp" and "voices"). */
static void tts_describe_model(gw_call *call, gw_target *t, const gw_target_view *v, json_t *o) {
    json_object_set_new(v->residency, "recipe", json_string(is_flite(t->cfg) ? RECIPE_FLITE : "tts"));
    json_object_set(o, "sipp", v->residency);
    json_object_set(o, "state", json_object_get(v->residency, "state"));
    json_object_set_new(o, "capabilities", json_pack("[s]", "speech"));
    sipp_tts *flite = voice_lister(t->cfg);
    json_t *voices = json_array();
    for (size_t i = 0; voice_at(flite, t->cfg, i); i++)
        json_array_append_new(voices, json_string(voice_at(flite, t->cfg, i)));
    sipp_tts_free(flite);
    json_object_set_new(o, "voices", voices);
}

static json_t *tts_capabilities(gw_call *call, gw_target *t, const gw_target_view *v) {
    (void)call, (void)t, (void)v;
    return json_pack("[s]", "speech");
}

/* Where it runs: the pair's backbone on its backend; flite on the CPU. */
static void tts_describe_backend(gw_server *srv, gw_target *t, const gw_target_view *v, json_t *o) {
    (void)srv;
    json_object_set_new(o, "parallel", json_integer(is_flite(t->cfg) ? 1 : t->cfg->parallel));
    json_object_set_new(o, "requested_backend", json_string(is_flite(t->cfg) ? "cpu" : t->cfg->backend));
    json_object_set_new(o, "recipe", json_string(is_flite(t->cfg) ? RECIPE_FLITE : "tts"));
    if (*v->why) json_object_set_new(o, "error", json_string(v->why));
}

const gw_kind gw_kind_tts = {
    .name = "tts",
    .type_name = "local",
    .resident = true,
    .answer = tts_answer,
    .media_ready = tts_media_ready,
    .describe_backend = tts_describe_backend,
    .describe_model = tts_describe_model,
    .capabilities = tts_capabilities,
    .speech_voice = tts_speech_voice,
    .speak = tts_speak,
    .load = tts_load,
    .release = tts_release,
    .estimate = tts_estimate,
};
