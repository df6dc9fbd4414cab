/*
 * store_browser.c: the model store as the browser runtime has it, that is none.
 *
 * The native store (src/store) keeps pulled models under a data directory and indexes them with
 * jansson; a page has no such directory. Its models arrive as files the JavaScript package mounts
 * (a download kept in the origin's private file system, a File or a Blob), so a MODEL argument
 * is a path and nothing else. This file replaces src/store in `make web` and only there.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "sipp.h"
#include "util/util.h"

sipp_status sipp_store_resolve(const char *name_or_path, char *path_out, size_t cap, char *errbuf) {
    if (!name_or_path || !*name_or_path)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "no model given");
    struct stat st;
    if (stat(name_or_path, &st) != 0)
        return sipp_fail(
            errbuf, errno == ENOENT ? SIPP_ERR_NOT_FOUND : SIPP_ERR_IO,
            "model '%s': %s (the browser runtime has no model store; give a URL, a File or a Blob)",
            name_or_path, strerror(errno));
    if (strlen(name_or_path) >= cap)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "model path '%s' is too long", name_or_path);
    memcpy(path_out, name_or_path, strlen(name_or_path) + 1);
    return SIPP_OK;
}
