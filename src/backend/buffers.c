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
 * Places: ggml is asked where each buffer type's memory is (sipp_buffers_learn, once the backend
 * modules are loaded): a buffer type that ggml_backend_buft_is_host says is host memory, or whose
 * device is the CPU (or an accelerator that works on host memory), is host RAM; any other is its
 * device's. That covers the CPU's "extra" buffer types, which hold weights in the layout the CPU
 * module's kernels prefer: "AMX" on a Xeon with AMX, "CPU_REPACK", KleidiAI's. Their names do not
 * say CPU, and counting them by name once made an AMX host's weights the memory of a device called
 * AMX that no budget knew. A name ggml never listed (a buffer of an RPC server, a test's line
 * before any backend is loaded) falls back to the names' convention: "CPU..." and "..._Host" are
 * host RAM, any other the device its name starts with ("CUDA0_Split" -> "CUDA0").
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "ggml-backend.h"
#include "ggml.h"
#include "util/util.h"

#define MIB (1024.0 * 1024.0)

static const char BUFFER_SIZE_MARK[] = " buffer size = ";
#define KIND_WORDS_MAX 64 /* "model", "KV", " output", "DSV4 x state": a few words */
#define BUFT_MAX 64       /* buffer types a process knows: a few per device */
#define BUFT_NAME_MAX 64

static __thread sipp_memory *capture_mem;

/* The buffer types ggml listed, by name: written at runtime init and when devices are added, read
 * by every load's log lines. */
static struct {
    char name[BUFT_NAME_MAX];
    sipp_buft_place place;
} bufts[BUFT_MAX];
static int n_bufts;
static pthread_mutex_t bufts_lock = PTHREAD_MUTEX_INITIALIZER;

void sipp_buffers_capture(sipp_memory *m) { capture_mem = m; }

void sipp_buffers_learn_one(const char *name, const sipp_buft_place *place) {
    if (!name || !*name || strlen(name) >= BUFT_NAME_MAX) return;
    pthread_mutex_lock(&bufts_lock);
    int i = 0;
    while (i < n_bufts && strcmp(bufts[i].name, name) != 0)
        i++;
    if (i < BUFT_MAX) {
        sipp_strlcpy(bufts[i].name, name, sizeof bufts[i].name);
        bufts[i].place = *place;
        if (i == n_bufts) n_bufts++;
    }
    pthread_mutex_unlock(&bufts_lock);
}

/* One buffer type of dev; layout_of_extra marks a CPU extra buffer type, whose layout is its name
 * without the device's prefix ("CPU_REPACK" -> "REPACK", "AMX" -> "AMX"). */
static void learn_buft(ggml_backend_dev_t dev, ggml_backend_buffer_type_t buft, bool extra) {
    if (!buft) return;
    const char *name = ggml_backend_buft_name(buft);
    ggml_backend_dev_t owner = ggml_backend_buft_get_device(buft);
    if (!owner) owner = dev;
    enum ggml_backend_dev_type t = ggml_backend_dev_type(owner);
    sipp_buft_place p = {0};
    p.host = ggml_backend_buft_is_host(buft) || t == GGML_BACKEND_DEVICE_TYPE_CPU ||
             t == GGML_BACKEND_DEVICE_TYPE_ACCEL;
    /* host memory shows under the CPU that computes with it; a device's own memory under it */
    const char *device = ggml_backend_dev_name(owner);
    if (p.host && t != GGML_BACKEND_DEVICE_TYPE_CPU) {
        ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
        if (cpu) device = ggml_backend_dev_name(cpu);
    }
    sipp_strlcpy(p.device, device, sizeof p.device);
    if (extra) {
        const char *layout = name;
        size_t dl = strlen(device);
        if (strncmp(layout, device, dl) == 0 && layout[dl] == '_') layout += dl + 1;
        sipp_strlcpy(p.layout, layout, sizeof p.layout);
    }
    sipp_buffers_learn_one(name, &p);
}

void sipp_buffers_learn(void) {
    for (size_t i = 0; i < ggml_backend_dev_count(); i++) {
        ggml_backend_dev_t dev = ggml_backend_dev_get(i);
        learn_buft(dev, ggml_backend_dev_buffer_type(dev), false);
        learn_buft(dev, ggml_backend_dev_host_buffer_type(dev), false);
        ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
        ggml_backend_dev_get_extra_bufts_t get_extra =
            reg ? (ggml_backend_dev_get_extra_bufts_t)ggml_backend_reg_get_proc_address(
                      reg, "ggml_backend_dev_get_extra_bufts")
                : NULL;
        ggml_backend_buffer_type_t *extra = get_extra ? get_extra(dev) : NULL;
        for (; extra && *extra; extra++)
            learn_buft(dev, *extra, true);
    }
}

/* llama.cpp asks with a batch of this many rows (llama-model.cpp, weight_buft_supported). */
#define LAYOUT_PROBE_ROWS 512

bool sipp_cpu_layout_takes(const char *type_name, int64_t width) {
    ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    ggml_backend_reg_t reg = cpu ? ggml_backend_dev_backend_reg(cpu) : NULL;
    ggml_backend_dev_get_extra_bufts_t get_extra =
        reg ? (ggml_backend_dev_get_extra_bufts_t)ggml_backend_reg_get_proc_address(
                  reg, "ggml_backend_dev_get_extra_bufts")
            : NULL;
    ggml_backend_buffer_type_t *extra = get_extra ? get_extra(cpu) : NULL;
    if (!extra || !*extra || width <= 0) return false;
    int type = 0;
    while (type < GGML_TYPE_COUNT && !(ggml_type_name(type) && strcmp(ggml_type_name(type), type_name) == 0))
        type++;
    if (type == GGML_TYPE_COUNT || ggml_blck_size(type) <= 0 || width % ggml_blck_size(type) != 0)
        return false;
    struct ggml_init_params ip = {
        .mem_size = 4 * ggml_tensor_overhead(), .mem_buffer = NULL, .no_alloc = true};
    struct ggml_context *ctx = ggml_init(ip);
    if (!ctx) return false;
    struct ggml_tensor *w = ggml_new_tensor_2d(ctx, type, width, width);
    struct ggml_tensor *op =
        ggml_mul_mat(ctx, w, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, width, LAYOUT_PROBE_ROWS));
    bool takes = false;
    for (; !takes && *extra; extra++) {
        ggml_backend_buffer_t buf = ggml_backend_buft_alloc_buffer(*extra, 0);
        if (!buf) continue;
        w->buffer = buf;
        takes = ggml_backend_dev_supports_op(cpu, op);
        w->buffer = NULL;
        ggml_backend_buffer_free(buf);
    }
    ggml_free(ctx);
    return takes;
}

bool sipp_buft_place_of(const char *name, size_t len, sipp_buft_place *out) {
    int best = -1;
    size_t best_len = 0;
    pthread_mutex_lock(&bufts_lock);
    for (int i = 0; i < n_bufts; i++) {
        size_t n = strlen(bufts[i].name);
        if (n > len || strncmp(bufts[i].name, name, n) != 0) continue;
        if (n < len && name[n] != '_') continue;
        if (best < 0 || n > best_len) best = i, best_len = n;
    }
    if (best >= 0) *out = bufts[best].place;
    pthread_mutex_unlock(&bufts_lock);
    return best >= 0;
}

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
    sipp_memory_kind kind = SIPP_MEMORY_COMPUTE;                     /* compute, output */
    if (strstr(kind_words, " model") || strstr(kind_words, " LoRA")) /* a LoRA adapter's weights */
        kind = SIPP_MEMORY_WEIGHTS;
    else if (strstr(kind_words, " KV") || strstr(kind_words, " RS") || strstr(kind_words, " state"))
        kind = SIPP_MEMORY_KV;
    uint64_t bytes = (uint64_t)(mib * MIB + 0.5);
    sipp_buft_place place;
    if (sipp_buft_place_of(buft, buft_len, &place)) {
        if (place.host)
            sipp_memory_add(m, NULL, 0, kind, bytes);
        else
            sipp_memory_add(m, place.device, strlen(place.device), kind, bytes);
    } else if (is_host(buft, buft_len)) {
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
