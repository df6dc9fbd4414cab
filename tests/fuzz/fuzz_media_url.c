/*
 * libFuzzer harness for gw_media_url_redact (src/gateway/media_parts.c): how a 400 shows the URL of
 * an image the gateway could not fetch. The URL is a client's, and may carry a token in its query or
 * user:password@ before its host. The first byte picks the output's size (1..256), the rest is the
 * URL. Invariants checked beyond the sanitizers':
 *   - the output is NUL-terminated within its size, with no control characters;
 *   - it is valid UTF-8 when the URL was (a cut never splits a character);
 *   - of a query or fragment only "?..." shows, and no '@' is left before the host.
 *
 *   make fuzz-bins && build/fuzz/fuzz_media_url -max_total_time=60 /tmp/url-corpus
 * tests/fuzz/corpus/media_url
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/media_parts.h"
#include "util/util.h"

#define MAX_INPUT 2048
#define MAX_OUT 256
#define SHOWN "?..."

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "invariant broken: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > MAX_INPUT) return 0;
    size_t cap = (size_t)data[0] % MAX_OUT + 1;
    char url[MAX_INPUT + 1], out[MAX_OUT + 1];
    memcpy(url, data + 1, size - 1);
    url[size - 1] = '\0';
    memset(out, 'x', sizeof out);
    gw_media_url_redact(url, out, cap);
    size_t n = strnlen(out, cap);
    check(n < cap, "the output ends within its size");
    bool controls = false;
    for (const char *p = url; *p; p++)
        controls |= (unsigned char)*p < ' ' || *p == 0x7f;
    for (size_t i = 0; i < n; i++)
        check((unsigned char)out[i] >= ' ' && out[i] != 0x7f, "no control character is shown");
    if (sipp_utf8_valid(url, strlen(url))) check(sipp_utf8_valid(out, n), "a cut keeps UTF-8 whole");
    if (!controls) { /* else a control character shown as '?' is no query */
        check(!strchr(out, '#'), "a fragment never shows");
        const char *q = strchr(out, '?');
        if (q) check(strncmp(q, SHOWN, strlen(q)) == 0, "of a query only ?... shows");
    }
    const char *sep = strstr(out, "://");
    if (sep && (size_t)(sep - out) < strcspn(out, "/?#")) {
        const char *host = sep + 3;
        size_t authority = strcspn(host, "/?#");
        check(!memchr(host, '@', authority), "no user information shows");
    }
    return 0;
}
