/*
 * lora.h: an engine's LoRA scales (internal; the API is in sipp.h).
 *
 * The adapters are the model's (loaded with it: model/lora.c), and one set of scales is
 * applied to the context at a time (llama_set_adapters_lora): the set of the requests in the slots.
 * The scheduler admits a request into a slot only when its scales equal that set, or when no slot is
 * busy (the set then becomes its); the first queued request of another set stops the admission of
 * those behind it, so the running set drains and the queue is served in order. A slot's KV holds
 * tokens computed under one set (its lora_sig); a request of another set reuses none of it.
 */
#ifndef SIPP_ENGINE_LORA_H
#define SIPP_ENGINE_LORA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sipp.h"

/* The state (sipp_lora_state) is a member of the engine (state.h). */

/* The engine's scales, starting at the model's defaults. */
sipp_status sipp_lora_open(sipp_engine *e, char *err);
void sipp_lora_close(sipp_engine *e);

/* The request's scales and their signature (r->lora_scales, r->lora_sig), from p or the defaults. */
sipp_status sipp_lora_of_request(sipp_engine *e, const sipp_request_params *p, float **scales, uint64_t *sig,
                                 char *err);

/* May a request of these scales enter a slot now? busy: a slot holds a request. Under mu; on true
 * with no slot busy the running set becomes the request's. */
bool sipp_lora_admit(sipp_engine *e, const float *scales, uint64_t sig, bool busy);

/* Before a decode (engine thread): the running set on the context, if it is not there yet. */
void sipp_lora_apply(sipp_engine *e);

#endif
