/*
 * names.c: the one table of backend names. Every place that prints, parses or maps a backend name
 * goes through it, so "vulkan" means the same thing in the CLI, the config and the gateway.
 */
#include <string.h>
#include <strings.h>

#include "backend/backend.h"
#include "util/util.h"

static const struct {
    const char *name;
    const char *ggml_name;
} backend_table[SIPP_BACKEND_COUNT] = {
    [SIPP_BACKEND_AUTO] = {"auto", NULL},         [SIPP_BACKEND_CPU] = {"cpu", "CPU"},
    [SIPP_BACKEND_CUDA] = {"cuda", "CUDA"},       [SIPP_BACKEND_METAL] = {"metal", "Metal"},
    [SIPP_BACKEND_VULKAN] = {"vulkan", "Vulkan"}, [SIPP_BACKEND_WEBGPU] = {"webgpu", "WebGPU"},
    [SIPP_BACKEND_RPC] = {"rpc", "RPC"},
};

const char *sipp_backend_name(sipp_backend_id id) {
    return id < SIPP_BACKEND_COUNT ? backend_table[id].name : "unknown";
}

const char *sipp_backend_ggml_name(sipp_backend_id id) {
    return id < SIPP_BACKEND_COUNT ? backend_table[id].ggml_name : NULL;
}

sipp_status sipp_backend_parse(const char *name, sipp_backend_id *out, char *errbuf) {
    if (!name || !*name) name = "auto";
    for (int i = 0; i < SIPP_BACKEND_COUNT; i++) {
        if (strcasecmp(name, backend_table[i].name) == 0) {
            *out = (sipp_backend_id)i;
            return SIPP_OK;
        }
    }
    if (strcasecmp(name, "all") == 0)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                         "backend 'all' is a build selector (sipp build --backend all), not a backend to run "
                         "on; choose one of: auto, cpu, cuda, metal, vulkan, webgpu, rpc");
    return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                     "unknown backend '%s'; choose one of: auto, cpu, cuda, metal, vulkan, webgpu, rpc",
                     name);
}

sipp_backend_id sipp_backend_from_ggml(const char *ggml_name) {
    for (int i = 1; i < SIPP_BACKEND_COUNT; i++)
        if (ggml_name && strcasecmp(ggml_name, backend_table[i].ggml_name) == 0) return (sipp_backend_id)i;
    /* Each connected rpc server registers as "RPC[host:port]". */
    if (ggml_name && strncmp(ggml_name, "RPC[", 4) == 0) return SIPP_BACKEND_RPC;
    return SIPP_BACKEND_COUNT;
}

sipp_status sipp_backend_check_name(const char *name, char *errbuf) {
    sipp_backend_id id;
    return sipp_backend_parse(name, &id, errbuf);
}
