/*
 * placement.c: where a model's weights went, per device and per host (sipp_model_placement).
 *
 * llama.cpp decides the placement inside llama_model_load_from_file (tensor_split, n_gpu_layers,
 * free memory) and llama.h has no call that reports it; it logs it instead, one line per layer
 * ("load_tensors: layer 3 assigned to device RPC0, is_swa = 0") and one per weight buffer
 * ("load_tensors: RPC0[10.0.0.2:50052] model buffer size = 12.50 MiB"). So the loading thread
 * watches its own log lines and keeps what they say: the report is what llama.cpp did, not a
 * second computation of what it should have done.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/rpc.h"
#include "model/model.h"
#include "util/util.h"

#define LAYER_LINE "load_tensors: layer "
#define BUFFER_MARK " model buffer size = "
#define BYTES_PER_MIB (1024.0 * 1024.0)
#define CPU_DEVICE "CPU"
#define CLIP_LINE "CLIP using "

static sipp_placement *entry_for(sipp_model *m, const char *device, const char *layout) {
    for (int i = 0; i < m->n_placement; i++)
        if (strcmp(m->placement[i].device, device) == 0 && strcmp(m->placement[i].layout, layout) == 0)
            return &m->placement[i];
    if (m->n_placement == SIPP_MAX_PLACEMENT) return NULL;
    sipp_placement *p = &m->placement[m->n_placement++];
    memset(p, 0, sizeof *p);
    sipp_strlcpy(p->device, device, sizeof p->device);
    sipp_strlcpy(p->layout, layout, sizeof p->layout);
    const char *ep = sipp_rpc_endpoint_of(device);
    sipp_strlcpy(p->host, ep ? ep : "local", sizeof p->host);
    p->first_layer = -1;
    return p;
}

/* The device and layout a buffer belongs to, as ggml lists its buffer types: "CPU_Mapped" is the
 * CPU's own, "CPU_REPACK" and "AMX" are the CPU's in those layouts, "Vulkan0" is Vulkan0's;
 * "RPC0[host:port]" is whichever RPC<n> this process gave that server's device 0. */
static void place_of_buffer(const char *buffer, char *device, size_t cap, char *layout, size_t lcap) {
    layout[0] = '\0';
    const char *rpc = sipp_rpc_device_of_buffer(buffer);
    if (rpc) {
        sipp_strlcpy(device, rpc, cap);
        return;
    }
    sipp_buft_place place;
    if (sipp_buft_place_of(buffer, strlen(buffer), &place)) {
        sipp_strlcpy(device, place.device, cap);
        sipp_strlcpy(layout, place.layout, lcap);
        return;
    }
    sipp_strlcpy(device, buffer, cap);
    if (strncmp(device, CPU_DEVICE, strlen(CPU_DEVICE)) == 0) device[strlen(CPU_DEVICE)] = '\0';
}

static void observe(const char *line, void *user) {
    sipp_model *m = user;
    int layer = -1, n_layer = m->info.n_layer;
    char device[64];
    const char *at = strstr(line, LAYER_LINE);
    if (at && sscanf(at + strlen(LAYER_LINE), "%d assigned to device %63[^,]", &layer, device) == 2) {
        sipp_placement *p = entry_for(m, device, "");
        if (!p) return;
        /* The layer after the last repeating one is the output layer. */
        if (n_layer > 0 && layer >= n_layer) {
            p->output = true;
            return;
        }
        if (p->first_layer < 0 || layer < p->first_layer) p->first_layer = layer;
        p->n_layers++;
        return;
    }
    const char *mark = strstr(line, BUFFER_MARK);
    const char *colon = strstr(line, "load_tensors:");
    if (!mark || !colon || colon > mark) return;
    const char *name = colon + strlen("load_tensors:");
    while (*name == ' ')
        name++;
    char buffer[128];
    size_t len = (size_t)(mark - name);
    if (len == 0 || len >= sizeof buffer) return;
    memcpy(buffer, name, len);
    buffer[len] = '\0';
    char layout[sizeof m->placement[0].layout];
    place_of_buffer(buffer, device, sizeof device, layout, sizeof layout);
    sipp_placement *p = entry_for(m, device, layout);
    if (p) p->buffer_bytes += (uint64_t)(strtod(mark + strlen(BUFFER_MARK), NULL) * BYTES_PER_MIB);
}

void sipp_placement_begin(sipp_model *m) {
    m->n_placement = 0;
    sipp_log_observe(observe, m);
}

/* A layout's entry holds weights of its device's layers: it takes their range from the device's. */
void sipp_placement_end(sipp_model *m) {
    sipp_log_observe(NULL, NULL);
    for (int i = 0; i < m->n_placement; i++) {
        sipp_placement *p = &m->placement[i];
        if (!p->layout[0]) continue;
        for (int j = 0; j < m->n_placement; j++) {
            const sipp_placement *d = &m->placement[j];
            if (d->layout[0] || strcmp(d->device, p->device) != 0) continue;
            p->first_layer = d->first_layer;
            p->n_layers = d->n_layers;
            p->output = d->output;
        }
    }
}

/* The projector's weights. libmtmd says which backend it runs the projector on, once per load
 * ("clip_ctx: CLIP using Vulkan0 backend", "... using CPU backend"), and puts the weights in that
 * backend's buffer without logging its size: the bytes are the tensors' of the file's header. */
static void observe_clip(const char *line, void *user) {
    char *device = user;
    const char *at = strstr(line, CLIP_LINE);
    if (at) sscanf(at + strlen(CLIP_LINE), "%63s", device);
}

void sipp_placement_projector_begin(char device[SIPP_CLIP_DEVICE_MAX]) {
    device[0] = '\0';
    sipp_log_observe(observe_clip, device);
}

void sipp_placement_projector_end(sipp_model *m, const char *device, const char *path) {
    sipp_log_observe(NULL, NULL);
    if (!*device || m->n_placement == SIPP_MAX_PLACEMENT) return;
    sipp_gguf_info *g = calloc(1, sizeof *g);
    char err[SIPP_ERROR_SIZE];
    if (!g || sipp_gguf_inspect(path, g, err) != SIPP_OK) {
        free(g);
        return;
    }
    sipp_placement *p = &m->placement[m->n_placement++];
    memset(p, 0, sizeof *p);
    sipp_strlcpy(p->device, device, sizeof p->device);
    const char *ep = sipp_rpc_endpoint_of(device);
    sipp_strlcpy(p->host, ep ? ep : "local", sizeof p->host);
    p->first_layer = -1;
    p->mmproj = true;
    for (int i = 0; i < g->n_types; i++)
        p->buffer_bytes += g->types[i].bytes;
    free(g);
}

int sipp_model_placement(const sipp_model *m, sipp_placement *out, int cap) {
    if (!m) return 0;
    for (int i = 0; i < m->n_placement && i < cap; i++)
        out[i] = m->placement[i];
    return m->n_placement;
}
