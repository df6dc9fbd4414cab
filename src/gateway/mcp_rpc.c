/*
 * mcp_rpc.c: what an MCP server said, judged (mcp_rpc.h).
 *
 * A server is a program sipp did not write. Every message is checked for the JSON-RPC 2.0 shape
 * before anything is read from it, and anything else is junk, quoted (escaped, cut short) in the
 * error the call ends with. A server's own notifications and requests (logging, progress, pings)
 * may come between a request and its reply, so they are skipped rather than taken for junk.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/errors.h"
#include "gateway/mcp_rpc.h"

#define JUNK_QUOTE_BYTES 80 /* of a message that is not JSON-RPC, quoted in the error */
#define ERROR_TEXT_BYTES 400

/* msg: why, and the start of text, escaped (a server's bytes are never echoed raw). */
static gw_rpc_kind junk(const char *text, size_t len, const char *why, char *msg, size_t cap) {
    char quote[JUNK_QUOTE_BYTES + 1];
    size_t n = len < JUNK_QUOTE_BYTES ? len : JUNK_QUOTE_BYTES;
    memcpy(quote, text, n);
    quote[n] = 0;
    sipp_buf clean = {0};
    gw_echo_escape(quote, &clean);
    snprintf(msg, cap, "%s: '%s%s'", why, clean.data ? clean.data : "", len > n ? "..." : "");
    sipp_buf_free(&clean);
    return GW_RPC_JUNK;
}

static gw_rpc_kind rpc_error(json_t *err, char *msg, size_t cap) {
    json_t *code = json_object_get(err, "code"), *m = json_object_get(err, "message");
    sipp_buf clean = {0};
    char text[ERROR_TEXT_BYTES + 1] = "";
    if (json_is_string(m)) sipp_strlcpy(text, json_string_value(m), sizeof text);
    gw_echo_escape(text, &clean);
    snprintf(msg, cap, "error %lld: %s", json_is_integer(code) ? (long long)json_integer_value(code) : 0LL,
             clean.data && *clean.data ? clean.data : "(no message)");
    sipp_buf_free(&clean);
    return GW_RPC_ERROR;
}

gw_rpc_kind gw_mcp_rpc_read(const char *text, size_t len, long long id, json_t **result, char *msg,
                            size_t cap) {
    *result = NULL;
    json_t *m = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
    if (!m) return junk(text, len, "not JSON", msg, cap);
    gw_rpc_kind kind = GW_RPC_OTHER;
    const char *version = json_string_value(json_object_get(m, "jsonrpc"));
    json_t *mid = json_object_get(m, "id");
    json_t *res = json_object_get(m, "result"), *err = json_object_get(m, "error");
    if (!json_is_object(m) || !version || strcmp(version, "2.0") != 0)
        kind = junk(text, len, "not a JSON-RPC 2.0 message", msg, cap);
    else if (json_is_string(json_object_get(m, "method")))
        kind = GW_RPC_OTHER; /* a notification or a request of the server's */
    else if (!json_is_integer(mid) || json_integer_value(mid) != id)
        kind = mid && (json_is_integer(mid) || json_is_string(mid) || json_is_null(mid))
                   ? GW_RPC_OTHER
                   : junk(text, len, "a reply without a valid id", msg, cap);
    else if (json_is_object(err))
        kind = rpc_error(err, msg, cap);
    else if (res && !err) {
        *result = json_incref(res);
        kind = GW_RPC_RESULT;
    } else
        kind = junk(text, len, "a reply with neither a result nor an error object", msg, cap);
    json_decref(m);
    return kind;
}

/* The line at *pos (without its end: "\n", "\r\n" or "\r"), advancing *pos past it. */
static bool next_line(const char *body, size_t len, size_t *pos, const char **line, size_t *n) {
    if (*pos >= len) return false;
    *line = body + *pos;
    size_t i = *pos;
    while (i < len && body[i] != '\n' && body[i] != '\r')
        i++;
    *n = i - *pos;
    if (i < len && body[i] == '\r') {
        if (++i < len && body[i] == '\n') i++;
    } else if (i < len) {
        i++;
    }
    *pos = i;
    return true;
}

bool gw_mcp_sse_next(const char *body, size_t len, size_t *pos, sipp_buf *data) {
    data->len = 0;
    bool any = false;
    const char *line;
    size_t n;
    while (next_line(body, len, pos, &line, &n)) {
        if (n == 0) {
            if (any) return true; /* a blank line ends an event that had data */
            continue;
        }
        if (n < 5 || memcmp(line, "data:", 5) != 0) continue; /* event:, id:, retry:, comments */
        const char *v = line + 5;
        size_t vn = n - 5;
        if (vn && *v == ' ') v++, vn--;
        if (any) sipp_buf_append(data, "\n", 1);
        sipp_buf_append(data, v, vn);
        any = true;
    }
    return any;
}

/* One tool of tools/list, as the Responses API names its fields. */
static json_t *tool_entry(json_t *t) {
    json_t *name = json_object_get(t, "name"), *desc = json_object_get(t, "description");
    json_t *schema = json_object_get(t, "inputSchema");
    if (!json_is_string(name) || json_string_length(name) == 0 || !json_is_object(schema)) return NULL;
    json_t *e = json_pack("{s:O, s:O, s:O}", "name", name, "description",
                          json_is_string(desc) ? desc : json_null(), "input_schema", schema);
    json_t *ann = json_object_get(t, "annotations");
    if (e && json_is_object(ann)) json_object_set(e, "annotations", ann);
    return e;
}

json_t *gw_mcp_tools_from_result(json_t *result, char **cursor, char *msg, size_t cap) {
    *cursor = NULL;
    json_t *tools = json_object_get(result, "tools");
    if (!json_is_array(tools)) {
        snprintf(msg, cap, "its tools/list result has no \"tools\" array");
        return NULL;
    }
    json_t *out = json_array();
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        json_t *e = tool_entry(t);
        if (!e) {
            snprintf(msg, cap,
                     "its tools/list result's tool %zu lacks a \"name\" or an \"inputSchema\" object", i);
            json_decref(out);
            return NULL;
        }
        json_array_append_new(out, e);
    }
    const char *next = json_string_value(json_object_get(result, "nextCursor"));
    if (next && *next) *cursor = strdup(next);
    return out;
}

char *gw_mcp_output_from_result(json_t *result, bool *is_error, char *msg, size_t cap) {
    json_t *content = json_object_get(result, "content");
    *is_error = json_is_true(json_object_get(result, "isError"));
    if (!json_is_array(content)) {
        snprintf(msg, cap, "its tools/call result has no \"content\" array");
        return NULL;
    }
    sipp_buf out = {0};
    size_t i;
    json_t *part;
    json_array_foreach(content, i, part) {
        const char *type = json_string_value(json_object_get(part, "type"));
        json_t *text = json_object_get(part, "text");
        if (i > 0) sipp_buf_append(&out, "\n", 1);
        if (type && strcmp(type, "text") == 0 && json_is_string(text)) {
            sipp_buf_append(&out, json_string_value(text), json_string_length(text));
            continue;
        }
        char *j = json_dumps(part, JSON_COMPACT | JSON_ENCODE_ANY);
        if (j) sipp_buf_append(&out, j, strlen(j));
        free(j);
    }
    char *text = out.data ? out.data : strdup("");
    if (!text) snprintf(msg, cap, "out of memory");
    return text;
}
