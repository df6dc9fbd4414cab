/*
 * model_watch.h: the local targets' files watched for changes (model_watch.c), which it reports to
 * residency.c. Sits on server.h; targets.c starts and stops it.
 */
#ifndef SIPP_GATEWAY_MODEL_WATCH_H
#define SIPP_GATEWAY_MODEL_WATCH_H

#include "gateway/server.h"

typedef struct gw_model_watch gw_model_watch;

/* Starts the thread that watches every local target's model, mmproj and draft files and their
 * directories. NULL (after a line on stderr) when inotify cannot be used: a changed file is then
 * seen at its target's next request. */
gw_model_watch *gw_model_watch_start(gw_server *srv);
/* Stops and frees it (NULL: nothing). */
void gw_model_watch_stop(gw_model_watch *w);

#endif
