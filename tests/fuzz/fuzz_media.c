/*
 * libFuzzer harness for the readers of a chat's images and audio: src/util/base64.c (the data: URL's
 * payload) and src/util/media_sniff.c (the file kind and an image's size from its header, read
 * before anything decodes it). The input is tried both as base64 text and as file bytes.
 * Invariants checked beyond the sanitizers':
 *   - a decode writes at most sipp_base64_max_decoded bytes;
 *   - a sniffed image has a size of at least 1x1, audio has none, and the kind has a name;
 *   - a WAV's length in seconds (read from its header) is finite, not negative, and only a WAV has one.
 *
 *   make fuzz-bins && build/fuzz/fuzz_media -max_total_time=60 /tmp/media-corpus tests/fuzz/corpus/media
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/base64.h"
#include "util/media_sniff.h"

#define MAX_INPUT 65536
#define GUARD 16
#define GUARD_BYTE 0xA5

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "invariant broken: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > MAX_INPUT) return 0;
    size_t max = sipp_base64_max_decoded(size);
    unsigned char *out = malloc(max + GUARD);
    if (!out) return 0;
    memset(out + max, GUARD_BYTE, GUARD);
    size_t n = 0;
    if (sipp_base64_decode((const char *)data, size, out, &n)) check(n <= max, "decoded past the bound");
    for (size_t i = 0; i < GUARD; i++)
        check(out[max + i] == GUARD_BYTE, "wrote past the buffer");
    free(out);

    sipp_media_info info;
    if (sipp_media_sniff(data, size, &info)) {
        check(info.kind != SIPP_MEDIA_UNKNOWN, "sniffed as unknown");
        check(strcmp(sipp_media_kind_name(info.kind), "unknown") != 0, "a kind without a name");
        if (sipp_media_is_audio(info.kind))
            check(info.width == 0 && info.height == 0, "audio with a size");
        else
            check(info.width > 0 && info.height > 0, "an image of no size");
    }
    double seconds = -1;
    if (sipp_media_wav_seconds(data, size, &seconds)) {
        check(seconds >= 0 && seconds == seconds && seconds < 1e12, "a WAV length out of range");
        check(sipp_media_sniff(data, size, &info) && info.kind == SIPP_MEDIA_WAV, "a length for no WAV");
    }
    return 0;
}
