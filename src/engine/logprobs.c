/*
 * logprobs.c: a request's recorded log-probabilities, typed (sipp_request_logprobs in sipp.h).
 *
 * sampling.c records each generated token's id and log-probability with its best alternatives;
 * this file hands them out with the bytes of each token, under the request's lock. The JSON form
 * (sipp_request_logprobs_json, request_json.c) and the gateway's renderers are both built on it.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/request.h"
#include "model/model.h"

static void token_of(const sipp_model *m, llama_token t, float logprob, sipp_token_logprob *out) {
    out->token = t;
    out->logprob = logprob;
    int n = sipp_model_token_piece(m, t, true, out->bytes, sizeof out->bytes);
    out->n_bytes = n < 0 ? 0 : n > (int)sizeof out->bytes ? (int)sizeof out->bytes : n;
}

size_t sipp_request_logprobs(const sipp_request *rc, size_t from, sipp_logprob_entry **entries, size_t *n) {
    sipp_request *r = (sipp_request *)rc;
    *entries = NULL;
    *n = 0;
    if (!r || !r->owner.model) return from;
    const sipp_model *m = r->owner.model;
    pthread_mutex_lock(&r->mu);
    size_t total = r->n_logprobs;
    sipp_logprob_entry *e = total > from ? malloc((total - from) * sizeof *e) : NULL;
    for (size_t i = from; e && i < total; i++) {
        const sipp_logprob *lp = &r->logprobs[i];
        sipp_logprob_entry *x = &e[(*n)++];
        token_of(m, lp->token, lp->logprob, &x->chosen);
        x->n_top = lp->n_top;
        for (int k = 0; k < lp->n_top; k++)
            token_of(m, lp->top[k], lp->top_logprob[k], &x->top[k]);
    }
    pthread_mutex_unlock(&r->mu);
    *entries = e;
    return from + *n;
}
