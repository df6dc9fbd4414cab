/*
 * auth.c: bearer tokens and their target scopes.
 *
 * Secrets come from environment variables named in [[tokens]] (never from the config file, which
 * tends to end up in repositories). With no [[tokens]] every call passes; config.c then refuses a
 * non-loopback listen address unless allow_unauthenticated is set.
 *
 * The token comes from 'Authorization: Bearer TOKEN', or from 'x-api-key: TOKEN' (what Anthropic's
 * clients send) when there is no Authorization header; both name the same [[tokens]].
 *
 * A presented token is compared with each secret through SHA-256 and CRYPTO_memcmp: the digests
 * have a fixed length and the comparison a fixed time, so the response time says nothing about
 * how much of a secret a guess got right (the digest is libsipp's one SHA-256, sipp_sha256_hex).
 * The header's whole value is the token: one with a NUL byte in it ("Bearer SECRET\0junk") is
 * refused where the HTTP library reports the whole value; libmicrohttpd 0.9.75 cuts the value at
 * the NUL itself, so there only the part before it, the exact secret, is compared.
 */
#include <openssl/crypto.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "gateway/http/http.h"

#define BEARER "Bearer "
#define DIGEST_SIZE SIPP_SHA256_HEX

static bool digest(const char *s, char out[DIGEST_SIZE]) { return sipp_sha256_hex(s, strlen(s), out); }

gw_auth_result gw_auth_identify(gw_call *call) {
    const gw_config *c = call->srv->cfg;
    if (c->n_tokens == 0) return GW_AUTH_OK;
    size_t len = 0;
    const char *h = gw_call_header_n(call, "Authorization", &len);
    const char *given = NULL;
    if (h && *h) {
        if (strlen(h) != len || strncasecmp(h, BEARER, strlen(BEARER)) != 0) return GW_AUTH_INVALID;
        given = h + strlen(BEARER);
    } else {
        given = gw_call_header_n(call, "x-api-key", &len); /* Anthropic's clients send this */
        if (!given || !*given) return GW_AUTH_MISSING;
        if (strlen(given) != len) return GW_AUTH_INVALID;
    }
    while (*given == ' ')
        given++;
    char want[DIGEST_SIZE], got[DIGEST_SIZE];
    if (!digest(given, got)) return GW_AUTH_INVALID;
    const gw_token_config *match = NULL;
    for (size_t i = 0; i < c->n_tokens; i++) {
        if (!c->tokens[i].secret) continue;
        if (!digest(c->tokens[i].secret, want)) continue;
        if (CRYPTO_memcmp(want, got, DIGEST_SIZE) == 0 && !match) match = &c->tokens[i];
    }
    if (!match) return GW_AUTH_INVALID;
    call->token = match;
    snprintf(call->client, sizeof call->client, "%s", match->caller);
    return GW_AUTH_OK;
}

void gw_auth_refuse(gw_call *call, gw_auth_result why) {
    size_t len = 0;
    const char *h = gw_call_header_n(call, "Authorization", &len);
    if (why == GW_AUTH_MISSING)
        gw_reply_error(call, GW_E_MISSING_KEY,
                       "this server needs a token: send the header 'Authorization: Bearer TOKEN' (or "
                       "'x-api-key: TOKEN')");
    else if (h && *h && (strlen(h) != len || strncasecmp(h, BEARER, strlen(BEARER)) != 0))
        gw_reply_error(call, GW_E_INVALID_KEY, "the Authorization header must be 'Bearer TOKEN'");
    else
        gw_reply_error(call, GW_E_INVALID_KEY,
                       h && *h ? "the bearer token is not valid for this server"
                               : "the x-api-key token is not valid for this server");
}

bool gw_auth_allows(const gw_call *call, const gw_target_config *target) {
    const gw_token_config *t = call->token;
    if (!t || t->n_targets == 0) return true;
    for (size_t i = 0; i < t->n_targets; i++)
        if (strcmp(t->targets[i], target->name) == 0) return true;
    return false;
}

bool gw_auth_admin(const gw_call *call) {
    return call->srv->cfg->n_tokens == 0 || (call->token && call->token->admin);
}

const char *gw_auth_caller(const gw_call *call) { return call->token ? call->token->caller : ""; }
