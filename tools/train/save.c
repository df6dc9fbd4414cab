/*
 * save.c: a trained model quantized for shipping, by llama.cpp's own quantizer (graph.c writes f32).
 */
#include "save.h"

#include <string.h>

#include "train.h"

static const struct {
    const char *name;
    enum llama_ftype ftype;
} OUT_TYPES[] = {
    {"f16", LLAMA_FTYPE_MOSTLY_F16},
    {"q8_0", LLAMA_FTYPE_MOSTLY_Q8_0},
    {"q4_0", LLAMA_FTYPE_MOSTLY_Q4_0},
};
#define N_OUT_TYPES (sizeof OUT_TYPES / sizeof OUT_TYPES[0])

bool model_out_type_known(const char *type) {
    if (strcmp(type, "f32") == 0) return true;
    for (size_t i = 0; i < N_OUT_TYPES; i++)
        if (strcmp(type, OUT_TYPES[i].name) == 0) return true;
    return false;
}

bool model_quantize(const char *in, const char *out, const char *type) {
    struct llama_model_quantize_params qp = llama_model_quantize_default_params();
    size_t i = 0;
    while (i < N_OUT_TYPES && strcmp(type, OUT_TYPES[i].name) != 0)
        i++;
    if (i == N_OUT_TYPES) {
        train_report("cannot write %s: '%s' is not a type sipp-train writes", out, type);
        return false;
    }
    qp.ftype = OUT_TYPES[i].ftype;
    if (llama_model_quantize(in, out, &qp) != 0) {
        train_report("cannot write %s: llama.cpp's quantizer failed on %s", out, in);
        return false;
    }
    return true;
}
