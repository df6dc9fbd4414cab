/*
 * llama.c: the llama kind, a GGUF model run in this process by libsipp's engine (kind.h).
 *
 * A request generates (generate.c) or embeds (embed.c) on the target's engine, which residency.c
 * loads, counts and evicts. Images and audio need the target's projector (mmproj), whose header
 * says what it encodes: a clip for an image-only projector (or the reverse) is refused before the
 * model is loaded for it, and before anything is fetched (media_fetch.c).
 */
#include "gateway/kinds/kind.h"

#include "gateway/embed.h"
#include "gateway/generate.h"
#include "gateway/media_fetch.h"
#include "gateway/residency.h"

#define MAX_PLACEMENT 20 /* devices listed per target */

static void llama_answer(gw_call *call, const gw_dispatch *d, gw_target *t, gw_gen *g, json_t *sent) {
    if (d->local)
        d->local(call, t, g);
    else if (g->api == GW_API_RERANK)
        gw_rerank(call, t, g);
    else if (!d->fmt)
        gw_embed(call, t, g);
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
    if (!gw_projector_takes(t->cfg->mmproj, &vision, &audio) ||
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

static int llama_state(gw_server *srv, gw_target *t, char *why, size_t n) {
    return gw_residency_state(srv, t, why, n);
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
static void llama_describe_backend(gw_server *srv, gw_target *t, int state, const char *why, json_t *o) {
    json_object_set_new(o, "requested_backend", json_string(t->cfg->backend));
    if (gw_residency_peek(srv, t)) {
        const sipp_backend_decision *b = sipp_model_backend(t->model);
        json_object_set_new(o, "backend", json_string(b->backend));
        json_object_set_new(o, "reason", json_string(b->reason));
        json_object_set_new(o, "devices", json_string(b->devices));
        json_object_set_new(o, "gpu_layers", json_integer(b->gpu_layers));
        json_object_set_new(o, "placement", placement_json(t->model));
        gw_residency_unpeek(srv, t);
    } else if (*why) {
        json_object_set_new(o, "error", json_string(why));
    }
}

/* What it takes besides text: before a load, what the projector's header says (a projector it
 * cannot read: images); loaded, what the model says. */
static json_t *llama_capabilities(gw_call *call, gw_target *t) {
    json_t *caps = json_array();
    bool vision = false, audio = false;
    if (t->cfg->mmproj && !gw_projector_takes(t->cfg->mmproj, &vision, &audio)) vision = true;
    if (gw_residency_peek(call->srv, t)) {
        sipp_model_info info;
        sipp_model_get_info(t->model, &info);
        vision = info.vision;
        audio = info.audio;
        gw_residency_unpeek(call->srv, t);
    }
    if (vision) json_array_append_new(caps, json_string("vision"));
    if (audio) json_array_append_new(caps, json_string("audio"));
    return caps;
}

/* Its residency, capabilities and, loaded, how its chats are rendered (under "meta"). */
static void llama_describe_model(gw_call *call, gw_target *t, json_t *o) {
    json_t *r = json_object();
    gw_residency_describe(call->srv, t, r);
    json_object_set_new(o, "sipp", r);
    json_object_set(o, "state", json_object_get(r, "state"));
    json_object_set_new(o, "capabilities", llama_capabilities(call, t));
    if (gw_residency_peek(call->srv, t)) {
        sipp_model_info info;
        sipp_model_get_info(t->model, &info);
        json_object_set_new(o, "meta", json_pack("{s:s}", "chat_template", info.chat_template));
        gw_residency_unpeek(call->srv, t);
    }
}

const gw_kind gw_kind_llama = {
    .name = "llama",
    .type_name = "local",
    .resident = true,
    .answer = llama_answer,
    .media_ready = llama_media_ready,
    .state = llama_state,
    .describe_backend = llama_describe_backend,
    .describe_model = llama_describe_model,
    .capabilities = llama_capabilities,
};
