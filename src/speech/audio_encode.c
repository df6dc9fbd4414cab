/*
 * audio_encode.c: sipp.h's audio encoder, and the two formats that need no codec library: WAV (RIFF,
 * 16-bit PCM) and raw PCM (signed 16-bit little-endian at 24 kHz, as OpenAI's "pcm" is defined).
 *
 * A streamed WAV cannot know its length when its header goes out, so its two size fields hold
 * 0xFFFFFFFF, as ffmpeg writes a WAV to a pipe; readers take that as "to the end of the stream". A WAV
 * that is not streamed is held until the end and its sizes are written exactly.
 */
#include "speech/audio_encode.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PCM_RATE 24000 /* OpenAI's "pcm" */
#define WAV_HEADER_BYTES 44
#define WAV_UNKNOWN_SIZE 0xFFFFFFFFu
#define WAV_MAX_DATA (0xFFFFFFFFu - WAV_HEADER_BYTES)

static const struct {
    const char *name, *mime;
} formats[] = {
    [SIPP_AUDIO_WAV] = {"wav", "audio/wav"},    [SIPP_AUDIO_PCM] = {"pcm", "audio/pcm"},
    [SIPP_AUDIO_FLAC] = {"flac", "audio/flac"}, [SIPP_AUDIO_MP3] = {"mp3", "audio/mpeg"},
    [SIPP_AUDIO_OPUS] = {"opus", "audio/ogg"},
};
#define N_FORMATS (sizeof formats / sizeof formats[0])

sipp_status sipp_audio_format_parse(const char *name, sipp_audio_format *out) {
    for (size_t i = 0; i < N_FORMATS; i++)
        if (name && !strcmp(name, formats[i].name)) {
            *out = (sipp_audio_format)i;
            return SIPP_OK;
        }
    return SIPP_ERR_INVALID_ARGUMENT;
}

const char *sipp_audio_format_name(sipp_audio_format f) {
    return (size_t)f < N_FORMATS ? formats[f].name : "?";
}
const char *sipp_audio_format_mime(sipp_audio_format f) {
    return (size_t)f < N_FORMATS ? formats[f].mime : "application/octet-stream";
}

sipp_status audio_fail(sipp_audio_encoder *e, sipp_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->error, sizeof e->error, fmt, ap);
    va_end(ap);
    e->failed = true;
    return status;
}

sipp_status audio_emit(sipp_audio_encoder *e, const void *data, size_t n) {
    if (!n) return SIPP_OK;
    if (!e->streamed) {
        if (!sipp_buf_append(&e->held, data, n)) return audio_fail(e, SIPP_ERR_NO_MEMORY, "out of memory");
        return SIPP_OK;
    }
    if (!e->write(data, n, e->user))
        return audio_fail(e, SIPP_ERR_CANCELLED, "the receiver of the audio stopped");
    return SIPP_OK;
}

/* ---- WAV and PCM ------------------------------------------------------------------------------- */

void audio_put_le(uint8_t *p, uint32_t v, int bytes) {
    for (int i = 0; i < bytes; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static int identity_rate(int rate) { return rate; }
static int pcm_rate(int input_rate) { return PCM_RATE; }

static void wav_header(uint8_t *h, int rate, uint32_t data_bytes) {
    memcpy(h, "RIFF", 4);
    audio_put_le(h + 4, data_bytes == WAV_UNKNOWN_SIZE ? WAV_UNKNOWN_SIZE : data_bytes + WAV_HEADER_BYTES - 8,
                 4);
    memcpy(h + 8, "WAVEfmt ", 8);
    audio_put_le(h + 16, 16, 4); /* fmt chunk size */
    audio_put_le(h + 20, 1, 2);  /* PCM */
    audio_put_le(h + 22, 1, 2);  /* mono */
    audio_put_le(h + 24, (uint32_t)rate, 4);
    audio_put_le(h + 28, (uint32_t)rate * 2, 4); /* bytes per second */
    audio_put_le(h + 32, 2, 2);                  /* block align */
    audio_put_le(h + 34, 16, 2);                 /* bits per sample */
    memcpy(h + 36, "data", 4);
    audio_put_le(h + 40, data_bytes, 4);
}

static sipp_status wav_open(sipp_audio_encoder *e) {
    uint8_t h[WAV_HEADER_BYTES];
    wav_header(h, e->rate, WAV_UNKNOWN_SIZE);
    return audio_emit(e, h, sizeof h);
}

static sipp_status pcm_write(sipp_audio_encoder *e, const int16_t *s, size_t n) {
    uint8_t buf[2048];
    for (size_t i = 0; i < n;) {
        size_t k = 0;
        for (; k + 2 <= sizeof buf && i < n; i++, k += 2)
            audio_put_le(buf + k, (uint16_t)s[i], 2);
        sipp_status st = audio_emit(e, buf, k);
        if (st != SIPP_OK) return st;
    }
    return SIPP_OK;
}

static sipp_status wav_finish(sipp_audio_encoder *e) {
    if (e->streamed) return SIPP_OK;
    uint64_t data = e->n_samples * 2;
    if (data > WAV_MAX_DATA)
        return audio_fail(e, SIPP_ERR_INVALID_ARGUMENT, "the audio is too long for a WAV file");
    wav_header((uint8_t *)e->held.data, e->rate, (uint32_t)data);
    return SIPP_OK;
}

static sipp_status no_open(sipp_audio_encoder *e) { return SIPP_OK; }
static sipp_status no_finish(sipp_audio_encoder *e) { return SIPP_OK; }
static void no_close(sipp_audio_encoder *e) {}

static const audio_codec audio_codec_wav = {identity_rate, identity_rate, wav_open,
                                            pcm_write,     wav_finish,    no_close};
static const audio_codec audio_codec_pcm = {pcm_rate, identity_rate, no_open, pcm_write, no_finish, no_close};

static const audio_codec *codec_of(sipp_audio_format f) {
    switch (f) {
    case SIPP_AUDIO_WAV: return &audio_codec_wav;
    case SIPP_AUDIO_PCM: return &audio_codec_pcm;
    case SIPP_AUDIO_FLAC: return &audio_codec_flac;
    case SIPP_AUDIO_MP3: return &audio_codec_mp3;
    case SIPP_AUDIO_OPUS: return &audio_codec_opus;
    }
    return NULL;
}

/* ---- the encoder ------------------------------------------------------------------------------- */

sipp_status sipp_audio_encoder_new(sipp_audio_format format, int input_rate, bool streamed,
                                   sipp_bytes_fn write, void *user, sipp_audio_encoder **out, char *err) {
    *out = NULL;
    const audio_codec *codec = codec_of(format);
    if (!codec) return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "unknown audio format %d", (int)format);
    if (input_rate < 1000 || input_rate > 384000 || !write)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "audio encoder: input rate %d Hz is out of range",
                         input_rate);
    sipp_audio_encoder *e = calloc(1, sizeof *e);
    if (!e) return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    *e = (sipp_audio_encoder){.codec = codec,
                              .format = format,
                              .input_rate = input_rate,
                              .streamed = streamed,
                              .write = write,
                              .user = user};
    e->rate = codec->codec_rate(input_rate);
    if (e->rate != input_rate && !(e->rs = sipp_resampler_new(input_rate, e->rate, 1.0))) {
        free(e);
        return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    }
    sipp_status st = codec->open(e);
    if (st != SIPP_OK) {
        sipp_fail(err, st, "%s encoder: %s", formats[format].name, e->error);
        sipp_audio_encoder_free(e);
        return st;
    }
    *out = e;
    return SIPP_OK;
}

int sipp_audio_encoder_output_rate(const sipp_audio_encoder *e) { return e->codec->output_rate(e->rate); }
const char *sipp_audio_encoder_last_error(const sipp_audio_encoder *e) { return e ? e->error : ""; }

static sipp_status feed(sipp_audio_encoder *e, const int16_t *s, size_t n, bool final) {
    if (!e->rs) {
        e->n_samples += n;
        return n ? e->codec->write(e, s, n) : SIPP_OK;
    }
    int16_t *out = NULL;
    size_t n_out = 0, cap = 0;
    if (!sipp_resample(e->rs, s, n, final, &out, &n_out, &cap)) {
        free(out);
        return audio_fail(e, SIPP_ERR_NO_MEMORY, "out of memory");
    }
    e->n_samples += n_out;
    sipp_status st = n_out ? e->codec->write(e, out, n_out) : SIPP_OK;
    free(out);
    return st;
}

sipp_status sipp_audio_encoder_write(sipp_audio_encoder *e, const int16_t *s, size_t n) {
    if (e->finished || e->failed)
        return audio_fail(e, SIPP_ERR_INVALID_ARGUMENT, "write after the encoder ended");
    return feed(e, s, n, false);
}

sipp_status sipp_audio_encoder_finish(sipp_audio_encoder *e) {
    if (e->finished || e->failed)
        return audio_fail(e, SIPP_ERR_INVALID_ARGUMENT, "the encoder already ended");
    sipp_status st = feed(e, NULL, 0, true);
    if (st == SIPP_OK) st = e->codec->finish(e);
    e->finished = true;
    if (st != SIPP_OK || e->streamed) return st;
    if (e->held.len && !e->write(e->held.data, e->held.len, e->user))
        return audio_fail(e, SIPP_ERR_CANCELLED, "the receiver of the audio stopped");
    return SIPP_OK;
}

void sipp_audio_encoder_free(sipp_audio_encoder *e) {
    if (!e) return;
    e->codec->close(e);
    sipp_resampler_free(e->rs);
    sipp_buf_free(&e->held);
    free(e);
}
