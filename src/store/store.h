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
 * The public part (listing, removal, resolution, hashing) is declared in sipp.h; this header has
 * what the store's own files and tests share.
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

#include "sipp.h"
#include "store/paths.h"
#include "store/source.h"
#include "util/sha256.h"

#define SIPP_STORE_PARTIAL_DIR "partial"
#define SIPP_STORE_PART_EXT ".part"
#define SIPP_STORE_META_EXT ".json"

/* Creates the store directory and its partial/ directory when missing. */
sipp_status sipp_store_ensure(const char *dir, char *errbuf);

/* A model in the store: from NAME.json, else a bare NAME.gguf. SIPP_ERR_NOT_FOUND when neither.
 * Free with sipp_store_model_clear. */
sipp_status sipp_store_lookup(const char *dir, const char *name, sipp_store_model *out, char *errbuf);

/* Writes NAME.json (atomically: a temporary file renamed into place). */
sipp_status sipp_store_meta_write(const char *dir, const sipp_store_model *m, char *errbuf);

void sipp_store_model_clear(sipp_store_model *m);

/* Writes len bytes to path atomically: a temporary file beside it, fsync'ed and renamed over it. */
sipp_status sipp_store_write_atomic(const char *path, const char *data, size_t len, char *errbuf);

/* mkdir -p. */
sipp_status sipp_store_mkdirs(const char *dir, char *errbuf);

/* The current time as "YYYY-MM-DDTHH:MM:SSZ". */
void sipp_store_now(char out[SIPP_STORE_TIME_MAX]);

#endif
