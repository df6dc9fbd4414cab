/*
 * media_sniff.c: file kinds and image sizes from headers (see media_sniff.h).
 */
#include "util/media_sniff.h"

#include <string.h>

#define PNG_SIG "\x89PNG\r\n\x1a\n"
#define PNG_IHDR_END 24 /* signature 8, length 4, "IHDR" 4, width 4, height 4 */
#define GIF_HEADER_END 10
#define BMP_HEADER_END 26
#define JPEG_SCAN_MAX 4096  /* markers looked at before giving up */
#define RIFF_HEADER_END 12  /* "RIFF", size 4, "WAVE" */
#define RIFF_CHUNK_HEADER 8 /* id 4, size 4 */
#define WAV_FMT_BYTE_RATE 8 /* bytes per second, in the fmt chunk after format, channels, rate */
#define WAV_CHUNKS_MAX 64   /* chunks looked at before giving up */

static uint32_t be16(const unsigned char *p) { return (uint32_t)p[0] << 8 | p[1]; }
static uint32_t le16(const unsigned char *p) { return (uint32_t)p[1] << 8 | p[0]; }
static uint32_t be32(const unsigned char *p) { return be16(p) << 16 | be16(p + 2); }
static uint32_t le32(const unsigned char *p) { return le16(p + 2) << 16 | le16(p); }

static bool has(const unsigned char *d, size_t n, size_t at, const char *s) {
    size_t k = strlen(s);
    return n >= at + k && memcmp(d + at, s, k) == 0;
}

/* A start-of-frame marker (the one that gives the size): C0..CF but DHT, JPG and DAC. */
static bool is_sof(unsigned char m) { return m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC; }

static bool jpeg_size(const unsigned char *d, size_t n, uint32_t *w, uint32_t *h) {
    size_t i = 2;
    for (int seen = 0; seen < JPEG_SCAN_MAX && i + 4 <= n; seen++) {
        if (d[i] != 0xFF) return false;
        unsigned char m = d[i + 1];
        if (m == 0xFF) { /* fill byte */
            i++;
            continue;
        }
        if (m == 0x01 || (m >= 0xD0 && m <= 0xD7)) { /* no length */
            i += 2;
            continue;
        }
        if (m == 0xD9 || m == 0xDA) return false; /* end, or scan data before any frame */
        uint32_t len = be16(d + i + 2);
        if (len < 2) return false;
        if (is_sof(m)) {
            if (i + 9 > n || len < 7) return false;
            *h = be16(d + i + 5);
            *w = be16(d + i + 7);
            return true;
        }
        i += 2 + len;
    }
    return false;
}

static bool image_size(const unsigned char *d, size_t n, sipp_media_info *out) {
    uint32_t w = 0, h = 0;
    switch (out->kind) {
    case SIPP_MEDIA_PNG:
        if (n < PNG_IHDR_END || !has(d, n, 12, "IHDR")) return false;
        w = be32(d + 16);
        h = be32(d + 20);
        break;
    case SIPP_MEDIA_GIF:
        if (n < GIF_HEADER_END) return false;
        w = le16(d + 6);
        h = le16(d + 8);
        break;
    case SIPP_MEDIA_BMP: {
        if (n < BMP_HEADER_END) return false;
        w = le32(d + 18);
        uint32_t hh = le32(d + 22);
        h = hh > 0x7FFFFFFFu ? 0u - hh : hh; /* negative: rows top-down */
        if (w > 0x7FFFFFFFu) return false;
        break;
    }
    case SIPP_MEDIA_JPEG:
        if (!jpeg_size(d, n, &w, &h)) return false;
        break;
    default: return true;
    }
    out->width = w;
    out->height = h;
    return w > 0 && h > 0;
}

bool sipp_media_sniff(const unsigned char *d, size_t n, sipp_media_info *out) {
    memset(out, 0, sizeof *out);
    if (has(d, n, 0, PNG_SIG))
        out->kind = SIPP_MEDIA_PNG;
    else if (n >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF)
        out->kind = SIPP_MEDIA_JPEG;
    else if (has(d, n, 0, "GIF87a") || has(d, n, 0, "GIF89a"))
        out->kind = SIPP_MEDIA_GIF;
    else if (has(d, n, 0, "BM"))
        out->kind = SIPP_MEDIA_BMP;
    else if (has(d, n, 0, "RIFF") && has(d, n, 8, "WAVE"))
        out->kind = SIPP_MEDIA_WAV;
    else if (has(d, n, 0, "fLaC"))
        out->kind = SIPP_MEDIA_FLAC;
    else if (has(d, n, 0, "ID3") || (n >= 2 && d[0] == 0xFF && (d[1] & 0xE0) == 0xE0))
        out->kind = SIPP_MEDIA_MP3;
    else
        return false;
    return image_size(d, n, out);
}

/* A RIFF WAVE file's chunks: the fmt chunk's bytes per second and the data chunk's size (cut to
 * the bytes present: a streamed WAV writes 0 or 0xFFFFFFFF there). Chunks are padded to even sizes. */
bool sipp_media_wav_seconds(const unsigned char *d, size_t n, double *seconds) {
    *seconds = 0;
    if (!has(d, n, 0, "RIFF") || !has(d, n, 8, "WAVE")) return false;
    uint32_t byte_rate = 0;
    size_t at = RIFF_HEADER_END;
    for (int k = 0; k < WAV_CHUNKS_MAX && n - at >= RIFF_CHUNK_HEADER; k++) {
        size_t size = le32(d + at + 4), body = at + RIFF_CHUNK_HEADER, left = n - body;
        if (has(d, n, at, "fmt ") && size >= WAV_FMT_BYTE_RATE + 4 && left >= WAV_FMT_BYTE_RATE + 4)
            byte_rate = le32(d + body + WAV_FMT_BYTE_RATE);
        if (has(d, n, at, "data")) {
            if (byte_rate == 0) return false;
            *seconds = (double)(size < left ? size : left) / byte_rate;
            return true;
        }
        if (size >= left) return false;
        at = body + size + (size & 1);
    }
    return false;
}

const char *sipp_media_kind_name(sipp_media_kind kind) {
    static const char *const names[] = {"unknown", "PNG", "JPEG", "GIF", "BMP", "WAV", "MP3", "FLAC"};
    return (unsigned)kind < sizeof names / sizeof *names ? names[kind] : "unknown";
}

bool sipp_media_is_audio(sipp_media_kind kind) {
    return kind == SIPP_MEDIA_WAV || kind == SIPP_MEDIA_MP3 || kind == SIPP_MEDIA_FLAC;
}
