/*
 * memory.c: what a model and its engine hold in memory, estimated before a load and measured after.
 *
 * The measured figure is the sum of the backend buffers llama.cpp reported allocating while this
 * model loaded and this engine made its context (backend/buffers.c): weights per buffer type, the KV
 * cache, the output and compute buffers. That is what a gateway deciding what fits should count;
 * the process's RSS moves by about the same once the weights have been read (the test compares
 * the two).
 *
 * The estimate reads only the GGUF header and follows the same rules llama.cpp does, coarsely: the
 * tensors' bytes, split between host and device in proportion to the layers the backend policy
 * offloads (the output layer counts as one); the KV cache of the context the engine would make
 * (llama.cpp pads it to KV_PAD cells) at the engine's cache types (ggml's bytes per row of each);
 * and the compute buffer of one batch, which is about its largest tensor: the logits (n_vocab per
 * batch token) or, without flash attention, the attention scores (context per head per batch
 * token); and the weights the CPU module keeps in a layout of its own, twice. Measured against llama.cpp on
 * CPU it errs high by a few percent; a caller that has measured a load uses that figure next time.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend/backend.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "util/util.h"

#define KV_PAD 256 /* llama.cpp rounds the KV cache up to this many cells */
#define F32_BYTES 4
#define DEFAULT_BATCH 512
#define DEFAULT_CTX_CAP 4096
/* Per batch token, the compute buffer holds a few activations of n_embd besides its largest tensor;
 * this many covers llama's graph. */
#define ACTIVATIONS_EMBD 4

uint64_t sipp_memory_total(const sipp_memory *m) {
    uint64_t t = m->host_bytes;
    for (int i = 0; i < m->n_devices; i++)
        t += m->devices[i].bytes;
    return t;
}

static void add_split(sipp_memory *m, const char *device, double on_device, sipp_memory_kind kind,
                      uint64_t bytes) {
    uint64_t dev = device ? (uint64_t)((double)bytes * on_device) : 0;
    if (dev) sipp_memory_add(m, device, strlen(device), kind, dev);
    if (bytes > dev) sipp_memory_add(m, NULL, 0, kind, bytes - dev);
}

/* A projector's weights (mp->mmproj), where libmtmd puts them: on the model's GPU when offloaded. */
static sipp_status add_projector(sipp_memory *out, const sipp_model_params *mp, const char *device,
                                 char *errbuf) {
    sipp_gguf_info *p = calloc(1, sizeof *p);
    if (!p) return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory");
    sipp_status st = sipp_gguf_inspect(mp->mmproj, p, errbuf);
    uint64_t bytes = 0;
    for (int i = 0; st == SIPP_OK && i < p->n_types; i++)
        bytes += p->types[i].bytes;
    if (st == SIPP_OK) add_split(out, mp->mmproj_offload ? device : NULL, 1.0, SIPP_MEMORY_WEIGHTS, bytes);
    free(p);
    return st;
}

sipp_status sipp_memory_estimate(const char *path, const sipp_model_params *mp, const sipp_engine_params *ep,
                                 sipp_memory *out, char *errbuf) {
    memset(out, 0, sizeof *out);
    sipp_model_params mdef = sipp_model_default_params();
    sipp_engine_params edef = sipp_engine_default_params();
    if (!mp) mp = &mdef;
    if (!ep) ep = &edef;
    if (!path || !*path) return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "no model path given");
    sipp_status st = sipp_runtime_init(NULL, errbuf);
    if (st != SIPP_OK) return st;
    char resolved[PATH_MAX];
    if ((st = sipp_store_resolve(path, resolved, sizeof resolved, errbuf)) != SIPP_OK) return st;
    sipp_kv_types kvt;
    if ((st = sipp_kv_types_parse(ep->cache_type_k, ep->cache_type_v, &kvt, errbuf)) != SIPP_OK) return st;
    sipp_gguf_info *g = calloc(1, sizeof *g);
    if (!g) return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory");
    if ((st = sipp_gguf_inspect(resolved, g, errbuf)) != SIPP_OK) {
        free(g);
        return st;
    }
    if (g->n_layer <= 0 || g->n_embd <= 0 || g->n_head <= 0) {
        free(g);
        return sipp_fail(
            errbuf, SIPP_ERR_MODEL,
            "model '%s' does not give its layer count, width and heads; its memory cannot be estimated",
            resolved);
    }

    sipp_host_view view;
    sipp_host_discover(&view);
    sipp_policy_result pick;
    if ((st = sipp_policy_decide(&view, mp->backend, mp->backend_order, &pick, errbuf)) != SIPP_OK) {
        free(g);
        return st;
    }
    const char *device = NULL;
    double on_device = 0;
    int64_t layers = g->n_layer + 1; /* the output layer offloads too */
    if (pick.backend != SIPP_BACKEND_CPU && pick.device >= 0) {
        device = view.devices[pick.device].name;
        int64_t ngl = mp->gpu_layers < 0 || mp->gpu_layers > layers ? layers : mp->gpu_layers;
        on_device = (double)ngl / (double)layers;
    }

    /* A weight the CPU keeps in a layout of its own (AMX, CPU_REPACK) is read from the mapped file
     * into a buffer of that layout: the file's pages and the copy are both resident, so its bytes
     * count twice (all of a type's, token embeddings included, so the figure errs high). */
    uint64_t weights = 0, relaid = 0;
    for (int i = 0; i < g->n_types; i++) {
        weights += g->types[i].bytes;
        if (!mp->no_repack && on_device < 1.0 && sipp_cpu_layout_takes(g->types[i].type, g->n_embd))
            relaid += (uint64_t)((double)g->types[i].bytes * (1.0 - on_device));
    }
    /* LoRA adapters: their tensors, placed as the layers they adapt (the file is nearly all tensor data) */
    for (size_t i = 0; mp->lora && i < mp->n_lora; i++) {
        struct stat lst;
        if (mp->lora[i].path && stat(mp->lora[i].path, &lst) == 0) weights += (uint64_t)lst.st_size;
    }
    add_split(out, device, on_device, SIPP_MEMORY_WEIGHTS, weights);
    if (relaid) sipp_memory_add(out, NULL, 0, SIPP_MEMORY_WEIGHTS, relaid);

    int64_t ctx = ep->ctx_size > 0                                         ? ep->ctx_size
                  : g->n_ctx_train > 0 && g->n_ctx_train < DEFAULT_CTX_CAP ? g->n_ctx_train
                                                                           : DEFAULT_CTX_CAP;
    int64_t cells = (ctx + KV_PAD - 1) / KV_PAD * KV_PAD;
    int64_t head_kv = g->n_head_kv > 0 ? g->n_head_kv : g->n_head;
    int64_t embd_kv = g->n_embd / g->n_head * head_kv;
    uint64_t kv = (uint64_t)(g->n_layer * cells) * sipp_kv_cell_bytes(&kvt, embd_kv);
    add_split(out, device, on_device, SIPP_MEMORY_KV, kv);

    /* ggml's allocator reuses a graph's buffers, so the compute buffer is about its largest tensor
     * (the logits, or without flash attention the scores) plus a few activations alive beside it */
    int64_t batch = ep->batch_size > 0 ? ep->batch_size : DEFAULT_BATCH;
    if (batch > ctx) batch = ctx; /* llama.cpp caps the batch at the context asked for */
    int64_t vocab = g->n_vocab > 0 ? g->n_vocab : 0;
    /* a GPU load uses flash attention, and so does a quantized V cache */
    int64_t scores = device || ggml_is_quantized(kvt.v) ? 0 : cells * g->n_head;
    int64_t parallel = ep->parallel > 0 ? ep->parallel : edef.parallel;
    int64_t largest = vocab > scores ? vocab : scores;
    uint64_t compute = (uint64_t)(F32_BYTES * batch * (largest + ACTIVATIONS_EMBD * g->n_embd));
    uint64_t output = (uint64_t)(F32_BYTES * parallel * vocab);
    add_split(out, device, device ? 1.0 : 0.0, SIPP_MEMORY_COMPUTE, compute);
    sipp_memory_add(out, NULL, 0, SIPP_MEMORY_COMPUTE, output);
    free(g);
    return mp->mmproj && *mp->mmproj ? add_projector(out, mp, device, errbuf) : SIPP_OK;
}

void sipp_model_memory(const sipp_model *model, sipp_memory *out) {
    memset(out, 0, sizeof *out);
    if (model) *out = model->mem;
}
