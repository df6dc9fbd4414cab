/*
 * responses_mcp.c: {"type": "mcp"} tools of the Responses API, for the servers of [[mcp]].
 *
 * OpenAI's hosted MCP tool lets the model call a remote MCP server's tools: the response starts with
 * an mcp_list_tools item (what the server offers), and each call the model makes is an mcp_call
 * item holding the call and the server's answer, made between the model's turns. sipp does the
 * same for the servers its configuration names, and only those: server_label is an [[mcp]] name,
 * and a server_url must be that server's url (a gateway that called any URL a request named would
 * be a way into the network it sits in). The model sees each tool as a function of the tool's own
 * name, description and input schema, as OpenAI shows them.
 *
 * require_approval: "never" runs the calls; "always" (OpenAI's default) or a tool listed under
 * "always" makes the call an mcp_approval_request item instead, and the response ends there; the
 * client answers with an mcp_approval_response item (api/responses.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/api/api.h"
#include "gateway/format.h"
#include "gateway/mcp_client.h"

#define GW_RS_NAMES_SHOWN 200

struct gw_rs_mcp {
    json_t *tools; /* a tool's name -> {"label", "approval"} */
    json_t *lists; /* mcp_list_tools items */
};

void gw_rs_mcp_free(gw_rs_mcp *m) {
    if (!m) return;
    json_decref(m->tools);
    json_decref(m->lists);
    free(m);
}

bool gw_rs_mcp_find(const gw_rs_mcp *m, const char *name, const char **label, bool *approval) {
    json_t *e = m && name ? json_object_get(m->tools, name) : NULL;
    if (!e) return false;
    if (label) *label = json_string_value(json_object_get(e, "label"));
    if (approval) *approval = json_is_true(json_object_get(e, "approval"));
    return true;
}

json_t *gw_rs_mcp_list_items(const gw_rs_mcp *m) { return m ? json_deep_copy(m->lists) : json_array(); }

/* A list of names, from an array of strings or {"tool_names": [...]}: NULL when absent; false after
 * replying when it is neither. */
static bool tool_names(gw_call *call, json_t *v, const char *field, size_t i, json_t **names) {
    *names = NULL;
    if (!v || json_is_null(v)) return true;
    json_t *list = json_is_object(v) ? json_object_get(v, "tool_names") : v;
    if (json_is_object(v) && !list) return true; /* {"read_only": ...} alone: no names to keep to */
    size_t k;
    json_t *n;
    bool ok = json_is_array(list);
    json_array_foreach(list, k, n) ok = ok && json_is_string(n);
    if (!ok)
        return gw_reply_invalid_field(
            call, "'tools[%zu].%s' must be an array of tool names or {\"tool_names\": [...]}", i, field);
    *names = list;
    return true;
}

static bool names_have(json_t *names, const char *name) {
    size_t k;
    json_t *n;
    json_array_foreach(names, k, n) if (strcmp(json_string_value(n), name) == 0) return true;
    return false;
}

/* require_approval: "always" (the default), "never", or {"always": {"tool_names"}, "never": {...}}
 * (a tool in neither: always). How a tool of name is to be called. */
typedef struct approval_rule {
    const char *all; /* "always" | "never"; NULL: per tool */
    json_t *never, *always;
} approval_rule;

static bool read_approval(gw_call *call, json_t *t, size_t i, approval_rule *r) {
    json_t *v = json_object_get(t, "require_approval");
    *r = (approval_rule){.all = "always"};
    if (!v || json_is_null(v)) return true;
    const char *s = json_string_value(v);
    if (s && (strcmp(s, "always") == 0 || strcmp(s, "never") == 0)) {
        r->all = s;
        return true;
    }
    if (!json_is_object(v))
        return gw_reply_invalid_field(call,
                                      "'tools[%zu].require_approval' must be \"always\", \"never\" or "
                                      "{\"never\": {\"tool_names\": [...]}}",
                                      i);
    r->all = NULL;
    return tool_names(call, json_object_get(v, "never"), "require_approval.never", i, &r->never) &&
           tool_names(call, json_object_get(v, "always"), "require_approval.always", i, &r->always);
}

static bool needs_approval(const approval_rule *r, const char *name) {
    if (r->all) return strcmp(r->all, "always") == 0;
    return !(r->never && names_have(r->never, name) && !(r->always && names_have(r->always, name)));
}

/* The keys of an mcp tool: those that decide something, and those a server may ignore. */
static bool check_keys(gw_call *call, json_t *t, size_t i) {
    static const char *const used[] = {"type",          "server_label",     "server_url",
                                       "allowed_tools", "require_approval", NULL};
    static const char *const ignored[] = {"headers", "authorization", "server_description", NULL};
    const char *key;
    json_t *v;
    json_object_foreach(t, key, v) {
        bool known = false;
        for (const char *const *k = used; *k && !known; k++)
            known = strcmp(*k, key) == 0;
        for (const char *const *k = ignored; *k && !known; k++)
            if (strcmp(*k, key) == 0) known = true, gw_ignored_addf(call, "tools[%zu].%s", i, key);
        if (!known)
            return gw_reply_invalid_field(
                call,
                "'tools[%zu].%s' is not supported for an mcp tool; give server_label "
                "(an [[mcp]] server of this gateway), allowed_tools and require_approval",
                i, key);
    }
    return true;
}

/* The configured server a tool names; NULL after replying. */
static gw_mcp_server *named_server(gw_call *call, json_t *t, size_t i) {
    const char *label = json_string_value(json_object_get(t, "server_label"));
    gw_mcp *all = call->srv->mcp;
    gw_mcp_server *s = label ? gw_mcp_find(all, label) : NULL;
    if (!s) {
        sipp_buf names = {0};
        for (size_t k = 0; k < gw_mcp_count(all) && names.len < GW_RS_NAMES_SHOWN; k++)
            sipp_buf_appendf(&names, "%s%s", k ? ", " : "", gw_mcp_name(gw_mcp_at(all, k)));
        if (!label)
            gw_reply_invalid_field(call, "'tools[%zu].server_label' must be the name of an [[mcp]] server",
                                   i);
        else
            gw_reply_invalid_field(
                call,
                "'tools[%zu].server_label' is '%s', which is not an MCP server of this gateway "
                "(configured: %s); add it to the config as an [[mcp]] entry",
                i, label, names.len ? names.data : "none");
        sipp_buf_free(&names);
        return NULL;
    }
    json_t *url = json_object_get(t, "server_url");
    if (url && !json_is_null(url) &&
        (!json_is_string(url) || !gw_mcp_url(s) || strcmp(json_string_value(url), gw_mcp_url(s)) != 0)) {
        gw_reply_invalid_field(
            call,
            "'tools[%zu].server_url' is not the url of the [[mcp]] server '%s': this gateway "
            "calls only the MCP servers its config names; leave server_url out",
            i, label);
        return NULL;
    }
    return s;
}

static bool name_taken(json_t *out, const char *name) {
    size_t k;
    json_t *f;
    json_array_foreach(out, k, f) {
        const char *n = json_string_value(json_object_get(json_object_get(f, "function"), "name"));
        if (n && strcmp(n, name) == 0) return true;
    }
    return false;
}

/* Adds server s's tools (listed) that the request allows to out and to m. */
static bool add_tools(gw_call *call, gw_rs_mcp *m, json_t *listed, json_t *allow, const approval_rule *rule,
                      const char *label, size_t i, json_t *out, json_t *shown) {
    size_t k;
    json_t *tool;
    json_array_foreach(listed, k, tool) {
        const char *name = json_string_value(json_object_get(tool, "name"));
        if (allow && !names_have(allow, name)) continue;
        if (name_taken(out, name) || json_object_get(m->tools, name))
            return gw_reply_invalid_field(
                call,
                "'tools[%zu]': the MCP server '%s' has a tool '%s', and another tool "
                "of this request has that name; leave one out with allowed_tools",
                i, label, name);
        json_t *desc = json_object_get(tool, "description");
        json_t *fn =
            json_pack("{s:s, s:O}", "name", name, "parameters", json_object_get(tool, "input_schema"));
        if (json_is_string(desc)) json_object_set(fn, "description", desc);
        json_array_append_new(out, json_pack("{s:s, s:o}", "type", "function", "function", fn));
        json_object_set_new(m->tools, name,
                            json_pack("{s:s, s:b}", "label", label, "approval", needs_approval(rule, name)));
        json_array_append(shown, tool);
    }
    return true;
}

bool gw_rs_mcp_tool(gw_call *call, gw_rs_mcp **m, json_t *t, size_t i, json_t *out, const char *rid) {
    json_t *allow = NULL;
    approval_rule rule;
    if (!check_keys(call, t, i)) return false;
    gw_mcp_server *s = named_server(call, t, i);
    if (!s || !tool_names(call, json_object_get(t, "allowed_tools"), "allowed_tools", i, &allow) ||
        !read_approval(call, t, i, &rule))
        return false;
    if (!*m) {
        *m = calloc(1, sizeof **m);
        if (!*m) return gw_reply_invalid_field(call, "out of memory");
        (*m)->tools = json_object();
        (*m)->lists = json_array();
    }
    char err[SIPP_ERROR_SIZE] = "", id[SIPP_ERROR_SIZE];
    snprintf(id, sizeof id, "mcpl_%s_%zu", rid, json_array_size((*m)->lists));
    json_t *listed = gw_mcp_tools(s, gw_call_ms_left(call), err, sizeof err);
    json_t *shown = json_array();
    json_t *item = json_pack("{s:s, s:s, s:s, s:o}", "id", id, "type", "mcp_list_tools", "server_label",
                             gw_mcp_name(s), "tools", shown);
    json_object_set_new(item, "error", listed ? json_null() : json_string(err));
    json_array_append_new((*m)->lists, item);
    bool ok = !listed || add_tools(call, *m, listed, allow, &rule, gw_mcp_name(s), i, out, shown);
    json_decref(listed);
    return ok;
}

json_t *gw_rs_mcp_call_item(const char *id, const char *label, const char *name, const char *arguments) {
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:n, s:n, s:n, s:s}", "id", id, "type", "mcp_call",
                     "server_label", label, "name", name, "arguments", arguments ? arguments : "",
                     "approval_request_id", "output", "error", "status", "in_progress");
}

json_t *gw_rs_mcp_approval_item(const char *id, const char *label, const char *name, const char *arguments) {
    return json_pack("{s:s, s:s, s:s, s:s, s:s}", "id", id, "type", "mcp_approval_request", "server_label",
                     label, "name", name, "arguments", arguments ? arguments : "");
}

const char *gw_rs_mcp_result_text(json_t *item) {
    const char *out = json_string_value(json_object_get(item, "output"));
    const char *err = json_string_value(json_object_get(item, "error"));
    return out ? out : err ? err : "";
}

const char *gw_rs_mcp_run(gw_call *call, json_t *item) {
    const char *label = json_string_value(json_object_get(item, "server_label"));
    const char *name = json_string_value(json_object_get(item, "name"));
    gw_mcp_server *s = gw_mcp_find(call->srv->mcp, label);
    char err[SIPP_ERROR_SIZE] = "";
    char *output = NULL;
    bool tool_error = false;
    if (s && name) {
        json_t *args = gw_arguments_object(json_string_value(json_object_get(item, "arguments")));
        output = gw_mcp_call(s, name, args, gw_call_ms_left(call), &tool_error, err, sizeof err);
        json_decref(args);
    } else {
        snprintf(err, sizeof err, "no MCP server '%s'", label ? label : "");
    }
    if (output && !tool_error) {
        json_object_set_new(item, "output", json_string(output));
    } else {
        json_object_set_new(item, "error", json_string(output ? output : err));
    }
    json_object_set_new(item, "status", json_string(output && !tool_error ? "completed" : "failed"));
    free(output);
    return gw_rs_mcp_result_text(item);
}
