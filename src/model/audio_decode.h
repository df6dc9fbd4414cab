/*
 * audio_decode.h: a chat's audio clip measured from its header, then decoded to the mono float
 * samples a projector takes (internal).
 *
 * libmtmd's helper (mtmd_helper_bitmap_init_from_buf) sizes its sample buffer from the length the
 * file's header claims, resampled to the projector's rate, before it reads one sample: a 140-byte
 * FLAC claiming 2^36 samples at 250 Hz asks for 4.4e12 floats and ends the process with an uncaught
 * std::bad_alloc. So sipp decodes audio itself, with the same decoder (the pinned llama.cpp's
 * vendored miniaudio, built with the helper's options and configured as the helper configures it:
 * f32, one channel, the projector's rate), which gives the same samples, and checks what the header
 * claims first:
 *   - the clip's sample rate lies in 8-192 kHz;
 *   - its length, as the decoder will count it, is at most max_seconds;
 *   - that length is one the bytes present can hold (a FLAC frame holds at most 65535 samples in no
 *     fewer than 8 bytes; a WAV sample takes at least half a byte; an MP3's length is counted from the
 *     frames present);
 *   - the length is known (a FLAC stream's STREAMINFO may say 0: unknown).
 * The format is the one the header names (WAV, FLAC or MP3, media_sniff.h); the decoder is not let
 * fall through to scanning the bytes for MP3 frames as libmtmd's does for a file of no format.
 */
#ifndef SIPP_MODEL_AUDIO_DECODE_H
#define SIPP_MODEL_AUDIO_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "sipp.h"

#define SIPP_AUDIO_RATE_MIN 8000
#define SIPP_AUDIO_RATE_MAX 192000

/* What a clip's header says, as the decoder reads it. */
typedef struct sipp_audio_info {
    uint32_t rate;     /* the file's sample rate, Hz */
    uint32_t channels; /* the file's channels */
    double seconds;    /* its length */
    uint64_t frames;   /* its length in frames at the rate asked for (the samples decode gives) */
    uint64_t decoded;  /* sipp_audio_decode: the frames the file's bytes held (fewer: it is cut short, and
                          the rest of the samples are zeros, as libmtmd's helper leaves them) */
} sipp_audio_info;

/* Measures the clip data[0..n) for decoding at out_rate (Hz) without decoding it. SIPP_OK, or
 * SIPP_ERR_INVALID_ARGUMENT with a message in err naming `where`, what the header claims and the
 * limit ("[limits] max_audio_seconds" for the length). [any thread] */
sipp_status sipp_audio_probe(const unsigned char *data, size_t n, uint32_t out_rate, double max_seconds,
                             const char *where, sipp_audio_info *info, char *err);

/* Probes as above, then decodes the clip into *samples (malloc'ed, info->frames floats, mono, at
 * out_rate). The samples are those libmtmd's helper would give for the same file. [any thread] */
sipp_status sipp_audio_decode(const unsigned char *data, size_t n, uint32_t out_rate, double max_seconds,
                              const char *where, float **samples, sipp_audio_info *info, char *err);

#endif
