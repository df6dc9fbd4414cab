/*
 * request_json.c: the JSON faces of a request (its log-probabilities, its chat parser), built with
 * jansson and llama.cpp's chat library.
 *
 * A seam of its own: the browser runtime (`make web`) has neither library, so it leaves this file
 * out and links src/wasm/chat_browser.c, which answers the same calls with an error saying so. The
 * log-probabilities themselves are recorded by sampling.c; only asking for them is checked here,
 * so that a runtime that cannot return them refuses the request instead of computing them unseen.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/engine_internal.h"

#include <jansson.h>

#define TOKEN_TEXT_MAX 256

sipp_status sipp_request_check_logprobs(int logprobs, char *err) {
    if (logprobs < -1 || logprobs > SIPP_MAX_TOP_LOGPROBS)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "logprobs is %d; it must be -1 (none) or in [0, %d]",
                         logprobs, SIPP_MAX_TOP_LOGPROBS);
    return SIPP_OK;
}

/* {"token", "logprob", "bytes"} of one token; the text made valid UTF-8 (bytes keep it exact). */
static json_t *token_json(const sipp_model *m, llama_token t, float logprob) {
    char piece[TOKEN_TEXT_MAX];
    int n = sipp_model_token_piece(m, t, true, piece, sizeof piece);
    json_t *bytes = json_array();
    sipp_buf text = {0};
    for (int i = 0; i < n; i++) {
        json_array_append_new(bytes, json_integer((unsigned char)piece[i]));
    }
    for (int i = 0; i < n;) {
        unsigned char c = (unsigned char)piece[i];
        int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (len && i + len <= n && sipp_utf8_valid(piece + i, (size_t)len)) {
            sipp_buf_append(&text, piece + i, (size_t)len);
            i += len;
        } else {
            sipp_buf_append(&text, "\xEF\xBF\xBD", 3);
            i++;
        }
    }
    json_t *o = json_pack("{s:s%, s:f, s:o}", "token", text.data ? text.data : "", text.len, "logprob",
                          (double)logprob, "bytes", bytes);
    sipp_buf_free(&text);
    return o;
}

size_t sipp_request_logprobs_json(const sipp_request *rc, size_t from, char **out) {
    sipp_request *r = (sipp_request *)rc;
    *out = NULL;
    if (!r) return 0;
    const sipp_model *m = r->engine ? r->engine->model : NULL;
    pthread_mutex_lock(&r->mu);
    size_t n = r->n_logprobs;
    if (m && from < n) {
        json_t *arr = json_array();
        for (size_t i = from; i < n; i++) {
            const sipp_logprob *lp = &r->logprobs[i];
            json_t *o = token_json(m, lp->token, lp->logprob), *top = json_array();
            for (int k = 0; k < lp->n_top; k++)
                json_array_append_new(top, token_json(m, lp->top[k], lp->top_logprob[k]));
            json_object_set_new(o, "top_logprobs", top);
            json_array_append_new(arr, o);
        }
        *out = json_dumps(arr, JSON_COMPACT);
        json_decref(arr);
    }
    pthread_mutex_unlock(&r->mu);
    return n;
}

sipp_status sipp_chat_parser_new(const sipp_request *r, sipp_chat_parser **out, char *errbuf) {
    *out = NULL;
    if (!r) return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "no request given");
    return sipp_chat_parser_new_from_plan(r->chat.plan, out, errbuf);
}
