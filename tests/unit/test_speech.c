/*
 * test_speech.c: the pieces of src/speech that need no voice: where text is split into sentences,
 * the streaming resampler (the same output however the input is cut, and exactly the length it
 * promises), and the WAV encoder's headers, streamed and not.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sipp.h"
#include "speech/resample.h"
#include "util/util.h"

static char *part(const char *text, const size_t *parts, size_t i) {
    static char buf[256];
    size_t len = parts[2 * i + 1] < sizeof buf - 1 ? parts[2 * i + 1] : sizeof buf - 1;
    memcpy(buf, text + parts[2 * i], len);
    buf[len] = 0;
    return buf;
}

Test(speech, split_at_sentence_ends) {
    const char *text = "  Hello world. Is 3.5 big?  \"Yes!\" she said.\nNew line  ";
    size_t *parts, n;
    cr_assert_eq(sipp_speech_split(text, 0, &parts, &n), SIPP_OK);
    cr_assert_eq(n, 5);
    cr_assert_str_eq(part(text, parts, 0), "Hello world.");
    cr_assert_str_eq(part(text, parts, 1), "Is 3.5 big?"); /* a point inside a number ends nothing */
    cr_assert_str_eq(part(text, parts, 2), "\"Yes!\"");    /* the closing quote stays with its mark */
    cr_assert_str_eq(part(text, parts, 3), "she said.");
    cr_assert_str_eq(part(text, parts, 4), "New line");
    free(parts);
}

Test(speech, split_long_parts_at_spaces_and_characters) {
    const char *text = "one two three four";
    size_t *parts, n;
    cr_assert_eq(sipp_speech_split(text, 10, &parts, &n), SIPP_OK);
    cr_assert_eq(n, 2);
    cr_assert_str_eq(part(text, parts, 0), "one two");
    cr_assert_str_eq(part(text, parts, 1), "three four");
    free(parts);
    const char *cjk = "\xE4\xBD\xA0\xE5\xA5\xBD"; /* two 3-byte characters, a bound of 2 bytes */
    cr_assert_eq(sipp_speech_split(cjk, 2, &parts, &n), SIPP_OK);
    cr_assert_eq(n, 2);
    cr_assert_eq(parts[1], 3);
    cr_assert_eq(parts[2], 3);
    free(parts);
    cr_assert_eq(sipp_speech_split(" \n\t ", 0, &parts, &n), SIPP_OK);
    cr_assert_eq(n, 0);
    free(parts);
}

static int16_t *tone(size_t n, int rate, double hz) {
    int16_t *s = malloc(n * sizeof *s);
    for (size_t i = 0; i < n; i++)
        s[i] = (int16_t)(10000 * sin(2 * M_PI * hz * (double)i / rate));
    return s;
}

static void resample_in_chunks(int in, int out, double speed, const int16_t *s, size_t n, size_t chunk,
                               int16_t **o, size_t *n_o) {
    sipp_resampler *r = sipp_resampler_new(in, out, speed);
    size_t cap = 0;
    *o = NULL;
    *n_o = 0;
    for (size_t i = 0; i < n; i += chunk) {
        size_t k = n - i < chunk ? n - i : chunk;
        cr_assert(sipp_resample(r, s + i, k, i + k >= n, o, n_o, &cap));
    }
    sipp_resampler_free(r);
}

Test(speech, resampler_is_the_same_however_the_input_is_cut) {
    static const struct {
        int in, out;
        double speed;
    } cases[] = {
        {16000, 24000, 1}, {24000, 16000, 1}, {16000, 16000, 2}, {22050, 48000, 0.25}, {8000, 24000, 4}};
    size_t n = 9999;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int16_t *s = tone(n, cases[c].in, 440), *whole, *cut;
        size_t n_whole, n_cut;
        resample_in_chunks(cases[c].in, cases[c].out, cases[c].speed, s, n, n, &whole, &n_whole);
        resample_in_chunks(cases[c].in, cases[c].out, cases[c].speed, s, n, 37, &cut, &n_cut);
        cr_assert_eq(n_whole, sipp_resampled_length(cases[c].in, cases[c].out, cases[c].speed, n), "case %zu",
                     c);
        cr_assert_eq(n_cut, n_whole, "case %zu", c);
        cr_assert_eq(memcmp(whole, cut, n_whole * sizeof *whole), 0, "case %zu", c);
        free(s);
        free(whole);
        free(cut);
    }
}

Test(speech, resampler_keeps_a_tone) {
    /* 440 Hz from 16 kHz to 24 kHz: the output is the same tone sampled at 24 kHz */
    size_t n = 16000;
    int16_t *s = tone(n, 16000, 440), *o, *want = tone(24000, 24000, 440);
    size_t n_o;
    resample_in_chunks(16000, 24000, 1, s, n, 1000, &o, &n_o);
    cr_assert_eq(n_o, 24000);
    for (size_t i = 100; i < 23900; i++) /* away from the edges, where the window meets the zeros */
        cr_assert(abs(o[i] - want[i]) < 40, "sample %zu: %d vs %d", i, o[i], want[i]);
    free(s);
    free(o);
    free(want);
}

static bool collect(const void *data, size_t n, void *user) { return sipp_buf_append(user, data, n); }

static uint32_t le32(const char *p) {
    const unsigned char *u = (const unsigned char *)p;
    return u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 | (uint32_t)u[3] << 24;
}

Test(speech, wav_headers_exact_or_placeholders) {
    int16_t s[1000] = {1, 2, 3};
    for (int streamed = 0; streamed < 2; streamed++) {
        sipp_buf out = {0};
        sipp_audio_encoder *e;
        char err[SIPP_ERROR_SIZE];
        cr_assert_eq(sipp_audio_encoder_new(SIPP_AUDIO_WAV, 16000, streamed, collect, &out, &e, err),
                     SIPP_OK);
        cr_assert_eq(sipp_audio_encoder_write(e, s, 600), SIPP_OK);
        cr_assert_eq(out.len, streamed ? 44 + 1200 : 0); /* held until the end unless streamed */
        cr_assert_eq(sipp_audio_encoder_write(e, s + 600, 400), SIPP_OK);
        cr_assert_eq(sipp_audio_encoder_finish(e), SIPP_OK);
        cr_assert_eq(sipp_audio_encoder_write(e, s, 1), SIPP_ERR_INVALID_ARGUMENT);
        sipp_audio_encoder_free(e);
        cr_assert_eq(out.len, 44 + 2000);
        cr_assert_eq(le32(out.data + 24), 16000);
        cr_assert_eq(le32(out.data + 40), streamed ? 0xFFFFFFFFu : 2000);
        cr_assert_eq(le32(out.data + 4), streamed ? 0xFFFFFFFFu : 2036);
        cr_assert_eq(memcmp(out.data + 44, s, 6), 0);
        sipp_buf_free(&out);
    }
}

static bool refuse(const void *data, size_t n, void *user) { return false; }

Test(speech, encoders_stop_when_the_receiver_does) {
    static const sipp_audio_format formats[] = {SIPP_AUDIO_WAV, SIPP_AUDIO_PCM, SIPP_AUDIO_FLAC,
                                                SIPP_AUDIO_MP3, SIPP_AUDIO_OPUS};
    int16_t *s = tone(48000, 16000, 300);
    for (size_t f = 0; f < sizeof formats / sizeof formats[0]; f++) {
        sipp_audio_encoder *e;
        char err[SIPP_ERROR_SIZE];
        sipp_status st = sipp_audio_encoder_new(formats[f], 16000, true, refuse, NULL, &e, err);
        if (st == SIPP_OK) {
            st = sipp_audio_encoder_write(e, s, 48000);
            if (st == SIPP_OK) st = sipp_audio_encoder_finish(e);
            sipp_audio_encoder_free(e);
        }
        cr_assert_eq(st, SIPP_ERR_CANCELLED, "%s", sipp_audio_format_name(formats[f]));
    }
    free(s);
}

Test(speech, format_names) {
    sipp_audio_format f;
    cr_assert_eq(sipp_audio_format_parse("mp3", &f), SIPP_OK);
    cr_assert_eq(f, SIPP_AUDIO_MP3);
    cr_assert_str_eq(sipp_audio_format_mime(f), "audio/mpeg");
    cr_assert_eq(sipp_audio_format_parse("aac", &f), SIPP_ERR_INVALID_ARGUMENT);
}
