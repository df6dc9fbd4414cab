/*
 * logprobs_json.h: typed log-probabilities (sipp_logprob_entry) in OpenAI's shape, written once for
 * the bindings' JSON form (sipp_request_logprobs_json) and the gateway's renderers.
 */
#ifndef SIPP_UTIL_LOGPROBS_JSON_H
#define SIPP_UTIL_LOGPROBS_JSON_H

#include <jansson.h>

#include "sipp.h"

/* [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}]: each token's text
 * made valid UTF-8 (U+FFFD for a byte that is not part of a character; "bytes" keeps it exact). A
 * new reference. */
json_t *sipp_logprobs_json(const sipp_logprob_entry *entries, size_t n);

#endif
