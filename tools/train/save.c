/*
 * save.c: the q8_0 copy of a trained model, by llama.cpp's own quantizer (graph.c writes f32).
 */
#include "save.h"
#include "train.h"

bool model_quantize_q8_0(const char *in, const char *out) {
    struct llama_model_quantize_params qp = llama_model_quantize_default_params();
    qp.ftype = LLAMA_FTYPE_MOSTLY_Q8_0;
    if (llama_model_quantize(in, out, &qp) != 0) {
        train_report("cannot write %s: llama.cpp's quantizer failed on %s", out, in);
        return false;
    }
    return true;
}
