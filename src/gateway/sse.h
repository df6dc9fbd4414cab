/*
 * sse.h: server-sent events framing (sse.c). Depends on nothing else in the gateway.
 */
#ifndef SIPP_GATEWAY_SSE_H
#define SIPP_GATEWAY_SSE_H

#include <jansson.h>
#include <stdbool.h>

#include "util/util.h"

/* "data: JSON\n\n" (event NULL) or "event: NAME\ndata: JSON\n\n"; steals j. */
bool gw_sse_json(sipp_buf *out, const char *event, json_t *j);
/* "data: [DONE]\n\n" */
bool gw_sse_done(sipp_buf *out);

#endif
