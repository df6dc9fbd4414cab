/*
 * libFuzzer harness for src/gateway/http/multipart.c: the multipart/form-data bodies of
 * /v1/audio/transcriptions. The input's first line is the Content-Type header's value, the rest
 * the body. Invariants checked beyond the sanitizers':
 *   - every refusal has a message;
 *   - a boundary read from the header is 1 to 70 characters;
 *   - every part lies inside the body, at most GW_FORM_MAX_PARTS of them, each with its name;
 *   - a form that parses round-trips: written out again with the same boundary (names quoted, with
 *     escapes) it parses to the same parts, byte for byte.
 *
 *   make fuzz-bins && build/fuzz/fuzz_multipart -max_total_time=60 /tmp/multipart-corpus \
 *     tests/fuzz/corpus/multipart
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/http/http.h"

#define MAX_INPUT 65536
#define ERR_SIZE 512
#define HEADER_MAX 512

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "invariant broken: %s\n", what);
        abort();
    }
}

/* Appends s as a quoted string, '"' and '\' escaped. */
static size_t put_quoted(char *out, size_t at, const char *s) {
    out[at++] = '"';
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') out[at++] = '\\';
        out[at++] = *s;
    }
    out[at++] = '"';
    return at;
}

static size_t put(char *out, size_t at, const char *s, size_t n) {
    memcpy(out + at, s, n);
    return at + n;
}

/* The form written out again: each part's headers and bytes between boundary lines. */
static size_t write_form(const gw_form *f, const char *boundary, char *out) {
    size_t at = 0, bn = strlen(boundary);
    for (size_t i = 0; i < f->n; i++) {
        const gw_form_part *p = &f->parts[i];
        at = put(out, at, "--", 2);
        at = put(out, at, boundary, bn);
        at = put(out, at, "\r\nContent-Disposition: form-data; name=", 39);
        at = put_quoted(out, at, p->name);
        if (p->has_filename) {
            at = put(out, at, "; filename=", 11);
            at = put_quoted(out, at, p->filename);
        }
        if (p->content_type[0]) {
            at = put(out, at, "\r\nContent-Type: ", 16);
            at = put(out, at, p->content_type, strlen(p->content_type));
        }
        at = put(out, at, "\r\n\r\n", 4);
        at = put(out, at, p->data, p->len);
        at = put(out, at, "\r\n", 2);
    }
    at = put(out, at, "--", 2);
    at = put(out, at, boundary, bn);
    return put(out, at, "--\r\n", 4);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > MAX_INPUT) return 0;
    const uint8_t *nl = memchr(data, '\n', size < HEADER_MAX ? size : HEADER_MAX);
    if (!nl) return 0;
    char header[HEADER_MAX + 1];
    size_t hn = (size_t)(nl - data);
    memcpy(header, data, hn);
    header[hn] = '\0';
    const char *body = (const char *)nl + 1;
    size_t len = size - hn - 1;

    char boundary[GW_FORM_BOUNDARY_SIZE], err[ERR_SIZE] = "";
    bool not_form = false;
    if (!gw_multipart_boundary(header, boundary, &not_form, err, sizeof err)) {
        check(err[0] != '\0', "a refused Content-Type has no message");
        return 0;
    }
    size_t bn = strlen(boundary);
    check(bn >= 1 && bn < GW_FORM_BOUNDARY_SIZE, "a boundary of the wrong length");

    gw_form *form = malloc(sizeof *form), *again = malloc(sizeof *again);
    /* the headers written out are at most a fixed size a part; the bytes are the body's */
    char *out =
        malloc(len + GW_FORM_MAX_PARTS * (4 * GW_FORM_NAME_SIZE + GW_FORM_TYPE_SIZE + 2 * bn + 128) + 256);
    if (!form || !again || !out) goto done;
    err[0] = '\0';
    if (!gw_multipart_parse(body, len, boundary, form, err, sizeof err)) {
        check(err[0] != '\0', "a refused body has no message");
        goto done;
    }
    check(form->n <= GW_FORM_MAX_PARTS, "too many parts");
    for (size_t i = 0; i < form->n; i++) {
        const gw_form_part *p = &form->parts[i];
        check(p->data >= body && p->len <= len && p->data + p->len <= body + len, "a part outside the body");
        check(memchr(p->name, '\0', sizeof p->name) != NULL, "a name without its NUL");
    }
    size_t n = write_form(form, boundary, out);
    err[0] = '\0';
    bool ok = gw_multipart_parse(out, n, boundary, again, err, sizeof err);
    if (!ok) fprintf(stderr, "round trip refused: %s\n", err);
    check(ok && again->n == form->n, "a form does not round-trip");
    for (size_t i = 0; i < form->n; i++) {
        const gw_form_part *a = &form->parts[i], *b = &again->parts[i];
        check(strcmp(a->name, b->name) == 0 && strcmp(a->filename, b->filename) == 0 &&
                  a->has_filename == b->has_filename && strcmp(a->content_type, b->content_type) == 0,
              "a part's headers do not round-trip");
        check(a->len == b->len && memcmp(a->data, b->data, a->len) == 0, "a part's bytes do not round-trip");
    }
done:
    free(form);
    free(again);
    free(out);
    return 0;
}
