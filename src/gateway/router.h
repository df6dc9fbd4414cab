/*
 * router.h: the route table (router.c): the gw_handler the connection layer runs requests with.
 */
#ifndef SIPP_GATEWAY_ROUTER_H
#define SIPP_GATEWAY_ROUTER_H

#include "gateway/connection.h"

/* dispatch: guard, method checks, the route; finish: admission permit, metrics, the log line. */
extern const gw_handler gw_router;

#endif
