/*
 * auth.h: bearer tokens and per-token target scopes (auth.c).
 */
#ifndef SIPP_GATEWAY_AUTH_H
#define SIPP_GATEWAY_AUTH_H

#include <stdbool.h>

#include "gateway/connection.h"

typedef enum gw_auth_result {
    GW_AUTH_OK,      /* no tokens configured, or a valid one: call->token and call->client are set */
    GW_AUTH_MISSING, /* no Authorization header */
    GW_AUTH_INVALID, /* not "Bearer TOKEN", or no token matches */
} gw_auth_result;

/* Checks the Authorization header without replying. */
gw_auth_result gw_auth_identify(gw_call *call);
/* Replies 401 for a failed identification. */
void gw_auth_refuse(gw_call *call, gw_auth_result why);
/* True when the call's token may use the target: a target it may not use is, to that caller, a
 * target that does not exist. */
bool gw_auth_allows(const gw_call *call, const gw_target_config *target);
/* True when the call may load and unload models: no tokens are configured, or its token has
 * admin = true. */
bool gw_auth_admin(const gw_call *call);
/* Who the call is, for what it keeps (stored responses): its token's caller name, or "" without
 * tokens (where every call is the same, admin, caller). */
const char *gw_auth_caller(const gw_call *call);

#endif
