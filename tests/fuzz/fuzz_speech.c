/*
 * libFuzzer harness for the parts of src/speech that take arbitrary input without a voice:
 * sipp_speech_split (any bytes as text, any bound) and the streaming resampler (any samples, rates,
 * speed and chunking). Sanitizers catch memory errors; the harness aborts when a promise breaks:
 *   - the parts lie inside the text, in order, without overlap, none empty, none starting or ending
 *     with white space, none longer than the bound unless one character is longer;
 *   - the resampler gives exactly sipp_resampled_length samples, the same however the input is cut.
 *
 * Input layout: byte 0 picks the bound (0: none), the rest is the text; the same bytes are also read as
 * samples, with two more bytes choosing the rates and the chunk size.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sipp.h"
#include "speech/resample.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const int RATES[] = {8000, 11025, 16000, 22050, 24000, 44100, 48000};
#define N_RATES (sizeof RATES / sizeof RATES[0])
static const double SPEEDS[] = {0.25, 0.5, 1.0, 1.5, 4.0};
#define N_SPEEDS (sizeof SPEEDS / sizeof SPEEDS[0])

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "invariant broken: %s\n", what);
        abort();
    }
}

static int space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f'; }

static void fuzz_split(const uint8_t *data, size_t size) {
    size_t bound = size ? data[0] % 64 : 0;
    char *text = malloc(size + 1);
    if (!text) return;
    if (size > 1) memcpy(text, data + 1, size - 1);
    text[size > 1 ? size - 1 : 0] = 0; /* a NUL inside ends the text, as in C */
    size_t len = strlen(text), *parts, n, end = 0;
    check(sipp_speech_split(text, bound, &parts, &n) == SIPP_OK, "split succeeds");
    for (size_t i = 0; i < n; i++) {
        size_t start = parts[2 * i], plen = parts[2 * i + 1];
        check(start >= end && start + plen <= len, "parts inside the text, in order");
        check(plen > 0 && !space(text[start]) && !space(text[start + plen - 1]), "no empty or padded part");
        check(!bound || plen <= bound || plen <= 4, "a part within the bound (or one character)");
        end = start + plen;
    }
    free(parts);
    free(text);
}

static int16_t *run(int in, int out, double speed, const int16_t *s, size_t n, size_t chunk, size_t *n_out) {
    sipp_resampler *r = sipp_resampler_new(in, out, speed);
    int16_t *o = NULL;
    size_t cap = 0;
    *n_out = 0;
    for (size_t i = 0; i == 0 || i < n; i += chunk) {
        size_t k = n - i < chunk ? n - i : chunk;
        check(sipp_resample(r, s + i, k, i + k >= n, &o, n_out, &cap), "resample succeeds");
        if (i + k >= n) break;
    }
    sipp_resampler_free(r);
    return o;
}

static void fuzz_resample(const uint8_t *data, size_t size) {
    if (size < 3) return;
    int in = RATES[data[0] % N_RATES], out = RATES[data[1] % N_RATES];
    double speed = SPEEDS[(data[2] >> 4) % N_SPEEDS];
    size_t chunk = 1 + (data[2] & 15) * 7, n = (size - 3) / 2;
    int16_t *s = malloc(n ? n * sizeof *s : 1);
    if (!s) return;
    memcpy(s, data + 3, n * sizeof *s);
    size_t n_whole, n_cut;
    int16_t *whole = run(in, out, speed, s, n, n ? n : 1, &n_whole),
            *cut = run(in, out, speed, s, n, chunk, &n_cut);
    check(n_whole == sipp_resampled_length(in, out, speed, n), "the promised length");
    check(n_cut == n_whole && (!n_whole || !memcmp(whole, cut, n_whole * sizeof *cut)),
          "chunking changes nothing");
    free(s);
    free(whole);
    free(cut);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_split(data, size);
    fuzz_resample(data, size);
    return 0;
}
