/*
 * lora.c: an engine's LoRA scales over its model's adapters (lora.h says how requests of different sets
 * are kept apart).
 */
#include "engine/lora.h"

#include <stdlib.h>
#include <string.h>

#include "engine/state.h"
#include "util/util.h"

#define FNV_OFFSET 1469598103934665603ull
#define FNV_PRIME 1099511628211ull

static uint64_t signature(const float *scales, size_t n) {
    uint64_t h = FNV_OFFSET;
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        float v = scales[i] == 0.0f ? 0.0f : scales[i]; /* -0 is 0 */
        memcpy(&bits, &v, sizeof bits);
        h = (h ^ bits) * FNV_PRIME;
    }
    return h;
}

sipp_status sipp_lora_open(sipp_engine *e, char *err) {
    size_t n = e->model->lora.n;
    if (n == 0) return SIPP_OK;
    sipp_lora_state *l = &e->lora;
    l->defaults = calloc(n, sizeof *l->defaults);
    l->running = calloc(n, sizeof *l->running);
    l->applied = calloc(n, sizeof *l->applied);
    if (!l->defaults || !l->running || !l->applied)
        return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    l->n = n;
    memcpy(l->defaults, e->model->lora.scales, n * sizeof *l->defaults);
    memcpy(l->running, l->defaults, n * sizeof *l->running);
    l->running_sig = signature(l->running, n);
    return SIPP_OK;
}

void sipp_lora_close(sipp_engine *e) {
    sipp_lora_state *l = &e->lora;
    free(l->defaults);
    free(l->running);
    free(l->applied);
    memset(l, 0, sizeof *l);
}

sipp_status sipp_lora_of_request(sipp_engine *e, const sipp_request_params *p, float **scales, uint64_t *sig,
                                 char *err) {
    sipp_lora_state *l = &e->lora;
    *scales = NULL;
    *sig = 0;
    if (p->n_lora > 0 && l->n == 0)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                         "'lora' picks adapters, but this model has none loaded");
    if (l->n == 0) return SIPP_OK;
    float *s = calloc(l->n, sizeof *s);
    if (!s) return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    for (size_t k = 0; p->lora && k < p->n_lora; k++) {
        if (p->lora[k].id < 0 || (size_t)p->lora[k].id >= l->n) {
            free(s);
            return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "'lora[%zu].id' is %d; the adapters are 0..%zu",
                             k, p->lora[k].id, l->n - 1);
        }
        s[p->lora[k].id] = p->lora[k].scale;
    }
    if (p->n_lora == 0) {
        sipp_engine_lock(e);
        memcpy(s, l->defaults, l->n * sizeof *s);
        sipp_engine_unlock(e);
    }
    *scales = s;
    *sig = signature(s, l->n);
    return SIPP_OK;
}

bool sipp_lora_admit(sipp_engine *e, const float *scales, uint64_t sig, bool busy) {
    SIPP_ASSERT_ENGINE_LOCKED(e);
    sipp_lora_state *l = &e->lora;
    if (l->n == 0) return true;
    if (busy) return sig == l->running_sig;
    memcpy(l->running, scales, l->n * sizeof *l->running);
    l->running_sig = sig;
    return true;
}

void sipp_lora_apply(sipp_engine *e) {
    sipp_lora_state *l = &e->lora;
    if (l->n == 0 || (l->applied_set && memcmp(l->applied, l->running, l->n * sizeof *l->applied) == 0))
        return;
    sipp_model_lora_apply(e->model, e->ctx, l->running);
    memcpy(l->applied, l->running, l->n * sizeof *l->applied);
    l->applied_set = true;
}

size_t sipp_engine_lora_count(const sipp_engine *e) { return e ? e->lora.n : 0; }

sipp_status sipp_engine_lora_get(const sipp_engine *e, size_t id, const char **path, float *scale) {
    if (!e || id >= e->lora.n) return SIPP_ERR_INVALID_ARGUMENT;
    sipp_engine *m = (sipp_engine *)e; /* the lock only */
    sipp_engine_lock(m);
    if (path) *path = e->model->lora.paths[id];
    if (scale) *scale = e->lora.defaults[id];
    sipp_engine_unlock(m);
    return SIPP_OK;
}

/* Whether r applies adapter id: its own scales, or the defaults when it took none. */
static bool request_applies(const sipp_engine *e, const sipp_request *r, size_t id) {
    return (r->lora_scales ? r->lora_scales[id] : e->lora.defaults[id]) != 0.0f;
}

sipp_status sipp_engine_lora_use(sipp_engine *e, size_t id, int *running, int *waiting) {
    if (!e || id >= e->lora.n) return SIPP_ERR_INVALID_ARGUMENT;
    int run = 0, wait = 0;
    sipp_engine_lock(e);
    for (int i = 0; i < e->params.parallel; i++)
        run += e->slots[i].req && request_applies(e, e->slots[i].req, id);
    for (const sipp_request *r = e->queue_head; r; r = r->next)
        wait += request_applies(e, r, id);
    sipp_engine_unlock(e);
    if (running) *running = run;
    if (waiting) *waiting = wait;
    return SIPP_OK;
}

sipp_status sipp_engine_lora_set(sipp_engine *e, const sipp_lora_scale *scales, size_t n) {
    if (!e) return SIPP_ERR_INVALID_ARGUMENT;
    for (size_t k = 0; k < n; k++)
        if (scales[k].id < 0 || (size_t)scales[k].id >= e->lora.n) return SIPP_ERR_INVALID_ARGUMENT;
    sipp_engine_lock(e);
    for (size_t i = 0; i < e->lora.n; i++)
        e->lora.defaults[i] = 0.0f;
    for (size_t k = 0; k < n; k++)
        e->lora.defaults[scales[k].id] = scales[k].scale;
    sipp_engine_unlock(e);
    return SIPP_OK;
}
