/*
 * field_names.c: field names in error messages, from chat-completions terms into another API's.
 *
 * The Responses, Messages and Ollama routes rebuild a request as a chat-completions body, so a
 * refusal (from the request parser or the engine) names the field as chat completions calls it
 * ('max_tokens'). A route's table of renames rewrites each quoted field name so that the client
 * reads its own API's name ('max_output_tokens', 'options.num_predict'). It sits below generate.c
 * (which renames engine errors) and translate.c (which renames the parser's).
 */
#include <string.h>

#include "gateway/field_names.h"

#define GW_QUOTE '\''
#define GW_INDEX_DIGITS 24

/* True when c may follow a field name inside a quoted path: the closing quote, a member, an index. */
static bool ends_name(char c) { return c == GW_QUOTE || c == '.' || c == '['; }

/* Matches pattern (where '*' stands for a run of digits) at the start of s. On a match returns the
 * length of s it covers and copies the digits '*' stood for to digits. */
static size_t match(const char *pattern, const char *s, char *digits, size_t cap) {
    size_t n = 0;
    digits[0] = 0;
    for (const char *q = pattern; *q; q++) {
        if (*q != GW_RENAME_INDEX) {
            if (s[n] != *q) return 0;
            n++;
            continue;
        }
        size_t start = n;
        while (s[n] >= '0' && s[n] <= '9')
            n++;
        if (n == start || n - start >= cap) return 0;
        memcpy(digits, s + start, n - start);
        digits[n - start] = 0;
    }
    return ends_name(s[n]) ? n : 0;
}

void gw_rename_fields(char *msg, size_t cap, const gw_rename *renames) {
    if (!renames) return;
    sipp_buf out = {0};
    const char *p = msg;
    char digits[GW_INDEX_DIGITS];
    while (*p) {
        size_t used = 0;
        const gw_rename *r = renames;
        if (*p == GW_QUOTE)
            for (; r->chat && !used; r++)
                used = match(r->chat, p + 1, digits, sizeof digits);
        if (!used) {
            sipp_buf_append(&out, p++, 1);
            continue;
        }
        sipp_buf_append(&out, p, 1);
        for (const char *q = r[-1].api; *q; q++) {
            if (*q == GW_RENAME_INDEX)
                sipp_buf_append(&out, digits, strlen(digits));
            else
                sipp_buf_append(&out, q, 1);
        }
        p += 1 + used;
    }
    if (out.data) sipp_strlcpy(msg, out.data, cap);
    sipp_buf_free(&out);
}
