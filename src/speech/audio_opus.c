/*
 * audio_opus.c: Opus (libopus) in Ogg (libogg), mono, as RFC 7845 lays it out.
 *
 * Every Ogg Opus stream decodes at 48 kHz, whatever the encoder ran at; the encoder runs at the input's
 * rate when Opus has it (8, 12, 16, 24 or 48 kHz) and at 48 kHz otherwise. Granule positions count
 * the 48 kHz samples the packets decode to, from the first, so they include the encoder's look-ahead
 * (the header's pre-skip, which the decoder drops), and the last page's granule position says where the audio
 * ends inside the last 20 ms frame, so a decoder gives back exactly the samples put in (times 48000 / rate).
 * To mark the last packet as the end, one encoded packet is always held back until the next one or the end.
 * Streamed, each write's pages go out at once (ogg_stream_flush), so a listener hears every sentence
 * as soon as it is encoded.
 */
#include <ogg/ogg.h>
#include <opus/opus.h>
#include <stdlib.h>
#include <string.h>

#include "speech/audio_encode.h"

#define OPUS_OUT_RATE 48000
#define OPUS_FRAME_MS 20
#define OPUS_PACKET_MAX 4000
#define OPUS_BITRATE 32000
#define OGG_SERIAL 0x53495050 /* "SIPP": one stream per file, any serial will do */
#define OPUS_HEAD_BYTES 19

typedef struct {
    OpusEncoder *enc;
    ogg_stream_state os;
    bool os_ready;
    int frame;        /* samples per frame at the encoder's rate */
    int scale;        /* 48 kHz samples per encoder sample */
    int16_t *pending; /* a partial frame */
    int n_pending;
    unsigned char held[OPUS_PACKET_MAX]; /* the last encoded packet, not yet in the stream */
    int held_bytes;                      /* -1: none */
    int64_t packetno, granule;           /* granule: the end of the packets given to the stream, at 48 kHz */
    int64_t encoded;                     /* frames encoded */
    int pre_skip;
} opus_state;

static int opus_rate(int input_rate) {
    static const int rates[] = {8000, 12000, 16000, 24000, 48000};
    for (size_t i = 0; i < sizeof rates / sizeof rates[0]; i++)
        if (rates[i] == input_rate) return input_rate;
    return OPUS_OUT_RATE;
}

static int opus_output_rate(int rate) { return OPUS_OUT_RATE; }

/* Puts every complete page (all of them with flush) out. */
static sipp_status pages_out(sipp_audio_encoder *e, bool flush) {
    opus_state *o = e->state;
    ogg_page pg;
    while (flush ? ogg_stream_flush(&o->os, &pg) : ogg_stream_pageout(&o->os, &pg)) {
        sipp_status st = audio_emit(e, pg.header, (size_t)pg.header_len);
        if (st == SIPP_OK) st = audio_emit(e, pg.body, (size_t)pg.body_len);
        if (st != SIPP_OK) return st;
    }
    return SIPP_OK;
}

static sipp_status packet_in(sipp_audio_encoder *e, unsigned char *data, long bytes, int64_t granule,
                             bool bos, bool eos) {
    opus_state *o = e->state;
    ogg_packet p = {.packet = data,
                    .bytes = bytes,
                    .b_o_s = bos,
                    .e_o_s = eos,
                    .granulepos = granule,
                    .packetno = o->packetno++};
    if (ogg_stream_packetin(&o->os, &p) != 0)
        return audio_fail(e, SIPP_ERR_INTERNAL, "libogg refused a packet");
    return SIPP_OK;
}

static sipp_status write_headers(sipp_audio_encoder *e) {
    opus_state *o = e->state;
    unsigned char head[OPUS_HEAD_BYTES] = "OpusHead";
    head[8] = 1; /* version */
    head[9] = 1; /* channels */
    audio_put_le(head + 10, (uint32_t)o->pre_skip, 2);
    audio_put_le(head + 12, (uint32_t)e->input_rate, 4);
    audio_put_le(head + 16, 0, 2); /* gain */
    head[18] = 0;                  /* mapping family: mono/stereo */
    sipp_status st = packet_in(e, head, sizeof head, 0, true, false);
    if (st == SIPP_OK) st = pages_out(e, true);
    const char *vendor = opus_get_version_string();
    size_t vlen = strlen(vendor);
    unsigned char tags[8 + 4 + 64 + 4];
    if (vlen > 64) vlen = 64;
    memcpy(tags, "OpusTags", 8);
    audio_put_le(tags + 8, (uint32_t)vlen, 4);
    memcpy(tags + 12, vendor, vlen);
    audio_put_le(tags + 12 + vlen, 0, 4); /* no comments */
    if (st == SIPP_OK) st = packet_in(e, tags, (long)(16 + vlen), 0, false, false);
    return st == SIPP_OK ? pages_out(e, true) : st;
}

static sipp_status opus_open(sipp_audio_encoder *e) {
    opus_state *o = calloc(1, sizeof *o);
    if (!o) return audio_fail(e, SIPP_ERR_NO_MEMORY, "out of memory");
    e->state = o;
    o->held_bytes = -1;
    o->frame = e->rate * OPUS_FRAME_MS / 1000;
    o->scale = OPUS_OUT_RATE / e->rate;
    int err;
    o->enc = opus_encoder_create(e->rate, 1, OPUS_APPLICATION_AUDIO, &err);
    if (!o->enc) return audio_fail(e, SIPP_ERR_INTERNAL, "libopus could not start: %s", opus_strerror(err));
    opus_encoder_ctl(o->enc, OPUS_SET_BITRATE(OPUS_BITRATE));
    int lookahead = 0;
    opus_encoder_ctl(o->enc, OPUS_GET_LOOKAHEAD(&lookahead));
    o->pre_skip = lookahead * o->scale;
    o->pending = malloc((size_t)o->frame * sizeof *o->pending);
    if (!o->pending || ogg_stream_init(&o->os, OGG_SERIAL) != 0)
        return audio_fail(e, SIPP_ERR_NO_MEMORY, "out of memory");
    o->os_ready = true;
    return write_headers(e);
}

/* Gives the held packet to the stream (the last one: with the end's granule and the end mark). */
static sipp_status release_held(sipp_audio_encoder *e, bool last, int64_t end_granule) {
    opus_state *o = e->state;
    if (o->held_bytes < 0) return SIPP_OK;
    o->granule += (int64_t)o->frame * o->scale;
    sipp_status st = packet_in(e, o->held, o->held_bytes, last ? end_granule : o->granule, false, last);
    o->held_bytes = -1;
    return st;
}

static sipp_status encode_frame(sipp_audio_encoder *e) {
    opus_state *o = e->state;
    sipp_status st = release_held(e, false, 0);
    if (st != SIPP_OK) return st;
    opus_int32 n = opus_encode(o->enc, o->pending, o->frame, o->held, OPUS_PACKET_MAX);
    if (n < 0) return audio_fail(e, SIPP_ERR_INTERNAL, "libopus failed encoding: %s", opus_strerror(n));
    o->held_bytes = n;
    o->n_pending = 0;
    o->encoded++;
    return SIPP_OK;
}

static sipp_status opus_write(sipp_audio_encoder *e, const int16_t *s, size_t n) {
    opus_state *o = e->state;
    for (size_t i = 0; i < n;) {
        size_t k = (size_t)(o->frame - o->n_pending);
        if (k > n - i) k = n - i;
        memcpy(o->pending + o->n_pending, s + i, k * sizeof *s);
        o->n_pending += (int)k;
        i += k;
        if (o->n_pending == o->frame) {
            sipp_status st = encode_frame(e);
            if (st != SIPP_OK) return st;
        }
    }
    return pages_out(e, e->streamed);
}

/* Pads the last frame with silence, and adds silent frames until the packets cover the encoder's
 * look-ahead too (the audio ends pre-skip samples into them), then marks the end. */
static sipp_status opus_finish(sipp_audio_encoder *e) {
    opus_state *o = e->state;
    int64_t end = o->pre_skip + (int64_t)e->n_samples * o->scale;
    sipp_status st = SIPP_OK;
    while (st == SIPP_OK &&
           (o->n_pending > 0 || o->held_bytes < 0 || o->encoded * o->frame * o->scale < end)) {
        memset(o->pending + o->n_pending, 0, (size_t)(o->frame - o->n_pending) * sizeof *o->pending);
        st = encode_frame(e);
    }
    if (st == SIPP_OK) st = release_held(e, true, end);
    return st == SIPP_OK ? pages_out(e, true) : st;
}

static void opus_close(sipp_audio_encoder *e) {
    opus_state *o = e->state;
    if (!o) return;
    if (o->enc) opus_encoder_destroy(o->enc);
    if (o->os_ready) ogg_stream_clear(&o->os);
    free(o->pending);
    free(o);
    e->state = NULL;
}

const audio_codec audio_codec_opus = {opus_rate,  opus_output_rate, opus_open,
                                      opus_write, opus_finish,      opus_close};
