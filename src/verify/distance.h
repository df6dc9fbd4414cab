/*
 * distance.h: comparing two sets of logits (distance.c): drift metrics, top-k, and the thresholds
 * as JSON.
 */
#ifndef SIPP_VERIFY_DISTANCE_H
#define SIPP_VERIFY_DISTANCE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sipp.h"

#define VERIFY_TOPK 5 /* top-k overlap and the recorded top tokens per position */

/* Drift of one set of logits against another, accumulated over many positions (rows). */
typedef struct verify_metrics {
    long positions;
    double max_abs; /* largest |a - b| over every logit */
    double rms;     /* sqrt(mean (a - b)^2) over every logit */
    double kl_mean; /* mean over positions of KL(softmax(ref) || softmax(other)), nats */
    double kl_max;  /* the worst position's KL */
    double top1;    /* fraction of positions whose argmax agrees */
    double top5;    /* mean fraction of the reference's top-5 tokens also in the other's top-5 */
    /* running sums, internal to verify_metrics_add / verify_metrics_finish */
    double sum_sq, sum_kl, sum_top5;
    long n_values, top1_hits;
} verify_metrics;

/* Adds n_rows positions of n_vocab logits each. */
void verify_metrics_add(verify_metrics *m, const float *ref, const float *other, int n_rows, int n_vocab);
void verify_metrics_finish(verify_metrics *m);
json_t *verify_metrics_json(const verify_metrics *m);
/* Reads back what verify_metrics_json wrote; false when a field is missing. */
bool verify_metrics_from_json(const json_t *j, verify_metrics *m);

/* The largest |v[i]| (infinite when one is not finite): the scale a relative difference is taken
 * against. */
double verify_max_magnitude(const float *v, size_t n);

/* The k largest logits of a row, largest first. */
void verify_topk(const float *row, int n_vocab, int k, int32_t *ids, float *values);

json_t *verify_thresholds_json(const sipp_verify_thresholds *t);
/* Overwrites the fields present in j. */
void verify_thresholds_from_json(const json_t *j, sipp_verify_thresholds *t);

#endif
