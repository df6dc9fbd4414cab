/*
 * whisper.c: the whisper kind, a whisper.cpp speech-to-text model run in this process by libsipp's
 * transcriber (kinds.h; recipe "whispercpp", taken from the file's ggml magic when the target does
 * not name it).
 *
 * Residency loads it like any resident target: a transcriber with `parallel` whisper states (that
 * many clips at once, each with `threads` threads), on the backend the load policy picks; its
 * memory is estimated from the file's header before the first load and measured after
 * (sipp_transcriber_memory: what libwhisper reported allocating), and it is evicted when idle like
 * a llama model. Its clips arrive through the audio routes (transcription.c), which call transcribe
 * with a use held; a chat, completion or embedding request is a 400 before anything is loaded.
 */
#include "gateway/kinds/kinds.h"

#include <string.h>

#define RECIPE "whispercpp"

static sipp_transcriber_params params_of(const gw_target_config *c) {
    sipp_transcriber_params p = sipp_transcriber_default_params();
    p.backend = c->backend;
    p.parallel = c->parallel > 0 ? c->parallel : 1;
    p.threads = c->threads;
    p.flash_attn = !(c->flash_attn && strcmp(c->flash_attn, "off") == 0);
    return p;
}

static bool whisper_load(gw_server *srv, const gw_target_config *c, gw_loaded *out, sipp_memory *measured,
                         bool *wait, char *err) {
    (void)srv;
    *wait = false;
    sipp_transcriber_params p = params_of(c);
    sipp_transcriber *tr = NULL;
    if (sipp_transcriber_new(c->model_path, &p, &tr, err) != SIPP_OK) return false;
    sipp_transcriber_memory(tr, measured);
    out->handle = tr;
    return true;
}

static void whisper_release(gw_loaded *l) {
    sipp_transcriber_free(l->handle);
    l->handle = NULL;
}

static sipp_status whisper_estimate(const gw_target_config *c, int ctx_size, sipp_memory *out, char *err) {
    (void)ctx_size; /* whisper's contexts are the model's own */
    sipp_transcriber_params p = params_of(c);
    return sipp_transcriber_estimate(c->model_path, &p, out, err);
}

/* A whisper.cpp model's header, read as the estimate reads it (on the CPU: no backend is needed). */
static bool whisper_files_whole(const gw_target_config *c, char *err) {
    sipp_transcriber_params p = params_of(c);
    p.backend = "cpu";
    sipp_memory m;
    return sipp_transcriber_estimate(c->model_path, &p, &m, err) == SIPP_OK;
}

static void whisper_describe_load(const gw_loaded *l, const gw_target_config *c, char *out, size_t n) {
    snprintf(out, n, "%s (%s), %d clip%s at once", sipp_transcriber_backend(l->handle),
             sipp_transcriber_backend_reason(l->handle), c->parallel > 1 ? c->parallel : 1,
             c->parallel > 1 ? "s" : "");
}

static sipp_status whisper_transcribe(gw_target *t, const unsigned char *clip, size_t n, const char *where,
                                      const sipp_transcribe_params *p, sipp_transcript **out, char *err) {
    return sipp_transcribe_bytes(t->handle, clip, n, where, p, out, err);
}

/* A request of another API: refused before the model is loaded for it. */
static bool whisper_media_ready(gw_call *call, const gw_target *t, gw_gen *g) {
    (void)g;
    return gw_reply_invalid_field(
        call,
        "model '%s' is a speech-to-text model (whisper.cpp): it takes audio clips at "
        "POST /v1/audio/transcriptions and /v1/audio/translations, not chats, "
        "completions or embeddings",
        t->cfg->name);
}

static void whisper_answer(gw_call *call, const gw_dispatch *d, gw_target *t, gw_gen *g, json_t *sent) {
    (void)d, (void)g, (void)sent;
    whisper_media_ready(call, t, g); /* not reached: media_ready refuses first */
}

static void whisper_describe_backend(gw_server *srv, gw_target *t, const gw_target_view *v, json_t *o) {
    json_object_set_new(o, "recipe", json_string(RECIPE));
    json_object_set_new(o, "requested_backend", json_string(t->cfg->backend));
    if (v->loaded) {
        json_object_set_new(o, "backend", json_string(sipp_transcriber_backend(t->handle)));
        json_object_set_new(o, "reason", json_string(sipp_transcriber_backend_reason(t->handle)));
    } else if (*v->why) {
        json_object_set_new(o, "error", json_string(v->why));
    }
}

static json_t *whisper_capabilities(gw_call *call, gw_target *t, const gw_target_view *v) {
    (void)call, (void)t, (void)v;
    return json_pack("[s, s]", "transcription", "translation");
}

/* Its residency, the recipe and what it does: transcription and translation, no chat. */
static void whisper_describe_model(gw_call *call, gw_target *t, const gw_target_view *v, json_t *o) {
    json_object_set_new(v->residency, "recipe", json_string(RECIPE));
    json_object_set(o, "sipp", v->residency);
    json_object_set(o, "state", json_object_get(v->residency, "state"));
    json_object_set_new(o, "recipe", json_string(RECIPE));
    json_object_set_new(o, "capabilities", whisper_capabilities(call, t, v));
}

const gw_kind gw_kind_whisper = {
    .name = "whisper",
    .type_name = "local",
    .resident = true,
    .load = whisper_load,
    .release = whisper_release,
    .estimate = whisper_estimate,
    .files_whole = whisper_files_whole,
    .describe_load = whisper_describe_load,
    .answer = whisper_answer,
    .media_ready = whisper_media_ready,
    .describe_backend = whisper_describe_backend,
    .describe_model = whisper_describe_model,
    .capabilities = whisper_capabilities,
    .transcribe = whisper_transcribe,
};
