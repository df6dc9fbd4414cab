/*
 * store.h: the local model store, and how a MODEL argument becomes a file.
 *
 * Layout of $SIPP_MODELS_DIR (default ${XDG_DATA_HOME:-~/.local/share}/sipp/models):
 *
 *   NAME.gguf                        a single-file model
 *   NAME-00001-of-00003.gguf ...     the shards of a split set (llama.cpp opens the others from the first)
 *   NAME.json                        metadata: source, per-file URL, size, mtime, sha256, pull time
 *   partial/FILE.part                a download in progress (resumable), never a model
 *   partial/FILE.part.json           what the .part is of: its URL and the server's ETag
 *   .sha256-cache.json               hashes of files outside the store, keyed by path, size and mtime
 *
 * and beside the store directory, catalog.json: the user's own catalog (see catalog.h).
 *
 * A model is in the store once its files are in place and NAME.json names them: a pull renames the
 * finished files into place first and writes the metadata last (both atomically), so a model that
 * is listed is complete. A bare NAME.gguf that someone copied in is listed too (without metadata).
 */
#ifndef SIPP_MODEL_STORE_H
#define SIPP_MODEL_STORE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/sha256.h"
#include "store/source.h"
#include "sipp.h"

#define SIPP_STORE_PARTIAL_DIR "partial"
#define SIPP_STORE_PART_EXT ".part"
#define SIPP_STORE_META_EXT ".json"
#define SIPP_STORE_TIME_MAX 32

typedef struct sipp_store_file {
    char file[SIPP_NAME_MAX + 32]; /* file name inside the store */
    char *url;                     /* where it was downloaded from; "" when unknown */
    uint64_t size;
    int64_t mtime_ns;             /* when the sha256 below was taken: it is valid while size and */
    char sha256[SIPP_SHA256_HEX]; /* mtime are unchanged; "" when not known */
} sipp_store_file;

typedef struct sipp_store_model {
    char name[SIPP_NAME_MAX + 1];
    char *source; /* what was pulled: a URL, hf://..., or a catalog name; "" if unknown */
    char pulled_at[SIPP_STORE_TIME_MAX]; /* UTC, ISO 8601; "" for a bare file */
    bool verified;                       /* every file matched a sha256 known before the download */
    bool managed;                        /* false for a bare NAME.gguf without metadata */
    int n_files;
    sipp_store_file *files;
    uint64_t size;       /* all files together */
    char path[PATH_MAX]; /* the file to load: the only file or shard 1 */
} sipp_store_model;

/* The store directory (not created). */
sipp_status sipp_store_dir(char *out, size_t cap, char *errbuf);

/* The user catalog: catalog.json in the store directory's parent. */
sipp_status sipp_store_user_catalog(char *out, size_t cap, char *errbuf);

/* Creates the store directory and its partial/ directory when missing. */
sipp_status sipp_store_ensure(const char *dir, char *errbuf);

/* A model in the store: from NAME.json, else a bare NAME.gguf. SIPP_ERR_NOT_FOUND when neither.
 * Free with sipp_store_model_clear. */
sipp_status sipp_store_lookup(const char *dir, const char *name, sipp_store_model *out, char *errbuf);

/* Writes NAME.json (atomically: a temporary file renamed into place). */
sipp_status sipp_store_meta_write(const char *dir, const sipp_store_model *m, char *errbuf);

void sipp_store_model_clear(sipp_store_model *m);

/* Every model in the store, sorted by name. *out is an array of *n models; free with
 * sipp_store_list_free. */
sipp_status sipp_store_list(const char *dir, sipp_store_model **out, size_t *n, char *errbuf);
void sipp_store_list_free(sipp_store_model *models, size_t n);

/* Removes a model's files, its metadata and any partial downloads of it. SIPP_ERR_NOT_FOUND when
 * the store has no such model. */
sipp_status sipp_store_remove(const char *dir, const char *name, char *errbuf);

/* What a MODEL argument names. A path that exists as a file is returned as it is. Otherwise a
 * store name gives the path of its GGUF file in the store (shard 1 for a split set). Otherwise
 * SIPP_ERR_NOT_FOUND with a message that says how to pull it (by name when the catalog knows it).
 * Anything else (a directory, a name with '/' that does not exist) is an error naming the input. */
sipp_status sipp_store_resolve(const char *name_or_path, char *path_out, size_t cap, char *errbuf);

/* The SHA-256 of a file, cached: from the store's metadata when the file is in the store, else from
 * the store's hash cache; computed (and cached) only when size or mtime changed. *cached tells
 * whether the value was computed now (false) or reused (true). */
sipp_status sipp_store_file_sha256(const char *path, char hex[SIPP_SHA256_HEX], bool *cached, char *errbuf);

/* Writes len bytes to path atomically: a temporary file beside it, fsync'ed and renamed over it. */
sipp_status sipp_store_write_atomic(const char *path, const char *data, size_t len, char *errbuf);

/* snprintf for paths: false, and out set to "" (which names no file), when the result does not fit,
 * so that a truncated path can never name some other file. */
bool sipp_pathf(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* mkdir -p. */
sipp_status sipp_store_mkdirs(const char *dir, char *errbuf);

/* A byte count for people: "807.7 MB" (decimal units, as Hugging Face shows sizes). */
void sipp_store_format_size(uint64_t bytes, char *out, size_t cap);

/* The current time as "YYYY-MM-DDTHH:MM:SSZ". */
void sipp_store_now(char out[SIPP_STORE_TIME_MAX]);

#endif
