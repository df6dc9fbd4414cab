/*
 * lease.c: the GPU residency lease, so that two sipp processes do not oversubscribe one device.
 *
 * A lease is a lock file per device holding the owner's pid, locked with flock(). The kernel drops
 * a flock when its process dies, so a lease of a dead process is reclaimed by the next taker
 * without guessing from pids; the pid in the file is there to name the owner in the error. Leases
 * are counted within a process: two models of one process on one device share its lease (the
 * gateway with two targets on one GPU), since their memory is checked at each load anyway.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/backend.h"
#include "util/util.h"

#define DEFAULT_LEASE_DIR "/tmp/sipp-leases"
#define DEFAULT_MARGIN_MB 512
#define MIB (1024.0 * 1024.0)
#define MAX_LEASES 16

static pthread_mutex_t lease_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char key[96];
    int fd;
    int refs;
} leases[MAX_LEASES];

bool sipp_lease_enabled(void) {
    const char *v = getenv("SIPP_GPU_LEASE");
    return !(v && (strcmp(v, "off") == 0 || strcmp(v, "0") == 0));
}

static void lease_path(const char *key, char *out, size_t n) {
    const char *dir = getenv("SIPP_LEASE_DIR");
    snprintf(out, n, "%s/%s.lock", dir && *dir ? dir : DEFAULT_LEASE_DIR, key);
}

sipp_status sipp_lease_check_memory(const sipp_device_desc *dev, uint64_t need_bytes, char *errbuf) {
    const char *m = getenv("SIPP_GPU_MARGIN_MB");
    long margin_mb = m && *m ? strtol(m, NULL, 10) : DEFAULT_MARGIN_MB;
    if (margin_mb < 0) margin_mb = 0;
    double need = (double)need_bytes + (double)margin_mb * MIB;
    if (dev->memory_total > 0 && (double)dev->memory_free < need)
        return sipp_fail(
            errbuf, SIPP_ERR_BUSY,
            "device %s (%s) has %.0f MiB free; the model needs about %.0f MiB plus a margin of %ld MiB "
            "(SIPP_GPU_MARGIN_MB). Free the device, use fewer --gpu-layers, or --backend cpu",
            dev->name, dev->description, dev->memory_free / MIB, need_bytes / MIB, margin_mb);
    return SIPP_OK;
}

sipp_status sipp_lease_acquire(const char *backend, const char *device, char *key_out, size_t key_len,
                               char *errbuf) {
    char key[96];
    snprintf(key, sizeof key, "%s-%s", backend, device);
    sipp_strlcpy(key_out, key, key_len);
    pthread_mutex_lock(&lease_lock);
    for (int i = 0; i < MAX_LEASES; i++) {
        if (leases[i].refs > 0 && strcmp(leases[i].key, key) == 0) {
            leases[i].refs++;
            pthread_mutex_unlock(&lease_lock);
            return SIPP_OK;
        }
    }
    int slot = -1;
    for (int i = 0; i < MAX_LEASES && slot < 0; i++)
        if (leases[i].refs == 0) slot = i;
    char path[512];
    lease_path(key, path, sizeof path);
    char dir[512];
    sipp_strlcpy(dir, path, sizeof dir);
    *strrchr(dir, '/') = '\0';
    mkdir(dir, 01777);
    sipp_status st = SIPP_OK;
    int fd = slot < 0 ? -1 : open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (slot < 0) {
        st = sipp_fail(errbuf, SIPP_ERR_INTERNAL, "too many GPU leases in one process");
    } else if (fd < 0) {
        st = sipp_fail(errbuf, SIPP_ERR_IO,
                       "cannot open the lease file %s: %s (set SIPP_LEASE_DIR, or SIPP_GPU_LEASE=off)", path,
                       strerror(errno));
    } else if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        char owner[32] = "";
        ssize_t n = pread(fd, owner, sizeof owner - 1, 0);
        owner[n > 0 ? n : 0] = '\0';
        owner[strcspn(owner, "\n")] = '\0';
        st = sipp_fail(
            errbuf, SIPP_ERR_BUSY,
            "device %s is leased by another sipp process (pid %s, lock %s); wait for it to finish, use "
            "--backend cpu, or set SIPP_GPU_LEASE=off to share the device on purpose",
            device, *owner ? owner : "unknown", path);
        close(fd);
    } else {
        char pid[32];
        int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
        if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n) { /* the pid is informative only */
        }
        sipp_strlcpy(leases[slot].key, key, sizeof leases[slot].key);
        leases[slot].fd = fd;
        leases[slot].refs = 1;
    }
    pthread_mutex_unlock(&lease_lock);
    return st;
}

void sipp_lease_release(const char *key) {
    if (!key || !*key) return;
    pthread_mutex_lock(&lease_lock);
    for (int i = 0; i < MAX_LEASES; i++) {
        if (leases[i].refs > 0 && strcmp(leases[i].key, key) == 0 && --leases[i].refs == 0) {
            /* Emptied before unlocking, so a reader never sees a pid that no longer holds it. */
            if (ftruncate(leases[i].fd, 0) != 0) { /* informative only */
            }
            flock(leases[i].fd, LOCK_UN);
            close(leases[i].fd);
        }
    }
    pthread_mutex_unlock(&lease_lock);
}
