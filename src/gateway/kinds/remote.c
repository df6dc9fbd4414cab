/*
 * remote.c: the remote kind, another OpenAI-compatible server (kinds.h).
 *
 * The APIs it speaks (OpenAI's, sipp's native) are forwarded the client's body as it came and
 * answer as the upstream answers (upstream.c), even a body sipp could not decode: the upstream may
 * accept what sipp does not, and the client asked for that upstream. The other APIs (Responses,
 * Messages, Ollama) send the chat they translated and render its answer (relay.c). Images and audio
 * are the upstream's to judge; their URLs are sent as they are.
 */
#include "gateway/kinds/kinds.h"

void gw_kind_remote_answer(gw_call *call, const gw_dispatch *d, gw_target *t, gw_gen *g, json_t *sent) {
    if (d->local)
        gw_reply_error(
            call, GW_E_INVALID_FIELD,
            "model '%s' is served by another server: %s reads a model's own tokenizer and template, "
            "so it needs a local target; name one",
            t->cfg->name, d->route_name ? d->route_name : call->path);
    else if (d->count_only || d->embed_fmt) /* a route of sipp's own over an API remote servers lack */
        gw_reply_error(call, GW_E_NOT_IMPLEMENTED,
                       "model '%s' is a remote (openai_compatible) target, which %s does not reach yet; "
                       "use /v1/chat/completions or /v1/embeddings for it",
                       t->cfg->name, call->path);
    else if (d->upstream_suffix)
        gw_upstream_forward(call, t, d->upstream_suffix, g->root, g->stream);
    else if (sent) /* kept by dispatch for a kind that sends_translated */
        gw_relay(call, t, g, sent, d->api, d->fmt);
    else
        gw_reply_error(call, GW_E_INTERNAL, "model '%s': the translated request was not kept", t->cfg->name);
}

void gw_kind_remote_forward(gw_call *call, const gw_dispatch *d, gw_target *t, json_t *body) {
    bool stream = gw_body_stream(body, d->api == GW_API_NATIVE_QUERY || d->api == GW_API_NATIVE_CHAT);
    gw_upstream_forward(call, t, d->upstream_suffix, body, stream);
}

bool gw_kind_remote_media(gw_call *call, const gw_target *t, gw_gen *g) { return true; }

/* The prober's state (upstream.c), no reason. */
static int remote_state(gw_server *srv, gw_target *t, char *why, size_t n) {
    *why = '\0';
    return atomic_load(&t->state);
}

static void remote_describe_backend(gw_server *srv, gw_target *t, const gw_target_view *v, json_t *o) {
    json_object_set_new(o, "replicas", gw_upstream_describe(t->upstream));
}

static void remote_describe_model(gw_call *call, gw_target *t, const gw_target_view *v, json_t *o) {}

const gw_kind gw_kind_remote = {
    .name = "remote",
    .type_name = "openai_compatible",
    .sends_translated = true,
    .answer = gw_kind_remote_answer,
    .forward_undecoded = gw_kind_remote_forward,
    .media_ready = gw_kind_remote_media,
    .state = remote_state,
    .describe_backend = remote_describe_backend,
    .describe_model = remote_describe_model,
};
