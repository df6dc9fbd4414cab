/*
 * test_spec_cost.c: the draft cut-off's cost model (src/engine/spec_cost.c).
 *
 * Its promises: the decayed fit recovers a line from its samples, needs two row counts before it
 * can tell a slope, and follows a change of costs; acceptance starts at a prior that drafts and
 * moves with the evidence; the chooser drafts where acceptance is high and verification cheap, runs
 * plain where verification costs as much as the rows it adds or acceptance is low, stays within
 * every slot's room and draft_min, and never picks a length whose modelled rate is not strictly
 * above plain decoding's.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "engine/spec_cost.h"

#define EPS 1e-6

static spec_fit fit_of(double a, double b, const int *rows, int n) {
    spec_fit f = {0};
    for (int i = 0; i < n; i++)
        spec_fit_add(&f, rows[i], a + b * rows[i]);
    return f;
}

/* The rate the chooser's model gives draft length k: tokens per ms, as spec_cost.c's comment states. */
static double rate(spec_line t, spec_line d, const double *p, const int *room, int n, int k) {
    double tokens = 0, rows = 0;
    int proposing = 0;
    for (int i = 0; i < n; i++) {
        int ki = room[i] < k ? room[i] : k;
        tokens += spec_expected_tokens(p[i], ki);
        rows += 1 + ki;
        proposing += ki > 0;
    }
    double draft_ms = k > 0 ? d.a + d.b * 2 * proposing + (k - 1) * (d.a + d.b * proposing) : 0;
    return tokens / (t.a + t.b * rows + draft_ms);
}

Test(spec_fit, recovers_a_line) {
    int rows[] = {1, 5, 9, 1, 5, 9, 3};
    spec_fit f = fit_of(10, 6.5, rows, 7);
    cr_assert(spec_fit_ready(&f));
    spec_line l = spec_fit_line(&f);
    cr_assert_float_eq(l.a, 10, EPS);
    cr_assert_float_eq(l.b, 6.5, EPS);
}

Test(spec_fit, needs_two_row_counts) {
    spec_fit f = {0};
    cr_assert(!spec_fit_ready(&f));
    for (int i = 0; i < 10; i++)
        spec_fit_add(&f, 4, 30);
    cr_assert(!spec_fit_ready(&f));
    spec_line l = spec_fit_line(&f); /* no slope yet: the mean, flat */
    cr_assert_float_eq(l.a, 30, EPS);
    cr_assert_float_eq(l.b, 0, EPS);
    spec_fit_add(&f, 8, 50);
    cr_assert(spec_fit_ready(&f));
}

Test(spec_fit, follows_a_change_of_load) {
    spec_fit f = {0};
    for (int i = 0; i < 200; i++)
        spec_fit_add(&f, 1 + i % 9, 10 + 5.0 * (1 + i % 9));
    for (int i = 0; i < 600; i++) /* the machine got twice as slow */
        spec_fit_add(&f, 1 + i % 9, 20 + 10.0 * (1 + i % 9));
    spec_line l = spec_fit_line(&f);
    cr_assert_float_eq(l.a, 20, 0.1);
    cr_assert_float_eq(l.b, 10, 0.05);
}

Test(spec_fit, slope_never_negative) {
    spec_fit f = {0};
    spec_fit_add(&f, 1, 20);
    spec_fit_add(&f, 9, 10); /* noise: more rows measured faster */
    spec_line l = spec_fit_line(&f);
    cr_assert_geq(l.b, 0);
    cr_assert(l.a > 10 && l.a < 20); /* flat at the (decayed) mean of the two */
}

Test(spec_accept, prior_then_evidence) {
    spec_accept c = spec_accept_new();
    cr_assert_float_eq(spec_accept_p(&c), 0.8, EPS);
    spec_accept hi = c, lo = c;
    for (int i = 0; i < 200; i++) {
        spec_accept_add(&hi, 4, 4); /* every proposal confirmed */
        spec_accept_add(&lo, 4, 0); /* the first one rejected every time */
    }
    cr_assert_gt(spec_accept_p(&hi), 0.99);
    cr_assert_lt(spec_accept_p(&lo), 0.01);
    spec_accept mid = c;
    for (int i = 0; i < 400; i++)
        spec_accept_add(&mid, 4, 3); /* 3 successes, 1 failure: p = 0.75 */
    cr_assert_float_eq(spec_accept_p(&mid), 0.75, 0.01);
    spec_accept_add(&mid, 0, 0); /* nothing verified: no evidence */
    cr_assert_float_eq(spec_accept_p(&mid), 0.75, 0.01);
}

Test(spec_accept, a_new_request_starts_from_the_engine_history) {
    spec_accept empty = {0, 0};
    spec_accept fresh = spec_accept_prior(&empty), prior = spec_accept_new();
    cr_assert_float_eq(fresh.ok, prior.ok, EPS);
    cr_assert_float_eq(fresh.fail, prior.fail, EPS);
    spec_accept always = empty, never = empty;
    for (int i = 0; i < 20; i++) {
        spec_accept_add(&always, 8, 8);
        spec_accept_add(&never, 8, 0);
    }
    spec_accept hi = spec_accept_prior(&always), lo = spec_accept_prior(&never);
    cr_assert_float_eq(spec_accept_p(&hi), 1.0, EPS);
    cr_assert_float_eq(spec_accept_p(&lo), 0.0, EPS);
    cr_assert_float_eq(hi.ok + hi.fail, prior.ok + prior.fail, EPS); /* a prior's weight, not history's */
}

Test(spec_expected, tokens) {
    cr_assert_float_eq(spec_expected_tokens(0.5, 0), 1, EPS);
    cr_assert_float_eq(spec_expected_tokens(0.5, 2), 1.75, EPS);
    cr_assert_float_eq(spec_expected_tokens(1, 4), 5, EPS);
    cr_assert_float_eq(spec_expected_tokens(0, 4), 1, EPS);
}

Test(spec_choose, drafts_when_acceptance_is_high_and_verification_cheap) {
    spec_line t = {16, 0.5}, d = {1, 0.5}; /* a memory-bound target: 9 rows cost barely more than 1 */
    double p[] = {0.95};
    int room[] = {8};
    int k = spec_choose_k(t, d, p, room, 1, 1);
    cr_assert_gt(k, 0);
    cr_assert_leq(k, 8);
    /* prompt lookup (no draft decode) at the same acceptance drafts the whole room */
    spec_line none = {0, 0};
    cr_assert_eq(spec_choose_k(t, none, p, room, 1, 1), 8);
}

Test(spec_choose, plain_when_verification_costs_what_its_rows_add) {
    spec_line t = {0, 16}, none = {0, 0}; /* every row costs a whole token: nothing to amortise */
    double p[] = {1, 1, 1, 1};            /* even when every proposal is confirmed */
    int room[] = {8, 8, 8, 8};
    cr_assert_eq(spec_choose_k(t, none, p, room, 4, 1), 0);
    cr_assert_eq(spec_choose_k(t, none, p, room, 1, 1), 0);
}

Test(spec_choose, plain_when_acceptance_is_low) {
    spec_line t = {16, 0.5}, d = {4, 0.5};
    double p[] = {0.05, 0.1};
    int room[] = {8, 8};
    cr_assert_eq(spec_choose_k(t, d, p, room, 2, 1), 0);
}

Test(spec_choose, plain_when_the_draft_costs_what_the_target_does) {
    spec_line t = {16, 0.5};
    double p[] = {1};
    int room[] = {8};
    /* a draft that is the target itself: k draft decodes of 16 ms buy k tokens a plain step gives */
    cr_assert_eq(spec_choose_k(t, t, p, room, 1, 1), 0);
}

/* The costs the lead measured on this CPU (target 16 ms at 1 row, 47 at 5, 70 at 9; draft 4.7 ms at
 * 1 row, 6 at 2) and 92% acceptance: one stream gains from a draft, four streams run plain. */
Test(spec_choose, the_measured_pair_one_stream_drafts_four_run_plain) {
    int tr[] = {1, 5, 9}, dr[] = {1, 2};
    double tms[] = {16, 47, 70}, dms[] = {4.7, 6};
    spec_fit tf = {0}, df = {0};
    for (int i = 0; i < 3; i++)
        spec_fit_add(&tf, tr[i], tms[i]);
    for (int i = 0; i < 2; i++)
        spec_fit_add(&df, dr[i], dms[i]);
    spec_line t = spec_fit_line(&tf), d = spec_fit_line(&df);
    double p[] = {0.92, 0.92, 0.92, 0.92};
    int room[] = {8, 8, 8, 8};
    cr_assert_gt(spec_choose_k(t, d, p, room, 1, 1), 0);
    cr_assert_eq(spec_choose_k(t, d, p, room, 4, 1), 0);
}

Test(spec_choose, within_room_and_draft_min) {
    spec_line t = {16, 0.1}, none = {0, 0};
    double p[] = {0.99, 0.99};
    int room[] = {3, 0}; /* the second slot does not speculate */
    cr_assert_eq(spec_choose_k(t, none, p, room, 2, 1), 3);
    cr_assert_eq(spec_choose_k(t, none, p, room, 2, 4), 0); /* draft_min above the room: plain */
    int none_room[] = {0, 0};
    cr_assert_eq(spec_choose_k(t, none, p, none_room, 2, 1), 0);
    cr_assert_eq(spec_choose_k(t, none, p, room, 0, 1), 0);
}

/* Over random costs, acceptances and rooms: whatever it picks has the best modelled rate, and a
 * length > 0 only when its rate is strictly above plain decoding's. */
Test(spec_choose, never_drafts_where_plain_is_faster) {
    srand(19);
    for (int trial = 0; trial < 5000; trial++) {
        spec_line t = {1 + rand() % 40, (rand() % 2000) / 100.0};
        spec_line d = {(rand() % 1000) / 100.0, (rand() % 500) / 100.0};
        int n = 1 + rand() % 8;
        double p[8];
        int room[8];
        for (int i = 0; i < n; i++) {
            p[i] = (rand() % 1001) / 1000.0;
            room[i] = rand() % 9;
        }
        int k = spec_choose_k(t, d, p, room, n, 1);
        double r0 = rate(t, d, p, room, n, 0), rk = rate(t, d, p, room, n, k);
        if (k > 0) cr_assert_gt(rk, r0, "trial %d: k %d rate %g, plain %g", trial, k, rk, r0);
        for (int j = 1; j <= 8; j++)
            cr_assert_leq(rate(t, d, p, room, n, j), (k > 0 ? rk : r0) * (1 + 1e-12),
                          "trial %d: k %d beats %d", trial, j, k);
    }
}
