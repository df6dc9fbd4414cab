/*
 * save.h: the model sipp-train holds, written as an ordinary GGUF file (the output and checkpoints).
 */
#ifndef SIPP_TRAIN_SAVE_H
#define SIPP_TRAIN_SAVE_H

#include <stdbool.h>

#include "gguf.h"
#include "llama.h"

/* Writes the model's current weights to path under the key-values of src, the GGUF header the model
 * was loaded from; path appears complete or not at all. False after reporting why. */
bool model_save(const struct llama_model *model, const struct gguf_context *src, const char *path);

/* Quantizes the f32 model at in to q8_0 at out with llama.cpp's quantizer (every matrix q8_0, the
 * norms f32), keeping every key-value. False after reporting why. */
bool model_quantize_q8_0(const char *in, const char *out);

#endif
