/*
 * plan.c: what sipp-synth's writers call (sipp-synth.c for a text model, projector.c for a projector,
 * tts_pair.c and tts_qwen3.c for the speech pairs): adding a tensor to the plan (and, for the speech
 * pairs, the named kinds of tensor they are built from), and reporting a problem. Apart from all, so
 * that no writer calls another back.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "synth.h"

void vreport(const char *fmt, va_list ap) {
    fputs(PROG ": ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void report(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vreport(fmt, ap);
    va_end(ap);
}

struct tensor_spec *plan_add_nd(struct plan *p, const char *name, int n_dims, const int64_t ne[4],
                                enum ggml_type type, float std) {
    struct tensor_spec *s = &p->t[p->n++];
    snprintf(s->name, sizeof(s->name), "%s", name);
    s->n_dims = n_dims;
    s->ne0 = ne[0];
    s->ne1 = n_dims > 1 ? ne[1] : 1;
    s->ne2 = n_dims > 2 ? ne[2] : 1;
    s->ne3 = n_dims > 3 ? ne[3] : 1;
    s->type = type;
    s->std = std;
    return s;
}

/* ---- the speech pairs' tensors (tts_pair.c, tts_qwen3.c) ---------------------------------------- */

struct tensor_spec *plan_addf(struct plan *p, enum ggml_type type, int n_dims, const int64_t ne[4], float std,
                              const char *fmt, ...) {
    char name[GGML_MAX_NAME];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    return plan_add_nd(p, name, n_dims, ne, type, std);
}

void plan_weight(struct plan *p, int n_dims, const int64_t ne[4], const char *name) {
    int64_t fan_in = 1;
    for (int k = 0; k < n_dims - 1; k++)
        fan_in *= ne[k];
    plan_addf(p, GGML_TYPE_F32, n_dims, ne, 1.0f / sqrtf((float)fan_in), "%s", name);
}

void plan_constant(struct plan *p, int64_t n, float value, const char *fmt, ...) {
    char name[GGML_MAX_NAME];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    struct tensor_spec *s = plan_add_nd(p, name, 1, (const int64_t[4]){n, 1, 1, 1}, GGML_TYPE_F32, 0.0f);
    s->zero = value == 0.0f;
    s->value = value;
    s->has_value = value != 0.0f;
}

void plan_linear(struct plan *p, const char *prefix, int64_t n_in, int64_t n_out, bool bias) {
    char name[GGML_MAX_NAME];
    snprintf(name, sizeof name, "%s.weight", prefix);
    plan_weight(p, 2, (const int64_t[4]){n_in, n_out, 1, 1}, name);
    if (bias) plan_constant(p, n_out, 0.0f, "%s.bias", prefix);
}

void plan_norm(struct plan *p, const char *prefix, int64_t n) {
    plan_constant(p, n, 1.0f, "%s.weight", prefix);
    plan_constant(p, n, 0.0f, "%s.bias", prefix);
}

void plan_conv(struct plan *p, const char *prefix, int64_t k, int64_t a, int64_t b, int64_t n_bias) {
    char name[GGML_MAX_NAME];
    snprintf(name, sizeof name, "%s.weight", prefix);
    plan_weight(p, 3, (const int64_t[4]){k, a, b, 1}, name);
    if (n_bias) plan_constant(p, n_bias, 0.0f, "%s.bias", prefix);
}
