/*
 * targets.h: the targets at run time (targets.c): local models loading in the background,
 * remote targets' upstreams, readiness.
 */
#ifndef SIPP_GATEWAY_TARGETS_H
#define SIPP_GATEWAY_TARGETS_H

#include <stdbool.h>

#include "gateway/server.h"

/* Starts loading every local target in the background (one after the other, in config order) and
 * makes every remote target's upstream. */
bool gw_targets_start(gw_server *srv, char *err);
/* Waits for the loader and frees engines, models and upstreams. */
void gw_targets_stop(gw_server *srv);
gw_target *gw_target_find(gw_server *srv, const char *name);
bool gw_targets_ready(gw_server *srv);

#endif
