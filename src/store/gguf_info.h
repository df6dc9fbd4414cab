/*
 * gguf_info.h: what a GGUF model is, read from its header without loading any weights
 * (sipp_gguf_inspect in sipp.h), and the check a pull makes of each downloaded file.
 */
#ifndef SIPP_STORE_GGUF_INFO_H
#define SIPP_STORE_GGUF_INFO_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "sipp.h"
#include "store/source.h"

/* What a model's tokenizer is, as a verify manifest records it: hashes of its vocabulary (the token
 * strings in id order, each followed by a NUL so that "ab","c" and "a","bc" differ), of its BPE
 * merges and of its chat template. Two files with equal hashes tokenize and render chats the same
 * way. Hashes are "" and counts 0 where the model has no such key; ids -1. */
typedef struct sipp_gguf_tokenizer {
    size_t n_tokens;
    char tokens_sha256[SIPP_SHA256_HEX];
    size_t n_merges;
    char merges_sha256[SIPP_SHA256_HEX];
    int64_t bos_id, eos_id;
    char chat_template_sha256[SIPP_SHA256_HEX];
} sipp_gguf_tokenizer;

/* Reads the tokenizer's keys from a GGUF header (one file; the metadata of a split set is in shard 1). */
sipp_status sipp_gguf_tokenizer_read(const char *path, sipp_gguf_tokenizer *out, char *errbuf);

/* Checks one file: 'GGUF' magic, a readable header, and tensor data that fits in the file. */
sipp_status sipp_gguf_check(const char *path, char *errbuf);

#endif
