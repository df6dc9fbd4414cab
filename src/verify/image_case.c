/*
 * image_case.c: verify's image case: the embedding path compared across backends like text logits.
 *
 * Given a projector (params.mmproj), every backend loads the model with it and evaluates one fixed
 * chat: a user message holding a fixed image and a fixed question. The chat goes in as chat_json, so
 * it takes the path a chat request takes (the template renders it, chat_media decodes and checks the
 * image, the projector's spans stand for it in the prompt); sipp_model_eval_chat_logits evaluates it
 * whole in a fresh context and returns the logits of every text position after the image. Those are
 * compared with the reference backend's by the same metrics and thresholds as the prompts' logits,
 * and a greedy continuation of the same chat through an engine is compared token by token. Where the
 * projector ran (params.mmproj_offload: the backend's GPU; a cpu backend always the CPU) is recorded.
 *
 * The image is made here, not read from a file, so that every machine sees the same bytes: a 64x48
 * RGB PNG of colour gradients, a checkerboard and a diagonal band (a single colour would leave most of
 * the encoder's attention uniform, and prove little), stored without compression (deflate's "stored"
 * blocks), which every PNG decoder reads and which needs no zlib. Changing it changes every manifest's
 * image figures: don't.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/base64.h"
#include "util/util.h"
#include "verify/distance.h"
#include "verify/greedy.h"
#include "verify/image_case.h"

#define IMAGE_W 64
#define IMAGE_H 48
#define IMAGE_CHANNELS 3
#define CHECKER 8        /* the checkerboard's square, pixels */
#define BAND 6           /* the diagonal band's half width, pixels */
#define STORED_MAX 65535 /* bytes in one stored deflate block */
#define CRC_POLY 0xEDB88320u
#define ADLER_MOD 65521u
#define PNG_SIGNATURE "\x89PNG\r\n\x1a\n"
#define DATA_URL_PREFIX "data:image/png;base64,"
#define IMAGE_QUESTION                                                                                       \
    "Describe this picture: the colours, the shapes and the pattern they make, from the top left corner "    \
    "to the bottom right one, in one sentence."
#define IMAGE_CTX_MARGIN 16

/* ---- the image ---- */

typedef struct bytes {
    unsigned char *p;
    size_t n, cap;
    bool failed;
} bytes;

static void put(bytes *b, const void *data, size_t n) {
    if (b->failed) return;
    if (b->n + n > b->cap) {
        size_t cap = (b->n + n) * 2;
        unsigned char *grown = realloc(b->p, cap);
        if (!grown) {
            b->failed = true;
            return;
        }
        b->p = grown;
        b->cap = cap;
    }
    memcpy(b->p + b->n, data, n);
    b->n += n;
}

static void put_be32(bytes *b, uint32_t v) {
    unsigned char x[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16), (unsigned char)(v >> 8),
                          (unsigned char)v};
    put(b, x, 4);
}

static uint32_t crc32_update(uint32_t crc, const unsigned char *p, size_t n) {
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (CRC_POLY & (0u - (crc & 1u)));
    }
    return ~crc;
}

/* A PNG chunk: length, type, body, the CRC of type and body. */
static void put_chunk(bytes *b, const char *type, const unsigned char *body, size_t n) {
    put_be32(b, (uint32_t)n);
    put(b, type, 4);
    put(b, body, n);
    uint32_t crc = crc32_update(crc32_update(0, (const unsigned char *)type, 4), body, n);
    put_be32(b, crc);
}

/* The raw scanlines: each row a filter byte (0, none) and its RGB pixels. */
static void scanlines(unsigned char *raw) {
    unsigned char *w = raw;
    for (int y = 0; y < IMAGE_H; y++) {
        *w++ = 0;
        for (int x = 0; x < IMAGE_W; x++) {
            bool dark = ((x / CHECKER) + (y / CHECKER)) % 2 == 0;
            bool band = abs(x - y * IMAGE_W / IMAGE_H) < BAND;
            *w++ = (unsigned char)(band ? 250 : x * 255 / (IMAGE_W - 1));
            *w++ = (unsigned char)(y * 255 / (IMAGE_H - 1));
            *w++ = (unsigned char)(dark ? 40 : 200);
        }
    }
}

/* The zlib stream of raw (stored blocks, then the Adler-32 of the data). */
static void put_zlib_stored(bytes *b, const unsigned char *raw, size_t n) {
    static const unsigned char header[2] = {0x78, 0x01};
    put(b, header, sizeof header);
    size_t at = 0;
    do {
        size_t len = n - at < STORED_MAX ? n - at : STORED_MAX;
        unsigned char h[5] = {(unsigned char)(at + len == n), (unsigned char)len, (unsigned char)(len >> 8),
                              (unsigned char)~len, (unsigned char)(~len >> 8)};
        put(b, h, sizeof h);
        put(b, raw + at, len);
        at += len;
    } while (at < n);
    uint32_t s1 = 1, s2 = 0;
    for (size_t i = 0; i < n; i++) {
        s1 = (s1 + raw[i]) % ADLER_MOD;
        s2 = (s2 + s1) % ADLER_MOD;
    }
    put_be32(b, (s2 << 16) | s1);
}

/* The fixed image as PNG bytes (malloc'ed, *n of them); NULL when out of memory. */
static unsigned char *make_png(size_t *n) {
    const size_t raw_n = (size_t)IMAGE_H * (1 + (size_t)IMAGE_W * IMAGE_CHANNELS);
    unsigned char *raw = malloc(raw_n);
    bytes idat = {0}, png = {0};
    if (!raw) return NULL;
    scanlines(raw);
    put_zlib_stored(&idat, raw, raw_n);
    free(raw);
    /* width, height, bit depth 8, colour type 2 (RGB), deflate, adaptive filtering, no interlace */
    unsigned char ihdr[13] = {0, 0, 0, 0, 0, 0, 0, 0, 8, 2, 0, 0, 0};
    for (int i = 0; i < 4; i++) {
        ihdr[i] = (unsigned char)((uint32_t)IMAGE_W >> (24 - 8 * i));
        ihdr[4 + i] = (unsigned char)((uint32_t)IMAGE_H >> (24 - 8 * i));
    }
    put(&png, PNG_SIGNATURE, strlen(PNG_SIGNATURE));
    put_chunk(&png, "IHDR", ihdr, sizeof ihdr);
    put_chunk(&png, "IDAT", idat.p, idat.n);
    put_chunk(&png, "IEND", NULL, 0);
    bool failed = idat.failed || png.failed;
    free(idat.p);
    if (failed) {
        free(png.p);
        return NULL;
    }
    *n = png.n;
    return png.p;
}

char *verify_image_chat(char image_sha256[SIPP_SHA256_HEX], int *width, int *height) {
    size_t n = 0;
    unsigned char *png = make_png(&n);
    if (!png) return NULL;
    sipp_sha256_hex(png, n, image_sha256);
    char *b64 = sipp_base64_encode(png, n);
    free(png);
    if (!b64) return NULL;
    size_t url_n = strlen(DATA_URL_PREFIX) + strlen(b64) + 1;
    char *url = malloc(url_n);
    if (url) snprintf(url, url_n, "%s%s", DATA_URL_PREFIX, b64);
    free(b64);
    if (!url) return NULL;
    json_t *chat =
        json_pack("{s:[{s:s, s:[{s:s, s:{s:s}}, {s:s, s:s}]}]}", "messages", "role", "user", "content",
                  "type", "image_url", "image_url", "url", url, "type", "text", "text", IMAGE_QUESTION);
    free(url);
    char *text = chat ? json_dumps(chat, JSON_COMPACT) : NULL;
    json_decref(chat);
    *width = IMAGE_W;
    *height = IMAGE_H;
    return text;
}

/* ---- one backend ---- */

sipp_status verify_image_pass(const verify_config *cfg, sipp_model *m, const verify_result *ref,
                              verify_result *out, char *err) {
    verify_image_result *im = &out->image;
    char why[SIPP_ERROR_SIZE];
    sipp_status st = sipp_model_eval_chat_logits(m, cfg->image_chat, cfg->threads, &im->logits, why);
    if (st != SIPP_OK) /* a projector that takes no images, say: the model's fault, not the caller's */
        return sipp_fail(err, st == SIPP_ERR_INVALID_ARGUMENT ? SIPP_ERR_MODEL : st, "%s: the image case: %s",
                         out->backend, why);
    im->n_rows = im->logits.n_rows;
    im->n_prompt = im->logits.n_prompt;
    im->n_media = im->logits.n_media;
    snprintf(im->projector_device, sizeof im->projector_device, "%s", im->logits.projector_device);
    if (ref) {
        const verify_image_result *ri = &ref->image;
        if (!ri->ran || ri->n_rows != im->n_rows || ri->n_media != im->n_media ||
            ri->logits.n_vocab != im->logits.n_vocab)
            return sipp_fail(err, SIPP_ERR_MODEL,
                             "%s: the image case has %d positions after %d of the image, the reference %s %d "
                             "after %d: not the same model and projector",
                             out->backend, im->n_rows, im->n_media, ref->backend, ri->n_rows, ri->n_media);
        verify_metrics_add(&im->vs_ref, ri->logits.logits, im->logits.logits, im->n_rows, im->logits.n_vocab);
        verify_metrics_finish(&im->vs_ref);
        sipp_free(im->logits.logits);
        im->logits.logits = NULL;
    }
    if (cfg->greedy_tokens > 0) {
        sipp_engine *e = NULL;
        if ((st = verify_engine_new(cfg, m, im->n_prompt + IMAGE_CTX_MARGIN, out->backend, &e, err)) !=
            SIPP_OK)
            return st;
        sipp_request_params rp = sipp_request_default_params();
        rp.chat_json = cfg->image_chat;
        st = verify_greedy(cfg, e, &rp, out->backend, "the image case's chat", &im->greedy, err);
        sipp_engine_free(e);
        if (st != SIPP_OK) return st;
        const char *against = ref && ref->image.greedy ? ref->image.greedy : im->greedy;
        im->greedy_agree = verify_token_agreement(cfg->vocab, against, im->greedy, &im->greedy_len);
    }
    im->ran = true;
    return SIPP_OK;
}

void verify_image_free(verify_image_result *r) {
    sipp_free(r->logits.logits);
    free(r->greedy);
    memset(r, 0, sizeof *r);
}

json_t *verify_image_json(const verify_image_result *r) {
    return json_pack("{s:s, s:i, s:i, s:i, s:o, s:o}", "projector_device", r->projector_device, "positions",
                     r->n_rows, "prompt_positions", r->n_prompt, "media_positions", r->n_media, "vs_ref",
                     r->vs_ref.positions ? verify_metrics_json(&r->vs_ref) : json_null(), "greedy",
                     r->greedy ? verify_greedy_json(r->greedy, r->greedy_agree, r->greedy_len) : json_null());
}

json_t *verify_image_case_json(const verify_config *cfg, char *err) {
    if (!cfg->mmproj)
        return json_pack("{s:s}", "skipped",
                         "no projector given: --mmproj FILE (or --mmproj auto, the mmproj-*.gguf beside the "
                         "model) adds the image case");
    char sha[SIPP_SHA256_HEX], image_sha[SIPP_SHA256_HEX];
    if (sipp_store_file_sha256(cfg->mmproj, sha, NULL, err) != SIPP_OK) return NULL;
    int w = 0, h = 0;
    char *chat = verify_image_chat(image_sha, &w, &h);
    if (!chat) {
        sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
        return NULL;
    }
    free(chat);
    return json_pack("{s:{s:s, s:s}, s:b, s:{s:s, s:i, s:i, s:s}, s:s}", "projector", "path", cfg->mmproj,
                     "sha256", sha, "offload", cfg->mmproj_offload, "image", "format", "png", "width", w,
                     "height", h, "sha256", image_sha, "prompt", IMAGE_QUESTION);
}
