/*
 * backend.h: backend names, device discovery and the selection policy (internal to libsipp).
 *
 * Two questions decide where a model runs. Compiled: is the backend's ggml module in the active
 * artifact (the process registered it)? Available: is at least one of its devices visible? The
 * policy answers "which backend for this load" from those facts, the user's request and the
 * preference order, and always records why. It works on plain descriptions of devices so that
 * tests can inject any machine.
 */
#ifndef SIPP_BACKEND_H
#define SIPP_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ggml.h"
#include "sipp.h"

/* The backend names sipp knows, in one table. "all" is a build selector, not a runtime name. */
typedef enum sipp_backend_id {
    SIPP_BACKEND_AUTO = 0,
    SIPP_BACKEND_CPU,
    SIPP_BACKEND_CUDA,
    SIPP_BACKEND_METAL,
    SIPP_BACKEND_VULKAN,
    SIPP_BACKEND_WEBGPU,
    SIPP_BACKEND_RPC,
    SIPP_BACKEND_COUNT
} sipp_backend_id;

const char *sipp_backend_name(sipp_backend_id id);
/* ggml's registry name for the backend ("CPU", "Vulkan", ...), NULL for auto. */
const char *sipp_backend_ggml_name(sipp_backend_id id);
/* Parses a name; SIPP_ERR_INVALID_ARGUMENT with a message listing the names otherwise. */
sipp_status sipp_backend_parse(const char *name, sipp_backend_id *out, char *errbuf);
/* Maps a ggml registry name to sipp's id; SIPP_BACKEND_COUNT if sipp has no name for it. */
sipp_backend_id sipp_backend_from_ggml(const char *ggml_name);

#define SIPP_MAX_DEVICES 16
#define SIPP_DEFAULT_ORDER "cuda,metal,vulkan,webgpu"

typedef enum sipp_device_kind {
    SIPP_DEVICE_CPU,
    SIPP_DEVICE_GPU,
    SIPP_DEVICE_IGPU,
    SIPP_DEVICE_ACCEL,
} sipp_device_kind;

typedef struct sipp_device_desc {
    sipp_backend_id backend;
    char name[64];         /* ggml's device name: "CPU", "Vulkan0" */
    char description[128]; /* "llvmpipe (LLVM 15.0.6, 256 bits)" */
    sipp_device_kind kind;
    bool software; /* a software renderer (lavapipe/llvmpipe, SwiftShader) */
    size_t memory_free;
    size_t memory_total;
    int index; /* ggml device index, for the loader */
} sipp_device_desc;

typedef struct sipp_host_view {
    bool compiled[SIPP_BACKEND_COUNT];
    sipp_device_desc devices[SIPP_MAX_DEVICES];
    int n_devices;
} sipp_host_view;

/* What the process has now: the registered backends and their devices. Needs the runtime. */
void sipp_host_discover(sipp_host_view *view);

/* Number of devices of a backend in the view. */
int sipp_host_count(const sipp_host_view *view, sipp_backend_id id);

typedef struct sipp_policy_result {
    sipp_backend_id backend;
    int device; /* index into view->devices; -1 for cpu */
    char reason[256];
} sipp_policy_result;

/* Decides the backend for a load. requested: a backend name (auto, cpu, vulkan, ...). order: a
 * comma-separated preference for auto (NULL: $SIPP_BACKEND_ORDER, else SIPP_DEFAULT_ORDER).
 * Fails with SIPP_ERR_BACKEND naming which half (compiled or available) is missing and what to do. */
sipp_status sipp_policy_decide(const sipp_host_view *view, const char *requested, const char *order,
                               sipp_policy_result *out, char *errbuf);

/* GPU residency lease (lease.c). The key names the lease for release. */
bool sipp_lease_enabled(void);
sipp_status sipp_lease_check_memory(const sipp_device_desc *dev, uint64_t need_bytes, char *errbuf);
sipp_status sipp_lease_acquire(const char *backend, const char *device, char *key_out, size_t key_len,
                               char *errbuf);
void sipp_lease_release(const char *key);

/* llama.cpp's and ggml's log (log.c). Sets how much of it reaches stderr. */
void sipp_log_route(sipp_log_level level);

/* The callback llama.cpp and ggml log through; a library of their family with a log of its own
 * (libmtmd) is given it too, so that its lines are captured and filtered alike. */
void sipp_log_callback(enum ggml_log_level level, const char *text, void *user);

/* Keeps the calling thread's first llama.cpp or ggml error line from now on in buf (SIPP_ERROR_SIZE
 * bytes, emptied here), instead of printing it; NULL stops. */
void sipp_log_capture(char *buf);

/* Backend buffers (buffers.c). While a thread has a capture set, every "... buffer size = X MiB"
 * line llama.cpp logs on that thread is added to m; NULL stops. */
typedef enum sipp_memory_kind { SIPP_MEMORY_WEIGHTS, SIPP_MEMORY_KV, SIPP_MEMORY_COMPUTE } sipp_memory_kind;
void sipp_buffers_capture(sipp_memory *m);
/* Called by log.c for every line. */
void sipp_buffers_note(const char *line);
/* Adds one buffer line's size to m; false when the line reports no buffer. */
bool sipp_buffers_parse(const char *line, sipp_memory *m);
/* Adds bytes of a kind to m: on the host (device NULL) or on device[0..device_len). */
void sipp_memory_add(sipp_memory *m, const char *device, size_t device_len, sipp_memory_kind kind,
                     uint64_t bytes);

/* Where a ggml buffer type's memory lives, as ggml says (buffers.c). A CPU "extra" buffer type
 * (AMX, CPU_REPACK, KleidiAI: weights in a layout the CPU's kernels prefer) is host memory of the
 * CPU device with a layout of its own; a GPU backend's pinned host buffers are host memory too. */
typedef struct sipp_buft_place {
    char device[64]; /* the device whose layers it holds: "CPU", "Vulkan0" */
    char layout[32]; /* an extra buffer type's layout ("AMX", "REPACK"); "" for the device's own */
    bool host;       /* the bytes are host RAM */
} sipp_buft_place;
/* Records every buffer type of every device ggml has registered (runtime init calls it once the
 * backend modules are loaded; again after devices are added). */
void sipp_buffers_learn(void);
/* Records one buffer type by name (what sipp_buffers_learn does for each; tests use it). */
void sipp_buffers_learn_one(const char *name, const sipp_buft_place *place);
/* The place of the buffer type a log line names: an exact name, or a known name followed by '_'
 * and a suffix ("CPU_Mapped" is CPU's memory mapped from the file). False when ggml never said. */
bool sipp_buft_place_of(const char *name, size_t len, sipp_buft_place *out);

/* Whether one of the CPU's extra buffer types (its layouts) would take a weight of this ggml type
 * ("q4_0") and width, asked of ggml the way llama.cpp asks when it places weights: a matrix
 * multiplication by such a weight, with the weight in a buffer of that type. */
bool sipp_cpu_layout_takes(const char *type_name, int64_t width);

/* Adds every place and kind of from to into. */
void sipp_memory_merge(sipp_memory *into, const sipp_memory *from);
/* Calls fn with every line llama.cpp or ggml logs on the calling thread (any level, before
 * filtering), until called again with NULL. */
typedef void (*sipp_log_observer)(const char *line, void *user);
void sipp_log_observe(sipp_log_observer fn, void *user);

/* True when a device description names a software renderer. */
bool sipp_device_is_software(const char *description);

#endif
