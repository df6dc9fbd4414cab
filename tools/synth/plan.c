/*
 * plan.c: what both of sipp-synth's writers call (sipp-synth.c for a text model, projector.c for a
 * projector): adding a tensor to the plan, and reporting a problem. Apart from both, so that neither
 * writer calls the other back.
 */
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
