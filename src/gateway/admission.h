/*
 * admission.h: which target a generation runs on and whether it may run now (admission.c): the
 * target lookup as the caller's token sees it, readiness, and the permits of
 * max_concurrent_requests with a queue of max_queue.
 */
#ifndef SIPP_GATEWAY_ADMISSION_H
#define SIPP_GATEWAY_ADMISSION_H

#include <stdbool.h>

#include "gateway/connection.h"
#include "gateway/server.h"

gw_admission *gw_admission_new(const gw_config *cfg);
void gw_admission_free(gw_admission *a);

typedef enum gw_admit_result {
    GW_ADMIT_OK,
    GW_ADMIT_QUEUE_FULL,
    GW_ADMIT_TIMEOUT,
    GW_ADMIT_ABANDONED
} gw_admit_result;
/* Waits for one of max_concurrent_requests permits until deadline_ms (sipp_now_ms clock); at most
 * max_queue calls wait. abandoned() is polled while waiting. */
gw_admit_result gw_admit(gw_admission *a, double deadline_ms, bool (*abandoned)(void *), void *arg);
void gw_release(gw_admission *a);
/* How many calls hold a permit / wait for one. */
void gw_admission_counts(gw_admission *a, int *active, int *queued);

/* The target a generation names as the call's token sees it (NULL name: the only target), or NULL
 * after replying 400 (no name and several targets) or 404 (unknown or hidden by the token's scope). */
gw_target *gw_call_lookup(gw_call *call, const char *name);
/* gw_call_lookup, then checks the target is ready and takes an admission permit (waiting in the
 * queue when needed). On failure it has replied and returns NULL. */
gw_target *gw_call_target(gw_call *call, const char *name);
/* Gives back the call's permit, if it holds one (the request is over). */
void gw_call_release(gw_call *call);

#endif
