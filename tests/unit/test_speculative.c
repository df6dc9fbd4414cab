/*
 * test_speculative.c: prompt lookup (src/engine/speculative.c), the proposer of --spec ngram.
 *
 * Its promises: the proposal is what followed the latest earlier occurrence of the longest suffix of
 * three, else two tokens; never more than max tokens, never past the end of the history; nothing
 * when no such suffix occurred before (one-token matches are not proposals), and nothing for a
 * history too short to have a suffix and an earlier occurrence.
 */
#include <criterion/criterion.h>

#include "engine/draft.h"

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

Test(spec_ngram, proposes_what_followed_the_latest_occurrence) {
    /* "1 2 3" occurred at 0 (followed by 4 5) and at 5 (followed by 7 8): the latest wins */
    llama_token h[] = {1, 2, 3, 4, 5, 1, 2, 3, 7, 8, 9, 1, 2, 3};
    llama_token out[8];
    int n = sipp_spec_ngram(h, N(h), 3, out);
    cr_assert_eq(n, 3);
    cr_assert_eq(out[0], 7);
    cr_assert_eq(out[1], 8);
    cr_assert_eq(out[2], 9);
}

Test(spec_ngram, prefers_the_longer_suffix) {
    /* "5 6" occurs later (followed by 0), "4 5 6" earlier (followed by 9): three tokens beat two */
    llama_token h[] = {4, 5, 6, 9, 1, 5, 6, 0, 2, 4, 5, 6};
    llama_token out[8];
    int n = sipp_spec_ngram(h, N(h), 1, out);
    cr_assert_eq(n, 1);
    cr_assert_eq(out[0], 9);
}

Test(spec_ngram, falls_back_to_two_tokens) {
    llama_token h[] = {8, 5, 6, 7, 1, 5, 6};
    llama_token out[8];
    cr_assert_eq(sipp_spec_ngram(h, N(h), 8, out), 4); /* 7 1 5 6, then the end of the history */
    cr_assert_eq(out[0], 7);
    cr_assert_eq(out[3], 6);
}

Test(spec_ngram, stops_at_max_and_at_the_end) {
    llama_token h[] = {1, 2, 1, 2, 1, 2};
    llama_token out[8];
    /* suffix "2 1 2" last occurred at 1, followed by "1 2" and the end */
    cr_assert_eq(sipp_spec_ngram(h, N(h), 8, out), 2);
    cr_assert_eq(sipp_spec_ngram(h, N(h), 1, out), 1);
    cr_assert_eq(out[0], 1);
}

Test(spec_ngram, nothing_without_a_repeat) {
    llama_token h[] = {1, 2, 3, 4, 5, 6, 1};
    llama_token out[8];
    cr_assert_eq(sipp_spec_ngram(h, N(h), 8, out), 0, "a one-token match is not a proposal");
    cr_assert_eq(sipp_spec_ngram(h, 2, 8, out), 0);
    cr_assert_eq(sipp_spec_ngram(h, 0, 8, out), 0);
    cr_assert_eq(sipp_spec_ngram(h, N(h), 0, out), 0);
}
