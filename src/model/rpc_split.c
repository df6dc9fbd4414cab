/*
 * rpc_split.c: how a model is split between the local device and rpc servers (backend "rpc").
 *
 * llama.cpp places layers by two numbers: n_gpu_layers (how many of the last layers, counting the
 * output layer, leave the local CPU) and tensor_split (how those divide among the devices given
 * in llama_model_params.devices). sipp's user speaks of shares instead, one per host, the local one
 * first: "tensor_split = 1,2,2" or, by default, each host's free memory. This file turns shares
 * into those two numbers. The split that llama.cpp then really makes is read back from its log
 * (placement.c) and that is what every report shows.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/rpc.h"
#include "model/model.h"
#include "util/util.h"

#define BYTES_PER_MIB (1024.0 * 1024.0)
#define SERVERS_ENV "SIPP_RPC_SERVERS"

static double free_mib(ggml_backend_dev_t dev, ggml_backend_dev_t cpu) {
    size_t free_b = 0, total_b = 0;
    ggml_backend_dev_memory(dev, &free_b, &total_b);
    /* A device that reports nothing counts as the host's memory, as llama.cpp counts it. */
    if (free_b == 0 && total_b == 0) ggml_backend_dev_memory(cpu, &free_b, &total_b);
    return (double)free_b / BYTES_PER_MIB;
}

sipp_status sipp_rpc_plan_load(const sipp_model_params *params, int n_layer, sipp_rpc_plan *plan,
                               char *errbuf) {
    memset(plan, 0, sizeof *plan);
    const char *list =
        params->rpc_servers && *params->rpc_servers ? params->rpc_servers : getenv(SERVERS_ENV);
    char endpoints[SIPP_RPC_MAX_SERVERS][SIPP_RPC_ENDPOINT_MAX];
    int n_endpoints = 0;
    sipp_status st = sipp_rpc_parse_list(list, endpoints, SIPP_RPC_MAX_SERVERS, &n_endpoints, errbuf);
    if (st != SIPP_OK) return st;
    for (int i = 0; i < n_endpoints; i++) {
        int got = 0;
        int room = SIPP_MAX_PLACEMENT - 1 - plan->n_devices;
        st = sipp_rpc_connect(endpoints[i], plan->devices + plan->n_devices, room, &got, errbuf);
        if (st != SIPP_OK) return st;
        plan->n_devices += got;
    }

    /* shares[0] is the local CPU's, shares[1 + i] device i's. */
    float shares[SIPP_MAX_PLACEMENT];
    ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    int used = 0;
    if (params->tensor_split && *params->tensor_split) {
        if ((st = sipp_rpc_parse_split(params->tensor_split, shares, plan->n_devices + 1, errbuf)) != SIPP_OK)
            return st;
        used = snprintf(plan->reason, sizeof plan->reason, "layers by tensor_split %s (local first)",
                        params->tensor_split);
    } else {
        shares[0] = (float)free_mib(cpu, cpu);
        used =
            snprintf(plan->reason, sizeof plan->reason, "layers by free memory: local %.0f MiB", shares[0]);
        for (int i = 0; i < plan->n_devices; i++) {
            shares[1 + i] = (float)free_mib(plan->devices[i], cpu);
            if (used < (int)sizeof plan->reason)
                used +=
                    snprintf(plan->reason + used, sizeof plan->reason - (size_t)used, ", %s %.0f MiB",
                             sipp_rpc_endpoint_of(ggml_backend_dev_name(plan->devices[i])), shares[1 + i]);
        }
    }
    /* Whole layers per device by the largest remainder, so the counts add up to n_layer. */
    double total = 0;
    for (int i = 0; i <= plan->n_devices; i++)
        total += shares[i];
    int counts[SIPP_MAX_PLACEMENT] = {0}, given = 0;
    double rest[SIPP_MAX_PLACEMENT] = {0};
    for (int i = 0; i <= plan->n_devices; i++) {
        double exact = n_layer * (double)shares[i] / total;
        counts[i] = (int)floor(exact);
        rest[i] = exact - counts[i];
        given += counts[i];
    }
    while (given < n_layer) {
        int best = 0;
        for (int i = 1; i <= plan->n_devices; i++)
            if (rest[i] > rest[best]) best = i;
        counts[best]++;
        rest[best] = -1;
        given++;
    }
    /* The local device keeps the first counts[0] layers; llama.cpp gives everything after them,
     * the output layer included, to the remote devices by the split's cumulative fractions. Whole
     * counts (the output counted with the last device that has layers) make those fractions fall
     * exactly on layer boundaries. */
    int remote = n_layer - counts[0], last = -1;
    for (int i = 0; i < plan->n_devices; i++) {
        plan->split[i] = (float)counts[1 + i];
        if (counts[1 + i] > 0) last = i;
    }
    if (last >= 0) plan->split[last] += 1;
    plan->gpu_layers = remote > 0 ? remote + 1 : 0;
    return SIPP_OK;
}

void sipp_rpc_plan_describe(const sipp_model *m, sipp_backend_decision *d) {
    size_t used = 0;
    d->devices[0] = '\0';
    d->gpu_layers = 0;
    for (int i = 0; i < m->n_placement; i++) {
        const sipp_placement *p = &m->placement[i];
        if (p->n_layers == 0 && !p->output) continue;
        if (strcmp(p->host, "local") != 0) d->gpu_layers += p->n_layers;
        if (used < sizeof d->devices)
            used += (size_t)snprintf(d->devices + used, sizeof d->devices - used, "%s%s", used ? "," : "",
                                     p->device);
    }
}
