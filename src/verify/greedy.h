/*
 * greedy.h: an engine for a case, a greedy continuation through it, and how far two continuations
 * agree (greedy.c).
 */
#ifndef SIPP_VERIFY_GREEDY_H
#define SIPP_VERIFY_GREEDY_H

#include <jansson.h>

#include "sipp.h"
#include "verify/verify_types.h"

/* Leading tokens two texts share, both tokenized with vocab; *n_ref: tokens of ref. Equal texts
 * count as fully equal. */
int verify_token_agreement(sipp_model *vocab, const char *ref, const char *other, int *n_ref);

/* An engine of one slot with room for prompt_positions and the greedy continuation. */
sipp_status verify_engine_new(const verify_config *cfg, sipp_model *m, int prompt_positions,
                              const char *backend, sipp_engine **e, char *err);
/* A greedy continuation of rp through engine e (temperature 0, end-of-generation ignored, max_tokens
 * cfg->greedy_tokens); *text malloc'ed. what names the input in errors ("prompt 2"). */
sipp_status verify_greedy(const verify_config *cfg, sipp_engine *e, sipp_request_params *rp,
                          const char *backend, const char *what, char **text, char *err);

/* One greedy continuation as the manifest records it: {sha256 (of the bytes), text (valid UTF-8),
 * agree_tokens, ref_tokens}. */
json_t *verify_greedy_json(const char *generated, int agree, int ref_tokens);

#endif
