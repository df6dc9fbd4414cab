/*
 * recipes.c: the recipe x backend matrix (sipp.h, "recipes"): which library serves a kind of model,
 * and on which backend it is installed, installable or unsupported on this host.
 *
 * One row per recipe says what it serves, the kind that serves its targets in the gateway, the
 * backends its library runs on, and the file of the artifact that carries the library. A recipe is
 * compiled on a backend when the artifact has both that file and the backend's module; a backend
 * the recipe runs on but the artifact lacks is installable when the host could run it (its driver
 * is there: an NVIDIA driver for cuda, a Vulkan driver for vulkan, macOS for metal), else
 * unsupported, with the reason. What is reported comes from the same discovery loads use
 * (sipp_host_discover), so "installed and available" means a load would find the device.
 *
 * The auto choice follows Lemonade's rule (sipp.h): the first installed backend in auto's order
 * that auto may use, else the first installable one.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "util/util.h"

#define BIT(id) (1u << (id))
#define GPU_BACKENDS (BIT(SIPP_BACKEND_CUDA) | BIT(SIPP_BACKEND_METAL) | BIT(SIPP_BACKEND_VULKAN))
#define NVIDIA_DRIVER "/proc/driver/nvidia/version"
#define ORDER_SIZE 128
#define ICD_SUFFIX ".json"
#define LAVAPIPE_ICD "lvp_icd"
#define DRI_DIR "/dev/dri" /* a GPU's render node (renderD128, ...) is there */
#define RENDER_NODE "renderD"

/* Where a Vulkan loader finds its drivers' manifests (a driver installed is one there). */
static const char *const vulkan_icd_dirs[] = {"/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d",
                                              "/usr/local/share/vulkan/icd.d", NULL};

typedef struct recipe_row {
    const char *name;
    const char *serves;
    const char *kind;
    unsigned backends;   /* BIT(id) per backend its library runs on */
    const char *library; /* the artifact's file that carries it; NULL: linked into libsipp */
    const char *build;   /* how an artifact gains that file */
} recipe_row;

/* The matrix's rows. A new recipe is a row here and a kind in src/gateway/kinds/. */
static const recipe_row recipes[] = {
    {"llamacpp", "text, embeddings, rerank; images and audio in (libmtmd)", "llama",
     BIT(SIPP_BACKEND_CPU) | GPU_BACKENDS | BIT(SIPP_BACKEND_RPC), "libllama.so", "make"},
    {"whispercpp", "speech to text (whisper.cpp models)", "whisper", BIT(SIPP_BACKEND_CPU) | GPU_BACKENDS,
     "libwhisper.so", "make (deps/build-whisper.sh builds libwhisper from the pinned whisper.cpp)"},
    {"tts", "text to speech (Pocket TTS, Qwen3-TTS through libmtmd)", "tts",
     BIT(SIPP_BACKEND_CPU) | GPU_BACKENDS, "libmtmd.so", "make (builds libmtmd from the pinned llama.cpp)"},
    {"flite", "text to speech (flite voices, no model file)", "tts", BIT(SIPP_BACKEND_CPU), NULL, NULL},
};

/* The backends of the matrix, in the order it lists them (webgpu runs in browsers only). */
static const sipp_backend_id listed[] = {SIPP_BACKEND_CPU, SIPP_BACKEND_VULKAN, SIPP_BACKEND_CUDA,
                                         SIPP_BACKEND_METAL, SIPP_BACKEND_RPC};
#define N_LISTED (sizeof listed / sizeof listed[0])

/* Whether dir holds a Vulkan driver's manifest (a .json file); hardware: one that is not lavapipe's
 * (lvp_icd.*.json), the software driver auto never picks. */
static bool dir_has_driver(const char *dir, bool hardware) {
    DIR *d = opendir(dir);
    if (!d) return false;
    bool found = false;
    size_t ns = strlen(ICD_SUFFIX);
    struct dirent *e;
    while (!found && (e = readdir(d))) {
        size_t n = strlen(e->d_name);
        found = n > ns && strcmp(e->d_name + n - ns, ICD_SUFFIX) == 0 &&
                !(hardware && strncmp(e->d_name, LAVAPIPE_ICD, strlen(LAVAPIPE_ICD)) == 0);
    }
    closedir(d);
    return found;
}

static bool dir_has_prefix(const char *dir, const char *prefix) {
    DIR *d = opendir(dir);
    if (!d) return false;
    bool found = false;
    struct dirent *e;
    while (!found && (e = readdir(d)))
        found = strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return found;
}

static bool vulkan_driver_present(bool hardware) {
    for (int i = 0; vulkan_icd_dirs[i]; i++)
        if (dir_has_driver(vulkan_icd_dirs[i], hardware)) return true;
    return false;
}

/* Whether this host could run backend id at all (a driver for it is there); else why not. */
static bool host_can(const sipp_host_view *view, sipp_backend_id id, char *why, size_t n) {
    if (sipp_host_count(view, id) > 0) return true;
    switch (id) {
    case SIPP_BACKEND_CUDA:
        if (access(NVIDIA_DRIVER, R_OK) == 0) return true;
        snprintf(why, n, "no NVIDIA driver on this host (%s)", NVIDIA_DRIVER);
        return false;
    case SIPP_BACKEND_METAL:
#ifdef __APPLE__
        return true;
#else
        snprintf(why, n, "metal runs on macOS only");
        return false;
#endif
    case SIPP_BACKEND_VULKAN:
        if (vulkan_driver_present(false)) return true;
        snprintf(why, n,
                 "no Vulkan driver on this host: install libvulkan1 and a driver (mesa-vulkan-drivers)");
        return false;
    default: return true;
    }
}

/* Whether the artifact carries the recipe's library. */
static bool has_library(const recipe_row *r) {
    if (!r->library) return true;
    const char *dir = sipp_runtime_artifact_dir();
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir ? dir : ".", r->library);
    return access(path, R_OK) == 0;
}

static void fill_backend(const recipe_row *r, const sipp_host_view *view, sipp_backend_id id, bool library,
                         sipp_recipe_backend *b) {
    const char *name = sipp_backend_name(id);
    sipp_strlcpy(b->name, name, sizeof b->name);
    if (!(r->backends & BIT(id))) {
        b->state = SIPP_RECIPE_UNSUPPORTED;
        snprintf(b->note, sizeof b->note, "%s does not run on %s", r->name, name);
        return;
    }
    bool module = view->compiled[id];
    b->compiled = module && library;
    b->available = b->compiled && sipp_host_count(view, id) > 0;
    if (b->compiled) {
        b->state = SIPP_RECIPE_INSTALLED;
    } else if (!host_can(view, id, b->note, sizeof b->note)) {
        b->state = SIPP_RECIPE_UNSUPPORTED;
    } else {
        b->state = SIPP_RECIPE_INSTALLABLE;
        if (!module)
            snprintf(b->note, sizeof b->note, "sipp build --backend %s (or make BACKENDS=\"cpu %s\")", name,
                     name);
        else
            snprintf(b->note, sizeof b->note, "%s", r->build);
    }
}

/* Whether auto may pick b: it is there and a device auto takes is visible (auto never picks a
 * software renderer, nor rpc, whose servers must be named). */
static bool auto_usable(const sipp_host_view *view, sipp_backend_id id, const sipp_recipe_backend *b) {
    if (id == SIPP_BACKEND_CPU) return true;
    if (id == SIPP_BACKEND_RPC || !b->available) return false;
    for (int i = 0; i < view->n_devices; i++)
        if (view->devices[i].backend == id && !view->devices[i].software) return true;
    return false;
}

/* Whether auto could use backend id once installed: a driver of a device it takes is there (for
 * vulkan, one besides lavapipe, and a GPU's render node: mesa installs its drivers' manifests
 * whether or not the GPUs are there). */
static bool auto_could(const sipp_host_view *view, sipp_backend_id id) {
    if (id == SIPP_BACKEND_RPC) return false;
    if (id != SIPP_BACKEND_VULKAN) return true;
    for (int i = 0; i < view->n_devices; i++)
        if (view->devices[i].backend == id && !view->devices[i].software) return true;
    return vulkan_driver_present(true) && dir_has_prefix(DRI_DIR, RENDER_NODE);
}

static const sipp_recipe_backend *find_backend(const sipp_recipe_info *info, const char *name) {
    for (int i = 0; i < info->n_backends; i++)
        if (strcmp(info->backends[i].name, name) == 0) return &info->backends[i];
    return NULL;
}

/* auto's order: $SIPP_BACKEND_ORDER (or the default), then cpu. */
static void auto_order(char *order, size_t n) {
    const char *o = getenv("SIPP_BACKEND_ORDER");
    snprintf(order, n, "%s,cpu", o && *o ? o : SIPP_DEFAULT_ORDER);
}

/* Lemonade's rule: the first installed backend auto may use, else the first installable one. */
static void choose_auto(const sipp_host_view *view, sipp_recipe_info *info) {
    char order[ORDER_SIZE], *save = NULL;
    auto_order(order, sizeof order);
    const char *first_installable = NULL;
    for (char *tok = strtok_r(order, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        sipp_backend_id id;
        const sipp_recipe_backend *b = find_backend(info, tok);
        if (!b || sipp_backend_parse(tok, &id, NULL) != SIPP_OK) continue;
        if (b->state == SIPP_RECIPE_INSTALLED && auto_usable(view, id, b)) {
            sipp_strlcpy(info->auto_backend, b->name, sizeof info->auto_backend);
            snprintf(info->auto_reason, sizeof info->auto_reason,
                     "%s: the first installed backend auto may use%s%s%s", b->name,
                     first_installable ? " (" : "", first_installable ? first_installable : "",
                     first_installable ? ", earlier in the order, is only installable)" : "");
            return;
        }
        if (b->state == SIPP_RECIPE_INSTALLABLE && !first_installable && auto_could(view, id))
            first_installable = b->name;
    }
    if (first_installable) {
        sipp_strlcpy(info->auto_backend, first_installable, sizeof info->auto_backend);
        snprintf(info->auto_reason, sizeof info->auto_reason,
                 "%s: nothing is installed for %s; the first installable backend", first_installable,
                 info->name);
    } else {
        snprintf(info->auto_reason, sizeof info->auto_reason, "no backend of %s is supported on this host",
                 info->name);
    }
}

int sipp_recipes_list(sipp_recipe_info *out, int cap) {
    int n = (int)(sizeof recipes / sizeof recipes[0]);
    if (sipp_runtime_init(NULL, NULL) != SIPP_OK) return 0;
    sipp_host_view view;
    sipp_host_discover(&view);
    for (int i = 0; i < n && i < cap; i++) {
        const recipe_row *r = &recipes[i];
        sipp_recipe_info *info = &out[i];
        memset(info, 0, sizeof *info);
        sipp_strlcpy(info->name, r->name, sizeof info->name);
        sipp_strlcpy(info->serves, r->serves, sizeof info->serves);
        sipp_strlcpy(info->kind, r->kind, sizeof info->kind);
        bool library = has_library(r);
        for (size_t k = 0; k < N_LISTED && k < SIPP_RECIPE_MAX_BACKENDS; k++)
            fill_backend(r, &view, listed[k], library, &info->backends[info->n_backends++]);
        choose_auto(&view, info);
    }
    return n;
}
