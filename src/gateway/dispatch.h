/*
 * dispatch.h: the one path from a route's request to its answer (dispatch.c).
 */
#ifndef SIPP_GATEWAY_DISPATCH_H
#define SIPP_GATEWAY_DISPATCH_H

#include "gateway/connection.h"
#include "gateway/embed.h"
#include "gateway/field_names.h"
#include "gateway/generate.h"
#include "gateway/request_parse.h"

/* How a route's request is run. */
typedef struct gw_dispatch {
    gw_api api;
    const gw_format *fmt; /* how the answer is rendered; NULL: an embedding route (gw_embed) */
    /* An embedding route's own shape (Ollama's); NULL: OpenAI's or sipp's, by the API. */
    const gw_embed_format *embed_fmt;
    bool count_only; /* counts the chat's prompt tokens (Messages' count_tokens) instead of answering */
    /* A route of the API remote targets speak (OpenAI's, sipp's native): a remote target is sent
     * the client's body as it came, at base_url + upstream_suffix, and its answer passes through.
     * NULL: a route that translated its API into a chat (the body given to gw_dispatch); a remote
     * target is sent that chat and its answer is rendered with fmt (relay.c). */
    const char *upstream_suffix;
    void *route;                /* the route's rendering state, reached through gw_gen.route */
    void (*route_free)(void *); /* frees route however the request ends (NULL: nothing to free) */
} gw_dispatch;

/* Decodes body (stolen; NULL: the call's body, parsed here) for d->api, resolves its target with
 * the caller's scope, and forwards the request to a remote target or runs it on a local one.
 * Replies always. */
void gw_dispatch_run(gw_call *call, json_t *body, const gw_dispatch *d);

/* gw_dispatch_run for a route of an API remote targets speak (OpenAI's, sipp's native), on the
 * call's own body: a remote target is forwarded it at its own path (/v1/chat/completions at
 * base_url + "/chat/completions", /v1/query at base_url + "/query", ...). */
void gw_dispatch_call(gw_call *call, gw_api api, const gw_format *fmt);

/* Whether target t takes the images and audio g carries, made ready for it: a local target needs a
 * projector (mmproj in its config) whose header says it encodes that kind (read before a load), and
 * has g's http(s) images fetched into data: URLs (media_fetch.c); a remote one decides for itself,
 * and is sent the URLs. False after replying 400 naming the target and the setting, or the URL that
 * could not be fetched. */
bool gw_media_ready(gw_call *call, const gw_target *t, gw_gen *g);

/* What a projector file takes, from its header (no load): false when the header cannot say (not a
 * projector, unreadable, or "auto" before the sidecar is found; the load then fails or libsipp
 * refuses the media, naming why). */
bool gw_projector_takes(const char *path, bool *vision, bool *audio);

#endif
