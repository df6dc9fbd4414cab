/*
 * errors.c: the gateway's errors, in the shape OpenAI's clients parse:
 *
 *   {"error": {"message": "...", "type": "invalid_request_error", "code": "invalid_field"}}
 *
 * Anthropic's and Ollama's routes answer in their own shapes (gw_error_json_in), with the same
 * statuses: {"type": "error", "error": {"type": "invalid_request_error", "message": "..."}} and
 * {"error": "..."}.
 *
 * One table maps each kind to its HTTP status, type and code, so that a status never drifts from
 * its code between routes. Messages are written where the error happens and name the input, the
 * problem and what to do. A message may echo what a client sent (a path, a method, a header),
 * which need not be UTF-8: gw_error_json escapes it, so that the reply is always valid JSON text
 * and never a 500 because the error itself could not be written.
 */
#include <stdio.h>
#include <string.h>

#include "gateway/errors.h"

static const struct {
    int status;
    const char *type;
    const char *code;
    const char *anthropic_type; /* Anthropic's error types (its docs' "Errors" table) */
} kinds[GW_E_COUNT] = {
    [GW_E_INVALID_JSON] = {400, "invalid_request_error", "invalid_json", "invalid_request_error"},
    [GW_E_INVALID_FIELD] = {400, "invalid_request_error", "invalid_field", "invalid_request_error"},
    [GW_E_CONTEXT_LENGTH] = {400, "invalid_request_error", "context_length_exceeded",
                             "invalid_request_error"},
    [GW_E_BAD_REQUEST] = {400, "invalid_request_error", "bad_request", "invalid_request_error"},
    [GW_E_MISSING_KEY] = {401, "authentication_error", "missing_api_key", "authentication_error"},
    [GW_E_INVALID_KEY] = {401, "authentication_error", "invalid_api_key", "authentication_error"},
    [GW_E_ORIGIN_FORBIDDEN] = {403, "permission_error", "origin_not_allowed", "permission_error"},
    [GW_E_HOST_FORBIDDEN] = {403, "permission_error", "host_not_allowed", "permission_error"},
    [GW_E_ADMIN_ONLY] = {403, "permission_error", "admin_required", "permission_error"},
    [GW_E_UNKNOWN_TARGET] = {404, "invalid_request_error", "model_not_found", "not_found_error"},
    [GW_E_UNKNOWN_ROUTE] = {404, "invalid_request_error", "route_not_found", "not_found_error"},
    [GW_E_NOT_FOUND] = {404, "invalid_request_error", "not_found", "not_found_error"},
    [GW_E_METHOD] = {405, "invalid_request_error", "method_not_allowed", "invalid_request_error"},
    [GW_E_CONFLICT] = {409, "invalid_request_error", "conflict", "invalid_request_error"},
    [GW_E_TOO_LARGE] = {413, "invalid_request_error", "request_too_large", "request_too_large"},
    [GW_E_URI_TOO_LONG] = {414, "invalid_request_error", "uri_too_long", "invalid_request_error"},
    [GW_E_MEDIA_TYPE] = {415, "invalid_request_error", "unsupported_media_type", "invalid_request_error"},
    [GW_E_RANGE] = {416, "invalid_request_error", "range_not_satisfiable", "invalid_request_error"},
    [GW_E_RATE_LIMITED] = {429, "rate_limit_error", "rate_limit_exceeded", "rate_limit_error"},
    [GW_E_QUEUE_FULL] = {429, "rate_limit_error", "queue_full", "rate_limit_error"},
    [GW_E_HEADERS_TOO_LARGE] = {431, "invalid_request_error", "headers_too_large", "invalid_request_error"},
    [GW_E_INTERNAL] = {500, "server_error", "internal_error", "api_error"},
    [GW_E_NOT_IMPLEMENTED] = {501, "server_error", "not_implemented", "api_error"},
    [GW_E_UPSTREAM] = {502, "upstream_error", "upstream_error", "api_error"},
    [GW_E_NOT_READY] = {503, "server_error", "not_ready", "overloaded_error"},
    [GW_E_BUSY] = {503, "server_error", "server_busy", "overloaded_error"},
    [GW_E_TIMEOUT] = {504, "timeout_error", "timeout", "api_error"},
};

int gw_error_status(gw_error_kind k) { return kinds[k].status; }
const char *gw_error_type(gw_error_kind k) { return kinds[k].type; }
const char *gw_error_code(gw_error_kind k) { return kinds[k].code; }

#define GW_UTF8_MAX 4
#define GW_CONTROL_END 0x20
#define GW_DELETE 0x7f

/* The length of the valid UTF-8 sequence at s (0 when there is none). */
static size_t utf8_at(const char *s) {
    unsigned char c = (unsigned char)*s;
    size_t len = c < 0x80                 ? 1
                 : c >= 0xC2 && c <= 0xDF ? 2
                 : c >= 0xE0 && c <= 0xEF ? 3
                 : c >= 0xF0 && c <= 0xF4 ? 4
                                          : 0;
    for (size_t i = 1; i < len; i++)
        if (!s[i]) return 0;
    return len && sipp_utf8_valid(s, len) ? len : 0;
}

bool gw_echo_escape(const char *s, sipp_buf *out) {
    bool ok = true;
    while (*s && ok) {
        size_t len = utf8_at(s);
        unsigned char c = (unsigned char)*s;
        if (len == 0 || (len == 1 && (c < GW_CONTROL_END || c == GW_DELETE))) {
            ok = sipp_buf_appendf(out, "\\x%02x", c);
            s++;
        } else {
            ok = sipp_buf_append(out, s, len);
            s += len;
        }
    }
    return ok && sipp_buf_append(out, "", 0);
}

json_t *gw_error_json(gw_error_kind k, const char *message) {
    sipp_buf clean = {0};
    gw_echo_escape(message ? message : "", &clean);
    json_t *j = json_pack("{s:{s:s, s:s, s:s}}", "error", "message", clean.data ? clean.data : "", "type",
                          kinds[k].type, "code", kinds[k].code);
    sipp_buf_free(&clean);
    return j;
}

json_t *gw_error_json_in(gw_dialect dialect, gw_error_kind k, const char *message) {
    if (dialect == GW_DIALECT_OPENAI) return gw_error_json(k, message);
    sipp_buf clean = {0};
    gw_echo_escape(message ? message : "", &clean);
    const char *m = clean.data ? clean.data : "";
    json_t *j = dialect == GW_DIALECT_ANTHROPIC ? json_pack("{s:s, s:{s:s, s:s}}", "type", "error", "error",
                                                            "type", kinds[k].anthropic_type, "message", m)
                                                : json_pack("{s:s}", "error", m);
    sipp_buf_free(&clean);
    return j;
}

gw_error_kind gw_error_from_status(sipp_status st) {
    switch (st) {
    case SIPP_ERR_INVALID_ARGUMENT: return GW_E_INVALID_FIELD;
    case SIPP_ERR_CONTEXT_FULL: return GW_E_CONTEXT_LENGTH;
    case SIPP_ERR_BUSY: return GW_E_QUEUE_FULL;
    case SIPP_ERR_TIMEOUT: return GW_E_TIMEOUT;
    case SIPP_ERR_CLOSED:
    case SIPP_ERR_CANCELLED: return GW_E_NOT_READY;
    case SIPP_ERR_NOT_FOUND: return GW_E_UNKNOWN_TARGET;
    case SIPP_ERR_MODEL: return GW_E_INVALID_FIELD; /* e.g. no chat template for messages */
    default: return GW_E_INTERNAL;
    }
}
