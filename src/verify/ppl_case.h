/*
 * ppl_case.h: the perplexity case (ppl_case.c).
 */
#ifndef SIPP_VERIFY_PPL_CASE_H
#define SIPP_VERIFY_PPL_CASE_H

#include <jansson.h>
#include <stddef.h>

#include "sipp.h"
#include "verify/verify_types.h"

/* Reads the text file (*text malloc'ed). SIPP_ERR_IO naming it when it cannot be read or is empty. */
sipp_status verify_ppl_read(const char *path, char **text, size_t *len, char *err);
sipp_status verify_ppl_pass(const verify_config *cfg, sipp_model *m, verify_result *out, char *err);
/* |ppl - ref| / ref; infinite when either is not a finite positive number. */
double verify_ppl_drift(double ppl, double ref);
json_t *verify_ppl_json(const verify_ppl_result *r, const verify_ppl_result *ref);
/* The top-level "perplexity" object: the text (path, sha256, bytes), ctx_size, chunks; or why skipped. */
json_t *verify_ppl_case_json(const char *path, const verify_config *cfg);
/* The main weight type's place on the quantization ladder (f32/f16/bf16 0, q8_0 1, q6 2, q5 3, q4 4,
 * q3 5, q2 6...): the steps between two models' tensor_types objects (manifest "model.tensor_types"). */
int verify_quant_steps(const json_t *types_a, const json_t *types_b, const char **main_a,
                       const char **main_b);

#endif
