/*
 * save.h: a trained model quantized for shipping.
 */
#ifndef SIPP_TRAIN_SAVE_H
#define SIPP_TRAIN_SAVE_H

#include <stdbool.h>

#include "llama.h"

/* Whether --out-type TYPE is one sipp-train writes: f32 (as trained), f16, q8_0 or q4_0. */
bool model_out_type_known(const char *type);

/* Converts the f32 model at in to TYPE (f16, q8_0 or q4_0) at out with llama.cpp's quantizer and its
 * choices for that type (the norms stay f32), keeping every key-value. False after reporting why. */
bool model_quantize(const char *in, const char *out, const char *type);

#endif
