/*
 * guard.c: what a request must pass before its route runs.
 *
 * A gateway without tokens on loopback is reachable from every web page the user opens: a page
 * cannot read the answers (CORS), but it can send requests, and with DNS rebinding
 * (attacker.example resolving to 127.0.0.1) it can even read them. So, without [[tokens]]:
 *   - Host must name this server: a loopback name ("localhost", "*.localhost"), an IP address,
 *     the listen host itself, or an entry of [server] allowed_hosts ("*" allows any). Rebinding
 *     needs a name the attacker controls, so an IP address is safe: the page it loaded is then of
 *     that address's own origin. A rebound name is refused: 403 host_not_allowed.
 *   - A request with an Origin must come from the same origin (the web page at "/") or one in
 *     allowed_origins: 403 origin_not_allowed. Browsers send Origin on every cross-site POST.
 *   - A POST body must be application/json: 415. Browsers send text/plain, form types or none at
 *     all without a preflight, and a preflight (OPTIONS) is refused for a foreign origin. Ollama's
 *     routes (under /api/) also take no Content-Type, text/plain, or the form type curl -d sends
 *     (Ollama's own examples are `curl -d '{"model": ...}'`), the body still parsed as JSON, but
 *     only from a request without Origin: browsers send Origin on every cross-site POST, and a form
 *     a page posts is exactly the cross-site request this guards against. OpenAI's audio route
 *     takes multipart/form-data, which a page's form can post cross-site without a preflight too:
 *     only from a request without Origin, from this server's own page (same origin: its Hold to
 *     talk uploads a recording), or from an origin in allowed_origins.
 * With tokens none of this is needed: a page cannot attach the bearer token without a preflight.
 *
 * Every request also gets two checks whose failures echo nothing unsafe: the method must be an
 * HTTP token, and an Origin printable ASCII (400 otherwise).
 *
 * Bearer tokens and the rate limit. A failed token is charged to the client's IP address: once its
 * bucket is spent, the answer is 429 with Retry-After, as for a valid caller over its rate; with
 * the minimum secret length (config.c) guessing is hopeless anyway, and this keeps it from costing
 * the server. Without a configured rate limit there is no bucket to spend.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gateway/http/http.h"

#define GW_CORS_MAX_AGE "600"
#define GW_MAX_HOST 256
#define GW_LOCALHOST "localhost"
#define GW_LOCALHOST_SUFFIX ".localhost"
#define GW_JSON_TYPE "application/json"
#define GW_TEXT_TYPE "text/plain"
#define GW_FORM_TYPE "application/x-www-form-urlencoded" /* what curl -d sends */
#define GW_MULTIPART_TYPE "multipart/form-data"
#define GW_SCHEME "http://"
#define GW_ASCII_FIRST 0x21 /* printable ASCII without the space */
#define GW_ASCII_LAST 0x7e

static bool is_tchar(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool is_token(const char *s) {
    if (!*s) return false;
    for (; *s; s++)
        if (!is_tchar(*s)) return false;
    return true;
}

static bool is_printable(const char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < GW_ASCII_FIRST || (unsigned char)*s > GW_ASCII_LAST) return false;
    return true;
}

static bool in_list(char *const *list, size_t n, const char *v) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(list[i], "*") == 0 || strcasecmp(list[i], v) == 0) return true;
    return false;
}

/* The host part of a Host header: without the port, an IPv6 address without its brackets. */
static bool host_name(const char *host, char *out, size_t size) {
    const char *end;
    if (host[0] == '[') {
        end = strchr(host, ']');
        if (!end) return false;
        host++;
    } else {
        end = strchr(host, ':');
        if (!end) end = host + strlen(host);
    }
    size_t n = (size_t)(end - host);
    if (n == 0 || n >= size) return false;
    memcpy(out, host, n);
    out[n] = '\0';
    return true;
}

static bool is_localhost(const char *name) {
    size_t n = strlen(name), sn = strlen(GW_LOCALHOST_SUFFIX);
    return strcasecmp(name, GW_LOCALHOST) == 0 ||
           (n > sn && strcasecmp(name + n - sn, GW_LOCALHOST_SUFFIX) == 0);
}

static bool is_address(const char *name) {
    struct in_addr a4;
    struct in6_addr a6;
    return inet_pton(AF_INET, name, &a4) == 1 || inet_pton(AF_INET6, name, &a6) == 1;
}

/* Without tokens: is the Host this server's (or an absolute-form target's authority, which stands
 * for it)? A request without Host (HTTP/1.0) passes: browsers always send one. */
static bool host_allowed(gw_call *call) {
    const gw_config *c = call->srv->cfg;
    const char *host = gw_call_host(call);
    if (!host) return true;
    char name[GW_MAX_HOST];
    if (!host_name(host, name, sizeof name)) return false;
    return is_localhost(name) || is_address(name) || strcasecmp(name, c->host) == 0 ||
           in_list(c->allowed_hosts, c->n_allowed_hosts, name);
}

/* Same origin: the page this server served, as the browser names it ("http://" + Host). */
static bool same_origin(gw_call *call, const char *origin) {
    const char *host = gw_call_host(call);
    size_t n = strlen(GW_SCHEME);
    return host && strncasecmp(origin, GW_SCHEME, n) == 0 && strcasecmp(origin + n, host) == 0;
}

static const char *origin_echo(const gw_config *c, const char *origin) {
    for (size_t i = 0; i < c->n_allowed_origins; i++) {
        if (strcmp(c->allowed_origins[i], "*") == 0) return "*";
        if (strcmp(c->allowed_origins[i], origin) == 0) return c->allowed_origins[i];
    }
    return NULL;
}

bool gw_guard_request(gw_call *call) {
    const gw_config *c = call->srv->cfg;
    bool open = c->n_tokens == 0;
    if (!is_token(call->method)) {
        gw_reply_error(call, GW_E_BAD_REQUEST, "the request method '%s' is not an HTTP method", call->method);
        return false;
    }
    if (open && !host_allowed(call)) {
        gw_reply_error(
            call, GW_E_HOST_FORBIDDEN,
            "%s '%s' is not this server's; a server without [[tokens]] answers only loopback names "
            "(add the name to [server] allowed_hosts)",
            call->authority ? "the request target's host" : "Host", gw_call_host(call));
        return false;
    }
    const char *origin = gw_call_header(call, "Origin");
    if (!origin) return true;
    if (!is_printable(origin)) {
        gw_reply_error(call, GW_E_BAD_REQUEST, "the Origin header '%s' is not a valid origin", origin);
        return false;
    }
    call->allow_origin = origin_echo(c, origin);
    bool preflight = strcmp(call->method, "OPTIONS") == 0;
    if (!call->allow_origin && (preflight || (open && !same_origin(call, origin)))) {
        gw_reply_error(call, GW_E_ORIGIN_FORBIDDEN, "origin '%s' is not in [server] allowed_origins", origin);
        return false;
    }
    return true;
}

void gw_guard_preflight(gw_call *call) {
    gw_reply_text(call, 204, NULL, NULL, 0);
    if (!call->allow_origin) return;
    gw_reply_header(call, "Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
    gw_reply_header(call, "Access-Control-Allow-Headers",
                    "Authorization, Content-Type, x-request-id, x-api-key, anthropic-version");
    gw_reply_header(call, "Access-Control-Max-Age", GW_CORS_MAX_AGE);
}

/* The media type want, optionally with parameters ("; charset=utf-8"). */
static bool is_type(const char *type, const char *want) {
    size_t n = strlen(want);
    return type && strncasecmp(type, want, n) == 0 && (type[n] == '\0' || type[n] == ';' || type[n] == ' ');
}

/* Whether a POST body's Content-Type is one this route takes. Ollama's clients send none or
 * text/plain, and its curl examples (curl -d) the form type; such a body is taken (as JSON) only
 * from a request without Origin: a browser's cross-site POST always carries one, and with one the
 * body must be JSON. A multipart form, which a page's form can post, likewise, or from this
 * server's own page or an origin allowed_origins names. */
static bool body_type_ok(gw_call *call, gw_body_kind body) {
    const char *type = gw_call_header(call, "Content-Type");
    const char *origin = gw_call_header(call, "Origin");
    bool no_origin = !origin;
    if (body == GW_BODY_FORM)
        return is_type(type, GW_MULTIPART_TYPE) &&
               (no_origin || call->allow_origin || same_origin(call, origin)); /* the page at "/" */
    if (is_type(type, GW_JSON_TYPE)) return true;
    return body == GW_BODY_OLLAMA && no_origin &&
           (!type || is_type(type, GW_TEXT_TYPE) || is_type(type, GW_FORM_TYPE));
}

static void refuse_rate(gw_call *call, const char *who, int retry) {
    call->retry_after_s = retry;
    gw_reply_error(call, GW_E_RATE_LIMITED,
                   "'%s' is over the rate limit of %d requests per minute; retry in %d s", who,
                   call->srv->cfg->rate_requests_per_minute, retry);
}

bool gw_guard_route(gw_call *call, gw_body_kind body) {
    gw_server *srv = call->srv;
    if (srv->cfg->n_tokens == 0 && strcmp(call->method, "POST") == 0 && !body_type_ok(call, body)) {
        const char *type = gw_call_header(call, "Content-Type");
        gw_reply_error(call, GW_E_MEDIA_TYPE, "the body's Content-Type is '%s'; send 'Content-Type: %s'",
                       type ? type : "(none)", body == GW_BODY_FORM ? GW_MULTIPART_TYPE : GW_JSON_TYPE);
        return false;
    }
    int retry = 0;
    gw_auth_result r = gw_auth_identify(call);
    if (r != GW_AUTH_OK) {
        if (!gw_rate_take(srv->limits, call->address, &retry))
            refuse_rate(call, call->address, retry);
        else
            gw_auth_refuse(call, r);
        return false;
    }
    if (!gw_rate_take(srv->limits, call->client, &retry)) {
        refuse_rate(call, call->client, retry);
        return false;
    }
    return true;
}
