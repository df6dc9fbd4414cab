/*
 * audio_mp3.c: MP3 with libmp3lame, mono, constant bit rate, at the input's rate when MP3 has it.
 *
 * An MP3 decoder gives back the encoder's delay (silence in front) and the padding of the last frame
 * unless the file says how much they were; LAME says so in its "LAME tag", a frame at the start that
 * it can only fill in at the end. Held to the end, the file gets the tag (lame_get_lametag_frame over
 * the placeholder frame lame wrote first), so `lame --decode` and other gapless decoders give back
 * exactly the samples put in. A streamed MP3 has no tag, as every MP3 sent while it is being made.
 */
#include <lame/lame.h>
#include <stdlib.h>
#include <string.h>

#include "speech/audio_encode.h"

#define MP3_KBPS 64   /* plenty for a 24 kHz voice */
#define MP3_QUALITY 5 /* lame's default trade-off of speed and quality */
#define MP3_FALLBACK_RATE 24000
#define MP3_CHUNK 4096                     /* samples per lame_encode_buffer call */
#define MP3_OUT (MP3_CHUNK * 5 / 4 + 7200) /* lame's own bound for that many */
#define MP3_TAG_MAX 2880                   /* the largest frame, which the LAME tag fits in */

static const int mp3_rates[] = {8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000};

static int mp3_rate(int input_rate) {
    for (size_t i = 0; i < sizeof mp3_rates / sizeof mp3_rates[0]; i++)
        if (mp3_rates[i] == input_rate) return input_rate;
    return MP3_FALLBACK_RATE;
}

static int mp3_output_rate(int rate) { return rate; }

static sipp_status mp3_open(sipp_audio_encoder *e) {
    lame_global_flags *gf = lame_init();
    if (!gf) return audio_fail(e, SIPP_ERR_NO_MEMORY, "lame could not start");
    e->state = gf;
    lame_set_num_channels(gf, 1);
    lame_set_mode(gf, MONO);
    lame_set_in_samplerate(gf, e->rate);
    lame_set_out_samplerate(gf, e->rate);
    lame_set_brate(gf, MP3_KBPS);
    lame_set_quality(gf, MP3_QUALITY);
    lame_set_bWriteVbrTag(gf, e->streamed ? 0 : 1);
    if (lame_init_params(gf) < 0)
        return audio_fail(e, SIPP_ERR_INTERNAL, "lame refused a %d Hz mono stream at %d kbit/s", e->rate,
                          MP3_KBPS);
    return SIPP_OK;
}

static sipp_status mp3_write(sipp_audio_encoder *e, const int16_t *s, size_t n) {
    unsigned char *out = malloc(MP3_OUT);
    if (!out) return audio_fail(e, SIPP_ERR_NO_MEMORY, "out of memory");
    sipp_status st = SIPP_OK;
    for (size_t i = 0; i < n && st == SIPP_OK;) {
        int k = (int)(n - i < MP3_CHUNK ? n - i : MP3_CHUNK);
        int w = lame_encode_buffer(e->state, s + i, s + i, k, out, MP3_OUT);
        st = w < 0 ? audio_fail(e, SIPP_ERR_INTERNAL, "lame failed encoding (%d)", w)
                   : audio_emit(e, out, (size_t)w);
        i += (size_t)k;
    }
    free(out);
    return st;
}

static sipp_status mp3_finish(sipp_audio_encoder *e) {
    unsigned char out[7200];
    int w = lame_encode_flush(e->state, out, sizeof out);
    if (w < 0) return audio_fail(e, SIPP_ERR_INTERNAL, "lame failed flushing (%d)", w);
    sipp_status st = audio_emit(e, out, (size_t)w);
    if (st != SIPP_OK || e->streamed) return st;
    unsigned char tag[MP3_TAG_MAX];
    size_t n = lame_get_lametag_frame(e->state, tag, sizeof tag);
    if (n > 0 && n <= sizeof tag && n <= e->held.len) memcpy(e->held.data, tag, n);
    return SIPP_OK;
}

static void mp3_close(sipp_audio_encoder *e) {
    if (e->state) lame_close(e->state);
    e->state = NULL;
}

const audio_codec audio_codec_mp3 = {mp3_rate, mp3_output_rate, mp3_open, mp3_write, mp3_finish, mp3_close};
