/*
 * media_sniff.h: what kind of file a chat's image or audio bytes are, and an image's size, read
 * from its header before anything decodes it (a small file can claim a huge image: the pixel limit
 * is checked first). The formats are those libmtmd reads: stb_image's PNG, JPEG, GIF and BMP, and
 * miniaudio's WAV, MP3 and FLAC.
 */
#ifndef SIPP_UTIL_MEDIA_SNIFF_H
#define SIPP_UTIL_MEDIA_SNIFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum sipp_media_kind {
    SIPP_MEDIA_UNKNOWN,
    SIPP_MEDIA_PNG,
    SIPP_MEDIA_JPEG,
    SIPP_MEDIA_GIF,
    SIPP_MEDIA_BMP,
    SIPP_MEDIA_WAV,
    SIPP_MEDIA_MP3,
    SIPP_MEDIA_FLAC,
} sipp_media_kind;

typedef struct sipp_media_info {
    sipp_media_kind kind;
    uint32_t width, height; /* an image's, from its header; 0 for audio */
} sipp_media_info;

/* Reads the header of data[0..n). False when it is none of the formats, or an image whose header
 * gives no size (truncated, or a size of 0). */
bool sipp_media_sniff(const unsigned char *data, size_t n, sipp_media_info *out);

/* The length of a WAV file's audio in seconds, from its fmt and data chunks (no sample is read).
 * False when data[0..n) is no WAV or its header does not say. */
bool sipp_media_wav_seconds(const unsigned char *data, size_t n, double *seconds);

/* "PNG", "JPEG", ..., "unknown". */
const char *sipp_media_kind_name(sipp_media_kind kind);
bool sipp_media_is_audio(sipp_media_kind kind);

#endif
