/*
 * paths.h: where the model store and the user's catalog live, and bounded path formatting.
 */
#ifndef SIPP_STORE_PATHS_H
#define SIPP_STORE_PATHS_H

#include <stdbool.h>
#include <stddef.h>

#include "sipp.h"

/* The user catalog: catalog.json in the store directory's parent. */
sipp_status sipp_store_user_catalog(char *out, size_t cap, char *errbuf);

/* snprintf for paths: false, and out set to "" (which names no file), when the result does not fit,
 * so that a truncated path can never name some other file. */
bool sipp_pathf(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
