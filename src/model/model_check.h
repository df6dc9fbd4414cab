/*
 * model_check.h: the hyperparameter check a model's header must pass before llama.cpp loads it.
 */
#ifndef SIPP_ENGINE_MODEL_CHECK_H
#define SIPP_ENGINE_MODEL_CHECK_H

#include "sipp.h"
#include "store/gguf_header.h"

/* llama.cpp's limits at the pinned commit (src/llama-hparams.h), which its loader asserts. */
#define SIPP_LLAMA_MAX_LAYERS 512
#define SIPP_LLAMA_MAX_EXPERTS 1024
/* ggml's TENSOR_ALIGNMENT: a CPU buffer made from the mapped file asserts this alignment. */
#define SIPP_GGML_TENSOR_ALIGNMENT 32

/* SIPP_OK, or SIPP_ERR_MODEL with a message naming the file and the key (or tensor) at fault and
 * what the value should be. Checks what llama.cpp's loader and ggml's ops would assert on instead of
 * reporting: a crash there cannot be caught. */
sipp_status sipp_model_check_hparams(const sipp_gguf_header *h, char *errbuf);

/* The vocabulary sipp needs to read prompts and print text: llama.cpp loads a model whose
 * tokenizer.ggml.model is "none" (or "no_vocab") without one, and its tokenizer then asserts. Checked
 * for vocabulary-only loads too. */
sipp_status sipp_model_check_vocab(const sipp_gguf_header *h, char *errbuf);

#endif
