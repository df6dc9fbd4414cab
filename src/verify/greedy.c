/*
 * greedy.c: what every case of a verify run shares: an engine of one slot sized for the case, a
 * greedy continuation through it (temperature 0, end-of-generation ignored, so the sampler and the
 * scheduler are in the loop as in real use), and how far two continuations agree.
 *
 * Greedy agreement is counted in tokens: both continuations' texts are tokenized again with the
 * model's tokenizer and compared position by position. Re-tokenizing can merge differently from how
 * generation split the text, but only next to where two texts differ; equal texts always count as
 * fully equal. (The engine streams text, not token ids.)
 */
#include <stdlib.h>
#include <string.h>

#include "util/util.h"
#include "verify/greedy.h"

#define CTX_MARGIN 16
#define UTF8_REPLACEMENT "\xEF\xBF\xBD"

/* Tokens of text (no BOS: continuation text); malloc'ed, NULL on failure. */
static int32_t *tokenize(sipp_model *vocab, const char *text, int *n) {
    size_t need = 0, len = strlen(text);
    *n = 0;
    sipp_tokenize(vocab, text, len, false, false, NULL, 0, &need);
    int32_t *t = malloc((need + 1) * sizeof *t);
    if (!t) return NULL;
    if (need && sipp_tokenize(vocab, text, len, false, false, t, need, &need) != SIPP_OK) {
        free(t);
        return NULL;
    }
    *n = (int)need;
    return t;
}

int verify_token_agreement(sipp_model *vocab, const char *ref, const char *other, int *n_ref) {
    int na = 0, nb = 0;
    int32_t *a = tokenize(vocab, ref, &na), *b = tokenize(vocab, other, &nb);
    int k = 0;
    if (a && b)
        while (k < na && k < nb && a[k] == b[k])
            k++;
    if (strcmp(ref, other) == 0) k = na;
    free(a);
    free(b);
    *n_ref = na;
    return k;
}

sipp_status verify_engine_new(const verify_config *cfg, sipp_model *m, int prompt_positions,
                              const char *backend, sipp_engine **e, char *err) {
    char why[SIPP_ERROR_SIZE];
    sipp_engine_params ep = sipp_engine_default_params();
    ep.parallel = 1;
    ep.threads = cfg->threads;
    ep.ctx_size = prompt_positions + cfg->greedy_tokens + CTX_MARGIN;
    if (sipp_engine_new(m, &ep, e, why) != SIPP_OK)
        return sipp_fail(err, SIPP_ERR_INTERNAL, "%s: cannot start an engine: %s", backend, why);
    return SIPP_OK;
}

sipp_status verify_greedy(const verify_config *cfg, sipp_engine *e, sipp_request_params *rp,
                          const char *backend, const char *what, char **text, char *err) {
    rp->max_tokens = cfg->greedy_tokens;
    rp->ignore_eos = true;
    rp->sampling.temperature = 0;
    sipp_request *r = NULL;
    if (sipp_engine_submit(e, rp, &r) != SIPP_OK)
        return sipp_fail(err, SIPP_ERR_INTERNAL, "%s: greedy continuation of %s: %s", backend, what,
                         sipp_engine_last_error(e));
    sipp_request_wait(r, -1);
    sipp_status rc = SIPP_OK;
    if (sipp_request_status(r) != SIPP_OK)
        rc = sipp_fail(err, SIPP_ERR_INTERNAL, "%s: greedy continuation of %s failed: %s", backend, what,
                       sipp_request_error(r));
    else if (!(*text = strdup(sipp_request_text(r))))
        rc = sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    sipp_request_free(r);
    return rc;
}

/* A copy of s with every byte that is not part of valid UTF-8 replaced by U+FFFD, for JSON. The hash
 * is of the bytes as generated. */
static char *utf8_clean(const char *s) {
    size_t n = strlen(s);
    char *out = malloc(3 * n + 1), *w = out;
    for (size_t i = 0; out && i < n;) {
        size_t k = 1;
        while (k <= 4 && i + k <= n && !sipp_utf8_valid(s + i, k))
            k++;
        if (k <= 4 && i + k <= n) {
            memcpy(w, s + i, k);
            w += k;
            i += k;
        } else {
            memcpy(w, UTF8_REPLACEMENT, 3);
            w += 3;
            i++;
        }
    }
    if (out) *w = '\0';
    return out;
}

json_t *verify_greedy_json(const char *generated, int agree, int ref_tokens) {
    char hash[SIPP_SHA256_HEX];
    sipp_sha256_hex(generated, strlen(generated), hash);
    char *text = utf8_clean(generated);
    json_t *o = json_pack("{s:s, s:s, s:i, s:i}", "sha256", hash, "text", text ? text : "", "agree_tokens",
                          agree, "ref_tokens", ref_tokens);
    free(text);
    return o;
}
