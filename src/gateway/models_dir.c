/*
 * models_dir.c: what of a models directory the gateway serves, beyond what the store lists.
 *
 * A symbolic link in the directory may lead anywhere: to a model an operator keeps elsewhere, or,
 * where others can write to the directory, to any file the server can read, which GET
 * /v1/models/{name}/file then serves. So a model whose file (or projector) is a link to a file
 * outside the directory is not served unless [server] models_follow_symlinks = true; a link within
 * it is. Both the links refused and the entries the store passes over (a name that is no model
 * name, a FIFO) are logged, each once for the life of the process: the directory is listed again
 * on every GET /v1/models and on a request for an unknown model, which must not repeat the lines.
 */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gateway/models_dir.h"
#include "util/util.h"

#define GW_REPORTED_MAX 4096 /* lines remembered; past it a line may repeat */
#define GW_WHY_EXTRA 128     /* a reason's words besides the path it names */

static pthread_mutex_t reported_mu = PTHREAD_MUTEX_INITIALIZER;
static char *reported[GW_REPORTED_MAX];
static size_t n_reported;

/* Logs "models directory DIR: 'ENTRY' is skipped: WHY" unless it was logged before. */
static void report_once(const char *dir, const char *entry, const char *why) {
    sipp_buf line = {0};
    if (!sipp_buf_appendf(&line, "sipp: models directory %s: '%s' is skipped: %s", dir, entry, why)) return;
    bool seen = false;
    pthread_mutex_lock(&reported_mu);
    for (size_t i = 0; i < n_reported && !seen; i++)
        seen = strcmp(reported[i], line.data) == 0;
    if (!seen) {
        fprintf(stderr, "%s\n", line.data);
        if (n_reported < GW_REPORTED_MAX) {
            reported[n_reported++] = line.data;
            line.data = NULL;
        }
    }
    pthread_mutex_unlock(&reported_mu);
    sipp_buf_free(&line);
}

static void on_skipped(void *user, const char *entry, const char *why) { report_once(user, entry, why); }

void gw_models_dir_report(const char *dir) {
    char err[SIPP_ERROR_SIZE];
    sipp_store_list_skipped(dir, on_skipped, (void *)dir, err); /* a directory that went away: nothing */
}

/* Whether file (in dir, whose real path is real_dir) is a link to something outside real_dir. */
static bool links_out(const char *dir, const char *real_dir, const char *file, char *target, size_t cap) {
    char path[PATH_MAX], real[PATH_MAX];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (lstat(path, &st) != 0 || !S_ISLNK(st.st_mode) || !realpath(path, real)) return false;
    size_t n = strlen(real_dir);
    snprintf(target, cap, "%s", real);
    return strncmp(real, real_dir, n) != 0 || real[n] != '/';
}

bool gw_models_dir_allows(const char *dir, const sipp_store_model *m, bool follow_symlinks) {
    char real_dir[PATH_MAX], target[PATH_MAX];
    if (follow_symlinks || !realpath(dir, real_dir)) return true;
    for (int k = 0; k <= m->n_files; k++) {
        const char *file = k < m->n_files ? m->files[k].file : m->mmproj ? m->mmproj->file : NULL;
        if (!file || !links_out(dir, real_dir, file, target, sizeof target)) continue;
        char why[PATH_MAX + GW_WHY_EXTRA];
        snprintf(
            why, sizeof why,
            "it is a symbolic link to '%s', outside the directory; set [server] models_follow_symlinks = "
            "true to serve it",
            target);
        report_once(dir, file, why);
        return false;
    }
    return true;
}
