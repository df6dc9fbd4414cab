/*
 * gguf_header.h: one GGUF file's header, opened without its weights, checked, and read by typed key.
 *
 * Every reader of a GGUF header in sipp goes through here: the engine's pre-load check, `sipp models
 * info`, the download check of `sipp pull`. Opening checks what a reader would otherwise trip on: the
 * file is a regular file, starts with 'GGUF', its header parses (gguf.h's own error becomes part of
 * the message), and the tensors' extent lies inside the file (a truncated download has a whole header).
 *
 * The getters are typed and strict about what they return, lenient about the stored width: an
 * unsigned key may be stored as any integer type (a negative value is an error), a float as f32 or
 * f64. Absent keys are SIPP_ERR_NOT_FOUND, keys of the wrong type SIPP_ERR_MODEL, each with a message
 * naming the file and the key. Callers that treat a key as optional test for SIPP_ERR_NOT_FOUND.
 */
#ifndef SIPP_STORE_GGUF_HEADER_H
#define SIPP_STORE_GGUF_HEADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sipp.h"

struct gguf_context;
typedef struct sipp_gguf_header sipp_gguf_header;

/* Opens path as GGUF (metadata and tensor descriptors only) and checks its tensors fit in the file.
 * On failure *out is NULL and errbuf names the file: SIPP_ERR_NOT_FOUND, SIPP_ERR_IO,
 * SIPP_ERR_INVALID_ARGUMENT (not a regular file) or SIPP_ERR_MODEL (not GGUF, corrupt, truncated). */
sipp_status sipp_gguf_header_open(const char *path, sipp_gguf_header **out, char *errbuf);
void sipp_gguf_header_close(sipp_gguf_header *h);

const char *sipp_gguf_header_path(const sipp_gguf_header *h);
uint64_t sipp_gguf_header_file_size(const sipp_gguf_header *h);
/* gguf.h's context, for tensor descriptors; owned by h. */
const struct gguf_context *sipp_gguf_header_ctx(const sipp_gguf_header *h);

/* The value of an integer key that must not be negative; an integer array gives its largest element
 * (per-layer values: the largest stands for them all) and *n_elems its length (1 for a scalar). */
sipp_status sipp_gguf_get_uint(const sipp_gguf_header *h, const char *key, uint64_t *out, size_t *n_elems,
                               char *errbuf);
/* An f32 or f64 key, as stored (NaN and infinities included: the caller judges them). */
sipp_status sipp_gguf_get_float(const sipp_gguf_header *h, const char *key, double *out, char *errbuf);
/* A string key; the string is owned by h. */
sipp_status sipp_gguf_get_str(const sipp_gguf_header *h, const char *key, const char **out, char *errbuf);
/* The length of an array key. */
sipp_status sipp_gguf_get_array_len(const sipp_gguf_header *h, const char *key, size_t *out, char *errbuf);

/* Conveniences for display: the value, or dflt when the key is absent or not of the type. */
int64_t sipp_gguf_int_or(const sipp_gguf_header *h, const char *key, int64_t dflt);
void sipp_gguf_str_or(const sipp_gguf_header *h, const char *key, char *out, size_t cap, const char *dflt);
bool sipp_gguf_bool_or(const sipp_gguf_header *h, const char *key, bool dflt);

#endif
