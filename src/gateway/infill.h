/*
 * infill.h: fill-in-the-middle on a local target, POST /infill (infill.c).
 */
#ifndef SIPP_GATEWAY_INFILL_H
#define SIPP_GATEWAY_INFILL_H

#include "gateway/connection.h"
#include "gateway/request_parse.h"
#include "gateway/server.h"

/* Builds g's FIM prompt for the ready local target t and generates it (a gw_dispatch.local answer);
 * replies always. */
void gw_infill(gw_call *call, gw_target *t, gw_gen *g);

#endif
