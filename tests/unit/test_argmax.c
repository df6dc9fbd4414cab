/*
 * test_argmax.c: sipp_argmax (src/engine/sampling.c), the greedy pick of every greedy request and of
 * the draft model.
 *
 * Its promises: the index of the largest value, the first one on a tie; anywhere in the array,
 * the lanes' tail included; NaNs are never the largest, and an array of nothing but NaNs gives 0;
 * -inf everywhere gives 0.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "engine/sampling.h"

#define N 1001 /* not a multiple of the lanes: the tail is walked on its own */

Test(argmax, finds_the_largest_at_every_position) {
    static float x[N];
    for (int at = 0; at < N; at++) {
        for (int i = 0; i < N; i++)
            x[i] = (float)((i * 7919) % 1000) / 1000.0f;
        x[at] = 2.0f;
        cr_assert_eq(sipp_argmax(x, N), at, "largest at %d", at);
    }
}

Test(argmax, a_tie_goes_to_the_first) {
    static float x[N];
    for (int i = 0; i < N; i++)
        x[i] = -1.0f;
    x[900] = 3.0f;
    x[17] = 3.0f;
    x[999] = 3.0f;
    cr_assert_eq(sipp_argmax(x, N), 17);
}

Test(argmax, agrees_with_a_plain_scan_on_random_logits) {
    static float x[N];
    srand(7);
    for (int round = 0; round < 50; round++) {
        for (int i = 0; i < N; i++)
            x[i] = (float)(rand() % 20000 - 10000) / 100.0f;
        int want = 0;
        for (int i = 1; i < N; i++)
            if (x[i] > x[want]) want = i;
        cr_assert_eq(sipp_argmax(x, N), want, "round %d", round);
    }
}

Test(argmax, nans_are_never_the_largest) {
    float x[40];
    for (int i = 0; i < 40; i++)
        x[i] = NAN;
    cr_assert_eq(sipp_argmax(x, 40), 0);
    x[33] = -5.0f;
    cr_assert_eq(sipp_argmax(x, 40), 33);
    x[0] = -INFINITY;
    cr_assert_eq(sipp_argmax(x, 40), 33);
}

Test(argmax, all_minus_infinity_and_short_arrays) {
    float x[5] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    cr_assert_eq(sipp_argmax(x, 5), 0);
    float one = 1.5f;
    cr_assert_eq(sipp_argmax(&one, 1), 0);
    cr_assert_eq(sipp_argmax(x, 0), 0);
}
