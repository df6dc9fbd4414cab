/*
 * whisper_file.h: a whisper.cpp model file (its own ggml format, not GGUF), read without loading it.
 *
 * The format, as whisper.cpp's whisper_model_load reads it, all integers little-endian int32:
 *   magic 0x67676d6c ("lmgg" on disk), the hyperparameters (whisper_hparams, in this order),
 *   the mel filters (n_mel, n_fft, then n_mel * n_fft floats),
 *   the vocabulary (n_vocab, then per token its byte length and bytes),
 *   the tensors until the end of the file (n_dims, name length, ggml type, n_dims sizes, the name, the data).
 *
 * Every length in it is a claim: the readers here measure it against what is left of the file before
 * they skip or read anything, and allocate nothing a claim sizes. The store checks a download with
 * sipp_whisper_file_check; the transcriber's estimate reads only the hyperparameters.
 */
#ifndef SIPP_STORE_WHISPER_FILE_H
#define SIPP_STORE_WHISPER_FILE_H

#include <stdbool.h>
#include <stdint.h>

#include "sipp.h"

#define SIPP_WHISPER_MAGIC 0x67676d6cu
#define SIPP_WHISPER_MAGIC_BYTES "lmgg" /* the magic as the file's first four bytes */

/* The header's hyperparameters, in the file's order after the magic. */
typedef struct sipp_whisper_hparams {
    int32_t n_vocab, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer;
    int32_t n_text_ctx, n_text_state, n_text_head, n_text_layer, n_mels, ftype;
} sipp_whisper_hparams;

/* The magic and the hyperparameters (each size positive). SIPP_ERR_NOT_FOUND when the file cannot be
 * opened, SIPP_ERR_MODEL (naming path) when it is not a whisper.cpp model. *file_bytes: its size. */
sipp_status sipp_whisper_header_read(const char *path, sipp_whisper_hparams *h, uint64_t *file_bytes,
                                     char *errbuf);

/* The whole file: the header, then every section's claimed length against the bytes left, every
 * tensor's dimensions and ggml type, and its data inside the file (a truncated download fails here).
 * *n_tensors (may be NULL): how many tensors it holds. */
sipp_status sipp_whisper_file_check(const char *path, sipp_whisper_hparams *h, int *n_tensors, char *errbuf);

#endif
