/*
 * resample.c: windowed-sinc resampling, streamed (see resample.h).
 *
 * The input is kept from HALF samples before the next output's position onwards, with HALF zeros
 * in front of the first sample, so every output sees a full window; at the end HALF zeros follow the
 * last sample. Positions are computed as index * step from the output's index, never summed, so a
 * long stream does not drift. A Hann window of HALF taps each side keeps the ripple of a 16 kHz
 * voice far below what 16 bits hold.
 */
#include "speech/resample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define HALF 16 /* taps each side of an output's position */

struct sipp_resampler {
    double step;    /* input samples per output sample */
    double cutoff;  /* of the low-pass, as a fraction of the input's Nyquist frequency */
    float *buf;     /* input from absolute index base on */
    size_t n, cap;  /* samples in buf, and its room */
    long long base; /* the absolute input index of buf[0] (negative for the leading zeros) */
    uint64_t out_i; /* the index of the next output sample */
    uint64_t n_in;  /* input samples fed so far */
    bool done;
};

sipp_resampler *sipp_resampler_new(int in_rate, int out_rate, double speed) {
    if (in_rate <= 0 || out_rate <= 0 || !(speed > 0)) return NULL;
    sipp_resampler *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->step = (double)in_rate * speed / (double)out_rate;
    r->cutoff = r->step > 1 ? 1.0 / r->step : 1.0;
    r->cap = 4096;
    r->buf = calloc(r->cap, sizeof *r->buf);
    if (!r->buf) {
        free(r);
        return NULL;
    }
    r->n = HALF; /* the zeros before the first sample */
    r->base = -HALF;
    return r;
}

void sipp_resampler_free(sipp_resampler *r) {
    if (!r) return;
    free(r->buf);
    free(r);
}

size_t sipp_resampled_length(int in_rate, int out_rate, double speed, size_t n) {
    double step = (double)in_rate * speed / (double)out_rate;
    return (size_t)ceil((double)n / step - 1e-9);
}

static bool push(sipp_resampler *r, const int16_t *in, size_t n, size_t zeros) {
    size_t need = r->n + n + zeros;
    if (need > r->cap) {
        size_t cap = r->cap;
        while (cap < need)
            cap *= 2;
        float *b = realloc(r->buf, cap * sizeof *b);
        if (!b) return false;
        r->buf = b;
        r->cap = cap;
    }
    for (size_t i = 0; i < n; i++)
        r->buf[r->n++] = (float)in[i];
    for (size_t i = 0; i < zeros; i++)
        r->buf[r->n++] = 0;
    return true;
}

static double kernel(double x, double cutoff) {
    double w = 0.5 + 0.5 * cos(M_PI * x / HALF);
    double a = M_PI * x * cutoff;
    return cutoff * (fabs(a) < 1e-9 ? 1.0 : sin(a) / a) * w;
}

/* The output at absolute input position t; buf must hold indices floor(t)-HALF+1 .. floor(t)+HALF. */
static int16_t at(const sipp_resampler *r, double t) {
    long long k0 = (long long)floor(t);
    double acc = 0;
    for (long long k = k0 - HALF + 1; k <= k0 + HALF; k++) {
        double x = t - (double)k;
        acc += r->buf[k - r->base] * kernel(x, r->cutoff);
    }
    double v = nearbyint(acc);
    return (int16_t)(v > 32767 ? 32767 : v < -32768 ? -32768 : v);
}

static bool emit(int16_t **out, size_t *n_out, size_t *cap, int16_t v) {
    if (*n_out == *cap) {
        size_t c = *cap ? *cap * 2 : 1024;
        int16_t *o = realloc(*out, c * sizeof *o);
        if (!o) return false;
        *out = o;
        *cap = c;
    }
    (*out)[(*n_out)++] = v;
    return true;
}

bool sipp_resample(sipp_resampler *r, const int16_t *in, size_t n, bool final, int16_t **out, size_t *n_out,
                   size_t *cap) {
    if (r->done) return n == 0;
    if (!push(r, in, n, final ? HALF : 0)) return false;
    r->n_in += n;
    long long end = r->base + (long long)r->n; /* one past the last index held */
    for (;;) {
        double t = (double)r->out_i * r->step;
        if (t >= (double)r->n_in - 1e-9 * r->step) break;
        if ((long long)floor(t) + HALF >= end) break;
        if (!emit(out, n_out, cap, at(r, t))) return false;
        r->out_i++;
    }
    /* drop what no later output reaches */
    long long keep = (long long)floor((double)r->out_i * r->step) - HALF + 1;
    if (keep > r->base) {
        size_t drop = (size_t)(keep - r->base);
        if (drop > r->n) drop = r->n;
        memmove(r->buf, r->buf + drop, (r->n - drop) * sizeof *r->buf);
        r->n -= drop;
        r->base += (long long)drop;
    }
    r->done = final;
    return true;
}
