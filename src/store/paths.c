/*
 * paths.c: where the model store and the user's catalog live (SIPP_MODELS_DIR, else the XDG data
 * directory), and bounded path formatting. The store and the catalog both need these; keeping them
 * here, below both, is what lets store.c use the catalog without the catalog using store.c.
 */
#include "store/paths.h"

#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/util.h"

#define STORE_SUBDIR "sipp/models"
#define XDG_DEFAULT_SUBDIR ".local/share"
#define USER_CATALOG_FILE "catalog.json"

bool sipp_pathf(char *out, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, cap, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < cap) return true;
    if (cap) out[0] = '\0';
    return false;
}

sipp_status sipp_store_dir(char *out, size_t cap, char *errbuf) {
    const char *env = getenv("SIPP_MODELS_DIR");
    int n;
    if (env && *env) {
        n = snprintf(out, cap, "%s", env);
    } else {
        /* XDG: a relative XDG_DATA_HOME is invalid and must be ignored */
        const char *xdg = getenv("XDG_DATA_HOME");
        if (xdg && xdg[0] == '/') {
            n = snprintf(out, cap, "%s/%s", xdg, STORE_SUBDIR);
        } else {
            const char *home = getenv("HOME");
            if (!home || !*home) {
                struct passwd *pw = getpwuid(getuid());
                home = pw ? pw->pw_dir : NULL;
            }
            if (!home || !*home)
                return sipp_fail(errbuf, SIPP_ERR_NOT_FOUND,
                                 "no model store: HOME is not set; set SIPP_MODELS_DIR to a directory");
            n = snprintf(out, cap, "%s/%s/%s", home, XDG_DEFAULT_SUBDIR, STORE_SUBDIR);
        }
    }
    if (n < 0 || (size_t)n >= cap)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "the model store path is too long");
    /* "dir/" and "dir" are one store */
    while (n > 1 && out[n - 1] == '/')
        out[--n] = '\0';
    return SIPP_OK;
}

sipp_status sipp_store_user_catalog(char *out, size_t cap, char *errbuf) {
    char dir[PATH_MAX];
    sipp_status s = sipp_store_dir(dir, sizeof dir, errbuf);
    if (s != SIPP_OK) return s;
    char *slash = strrchr(dir, '/');
    int n;
    if (!slash)
        n = snprintf(out, cap, "%s", USER_CATALOG_FILE);
    else if (slash == dir)
        n = snprintf(out, cap, "/%s", USER_CATALOG_FILE);
    else
        n = snprintf(out, cap, "%.*s/%s", (int)(slash - dir), dir, USER_CATALOG_FILE);
    if (n < 0 || (size_t)n >= cap)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "the user catalog path is too long");
    return SIPP_OK;
}
