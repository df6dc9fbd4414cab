/*
 * distance.c: how far one set of logits is from another.
 *
 * Raw differences (max, RMS) say how large the drift is in logit units, but logits are only defined
 * up to a constant per row and their scale varies from model to model, so the gate is the KL
 * divergence of the distributions the logits define: KL(softmax(ref) || softmax(other)), in nats, the
 * expected extra surprise of sampling from the other backend when the reference is the truth. It is
 * computed in double precision from log-softmax with the row's maximum subtracted first (log-sum-exp),
 * so 128k-token vocabularies and large logits neither overflow nor lose the small differences that
 * matter. Top-1 agreement is what greedy decoding sees; top-5 overlap what sampling with a small
 * top-k sees.
 *
 * A non-finite logit in the compared row is a breakage, not drift: its KL counts as infinite, which
 * every threshold rejects. In JSON such a value is written as null.
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "verify/distance.h"

/* Defaults of the thresholds: see docs/verify.md for how they were chosen. */
#define DEFAULT_MAX_KL 0.01
#define DEFAULT_MAX_KL_MAX 0.1
#define DEFAULT_MIN_TOP1 0.9
#define DEFAULT_MAX_CACHED_KL 0.01
#define DEFAULT_MIN_CACHED_TOP1 0.9
#define DEFAULT_MIN_GREEDY 0.0
#define DEFAULT_SPEED_TOLERANCE 0.25
#define DEFAULT_PPL_MAX_DRIFT 0.02
#define DEFAULT_PPL_MAX_DRIFT_QUANT 0.03

sipp_verify_thresholds sipp_verify_default_thresholds(void) {
    return (sipp_verify_thresholds){.max_kl = DEFAULT_MAX_KL,
                                    .max_kl_max = DEFAULT_MAX_KL_MAX,
                                    .min_top1 = DEFAULT_MIN_TOP1,
                                    .max_cached_kl = DEFAULT_MAX_CACHED_KL,
                                    .min_cached_top1 = DEFAULT_MIN_CACHED_TOP1,
                                    .min_greedy = DEFAULT_MIN_GREEDY,
                                    .speed_tolerance = DEFAULT_SPEED_TOLERANCE,
                                    .ppl_max_drift = DEFAULT_PPL_MAX_DRIFT,
                                    .ppl_max_drift_quant = DEFAULT_PPL_MAX_DRIFT_QUANT};
}

static const struct {
    const char *key;
    size_t offset;
} threshold_fields[] = {
    {"max_kl", offsetof(sipp_verify_thresholds, max_kl)},
    {"max_kl_max", offsetof(sipp_verify_thresholds, max_kl_max)},
    {"min_top1", offsetof(sipp_verify_thresholds, min_top1)},
    {"max_cached_kl", offsetof(sipp_verify_thresholds, max_cached_kl)},
    {"min_cached_top1", offsetof(sipp_verify_thresholds, min_cached_top1)},
    {"min_greedy", offsetof(sipp_verify_thresholds, min_greedy)},
    {"speed_tolerance", offsetof(sipp_verify_thresholds, speed_tolerance)},
    {"ppl_max_drift", offsetof(sipp_verify_thresholds, ppl_max_drift)},
    {"ppl_max_drift_quant", offsetof(sipp_verify_thresholds, ppl_max_drift_quant)},
};
#define N_THRESHOLD_FIELDS (sizeof threshold_fields / sizeof threshold_fields[0])

json_t *verify_thresholds_json(const sipp_verify_thresholds *t) {
    json_t *o = json_object();
    for (size_t i = 0; i < N_THRESHOLD_FIELDS; i++)
        json_object_set_new(o, threshold_fields[i].key,
                            json_real(*(const double *)((const char *)t + threshold_fields[i].offset)));
    return o;
}

void verify_thresholds_from_json(const json_t *j, sipp_verify_thresholds *t) {
    for (size_t i = 0; i < N_THRESHOLD_FIELDS; i++) {
        json_t *v = json_object_get(j, threshold_fields[i].key);
        if (json_is_number(v)) *(double *)((char *)t + threshold_fields[i].offset) = json_number_value(v);
    }
}

void verify_topk(const float *row, int n_vocab, int k, int32_t *ids, float *values) {
    int n = 0;
    for (int i = 0; i < n_vocab; i++) {
        float v = row[i];
        if (!(v == v)) continue; /* NaN never ranks */
        if (n == k && v <= values[k - 1]) continue;
        int j = n < k ? n++ : k - 1;
        while (j > 0 && values[j - 1] < v) {
            values[j] = values[j - 1];
            ids[j] = ids[j - 1];
            j--;
        }
        values[j] = v;
        ids[j] = i;
    }
    for (; n < k; n++) {
        ids[n] = -1;
        values[n] = -INFINITY;
    }
}

double verify_max_magnitude(const float *v, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        const double a = fabs((double)v[i]);
        if (!isfinite(a)) return INFINITY;
        if (a > m) m = a;
    }
    return m;
}

static double log_sum_exp(const float *x, int n) {
    double mx = -INFINITY;
    for (int i = 0; i < n; i++)
        mx = x[i] > mx ? x[i] : mx;
    double s = 0;
    for (int i = 0; i < n; i++)
        s += exp((double)x[i] - mx);
    return mx + log(s);
}

static bool row_finite(const float *x, int n) {
    for (int i = 0; i < n; i++)
        if (!isfinite(x[i])) return false;
    return true;
}

void verify_metrics_add(verify_metrics *m, const float *ref, const float *other, int n_rows, int n_vocab) {
    for (int r = 0; r < n_rows; r++) {
        const float *a = ref + (size_t)r * n_vocab, *b = other + (size_t)r * n_vocab;
        double kl;
        if (!row_finite(b, n_vocab) || !row_finite(a, n_vocab)) {
            kl = INFINITY;
            m->max_abs = INFINITY;
            m->sum_sq = INFINITY;
        } else {
            double lse_a = log_sum_exp(a, n_vocab), lse_b = log_sum_exp(b, n_vocab);
            kl = 0;
            for (int i = 0; i < n_vocab; i++) {
                double d = (double)a[i] - (double)b[i];
                double ad = fabs(d);
                if (ad > m->max_abs) m->max_abs = ad;
                m->sum_sq += d * d;
                double la = a[i] - lse_a, lb = b[i] - lse_b;
                kl += exp(la) * (la - lb);
            }
            if (kl < 0) kl = 0; /* rounding of two equal distributions */
        }
        m->n_values += n_vocab;
        m->sum_kl += kl;
        if (kl > m->kl_max || isnan(kl)) m->kl_max = kl;

        int32_t ia[VERIFY_TOPK], ib[VERIFY_TOPK];
        float va[VERIFY_TOPK], vb[VERIFY_TOPK];
        verify_topk(a, n_vocab, VERIFY_TOPK, ia, va);
        verify_topk(b, n_vocab, VERIFY_TOPK, ib, vb);
        if (ia[0] == ib[0]) m->top1_hits++;
        int common = 0;
        for (int i = 0; i < VERIFY_TOPK; i++)
            for (int j = 0; j < VERIFY_TOPK; j++)
                if (ia[i] >= 0 && ia[i] == ib[j]) common++;
        m->sum_top5 += (double)common / VERIFY_TOPK;
        m->positions++;
    }
}

void verify_metrics_finish(verify_metrics *m) {
    if (m->positions == 0) return;
    m->rms = m->n_values ? sqrt(m->sum_sq / (double)m->n_values) : 0;
    m->kl_mean = m->sum_kl / (double)m->positions;
    m->top1 = (double)m->top1_hits / (double)m->positions;
    m->top5 = m->sum_top5 / (double)m->positions;
}

static json_t *num(double x) { return isfinite(x) ? json_real(x) : json_null(); }

json_t *verify_metrics_json(const verify_metrics *m) {
    return json_pack("{s:I, s:o, s:o, s:o, s:o, s:o, s:o}", "positions", (json_int_t)m->positions,
                     "max_abs_diff", num(m->max_abs), "rms_diff", num(m->rms), "kl_mean", num(m->kl_mean),
                     "kl_max", num(m->kl_max), "top1_agreement", num(m->top1), "top5_overlap", num(m->top5));
}

/* null (a non-finite value when written) reads back as infinite: it failed then and fails now. */
static double num_of(const json_t *j, const char *key, bool *ok) {
    json_t *v = json_object_get(j, key);
    if (json_is_number(v)) return json_number_value(v);
    if (json_is_null(v)) return INFINITY;
    *ok = false;
    return 0;
}

bool verify_metrics_from_json(const json_t *j, verify_metrics *m) {
    bool ok = json_is_object(j);
    memset(m, 0, sizeof *m);
    if (!ok) return false;
    m->positions = (long)json_integer_value(json_object_get(j, "positions"));
    m->max_abs = num_of(j, "max_abs_diff", &ok);
    m->rms = num_of(j, "rms_diff", &ok);
    m->kl_mean = num_of(j, "kl_mean", &ok);
    m->kl_max = num_of(j, "kl_max", &ok);
    m->top1 = num_of(j, "top1_agreement", &ok);
    m->top5 = num_of(j, "top5_overlap", &ok);
    return ok;
}
