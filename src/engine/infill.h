/*
 * infill.h: the prompt of a fill-in-the-middle request, as llama-server builds it (infill.c).
 */
#ifndef SIPP_ENGINE_INFILL_H
#define SIPP_ENGINE_INFILL_H

#include "model/model.h"
#include "sipp.h"

/* sipp_engine_infill_tokens for a model and a context of n_ctx tokens; err gets the message. */
sipp_status sipp_infill_build(sipp_model *m, int n_ctx, const sipp_infill_request *rq, int32_t **tokens,
                              size_t *n_tokens, char *err);

#endif
