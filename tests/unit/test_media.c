/*
 * test_media.c: the readers of a chat's images and audio, src/util/base64.c and
 * src/util/media_sniff.c: base64 as every encoder writes it (padded or not, line-wrapped, URL-safe)
 * and what no encoder writes; each file kind by its header, an image's size read from it (the pixel
 * limit is checked on it before anything decodes the image), and headers cut short.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "util/base64.h"
#include "util/media_sniff.h"

static bool dec(const char *in, char *out, size_t *n) {
    return sipp_base64_decode(in, strlen(in), (unsigned char *)out, n);
}

Test(base64, decodes_padded_unpadded_wrapped_and_url_safe) {
    char out[64];
    size_t n;
    cr_assert(dec("aGVsbG8=", out, &n));
    cr_assert_eq(n, 5);
    cr_assert(memcmp(out, "hello", 5) == 0);
    cr_assert(dec("aGVsbG8", out, &n) && n == 5);
    cr_assert(dec("aGVs\nbG8=\r\n", out, &n) && n == 5);
    cr_assert(dec("_-8", out, &n) && n == 2 && (unsigned char)out[0] == 0xFF &&
              (unsigned char)out[1] == 0xEF);
    cr_assert(dec("", out, &n) && n == 0);
}

Test(base64, encodes_and_decodes_back) {
    unsigned char all[256];
    for (int i = 0; i < 256; i++)
        all[i] = (unsigned char)i;
    for (size_t n = 0; n <= sizeof all; n += 37) {
        char *text = sipp_base64_encode(all, n);
        cr_assert(text);
        cr_assert_eq(strlen(text), (n + 2) / 3 * 4);
        unsigned char back[sizeof all + 3];
        size_t m;
        cr_assert(sipp_base64_decode(text, strlen(text), back, &m));
        cr_assert_eq(m, n);
        cr_assert(memcmp(back, all, n) == 0);
        free(text);
    }
    char *hello = sipp_base64_encode((const unsigned char *)"hello", 5);
    cr_assert_str_eq(hello, "aGVsbG8=");
    free(hello);
}

Test(base64, refuses_what_no_encoder_writes) {
    char out[64];
    size_t n;
    cr_assert_not(dec("aGVs*G8=", out, &n), "a character outside the alphabet");
    cr_assert_not(dec("aGVsbG8=aGVs", out, &n), "data after padding");
    cr_assert_not(dec("a", out, &n), "one character of a group");
    cr_assert_not(dec("aGVsb===", out, &n), "three pads");
    cr_assert_not(dec("aGVsbG=", out, &n), "a group cut by its padding");
}

/* A PNG signature and IHDR of w x h. */
static size_t png(unsigned char *b, unsigned w, unsigned h) {
    static const unsigned char head[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n',
                                         0,    0,   0,   13,  'I',  'H',  'D',  'R'};
    memcpy(b, head, sizeof head);
    unsigned char *p = b + sizeof head;
    p[0] = (unsigned char)(w >> 24), p[1] = (unsigned char)(w >> 16), p[2] = (unsigned char)(w >> 8),
    p[3] = (unsigned char)w;
    p[4] = (unsigned char)(h >> 24), p[5] = (unsigned char)(h >> 16), p[6] = (unsigned char)(h >> 8),
    p[7] = (unsigned char)h;
    return sizeof head + 8;
}

Test(media_sniff, png_size_from_its_header) {
    unsigned char b[64];
    size_t n = png(b, 70000, 3);
    sipp_media_info in;
    cr_assert(sipp_media_sniff(b, n, &in));
    cr_assert_eq(in.kind, SIPP_MEDIA_PNG);
    cr_assert_eq(in.width, 70000);
    cr_assert_eq(in.height, 3);
    cr_assert_not(sipp_media_sniff(b, n - 1, &in), "a header cut short gives no size");
    n = png(b, 0, 3);
    cr_assert_not(sipp_media_sniff(b, n, &in), "an image of width 0");
}

Test(media_sniff, jpeg_size_past_other_segments) {
    static const unsigned char j[] = {0xFF, 0xD8, 0xFF, 0xE0, 0,    4,    'J',  'F', 0xFF, 0xFF, 0xC2,
                                      0,    11,   8,    0x01, 0x02, 0x03, 0x04, 1,   1,    0x11, 0};
    sipp_media_info in;
    cr_assert(sipp_media_sniff(j, sizeof j, &in));
    cr_assert_eq(in.kind, SIPP_MEDIA_JPEG);
    cr_assert_eq(in.height, 0x0102);
    cr_assert_eq(in.width, 0x0304);
    cr_assert_not(sipp_media_sniff(j, 12, &in), "no frame header yet");
}

Test(media_sniff, gif_bmp_and_audio_kinds) {
    static const unsigned char gif[] = {'G', 'I', 'F', '8', '9', 'a', 5, 0, 7, 0};
    unsigned char bmp[26] = {'B', 'M'};
    bmp[18] = 3;
    memset(bmp + 22, 0xFF, 4); /* height -1: rows top-down */
    sipp_media_info in;
    cr_assert(sipp_media_sniff(gif, sizeof gif, &in) && in.width == 5 && in.height == 7);
    cr_assert(sipp_media_sniff(bmp, sizeof bmp, &in) && in.kind == SIPP_MEDIA_BMP && in.width == 3 &&
              in.height == 1);
    cr_assert(sipp_media_sniff((const unsigned char *)"RIFF\0\0\0\0WAVEfmt ", 16, &in) &&
              in.kind == SIPP_MEDIA_WAV);
    cr_assert(sipp_media_is_audio(in.kind) && in.width == 0);
    cr_assert(sipp_media_sniff((const unsigned char *)"fLaC", 4, &in) && in.kind == SIPP_MEDIA_FLAC);
    cr_assert(sipp_media_sniff((const unsigned char *)"ID3\4", 4, &in) && in.kind == SIPP_MEDIA_MP3);
    cr_assert_not(sipp_media_sniff((const unsigned char *)"hello, world", 12, &in));
    cr_assert_str_eq(sipp_media_kind_name(SIPP_MEDIA_JPEG), "JPEG");
}
