/*
 * rate_limit.h: the per-client token-bucket rate limit (rate_limit.c).
 */
#ifndef SIPP_GATEWAY_RATE_LIMIT_H
#define SIPP_GATEWAY_RATE_LIMIT_H

#include <stdbool.h>

#include "gateway/config.h"
#include "gateway/server.h"

gw_limits *gw_limits_new(const gw_config *cfg);
void gw_limits_free(gw_limits *l);
/* Takes one request from the client's bucket. False (with the seconds until the next one) when
 * the client is over its rate. Always true without a configured rate limit. */
bool gw_rate_take(gw_limits *l, const char *client, int *retry_after_s);

#endif
