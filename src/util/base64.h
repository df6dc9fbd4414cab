/*
 * base64.h: base64 (RFC 4648, the standard alphabet; decoding takes the URL-safe one too), for the
 * images and audio chats carry in data: URLs.
 */
#ifndef SIPP_UTIL_BASE64_H
#define SIPP_UTIL_BASE64_H

#include <stdbool.h>
#include <stddef.h>

/* The most bytes len characters of base64 decode to. */
size_t sipp_base64_max_decoded(size_t len);

/* Decodes text[0..len) into out (sipp_base64_max_decoded(len) bytes), *n_out bytes. Padding is
 * optional; whitespace (a line-wrapped encoder's) is skipped. False on any other character, on
 * data after padding, or on a length no encoder writes. */
bool sipp_base64_decode(const char *text, size_t len, unsigned char *out, size_t *n_out);

/* The base64 text of data[0..n), padded, NUL-terminated (malloc'ed); NULL when out of memory. */
char *sipp_base64_encode(const unsigned char *data, size_t n);

#endif
