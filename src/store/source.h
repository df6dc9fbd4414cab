/*
 * source.h: what `sipp pull` is given, made concrete: URLs (http, https, hf://), store names, and
 * the names of split GGUF sets.
 *
 * Pure string functions: no file system, no network. The one input from the environment is the
 * Hugging Face endpoint (SIPP_HF_ENDPOINT, else HF_ENDPOINT, else https://huggingface.co).
 */
#ifndef SIPP_MODEL_SOURCE_H
#define SIPP_MODEL_SOURCE_H

#include <stdbool.h>
#include <stddef.h>

#include "sipp.h"

#define SIPP_SPLIT_MAX 512 /* most shards a split set may have */
#define SIPP_HF_SCHEME "hf://"
#define SIPP_HF_DEFAULT_ENDPOINT "https://huggingface.co"
#define SIPP_HF_DEFAULT_REVISION "main"

/* A store name: 1..SIPP_NAME_MAX bytes of [A-Za-z0-9._-], starting with a letter or digit, and not
 * ending in ".gguf" or ".json" (those are the store's own file names). Such a name is also a safe
 * file name: no '/', no "..". */
bool sipp_name_valid(const char *name);

/* True when s starts with http://, https:// or hf:// (any case for the scheme). */
bool sipp_source_is_url(const char *s);

/* The download URL of a source: http(s) URLs as they are; hf://ORG/REPO[@REVISION]/PATH becomes
 * ENDPOINT/ORG/REPO/resolve/REVISION/PATH (REVISION defaults to main). SIPP_ERR_INVALID_ARGUMENT with
 * a message for anything else. */
sipp_status sipp_source_to_url(const char *source, char *url, size_t cap, char *errbuf);

/* The file name a URL points at: the last path segment, without query string or fragment.
 * Writes "" when there is none. */
void sipp_url_file_name(const char *url, char *out, size_t cap);

/* A split GGUF shard name "PREFIX-00002-of-00005.gguf": the shard's 1-based index, the shard count,
 * and the length of PREFIX. */
typedef struct sipp_split {
    int index;
    int count;
    size_t prefix_len;
} sipp_split;

/* Parses a file name (not a path) as a split shard. False when it is not one, or the numbers are
 * out of range (index not in 1..count, count above SIPP_SPLIT_MAX). */
bool sipp_split_parse(const char *file_name, sipp_split *out);

/* The store name a URL suggests: its file name without ".gguf" (or ".bin") and without a split suffix
 * ("Llama-3.2-1B-Q4_K_M.gguf" -> "Llama-3.2-1B-Q4_K_M", "m-00001-of-00003.gguf" -> "m").
 * SIPP_ERR_INVALID_ARGUMENT when that is not a valid name (the message suggests --name). */
sipp_status sipp_source_default_name(const char *url, char *name, size_t cap, char *errbuf);

/* The file name of shard `index` of `count` in the store: NAME.gguf for a single file (count 1),
 * else NAME-0000i-of-0000n.gguf (llama.cpp finds the other shards of a set by this pattern). */
void sipp_store_file_name(const char *name, int index, int count, char *out, size_t cap);

/* A whisper.cpp model (recipe whispercpp) is one file, stored as NAME.bin, the extension whisper.cpp
 * publishes its ggml models with. sipp_source_is_whisper_file: a URL whose file name ends in .bin, which
 * a pull without a catalog entry takes as such a model. */
#define SIPP_STORE_WHISPER_EXT ".bin"
bool sipp_source_is_whisper_file(const char *url);
void sipp_store_whisper_file_name(const char *name, char *out, size_t cap);

/* The store's file name of model name's projector: mmproj-NAME.gguf (sipp_store_find_mmproj takes it
 * for that model beside any other projector). */
#define SIPP_STORE_MMPROJ_PREFIX "mmproj-"
void sipp_store_mmproj_file_name(const char *name, char *out, size_t cap);

#endif
