/*
 * libFuzzer harness for an audio clip's measuring and decoding (src/model/audio_decode.c, through the
 * pinned miniaudio it drives): whatever a header claims, a clip is refused or decoded within the
 * limit, never past it. Seeds: tests/fuzz/corpus/audio (real WAV, FLAC and MP3, and the forged
 * headers of issue 44).
 * Invariants checked beyond the sanitizers':
 *   - an accepted clip's rate is within 8-192 kHz and its length within the limit;
 *   - the frames decoded are at most the limit's worth at the asked rate (plus the resampler's one);
 *   - a refusal names the clip.
 *
 *   make fuzz-bins && build/fuzz/fuzz_audio -max_total_time=60 /tmp/audio-corpus tests/fuzz/corpus/audio
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/audio_decode.h"

#define MAX_INPUT 65536
#define RATE 16000
#define MAX_SECONDS 5.0

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "invariant broken: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > MAX_INPUT) return 0;
    char err[SIPP_ERROR_SIZE] = "";
    sipp_audio_info info;
    float *pcm = NULL;
    sipp_status st = sipp_audio_decode(data, size, RATE, MAX_SECONDS, "clip", &pcm, &info, err);
    if (st != SIPP_OK) {
        check(strstr(err, "'clip'") != NULL || st == SIPP_ERR_NO_MEMORY, "a refusal that names no clip");
        check(pcm == NULL, "samples with a refusal");
        return 0;
    }
    check(info.rate >= SIPP_AUDIO_RATE_MIN && info.rate <= SIPP_AUDIO_RATE_MAX, "a rate out of range");
    check(isfinite(info.seconds) && info.seconds <= MAX_SECONDS, "a length past the limit");
    check(info.frames <= (uint64_t)(MAX_SECONDS * RATE) + 1, "more frames than the limit");
    volatile float sum = 0; /* every sample is there to read */
    for (uint64_t i = 0; i < info.frames; i++)
        sum += pcm[i];
    (void)sum;
    free(pcm);
    return 0;
}
