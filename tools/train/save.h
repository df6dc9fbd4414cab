/*
 * save.h: a trained model quantized for shipping.
 */
#ifndef SIPP_TRAIN_SAVE_H
#define SIPP_TRAIN_SAVE_H

#include <stdbool.h>

#include "llama.h"

/* Quantizes the f32 model at in to q8_0 at out with llama.cpp's quantizer (every matrix q8_0, the
 * norms f32), keeping every key-value. False after reporting why. */
bool model_quantize_q8_0(const char *in, const char *out);

#endif
