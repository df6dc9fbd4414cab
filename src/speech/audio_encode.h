/*
 * audio_encode.h: what the encoders of each format share (internal to src/speech).
 *
 * audio_encode.c holds sipp.h's sipp_audio_encoder: the choice of codec, resampling to the rate the
 * codec takes, and where the bytes go (straight to the caller when streamed, into a buffer that the
 * codec may patch at the end otherwise). Each codec is one file that fills an audio_codec: WAV and
 * raw PCM here, FLAC (audio_flac.c), MP3 (audio_mp3.c), Opus in Ogg (audio_opus.c).
 */
#ifndef SIPP_SPEECH_AUDIO_ENCODE_H
#define SIPP_SPEECH_AUDIO_ENCODE_H

#include <stdbool.h>
#include <stdint.h>

#include "sipp.h"
#include "speech/resample.h"
#include "util/util.h"

typedef struct audio_codec {
    /* The rate the codec will be fed, given the input's (the encoder resamples to it). */
    int (*codec_rate)(int input_rate);
    /* The rate the output decodes at. */
    int (*output_rate)(int codec_rate);
    sipp_status (*open)(sipp_audio_encoder *e);
    sipp_status (*write)(sipp_audio_encoder *e, const int16_t *s, size_t n);
    sipp_status (*finish)(sipp_audio_encoder *e); /* flushes; may patch e->held when not streamed */
    void (*close)(sipp_audio_encoder *e);
} audio_codec;

struct sipp_audio_encoder {
    const audio_codec *codec;
    sipp_audio_format format;
    int input_rate, rate; /* rate: what the codec is fed */
    bool streamed, finished, failed;
    sipp_bytes_fn write;
    void *user;
    sipp_resampler *rs; /* input_rate to rate, when they differ */
    sipp_buf held;      /* everything, until finish, when not streamed */
    uint64_t n_samples; /* fed to the codec so far */
    void *state;        /* the codec's */
    char error[SIPP_ERROR_SIZE];
};

/* Sends bytes on (or holds them); an error when the receiver stopped or memory ran out. */
sipp_status audio_emit(sipp_audio_encoder *e, const void *data, size_t n);
/* Records a failure on e and returns status. */
sipp_status audio_fail(sipp_audio_encoder *e, sipp_status status, const char *fmt, ...) SIPP_PRINTF(3, 4);

/* Writes v's low `bytes` bytes at p, least significant first (RIFF's and Ogg Opus's byte order). */
void audio_put_le(uint8_t *p, uint32_t v, int bytes);

extern const audio_codec audio_codec_flac, audio_codec_mp3, audio_codec_opus;

#endif
