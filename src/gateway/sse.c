/*
 * sse.c: server-sent events framing. Every event is one "data:" line (JSON has no raw newlines,
 * so one line always suffices) and a blank line; sipp-native events add an "event:" line first.
 */
#include <stdlib.h>
#include <string.h>

#include "gateway/gateway.h"

bool gw_sse_json(sipp_buf *out, const char *event, json_t *j) {
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!text) return false;
    bool ok = (!event || sipp_buf_appendf(out, "event: %s\n", event)) && sipp_buf_append(out, "data: ", 6) &&
              sipp_buf_append(out, text, strlen(text)) && sipp_buf_append(out, "\n\n", 2);
    free(text);
    return ok;
}

bool gw_sse_done(sipp_buf *out) {
    static const char done[] = "data: [DONE]\n\n";
    return sipp_buf_append(out, done, sizeof done - 1);
}

bool gw_utf8_clean(const char *s, size_t n, sipp_buf *out) {
    static const char replacement[] = "\xEF\xBF\xBD";
    size_t i = 0, run = 0; /* s[i - run .. i) is valid and not yet copied */
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        size_t len = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (len && i + len <= n && sipp_utf8_valid(s + i, len)) {
            i += len;
            run += len;
            continue;
        }
        if (!sipp_buf_append(out, s + i - run, run) || !sipp_buf_append(out, replacement, sizeof replacement - 1)) return false;
        run = 0;
        i++;
    }
    return sipp_buf_append(out, s + n - run, run);
}
