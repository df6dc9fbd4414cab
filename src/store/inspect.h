/*
 * inspect.h: what a GGUF model is, read from its header without loading any weights.
 */
#ifndef SIPP_MODEL_INSPECT_H
#define SIPP_MODEL_INSPECT_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/source.h"
#include "sipp.h"

#define SIPP_GGUF_MAX_TYPES 48 /* distinct tensor types listed (ggml has fewer) */

typedef struct sipp_gguf_type_count {
    char type[16]; /* ggml's name: "f32", "q8_0", "q4_K", ... */
    int64_t n_tensors;
    uint64_t n_params; /* elements in tensors of this type */
    uint64_t bytes;
} sipp_gguf_type_count;

typedef struct sipp_gguf_info {
    char path[PATH_MAX];   /* the file read: the one given, or shard 1 of its split set */
    char architecture[64]; /* general.architecture */
    char name[128];        /* general.name; "" when absent */
    char file_type[32];    /* general.file_type by name ("Q4_K_M"); "" when absent */
    uint32_t gguf_version;
    int n_files;        /* 1, or the shard count of a split set */
    uint64_t file_size; /* bytes of all files */
    uint64_t n_params;  /* elements of all tensors */
    int64_t n_tensors;
    /* From the "<arch>.*" keys; -1 when the model does not say. */
    int64_t n_ctx_train;
    int64_t n_embd;
    int64_t n_layer;
    int64_t n_head;
    int64_t n_head_kv;
    int64_t n_ff;
    int64_t n_vocab;    /* tokens in tokenizer.ggml.tokens, else <arch>.vocab_size */
    char pooling[8];    /* none, mean, cls, last, rank; "" when absent */
    char tokenizer[32]; /* tokenizer.ggml.model: llama, gpt2, bert, ...; "" when absent */
    bool has_chat_template;
    int n_types;
    sipp_gguf_type_count types[SIPP_GGUF_MAX_TYPES]; /* most tensors first */
} sipp_gguf_info;

/* Reads the header of a GGUF file, and of the other shards when it is shard 1 of a split set (a
 * later shard is read as its set, from shard 1). SIPP_ERR_MODEL when it is not a GGUF model or is
 * truncated, with a message naming the file. */
sipp_status sipp_gguf_inspect(const char *path, sipp_gguf_info *info, char *errbuf);

/* Checks one file: 'GGUF' magic, a readable header, and tensor data that fits in the file. */
sipp_status sipp_gguf_check(const char *path, char *errbuf);

#endif
