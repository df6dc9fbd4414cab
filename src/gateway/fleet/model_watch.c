/*
 * model_watch.c: the files the local targets are loaded from, watched with inotify, so that a file
 * that changes under a loaded model takes its target out of service before another request reaches
 * the weights (residency.c, gw_residency_file_event, decides and reloads).
 *
 * A loaded model's weights are mapped from its file (llama.cpp's mmap). A file truncated in place
 * leaves pages of that mapping without data: the next read of them is SIGBUS, which ends the
 * process (sigbus_guard.c names the file then). A file written in place (cp over it) changes the
 * weights under a running target. A file renamed over it or removed leaves the old mapping whole,
 * but the target no longer serves what its file holds. Each of these is seen here:
 *
 *   the file itself:      IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE (written or truncated in place),
 *                         IN_DELETE_SELF, IN_MOVE_SELF
 *   its directory:        IN_MOVED_TO, IN_CREATE, IN_CLOSE_WRITE, ... naming the file: a new file
 *                         renamed over it (the watch on the file follows the old inode), or a file
 *                         that appears where a failed target's was
 *
 * One thread reads the events and tells residency.c which targets they touch. It also watches the
 * file a path names now (after a rename over it: a new inode) at once after an event about a target
 * and at least every WATCH_RESYNC_MS, which also picks up targets added since (a models directory's
 * new files, a reload's). Without inotify (a limit reached) the gateway still checks a target's
 * files at each request (residency.c), and says so at start.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "gateway/fleet/fleet.h"
#include "gateway/kinds/kinds.h"

#define FILE_MASK (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF)
/* not IN_MODIFY: the file's own watch has it, and a download beside it would wake the thread per write */
#define DIR_MASK (IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE | IN_CLOSE_WRITE | IN_ATTRIB)
#define WATCH_RESYNC_MS 1000 /* the watches are brought up to date at least this often */
#define EVENT_BUF_BYTES 16384

typedef struct watch_entry {
    int wd;     /* -1: the path does not exist now */
    char *path; /* a target's file, or the directory of one */
    bool dir;
} watch_entry;

struct gw_model_watch {
    gw_server *srv;
    int fd;   /* inotify */
    int wake; /* eventfd written to stop the thread */
    pthread_t thread;
    watch_entry *e;
    size_t n, cap;
    bool stale; /* an event touched a target or dropped a watch: resync before the next wait */
};

/* The directory part of path ("." for a bare name) into out. */
static void dir_of(const char *path, char *out, size_t n) {
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(out, n, ".");
    else
        snprintf(out, n, "%.*s", slash == path ? 1 : (int)(slash - path), path);
}

static const char *base_of(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static bool wd_used(const gw_model_watch *w, int wd) {
    for (size_t i = 0; i < w->n; i++)
        if (w->e[i].wd == wd) return true;
    return false;
}

/* Watches path (a file or a directory) as it is now; an entry for it remembers the descriptor. */
static void watch_path(gw_model_watch *w, const char *path, bool dir) {
    int wd = inotify_add_watch(w->fd, path, dir ? DIR_MASK : FILE_MASK);
    for (size_t i = 0; i < w->n; i++) {
        watch_entry *e = &w->e[i];
        if (e->dir != dir || strcmp(e->path, path) != 0) continue;
        int old = e->wd;
        e->wd = wd;
        if (old >= 0 && old != wd && !wd_used(w, old)) inotify_rm_watch(w->fd, old); /* a replaced inode */
        return;
    }
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 16;
        watch_entry *e = realloc(w->e, cap * sizeof *e);
        if (!e) return;
        w->e = e;
        w->cap = cap;
    }
    char *copy = strdup(path);
    if (!copy) return;
    w->e[w->n++] = (watch_entry){.wd = wd, .path = copy, .dir = dir};
}

static bool watched_target(const gw_target *t) { return gw_kind_of(t)->resident && gw_target_listed(t); }

/* Every local target's files and their directories, as the paths name them now. */
static void resync(gw_model_watch *w) {
    gw_server *srv = w->srv;
    size_t n = srv->n_targets;
    for (size_t i = 0; i < n; i++) {
        const gw_target *t = &srv->targets[i];
        if (!watched_target(t)) continue;
        for (int k = 0; k < GW_TARGET_FILES; k++) {
            const char *p = gw_target_file(t->cfg, k);
            if (!p) continue;
            char dir[PATH_MAX];
            dir_of(p, dir, sizeof dir);
            watch_path(w, p, false);
            watch_path(w, dir, true);
        }
    }
}

/* Whether an event on entry e (name: the entry a directory event names, "" for a file's own) is
 * about path. */
static bool event_names(const watch_entry *e, const char *name, const char *path) {
    if (!e->dir) return strcmp(e->path, path) == 0;
    if (!*name || strcmp(base_of(path), name) != 0) return false;
    char dir[PATH_MAX];
    dir_of(path, dir, sizeof dir);
    return strcmp(dir, e->path) == 0;
}

static bool target_touched(const gw_target *t, const watch_entry *e, const char *name) {
    for (int k = 0; k < GW_TARGET_FILES; k++) {
        const char *p = gw_target_file(t->cfg, k);
        if (p && event_names(e, name, p)) return true;
    }
    return false;
}

/* Tells residency.c about every target the event touches (all of them when the queue overflowed). */
static void dispatch(gw_model_watch *w, const struct inotify_event *ev) {
    gw_server *srv = w->srv;
    size_t n = srv->n_targets;
    const char *name = ev->len ? ev->name : "";
    for (size_t i = 0; i < n; i++) {
        gw_target *t = &srv->targets[i];
        if (!watched_target(t)) continue;
        bool touched = (ev->mask & IN_Q_OVERFLOW) != 0;
        for (size_t k = 0; k < w->n && !touched; k++)
            touched = w->e[k].wd == ev->wd && target_touched(t, &w->e[k], name);
        if (touched) gw_residency_file_event(srv, t);
        w->stale = w->stale || touched; /* its path may name another inode now */
    }
    if (ev->mask & IN_IGNORED) /* the watched inode is gone: the resync watches the path again */
        for (size_t k = 0; k < w->n; k++) {
            if (w->e[k].wd != ev->wd) continue;
            w->e[k].wd = -1;
            w->stale = true;
        }
}

/* Reads the events waiting; false when the descriptor failed. */
static bool read_events(gw_model_watch *w) {
    _Alignas(struct inotify_event) char buf[EVENT_BUF_BYTES];
    ssize_t got = read(w->fd, buf, sizeof buf);
    if (got < 0) return errno == EAGAIN || errno == EINTR;
    for (char *p = buf; p < buf + got;) {
        const struct inotify_event *ev = (const struct inotify_event *)p;
        dispatch(w, ev);
        p += sizeof *ev + ev->len;
    }
    return true;
}

static void *watch_main(void *arg) {
    gw_model_watch *w = arg;
    double synced = 0;
    for (;;) {
        if (w->stale || sipp_now_ms() - synced >= WATCH_RESYNC_MS) {
            resync(w);
            w->stale = false;
            synced = sipp_now_ms();
        }
        struct pollfd fds[2] = {{.fd = w->fd, .events = POLLIN}, {.fd = w->wake, .events = POLLIN}};
        int rc = poll(fds, 2, WATCH_RESYNC_MS);
        if (rc < 0 && errno != EINTR) break;
        if (fds[1].revents) break; /* stopping */
        if ((fds[0].revents & POLLIN) && !read_events(w)) break;
    }
    return NULL;
}

gw_model_watch *gw_model_watch_start(gw_server *srv) {
    gw_model_watch *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->srv = srv;
    w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    w->wake = w->fd >= 0 ? eventfd(0, EFD_CLOEXEC) : -1;
    if (w->fd < 0 || w->wake < 0 || pthread_create(&w->thread, NULL, watch_main, w) != 0) {
        fprintf(stderr,
                "sipp: model files are not watched (%s): a file changed under a loaded model is seen at the "
                "model's next request instead\n",
                w->fd < 0 ? strerror(errno) : "cannot start the watch thread");
        if (w->fd >= 0) close(w->fd);
        if (w->wake >= 0) close(w->wake);
        free(w);
        return NULL;
    }
    return w;
}

void gw_model_watch_stop(gw_model_watch *w) {
    if (!w) return;
    uint64_t one = 1;
    ssize_t unused = write(w->wake, &one, sizeof one);
    (void)unused;
    pthread_join(w->thread, NULL);
    close(w->wake);
    close(w->fd);
    for (size_t i = 0; i < w->n; i++)
        free(w->e[i].path);
    free(w->e);
    free(w);
}
