/*
 * targets.h: the targets at run time (targets.c): the table, remote targets' upstreams, readiness;
 * the local models' loading is residency.h's.
 */
#ifndef SIPP_GATEWAY_TARGETS_H
#define SIPP_GATEWAY_TARGETS_H

#include <stdbool.h>

#include "gateway/residency.h"
#include "gateway/server.h"

/* Entries the target table has room for: the config's and, with a models directory, GW_MAX_DISCOVERED. */
size_t gw_targets_capacity(const gw_config *c);
/* Makes every remote target's upstream and starts residency.c, which loads the start-up targets in
 * the background (one after the other, in config order) and the others on demand. */
bool gw_targets_start(gw_server *srv, char *err);
/* Waits for the loader and frees engines, models and upstreams. */
void gw_targets_stop(gw_server *srv);
gw_target *gw_target_find(gw_server *srv, const char *name);
bool gw_targets_ready(gw_server *srv);

#endif
