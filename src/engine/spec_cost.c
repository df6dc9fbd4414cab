/*
 * spec_cost.c: how long a draft speculation should propose this step, from costs the engine measures.
 *
 * Speculation trades rows for steps. Verifying k proposals behind a slot's next token puts k + 1
 * rows of that slot in the target's batch (each with logits) and, with a draft model, costs k draft
 * decodes; it pays when the tokens it confirms outweigh what the extra rows cost. One stream on a
 * memory-bound machine reads the weights once for 1 or 9 rows, so verification is nearly free; a
 * compute-bound CPU, or 4 streams whose plain batch already shares the weight reads, pays for every
 * row, and a fixed draft_max loses there. So the engine measures and decides per step.
 *
 * Costs. Each generation step (only generating slots' rows, no prompt chunk) is a sample (rows, ms)
 * of the target: its llama_decode and the reading of its rows' logits (an argmax over the
 * vocabulary per row is not free); each draft decode, with the slots' picks from it, a sample of
 * the draft's. A line t = a + b * rows
 * is fitted to each by exponentially decayed least squares: the sums of w, x, y, x^2 and xy, every
 * one multiplied by FIT_DECAY before a sample adds to them, give b = (W Sxy - Sx Sy) / (W Sxx - Sx^2)
 * and a = (Sy - b Sx) / W over roughly the last 1 / (1 - FIT_DECAY) samples, so the line follows a
 * change of load (another process, a thermal limit) within a second or two of decoding.
 *
 * Acceptance. Per slot, the proposals are modelled as accepted independently with probability p
 * until the first rejection. A verification of n proposals with a accepted is a successes and, when
 * a < n, one failure (the proposals after a rejection were never tested); p = successes / (successes
 * + failures), both decayed by ACCEPT_DECAY at every verification. They start at a prior worth
 * PRIOR_OK + PRIOR_FAIL observations: the acceptance of the engine's earlier requests (the same
 * pair on similar text is the best guess for the next), or p = 0.8 on an engine that has verified
 * nothing yet, so a new request drafts until its own evidence says otherwise. A fixed prior costs
 * a pair that is always right: its one prior failure weighs on a short request's estimate (p ~ 0.93
 * over 64 tokens at 100% acceptance), enough to make the chooser propose 3 or 4 where 8 pay more.
 *
 * The expected tokens of a slot proposing k: the step emits the accepted run plus the target's token
 * after it. The run is at least i long with probability p^i, so the expectation is
 *     E(p, k) = sum_{i=0..k} p^i = (1 - p^(k+1)) / (1 - p)     (k + 1 when p = 1).
 * The step's rate with draft length k over n generating slots, slot i proposing k_i = min(k, room_i):
 *     R(k) = sum_i E(p_i, k_i) / (T(sum_i (1 + k_i)) + D(2 n_d) + (k - 1) D(n_d))
 * where n_d counts the slots that propose: the draft decodes each of its k steps for all of them at
 * once, and its first decode also catches up what the target emitted since (the token after the
 * accepted ones, and the last proposal when all were accepted: two rows per slot); prompt lookup
 * costs no decode (D = 0). Plain decoding is R(0) = n / T(n). The chooser takes the k of the highest
 * rate, and k > 0 only when it is strictly above R(0): the model never drafts where it says plain
 * is faster.
 */
#include "engine/spec_cost.h"

#include <math.h>

#define FIT_DECAY (1.0 - 1.0 / 64)    /* a fit remembers about the last 64 decodes */
#define ACCEPT_DECAY (1.0 - 1.0 / 32) /* acceptance remembers about the last 32 verifications */
#define PRIOR_OK 4.0                  /* a new slot's prior: 4 accepted, 1 rejected (p = 0.8) */
#define PRIOR_FAIL 1.0
#define MIN_STEP_MS 1e-3 /* a fitted cost never below this: keeps a rate finite on a noisy fit */
#define MIN_SPREAD 1e-9  /* relative spread of x below which a slope cannot be told */
#define CATCH_UP_ROWS 2  /* rows per slot of the draft's first decode in a step */

void spec_fit_add(spec_fit *f, double x, double y) {
    if (!f->any) {
        f->any = true;
        f->x_first = x;
    } else if (x != f->x_first) {
        f->two_x = true;
    }
    f->w = f->w * FIT_DECAY + 1;
    f->sx = f->sx * FIT_DECAY + x;
    f->sy = f->sy * FIT_DECAY + y;
    f->sxx = f->sxx * FIT_DECAY + x * x;
    f->sxy = f->sxy * FIT_DECAY + x * y;
}

bool spec_fit_ready(const spec_fit *f) { return f->two_x; }

spec_line spec_fit_line(const spec_fit *f) {
    spec_line l = {0, 0};
    if (f->w <= 0) return l;
    double den = f->w * f->sxx - f->sx * f->sx;
    if (f->two_x && den > MIN_SPREAD * f->w * f->sxx) l.b = (f->w * f->sxy - f->sx * f->sy) / den;
    if (l.b < 0) l.b = 0;
    l.a = (f->sy - l.b * f->sx) / f->w;
    return l;
}

spec_accept spec_accept_new(void) { return (spec_accept){PRIOR_OK, PRIOR_FAIL}; }

spec_accept spec_accept_prior(const spec_accept *history) {
    double all = history->ok + history->fail;
    if (!(all > 0)) return spec_accept_new();
    double w = PRIOR_OK + PRIOR_FAIL;
    return (spec_accept){w * history->ok / all, w * history->fail / all};
}

void spec_accept_add(spec_accept *c, int n, int a) {
    if (n <= 0) return;
    c->ok = c->ok * ACCEPT_DECAY + a;
    c->fail = c->fail * ACCEPT_DECAY + (a < n);
}

double spec_accept_p(const spec_accept *c) {
    double all = c->ok + c->fail;
    return all > 0 ? c->ok / all : 0;
}

double spec_expected_tokens(double p, int k) {
    if (p >= 1) return k + 1;
    if (p <= 0) return 1;
    return (1 - pow(p, k + 1)) / (1 - p);
}

static double cost_at(spec_line l, double rows) {
    double t = l.a + l.b * rows;
    return t > MIN_STEP_MS ? t : MIN_STEP_MS;
}

/* What the draft's k decodes for `proposing` slots cost; a zero line (prompt lookup) costs nothing. */
static double draft_cost(spec_line d, int proposing, int k) {
    if (d.a == 0 && d.b == 0) return 0;
    return cost_at(d, CATCH_UP_ROWS * proposing) + (k - 1) * cost_at(d, proposing);
}

int spec_choose_k(spec_line target, spec_line draft, const double *p, const int *room, int n, int k_min) {
    if (n <= 0) return 0;
    int max_room = 0;
    for (int i = 0; i < n; i++)
        if (room[i] > max_room) max_room = room[i];
    int best = 0;
    double best_rate = n / cost_at(target, n);
    for (int k = k_min > 1 ? k_min : 1; k <= max_room; k++) {
        double tokens = 0, rows = 0;
        int proposing = 0;
        for (int i = 0; i < n; i++) {
            int ki = room[i] < k ? room[i] : k;
            tokens += spec_expected_tokens(p[i], ki);
            rows += 1 + ki;
            proposing += ki > 0;
        }
        double rate = tokens / (cost_at(target, rows) + draft_cost(draft, proposing, k));
        if (rate > best_rate) {
            best = k;
            best_rate = rate;
        }
    }
    return best;
}
