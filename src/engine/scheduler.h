/*
 * scheduler.h: which request goes to which slot, and what each step decodes: one llama_decode
 * (scheduler.c), driven by the engine thread.
 */
#ifndef SIPP_ENGINE_SCHEDULER_H
#define SIPP_ENGINE_SCHEDULER_H

#include "engine/request.h"
#include "engine/slot.h"
#include "sipp.h"

/* Moves queued requests into free slots (reserving each slot, pinning its key) and unlinks the
 * queued requests that were cancelled or expired into *dropped. Called with engine->mu held; the
 * caller starts (sipp_slot_start) and drops (sipp_sched_cancel) them after releasing the lock.
 * `starting` and `starting_slot` hold room for one entry per slot. */
void sipp_sched_assign(sipp_engine *e, sipp_request **dropped, sipp_request **starting, int *starting_slot,
                       int *n_start);

/* Prepares a slot reserved by sipp_sched_assign for its request: reuses the longest cached prefix
 * (its own or another slot's) and builds the sampler. SIPP_ERR_NO_MEMORY on allocation failure. */
sipp_status sipp_slot_start(sipp_engine *e, slot *s, sipp_request *r);

/* Ends a slot's request and frees the slot; the KV stays for the next request to reuse. */
void sipp_slot_finish(sipp_engine *e, slot *s, sipp_finish_reason reason, sipp_status status,
                      const char *error);

/* Ends a cancelled or timed-out request, in slot s or (s NULL) still queued. */
void sipp_sched_cancel(sipp_engine *e, slot *s, sipp_request *r);

/* One step: a batch of every generating slot's next token and prompt chunks, one llama_decode,
 * then sampling and text release for every slot that produced logits. */
void sipp_sched_step(sipp_engine *e);

/* Whether any slot holds a request. Called with engine->mu held. */
bool sipp_sched_has_active(const sipp_engine *e);

#endif
