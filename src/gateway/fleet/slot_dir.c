/*
 * slot_dir.c: the directory where a gateway's unloaded models keep their saved slots.
 *
 * Saved slots (sipp_engine_save_slots) only help this process: the next load of the same target
 * restores them. So each gateway has a directory of its own, gw-PID under [server] slot_state_dir
 * (default $XDG_CACHE_HOME/sipp/slot-state, or ~/.cache/sipp/slot-state), with one subdirectory per
 * target (t0, t1, ...: the target's index, so that two targets of one file never share a slot's
 * key), and removes it when it stops. The directories of gateways that died without removing
 * theirs are stale: a gateway starting removes every gw-PID whose process is gone. A restart thus
 * begins without saved slots, as a restarted server begins with empty KV caches.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gateway/fleet/fleet.h"

#define PREFIX "gw-"
#define DEFAULT_SUBDIR "sipp/slot-state"
#define DIR_MODE 0700

/* mkdir -p */
static bool make_dirs(const char *path) {
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p) return false;
    for (char *c = p + 1; *c; c++) {
        if (*c != '/') continue;
        *c = '\0';
        if (mkdir(p, DIR_MODE) != 0 && errno != EEXIST) return false;
        *c = '/';
    }
    return mkdir(p, DIR_MODE) == 0 || errno == EEXIST;
}

/* Removes dir, its files and its subdirectories' files (the layout this file makes: two levels). */
static void remove_tree(const char *dir, int depth) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
        char path[PATH_MAX];
        if (snprintf(path, sizeof path, "%s/%s", dir, de->d_name) >= (int)sizeof path) continue;
        struct stat st;
        if (lstat(path, &st) != 0) continue;
        if (S_ISDIR(st.st_mode) && depth > 0)
            remove_tree(path, depth - 1);
        else if (S_ISREG(st.st_mode))
            unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

/* gw-PID directories whose process is gone. */
static void remove_stale(const char *base) {
    DIR *d = opendir(base);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, PREFIX, strlen(PREFIX)) != 0) continue;
        char *end;
        long pid = strtol(de->d_name + strlen(PREFIX), &end, 10);
        if (*end || pid <= 0 || pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        char path[PATH_MAX];
        if (snprintf(path, sizeof path, "%s/%s", base, de->d_name) < (int)sizeof path) remove_tree(path, 1);
    }
    closedir(d);
}

bool gw_slot_dir_open(const gw_config *cfg, char *root, size_t n) {
    *root = '\0';
    if (cfg->slot_state_max_mb <= 0) return false;
    char base[PATH_MAX];
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int w = cfg->slot_state_dir ? snprintf(base, sizeof base, "%s", cfg->slot_state_dir)
            : xdg && *xdg       ? snprintf(base, sizeof base, "%s/%s", xdg, DEFAULT_SUBDIR)
            : home && *home     ? snprintf(base, sizeof base, "%s/.cache/%s", home, DEFAULT_SUBDIR)
                                : -1;
    if (w < 0 || w >= (int)sizeof base) {
        fprintf(stderr,
                "sipp: idle slots of unloaded models are not saved: no directory for them (set [server] "
                "slot_state_dir)\n");
        return false;
    }
    if (!make_dirs(base)) {
        fprintf(stderr, "sipp: idle slots of unloaded models are not saved: cannot make %s: %s\n", base,
                strerror(errno));
        return false;
    }
    remove_stale(base);
    if (snprintf(root, n, "%s/%s%ld", base, PREFIX, (long)getpid()) >= (int)n || !make_dirs(root)) {
        fprintf(stderr, "sipp: idle slots of unloaded models are not saved: cannot make %s/%s%ld\n", base,
                PREFIX, (long)getpid());
        *root = '\0';
        return false;
    }
    return true;
}

void gw_slot_dir_target(const char *root, int index, char *out, size_t n) {
    snprintf(out, n, "%s/t%d", root, index);
}

void gw_slot_dir_remove(const char *root) {
    if (*root) remove_tree(root, 1);
}
