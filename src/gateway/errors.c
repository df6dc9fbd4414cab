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
 * problem and what to do.
 */
#include "gateway/gateway.h"

static const struct {
    int status;
    const char *type;
    const char *code;
    const char *anthropic_type; /* Anthropic's error types (its docs' "Errors" table) */
} kinds[GW_E_COUNT] = {
    [GW_E_INVALID_JSON] = {400, "invalid_request_error", "invalid_json", "invalid_request_error"},
    [GW_E_INVALID_FIELD] = {400, "invalid_request_error", "invalid_field", "invalid_request_error"},
    [GW_E_CONTEXT_LENGTH] = {400, "invalid_request_error", "context_length_exceeded", "invalid_request_error"},
    [GW_E_MISSING_KEY] = {401, "authentication_error", "missing_api_key", "authentication_error"},
    [GW_E_INVALID_KEY] = {401, "authentication_error", "invalid_api_key", "authentication_error"},
    [GW_E_FORBIDDEN_TARGET] = {403, "permission_error", "target_not_allowed", "permission_error"},
    [GW_E_ORIGIN_FORBIDDEN] = {403, "permission_error", "origin_not_allowed", "permission_error"},
    [GW_E_UNKNOWN_TARGET] = {404, "invalid_request_error", "model_not_found", "not_found_error"},
    [GW_E_UNKNOWN_ROUTE] = {404, "invalid_request_error", "route_not_found", "not_found_error"},
    [GW_E_NOT_FOUND] = {404, "invalid_request_error", "not_found", "not_found_error"},
    [GW_E_METHOD] = {405, "invalid_request_error", "method_not_allowed", "invalid_request_error"},
    [GW_E_TOO_LARGE] = {413, "invalid_request_error", "request_too_large", "request_too_large"},
    [GW_E_RATE_LIMITED] = {429, "rate_limit_error", "rate_limit_exceeded", "rate_limit_error"},
    [GW_E_QUEUE_FULL] = {429, "rate_limit_error", "queue_full", "rate_limit_error"},
    [GW_E_INTERNAL] = {500, "server_error", "internal_error", "api_error"},
    [GW_E_NOT_IMPLEMENTED] = {501, "server_error", "not_implemented", "api_error"},
    [GW_E_UPSTREAM] = {502, "upstream_error", "upstream_error", "api_error"},
    [GW_E_NOT_READY] = {503, "server_error", "not_ready", "overloaded_error"},
    [GW_E_TIMEOUT] = {504, "timeout_error", "timeout", "api_error"},
};

int gw_error_status(gw_error_kind k) { return kinds[k].status; }
const char *gw_error_type(gw_error_kind k) { return kinds[k].type; }
const char *gw_error_code(gw_error_kind k) { return kinds[k].code; }

json_t *gw_error_json(gw_error_kind k, const char *message) {
    return json_pack("{s:{s:s, s:s, s:s}}", "error", "message", message ? message : "", "type", kinds[k].type, "code",
                     kinds[k].code);
}

json_t *gw_error_json_in(gw_dialect dialect, gw_error_kind k, const char *message) {
    const char *m = message ? message : "";
    switch (dialect) {
    case GW_DIALECT_ANTHROPIC:
        return json_pack("{s:s, s:{s:s, s:s}}", "type", "error", "error", "type", kinds[k].anthropic_type, "message", m);
    case GW_DIALECT_OLLAMA: return json_pack("{s:s}", "error", m);
    case GW_DIALECT_OPENAI:
    default: return gw_error_json(k, m);
    }
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
