/*
 * against.h: checking a recorded manifest's contracts on this machine (against.c).
 */
#ifndef SIPP_VERIFY_AGAINST_H
#define SIPP_VERIFY_AGAINST_H

#include <jansson.h>
#include <stdbool.h>

#include "sipp.h"

/* Compares this machine's run with a manifest, contract by contract; adds "contracts", "context" and
 * "against_passed" to report. Returns true when every checked contract holds. */
bool verify_against(sipp_model *vocab, const json_t *recorded, const json_t *current,
                    const sipp_verify_thresholds *t, json_t *report);

#endif
