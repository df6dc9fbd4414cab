/*
 * base64.c: base64 decoding (see base64.h).
 */
#include "util/base64.h"

#include <stdint.h>
#include <stdlib.h>

#define BAD 0xFF
#define PAD 0xFE
#define SKIP 0xFD

/* The value of one character: 0..63, or BAD, PAD ('='), SKIP (whitespace). */
static uint8_t value(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return (uint8_t)(c - 'A');
    if (c >= 'a' && c <= 'z') return (uint8_t)(c - 'a' + 26);
    if (c >= '0' && c <= '9') return (uint8_t)(c - '0' + 52);
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    if (c == '=') return PAD;
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') return SKIP;
    return BAD;
}

size_t sipp_base64_max_decoded(size_t len) { return len / 4 * 3 + 3; }

bool sipp_base64_decode(const char *text, size_t len, unsigned char *out, size_t *n_out) {
    uint32_t acc = 0;
    int bits = 0, quad = 0, pads = 0;
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        uint8_t v = value((unsigned char)text[i]);
        if (v == SKIP) continue;
        if (v == BAD) return false;
        if (v == PAD) {
            pads++;
            quad++;
            continue;
        }
        if (pads) return false; /* data after padding */
        acc = (acc << 6) | v;
        bits += 6;
        quad++;
        if (bits >= 8) {
            bits -= 8;
            out[n++] = (uint8_t)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    /* A last group of one character, or more than two pads, is no encoder's output. */
    int rest = (quad - pads) % 4;
    if (rest == 1 || pads > 2 || (pads && quad % 4 != 0)) return false;
    *n_out = n;
    return true;
}

char *sipp_base64_encode(const unsigned char *data, size_t n) {
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;
    if (!out) return NULL;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)data[i] << 16 | (i + 1 < n ? (uint32_t)data[i + 1] << 8 : 0) |
                     (i + 2 < n ? data[i + 2] : 0);
        *o++ = alphabet[v >> 18 & 63];
        *o++ = alphabet[v >> 12 & 63];
        *o++ = i + 1 < n ? alphabet[v >> 6 & 63] : '=';
        *o++ = i + 2 < n ? alphabet[v & 63] : '=';
    }
    *o = 0;
    return out;
}
