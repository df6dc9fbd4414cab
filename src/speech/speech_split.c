/*
 * speech_split.c: the sentences a text is spoken in (sipp_speech_split).
 *
 * Speech streams by sentence: each is synthesised and sent while the next one is, so the first sound
 * comes after one sentence's work, whatever the text's length. A sentence ends at '.', '!' or '?' (or
 * their full-width forms) followed by white space, with any closing quotes and brackets kept with it,
 * or at a line break; parts longer than a caller's bound are cut at their last space so no engine is
 * handed more than it can take in one go.
 */
#include <stdlib.h>
#include <string.h>

#include "sipp.h"
#include "util/util.h"

#define UTF8_MAX 4 /* bytes of the longest UTF-8 character */

static bool is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f'; }

/* The length of the sentence-ending mark at s (0 when none). */
static size_t end_mark(const char *s) {
    if (*s == '.' || *s == '!' || *s == '?') return 1;
    /* U+3002 IDEOGRAPHIC FULL STOP, U+FF01 FULLWIDTH EXCLAMATION MARK, U+FF1F FULLWIDTH QUESTION MARK */
    if (!strncmp(s, "\xE3\x80\x82", 3) || !strncmp(s, "\xEF\xBC\x81", 3) || !strncmp(s, "\xEF\xBC\x9F", 3))
        return 3;
    return 0;
}

static bool is_closer(char c) { return c == '"' || c == '\'' || c == ')' || c == ']' || c == '}'; }

/* The end (exclusive) of the sentence that starts at s[i]. */
static size_t sentence_end(const char *s, size_t i, size_t n) {
    while (i < n) {
        if (s[i] == '\n') return i;
        size_t m = end_mark(s + i);
        if (!m) {
            i++;
            continue;
        }
        size_t j = i + m;
        while (j < n && (is_closer(s[j]) || end_mark(s + j) == 1))
            j++;
        if (j >= n || is_space((unsigned char)s[j]) || m == 3) return j;
        i = j;
    }
    return n;
}

/* Where a part of s[start..end) longer than max is cut: after its last space within max bytes, else at
 * the last character boundary within them. */
static size_t cut_at(const char *s, size_t start, size_t end, size_t max) {
    if (!max || end - start <= max) return end;
    for (size_t j = start + max; j > start; j--)
        if (is_space((unsigned char)s[j - 1])) return j;
    return start + sipp_utf8_complete_prefix(s + start, max);
}

static bool add_part(size_t **parts, size_t *n, size_t *cap, size_t start, size_t len) {
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 8;
        size_t *p = realloc(*parts, 2 * c * sizeof *p);
        if (!p) return false;
        *parts = p;
        *cap = c;
    }
    (*parts)[2 * *n] = start;
    (*parts)[2 * *n + 1] = len;
    (*n)++;
    return true;
}

sipp_status sipp_speech_split(const char *text, size_t max_bytes, size_t **parts, size_t *n_parts) {
    if (!text || !parts || !n_parts) return SIPP_ERR_INVALID_ARGUMENT;
    *parts = NULL;
    *n_parts = 0;
    size_t n = strlen(text), cap = 0, i = 0;
    while (i < n) {
        while (i < n && is_space((unsigned char)text[i]))
            i++;
        if (i >= n) break;
        size_t end = cut_at(text, i, sentence_end(text, i, n), max_bytes);
        if (end <= i) { /* a bound smaller than one character: take the character */
            end = i + 1;
            while (end < n && end < i + UTF8_MAX && ((unsigned char)text[end] & 0xC0) == 0x80)
                end++;
        }
        size_t len = end - i;
        while (len && is_space((unsigned char)text[i + len - 1]))
            len--;
        if (!add_part(parts, n_parts, &cap, i, len)) {
            free(*parts);
            *parts = NULL;
            *n_parts = 0;
            return SIPP_ERR_NO_MEMORY;
        }
        i = end;
    }
    return SIPP_OK;
}
