/*
 * sigbus_guard.c: a model file cut short under a request that is reading its weights.
 *
 * model_watch.c and residency.c take a target whose file changed out of service before its next
 * request; a request already running on the old mapping at that moment may still read a page past
 * the file's new end, and the kernel answers that read with SIGBUS. Nothing can resume that thread
 * (it is inside a ggml kernel), so the process ends, as it does when an rpc server goes away
 * (SIPP_RPC_LOST_EXIT): one line that names the target and the file, and exit status 75, which a
 * supervisor (systemd's Restart=, Kubernetes) reads as "start me again".
 *
 * The handler is async-signal-safe: it looks the fault address (si_addr) up in a table of the
 * mapped ranges and their lines, built beforehand from /proc/self/maps after every load (two tables,
 * the new one published with one atomic store), then write(2) and _exit. A SIGBUS outside every
 * model mapping gets the default action, as without the handler.
 */
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "gateway/fleet/fleet.h"
#include "gateway/kinds/kinds.h"

#define GUARD_MAX_RANGES 512 /* mapped ranges of model files, all targets together */
#define GUARD_MAX_FILES 64   /* files with a line of their own; further ones share a general line */
#define GUARD_LINE_SIZE 768
#define MAPS_LINE_SIZE 4096

typedef struct guard_range {
    uintptr_t lo, hi;
    int file; /* its line */
} guard_range;

typedef struct guard_table {
    guard_range r[GUARD_MAX_RANGES];
    int n;
    char line[GUARD_MAX_FILES][GUARD_LINE_SIZE];
    size_t len[GUARD_MAX_FILES];
    unsigned long long dev[GUARD_MAX_FILES], ino[GUARD_MAX_FILES];
    int n_files;
} guard_table;

static guard_table tables[2];
static _Atomic(guard_table *) active;
static pthread_mutex_t refresh_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t install_once = PTHREAD_ONCE_INIT;

static void on_sigbus(int sig, siginfo_t *si, void *ctx) {
    (void)ctx;
    const guard_table *g = atomic_load(&active);
    uintptr_t a = (uintptr_t)si->si_addr;
    for (int i = 0; g && i < g->n; i++) {
        if (a < g->r[i].lo || a >= g->r[i].hi) continue;
        ssize_t unused = write(STDERR_FILENO, g->line[g->r[i].file], g->len[g->r[i].file]);
        (void)unused;
        _exit(GW_MAPPED_FILE_LOST_EXIT);
    }
    /* not a model file: the default action (a fault repeats when the handler returns) */
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    if (si->si_code <= 0) raise(sig); /* sent by kill(2), not a fault */
}

static void install(void) {
    struct sigaction sa = {.sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
}

void gw_sigbus_guard_install(void) { pthread_once(&install_once, install); }

/* The line of the loaded target file with this device and inode; -1 when it is none. */
static int file_line(guard_table *g, gw_server *srv, unsigned long long dev, unsigned long long ino) {
    for (int f = 0; f < g->n_files; f++)
        if (g->dev[f] == dev && g->ino[f] == ino) return f;
    for (size_t i = 0; i < srv->n_targets && g->n_files < GUARD_MAX_FILES; i++) {
        const gw_target *t = &srv->targets[i];
        if (!gw_kind_of(t)->resident || !gw_target_holds_load(t)) continue;
        for (int k = 0; k < GW_TARGET_FILES; k++) {
            const gw_file_id *id = &t->files[k];
            if (!id->exists || id->dev != dev || id->ino != ino) continue;
            int f = g->n_files++;
            int len = snprintf(g->line[f], GUARD_LINE_SIZE,
                               "sipp: target '%s': its file %s was cut short while a request read its "
                               "weights (SIGBUS); exiting with status %d: start the gateway again, and "
                               "replace a model by renaming a new file over it (docs/residency.md)\n",
                               t->cfg->name, gw_target_file(t->cfg, k), GW_MAPPED_FILE_LOST_EXIT);
            g->len[f] = len < 0 ? 0 : len >= GUARD_LINE_SIZE ? GUARD_LINE_SIZE - 1 : (size_t)len;
            if (g->len[f]) g->line[f][g->len[f] - 1] = '\n';
            g->dev[f] = dev;
            g->ino[f] = ino;
            return f;
        }
    }
    return -1;
}

/* One line of /proc/self/maps into the table, when it maps a loaded target's file. */
static void add_mapping(guard_table *g, gw_server *srv, const char *line) {
    uintptr_t lo, hi;
    unsigned int maj, min;
    unsigned long long ino;
    if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %*s %*x %x:%x %llu", &lo, &hi, &maj, &min, &ino) != 5 || !ino)
        return;
    if (g->n == GUARD_MAX_RANGES) return;
    int f = file_line(g, srv, (unsigned long long)makedev(maj, min), ino);
    if (f >= 0) g->r[g->n++] = (guard_range){.lo = lo, .hi = hi, .file = f};
}

void gw_sigbus_guard_refresh(gw_server *srv) {
    pthread_mutex_lock(&refresh_mu);
    guard_table *g = atomic_load(&active) == &tables[0] ? &tables[1] : &tables[0];
    g->n = 0;
    g->n_files = 0;
    FILE *f = fopen("/proc/self/maps", "r");
    char line[MAPS_LINE_SIZE];
    while (f && fgets(line, sizeof line, f))
        add_mapping(g, srv, line);
    if (f) fclose(f);
    atomic_store(&active, g);
    pthread_mutex_unlock(&refresh_mu);
}
