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
 *   3. answer, as the target's kind does (kinds/): a llama target generates (generate.c) or embeds
 *      (embed.c); a remote target is either forwarded the client's body unchanged (upstream.c), for
 *      the APIs it speaks, or sent the translated chat and its answer rendered in the route's API
 *      (relay.c).
 *
 * A body sipp cannot decode is still forwarded when it names a target whose kind forwards bodies
 * (a remote one) on a pass-through route: the upstream may accept what sipp does not (tools,
 * logprobs, ...), and the client asked for that upstream. A translated body is sipp's own
 * translation, so its refusals stand.
 */
#include <stdlib.h>

#include "gateway/fleet/fleet.h"
#include "gateway/kinds/kinds.h"

/* Forwards a body that did not decode when it is a JSON object naming a target whose kind forwards
 * bodies as they came (once the call holds a use of it); false when it does not. */
static bool forward_undecoded(gw_call *call, const gw_dispatch *d, json_t *body) {
    const char *model = json_is_object(body) ? gw_body_model(body) : NULL;
    gw_target *t = model ? gw_target_find(call->srv, model) : NULL;
    const gw_kind *k = t ? gw_kind_of(t) : NULL;
    if (!k || !k->forward_undecoded) return false;
    if (gw_call_target(call, t->cfg->name)) k->forward_undecoded(call, d, t, body);
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

/* The call's body as JSON, or NULL after replying 400. */
static json_t *parse_call_body(gw_call *call) {
    char err[SIPP_ERROR_SIZE];
    json_t *root = gw_parse_body(call->body, call->body_len, err, sizeof err);
    if (!root) gw_reply_error(call, GW_E_INVALID_JSON, "%s", err);
    return root;
}

/* A translated chat as it stands before decoding, for a target whose kind sends it on (a remote
 * one); NULL for the others, and for the APIs remote servers speak (they get the client's body). */
static json_t *translated_copy(gw_call *call, const gw_dispatch *d, json_t *body) {
    if (!body || d->upstream_suffix) return NULL;
    const char *model = gw_body_model(body);
    gw_target *t = model ? gw_target_find(call->srv, model) : gw_targets_only(call->srv);
    return t && gw_kind_of(t)->sends_translated ? json_deep_copy(body) : NULL;
}

void gw_dispatch_run(gw_call *call, json_t *body, const gw_dispatch *d) {
    if (!body) body = parse_call_body(call);
    json_t *sent = translated_copy(call, d, body);
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
    if (t && gw_kind_of(t)->media_ready(call, t, &g))
        t = gw_call_target(call, g.model);
    else
        t = NULL;
    if (t) gw_kind_of(t)->answer(call, d, t, &g, sent);
    gw_gen_free(&g); /* what gw_generate or gw_relay did not take over */
    json_decref(sent);
}

void gw_dispatch_call(gw_call *call, gw_api api, const gw_format *fmt) {
    /* Each API's path below /v1, which is where base_url points; by gw_api. */
    static const char *const suffix[] = {
        [GW_API_CHAT] = "/chat/completions", [GW_API_COMPLETION] = "/completions",
        [GW_API_EMBEDDINGS] = "/embeddings", [GW_API_NATIVE_QUERY] = "/query",
        [GW_API_NATIVE_CHAT] = "/chat",      [GW_API_NATIVE_EMBED] = "/embed",
        [GW_API_RERANK] = "/rerank",
    };
    gw_dispatch_run(call, NULL, &(gw_dispatch){.api = api, .fmt = fmt, .upstream_suffix = suffix[api]});
}
