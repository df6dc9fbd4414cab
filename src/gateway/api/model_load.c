/*
 * model_load.c: loading and unloading models by hand.
 *
 *   POST /v1/models/{name}/load     loads the model (again, when its last load failed) and answers
 *                                   when it is loaded: 200 with its description, or 503 saying why
 *                                   (it does not fit next to the models in use, or its load failed)
 *   POST /v1/models/{name}/unload   unloads it now, or when its running requests end ("deferred")
 *   POST /v1/models/{name}/erase_slots   empties the KV its idle slots keep for prefix reuse (as
 *                                   llama-server's /slots?action=erase), its busy slots untouched
 *
 * All need a token with admin = true when the server has tokens (a call that may only use a model
 * may not take memory from the others' models by loading or evicting). The name is the target's,
 * as GET /v1/models lists it; remote targets have nothing to load.
 */
#include <string.h>

#include "gateway/api/api.h"

#define GW_MAX_NAME 256

/* The idle slots' KV of a loaded target is emptied (its busy slots go on); nothing to do for one
 * that is not loaded. */
static void erase_slots(gw_call *call, gw_target *t, const char *id) {
    bool loaded = gw_residency_peek(call->srv, t);
    if (loaded) {
        sipp_engine_erase_idle_slots(t->engine);
        gw_residency_unpeek(call->srv, t);
    }
    gw_reply_json(call, 200, json_pack("{s:s, s:b}", "id", id, "erased", loaded));
}

void gw_route_model_residency(gw_call *call, const char *name, size_t name_len, const char *action) {
    gw_server *srv = call->srv;
    char id[GW_MAX_NAME];
    if (name_len == 0 || name_len >= sizeof id) {
        gw_reply_error(call, GW_E_UNKNOWN_TARGET, "no model named in %s; use POST /v1/models/NAME/%s",
                       call->path, action);
        return;
    }
    memcpy(id, name, name_len);
    id[name_len] = '\0';
    gw_target *t = gw_target_find(srv, id);
    if (!t || !gw_auth_allows(call, t->cfg)) {
        gw_reply_error(call, GW_E_UNKNOWN_TARGET,
                       "the model '%s' does not exist on this server; GET /v1/models lists them", id);
        return;
    }
    call->target = t->index;
    if (!gw_auth_admin(call)) {
        gw_reply_error(
            call, GW_E_ADMIN_ONLY,
            "the token of '%s' may not %s models: that needs a token with admin = true in [[tokens]]",
            call->token ? call->token->caller : "?", action);
        return;
    }
    if (!gw_kind_of(t)->resident) {
        gw_reply_error(call, GW_E_INVALID_FIELD,
                       "model '%s' is a remote target (openai_compatible): there is nothing to %s", id,
                       action);
        return;
    }
    if (strcmp(action, "erase_slots") == 0) {
        erase_slots(call, t, id);
        return;
    }
    if (strcmp(action, "load") == 0) {
        char why[SIPP_ERROR_SIZE];
        double deadline = call->t_start + srv->cfg->request_timeout_seconds * 1000.0;
        gw_acquire_result r = gw_residency_load(srv, t, deadline, why, sizeof why);
        if (r != GW_ACQUIRE_OK) {
            gw_reply_error(call, r == GW_ACQUIRE_TIMEOUT ? GW_E_TIMEOUT : GW_E_NOT_READY, "%s", why);
            return;
        }
    } else {
        bool deferred = false;
        gw_residency_unload(srv, t, &deferred);
        json_t *o = json_pack("{s:s, s:b}", "id", id, "deferred", deferred);
        gw_residency_describe(srv, t, o);
        gw_reply_json(call, 200, o);
        return;
    }
    json_t *o = json_pack("{s:s}", "id", id);
    gw_residency_describe(srv, t, o);
    gw_reply_json(call, 200, o);
}
