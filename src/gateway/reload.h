/*
 * reload.h: SIGHUP: the configuration file read again and applied while the gateway serves
 * (reload.c). Sits on residency.h and targets.h; listener.c calls it when the signal comes.
 */
#ifndef SIPP_GATEWAY_RELOAD_H
#define SIPP_GATEWAY_RELOAD_H

#include <stdbool.h>

#include "gateway/server.h"
#include "util/util.h"

/* How the configuration is made again: `sipp serve` reads its file and applies its command line
 * as it did at start, validated and checked as --check does. build fills out (initialised by the
 * caller with gw_config_init) or returns false with one problem a line in errs. */
typedef struct gw_reloader {
    bool (*build)(void *arg, gw_config *out, sipp_buf *errs);
    void *arg;
} gw_reloader;

/* Reads the configuration again (rl NULL: there is no file; says so) and applies it: targets
 * added, removed or changed are loaded, drained and unloaded as on a start and a stop, the others
 * serve on untouched. A file with problems changes nothing (they are logged). Settings the running
 * server took at start keep their values, each logged as needing a restart. */
void gw_reload(gw_server *srv, const gw_reloader *rl);
/* Frees what reloads replaced, after the targets have stopped. */
void gw_reloads_free(gw_server *srv);

#endif
