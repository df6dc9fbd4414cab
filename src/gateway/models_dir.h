/*
 * models_dir.h: the gateway's rules for the models in a models directory, beyond the store's listing
 * (models_dir.c). Depends on nothing else in the gateway.
 */
#ifndef SIPP_GATEWAY_MODELS_DIR_H
#define SIPP_GATEWAY_MODELS_DIR_H

#include <stdbool.h>

#include "sipp.h"

/* Whether model m, listed in dir, may be served: false, after a log line, when one of its files is a
 * symbolic link to a file outside dir and follow_symlinks ([server] models_follow_symlinks) is off. */
bool gw_models_dir_allows(const char *dir, const sipp_store_model *m, bool follow_symlinks);
/* Logs each entry of dir that is passed over (sipp_store_list_skipped) with why: once per entry and
 * reason for the life of the process, so a rescan repeats none. */
void gw_models_dir_report(const char *dir);

#endif
