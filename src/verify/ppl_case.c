/*
 * ppl_case.c: verify's perplexity case: a quality gate, not only a logit one.
 *
 * Given a held-out text (params.ppl_text), every backend measures the model's perplexity on it with
 * sipp_model_perplexity (llama-perplexity's method, ppl_ctx tokens a chunk), and each one's relative
 * drift from the reference's, |ppl - ppl_ref| / ppl_ref, is checked against thresholds.ppl_max_drift.
 * KL on a few prompts says how far two backends' distributions are apart; perplexity on a longer text
 * says whether the difference costs the model its predictions, which is what a user notices.
 *
 * Quantizations are compared through a manifest: the perplexity recorded on one file (f16, say) is
 * checked against another quantization's (q4_0) with --against. A quantization step is expected to
 * cost more than a backend, so the allowance there is ppl_max_drift_quant per step of the ladder
 * below between the two files' main weight types (against.c).
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"
#include "verify/ppl_case.h"

#define READ_CHUNK 65536

sipp_status verify_ppl_read(const char *path, char **text, size_t *len, char *err) {
    *text = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return sipp_fail(err, SIPP_ERR_IO, "cannot read --ppl-text '%s': %s", path, strerror(errno));
    char *buf = NULL;
    size_t n = 0, got;
    do {
        char *grown = realloc(buf, n + READ_CHUNK + 1);
        if (!grown) {
            free(buf);
            fclose(f);
            return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory reading --ppl-text '%s'", path);
        }
        buf = grown;
        n += got = fread(buf + n, 1, READ_CHUNK, f);
    } while (got == READ_CHUNK);
    bool failed = ferror(f);
    fclose(f);
    if (failed || n == 0) {
        free(buf);
        return sipp_fail(err, SIPP_ERR_IO, "--ppl-text '%s' %s", path,
                         failed ? "could not be read" : "is empty: give a held-out text file");
    }
    buf[n] = '\0';
    *text = buf;
    *len = n;
    return SIPP_OK;
}

sipp_status verify_ppl_pass(const verify_config *cfg, sipp_model *m, verify_result *out, char *err) {
    sipp_perplexity_params pp = sipp_perplexity_default_params();
    pp.ctx_size = cfg->ppl_ctx;
    pp.max_chunks = cfg->ppl_chunks;
    pp.threads = cfg->threads;
    char why[SIPP_ERROR_SIZE];
    sipp_status st = sipp_model_perplexity(m, cfg->ppl_text, cfg->ppl_len, &pp, &out->ppl.r, why);
    if (st != SIPP_OK)
        return sipp_fail(err, st, "%s: the perplexity case (--ppl-text): %s", out->backend, why);
    out->ppl.ran = true;
    return SIPP_OK;
}

double verify_ppl_drift(double ppl, double ref) {
    if (!(isfinite(ppl) && isfinite(ref) && ppl > 0 && ref > 0)) return INFINITY;
    return fabs(ppl - ref) / ref;
}

static json_t *num(double x) { return isfinite(x) ? json_real(x) : json_null(); }

json_t *verify_ppl_json(const verify_ppl_result *r, const verify_ppl_result *ref) {
    return json_pack("{s:o, s:o, s:i, s:I, s:I, s:f, s:o}", "ppl", num(r->r.ppl), "ppl_error",
                     num(r->r.ppl_error), "n_chunks", r->r.n_chunks, "n_scored", (json_int_t)r->r.n_scored,
                     "n_text_tokens", (json_int_t)r->r.n_text_tokens, "seconds", r->r.seconds, "drift",
                     ref ? num(verify_ppl_drift(r->r.ppl, ref->r.ppl)) : json_null());
}

json_t *verify_ppl_case_json(const char *path, const verify_config *cfg) {
    if (!cfg->ppl_text)
        return json_pack(
            "{s:s}", "skipped",
            "no text given: --ppl-text FILE adds the perplexity case (a held-out text of at least "
            "2 x --ppl-ctx tokens)");
    char sha[SIPP_SHA256_HEX];
    sipp_sha256_hex(cfg->ppl_text, cfg->ppl_len, sha);
    return json_pack("{s:{s:s, s:s, s:I}, s:i, s:i}", "text", "path", path, "sha256", sha, "bytes",
                     (json_int_t)cfg->ppl_len, "ctx_size", cfg->ppl_ctx, "chunks", cfg->ppl_chunks);
}

/* ---- the quantization ladder ---- */

/* The type most tensors have, f32 aside (norms and biases stay f32 in every quantization). */
static const char *main_type(const json_t *types) {
    const char *best = NULL, *name;
    json_int_t most = -1;
    json_t *v;
    json_object_foreach((json_t *)types, name, v) {
        if (strcmp(name, "f32") == 0 || json_integer_value(v) <= most) continue;
        most = json_integer_value(v);
        best = name;
    }
    return best ? best : "f32";
}

/* Unquantized types are rung 0; a quantized one's rung comes from its bits per weight (the digit in
 * its name: q8_0 1, q6_K 2, q5_* 3, q4_* and iq4_* 4, q3 5, q2 6, 1-bit 7). */
static int rung(const char *type) {
    static const int by_bits[] = {[1] = 7, [2] = 6, [3] = 5, [4] = 4, [5] = 3, [6] = 2, [7] = 2, [8] = 1};
    const char *d = type;
    while (*d && (*d < '0' || *d > '9'))
        d++;
    if (type[0] == 'f' || strncmp(type, "bf", 2) == 0 || !*d || *d == '0' || *d == '9') return 0;
    return by_bits[*d - '0'];
}

int verify_quant_steps(const json_t *types_a, const json_t *types_b, const char **main_a,
                       const char **main_b) {
    *main_a = main_type(types_a);
    *main_b = main_type(types_b);
    return abs(rung(*main_a) - rung(*main_b));
}
