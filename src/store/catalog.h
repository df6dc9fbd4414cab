/*
 * catalog.h: the models sipp knows how to pull by name.
 *
 * Two JSON files with one format: the catalog shipped with sipp, and the user's own beside the
 * store (an entry there replaces a shipped entry of the same name). See catalog.c for the format and
 * where the shipped file is looked for.
 */
#ifndef SIPP_MODEL_CATALOG_H
#define SIPP_MODEL_CATALOG_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sipp.h"

typedef struct sipp_catalog_entry {
    char *name;
    char *description; /* "" when not given */
    char *url;         /* as written: hf://ORG/REPO/FILE.gguf or http(s)://...; a split set names shard 1 */
    char **sha256;     /* lowercase digests, one per file of the set; n_sha256 is 0 when unknown */
    size_t n_sha256;
    uint64_t size; /* bytes of all files together; 0 when unknown */
    char **labels; /* chat, reasoning, tool-calling, embeddings, reranking, vision, coding */
    size_t n_labels;
    char **backends; /* suggested backends, best first */
    size_t n_backends;
    int ctx_size;       /* suggested context size; 0 when not given */
    char *license;      /* "" when not given */
    const char *origin; /* the file it came from (borrowed from the catalog) */
} sipp_catalog_entry;

typedef struct sipp_catalog {
    sipp_catalog_entry *entries;
    size_t n;
    char shipped_path[PATH_MAX]; /* "" when no shipped catalog was found */
    char user_path[PATH_MAX];    /* where the user catalog is or would be */
    bool user_exists;
} sipp_catalog;

/* Loads the shipped catalog (when found) and the user catalog (when it exists). A file that exists
 * but is not a valid catalog is an error naming the file and the problem; a missing shipped catalog
 * is not (shipped_path stays ""). */
sipp_status sipp_catalog_load(sipp_catalog **out, char *errbuf);

/* An empty catalog, for tests and for parsing text. NULL when out of memory. */
sipp_catalog *sipp_catalog_new(void);

/* Parses a catalog text and adds its entries, replacing entries of the same name. `origin` names the
 * text in messages and must outlive the catalog. */
sipp_status sipp_catalog_parse(sipp_catalog *cat, const char *text, size_t len, const char *origin,
                               char *errbuf);

const sipp_catalog_entry *sipp_catalog_find(const sipp_catalog *cat, const char *name);

/* The entry whose URL (hf:// mapped to its download URL) equals url, or whose split set url is a
 * shard of. NULL when none. */
const sipp_catalog_entry *sipp_catalog_find_url(const sipp_catalog *cat, const char *url);

void sipp_catalog_free(sipp_catalog *cat);

/* Finds the shipped catalog: $SIPP_CATALOG, else next to the executable or library
 * (../../catalog/catalog.json from build/bin or build/lib, ../share/sipp/catalog.json from an install
 * prefix's bin or lib), else /usr/local/share/sipp and /usr/share/sipp. False when none exists;
 * out then holds the list of places looked at, for a message. */
bool sipp_catalog_find_shipped(char *out, size_t cap);

/* True for the labels a catalog entry may carry. */
bool sipp_catalog_label_valid(const char *label);

#endif
