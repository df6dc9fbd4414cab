/*
 * buffers.c: the backend buffers llama.cpp allocates, counted as it reports them.
 *
 * llama.cpp's C API says how big a model's tensors are (llama_model_size) but not where its buffers
 * went nor how big a context's KV, output and compute buffers are. It does report every buffer it
 * allocates, once, in an info line of its log ("load_tensors: CPU_Mapped model buffer size =
 * 12.34 MiB", "llama_kv_cache: CUDA0 KV buffer size = ...", "sched_reserve: CPU compute buffer size
 * = ..."), naming the buffer type and so the place. Those lines come from the thread that calls
 * llama_model_load_from_file or llama_init_from_model, so a capture like log.c's error capture (one
 * per thread, no lock) adds up exactly the buffers of the load the thread is doing, however many
 * other threads are loading or decoding at the same time.
 *
 * Places: a buffer type whose name starts with "CPU" (CPU, CPU_Mapped, CPU_REPACK) or ends with
 * "_Host" (a GPU backend's pinned host memory) is host RAM; any other is the device its name starts
 * with ("CUDA0", "CUDA0_Split" -> "CUDA0", "Vulkan0").
 */
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "util/util.h"

#define MIB (1024.0 * 1024.0)

static const char BUFFER_SIZE_MARK[] = " buffer size = ";
#define KIND_WORDS_MAX 64 /* "model", "KV", " output", "DSV4 x state": a few words */

static __thread sipp_memory *capture_mem;

void sipp_buffers_capture(sipp_memory *m) { capture_mem = m; }

static bool is_host(const char *buft, size_t n) {
    static const char host_suffix[] = "_Host";
    size_t ns = sizeof host_suffix - 1;
    return (n >= 3 && strncmp(buft, "CPU", 3) == 0) ||
           (n >= ns && strncmp(buft + n - ns, host_suffix, ns) == 0);
}

void sipp_memory_add(sipp_memory *m, const char *device, size_t device_len, sipp_memory_kind kind,
                     uint64_t bytes) {
    if (!device) {
        m->host_bytes += bytes;
    } else {
        int i = 0;
        while (i < m->n_devices && !(strlen(m->devices[i].name) == device_len &&
                                     strncmp(m->devices[i].name, device, device_len) == 0))
            i++;
        if (i == m->n_devices) {
            if (i == SIPP_MEMORY_MAX_DEVICES)
                i--; /* more devices than a machine has: the last takes the rest */
            else {
                size_t n =
                    device_len < sizeof m->devices[i].name ? device_len : sizeof m->devices[i].name - 1;
                memcpy(m->devices[i].name, device, n);
                m->devices[i].name[n] = '\0';
                m->n_devices++;
            }
        }
        m->devices[i].bytes += bytes;
    }
    switch (kind) {
    case SIPP_MEMORY_WEIGHTS: m->weights_bytes += bytes; break;
    case SIPP_MEMORY_KV: m->kv_bytes += bytes; break;
    case SIPP_MEMORY_COMPUTE: m->compute_bytes += bytes; break;
    }
}

void sipp_memory_merge(sipp_memory *into, const sipp_memory *from) {
    into->host_bytes += from->host_bytes;
    for (int i = 0; i < from->n_devices; i++) {
        const sipp_memory_device *d = &from->devices[i];
        /* kinds are added below, once, for every place together */
        sipp_memory_add(into, d->name, strlen(d->name), SIPP_MEMORY_WEIGHTS, d->bytes);
        into->weights_bytes -= d->bytes;
    }
    into->weights_bytes += from->weights_bytes;
    into->kv_bytes += from->kv_bytes;
    into->compute_bytes += from->compute_bytes;
}

bool sipp_buffers_parse(const char *line, sipp_memory *m) {
    const char *mark = strstr(line, BUFFER_SIZE_MARK);
    const char *colon = strchr(line, ':');
    if (!mark || !colon || colon > mark) return false;
    char *end;
    double mib = strtod(mark + sizeof BUFFER_SIZE_MARK - 1, &end);
    if (end == mark + sizeof BUFFER_SIZE_MARK - 1 || mib < 0 || strncmp(end, " MiB", 4) != 0) return false;
    /* "<func>: <buffer type> <kind words> buffer size" */
    const char *p = colon + 1;
    while (*p == ' ')
        p++;
    const char *buft = p;
    while (p < mark && *p != ' ')
        p++;
    size_t buft_len = (size_t)(p - buft);
    if (!buft_len || p >= mark) return false;
    char kind_words[KIND_WORDS_MAX];
    size_t kind_len = (size_t)(mark - p) < sizeof kind_words ? (size_t)(mark - p) : sizeof kind_words - 1;
    memcpy(kind_words, p, kind_len);
    kind_words[kind_len] = '\0';
    sipp_memory_kind kind = SIPP_MEMORY_COMPUTE; /* compute, output */
    if (strstr(kind_words, " model"))
        kind = SIPP_MEMORY_WEIGHTS;
    else if (strstr(kind_words, " KV") || strstr(kind_words, " RS") || strstr(kind_words, " state"))
        kind = SIPP_MEMORY_KV;
    uint64_t bytes = (uint64_t)(mib * MIB + 0.5);
    if (is_host(buft, buft_len)) {
        sipp_memory_add(m, NULL, 0, kind, bytes);
    } else {
        size_t dev_len = 0;
        while (dev_len < buft_len && buft[dev_len] != '_')
            dev_len++;
        sipp_memory_add(m, buft, dev_len, kind, bytes);
    }
    return true;
}

void sipp_buffers_note(const char *line) {
    if (capture_mem && line) sipp_buffers_parse(line, capture_mem);
}
