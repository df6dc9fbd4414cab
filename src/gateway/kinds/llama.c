/*
 * llama.c: the llama kind, a GGUF model run in this process by libsipp's engine (kinds.h).
 *
 * A request generates (generate.c) or embeds (embed.c) on the target's engine, which residency.c
 * loads, counts and evicts. Images and audio need the target's projector (mmproj), whose header
 * says what it encodes: a clip for an image-only projector (or the reverse) is refused before the
 * model is loaded for it, and before anything is fetched (media_fetch.c).
 */
#include "gateway/kinds/kinds.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#define MAX_PLACEMENT 20 /* devices listed per target */
#define ENGINE_QUEUE_MIN 1
#define BACKEND_LIST_MAX 16

/* What a projector file takes, from its header (no load): false when the header cannot say (not a
 * projector, unreadable, or "auto" before the sidecar is found; the load then fails or libsipp
 * refuses the media, naming why). */
static bool projector_takes(const char *path, bool *vision, bool *audio) {
    char err[SIPP_ERROR_SIZE];
    sipp_gguf_info *info = calloc(1, sizeof *info);
    bool known = info && sipp_gguf_inspect(path, info, err) == SIPP_OK && info->projector;
    if (known) {
        *vision = info->projector_vision;
        *audio = info->projector_audio;
    }
    free(info);
    return known;
}

/* ---- residency: load, release, estimate ---------------------------------------------------- */

static bool load_progress(float progress, void *user) {
    (void)progress;
    gw_server *srv = user;
    return !atomic_load(&srv->draining);
}

static bool is_rpc(const gw_target_config *c) { return c->backend && strcmp(c->backend, "rpc") == 0; }

/* Waiting helps only when the servers are what is missing, not the rpc module itself. */
static bool rpc_compiled(void) {
    sipp_backend_info b[BACKEND_LIST_MAX];
    int n = sipp_backends_list(b, BACKEND_LIST_MAX);
    for (int i = 0; i < n && i < BACKEND_LIST_MAX; i++)
        if (strcmp(b[i].name, "rpc") == 0) return b[i].compiled;
    return false;
}

#define GW_LORA_MAX_PARAMS 64 /* the config's limit */

/* A target's lora list as libsipp takes it, in out (room for cap). */
static const sipp_lora_adapter *lora_params(const gw_target_config *c, sipp_lora_adapter *out, size_t cap,
                                            size_t *n) {
    *n = c->n_lora < cap ? c->n_lora : cap;
    for (size_t i = 0; i < *n; i++)
        out[i] = (sipp_lora_adapter){c->lora[i].path, c->lora[i].scale};
    return *n ? out : NULL;
}

/* Loads its model and starts its engine. *wait: the model did not load because an rpc target's
 * servers cannot be used yet. */
static bool llama_load(gw_server *srv, const gw_target_config *c, gw_loaded *out, sipp_memory *measured,
                       bool *wait, char *err) {
    *wait = false;
    sipp_model_params mp = sipp_model_default_params();
    mp.backend = c->backend;
    mp.flash_attn = c->flash_attn;
    mp.no_repack = !c->repack;
    mp.gpu_layers = c->gpu_layers;
    mp.rpc_servers = c->rpc_servers;
    mp.tensor_split = c->tensor_split;
    mp.mmproj = c->mmproj;
    mp.mmproj_offload = c->mmproj_offload;
    mp.progress = load_progress;
    mp.progress_user = srv;
    sipp_lora_adapter lora[GW_LORA_MAX_PARAMS];
    mp.lora = lora_params(c, lora, GW_LORA_MAX_PARAMS, &mp.n_lora);
    sipp_model *m = NULL;
    sipp_status st = sipp_model_load(c->model_path, &mp, &m, err);
    if (st != SIPP_OK) {
        *wait = is_rpc(c) && st == SIPP_ERR_BACKEND && rpc_compiled() && !atomic_load(&srv->draining);
        return false;
    }
    sipp_engine_params ep = sipp_engine_default_params();
    ep.ctx_size = c->ctx_size;
    ep.parallel = c->parallel;
    ep.threads = c->threads;
    ep.policy = c->policy;
    ep.speculative = c->speculative;
    ep.draft_max = c->draft_max;
    ep.draft_min = c->draft_min;
    ep.draft_model = c->draft_model;
    ep.draft_p_min = c->draft_p_min;
    ep.draft_cutoff = c->draft_cutoff;
    ep.cache_type_k = c->cache_type_k;
    ep.cache_type_v = c->cache_type_v;
    ep.pooling = c->pooling;
    int q = srv->cfg->max_queue + srv->cfg->max_concurrent_requests;
    ep.max_queued = q < ENGINE_QUEUE_MIN ? ENGINE_QUEUE_MIN : q;
    sipp_engine *e = NULL;
    if (sipp_engine_new(m, &ep, &e, err) != SIPP_OK) { /* the message names the model and the problem */
        sipp_model_free(m);
        return false;
    }
    sipp_schema_limits limits = srv->cfg->limits; /* [limits]: checked as each request is planned */
    limits.media_budget = srv->media_budget;
    sipp_engine_set_schema_limits(e, &limits);
    sipp_engine_memory(e, measured);
    out->model = m;
    out->engine = e;
    return true;
}

static void llama_release(gw_loaded *l) {
    sipp_engine_free(l->engine);
    sipp_model_free(l->model);
    l->engine = NULL;
    l->model = NULL;
}

static sipp_status llama_estimate(const gw_target_config *c, int ctx_size, sipp_memory *out, char *err) {
    sipp_model_params mp = sipp_model_default_params();
    mp.backend = c->backend;
    mp.gpu_layers = c->gpu_layers;
    mp.mmproj = c->mmproj;
    mp.mmproj_offload = c->mmproj_offload;
    sipp_engine_params ep = sipp_engine_default_params();
    ep.ctx_size = ctx_size;
    ep.parallel = c->parallel;
    ep.cache_type_k = c->cache_type_k;
    ep.cache_type_v = c->cache_type_v;
    sipp_lora_adapter lora[GW_LORA_MAX_PARAMS];
    mp.lora = lora_params(c, lora, GW_LORA_MAX_PARAMS, &mp.n_lora);
    return sipp_memory_estimate(c->model_path, &mp, &ep, out, err);
}

/* Whole GGUF files (sipp_model_check) and a readable projector. */
static bool llama_files_whole(const gw_target_config *c, char *err) {
    if (sipp_model_check(c->model_path, err) != SIPP_OK) return false;
    if (c->draft_model && sipp_model_check(c->draft_model, err) != SIPP_OK) return false;
    if (c->mmproj && access(c->mmproj, R_OK) != 0) {
        snprintf(err, SIPP_ERROR_SIZE, "cannot read the mmproj file %s: %s", c->mmproj, strerror(errno));
        return false;
    }
    return true;
}

static sipp_status llama_save_state(gw_loaded *l, const char *dir, uint64_t max_bytes, int *n, char *err) {
    return sipp_engine_save_slots(l->engine, dir, max_bytes, n, err);
}

static sipp_status llama_restore_state(gw_loaded *l, const char *dir, int *n, char *err) {
    return sipp_engine_restore_slots(l->engine, dir, n, err);
}

static void llama_describe_load(const gw_loaded *l, const gw_target_config *c, char *out, size_t n) {
    const sipp_backend_decision *b = sipp_model_backend(l->model);
    char ctx[64] = "";
    if (c->ctx_size > 0)
        snprintf(ctx, sizeof ctx, ", %d tokens of context%s", c->ctx_size,
                 c->ctx_auto ? " (ctx_size auto)" : "");
    snprintf(out, n, "%s (%s), %d slots%s", b->backend, b->devices, c->parallel, ctx);
}

/* ---- requests and listings ------------------------------------------------------------------ */

static void llama_answer(gw_call *call, const gw_dispatch *d, gw_target *t, gw_gen *g, json_t *sent) {
    if (d->local)
        d->local(call, t, g);
    else if (d->count_only)
        gw_count_tokens(call, t, g, d->fmt->renames);
    else if (g->api == GW_API_RERANK)
        gw_rerank(call, t, g);
    else if (!d->fmt)
        gw_embed(call, t, g, d->embed_fmt);
    else
        gw_generate(call, t, g, d->fmt);
}

static bool llama_media_ready(gw_call *call, const gw_target *t, gw_gen *g) {
    if (!g->n_images && !g->n_audio) return true;
    if (!t->cfg->mmproj) {
        gw_reply_error(call, GW_E_INVALID_FIELD,
                       "model '%s' takes text only here: the request has %zu image(s) and %zu audio clip(s), "
                       "and its target has no projector; set mmproj = \"FILE\" (the model's mmproj GGUF, or "
                       "\"auto\" for the one beside the model) in its [[targets]] section",
                       t->cfg->name, g->n_images, g->n_audio);
        return false;
    }
    bool vision = true, audio = true;
    if (!projector_takes(t->cfg->mmproj, &vision, &audio) ||
        !((g->n_images && !vision) || (g->n_audio && !audio)))
        return gw_media_fetch(call, g);
    const char *wanted = g->n_audio && !audio ? "audio" : "images";
    gw_reply_error(
        call, GW_E_INVALID_FIELD,
        "model '%s' takes no %s: its projector '%s' encodes %s only; set mmproj in its [[targets]] "
        "section to a projector with %s encoder (the mmproj GGUF of a model that takes %s), or "
        "send the request to a target that has one",
        t->cfg->name, wanted, t->cfg->mmproj, vision ? "images" : "audio",
        g->n_audio && !audio ? "an audio" : "a vision", wanted);
    return false;
}

/* Where a model's weights went, per device and host (sipp_model_placement). */
static json_t *placement_json(const sipp_model *m) {
    sipp_placement p[MAX_PLACEMENT];
    int n = sipp_model_placement(m, p, MAX_PLACEMENT);
    json_t *a = json_array();
    for (int i = 0; a && i < n && i < MAX_PLACEMENT; i++)
        json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:i, s:i, s:b, s:I}", "device", p[i].device,
                                           "layout", p[i].layout, "host", p[i].host, "first_layer",
                                           p[i].first_layer, "n_layers", p[i].n_layers, "output", p[i].output,
                                           "buffer_bytes", (json_int_t)p[i].buffer_bytes));
    return a;
}

/* Its placement: where its model runs, when it is loaded (else why it failed, if it did). */
static void llama_describe_backend(gw_server *srv, gw_target *t, const gw_target_view *v, json_t *o) {
    json_object_set_new(o, "requested_backend", json_string(t->cfg->backend));
    if (v->loaded) {
        const sipp_backend_decision *b = sipp_model_backend(t->model);
        json_object_set_new(o, "backend", json_string(b->backend));
        json_object_set_new(o, "reason", json_string(b->reason));
        json_object_set_new(o, "devices", json_string(b->devices));
        json_object_set_new(o, "gpu_layers", json_integer(b->gpu_layers));
        json_object_set_new(o, "placement", placement_json(t->model));
    } else if (*v->why) {
        json_object_set_new(o, "error", json_string(v->why));
    }
}

/* What it takes besides text: before a load, what the projector's header says (a projector it
 * cannot read: images); loaded, what the model says. */
static json_t *llama_capabilities(gw_call *call, gw_target *t, const gw_target_view *v) {
    json_t *caps = json_array();
    bool vision = false, audio = false;
    if (t->cfg->mmproj && !projector_takes(t->cfg->mmproj, &vision, &audio)) vision = true;
    if (v->loaded) {
        sipp_model_info info;
        sipp_model_get_info(t->model, &info);
        vision = info.vision;
        audio = info.audio;
    }
    if (vision) json_array_append_new(caps, json_string("vision"));
    if (audio) json_array_append_new(caps, json_string("audio"));
    return caps;
}

/* Its residency, capabilities and, loaded, how its chats are rendered (under "meta"). */
static void llama_describe_model(gw_call *call, gw_target *t, const gw_target_view *v, json_t *o) {
    json_object_set(o, "sipp", v->residency);
    json_object_set(o, "state", json_object_get(v->residency, "state"));
    json_object_set_new(o, "capabilities", llama_capabilities(call, t, v));
    if (v->loaded) {
        sipp_model_info info;
        sipp_model_get_info(t->model, &info);
        json_object_set_new(o, "meta", json_pack("{s:s}", "chat_template", info.chat_template));
    }
}

const gw_kind gw_kind_llama = {
    .name = "llama",
    .type_name = "local",
    .resident = true,
    .load = llama_load,
    .release = llama_release,
    .estimate = llama_estimate,
    .files_whole = llama_files_whole,
    .save_state = llama_save_state,
    .restore_state = llama_restore_state,
    .describe_load = llama_describe_load,
    .answer = llama_answer,
    .media_ready = llama_media_ready,
    .describe_backend = llama_describe_backend,
    .describe_model = llama_describe_model,
    .capabilities = llama_capabilities,
};
