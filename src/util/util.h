/*
 * util.h: the small helpers every part of libsipp uses: error messages into fixed buffers, a
 * growable byte buffer, monotonic time, and UTF-8 boundaries.
 *
 * They are internal (not in sipp.h). Nothing here knows about llama.cpp.
 */
#ifndef SIPP_UTIL_H
#define SIPP_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "sipp.h"

#define SIPP_PRINTF(fmt_idx, args_idx) __attribute__((format(printf, fmt_idx, args_idx)))

/* Writes a message into buf (SIPP_ERROR_SIZE bytes) when buf is not NULL; returns status, so that
 * `return sipp_fail(err, SIPP_ERR_IO, "...")` reads as one statement. */
sipp_status sipp_fail(char *buf, sipp_status status, const char *fmt, ...) SIPP_PRINTF(3, 4);

/* Like strdup, NULL in gives NULL out. */
char *sipp_strdup(const char *s);

/* Copies src into dst of size n, always NUL-terminated, truncating at a UTF-8 character boundary. */
void sipp_strlcpy(char *dst, const char *src, size_t n);
/* n_bytes from the kernel's random source (getrandom) as 2 * n_bytes lowercase hex digits and a
 * NUL in out; false (out is then no id at all) when the kernel gives fewer. For ids and tokens nobody may
 * guess. */
bool sipp_random_hex(char *out, size_t n_bytes);

/* A byte count for people: "807.7 MB" (decimal units, as Hugging Face shows sizes). */
void sipp_format_size(uint64_t bytes, char *out, size_t cap);

/* A duration for people: 75 s as "1:15", 3725 s as "1:02:05" (rounded to the second). */
void sipp_format_duration(double seconds, char *out, size_t cap);

/* Milliseconds on the monotonic clock. */
double sipp_now_ms(void);
/* Seconds since the epoch (CLOCK_REALTIME), with the fraction. */
double sipp_unix_now(void);
/* unix_s as ISO 8601 in UTC with nanoseconds ("2026-12-07T14:19:12.123456789Z", as Ollama and the
 * Responses API print times): SIPP_TIME_SIZE bytes hold it. */
#define SIPP_TIME_SIZE 48
void sipp_iso_time(double unix_s, char *out, size_t cap);

/* The time ms milliseconds from now on clock, as pthread_cond_timedwait takes it: CLOCK_REALTIME
 * for a condition variable with default attributes, CLOCK_MONOTONIC for one set to that clock. */
void sipp_deadline_in(struct timespec *ts, clockid_t clock, int ms);

/* A growable byte buffer, always NUL-terminated. */
typedef struct sipp_buf {
    char *data;
    size_t len;
    size_t cap;
} sipp_buf;

bool sipp_buf_append(sipp_buf *b, const char *s, size_t n);
bool sipp_buf_appendf(sipp_buf *b, const char *fmt, ...) SIPP_PRINTF(2, 3);
void sipp_buf_consume(sipp_buf *b, size_t n); /* drops the first n bytes */
void sipp_buf_free(sipp_buf *b);

/* The length of the longest prefix of s[0..n) that does not end inside a UTF-8 character: what can
 * be emitted now without splitting one. Invalid bytes count as complete (they are passed through
 * for the caller to replace). */
size_t sipp_utf8_complete_prefix(const char *s, size_t n);

/* Appends s[0..n) with every byte that is not part of a valid UTF-8 character replaced by U+FFFD,
 * so that what reaches a client (and a JSON encoder) is always valid UTF-8. NUL is replaced too:
 * a model can emit it (byte-fallback token <0x00>), but sipp's text is NUL-terminated, and a
 * client that sends the answer back as history would have it refused ("\u0000" in JSON). */
bool sipp_buf_append_utf8(sipp_buf *b, const char *s, size_t n);

/* True when s[0..n) is valid UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF). */
bool sipp_utf8_valid(const char *s, size_t n);

#endif
