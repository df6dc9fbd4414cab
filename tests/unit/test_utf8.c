/*
 * test_utf8.c: the UTF-8 boundary helpers, the growable buffer and the random ids of src/util/util.h.
 *
 * sipp_utf8_complete_prefix decides how much generated text can be streamed without splitting a
 * character, so it is checked at every cut point of a mixed-width string, not only on hand-picked
 * cases. sipp_utf8_valid is checked on the boundaries of each encoding length and on the classic
 * malformations (overlongs, surrogates, values above U+10FFFF, stray continuation bytes).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "util/util.h"

/* "héllo wörld 你好 🎉": 1-, 2-, 3- and 4-byte characters. */
static const char MIXED[] = "h\xC3\xA9llo w\xC3\xB6rld \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x8E\x89";

static size_t cp(const char *s) { return sipp_utf8_complete_prefix(s, strlen(s)); }
static bool valid(const char *s) { return sipp_utf8_valid(s, strlen(s)); }

/* ---- sipp_utf8_complete_prefix ------------------------------------------------------------------ */

Test(utf8_complete_prefix, empty_and_ascii) {
    cr_assert_eq(sipp_utf8_complete_prefix("", 0), 0);
    cr_assert_eq(sipp_utf8_complete_prefix(NULL, 0), 0);
    cr_assert_eq(cp("a"), 1);
    cr_assert_eq(cp("hello world"), 11);
}

Test(utf8_complete_prefix, two_byte_char) {
    cr_assert_eq(cp("\xC3"), 0);
    cr_assert_eq(cp("a\xC3"), 1);
    cr_assert_eq(cp("a\xC3\xA9"), 3);
    cr_assert_eq(cp("\xC3\xA9\xC3"), 2);
}

Test(utf8_complete_prefix, three_byte_char) {
    cr_assert_eq(cp("\xE4"), 0);
    cr_assert_eq(cp("\xE4\xBD"), 0);
    cr_assert_eq(cp("x\xE4\xBD"), 1);
    cr_assert_eq(cp("\xE4\xBD\xA0"), 3);
    cr_assert_eq(cp("\xE4\xBD\xA0\xE5\xA5"), 3);
}

Test(utf8_complete_prefix, four_byte_char) {
    cr_assert_eq(cp("\xF0"), 0);
    cr_assert_eq(cp("\xF0\x9F"), 0);
    cr_assert_eq(cp("\xF0\x9F\x8E"), 0);
    cr_assert_eq(cp("ab\xF0\x9F\x8E"), 2);
    cr_assert_eq(cp("\xF0\x9F\x8E\x89"), 4);
    cr_assert_eq(cp("\xF0\x9F\x8E\x89\xF0\x9F\x8E"), 4);
}

Test(utf8_complete_prefix, length_argument_is_respected) {
    /* Only the first n bytes count, whatever follows them. */
    cr_assert_eq(sipp_utf8_complete_prefix("a\xC3\xA9", 2), 1);
    cr_assert_eq(sipp_utf8_complete_prefix("\xF0\x9F\x8E\x89", 3), 0);
    cr_assert_eq(sipp_utf8_complete_prefix("\xF0\x9F\x8E\x89", 4), 4);
    /* Bytes past n are never looked at: an embedded NUL is an ordinary byte. */
    cr_assert_eq(sipp_utf8_complete_prefix("a\0b", 3), 3);
}

Test(utf8_complete_prefix, invalid_bytes_count_as_complete) {
    /* Invalid bytes are passed through (a later stage replaces them); they must not be held forever. */
    cr_assert_eq(cp("\xFF"), 1);
    cr_assert_eq(cp("a\xFE"), 2);
    cr_assert_eq(cp("\x80"), 1);
    cr_assert_eq(cp("a\x80\x80\x80\x80\x80"), 6);
    cr_assert_eq(cp("\xC0"), 1); /* never a valid lead byte */
    cr_assert_eq(cp("\xC1"), 1);
    cr_assert_eq(cp("\xF5"), 1);
    cr_assert_eq(cp("\xC3\xA9\xA9"), 3); /* a stray continuation after a complete character */
    cr_assert_eq(cp("\xC3"
                    "a"),
                 2); /* a lead byte interrupted by ASCII is not waiting anymore */
}

Test(utf8_complete_prefix, every_cut_of_a_mixed_string_is_a_char_boundary) {
    const size_t n = strlen(MIXED);
    /* The character boundaries of MIXED, computed independently of the function under test. */
    bool boundary[sizeof MIXED] = {false};
    for (size_t i = 0; i <= n; i++)
        boundary[i] = i == n || ((unsigned char)MIXED[i] & 0xC0) != 0x80;
    for (size_t cut = 0; cut <= n; cut++) {
        size_t got = sipp_utf8_complete_prefix(MIXED, cut);
        size_t want = cut;
        while (!boundary[want])
            want--;
        cr_assert_eq(got, want, "cut %zu: got %zu, want %zu", cut, got, want);
        cr_assert(sipp_utf8_valid(MIXED, got), "cut %zu: prefix of %zu bytes is not valid UTF-8", cut, got);
        cr_assert(cut - got < 4, "cut %zu: held back %zu bytes", cut, cut - got);
    }
}

/* ---- sipp_utf8_valid --------------------------------------------------------------------------- */

Test(utf8_valid, valid_texts) {
    cr_assert(sipp_utf8_valid("", 0));
    cr_assert(sipp_utf8_valid(NULL, 0));
    cr_assert(valid("plain ASCII ~\x7F"));
    cr_assert(valid(MIXED));
    cr_assert(sipp_utf8_valid("a\0b", 3), "NUL is a valid character");
}

Test(utf8_valid, boundaries_of_each_length) {
    cr_assert(valid("\xC2\x80"));         /* U+0080, smallest 2-byte */
    cr_assert(valid("\xDF\xBF"));         /* U+07FF */
    cr_assert(valid("\xE0\xA0\x80"));     /* U+0800, smallest 3-byte */
    cr_assert(valid("\xED\x9F\xBF"));     /* U+D7FF, just below the surrogates */
    cr_assert(valid("\xEE\x80\x80"));     /* U+E000, just above them */
    cr_assert(valid("\xEF\xBF\xBD"));     /* U+FFFD */
    cr_assert(valid("\xEF\xBF\xBF"));     /* U+FFFF */
    cr_assert(valid("\xF0\x90\x80\x80")); /* U+10000, smallest 4-byte */
    cr_assert(valid("\xF4\x8F\xBF\xBF")); /* U+10FFFF, the largest code point */
}

Test(utf8_valid, overlongs_rejected) {
    cr_assert_not(valid("\xC0\xAF"));
    cr_assert_not(valid("\xC1\xBF"));
    cr_assert_not(valid("\xC0\x80")); /* overlong NUL ("modified UTF-8") */
    cr_assert_not(valid("\xE0\x80\xAF"));
    cr_assert_not(valid("\xE0\x9F\xBF"));
    cr_assert_not(valid("\xF0\x80\x80\xAF"));
    cr_assert_not(valid("\xF0\x8F\xBF\xBF"));
}

Test(utf8_valid, surrogates_and_out_of_range_rejected) {
    cr_assert_not(valid("\xED\xA0\x80"));     /* U+D800 */
    cr_assert_not(valid("\xED\xBF\xBF"));     /* U+DFFF */
    cr_assert_not(valid("\xF4\x90\x80\x80")); /* U+110000 */
    cr_assert_not(valid("\xF5\x80\x80\x80"));
    cr_assert_not(valid("\xF7\xBF\xBF\xBF"));
    cr_assert_not(valid("\xF8\x88\x80\x80\x80")); /* old 5-byte form */
    cr_assert_not(valid("\xFE"));
    cr_assert_not(valid("\xFF"));
}

Test(utf8_valid, truncated_and_broken_sequences_rejected) {
    cr_assert_not(valid("\xC3"));
    cr_assert_not(valid("a\xE4\xBD"));
    cr_assert_not(valid("\xF0\x9F\x8E"));
    cr_assert_not(sipp_utf8_valid("\xC3\xA9", 1), "n cuts the character");
    cr_assert_not(valid("\x80"));
    cr_assert_not(valid("a\xBF"
                        "b"));
    cr_assert_not(valid("\xC3\x28")); /* lead byte followed by ASCII */
    cr_assert_not(valid("\xE4\xBD\x28"));
    cr_assert_not(valid("\xF0\x9F\x8E\x28"));
    cr_assert_not(valid("\xC3\xA9\xA9")); /* extra continuation byte */
}

/* ---- sipp_buf ---------------------------------------------------------------------------------- */

Test(buf, append_to_zeroed_buffer) {
    sipp_buf b = {0};
    cr_assert(sipp_buf_append(&b, "abc", 3));
    cr_assert_eq(b.len, 3);
    cr_assert_geq(b.cap, 4);
    cr_assert_str_eq(b.data, "abc");
    cr_assert(sipp_buf_append(&b, "def", 2));
    cr_assert_eq(b.len, 5);
    cr_assert_str_eq(b.data, "abcde");
    sipp_buf_free(&b);
}

Test(buf, empty_append_gives_a_terminated_string) {
    sipp_buf b = {0};
    cr_assert(sipp_buf_append(&b, "", 0));
    cr_assert_not_null(b.data);
    cr_assert_eq(b.len, 0);
    cr_assert_str_eq(b.data, "");
    sipp_buf_free(&b);
}

Test(buf, binary_bytes_kept) {
    sipp_buf b = {0};
    cr_assert(sipp_buf_append(&b, "a\0b", 3));
    cr_assert_eq(b.len, 3);
    cr_assert_eq(memcmp(b.data, "a\0b", 4), 0, "bytes and the terminating NUL");
    sipp_buf_free(&b);
}

Test(buf, grows_across_many_appends) {
    sipp_buf b = {0};
    enum { ROUNDS = 1000 };
    for (int i = 0; i < ROUNDS; i++)
        cr_assert(sipp_buf_append(&b, "0123456789", 10));
    cr_assert_eq(b.len, (size_t)ROUNDS * 10);
    cr_assert_gt(b.cap, b.len);
    cr_assert_eq(b.data[b.len], '\0');
    for (size_t i = 0; i < b.len; i++)
        cr_assert_eq(b.data[i], (char)('0' + i % 10), "byte %zu", i);
    sipp_buf_free(&b);
}

Test(buf, appendf_formats_and_grows) {
    sipp_buf b = {0};
    cr_assert(sipp_buf_appendf(&b, "%d-%s", 42, "x"));
    cr_assert_str_eq(b.data, "42-x");
    cr_assert_eq(b.len, 4);
    cr_assert(sipp_buf_appendf(&b, "%s", ""));
    cr_assert_eq(b.len, 4);
    /* Longer than the first allocation, so the formatted text must go through a grow. */
    char big[300];
    memset(big, 'z', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    cr_assert(sipp_buf_appendf(&b, "[%s]", big));
    cr_assert_eq(b.len, 4 + 2 + strlen(big));
    cr_assert_eq(strlen(b.data), b.len);
    cr_assert_eq(strncmp(b.data, "42-x[zzz", 8), 0);
    cr_assert_eq(b.data[b.len - 1], ']');
    sipp_buf_free(&b);
}

Test(buf, consume_drops_a_prefix) {
    sipp_buf b = {0};
    cr_assert(sipp_buf_append(&b, "hello world", 11));
    sipp_buf_consume(&b, 0);
    cr_assert_str_eq(b.data, "hello world");
    sipp_buf_consume(&b, 6);
    cr_assert_eq(b.len, 5);
    cr_assert_str_eq(b.data, "world");
    sipp_buf_consume(&b, 5);
    cr_assert_eq(b.len, 0);
    cr_assert_str_eq(b.data, "");
    cr_assert(sipp_buf_append(&b, "again", 5));
    sipp_buf_consume(&b, 1000); /* more than there is: empties */
    cr_assert_eq(b.len, 0);
    cr_assert_str_eq(b.data, "");
    cr_assert(sipp_buf_append(&b, "!", 1));
    cr_assert_str_eq(b.data, "!");
    sipp_buf_free(&b);
}

Test(buf, consume_and_free_on_a_never_used_buffer) {
    sipp_buf b = {0};
    sipp_buf_consume(&b, 3);
    cr_assert_eq(b.len, 0);
    sipp_buf_free(&b);
    sipp_buf_free(&b); /* twice is harmless */
    cr_assert_null(b.data);
    cr_assert_eq(b.len, 0);
    cr_assert_eq(b.cap, 0);
}

Test(buf, reusable_after_free) {
    sipp_buf b = {0};
    cr_assert(sipp_buf_append(&b, "first", 5));
    sipp_buf_free(&b);
    cr_assert_null(b.data);
    cr_assert(sipp_buf_append(&b, "second", 6));
    cr_assert_str_eq(b.data, "second");
    sipp_buf_free(&b);
}

/* ---- sipp_buf_append_utf8 ---------------------------------------------------------------------- */

#define FFFD "\xEF\xBF\xBD"

static void check_sanitised(const char *in, size_t n, const char *want) {
    sipp_buf b = {0};
    cr_assert(sipp_buf_append(&b, "<", 1));
    cr_assert(sipp_buf_append_utf8(&b, in, n));
    cr_assert(sipp_buf_append(&b, ">", 1));
    cr_assert_str_eq(b.data + 1, want, "input of %zu bytes", n);
    sipp_buf_free(&b);
}
#define SANITISED(in, want) check_sanitised(in, sizeof in - 1, want ">")

Test(buf_append_utf8, valid_text_is_copied_unchanged) {
    SANITISED("", "");
    SANITISED("plain", "plain");
    SANITISED("h\xC3\xA9llo w\xC3\xB6rld \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x8E\x89",
              "h\xC3\xA9llo w\xC3\xB6rld \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x8E\x89");
}

Test(buf_append_utf8, nul_becomes_the_replacement_character) {
    /* A random model can emit <0x00>; sipp's text is NUL-terminated and a client sending the answer
     * back as history would have "\u0000" refused, so NUL never reaches a client. */
    sipp_buf b = {0};
    cr_assert(sipp_buf_append_utf8(&b, "a\0b", 3));
    cr_assert_str_eq(b.data, "a" FFFD "b");
    cr_assert(b.len == 5);
    sipp_buf_free(&b);
}

Test(buf_append_utf8, null_with_zero_length_is_an_empty_append) {
    /* What an output filter that never received text passes on flush (its buffer is still NULL). */
    sipp_buf b = {0};
    cr_assert(sipp_buf_append_utf8(&b, NULL, 0));
    cr_assert_eq(b.len, 0);
    sipp_buf_free(&b);
}

Test(buf_append_utf8, invalid_bytes_become_replacement_chars) {
    SANITISED("\xFF", FFFD);
    SANITISED("a\xFE"
              "b",
              "a" FFFD "b");
    SANITISED("\x80", FFFD);                            /* stray continuation byte */
    SANITISED("\xC3(", FFFD "(");                       /* lead byte without its continuation */
    SANITISED("\xC3\xA9\xA9", "\xC3\xA9" FFFD);         /* extra continuation after a whole character */
    SANITISED("x\xC3", "x" FFFD);                       /* truncated at the end */
    SANITISED("\xC0\xAF", FFFD FFFD);                   /* overlong: neither byte is part of a character */
    SANITISED("\xED\xA0\x80", FFFD FFFD FFFD);          /* surrogate U+D800 */
    SANITISED("\xF4\x90\x80\x80", FFFD FFFD FFFD FFFD); /* above U+10FFFF */
}

Test(buf_append_utf8, output_is_always_valid) {
    /* Deterministic pseudo-random byte strings, biased towards UTF-8 lead and continuation bytes. */
    static const unsigned char alphabet[] = {'a',  ' ',  0x80, 0xBF, 0xC2, 0xC3, 0xE0, 0xE4,
                                             0xED, 0xF0, 0xF4, 0xF5, 0xFF, 0xA0, 0x9F, 0x8E};
    uint32_t state = 12345;
    for (int round = 0; round < 2000; round++) {
        unsigned char in[16];
        size_t n = (size_t)(round % (int)sizeof in);
        for (size_t i = 0; i < n; i++) {
            state = state * 1103515245u + 12345u;
            in[i] = alphabet[(state >> 16) % sizeof alphabet];
        }
        sipp_buf b = {0};
        cr_assert(sipp_buf_append_utf8(&b, (const char *)in, n));
        cr_assert(sipp_utf8_valid(b.data, b.len), "round %d: output not valid UTF-8", round);
        if (sipp_utf8_valid((const char *)in, n))
            cr_assert(b.len == n && memcmp(b.data, in, n) == 0, "round %d: valid input changed", round);
        sipp_buf_free(&b);
    }
}

/* ---- sipp_strlcpy (it truncates with sipp_utf8_complete_prefix) -------------------------------- */

Test(strlcpy, copies_and_truncates_at_char_boundary) {
    char dst[8];
    sipp_strlcpy(dst, "abc", sizeof dst);
    cr_assert_str_eq(dst, "abc");
    sipp_strlcpy(dst, "abcdefghij", sizeof dst);
    cr_assert_str_eq(dst, "abcdefg");
    char small[3];
    sipp_strlcpy(small, "a\xC3\xA9", sizeof small); /* "aé" needs 4 bytes; "a\xC3" would split é */
    cr_assert_str_eq(small, "a");
    char four[4];
    sipp_strlcpy(four, "\xF0\x9F\x8E\x89", sizeof four);
    cr_assert_str_eq(four, "");
    sipp_strlcpy(dst, NULL, sizeof dst);
    cr_assert_str_eq(dst, "");
    dst[0] = 'q';
    sipp_strlcpy(dst, "abc", 0); /* no room at all: untouched */
    cr_assert_eq(dst[0], 'q');
}

Test(fail, writes_message_and_returns_status) {
    char err[SIPP_ERROR_SIZE];
    cr_assert_eq(sipp_fail(err, SIPP_ERR_IO, "file '%s': %d", "x", 7), SIPP_ERR_IO);
    cr_assert_str_eq(err, "file 'x': 7");
    cr_assert_eq(sipp_fail(NULL, SIPP_ERR_MODEL, "ignored"), SIPP_ERR_MODEL);
    char big[2 * SIPP_ERROR_SIZE];
    memset(big, 'y', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    sipp_fail(err, SIPP_ERR_IO, "%s", big);
    cr_assert_eq(strlen(err), SIPP_ERROR_SIZE - 1, "truncated to the buffer");
}

/* sipp_random_hex: the ids of stored responses and the supervised children's tokens. */
Test(random_hex, lowercase_hex_of_the_size_asked_and_never_repeated) {
    enum { BYTES = 16, LONG_BYTES = 300 }; /* 300: more than one getrandom chunk */
    char a[2 * BYTES + 1], b[2 * BYTES + 1], big[2 * LONG_BYTES + 1];
    cr_assert(sipp_random_hex(a, BYTES));
    cr_assert(sipp_random_hex(b, BYTES));
    cr_assert_eq(strlen(a), 2 * BYTES);
    cr_assert_eq(strspn(a, "0123456789abcdef"), 2 * BYTES);
    cr_assert_str_neq(a, b);
    cr_assert(sipp_random_hex(big, LONG_BYTES));
    cr_assert_eq(strspn(big, "0123456789abcdef"), 2 * LONG_BYTES);
    cr_assert_eq(big[2 * LONG_BYTES], '\0');
}
