/*
 * select.c: which backend a load uses, and why.
 *
 * The rules, in order:
 *   - An explicit backend always wins. cpu always works. A GPU backend must be compiled (its module
 *     is in the artifact) and available (a device of it is visible); otherwise the load fails with a
 *     message that names the missing half and the next step, instead of silently running on the CPU.
 *   - auto walks the preference order (SIPP_BACKEND_ORDER or the config, default cuda, metal,
 *     vulkan, webgpu) and takes the first backend that is compiled and has a hardware device.
 *     A software device (lavapipe) is never chosen by auto: it is slower than the CPU backend on the
 *     same cores, so picking it would be a silent slowdown. Only an explicit choice runs on it.
 *   - Otherwise auto falls back to cpu, and the reason lists why each GPU backend was passed over.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backend/backend.h"
#include "util/util.h"

#define ORDER_MAX 256

bool sipp_device_is_software(const char *d) {
    static const char *const markers[] = {"llvmpipe", "lavapipe", "swiftshader", "software rasterizer"};
    for (size_t i = 0; i < sizeof markers / sizeof markers[0]; i++)
        if (d && strcasestr(d, markers[i])) return true;
    return false;
}

int sipp_host_count(const sipp_host_view *view, sipp_backend_id id) {
    int n = 0;
    for (int i = 0; i < view->n_devices; i++)
        n += view->devices[i].backend == id;
    return n;
}

static void compiled_list(const sipp_host_view *view, char *out, size_t n) {
    out[0] = '\0';
    for (int i = 1; i < SIPP_BACKEND_COUNT; i++) {
        if (!view->compiled[i]) continue;
        size_t len = strlen(out);
        snprintf(out + len, n - len, "%s%s", len ? ", " : "", sipp_backend_name((sipp_backend_id)i));
    }
}

/* The first device of a backend, hardware preferred; -1 if none. */
static int first_device(const sipp_host_view *view, sipp_backend_id id, bool hardware_only) {
    int soft = -1;
    for (int i = 0; i < view->n_devices; i++) {
        if (view->devices[i].backend != id) continue;
        if (!view->devices[i].software) return i;
        if (soft < 0) soft = i;
    }
    return hardware_only ? -1 : soft;
}

static const char *visibility_hint(sipp_backend_id id) {
    switch (id) {
    case SIPP_BACKEND_VULKAN:
        return "no Vulkan device is visible: install a Vulkan driver (apt-get install mesa-vulkan-drivers "
               "libvulkan1); a software device such as lavapipe is only used when GGML_VK_VISIBLE_DEVICES "
               "names "
               "it (GGML_VK_VISIBLE_DEVICES=0)";
    case SIPP_BACKEND_CUDA:
        return "no CUDA device is visible: check the NVIDIA driver (nvidia-smi) and CUDA_VISIBLE_DEVICES";
    case SIPP_BACKEND_METAL: return "no Metal device is visible: Metal needs macOS on Apple silicon";
    case SIPP_BACKEND_RPC:
        return "its devices are rpc servers: give them with --rpc HOST:PORT[,...] or SIPP_RPC_SERVERS (start "
               "one "
               "with sipp rpc-server)";
    default: return "no device of it is visible";
    }
}

static sipp_status explicit_choice(const sipp_host_view *view, sipp_backend_id id, sipp_policy_result *out,
                                   char *errbuf) {
    const char *name = sipp_backend_name(id);
    if (!view->compiled[id]) {
        char compiled[128];
        compiled_list(view, compiled, sizeof compiled);
        return sipp_fail(errbuf, SIPP_ERR_BACKEND,
                         "backend '%s' is not compiled into this build (compiled: %s). Rebuild with: make "
                         "BACKENDS=\"cpu %s\", or sipp build --backend %s",
                         name, compiled, name, name);
    }
    int dev = first_device(view, id, false);
    if (dev < 0)
        return sipp_fail(errbuf, SIPP_ERR_BACKEND, "backend '%s' is compiled but not available: %s", name,
                         visibility_hint(id));
    out->backend = id;
    out->device = dev;
    snprintf(out->reason, sizeof out->reason, "requested %s; device %s (%s)%s", name, view->devices[dev].name,
             view->devices[dev].description, view->devices[dev].software ? ", a software device" : "");
    return SIPP_OK;
}

sipp_status sipp_policy_decide(const sipp_host_view *view, const char *requested, const char *order,
                               sipp_policy_result *out, char *errbuf) {
    sipp_backend_id id;
    sipp_status st = sipp_backend_parse(requested, &id, errbuf);
    if (st != SIPP_OK) return st;
    memset(out, 0, sizeof *out);
    out->device = -1;
    out->backend = SIPP_BACKEND_CPU;
    if (id == SIPP_BACKEND_CPU) {
        snprintf(out->reason, sizeof out->reason, "requested cpu");
        return SIPP_OK;
    }
    if (id != SIPP_BACKEND_AUTO) return explicit_choice(view, id, out, errbuf);

    if (!order || !*order) order = getenv("SIPP_BACKEND_ORDER");
    if (!order || !*order) order = SIPP_DEFAULT_ORDER;
    char buf[ORDER_MAX];
    sipp_strlcpy(buf, order, sizeof buf);

    /* The whole order is checked first: a typo is an error even behind a usable backend. */
    sipp_backend_id cands[ORDER_MAX];
    int n_cands = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
        if (sipp_backend_parse(tok, &cands[n_cands], NULL) != SIPP_OK || cands[n_cands] == SIPP_BACKEND_AUTO)
            return sipp_fail(
                errbuf, SIPP_ERR_INVALID_ARGUMENT,
                "backend order '%s': '%s' is not a backend name (use e.g. cuda,metal,vulkan,webgpu)", order,
                tok);
        n_cands++;
    }
    char why[256] = "";
    for (int c = 0; c < n_cands; c++) {
        sipp_backend_id cand = cands[c];
        if (cand == SIPP_BACKEND_CPU) break; /* cpu in the order means: stop looking */
        const char *skip = NULL;
        char soft_why[160];
        if (!view->compiled[cand]) {
            skip = "not compiled";
        } else if (sipp_host_count(view, cand) == 0) {
            skip = "no device visible";
        } else {
            int dev = first_device(view, cand, true);
            if (dev < 0) {
                int s = first_device(view, cand, false);
                snprintf(soft_why, sizeof soft_why, "only a software device (%s), which auto never picks",
                         view->devices[s].description);
                skip = soft_why;
            } else {
                out->backend = cand;
                out->device = dev;
                snprintf(out->reason, sizeof out->reason,
                         "auto: %s is the first of [%s] compiled and available; "
                         "device %s (%s)",
                         sipp_backend_name(cand), order, view->devices[dev].name,
                         view->devices[dev].description);
                return SIPP_OK;
            }
        }
        size_t len = strlen(why);
        snprintf(why + len, sizeof why - len, "%s%s: %s", len ? "; " : "", sipp_backend_name(cand), skip);
    }
    snprintf(out->reason, sizeof out->reason, "auto: no GPU backend usable (%s), using cpu",
             *why ? why : "none in the order");
    return SIPP_OK;
}
