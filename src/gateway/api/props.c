/*
 * props.c: llama-server's /props and /slots, for a local target (?model=NAME; optional with
 * one target).
 *
 *   GET /props              what the target runs with, in llama-server's shape where it applies:
 *                           default_generation_settings (params, n_ctx), total_slots, model_alias,
 *                           model_path, modalities, chat_template, build_info (any token)
 *   GET /slots              each slot: id, n_ctx, is_processing, n_tokens, context_key (admin only)
 *   POST /slots/ID?action=  save, restore (body {"filename": NAME}, a file in [server] slot_save_dir)
 *                           or erase slot ID (admin only)
 *
 * A slot is saved, restored and erased while its model serves nothing (libsipp waits for the engine
 * to be idle, else 503 busy), as sipp's eviction saves slots (slot_state.c). A file name is one
 * path component: no '/', no "..", no leading '.', at most NAME_MAX bytes; anything else is a 400
 * naming it, so that a caller can never reach outside slot_save_dir.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/api/api.h"

#define SLOTS_MAX 256     /* slots listed (GW_MAX_PARALLEL is below) */
#define FILE_NAME_MAX 255 /* a file name's bytes (NAME_MAX) */
#define SLOTS_PREFIX "/slots/"
#define SPECIAL_TEXT_MAX 256 /* bytes of a special token's text */

/* The local target of a ?model= call, admitted and ready; NULL after replying. */
static gw_target *local_target(gw_call *call, const char *route) {
    static const char *const known[] = {"model", "action", NULL};
    const char *unknown = gw_call_query_unknown(call, known);
    if (unknown) {
        gw_reply_error(call, GW_E_INVALID_FIELD, "%s takes ?model=NAME%s; '%s' is not a parameter of it",
                       route, strcmp(route, "/props") ? " and ?action=" : "", unknown);
        return NULL;
    }
    gw_target *t = gw_call_lookup(call, gw_call_query(call, "model"));
    if (t && !gw_kind_of(t)->resident) {
        gw_reply_error(call, GW_E_INVALID_FIELD,
                       "model '%s' is served by another server: %s describes a model of this process; name a "
                       "local target",
                       t->cfg->name, route);
        return NULL;
    }
    return t ? gw_call_target(call, t->cfg->name) : NULL;
}

static bool admin_only(gw_call *call, const char *route) {
    if (gw_auth_admin(call)) return true;
    gw_reply_error(call, GW_E_ADMIN_ONLY,
                   "the token of '%s' may not use %s: that needs a token with admin = true in [[tokens]]",
                   call->token ? call->token->caller : "?", route);
    return false;
}

/* A special token's text ("" when the vocabulary has none), as llama-server's bos_token. */
static json_t *special_text(sipp_model *m, const char *which) {
    char buf[SPECIAL_TEXT_MAX];
    size_t n = 0;
    int32_t id = sipp_model_special_token(m, which);
    if (id < 0 || sipp_token_piece(m, id, true, buf, sizeof buf, &n) != SIPP_OK) return json_string("");
    sipp_buf safe = {0};
    sipp_buf_append_utf8(&safe, buf, n);
    json_t *j = json_stringn(safe.data ? safe.data : "", safe.len);
    sipp_buf_free(&safe);
    return j;
}

/* The target's own template text ("chatml", or the configured file's path, when the target sets one). */
static json_t *template_json(gw_target *t) {
    const char *own = sipp_model_chat_template(t->model);
    return json_string(t->cfg->chat_template ? t->cfg->chat_template : own ? own : "");
}

void gw_route_props(gw_call *call) {
    gw_target *t = local_target(call, "/props");
    if (!t) return;
    sipp_model_info info;
    sipp_model_get_info(t->model, &info);
    sipp_engine_stats es;
    sipp_engine_get_stats(t->engine, &es);
    sipp_sampling s = sipp_request_default_params().sampling;
    json_t *params = json_pack("{s:f, s:i, s:f, s:f, s:f, s:f, s:f, s:i, s:i}", "temperature", s.temperature,
                               "top_k", s.top_k, "top_p", s.top_p, "min_p", s.min_p, "repeat_penalty",
                               s.repeat_penalty, "presence_penalty", s.presence_penalty, "frequency_penalty",
                               s.frequency_penalty, "repeat_last_n", s.repeat_last_n, "n_predict",
                               t->cfg->max_tokens > 0 ? t->cfg->max_tokens : -1);
    char build[128];
    snprintf(build, sizeof build, "sipp %s (llama.cpp %s)", sipp_version(), sipp_llama_commit());
    gw_reply_json(
        call, 200,
        json_pack("{s:{s:o, s:i}, s:i, s:s, s:s, s:{s:b, s:b, s:b}, s:o, s:o, s:o, s:s, s:b, s:b, s:b}",
                  "default_generation_settings", "params", params, "n_ctx", es.kv_cells, "total_slots",
                  es.slots, "model_alias", t->cfg->name, "model_path", t->cfg->model_path, "modalities",
                  "vision", info.vision, "video", 0, "audio", info.audio, "chat_template", template_json(t),
                  "bos_token", special_text(t->model, "bos"), "eos_token", special_text(t->model, "eos"),
                  "build_info", build, "endpoint_slots", 1, "endpoint_props", 0, "is_sleeping", 0));
}

void gw_route_slots(gw_call *call) {
    if (!admin_only(call, "/slots")) return;
    gw_target *t = local_target(call, "/slots");
    if (!t) return;
    sipp_slot_info *info = calloc(SLOTS_MAX, sizeof *info);
    int n = info ? sipp_engine_slots(t->engine, info, SLOTS_MAX) : 0;
    sipp_engine_stats es;
    sipp_engine_get_stats(t->engine, &es);
    json_t *slots = json_array();
    for (int i = 0; i < n && i < SLOTS_MAX; i++)
        json_array_append_new(slots,
                              json_pack("{s:i, s:i, s:b, s:i, s:s?}", "id", info[i].id, "n_ctx", es.kv_cells,
                                        "is_processing", info[i].busy, "n_tokens", info[i].n_tokens,
                                        "context_key", *info[i].key ? info[i].key : NULL));
    free(info);
    gw_reply_json(call, 200, slots);
}

/* A file name under slot_save_dir: one path component, not hidden, not "..". NULL after replying. */
static const char *slot_file(gw_call *call, json_t *body, char *path, size_t cap) {
    const char *dir = call->srv->cfg->slot_save_dir;
    const char *key;
    json_t *v;
    json_object_foreach(body, key, v) {
        if (strcmp(key, "filename") == 0) continue;
        gw_reply_error(call, GW_E_INVALID_FIELD,
                       "'%s' is not a field of /slots/ID?action=save|restore; send {\"filename\": NAME}",
                       key);
        return NULL;
    }
    json_t *f = json_object_get(body, "filename");
    const char *name = json_string_value(f);
    if (!dir) {
        gw_reply_error(
            call, GW_E_INVALID_FIELD,
            "slots are saved and restored under [server] slot_save_dir, which this server does not set; "
            "set it (llama-server's --slot-save-path)");
        return NULL;
    }
    if (!name || !*name || strlen(name) > FILE_NAME_MAX || strchr(name, '/') || strchr(name, '\\') ||
        name[0] == '.') {
        gw_reply_error(
            call, GW_E_INVALID_FIELD,
            "'filename' must be a file name in slot_save_dir: one component of at most %d bytes, without "
            "'/', '\\' or a leading '.' (so no '..')",
            FILE_NAME_MAX);
        return NULL;
    }
    snprintf(path, cap, "%s/%s", dir, name);
    return name;
}

/* The slot id of /slots/ID; -1 after replying. */
static int slot_id(gw_call *call) {
    const char *id = call->path + strlen(SLOTS_PREFIX);
    char *end = NULL;
    long v = strtol(id, &end, 10);
    if (end == id || *end || v < 0 || v >= SLOTS_MAX) {
        gw_reply_error(call, GW_E_INVALID_FIELD,
                       "'%s' is not a slot id: use /slots/ID with ID a slot's number (GET /slots lists them)",
                       id);
        return -1;
    }
    return (int)v;
}

/* Replies to a slot action libsipp refused: busy (503), no such slot or nothing to save (400), a file
 * that cannot be read or is not this model's (400). */
static void reply_slot_error(gw_call *call, sipp_status st, const char *err) {
    gw_reply_error(call,
                   st == SIPP_ERR_BUSY       ? GW_E_BUSY
                   : st == SIPP_ERR_INTERNAL ? GW_E_INTERNAL
                                             : GW_E_INVALID_FIELD,
                   "%s", err);
}

static void slot_save_restore(gw_call *call, gw_target *t, int id, bool save) {
    char err[SIPP_ERROR_SIZE], path[PATH_MAX];
    json_t *body = gw_body_object(call);
    const char *name = body ? slot_file(call, body, path, sizeof path) : NULL;
    if (name) {
        int n = 0;
        uint64_t bytes = 0;
        double t0 = sipp_now_ms();
        sipp_status st = save ? sipp_engine_slot_save(t->engine, id, path, &n, &bytes, err)
                              : sipp_engine_slot_restore(t->engine, id, path, &n, &bytes, err);
        if (st != SIPP_OK)
            reply_slot_error(call, st, err);
        else
            gw_reply_json(call, 200,
                          json_pack("{s:i, s:s, s:i, s:I, s:{s:f}}", "id_slot", id, "filename", name,
                                    save ? "n_saved" : "n_restored", n, save ? "n_written" : "n_read",
                                    (json_int_t)bytes, "timings", save ? "save_ms" : "restore_ms",
                                    sipp_now_ms() - t0));
    }
    json_decref(body);
}

/* POST /slots/ID?action=save|restore|erase */
void gw_route_slot_action(gw_call *call) {
    if (!admin_only(call, "/slots")) return;
    int id = slot_id(call);
    const char *action = id >= 0 ? gw_call_query(call, "action") : NULL;
    if (id >= 0 &&
        (!action || (strcmp(action, "save") && strcmp(action, "restore") && strcmp(action, "erase")))) {
        gw_reply_error(call, GW_E_INVALID_FIELD, "'action' must be ?action=save, restore or erase");
        return;
    }
    gw_target *t = action ? local_target(call, "/slots") : NULL;
    if (!t) return;
    if (strcmp(action, "erase") != 0) {
        slot_save_restore(call, t, id, strcmp(action, "save") == 0);
        return;
    }
    char err[SIPP_ERROR_SIZE];
    int n = 0;
    sipp_status st = sipp_engine_slot_erase(t->engine, id, &n, err);
    if (st != SIPP_OK)
        reply_slot_error(call, st, err);
    else
        gw_reply_json(call, 200, json_pack("{s:i, s:i}", "id_slot", id, "n_erased", n));
}
