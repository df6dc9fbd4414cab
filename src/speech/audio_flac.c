/*
 * audio_flac.c: FLAC with libFLAC's stream encoder, 16-bit mono at the input's rate.
 *
 * Streamed, the frames go out as libFLAC writes them and STREAMINFO keeps the "unknown" length and MD5
 * that libFLAC writes first (decoders accept that). Held to the end, the encoder is given seek and tell
 * over the held bytes, and libFLAC goes back and writes the real length and MD5 itself.
 */
#include <FLAC/stream_encoder.h>
#include <stdlib.h>
#include <string.h>

#include "speech/audio_encode.h"

#define FLAC_LEVEL 5    /* flac's default compression */
#define FLAC_BLOCK 4096 /* samples converted to FLAC's 32-bit input per call */

typedef struct {
    FLAC__StreamEncoder *enc;
    size_t pos; /* where libFLAC writes next in e->held (not streamed) */
} flac_state;

static FLAC__StreamEncoderWriteStatus on_write(const FLAC__StreamEncoder *enc, const FLAC__byte buffer[],
                                               size_t bytes, uint32_t samples, uint32_t frame, void *user) {
    sipp_audio_encoder *e = user;
    flac_state *f = e->state;
    if (e->streamed || f->pos == e->held.len) {
        if (audio_emit(e, buffer, bytes) != SIPP_OK) return FLAC__STREAM_ENCODER_WRITE_STATUS_FATAL_ERROR;
        f->pos += bytes;
        return FLAC__STREAM_ENCODER_WRITE_STATUS_OK;
    }
    /* libFLAC rewriting its header: within what is held, then past its end */
    size_t inside = e->held.len - f->pos < bytes ? e->held.len - f->pos : bytes;
    memcpy(e->held.data + f->pos, buffer, inside);
    f->pos += inside;
    if (inside < bytes && audio_emit(e, buffer + inside, bytes - inside) != SIPP_OK)
        return FLAC__STREAM_ENCODER_WRITE_STATUS_FATAL_ERROR;
    f->pos += bytes - inside;
    return FLAC__STREAM_ENCODER_WRITE_STATUS_OK;
}

static FLAC__StreamEncoderSeekStatus on_seek(const FLAC__StreamEncoder *enc, FLAC__uint64 offset,
                                             void *user) {
    sipp_audio_encoder *e = user;
    flac_state *f = e->state;
    if (offset > e->held.len) return FLAC__STREAM_ENCODER_SEEK_STATUS_ERROR;
    f->pos = (size_t)offset;
    return FLAC__STREAM_ENCODER_SEEK_STATUS_OK;
}

static FLAC__StreamEncoderTellStatus on_tell(const FLAC__StreamEncoder *enc, FLAC__uint64 *offset,
                                             void *user) {
    sipp_audio_encoder *e = user;
    *offset = ((flac_state *)e->state)->pos;
    return FLAC__STREAM_ENCODER_TELL_STATUS_OK;
}

static sipp_status flac_error(sipp_audio_encoder *e, const char *what) {
    flac_state *f = e->state;
    if (e->failed) return SIPP_ERR_CANCELLED; /* the receiver stopped: already said */
    return audio_fail(e, SIPP_ERR_INTERNAL, "libFLAC %s: %s", what,
                      FLAC__StreamEncoderStateString[FLAC__stream_encoder_get_state(f->enc)]);
}

static sipp_status flac_open(sipp_audio_encoder *e) {
    flac_state *f = calloc(1, sizeof *f);
    if (!f || !(f->enc = FLAC__stream_encoder_new())) {
        free(f);
        return audio_fail(e, SIPP_ERR_NO_MEMORY, "out of memory");
    }
    e->state = f;
    FLAC__stream_encoder_set_channels(f->enc, 1);
    FLAC__stream_encoder_set_bits_per_sample(f->enc, 16);
    FLAC__stream_encoder_set_sample_rate(f->enc, (uint32_t)e->rate);
    FLAC__stream_encoder_set_compression_level(f->enc, FLAC_LEVEL);
    FLAC__StreamEncoderInitStatus st = FLAC__stream_encoder_init_stream(
        f->enc, on_write, e->streamed ? NULL : on_seek, e->streamed ? NULL : on_tell, NULL, e);
    if (st != FLAC__STREAM_ENCODER_INIT_STATUS_OK && e->failed) return SIPP_ERR_CANCELLED; /* its header */
    if (st != FLAC__STREAM_ENCODER_INIT_STATUS_OK)
        return audio_fail(e, SIPP_ERR_INTERNAL, "libFLAC could not start: %s",
                          FLAC__StreamEncoderInitStatusString[st]);
    return SIPP_OK;
}

static sipp_status flac_write(sipp_audio_encoder *e, const int16_t *s, size_t n) {
    flac_state *f = e->state;
    FLAC__int32 block[FLAC_BLOCK];
    for (size_t i = 0; i < n;) {
        size_t k = n - i < FLAC_BLOCK ? n - i : FLAC_BLOCK;
        for (size_t j = 0; j < k; j++)
            block[j] = s[i + j];
        if (!FLAC__stream_encoder_process_interleaved(f->enc, block, (uint32_t)k))
            return flac_error(e, "encoding");
        i += k;
    }
    return SIPP_OK;
}

static sipp_status flac_finish(sipp_audio_encoder *e) {
    flac_state *f = e->state;
    if (!FLAC__stream_encoder_finish(f->enc)) return flac_error(e, "finishing");
    return SIPP_OK;
}

static void flac_close(sipp_audio_encoder *e) {
    flac_state *f = e->state;
    if (!f) return;
    FLAC__stream_encoder_delete(f->enc); /* finishes first if it was not */
    free(f);
    e->state = NULL;
}

static int flac_rate(int input_rate) { return input_rate; }

const audio_codec audio_codec_flac = {flac_rate, flac_rate, flac_open, flac_write, flac_finish, flac_close};
