/*
 * translate.c: what the Responses, Messages and Ollama routes share.
 *
 * Each of those APIs is a translation layer over the chat-completions route, not a second request
 * parser: a route rebuilds its request as a chat-completions body (a JSON tree), and that body goes
 * through gw_decode(GW_API_CHAT) like any request to /v1/chat/completions. So every field the chat
 * layer supports is supported in every API, and every refusal comes from one place. A refusal
 * names the field in chat-completions terms ('max_tokens'); the route gives a table of renames so
 * that the client reads its own API's name ('max_output_tokens', 'options.num_predict').
 *
 * What a route renders is its own (a gw_format plus state in gw_gen.route); the rest (decoding,
 * the target, generating on a local one or relaying to a remote one) is the one path every route
 * takes (dispatch.c), the same as for chat completions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway/api/api.h"
#include "gateway/kinds/kinds.h"

gw_target *gw_translated_target(gw_call *call, const char *name, const char *api_name) {
    gw_target *t = gw_call_target(call, name);
    if (t && !gw_kind_of(t)->resident) {
        gw_reply_error(call, GW_E_NOT_IMPLEMENTED,
                       "model '%s' is a remote (openai_compatible) target, which %s does not reach yet; "
                       "use /v1/chat/completions for it",
                       t->cfg->name, api_name);
        return NULL;
    }
    return t;
}

json_t *gw_body_object(gw_call *call) {
    char err[SIPP_ERROR_SIZE];
    json_t *root = gw_parse_body(call->body, call->body_len, err, sizeof err);
    if (!root) {
        gw_reply_error(call, GW_E_INVALID_JSON, "%s", err);
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        gw_reply_error(call, GW_E_INVALID_FIELD, "the body must be a JSON object");
        return NULL;
    }
    return root;
}

bool gw_copy_field(json_t *from, const char *key, json_t *to, const char *as) {
    json_t *v = json_object_get(from, key);
    if (!v) return false;
    json_object_set(to, as ? as : key, v);
    return true;
}

bool gw_translate_tools(gw_call *call, json_t *tools, json_t *chat, const char *not_array, gw_tool_fn one,
                        void *ctx) {
    if (!tools || json_is_null(tools)) return true;
    if (!json_is_array(tools)) return gw_reply_invalid_field(call, "%s", not_array);
    json_t *out = json_array();
    json_object_set_new(chat, "tools", out);
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        gw_tool_fate fate = one(call, t, i, out, ctx);
        if (fate == GW_TOOL_REFUSED) return false;
        if (fate == GW_TOOL_LEFT_OUT) gw_ignored_addf(call, "tools[%zu]", i);
    }
    return true;
}

#define GW_TOOL_NAME_SHOWN 64
#define GW_TOOL_NAMES_SHOWN 200

bool gw_forced_tool_listed(gw_call *call, json_t *chat, const char *name, const char *kind) {
    sipp_buf names = {0};
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(chat, "tools"), i, t) {
        json_t *body = json_object_get(t, "function");
        const char *n =
            json_string_value(json_object_get(body ? body : json_object_get(t, "custom"), "name"));
        if (n && strcmp(n, name) == 0) {
            sipp_buf_free(&names);
            return true;
        }
        sipp_buf_appendf(&names, "%s%s", names.len ? ", " : "", n ? n : "");
    }
    gw_reply_invalid_field(call, "'tool_choice' names %s '%.*s', which is not in 'tools' (tools: %.*s)", kind,
                           GW_TOOL_NAME_SHOWN, name, GW_TOOL_NAMES_SHOWN, names.data ? names.data : "none");
    sipp_buf_free(&names);
    return false;
}

json_t *gw_function_tool(json_t *t, json_t *name, const char *schema_key, bool keep_strict) {
    json_t *fn = json_object();
    if (name) json_object_set(fn, "name", name);
    gw_copy_field(t, "description", fn, NULL);
    gw_copy_field(t, schema_key, fn, "parameters");
    if (keep_strict) gw_copy_field(t, "strict", fn, NULL);
    return json_pack("{s:s, s:o}", "type", "function", "function", fn);
}

bool gw_check_fields(gw_call *call, json_t *root, const char *const *known, const char *api) {
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        bool found = false;
        for (const char *const *k = known; *k && !found; k++)
            found = strcmp(*k, key) == 0;
        if (!found) {
            gw_reply_error(call, GW_E_INVALID_FIELD,
                           "'%s' is not supported by %s on this server; leave it out", key, api);
            return false;
        }
    }
    return true;
}
