/*
 * spec_cost.h: the cost model that picks speculation's draft length (spec_cost.c; internal).
 *
 * A decayed line fit t = a + b * rows of a decode's milliseconds, a decayed per-token acceptance,
 * and the pure chooser of the draft length that maximises the expected tokens per millisecond.
 */
#ifndef SIPP_SPEC_COST_H
#define SIPP_SPEC_COST_H

#include <stdbool.h>

/* Exponentially decayed least squares of y (ms) against x (rows): running sums, no arrays. */
typedef struct spec_fit {
    double w, sx, sy, sxx, sxy; /* decayed weight and sums */
    double x_first;             /* the first sample's x */
    bool any, two_x;            /* a sample; samples at two distinct x */
} spec_fit;

/* A cost line: ms = a + b * rows. */
typedef struct spec_line {
    double a, b;
} spec_line;

/* Decayed counts of accepted proposals and of rejections, for one slot. */
typedef struct spec_accept {
    double ok, fail;
} spec_accept;

void spec_fit_add(spec_fit *f, double rows, double ms);
/* The fitted line; the slope is never negative (more rows never cost less; noise can say so). */
spec_line spec_fit_line(const spec_fit *f);
/* Whether the fit has seen samples at two distinct row counts (it can tell a from b). */
bool spec_fit_ready(const spec_fit *f);

/* The counts of a slot that has verified nothing yet: the prior alone. */
spec_accept spec_accept_new(void);
/* The prior of a new request on an engine whose earlier verifications are in history: their
 * acceptance, with the weight of spec_accept_new's prior (spec_accept_new itself when history holds
 * nothing yet). */
spec_accept spec_accept_prior(const spec_accept *history);
/* A verification of n proposals of which a were accepted: a successes, one failure when a < n. */
void spec_accept_add(spec_accept *c, int n, int a);
/* The estimated probability that the next proposed token is accepted. */
double spec_accept_p(const spec_accept *c);

/* Expected tokens one step emits for a slot of acceptance p that proposes k tokens: the token the
 * target gives after the accepted ones plus the expected accepted run, sum_{i=0..k} p^i. */
double spec_expected_tokens(double p, int k);

/* The draft length k in {0} and [k_min, max room] that maximises the expected emitted tokens per millisecond
 * of one step over n generating slots: slot i proposes min(k, room[i]) tokens (room 0: it does not speculate)
 * and its proposals are accepted with probability p[i]. The step costs T(rows), with rows = sum of (1 + its
 * proposal), plus k draft decodes of D(slots that propose) each (prompt lookup: D = 0). 0 (plain decoding)
 * unless some k > 0 is strictly faster by the model. */
int spec_choose_k(spec_line target, spec_line draft, const double *p, const int *room, int n, int k_min);

#endif
