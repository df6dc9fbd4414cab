/*
 * kv_cache.h: the element types of an engine's KV cache (sipp_engine_params.cache_type_k and
 * cache_type_v), by name, and whether a model's flash attention can run them (internal).
 */
#ifndef SIPP_MODEL_KV_CACHE_H
#define SIPP_MODEL_KV_CACHE_H

#include "llama.h"
#include "sipp.h"

typedef struct sipp_kv_types {
    enum ggml_type k, v;
} sipp_kv_types;

/* Reads the two names (NULL or "" = f16); an unknown one is SIPP_ERR_INVALID_ARGUMENT naming its
 * field and the accepted values. */
sipp_status sipp_kv_types_parse(const char *type_k, const char *type_v, sipp_kv_types *out, char *errbuf);

/* The types an engine on m gets for p, checked against m's flash attention; p's two names are
 * replaced by the canonical ones (static strings), so that the caller's need not outlive the call. */
sipp_status sipp_model_kv_types(const sipp_model *m, sipp_engine_params *p, sipp_kv_types *out, char *errbuf);

/* Bytes of one cell of one layer's K and V together, for rows of n_embd_kv elements. */
uint64_t sipp_kv_cell_bytes(const sipp_kv_types *t, int64_t n_embd_kv);

#endif
