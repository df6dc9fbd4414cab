/*
 * info.c: what the public API says about backends and devices (sipp backends, sipp doctor,
 * /v1/backends), built on the same discovery and policy that loads use, so that what is reported
 * is what a load would do.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/rpc.h"
#include "util/util.h"

#define CPU_MODULE_PREFIX "libggml-cpu-"

static const char *kind_name(sipp_device_kind k) {
    switch (k) {
    case SIPP_DEVICE_GPU: return "gpu";
    case SIPP_DEVICE_IGPU: return "igpu";
    case SIPP_DEVICE_ACCEL: return "accel";
    default: return "cpu";
    }
}

int sipp_backends_list(sipp_backend_info *out, int cap) {
    if (sipp_runtime_init(NULL, NULL) != SIPP_OK) return 0;
    sipp_host_view view;
    sipp_host_discover(&view);
    int n = 0;
    for (int id = SIPP_BACKEND_AUTO + 1; id < SIPP_BACKEND_COUNT; id++, n++) {
        if (n >= cap) continue;
        sipp_backend_info *b = &out[n];
        memset(b, 0, sizeof *b);
        sipp_strlcpy(b->name, sipp_backend_name((sipp_backend_id)id), sizeof b->name);
        b->compiled = view.compiled[id];
        b->n_devices = sipp_host_count(&view, (sipp_backend_id)id);
        b->available = b->compiled && b->n_devices > 0;
    }
    return n;
}

int sipp_devices_list(sipp_device_info *out, int cap) {
    if (sipp_runtime_init(NULL, NULL) != SIPP_OK) return 0;
    sipp_host_view view;
    sipp_host_discover(&view);
    for (int i = 0; i < view.n_devices && i < cap; i++) {
        const sipp_device_desc *d = &view.devices[i];
        sipp_device_info *o = &out[i];
        memset(o, 0, sizeof *o);
        sipp_strlcpy(o->backend, sipp_backend_name(d->backend), sizeof o->backend);
        sipp_strlcpy(o->name, d->name, sizeof o->name);
        sipp_strlcpy(o->description, d->description, sizeof o->description);
        sipp_strlcpy(o->kind, kind_name(d->kind), sizeof o->kind);
        o->software = d->software;
        o->memory_free = d->memory_free;
        o->memory_total = d->memory_total;
    }
    return view.n_devices;
}

/* rpc's devices are the servers' and appear only once connected; without a load, the question is
 * whether the module is there and which servers $SIPP_RPC_SERVERS names (checked, not contacted). */
static sipp_status decide_rpc(sipp_backend_decision *out, char *errbuf) {
    if (!sipp_rpc_compiled())
        return sipp_fail(
            errbuf, SIPP_ERR_BACKEND,
            "backend 'rpc' is not compiled into this build (no libggml-rpc.so in the artifact); rebuild "
            "with: make BACKENDS=\"cpu vulkan rpc\", or sipp build --backend rpc");
    const char *servers = getenv("SIPP_RPC_SERVERS");
    sipp_status st = sipp_rpc_check_servers(servers, errbuf);
    if (st != SIPP_OK) return st == SIPP_ERR_INVALID_ARGUMENT ? SIPP_ERR_BACKEND : st;
    sipp_strlcpy(out->backend, "rpc", sizeof out->backend);
    snprintf(out->reason, sizeof out->reason, "requested rpc; servers %s (SIPP_RPC_SERVERS), split at load",
             servers);
    sipp_strlcpy(out->devices, "CPU,RPC", sizeof out->devices);
    out->gpu_layers = -1;
    return SIPP_OK;
}

sipp_status sipp_backend_decide(const char *requested, const char *order, sipp_backend_decision *out,
                                char *errbuf) {
    memset(out, 0, sizeof *out);
    sipp_status st = sipp_runtime_init(NULL, errbuf);
    if (st != SIPP_OK) return st;
    if (requested && strcmp(requested, "rpc") == 0) return decide_rpc(out, errbuf);
    sipp_host_view view;
    sipp_host_discover(&view);
    sipp_policy_result pick;
    if ((st = sipp_policy_decide(&view, requested, order, &pick, errbuf)) != SIPP_OK) return st;
    sipp_strlcpy(out->backend, sipp_backend_name(pick.backend), sizeof out->backend);
    sipp_strlcpy(out->reason, pick.reason, sizeof out->reason);
    sipp_strlcpy(out->devices, pick.device >= 0 ? view.devices[pick.device].name : "CPU",
                 sizeof out->devices);
    out->gpu_layers = pick.device >= 0 ? -1 : 0; /* -1: all layers, decided at load */
    return SIPP_OK;
}

/* ggml loads the CPU module with the highest ggml_backend_score; ask each module the same question
 * to learn which one that was (ggml does not name it). */
static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;
static char cpu_module[128];

static void find_cpu_module(void) {
    const char *dir = sipp_runtime_artifact_dir();
    DIR *d = dir ? opendir(dir) : NULL;
    if (!d) return;
    int best = 0;
    struct dirent *ent;
    while ((ent = readdir(d))) {
        if (strncmp(ent->d_name, CPU_MODULE_PREFIX, strlen(CPU_MODULE_PREFIX)) != 0) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, ent->d_name);
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h) continue;
        int (*score)(void) = (int (*)(void))dlsym(h, "ggml_backend_score");
        int s = score ? score() : 0;
        if (s > best) {
            best = s;
            sipp_strlcpy(cpu_module, ent->d_name, sizeof cpu_module);
        }
        dlclose(h);
    }
    closedir(d);
}

const char *sipp_cpu_module(void) {
    if (sipp_runtime_init(NULL, NULL) != SIPP_OK) return "";
    pthread_once(&cpu_once, find_cpu_module);
    return cpu_module;
}
