/*
 * targets.h: the targets at run time (targets.c): the table, remote targets' upstreams, readiness;
 * the local models' loading is residency.h's.
 */
#ifndef SIPP_GATEWAY_TARGETS_H
#define SIPP_GATEWAY_TARGETS_H

#include <stdbool.h>

#include "gateway/residency.h"
#include "gateway/server.h"

/* Targets reloads of the configuration may add while the server runs, all reloads together (a target
 * removed and added again takes its old entry back when it has drained). */
#define GW_MAX_RELOAD_ADDED 64

/* Entries the target table has room for: the config's, GW_MAX_DISCOVERED with a models directory,
 * and GW_MAX_RELOAD_ADDED with a configuration file (reload.c). */
size_t gw_targets_capacity(const gw_config *c);
/* Makes every remote target's upstream and starts residency.c, which loads the start-up targets in
 * the background (one after the other, in config order) and the others on demand. */
bool gw_targets_start(gw_server *srv, char *err);
/* Waits for the loader and frees engines, models and upstreams. */
void gw_targets_stop(gw_server *srv);
gw_target *gw_target_find(gw_server *srv, const char *name);
bool gw_targets_ready(gw_server *srv);
/* The one target in the configuration, or NULL when there are several (or none). */
gw_target *gw_targets_only(gw_server *srv);

#endif
