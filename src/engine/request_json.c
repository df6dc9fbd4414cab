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

#include "engine/request.h"
#include "model/model.h"
#include "util/logprobs_json.h"

#include <jansson.h>

sipp_status sipp_request_check_logprobs(int logprobs, char *err) {
    if (logprobs < -1 || logprobs > SIPP_MAX_TOP_LOGPROBS)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "logprobs is %d; it must be -1 (none) or in [0, %d]",
                         logprobs, SIPP_MAX_TOP_LOGPROBS);
    return SIPP_OK;
}

size_t sipp_request_logprobs_json(const sipp_request *r, size_t from, char **out) {
    *out = NULL;
    sipp_logprob_entry *e = NULL;
    size_t n = 0, next = sipp_request_logprobs(r, from, &e, &n);
    json_t *arr = e ? sipp_logprobs_json(e, n) : NULL;
    if (arr) *out = json_dumps(arr, JSON_COMPACT);
    json_decref(arr);
    sipp_free(e);
    return next;
}

sipp_status sipp_chat_parser_new(const sipp_request *r, sipp_chat_parser **out, char *errbuf) {
    *out = NULL;
    if (!r) return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "no request given");
    return sipp_chat_parser_new_from_plan(r->chat.plan, out, errbuf);
}
