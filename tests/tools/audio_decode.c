/*
 * audio_decode.c: sipp's own decoding of an audio clip (src/model/audio_decode.c), for comparing
 * with libmtmd's helper (mtmd_probe with MTMD_PROBE_DUMP) in tests/integration/test_media_limits.py.
 *
 *   build/tests/audio_decode CLIP RATE OUT    decodes CLIP to mono floats at RATE Hz into OUT
 *   build/tests/audio_decode CLIP RATE        measures it only, and prints what the header says
 *
 * Prints "rate N", "channels N", "seconds S" and "frames N" (samples at RATE); exit status 1 with
 * sipp's message on stderr when the clip is refused (the default limit, 600 s), 64 on bad usage.
 */
#include <stdio.h>
#include <stdlib.h>

#include "model/audio_decode.h"

#define MAX_SECONDS 600.0
#define MAX_FILE ((long)64 << 20)

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    unsigned char *buf = malloc(MAX_FILE);
    *n = buf ? fread(buf, 1, MAX_FILE, f) : 0;
    fclose(f);
    return buf;
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: audio_decode CLIP RATE [OUT]\n");
        return 64;
    }
    size_t n = 0;
    unsigned char *data = slurp(argv[1], &n);
    if (!data) {
        fprintf(stderr, "audio_decode: cannot read %s\n", argv[1]);
        return 64;
    }
    char err[SIPP_ERROR_SIZE];
    sipp_audio_info info;
    float *pcm = NULL;
    uint32_t rate = (uint32_t)strtoul(argv[2], NULL, 10);
    sipp_status st = argc == 4 ? sipp_audio_decode(data, n, rate, MAX_SECONDS, "clip", &pcm, &info, err)
                               : sipp_audio_probe(data, n, rate, MAX_SECONDS, "clip", &info, err);
    free(data);
    if (st != SIPP_OK) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    printf("rate %u\nchannels %u\nseconds %.6f\nframes %llu\n", info.rate, info.channels, info.seconds,
           (unsigned long long)info.frames);
    if (pcm) {
        FILE *f = fopen(argv[3], "wb");
        if (!f || fwrite(pcm, sizeof *pcm, info.frames, f) != info.frames) return 1;
        fclose(f);
        free(pcm);
    }
    return 0;
}
