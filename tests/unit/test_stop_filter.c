/*
 * test_stop_filter.c: the streaming filter of src/engine/stop_filter.h, which turns token pieces into the
 * text a client sees.
 *
 * Its promises: a stop string is never emitted, even when it arrives split across pieces; the text
 * before the earliest stop string is emitted in full; text held back because it could start a stop
 * string is released once it cannot; a UTF-8 character is never split between emitted chunks; flush
 * releases what is left and turns an incomplete trailing character into U+FFFD. Beside hand-written
 * cases, the stop-string rules are checked over every way of cutting a text into three pieces.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "engine/stop_filter.h"

#define FFFD "\xEF\xBF\xBD"

/* One filter and the text it emitted so far; each push's own output is checked to be whole UTF-8. */
typedef struct fixture {
    sipp_output out;
    sipp_buf all; /* everything emitted */
    size_t n_chunks;
} fixture;

static void fx_init(fixture *f, const char *const *stop, size_t n_stop) {
    memset(f, 0, sizeof *f);
    cr_assert(sipp_output_init(&f->out, stop, n_stop));
}

static void fx_free(fixture *f) {
    sipp_output_free(&f->out);
    sipp_buf_free(&f->all);
}

/* Pushes a piece; returns whether a stop string completed. The engine hands push an emptied buffer
 * each time; do the same so each push's output can be checked on its own. */
static bool fx_push_n(fixture *f, const char *piece, size_t len, bool expect_valid) {
    sipp_buf emit = {0};
    bool stopped = sipp_output_push(&f->out, piece, len, &emit);
    if (emit.len) {
        if (expect_valid)
            cr_assert(sipp_utf8_valid(emit.data, emit.len), "chunk %zu is not whole UTF-8 (%zu bytes)",
                      f->n_chunks, emit.len);
        cr_assert(sipp_buf_append(&f->all, emit.data, emit.len));
        f->n_chunks++;
    }
    sipp_buf_free(&emit);
    return stopped;
}

static bool fx_push(fixture *f, const char *piece) { return fx_push_n(f, piece, strlen(piece), true); }

static void fx_flush(fixture *f) {
    sipp_buf emit = {0};
    sipp_output_flush(&f->out, &emit);
    if (emit.len) cr_assert(sipp_buf_append(&f->all, emit.data, emit.len));
    sipp_buf_free(&emit);
}

static const char *fx_text(fixture *f) { return f->all.data ? f->all.data : ""; }

/* ---- without stop strings ---------------------------------------------------------------------- */

Test(output, no_stop_strings_passes_text_through) {
    fixture f;
    fx_init(&f, NULL, 0);
    cr_assert_not(fx_push(&f, "Hello"));
    cr_assert_str_eq(fx_text(&f), "Hello", "text with nothing to hold back is released at once");
    cr_assert_not(fx_push(&f, ", world"));
    cr_assert_str_eq(fx_text(&f), "Hello, world");
    fx_flush(&f);
    cr_assert_str_eq(fx_text(&f), "Hello, world");
    fx_free(&f);
}

Test(output, empty_piece_is_harmless) {
    const char *stop[] = {"END"};
    fixture f;
    fx_init(&f, stop, 1);
    cr_assert_not(fx_push(&f, ""));
    cr_assert_not(fx_push(&f, "a"));
    cr_assert_not(fx_push(&f, ""));
    fx_flush(&f);
    cr_assert_str_eq(fx_text(&f), "a");
    fx_free(&f);
}

/* ---- stop strings ------------------------------------------------------------------------------ */

Test(output, stop_split_across_three_pieces) {
    const char *stop[] = {"STOP"};
    fixture f;
    fx_init(&f, stop, 1);
    cr_assert_not(fx_push(&f, "Hel"));
    cr_assert_not(fx_push(&f, "lo ST"));
    cr_assert_str_eq(fx_text(&f), "Hello ", "'ST' could start STOP and must wait");
    cr_assert(fx_push(&f, "OP now"), "STOP completed");
    cr_assert_str_eq(fx_text(&f), "Hello ");
    fx_flush(&f);
    cr_assert_str_eq(fx_text(&f), "Hello ",
                     "nothing of or after the stop string comes out, not even on flush");
    fx_free(&f);
}

Test(output, stop_inside_one_piece) {
    const char *stop[] = {"</s>"};
    fixture f;
    fx_init(&f, stop, 1);
    cr_assert(fx_push(&f, "answer</s>trailing"));
    cr_assert_str_eq(fx_text(&f), "answer");
    fx_free(&f);
}

Test(output, stop_at_the_very_start) {
    const char *stop[] = {"STOP"};
    fixture f;
    fx_init(&f, stop, 1);
    cr_assert(fx_push(&f, "STOP"));
    cr_assert_str_eq(fx_text(&f), "");
    fx_free(&f);
}

Test(output, stop_one_byte_at_a_time) {
    const char *stop[] = {"STOP"};
    const char *text = "xx STOP yy";
    fixture f;
    fx_init(&f, stop, 1);
    bool stopped = false;
    size_t i;
    for (i = 0; text[i] && !stopped; i++)
        stopped = fx_push_n(&f, text + i, 1, true);
    cr_assert(stopped);
    cr_assert_eq(i, 7, "stopped on the byte that completed STOP, not later (at %zu)", i);
    cr_assert_str_eq(fx_text(&f), "xx ");
    fx_free(&f);
}

Test(output, held_prefix_released_when_not_a_stop) {
    const char *stop[] = {"STOP"};
    fixture f;
    fx_init(&f, stop, 1);
    cr_assert_not(fx_push(&f, "a ST"));
    cr_assert_str_eq(fx_text(&f), "a ");
    cr_assert_not(fx_push(&f, "AR"));
    cr_assert_str_eq(fx_text(&f), "a STAR", "'ST' turned out to be 'STAR' and is released");
    fx_free(&f);
}

Test(output, held_prefix_released_on_flush) {
    const char *stop[] = {"STOP"};
    fixture f;
    fx_init(&f, stop, 1);
    cr_assert_not(fx_push(&f, "the end ST"));
    cr_assert_str_eq(fx_text(&f), "the end ");
    fx_flush(&f);
    cr_assert_str_eq(fx_text(&f), "the end ST", "generation ended: the held prefix was not a stop string");
    fx_free(&f);
}

Test(output, self_overlapping_stop) {
    /* "aab": after "aa" comes "a", so "aaa" must release one 'a' and keep "aa" waiting. */
    const char *stop[] = {"aab"};
    fixture f;
    fx_init(&f, stop, 1);
    cr_assert_not(fx_push(&f, "aa"));
    cr_assert_str_eq(fx_text(&f), "");
    cr_assert_not(fx_push(&f, "a"));
    cr_assert_str_eq(fx_text(&f), "a");
    cr_assert(fx_push(&f, "b"));
    cr_assert_str_eq(fx_text(&f), "a");
    fx_free(&f);
}

Test(output, earliest_of_several_stops_wins) {
    const char *orders[2][2] = {{"world", "lo"}, {"lo", "world"}};
    for (int k = 0; k < 2; k++) {
        fixture f;
        fx_init(&f, orders[k], 2);
        cr_assert(fx_push(&f, "Hello world"));
        cr_assert_str_eq(fx_text(&f), "Hel", "stop list order %d", k);
        fx_free(&f);
    }
}

Test(output, earliest_start_wins_when_both_complete_in_one_piece) {
    const char *stop[] = {"bc", "abcd"};
    fixture f;
    fx_init(&f, stop, 2);
    cr_assert(fx_push(&f, "xabcdy"));
    cr_assert_str_eq(fx_text(&f), "x");
    fx_free(&f);
}

Test(output, completed_stop_wins_over_a_longer_one_still_pending) {
    /* "abcd" could still come, but "c" has already completed: stop now. */
    const char *stop[] = {"abcd", "c"};
    fixture f;
    fx_init(&f, stop, 2);
    cr_assert_not(fx_push(&f, "ab"));
    cr_assert(fx_push(&f, "c"));
    cr_assert_str_eq(fx_text(&f), "ab");
    fx_free(&f);
}

Test(output, longest_pending_prefix_of_any_stop_is_held) {
    const char *stop[] = {"XY", "ZZZX"};
    fixture f;
    fx_init(&f, stop, 2);
    cr_assert_not(fx_push(&f, "qZZZ"));
    cr_assert_str_eq(fx_text(&f), "q", "'ZZZ' may become ZZZX");
    cr_assert(fx_push(&f, "XY"), "'ZZZX' completes first (it starts earlier than XY)");
    cr_assert_str_eq(fx_text(&f), "q");
    fx_free(&f);
}

Test(output, empty_stop_strings_ignored) {
    const char *stop_only_empty[] = {""};
    fixture f;
    fx_init(&f, stop_only_empty, 1);
    cr_assert_not(fx_push(&f, "abc"), "an empty stop string would match everywhere; it must be ignored");
    cr_assert_str_eq(fx_text(&f), "abc");
    fx_free(&f);

    const char *mixed[] = {"", "STOP", ""};
    fx_init(&f, mixed, 3);
    cr_assert_not(fx_push(&f, "abc "));
    cr_assert_str_eq(fx_text(&f), "abc ");
    cr_assert(fx_push(&f, "STOP"));
    cr_assert_str_eq(fx_text(&f), "abc ");
    fx_free(&f);
}

Test(output, null_stop_entries_ignored) {
    const char *stop[] = {NULL, "END"};
    fixture f;
    fx_init(&f, stop, 2);
    cr_assert_not(fx_push(&f, "x"));
    cr_assert(fx_push(&f, "yEND"));
    cr_assert_str_eq(fx_text(&f), "xy");
    fx_free(&f);
}

Test(output, stop_strings_are_copied) {
    char stop_text[] = "STOP";
    const char *stop[] = {stop_text};
    fixture f;
    fx_init(&f, stop, 1);
    strcpy(stop_text, "XXXX"); /* the caller's memory changes after init */
    cr_assert(fx_push(&f, "aSTOP"));
    cr_assert_str_eq(fx_text(&f), "a");
    fx_free(&f);
}

/* Every way to cut text into three pieces: the emitted text is exactly `want` and the push that
 * completes the stop string is the one that returns true. */
static void check_all_splits(const char *text, const char *const *stop, size_t n_stop, const char *want,
                             bool want_stop) {
    size_t n = strlen(text);
    for (size_t a = 0; a <= n; a++) {
        for (size_t b = a; b <= n; b++) {
            fixture f;
            fx_init(&f, stop, n_stop);
            size_t cuts[4] = {0, a, b, n};
            bool stopped = false;
            for (int k = 0; k < 3 && !stopped; k++)
                stopped = fx_push_n(&f, text + cuts[k], cuts[k + 1] - cuts[k], true);
            if (!stopped) fx_flush(&f);
            cr_assert_eq(stopped, want_stop, "text '%s' cut at %zu,%zu: stopped %d", text, a, b, stopped);
            cr_assert_str_eq(fx_text(&f), want, "text '%s' cut at %zu,%zu", text, a, b);
            fx_free(&f);
        }
    }
}

Test(output, every_split_stops_at_the_same_place) {
    const char *stop[] = {"STOP"};
    check_all_splits("The quick STOP brown", stop, 1, "The quick ", true);
    check_all_splits("no stop here: ST, STO, SOTP", stop, 1, "no stop here: ST, STO, SOTP", false);
    check_all_splits("STSTOP", stop, 1, "ST", true);
    const char *two[] = {"\n\n", "User:"};
    check_all_splits("Sure.\nUser: hi\n\nmore", two, 2, "Sure.\n", true);
}

Test(output, every_split_with_multibyte_text_and_stop) {
    const char *stop[] = {"\xE4\xBD\xA0\xE5\xA5\xBD"}; /* 你好 */
    check_all_splits("h\xC3\xA9llo \xF0\x9F\x8E\x89 \xE4\xBD\xA0\xE5\xA5\xBD!", stop, 1,
                     "h\xC3\xA9llo \xF0\x9F\x8E\x89 ", true);
    check_all_splits("w\xC3\xB6rld \xE4\xBD\xA0 \xE5\xA5\xBD", stop, 1,
                     "w\xC3\xB6rld \xE4\xBD\xA0 \xE5\xA5\xBD", false);
}

/* ---- UTF-8 ------------------------------------------------------------------------------------- */

Test(output, two_byte_char_split_across_pieces) {
    fixture f;
    fx_init(&f, NULL, 0);
    cr_assert_not(fx_push_n(&f, "caf\xC3", 4, true));
    cr_assert_str_eq(fx_text(&f), "caf", "the lead byte of \xC3\xA9 waits");
    cr_assert_not(fx_push_n(&f, "\xA9", 1, true));
    cr_assert_str_eq(fx_text(&f), "caf\xC3\xA9");
    fx_free(&f);
}

Test(output, two_byte_char_split_with_stop_strings_active) {
    const char *stop[] = {"STOP"};
    fixture f;
    fx_init(&f, stop, 1);
    cr_assert_not(fx_push_n(&f, "\xC3", 1, true));
    cr_assert_str_eq(fx_text(&f), "");
    cr_assert_not(fx_push_n(&f, "\xA9", 1, true));
    cr_assert_str_eq(fx_text(&f), "\xC3\xA9");
    fx_free(&f);
}

Test(output, four_byte_char_one_byte_at_a_time) {
    const char *emoji = "\xF0\x9F\x8E\x89";
    fixture f;
    fx_init(&f, NULL, 0);
    for (int i = 0; i < 3; i++) {
        cr_assert_not(fx_push_n(&f, emoji + i, 1, true));
        cr_assert_eq(f.all.len, 0, "after %d of 4 bytes nothing may come out", i + 1);
    }
    cr_assert_not(fx_push_n(&f, emoji + 3, 1, true));
    cr_assert_str_eq(fx_text(&f), emoji);
    fx_free(&f);
}

Test(output, mixed_text_byte_by_byte_is_never_split) {
    const char *text = "h\xC3\xA9llo w\xC3\xB6rld \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x8E\x89";
    fixture f;
    fx_init(&f, NULL, 0);
    for (size_t i = 0; text[i]; i++)
        cr_assert_not(fx_push_n(&f, text + i, 1, true));
    fx_flush(&f);
    cr_assert_str_eq(fx_text(&f), text);
    fx_free(&f);
}

Test(output, multibyte_stop_string_split_inside_a_char) {
    const char *stop[] = {"\xC3\xA9"}; /* é */
    fixture f;
    fx_init(&f, stop, 1);
    cr_assert_not(fx_push_n(&f, "caf\xC3", 4, true));
    cr_assert(fx_push_n(&f, "\xA9!", 2, true));
    cr_assert_str_eq(fx_text(&f), "caf");
    fx_free(&f);
}

Test(output, flush_replaces_incomplete_trailing_char) {
    fixture f;
    fx_init(&f, NULL, 0);
    cr_assert_not(fx_push_n(&f, "ab\xE4\xBD", 4, true));
    cr_assert_str_eq(fx_text(&f), "ab");
    fx_flush(&f);
    cr_assert_str_eq(fx_text(&f), "ab" FFFD);
    cr_assert(sipp_utf8_valid(f.all.data, f.all.len));
    fx_flush(&f); /* nothing left: a second flush adds nothing */
    cr_assert_str_eq(fx_text(&f), "ab" FFFD);
    fx_free(&f);
}

Test(output, flush_releases_held_stop_prefix_and_replaces_incomplete_char) {
    const char *stop[] = {"STOP"};
    fixture f;
    fx_init(&f, stop, 1);
    cr_assert_not(fx_push_n(&f, "x\xF0\x9F", 3, true));
    cr_assert_str_eq(fx_text(&f), "x");
    fx_flush(&f);
    cr_assert_str_eq(fx_text(&f), "x" FFFD);
    fx_free(&f);
}

Test(output, flush_on_empty_filter_emits_nothing) {
    fixture f;
    fx_init(&f, NULL, 0);
    fx_flush(&f);
    cr_assert_eq(f.all.len, 0);
    fx_free(&f);
}

/* A byte-fallback model can produce a lead byte followed by something that is not its continuation
 * ("\xC3" then "A"). sipp.h promises UTF-8 strings and the gateway puts pieces into JSON, so what
 * the filter releases must stay valid UTF-8 (util.h: invalid bytes are "passed through for the
 * caller to replace"; the filter is that caller). */
Test(output, broken_sequence_mid_stream_is_not_emitted_raw) {
    fixture f;
    fx_init(&f, NULL, 0);
    fx_push_n(&f, "x\xC3", 2, false);
    fx_push_n(&f, "A", 1, false);
    fx_flush(&f);
    /* Checked after freeing, so that the expected failure does not also report a leak under ASan. */
    char text[64];
    size_t len = f.all.len < sizeof text - 1 ? f.all.len : sizeof text - 1;
    memcpy(text, fx_text(&f), len);
    text[len] = '\0';
    fx_free(&f);
    cr_assert(sipp_utf8_valid(text, len), "emitted %zu bytes that are not valid UTF-8: '%s'", len, text);
    cr_assert(len > 0 && text[len - 1] == 'A', "the ASCII after the broken sequence is kept");
}

Test(output, invalid_bytes_before_a_stop_string_are_replaced) {
    const char *stop[] = {"STOP"};
    fixture f;
    fx_init(&f, stop, 1);
    bool stopped = fx_push_n(&f,
                             "\xFF"
                             "abcSTOP",
                             8, false);
    char text[64];
    size_t len = f.all.len < sizeof text - 1 ? f.all.len : sizeof text - 1;
    memcpy(text, fx_text(&f), len);
    text[len] = '\0';
    fx_free(&f);
    cr_assert(stopped);
    cr_assert_str_eq(text, FFFD "abc");
}

Test(output, init_free_and_reinit) {
    const char *stop[] = {"a", "bb", "ccc"};
    sipp_output o;
    cr_assert(sipp_output_init(&o, stop, 3));
    cr_assert_eq(o.n_stop, 3);
    cr_assert_eq(o.max_stop_len, 3);
    sipp_output_free(&o);
    cr_assert(sipp_output_init(&o, NULL, 0));
    cr_assert_eq(o.n_stop, 0);
    sipp_output_free(&o);
}

/* sipp.h promises that every piece the engine emits is valid UTF-8, whatever bytes the model
 * produced, so that no client repairs text: a pseudo-random stream of good and bad sequences
 * (stray continuation bytes, overlongs, surrogates, 0xFF, characters cut short), cut into random
 * pieces, with and without stop strings, gives valid UTF-8 from every push and from the flush. */
#define FUZZ_ROUNDS 2000
#define FUZZ_PIECES 12
#define FUZZ_MAX_PIECE 7
static const char *const fuzz_bytes[] = {"a",
                                         "ST",
                                         "OP",
                                         "\xC3\xB6",
                                         "\xE4\xBD\xA0",
                                         "\xF0\x9F\x98\x80",
                                         "\xC3",
                                         "\xE4\xBD",
                                         "\xF0\x9F\x98",
                                         "\x80",
                                         "\xBF",
                                         "\xC0\xAF",
                                         "\xED\xA0\x80",
                                         "\xFF",
                                         "\xF5\x80\x80\x80",
                                         "\xE0\x80\x80",
                                         "\n"};

static uint32_t next_rand(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u; /* Numerical Recipes' LCG: deterministic, good enough here */
    return *s >> 8;
}

static void check_valid(const sipp_buf *b, const char *what, int round) {
    if (b->len) cr_assert(sipp_utf8_valid(b->data, b->len), "%s of round %d is not valid UTF-8", what, round);
}

Test(output, every_emitted_piece_and_the_flush_are_valid_utf8) {
    static const char *const stop[] = {"STOP", "\xC3\xB6\xC3"};
    uint32_t seed = 1;
    for (int round = 0; round < FUZZ_ROUNDS; round++) {
        sipp_output out;
        cr_assert(sipp_output_init(&out, stop, (size_t)(round % 3)));
        sipp_buf text = {0}, all = {0};
        size_t n = 1 + next_rand(&seed) % (FUZZ_PIECES * FUZZ_MAX_PIECE);
        for (size_t i = 0; i < n; i++) {
            const char *b = fuzz_bytes[next_rand(&seed) % (sizeof fuzz_bytes / sizeof fuzz_bytes[0])];
            cr_assert(sipp_buf_append(&text, b, strlen(b)));
        }
        bool stopped = false;
        for (size_t at = 0; at < text.len && !stopped;) {
            size_t len = 1 + next_rand(&seed) % FUZZ_MAX_PIECE;
            if (len > text.len - at) len = text.len - at;
            sipp_buf emit = {0};
            stopped = sipp_output_push(&out, text.data + at, len, &emit);
            check_valid(&emit, "a push", round);
            cr_assert(sipp_buf_append(&all, emit.data ? emit.data : "", emit.len));
            sipp_buf_free(&emit);
            at += len;
        }
        sipp_buf emit = {0};
        sipp_output_flush(&out, &emit);
        check_valid(&emit, "the flush", round);
        cr_assert(sipp_buf_append(&all, emit.data ? emit.data : "", emit.len));
        check_valid(&all, "the whole text", round);
        sipp_buf_free(&emit);
        sipp_buf_free(&all);
        sipp_buf_free(&text);
        sipp_output_free(&out);
    }
}
