/*
 * relay.h: a remote target's answer rendered in a route's own API (relay.c).
 */
#ifndef SIPP_GATEWAY_RELAY_H
#define SIPP_GATEWAY_RELAY_H

#include "gateway/format.h"
#include "gateway/upstream.h"

/* Sends body (a chat-completions body, borrowed) to the remote target t and renders its answer
 * with fmt (a format of typed events): as one body; or, when g asks for a stream, relayed as the upstream
 * streams it (g is then taken over). A raw prompt (api GW_API_COMPLETION) is refused with 501. Replies
 * always. */
void gw_relay(gw_call *call, gw_target *t, gw_gen *g, json_t *body, gw_api api, const gw_format *fmt);

#endif
