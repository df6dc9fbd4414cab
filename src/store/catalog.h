/*
 * catalog.h: the models sipp knows how to pull by name.
 *
 * Two JSON files with one format: the catalog shipped with sipp, and the user's own beside the
 * store (an entry there replaces a shipped entry of the same name). See catalog.c for the format and
 * where the shipped file is looked for. Loading, finding and freeing are public (sipp.h).
 */
#ifndef SIPP_MODEL_CATALOG_H
#define SIPP_MODEL_CATALOG_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sipp.h"

/* An empty catalog, for tests and for parsing text. NULL when out of memory. */
sipp_catalog *sipp_catalog_new(void);

/* Parses a catalog text and adds its entries, replacing entries of the same name. `origin` names the
 * text in messages and must outlive the catalog. */
sipp_status sipp_catalog_parse(sipp_catalog *cat, const char *text, size_t len, const char *origin,
                               char *errbuf);

/* The entry whose URL (hf:// mapped to its download URL) equals url, or whose split set url is a
 * shard of. NULL when none. */
const sipp_catalog_entry *sipp_catalog_find_url(const sipp_catalog *cat, const char *url);

/* Finds the shipped catalog: $SIPP_CATALOG, else next to the executable or library
 * (../../catalog/catalog.json from build/bin or build/lib, ../share/sipp/catalog.json from an install
 * prefix's bin or lib), else /usr/local/share/sipp and /usr/share/sipp. False when none exists;
 * out then holds the list of places looked at, for a message. */
bool sipp_catalog_find_shipped(char *out, size_t cap);

/* The download URL of an entry's projector ("mmproj" as written: a URL, hf:// mapped, or a file
 * name taken in the directory of the model's URL). */
sipp_status sipp_catalog_mmproj_url(const sipp_catalog_entry *e, const char *mmproj, char *out, size_t cap,
                                    char *errbuf);

/* True for the labels a catalog entry may carry. */
bool sipp_catalog_label_valid(const char *label);

#endif
