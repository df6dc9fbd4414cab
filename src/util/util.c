/*
 * util.c: see util.h. Small on purpose: each helper exists because two or more modules need it.
 */
#include "util/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* getrandom returns up to 256 bytes at once without being cut short by a signal. */
#define SIPP_RANDOM_CHUNK 256

sipp_status sipp_fail(char *buf, sipp_status status, const char *fmt, ...) {
    if (buf) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, SIPP_ERROR_SIZE, fmt, ap);
        va_end(ap);
    }
    return status;
}

char *sipp_strdup(const char *s) { return s ? strdup(s) : NULL; }

void sipp_strlcpy(char *dst, const char *src, size_t n) {
    if (n == 0) return;
    size_t len = src ? strlen(src) : 0;
    if (len >= n) len = sipp_utf8_complete_prefix(src, n - 1);
    if (len) memcpy(dst, src, len);
    dst[len] = '\0';
}

double sipp_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

double sipp_unix_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void sipp_iso_time(double unix_s, char *out, size_t cap) {
    time_t secs = (time_t)unix_s;
    struct tm tm;
    gmtime_r(&secs, &tm);
    char base[SIPP_TIME_SIZE];
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    long nanos = (long)((unix_s - (double)secs) * 1e9);
    if (nanos < 0) nanos = 0;
    snprintf(out, cap, "%s.%09ldZ", base, nanos);
}

void sipp_deadline_in(struct timespec *ts, clockid_t clock, int ms) {
    clock_gettime(clock, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    ts->tv_sec += ts->tv_nsec / 1000000000L;
    ts->tv_nsec %= 1000000000L;
}

static bool buf_reserve(sipp_buf *b, size_t extra) {
    if (b->len + extra + 1 <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) return false;
    b->data = p;
    b->cap = cap;
    return true;
}

bool sipp_random_hex(char *out, size_t n_bytes) {
    unsigned char b[SIPP_RANDOM_CHUNK];
    static const char digits[] = "0123456789abcdef";
    for (size_t done = 0; done < n_bytes;) {
        size_t n = n_bytes - done < sizeof b ? n_bytes - done : sizeof b;
        if (getrandom(b, n, 0) != (ssize_t)n) return false;
        for (size_t i = 0; i < n; i++) {
            out[2 * (done + i)] = digits[b[i] >> 4];
            out[2 * (done + i) + 1] = digits[b[i] & 0xf];
        }
        done += n;
    }
    out[2 * n_bytes] = '\0';
    return true;
}

bool sipp_buf_append(sipp_buf *b, const char *s, size_t n) {
    if (!buf_reserve(b, n)) return false;
    if (n) memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return true;
}

bool sipp_buf_appendf(sipp_buf *b, const char *fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    bool ok = n >= 0 && buf_reserve(b, (size_t)n);
    if (ok) {
        vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap2);
        b->len += (size_t)n;
    }
    va_end(ap2);
    return ok;
}

void sipp_buf_consume(sipp_buf *b, size_t n) {
    if (n >= b->len) {
        b->len = 0;
    } else {
        memmove(b->data, b->data + n, b->len - n);
        b->len -= n;
    }
    if (b->data) b->data[b->len] = '\0';
}

void sipp_buf_free(sipp_buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* The number of bytes a UTF-8 sequence has, from its lead byte; 0 for a continuation or invalid
 * lead byte. */
static int utf8_seq_len(unsigned char c) {
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c >= 0xE0 && c <= 0xEF) return 3;
    if (c >= 0xF0 && c <= 0xF4) return 4;
    return 0;
}

size_t sipp_utf8_complete_prefix(const char *s, size_t n) {
    /* Only the last three bytes can start an unfinished character. */
    for (size_t back = 1; back <= 4 && back <= n; back++) {
        unsigned char c = (unsigned char)s[n - back];
        if ((c & 0xC0) == 0x80) continue; /* continuation: keep looking for the lead byte */
        int need = utf8_seq_len(c);
        if (need > (int)back) return n - back; /* the lead byte's character is not complete */
        return n;
    }
    return n;
}

/* The length of the valid UTF-8 character at p[0..n), or 0 when it is not one (truncated, overlong,
 * a surrogate, above U+10FFFF, or a stray continuation byte). */
static size_t utf8_char_len(const unsigned char *p, size_t n) {
    int len = utf8_seq_len(p[0]);
    if (len == 0 || (size_t)len > n) return 0;
    uint32_t cp = len == 1 ? p[0] : (uint32_t)(p[0] & (0x7F >> len));
    for (int k = 1; k < len; k++) {
        if ((p[k] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (p[k] & 0x3F);
    }
    static const uint32_t min_for_len[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_for_len[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return (size_t)len;
}

bool sipp_utf8_valid(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0, len; i < n; i += len)
        if ((len = utf8_char_len(p + i, n - i)) == 0) return false;
    return true;
}

#define REPLACEMENT_CHAR "\xEF\xBF\xBD"

bool sipp_buf_append_utf8(sipp_buf *b, const char *s, size_t n) {
    if (n == 0) return sipp_buf_append(b, "", 0); /* keeps the buffer NUL-terminated, s may be NULL */
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, run = 0; /* a run of valid bytes is copied at once */
    while (i < n) {
        size_t len = p[i] ? utf8_char_len(p + i, n - i) : 0; /* NUL: see util.h */
        if (len) {
            i += len;
            continue;
        }
        if (!sipp_buf_append(b, s + run, i - run) || !sipp_buf_append(b, REPLACEMENT_CHAR, 3)) return false;
        run = ++i;
    }
    return sipp_buf_append(b, s + run, n - run);
}

void sipp_format_size(uint64_t bytes, char *out, size_t cap) {
    static const char *const units[] = {"B", "kB", "MB", "GB", "TB", "PB"};
    double v = (double)bytes;
    size_t u = 0;
    while (v >= 1000 && u + 1 < sizeof units / sizeof units[0])
        v /= 1000, u++;
    if (u == 0)
        snprintf(out, cap, "%llu B", (unsigned long long)bytes);
    else
        snprintf(out, cap, "%.1f %s", v, units[u]);
}

#define SECONDS_PER_MINUTE 60
#define SECONDS_PER_HOUR 3600

void sipp_format_duration(double seconds, char *out, size_t cap) {
    const long t = (long)(seconds + 0.5);
    if (t >= SECONDS_PER_HOUR)
        snprintf(out, cap, "%ld:%02ld:%02ld", t / SECONDS_PER_HOUR, t % SECONDS_PER_HOUR / SECONDS_PER_MINUTE,
                 t % SECONDS_PER_MINUTE);
    else
        snprintf(out, cap, "%ld:%02ld", t / SECONDS_PER_MINUTE, t % SECONDS_PER_MINUTE);
}
