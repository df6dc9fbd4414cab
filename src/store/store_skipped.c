/*
 * store_skipped.c: the entries of a model directory that sipp_store_list passes over, and why.
 *
 * The listing takes NAME.json and NAME.gguf (or shard 1 of a split set) whose NAME is a store name,
 * and a regular file; anything else is quietly not a model. A person who dropped "My Model.gguf" or
 * a FIFO into the directory deserves to be told, once, rather than find the model missing: this walk
 * names each entry that looks like a model (a .gguf file, or a link named so), or is not a plain file
 * at all, and is not part of a listed model. Directories (partial/), hidden entries, projector files
 * and files of other types (a model's metadata that does not parse included: `sipp models info`
 * reports that) are the directory's own business and pass silently.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "sipp.h"
#include "store/source.h"
#include "store/store.h"
#include "util/util.h"

#define GGUF_EXT ".gguf"
#define PROJECTOR_PREFIX "mmproj" /* how a projector's file name starts, as the listing sees it */
#define WHY_SIZE 512

static bool has_ext(const char *fn, const char *ext) {
    size_t n = strlen(fn), e = strlen(ext);
    return n > e && strcasecmp(fn + n - e, ext) == 0;
}

/* Whether fn is a file of a listed model: one of its files, its projector or its metadata. */
static bool listed_file(const sipp_store_model *models, size_t n, const char *fn) {
    for (size_t i = 0; i < n; i++) {
        const sipp_store_model *m = &models[i];
        for (int k = 0; k < m->n_files; k++)
            if (strcmp(m->files[k].file, fn) == 0) return true;
        if (m->mmproj && strcmp(m->mmproj->file, fn) == 0) return true;
        size_t nl = strlen(m->name);
        if (m->managed && strncmp(fn, m->name, nl) == 0 && strcmp(fn + nl, SIPP_STORE_META_EXT) == 0)
            return true;
    }
    return false;
}

static const char *kind_of(mode_t mode) {
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    return "not a regular file";
}

/* Why a regular file named like a model (fn ends in .gguf) is not one. */
static void why_file(const char *fn, char *why, size_t cap) {
    size_t stem = strlen(fn) - strlen(GGUF_EXT);
    sipp_split sp;
    if (sipp_split_parse(fn, &sp)) {
        if (sp.index != 1)
            snprintf(why, cap,
                     "shard %d of %d of a split set whose shard 1 is not here; put all %d shards beside it",
                     sp.index, sp.count, sp.count);
        stem = sp.prefix_len;
    }
    if (*why) return;
    char name[SIPP_NAME_MAX + 2];
    if (stem > SIPP_NAME_MAX) {
        snprintf(why, cap, "its name is longer than %d bytes; rename the file", SIPP_NAME_MAX);
        return;
    }
    memcpy(name, fn, stem);
    name[stem] = '\0';
    if (!sipp_name_valid(name))
        snprintf(
            why, cap,
            "'%s' is not a model name (letters, digits, '.', '_', '-', starting with a letter or digit); "
            "rename the file",
            name);
    else
        snprintf(why, cap, "it could not be listed; `sipp models info %s` says why", name);
}

/* Why entry fn of dir is skipped, in why ("" when it passes silently). */
static void why_skipped(const char *dir, const char *fn, const sipp_store_model *models, size_t n, char *why,
                        size_t cap) {
    *why = '\0';
    if (fn[0] == '.' || listed_file(models, n, fn)) return;
    char path[SIPP_PATH_MAX];
    sipp_pathf(path, sizeof path, "%s/%s", dir, fn);
    struct stat lst, st;
    if (lstat(path, &lst) != 0 || S_ISDIR(lst.st_mode)) return;
    bool named = has_ext(fn, GGUF_EXT);
    if (stat(path, &st) != 0) {
        if (named) snprintf(why, cap, "it is a symbolic link to nothing (%s)", strerror(errno));
        return;
    }
    if (S_ISDIR(st.st_mode)) return;
    if (!S_ISREG(st.st_mode)) {
        snprintf(why, cap, "it is %s, not a regular file", kind_of(st.st_mode));
        return;
    }
    if (!named || strncasecmp(fn, PROJECTOR_PREFIX, strlen(PROJECTOR_PREFIX)) == 0) return;
    why_file(fn, why, cap);
}

sipp_status sipp_store_list_skipped(const char *dir, sipp_store_skip_fn fn, void *user, char *errbuf) {
    sipp_store_model *models = NULL;
    size_t n = 0;
    sipp_status st = sipp_store_list(dir, &models, &n, errbuf);
    if (st != SIPP_OK) return st;
    char dflt[SIPP_PATH_MAX];
    if (!dir && sipp_store_dir(dflt, sizeof dflt, errbuf) == SIPP_OK) dir = dflt;
    DIR *d = dir ? opendir(dir) : NULL;
    for (struct dirent *e; d && (e = readdir(d));) {
        char why[WHY_SIZE];
        why_skipped(dir, e->d_name, models, n, why, sizeof why);
        if (*why) fn(user, e->d_name, why);
    }
    if (d) closedir(d);
    sipp_store_list_free(models, n);
    return SIPP_OK;
}
