/*
 * sidecar.c: finding the draft model published beside a model (sipp_store_find_draft), and its
 * multimodal projector (sipp_store_find_mmproj).
 *
 * Models increasingly ship with a small draft (or an MTP head) for speculative decoding, in the same
 * repository or directory, named after the model with a marker. A file of the model's directory is
 * its draft when its name, split into parts at '-', '_' and '.', holds a "draft" or "mtp" part and
 * the other parts are the model's name parts in order: "m-draft.gguf", "m.mtp.gguf" and
 * "m-draft-q4_0.gguf" beside "m-q4_0.gguf". Candidates are taken in name order, so the answer does not
 * depend on the order of the directory. A model in the store by a catalog name also gets its
 * catalog entry's "draft" (another catalog name), when that one is pulled.
 *
 * Nothing here loads anything: the store and `sipp models info` report the sidecar and sipp
 * suggests it; only --draft auto (development) or an explicit path uses one.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "store/catalog.h"
#include "store/paths.h"
#include "store/source.h"
#include "util/util.h"

#define GGUF_EXT ".gguf"
#define NAME_PARTS_MAX 32

static const char *const MARKERS[] = {"draft", "mtp"};

static bool is_marker(const char *part) {
    for (size_t i = 0; i < sizeof MARKERS / sizeof *MARKERS; i++)
        if (strcasecmp(part, MARKERS[i]) == 0) return true;
    return false;
}

/* Splits a file name without its .gguf into parts (in buf); returns the count, -1 when not .gguf. */
static int name_parts(const char *file, char *buf, size_t cap, char **parts) {
    size_t n = strlen(file), ext = strlen(GGUF_EXT);
    if (n <= ext || strcasecmp(file + n - ext, GGUF_EXT) != 0 || n - ext >= cap) return -1;
    memcpy(buf, file, n - ext);
    buf[n - ext] = 0;
    int k = 0;
    for (char *save = NULL, *p = strtok_r(buf, "-_.", &save); p && k < NAME_PARTS_MAX;
         p = strtok_r(NULL, "-_.", &save))
        parts[k++] = p;
    return k;
}

/* Whether candidate is a draft of model: a marker among its parts, the others the model's parts. */
static bool is_sidecar(const char *model, const char *candidate) {
    char mb[SIPP_PATH_MAX], cb[SIPP_PATH_MAX];
    char *mp[NAME_PARTS_MAX], *cp[NAME_PARTS_MAX];
    int nm = name_parts(model, mb, sizeof mb, mp), nc = name_parts(candidate, cb, sizeof cb, cp);
    if (nm <= 0 || nc <= 0 || strcmp(model, candidate) == 0) return false;
    int i = 0, markers = 0;
    for (int j = 0; j < nc; j++) {
        if (is_marker(cp[j]) && !(i < nm && strcasecmp(cp[j], mp[i]) == 0)) {
            markers++;
            continue;
        }
        if (i >= nm || strcasecmp(cp[j], mp[i]) != 0) return false;
        i++;
    }
    return markers > 0 && i == nm;
}

static int compare_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The first file of dir, in name order, that is a sidecar of model; "" when none. */
static void find_by_name(const char *dir, const char *model, char *out, size_t cap) {
    *out = 0;
    DIR *d = opendir(dir);
    if (!d) return;
    char **names = NULL;
    size_t n = 0, room = 0;
    for (struct dirent *de; (de = readdir(d));) {
        if (!is_sidecar(model, de->d_name)) continue;
        if (n == room) {
            room = room ? room * 2 : 8;
            char **g = realloc(names, room * sizeof *g);
            if (!g) break;
            names = g;
        }
        if (!(names[n] = strdup(de->d_name))) break;
        n++;
    }
    closedir(d);
    if (n) {
        qsort(names, n, sizeof *names, compare_names);
        int w = snprintf(out, cap, "%s/%s", dir, names[0]);
        if (w < 0 || (size_t)w >= cap) *out = 0; /* a path too long to load is no answer */
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

sipp_status sipp_store_find_draft(const char *model_path, const char *store_name, sipp_draft_sidecar *out,
                                  char *errbuf) {
    memset(out, 0, sizeof *out);
    if (!model_path || !*model_path) return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "no model given");
    char dir[SIPP_PATH_MAX];
    snprintf(dir, sizeof dir, "%s", model_path);
    char *slash = strrchr(dir, '/');
    const char *file = slash ? slash + 1 : model_path;
    if (slash)
        *slash = 0;
    else
        snprintf(dir, sizeof dir, ".");
    find_by_name(*dir ? dir : "/", file, out->path, sizeof out->path);
    if (*out->path) return SIPP_OK;

    if (store_name && *store_name) {
        sipp_catalog *cat = NULL;
        char err[SIPP_ERROR_SIZE];
        if (sipp_catalog_load(&cat, err) == SIPP_OK) {
            const sipp_catalog_entry *e = sipp_catalog_find(cat, store_name);
            if (e && *e->draft) {
                snprintf(out->catalog, sizeof out->catalog, "%s", e->draft);
                out->pulled = sipp_store_resolve(e->draft, out->path, sizeof out->path, err) == SIPP_OK;
                if (!out->pulled) *out->path = 0;
            }
        }
        sipp_catalog_free(cat);
        if (*out->catalog) return SIPP_OK;
    }
    return sipp_fail(errbuf, SIPP_ERR_NOT_FOUND,
                     "no draft model beside '%s' (a .gguf named like it with a 'draft' or 'mtp' part%s)",
                     model_path, store_name && *store_name ? ", or its catalog entry's \"draft\"" : "");
}

/* ---- the projector ------------------------------------------------------------------------------ */

#define MMPROJ_PREFIX "mmproj"
#define LISTED_MAX 512 /* the names quoted when several projectors are found */

static bool is_mmproj_name(const char *name) {
    size_t n = strlen(name), ext = strlen(GGUF_EXT);
    return strncasecmp(name, MMPROJ_PREFIX, strlen(MMPROJ_PREFIX)) == 0 && n > ext &&
           strcasecmp(name + n - ext, GGUF_EXT) == 0;
}

/* The name a projector named for a model has: mmproj-STEM.gguf, STEM the model file's name without
 * .gguf (or its split set's name). "" when it does not fit. */
static void named_for(const char *model_file, char *out, size_t cap) {
    char stem[SIPP_PATH_MAX];
    snprintf(stem, sizeof stem, "%s", model_file);
    sipp_split sp;
    size_t n = strlen(stem), ext = strlen(GGUF_EXT);
    if (sipp_split_parse(model_file, &sp))
        stem[sp.prefix_len] = 0;
    else if (n > ext && strcasecmp(stem + n - ext, GGUF_EXT) == 0)
        stem[n - ext] = 0;
    int w = snprintf(out, cap, "%s%s%s", SIPP_STORE_MMPROJ_PREFIX, stem, GGUF_EXT);
    if (w < 0 || (size_t)w >= cap) *out = 0;
}

/* Whether projector file name is mmproj-OTHER.gguf for another model of dir (OTHER.gguf, shard 1 of
 * an OTHER split set, or the store's OTHER.json): that model's, not a candidate for any other. */
static bool names_other_model(const char *dir, const char *name) {
    size_t plen = strlen(SIPP_STORE_MMPROJ_PREFIX), n = strlen(name), ext = strlen(GGUF_EXT);
    if (strncasecmp(name, SIPP_STORE_MMPROJ_PREFIX, plen) != 0 || n <= plen + ext) return false;
    const char *other = name + plen;
    int stem = (int)(n - plen - ext);
    char path[SIPP_PATH_MAX];
    if (sipp_pathf(path, sizeof path, "%s/%.*s" GGUF_EXT, dir, stem, other) && access(path, F_OK) == 0)
        return true;
    if (sipp_pathf(path, sizeof path, "%s/%.*s.json", dir, stem, other) && access(path, F_OK) == 0)
        return true;
    DIR *d = opendir(dir);
    sipp_split sp;
    bool found = false;
    for (struct dirent *de; d && !found && (de = readdir(d));)
        found = sipp_split_parse(de->d_name, &sp) && sp.index == 1 && sp.prefix_len == (size_t)stem &&
                strncmp(de->d_name, other, (size_t)stem) == 0;
    if (d) closedir(d);
    return found;
}

sipp_status sipp_store_find_mmproj(const char *model_path, char *out, size_t cap, char *errbuf) {
    if (cap) *out = 0;
    if (!model_path || !*model_path) return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "no model given");
    char dir[SIPP_PATH_MAX];
    snprintf(dir, sizeof dir, "%s", model_path);
    char *slash = strrchr(dir, '/');
    const char *file = slash ? model_path + (slash - dir) + 1 : model_path;
    if (slash)
        *slash = 0;
    else
        snprintf(dir, sizeof dir, ".");
    if (!*dir) snprintf(dir, sizeof dir, "/");
    char own[SIPP_PATH_MAX];
    named_for(file, own, sizeof own);
    DIR *d = opendir(dir);
    if (!d) return sipp_fail(errbuf, SIPP_ERR_NOT_FOUND, "cannot read the model's directory '%s'", dir);
    char first[SIPP_PATH_MAX] = "", listed[LISTED_MAX] = "";
    int n = 0;
    bool is_own = false;
    for (struct dirent *de; !is_own && (de = readdir(d));) {
        if (!is_mmproj_name(de->d_name)) continue;
        if (*own && strcmp(de->d_name, own) == 0) {
            snprintf(first, sizeof first, "%s", de->d_name);
            is_own = true;
            continue;
        }
        if (names_other_model(dir, de->d_name)) continue;
        if (n++ == 0 || strcmp(de->d_name, first) < 0) snprintf(first, sizeof first, "%s", de->d_name);
        size_t used = strlen(listed);
        snprintf(listed + used, sizeof listed - used, "%s%s", used ? ", " : "", de->d_name);
    }
    closedir(d);
    if (!is_own && n == 0)
        return sipp_fail(errbuf, SIPP_ERR_NOT_FOUND,
                         "no projector (mmproj*.gguf) beside the model in '%s'; give the projector's path",
                         dir);
    if (!is_own && n > 1)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                         "%d projectors beside the model in '%s' (%s); give the path of the one to use", n,
                         dir, listed);
    int w = snprintf(out, cap, "%s/%s", dir, first);
    if (w < 0 || (size_t)w >= cap)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "the projector's path is too long");
    return SIPP_OK;
}
