/*
 * logprobs_json.c: typed log-probabilities in OpenAI's shape (see logprobs_json.h).
 */
#include <stdlib.h>

#include "util/logprobs_json.h"
#include "util/util.h"

#define REPLACEMENT "\xEF\xBF\xBD"

/* The length of the UTF-8 character that starts with c, 0 when c cannot start one. */
static int char_len(unsigned char c) {
    return c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
}

static json_t *token_json(const sipp_token_logprob *t) {
    json_t *bytes = json_array();
    sipp_buf text = {0};
    for (int i = 0; i < t->n_bytes; i++)
        json_array_append_new(bytes, json_integer((unsigned char)t->bytes[i]));
    for (int i = 0; i < t->n_bytes;) {
        int len = char_len((unsigned char)t->bytes[i]);
        if (len && i + len <= t->n_bytes && sipp_utf8_valid(t->bytes + i, (size_t)len)) {
            sipp_buf_append(&text, t->bytes + i, (size_t)len);
            i += len;
        } else {
            sipp_buf_append(&text, REPLACEMENT, sizeof REPLACEMENT - 1);
            i++;
        }
    }
    json_t *o = json_pack("{s:s%, s:f, s:o}", "token", text.data ? text.data : "", text.len, "logprob",
                          (double)t->logprob, "bytes", bytes);
    sipp_buf_free(&text);
    return o;
}

json_t *sipp_logprobs_json(const sipp_logprob_entry *entries, size_t n) {
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++) {
        json_t *o = token_json(&entries[i].chosen), *top = json_array();
        for (int k = 0; k < entries[i].n_top; k++)
            json_array_append_new(top, token_json(&entries[i].top[k]));
        json_object_set_new(o, "top_logprobs", top);
        json_array_append_new(arr, o);
    }
    return arr;
}
