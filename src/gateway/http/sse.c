/*
 * sse.c: server-sent events framing. Every event is one "data:" line (JSON has no raw newlines,
 * so one line always suffices) and a blank line; sipp-native events add an "event:" line first.
 */
#include <stdlib.h>
#include <string.h>

#include "gateway/http/http.h"

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
