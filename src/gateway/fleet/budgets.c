/*
 * budgets.c: what the loaded models may hold, per place (the host, and each GPU device), and the
 * estimates residency charges a target before its load measures it: the host's budget is
 * [server] memory_budget_mb or the total RAM minus a margin; a device's, its free memory minus
 * $SIPP_GPU_MARGIN_MB. ctx_size "auto" is resolved here, before the targets start, as the largest
 * context whose estimate fits the budgets with the model alone. residency.c decides what is loaded
 * and evicted against these figures.
 */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/fleet/fleet.h"
#include "gateway/kinds/kinds.h"

#define MIB ((uint64_t)1 << 20)
#define HOST_MARGIN_MB 1024         /* left to the system by the default host budget */
#define HOST_MARGIN_SMALL_DIVISOR 4 /* ... or a quarter of RAM on machines with less than 4 margins */
#define DEFAULT_GPU_MARGIN_MB 512   /* as the GPU lease's $SIPP_GPU_MARGIN_MB */
#define CTX_AUTO_STEP 256           /* ctx_size "auto" picks a multiple of this: llama.cpp's KV padding */
#define CTX_AUTO_UNKNOWN_TRAIN 4096 /* ctx_size "auto"'s ceiling for a model that does not give its own */

uint64_t gw_place_bytes(const sipp_memory *m, const char *place) {
    if (!*place) return m->host_bytes;
    for (int i = 0; i < m->n_devices; i++)
        if (strcmp(m->devices[i].name, place) == 0) return m->devices[i].bytes;
    return 0;
}

static uint64_t host_total_bytes(void) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
}

uint64_t gw_budgets_default_host(void) {
    uint64_t total = host_total_bytes(), margin = HOST_MARGIN_MB * MIB;
    if (total < HOST_MARGIN_SMALL_DIVISOR * margin) margin = total / HOST_MARGIN_SMALL_DIVISOR;
    return total - margin;
}

static uint64_t gpu_margin(void) {
    const char *v = getenv("SIPP_GPU_MARGIN_MB");
    char *end;
    long long mb = v && *v ? strtoll(v, &end, 10) : -1;
    return mb >= 0 && v && !*end ? (uint64_t)mb * MIB : DEFAULT_GPU_MARGIN_MB * MIB;
}

void gw_budgets_init(gw_budgets *r, const gw_config *cfg) {
    r->n_places = 1;
    r->places[0].name[0] = '\0';
    r->places[0].budget =
        cfg->memory_budget_mb > 0 ? (uint64_t)cfg->memory_budget_mb * MIB : gw_budgets_default_host();
    sipp_device_info devs[SIPP_MEMORY_MAX_DEVICES];
    int n = sipp_devices_list(devs, SIPP_MEMORY_MAX_DEVICES);
    uint64_t margin = gpu_margin();
    for (int i = 0; i < n && i < SIPP_MEMORY_MAX_DEVICES; i++) {
        if (strcmp(devs[i].kind, "cpu") == 0) continue;
        gw_place_budget *p = &r->places[r->n_places++];
        snprintf(p->name, sizeof p->name, "%s", devs[i].name);
        p->budget = devs[i].memory_free > margin ? devs[i].memory_free - margin : 0;
    }
}

json_t *gw_budgets_json(const gw_config *cfg) {
    gw_budgets r;
    memset(&r, 0, sizeof r);
    gw_budgets_init(&r, cfg);
    json_t *a = json_array();
    for (int p = 0; p < r.n_places; p++) {
        bool host = !*r.places[p].name;
        const char *how =
            host ? cfg->memory_budget_mb > 0 ? "[server] memory_budget_mb" : "total RAM minus a margin"
                 : "free memory minus $SIPP_GPU_MARGIN_MB";
        json_array_append_new(a, json_pack("{s:s, s:I, s:s}", "place", host ? "host" : r.places[p].name,
                                           "budget_bytes", (json_int_t)r.places[p].budget, "from", how));
    }
    return a;
}

const gw_place_budget *gw_budgets_find(const gw_budgets *r, const char *name) {
    for (int i = 0; i < r->n_places; i++)
        if (strcmp(r->places[i].name, name) == 0) return &r->places[i];
    return NULL;
}

sipp_status gw_estimate_at(const gw_target_config *c, int ctx_size, sipp_memory *out, char *err) {
    const gw_kind *kind = gw_kind_of_config(c);
    if (!kind->estimate) {
        memset(out, 0, sizeof *out);
        return SIPP_OK;
    }
    return kind->estimate(c, ctx_size, out, err);
}

/* Whether m fits every place's budget on its own (no other model held). */
static bool fits_alone(const gw_budgets *r, const sipp_memory *m) {
    for (int p = 0; p < r->n_places; p++)
        if (gw_place_bytes(m, r->places[p].name) > r->places[p].budget) return false;
    for (int d = 0; d < m->n_devices; d++)
        if (!gw_budgets_find(r, m->devices[d].name) && m->devices[d].bytes) return false;
    return true;
}

/* The model's trained context (CTX_AUTO_UNKNOWN_TRAIN when it does not say); 0 when its header
 * cannot be read (err says why). */
static int64_t trained_context(const char *model, char *err) {
    char path[PATH_MAX];
    sipp_gguf_info *g = calloc(1, sizeof *g);
    int64_t n = 0;
    if (!g)
        sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    else if (sipp_store_resolve(model, path, sizeof path, err) == SIPP_OK &&
             sipp_gguf_inspect(path, g, err) == SIPP_OK)
        n = g->n_ctx_train > 0 ? g->n_ctx_train : CTX_AUTO_UNKNOWN_TRAIN;
    free(g);
    return n;
}

/* The largest context, a multiple of CTX_AUTO_STEP (llama.cpp's KV padding) and at most the model's
 * trained context, whose estimate fits the budgets beside nothing else; the smallest step when none
 * does (*fits false: its load will be refused with the figures). The estimate grows with the context
 * (the KV cache and the attention scores), so a binary search over the steps finds it. 0 when the
 * header cannot be read. */
static int fit_context(const gw_budgets *r, const gw_target_config *c, bool *fits, char *err) {
    int64_t train = trained_context(c->model_path, err);
    if (train > GW_MAX_CTX) train = GW_MAX_CTX;
    *fits = true;
    if (train <= CTX_AUTO_STEP) return (int)train;
    int lo = 0, hi = (int)(train / CTX_AUTO_STEP); /* lo: the largest step known to fit (0: none yet) */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        sipp_memory m;
        if (gw_estimate_at(c, mid * CTX_AUTO_STEP, &m, err) != SIPP_OK) return 0;
        if (fits_alone(r, &m))
            lo = mid;
        else
            hi = mid - 1;
    }
    *fits = lo > 0;
    return (lo > 0 ? lo : 1) * CTX_AUTO_STEP;
}

void gw_budgets_fit_contexts(gw_config *cfg) {
    gw_budgets r;
    memset(&r, 0, sizeof r);
    gw_budgets_init(&r, cfg);
    for (size_t i = 0; i < cfg->n_targets; i++) {
        gw_target_config *c = &cfg->targets[i];
        if (!gw_kind_of_config(c)->resident || !c->ctx_auto) continue;
        char err[SIPP_ERROR_SIZE];
        bool fits;
        int ctx = fit_context(&r, c, &fits, err);
        sipp_memory m;
        if (ctx <= 0 || gw_estimate_at(c, ctx, &m, err) != SIPP_OK) {
            fprintf(stderr,
                    "sipp: target '%s': ctx_size \"auto\" cannot be worked out (%s); it gets the default\n",
                    c->name, err);
            continue;
        }
        c->ctx_size = ctx;
        fprintf(stderr,
                "sipp: target '%s': ctx_size \"auto\" is %d tokens (KV %s/%s, %d slots): %" PRIu64
                " MiB estimated, the host budget %" PRIu64 " MiB%s\n",
                c->name, ctx, c->cache_type_k ? c->cache_type_k : "f16",
                c->cache_type_v ? c->cache_type_v : "f16", c->parallel, sipp_memory_total(&m) / MIB,
                r.places[0].budget / MIB,
                fits ? "" : "; it does not fit even so, and its load will be refused");
    }
}
