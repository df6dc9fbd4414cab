/*
 * dispatch.c: the one path from a route's request to its answer, for every route that generates
 * or embeds.
 *
 * A route hands over a body: the client's own (the OpenAI and native routes), or the
 * chat-completions body it translated its API into (the Responses, Messages and Ollama routes,
 * translate.c). Then, the same for all:
 *   1. decode it into a gw_gen (request_parse.c): every field used, refused naming it (in the
 *      client's API's names, through the format's renames), or named in sipp-ignored;
 *   2. resolve its target, with the caller's token scope; a chat with images or audio needs a
 *      local target with a projector (mmproj), which is checked before the model is loaded, and
 *      its http(s) images are fetched then too (media_fetch.c, [media] fetch);
 *   3. answer: a local target generates (generate.c) or embeds (embed.c); a remote target is
 *      either forwarded the client's body unchanged (upstream.c), for the APIs it speaks, or sent
 *      the translated chat and its answer rendered in the route's API (relay.c).
 *
 * A body sipp cannot decode is still forwarded when it names a remote target of a pass-through
 * route: the upstream may accept what sipp does not (tools, logprobs, ...), and the client asked
 * for that upstream. A translated body is sipp's own translation, so its refusals stand.
 */
#include <stdlib.h>

#include "gateway/admission.h"
#include "gateway/api_fields.h"
#include "gateway/dispatch.h"
#include "gateway/embed.h"
#include "gateway/media_fetch.h"
#include "gateway/relay.h"
#include "gateway/targets.h"
#include "gateway/upstream.h"

/* Forwards a body that did not decode when it names a remote target; false when it does not. */
static bool forward_undecoded(gw_call *call, const gw_dispatch *d, json_t *body) {
    const char *model = gw_body_model(body);
    gw_target *t = model ? gw_target_find(call->srv, model) : NULL;
    if (!t || t->cfg->type != GW_TARGET_REMOTE || !json_is_object(body)) return false;
    bool stream = gw_body_stream(body, d->api == GW_API_NATIVE_QUERY || d->api == GW_API_NATIVE_CHAT);
    if (gw_call_target(call, model)) gw_upstream_forward(call, t, d->upstream_suffix, body, stream);
    return true;
}

/* gw_decode, with the reply to a body that does not decode (body is borrowed). */
static bool decode(gw_call *call, const gw_dispatch *d, const gw_rename *renames, json_t *body, gw_gen *g) {
    gw_error_kind kind;
    char err[SIPP_ERROR_SIZE];
    if (gw_decode(d->api, body, g, &kind, err, sizeof err)) { /* g takes a reference of its own */
        for (size_t i = 0; i < g->n_ignored; i++)
            gw_ignored_add(call, g->ignored[i]);
        return true;
    }
    if (d->upstream_suffix && forward_undecoded(call, d, body)) return false;
    gw_rename_fields(err, sizeof err, renames);
    gw_reply_error(call, kind, "%s", err);
    return false;
}

bool gw_decode_tree(gw_call *call, gw_api api, json_t *chat, const gw_rename *renames, gw_gen *g) {
    bool ok = decode(call, &(gw_dispatch){.api = api}, renames, chat, g);
    json_decref(chat);
    return ok;
}

/* The call's body as JSON, or NULL after replying 400. */
static json_t *parse_call_body(gw_call *call) {
    char err[SIPP_ERROR_SIZE];
    json_t *root = gw_parse_body(call->body, call->body_len, err, sizeof err);
    if (!root) gw_reply_error(call, GW_E_INVALID_JSON, "%s", err);
    return root;
}

/* A decoded request on its target; g is taken over or freed by the caller. */
static void answer(gw_call *call, const gw_dispatch *d, gw_target *t, gw_gen *g, json_t *sent) {
    if (t->cfg->type == GW_TARGET_REMOTE && d->upstream_suffix)
        gw_upstream_forward(call, t, d->upstream_suffix, g->root, g->stream);
    else if (t->cfg->type == GW_TARGET_REMOTE)
        gw_relay(call, t, g, sent, d->api, d->fmt);
    else if (!d->fmt)
        gw_embed(call, t, g);
    else
        gw_generate(call, t, g, d->fmt);
}

void gw_dispatch_run(gw_call *call, json_t *body, const gw_dispatch *d) {
    if (!body) body = parse_call_body(call);
    /* A translated chat as it stands before decoding is what a remote target is sent. */
    json_t *sent = body && !d->upstream_suffix ? json_deep_copy(body) : NULL;
    gw_gen g;
    bool ok = body && decode(call, d, d->fmt ? d->fmt->renames : NULL, body, &g);
    json_decref(body);
    if (!ok) {
        if (d->route_free) d->route_free(d->route);
        json_decref(sent);
        return;
    }
    g.route = d->route;
    g.route_free = d->route_free;
    /* images and audio are checked against the target (and fetched) before it is loaded for them */
    gw_target *t = gw_call_lookup(call, g.model);
    if (t && gw_media_ready(call, t, &g))
        t = gw_call_target(call, g.model);
    else
        t = NULL;
    if (t) answer(call, d, t, &g, sent);
    gw_gen_free(&g); /* what gw_generate or gw_relay did not take over */
    json_decref(sent);
}

bool gw_projector_takes(const char *path, bool *vision, bool *audio) {
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

bool gw_media_ready(gw_call *call, const gw_target *t, gw_gen *g) {
    if (!g->n_images && !g->n_audio) return true;
    if (t->cfg->type != GW_TARGET_LOCAL) return true; /* a remote target decides */
    if (!t->cfg->mmproj) {
        gw_reply_error(call, GW_E_INVALID_FIELD,
                       "model '%s' takes text only here: the request has %zu image(s) and %zu audio clip(s), "
                       "and its target has no projector; set mmproj = \"FILE\" (the model's mmproj GGUF, or "
                       "\"auto\" for the one beside the model) in its [[targets]] section",
                       t->cfg->name, g->n_images, g->n_audio);
        return false;
    }
    /* the projector's header says what it encodes, so a clip for an image-only projector (or the
     * reverse) is refused before the model is loaded for it, and before anything is fetched */
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

void gw_dispatch_call(gw_call *call, gw_api api, const gw_format *fmt) {
    /* Each API's path below /v1, which is where base_url points; by gw_api. */
    static const char *const suffix[] = {
        [GW_API_CHAT] = "/chat/completions", [GW_API_COMPLETION] = "/completions",
        [GW_API_EMBEDDINGS] = "/embeddings", [GW_API_NATIVE_QUERY] = "/query",
        [GW_API_NATIVE_CHAT] = "/chat",      [GW_API_NATIVE_EMBED] = "/embed",
    };
    gw_dispatch_run(call, NULL, &(gw_dispatch){.api = api, .fmt = fmt, .upstream_suffix = suffix[api]});
}
