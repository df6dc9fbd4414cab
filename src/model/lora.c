/*
 * lora.c: a model's LoRA adapters (sipp_model_params.lora), loaded with the model for it, and their
 * default scales applied to a context of the model (model.h). The engine runs its own sets of
 * scales over the same adapters (src/engine/lora.c).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend/backend.h"
#include "llama.h"
#include "model/model.h"
#include "util/util.h"

static sipp_status load_one(sipp_model *m, size_t i, const sipp_lora_adapter *a, char *err) {
    struct stat st;
    if (!a->path || stat(a->path, &st) != 0 || !S_ISREG(st.st_mode))
        return sipp_fail(err, SIPP_ERR_NOT_FOUND, "LoRA adapter %zu: '%s' is not a file", i,
                         a->path ? a->path : "(null)");
    char why[SIPP_ERROR_SIZE] = "";
    sipp_log_capture(why);
    sipp_buffers_capture(&m->mem); /* the adapter's buffers are the model's weights */
    m->lora.adapters[i] = llama_adapter_lora_init(m->lm, a->path);
    sipp_buffers_capture(NULL);
    sipp_log_capture(NULL);
    if (!m->lora.adapters[i])
        return sipp_fail(err, SIPP_ERR_MODEL, "LoRA adapter '%s' does not fit the model '%s': %s", a->path,
                         m->path, *why ? why : "llama.cpp could not load it (is it a GGUF adapter?)");
    if (!(m->lora.paths[i] = strdup(a->path))) return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    m->lora.scales[i] = a->scale;
    return SIPP_OK;
}

sipp_status sipp_model_lora_load(sipp_model *m, const sipp_lora_adapter *list, size_t n, char *err) {
    if (n == 0) return SIPP_OK;
    sipp_model_lora *l = &m->lora;
    l->adapters = calloc(n, sizeof *l->adapters);
    l->paths = calloc(n, sizeof *l->paths);
    l->scales = calloc(n, sizeof *l->scales);
    if (!l->adapters || !l->paths || !l->scales) return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    l->n = n;
    for (size_t i = 0; i < n; i++) {
        sipp_status st = load_one(m, i, &list[i], err);
        if (st != SIPP_OK) return st;
    }
    return SIPP_OK;
}

void sipp_model_lora_free(sipp_model *m) {
    sipp_model_lora *l = &m->lora;
    for (size_t i = 0; i < l->n; i++) {
        if (l->adapters && l->adapters[i]) llama_adapter_lora_free(l->adapters[i]);
        if (l->paths) free(l->paths[i]);
    }
    free(l->adapters);
    free(l->paths);
    free(l->scales);
    memset(l, 0, sizeof *l);
}

void sipp_model_lora_apply(const sipp_model *m, struct llama_context *ctx, const float *scales) {
    const sipp_model_lora *l = &m->lora;
    if (l->n == 0 || !ctx) return;
    if (!scales) scales = l->scales;
    struct llama_adapter_lora *on[l->n];
    float at[l->n];
    size_t k = 0;
    for (size_t i = 0; i < l->n; i++) {
        if (scales[i] == 0.0f) continue; /* an adapter at 0 adds nothing: left out of the graph */
        on[k] = l->adapters[i];
        at[k++] = scales[i];
    }
    llama_set_adapters_lora(ctx, on, k, at);
}
