/*
 * lora.c: a target's LoRA adapters, as llama-server's routes show and set them.
 *
 *   GET  /lora-adapters[?model=NAME]   [{"id", "path", "scale"}]: the adapters of the target (its
 *                                      config's lora list, ids in order) and their current scales
 *   POST /lora-adapters[?model=NAME]   body [{"id", "scale"}]: sets the scales of a loaded target's
 *                                      adapters for the requests that pick none (every adapter
 *                                      not listed at 0, as llama-server does); answers the new list
 *
 * Both need a token with admin = true when the server has tokens: the scales change what every
 * caller of the target gets. model may be left out when one target has adapters, or when there is
 * one target. The
 * adapters themselves come from the config (lora = [{path, scale}]) or `--lora FILE[:SCALE]`: a
 * request cannot name a file on the server. A request picks its own scales with "lora": [{id,
 * scale}] (chat completions, completions, /v1/chat, /v1/query).
 */
#include <math.h>
#include <string.h>

#include "gateway/api/api.h"
#include "gateway/kinds/kinds.h"
#include "gateway/request_parse.h"

/* The target named by ?model=, or the one local target with adapters; NULL after replying. With
 * listing, no target with adapters is an empty list (llama-server's [] without --lora), not an error. */
static gw_target *lora_target(gw_call *call, bool listing) {
    gw_server *srv = call->srv;
    const char *name = gw_call_query(call, "model");
    gw_target *found = NULL, *only = NULL;
    size_t n = atomic_load(&srv->n_targets), with = 0, seen = 0;
    for (size_t i = 0; i < n; i++) {
        gw_target *t = &srv->targets[i];
        if (!gw_auth_allows(call, t->cfg)) continue;
        only = t, seen++;
        if (name ? strcmp(t->cfg->name, name) == 0 : t->cfg->n_lora > 0) found = t, with++;
    }
    if (!name && with == 0 && seen == 1) found = only, with = 1; /* one target: its list, maybe [] */
    if (name && !found) {
        gw_reply_error(call, GW_E_UNKNOWN_TARGET,
                       "the model '%s' does not exist on this server; GET /v1/models lists them", name);
        return NULL;
    }
    bool none = !name && with == 0 && listing;
    if (!name && with != 1 && !none) {
        gw_reply_error(
            call, GW_E_INVALID_FIELD,
            with ? "%zu targets have LoRA adapters: name one with ?model=NAME"
                 : "no target has LoRA adapters (%zu): give one lora = [{path, scale}] in its config",
            with);
        return NULL;
    }
    if (!gw_auth_admin(call)) {
        gw_reply_error(
            call, GW_E_ADMIN_ONLY,
            "the token of '%s' may not see or set LoRA adapters: that needs a token with admin = true",
            call->token ? call->token->caller : "?");
        return NULL;
    }
    if (none) gw_reply_json(call, 200, json_array());
    return none ? NULL : found;
}

/* The list: the engine's scales when loaded, else the config's. */
static json_t *lora_list(gw_call *call, gw_target *t) {
    json_t *arr = json_array();
    bool loaded = gw_kind_of(t) == &gw_kind_llama && gw_residency_peek(call->srv, t);
    for (size_t i = 0; i < t->cfg->n_lora; i++) {
        float scale = t->cfg->lora[i].scale;
        if (loaded) sipp_engine_lora_get(t->engine, i, NULL, &scale);
        json_array_append_new(arr, json_pack("{s:I, s:s, s:f}", "id", (json_int_t)i, "path",
                                             t->cfg->lora[i].path, "scale", (double)scale));
    }
    if (loaded) gw_residency_unpeek(call->srv, t);
    return arr;
}

void gw_route_lora_get(gw_call *call) {
    gw_target *t = lora_target(call, true);
    if (t) gw_reply_json(call, 200, lora_list(call, t));
}

/* [{id, scale}] within the target's adapters; false after replying. */
static bool lora_scales(gw_call *call, json_t *body, size_t n_lora, sipp_lora_scale *out) {
    if (!json_is_array(body) || json_array_size(body) > n_lora) {
        gw_reply_error(
            call, GW_E_INVALID_FIELD,
            "the body must be an array of at most %zu {\"id\", \"scale\"} objects (one per adapter)", n_lora);
        return false;
    }
    size_t i;
    json_t *e;
    json_array_foreach(body, i, e) {
        json_t *id = json_object_get(e, "id"), *scale = json_object_get(e, "scale");
        if (json_object_get(e, "path")) {
            gw_reply_error(call, GW_E_INVALID_FIELD,
                           "'[%zu].path': adapters are loaded from the config (lora = [{path, scale}]); POST "
                           "sets scales by id",
                           i);
            return false;
        }
        if (!json_is_integer(id) || json_integer_value(id) < 0 || (size_t)json_integer_value(id) >= n_lora) {
            gw_reply_error(call, GW_E_INVALID_FIELD, "'[%zu].id' must be an adapter's id, 0..%zu", i,
                           n_lora - 1);
            return false;
        }
        if (!json_is_number(scale) || !isfinite(json_number_value(scale))) {
            gw_reply_error(call, GW_E_INVALID_FIELD, "'[%zu].scale' must be a number", i);
            return false;
        }
        out[i] = (sipp_lora_scale){(int)json_integer_value(id), (float)json_number_value(scale)};
    }
    return true;
}

void gw_route_lora_set(gw_call *call) {
    gw_target *t = lora_target(call, false);
    if (!t) return;
    if (t->cfg->n_lora == 0) {
        gw_reply_error(call, GW_E_INVALID_FIELD, "model '%s' has no LoRA adapters", t->cfg->name);
        return;
    }
    char err[SIPP_ERROR_SIZE];
    json_t *body = gw_parse_body(call->body, call->body_len, err, sizeof err);
    if (!body) {
        gw_reply_error(call, GW_E_INVALID_JSON, "%s", err);
        return;
    }
    sipp_lora_scale scales[GW_MAX_LORA];
    bool ok = lora_scales(call, body, t->cfg->n_lora, scales);
    size_t n = ok ? json_array_size(body) : 0;
    json_decref(body);
    if (!ok) return;
    if (gw_kind_of(t) != &gw_kind_llama || !gw_residency_peek(call->srv, t)) {
        gw_reply_error(call, GW_E_NOT_READY, "model '%s' is not loaded; POST /v1/models/%s/load first",
                       t->cfg->name, t->cfg->name);
        return;
    }
    sipp_engine_lora_set(t->engine, scales, n);
    gw_residency_unpeek(call->srv, t);
    gw_reply_json(call, 200, lora_list(call, t));
}
