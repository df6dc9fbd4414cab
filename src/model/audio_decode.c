/*
 * audio_decode.c: audio clips measured, then decoded (see audio_decode.h).
 */
#include "model/audio_decode.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/miniaudio_options.h"
#include "util/media_sniff.h"
#include "util/util.h"

/* The most frames the bytes of each format can hold: a FLAC frame of 65535 samples needs at least a
 * 6-byte header, a 1-byte subframe per channel and a 2-byte CRC (a constant subframe), so 8192 per
 * byte is above any real file; a WAV sample is at least 4 bits (ADPCM); an MP3 frame of 1152 samples
 * is at least 72 bytes (counted from frames present, so checked only as a bound). */
#define FLAC_FRAMES_PER_BYTE 8192u
#define WAV_FRAMES_PER_BYTE 2u
#define MP3_FRAMES_PER_BYTE 16u
#define WAV_CHUNKS_AT 12 /* after "RIFF", its size and "WAVE" */
#define WAV_CHUNK_HEADER 8

typedef struct format_rule {
    sipp_media_kind kind;
    ma_encoding_format encoding;
    uint64_t frames_per_byte;
} format_rule;

static const format_rule rules[] = {
    {SIPP_MEDIA_WAV, ma_encoding_format_wav, WAV_FRAMES_PER_BYTE},
    {SIPP_MEDIA_FLAC, ma_encoding_format_flac, FLAC_FRAMES_PER_BYTE},
    {SIPP_MEDIA_MP3, ma_encoding_format_mp3, MP3_FRAMES_PER_BYTE},
};

static const format_rule *rule_for(const unsigned char *data, size_t n) {
    sipp_media_info info;
    if (!sipp_media_sniff(data, n, &info)) return NULL;
    for (size_t i = 0; i < sizeof rules / sizeof *rules; i++)
        if (rules[i].kind == info.kind) return &rules[i];
    return NULL;
}

/* The header's claims against the limits, for a decoder already opened on the clip. */
static sipp_status measure(ma_decoder *dec, const format_rule *rule, size_t n, double max_seconds,
                           const char *where, sipp_audio_info *info, char *err) {
    const char *name = sipp_media_kind_name(rule->kind);
    ma_uint32 rate = 0, channels = 0;
    ma_uint64 frames = 0;
    if (ma_data_source_get_data_format(dec->pBackend, NULL, &channels, &rate, NULL, 0) != MA_SUCCESS ||
        ma_data_source_get_length_in_pcm_frames(dec->pBackend, &frames) != MA_SUCCESS)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "'%s' is a %s clip whose header gives no length",
                         where, name);
    info->rate = rate;
    info->channels = channels;
    if (rate < SIPP_AUDIO_RATE_MIN || rate > SIPP_AUDIO_RATE_MAX)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                         "'%s' is a %s clip at %u Hz; sipp takes %d to %d Hz; resample it", where, name, rate,
                         SIPP_AUDIO_RATE_MIN, SIPP_AUDIO_RATE_MAX);
    if (frames == 0)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                         "'%s' is a %s clip whose header does not say how long it is (0 samples); encode it "
                         "with its length",
                         where, name);
    if (frames / rule->frames_per_byte > n)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                         "'%s' is a %s clip whose header claims %llu samples, more than its %zu bytes can "
                         "hold; the file is damaged or forged",
                         where, name, (unsigned long long)frames, n);
    info->seconds = (double)frames / rate;
    if (info->seconds > max_seconds)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                         "'%s' is a %s clip of %.1f s, over the limit of %.0f s ([limits] max_audio_seconds)",
                         where, name, info->seconds, max_seconds);
    /* Bounded now (max_seconds at out_rate): the decoder's own count of resampled frames, the number
     * libmtmd's helper sizes its buffer with. */
    ma_uint64 out = 0;
    if (ma_decoder_get_length_in_pcm_frames(dec, &out) != MA_SUCCESS || out == 0)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "'%s' is a %s clip whose length cannot be read",
                         where, name);
    info->frames = out;
    return SIPP_OK;
}

/* dr_wav (inside miniaudio) walks a WAV's chunks up to "data" by the sizes they claim, in 32-bit
 * arithmetic: a size of 0xFFFFFFF8 brings it back to the same chunk's header, and it loops there for
 * ever (a 61-byte clip held a core until the process was killed). So every chunk before "data" must fit
 * in the bytes that follow it; "data" itself may claim more (a streamed WAV's placeholder size). */
static sipp_status wav_chunks_fit(const unsigned char *d, size_t n, const char *where, char *err) {
    size_t at = WAV_CHUNKS_AT;
    while (at + WAV_CHUNK_HEADER <= n && memcmp(d + at, "data", 4) != 0) {
        uint32_t size = (uint32_t)d[at + 4] | (uint32_t)d[at + 5] << 8 | (uint32_t)d[at + 6] << 16 |
                        (uint32_t)d[at + 7] << 24;
        size_t left = n - at - WAV_CHUNK_HEADER;
        if (size > left)
            return sipp_fail(
                err, SIPP_ERR_INVALID_ARGUMENT,
                "'%s' is a WAV clip whose chunk at byte %zu claims %u bytes, more than the %zu that "
                "follow it; the file is damaged or forged",
                where, at, (unsigned)size, left);
        at += WAV_CHUNK_HEADER + (size_t)size + (size & 1u);
    }
    return SIPP_OK;
}

/* Opens a decoder on the clip as libmtmd's helper does (f32, mono, out_rate), in the format its
 * header names, and measures it. */
static sipp_status open_clip(ma_decoder *dec, const unsigned char *data, size_t n, uint32_t out_rate,
                             double max_seconds, const char *where, sipp_audio_info *info, char *err) {
    *info = (sipp_audio_info){0};
    const format_rule *rule = rule_for(data, n);
    if (!rule)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "'%s' is not an audio clip (WAV, MP3 or FLAC)",
                         where);
    if (rule->kind == SIPP_MEDIA_WAV) {
        sipp_status st = wav_chunks_fit(data, n, where, err);
        if (st != SIPP_OK) return st;
    }
    ma_decoder_config cfg = ma_decoder_config_init(ma_format_f32, 1, out_rate);
    cfg.encodingFormat = rule->encoding;
    if (ma_decoder_init_memory(data, n, &cfg, dec) != MA_SUCCESS)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                         "'%s' is not a readable audio clip: it looks like %s but its header cannot be read",
                         where, sipp_media_kind_name(rule->kind));
    sipp_status st = measure(dec, rule, n, max_seconds, where, info, err);
    if (st != SIPP_OK) ma_decoder_uninit(dec);
    return st;
}

sipp_status sipp_audio_probe(const unsigned char *data, size_t n, uint32_t out_rate, double max_seconds,
                             const char *where, sipp_audio_info *info, char *err) {
    ma_decoder dec;
    sipp_status st = open_clip(&dec, data, n, out_rate, max_seconds, where, info, err);
    if (st == SIPP_OK) ma_decoder_uninit(&dec);
    return st;
}

sipp_status sipp_audio_decode(const unsigned char *data, size_t n, uint32_t out_rate, double max_seconds,
                              const char *where, float **samples, sipp_audio_info *info, char *err) {
    *samples = NULL;
    ma_decoder dec;
    sipp_status st = open_clip(&dec, data, n, out_rate, max_seconds, where, info, err);
    if (st != SIPP_OK) return st;
    /* As the helper: a buffer of the measured length, zeros past what the file holds. */
    float *pcm = calloc(info->frames ? info->frames : 1, sizeof *pcm);
    ma_uint64 got = 0;
    if (!pcm)
        st = sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory decoding '%s' (%llu samples)", where,
                       (unsigned long long)info->frames);
    else if (ma_decoder_read_pcm_frames(&dec, pcm, info->frames, &got) != MA_SUCCESS)
        st = sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "'%s' could not be decoded: its audio data is damaged",
                       where);
    info->decoded = got;
    ma_decoder_uninit(&dec);
    if (st != SIPP_OK) {
        free(pcm);
        return st;
    }
    *samples = pcm;
    return SIPP_OK;
}
