/*
 * stop_filter.c: see stop_filter.h.
 */
#include "engine/stop_filter.h"

#include <stdlib.h>
#include <string.h>

#define REPLACEMENT_CHAR "\xEF\xBF\xBD"

bool sipp_output_init(sipp_output *o, const char *const *stop, size_t n_stop) {
    memset(o, 0, sizeof *o);
    if (n_stop == 0) return true;
    o->stop = calloc(n_stop, sizeof *o->stop);
    if (!o->stop) return false;
    for (size_t i = 0; i < n_stop; i++) {
        if (!stop[i] || !*stop[i]) continue;
        if (!(o->stop[o->n_stop] = strdup(stop[i]))) return false;
        size_t len = strlen(stop[i]);
        if (len > o->max_stop_len) o->max_stop_len = len;
        o->n_stop++;
    }
    return true;
}

void sipp_output_free(sipp_output *o) {
    for (size_t i = 0; i < o->n_stop; i++)
        free(o->stop[i]);
    free(o->stop);
    sipp_buf_free(&o->pending);
    memset(o, 0, sizeof *o);
}

/* The length of the longest suffix of s[0..n) that is a proper prefix of some stop string: text
 * that must wait because the next piece could complete a stop string. */
static size_t held_for_stop(const sipp_output *o, const char *s, size_t n) {
    size_t longest = 0;
    for (size_t i = 0; i < o->n_stop; i++) {
        size_t sl = strlen(o->stop[i]);
        size_t max = sl - 1 < n ? sl - 1 : n;
        for (size_t k = max; k > longest; k--) {
            if (memcmp(s + n - k, o->stop[i], k) == 0) {
                longest = k;
                break;
            }
        }
    }
    return longest;
}

bool sipp_output_push(sipp_output *o, const char *piece, size_t len, sipp_buf *emit) {
    sipp_buf_append(&o->pending, piece, len);
    const char *s = o->pending.data;
    size_t n = o->pending.len;

    /* The earliest stop string wins. */
    size_t at = n;
    for (size_t i = 0; i < o->n_stop; i++) {
        const char *hit = memmem(s, n, o->stop[i], strlen(o->stop[i]));
        if (hit && (size_t)(hit - s) < at) {
            at = (size_t)(hit - s);
            o->matched = o->stop[i];
        }
    }
    if (at < n) {
        sipp_buf_append_utf8(emit, s, at);
        sipp_buf_consume(&o->pending, n);
        return true;
    }
    size_t release = n - held_for_stop(o, s, n);
    release = sipp_utf8_complete_prefix(s, release);
    sipp_buf_append_utf8(emit, s, release);
    sipp_buf_consume(&o->pending, release);
    return false;
}

void sipp_output_flush(sipp_output *o, sipp_buf *emit) {
    size_t n = o->pending.len;
    size_t whole = sipp_utf8_complete_prefix(o->pending.data, n);
    sipp_buf_append_utf8(emit, o->pending.data, whole);
    if (whole < n) sipp_buf_append(emit, REPLACEMENT_CHAR, strlen(REPLACEMENT_CHAR));
    sipp_buf_consume(&o->pending, n);
}
