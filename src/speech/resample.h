/*
 * resample.h: a streaming resampler of mono 16-bit audio (internal to src/speech).
 *
 * One output sample every `step` input samples (step = in_rate / out_rate, times the speed when the
 * audio is to play faster), each a windowed-sinc interpolation of the input around its position, with
 * the cutoff lowered to the output's Nyquist frequency when it is below the input's. Input comes in
 * chunks of any size; the output does not depend on how it was cut, and the whole stream gives
 * exactly ceil(n_in / step) samples, so an encoder that declares its length can count on it.
 */
#ifndef SIPP_SPEECH_RESAMPLE_H
#define SIPP_SPEECH_RESAMPLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sipp_resampler sipp_resampler;

/* A resampler from in_rate to out_rate, played `speed` times as fast (1: the same duration). NULL when
 * out of memory or a rate or speed is not positive. */
sipp_resampler *sipp_resampler_new(int in_rate, int out_rate, double speed);
void sipp_resampler_free(sipp_resampler *r);

/* Feeds n input samples (final: the stream ends after them) and appends what can be computed to
 * *out (realloc'ed; *n_out its length, *cap its capacity). False when out of memory. */
bool sipp_resample(sipp_resampler *r, const int16_t *in, size_t n, bool final, int16_t **out, size_t *n_out,
                   size_t *cap);

/* The number of output samples n input samples give in all. */
size_t sipp_resampled_length(int in_rate, int out_rate, double speed, size_t n);

#endif
