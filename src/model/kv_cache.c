/*
 * kv_cache.c: the KV cache's element types.
 *
 * llama.cpp takes any ggml type for the cache; sipp offers the three that llama-server users pick
 * and that every backend's flash attention kernels take: f16 (the default), q8_0 and q4_0. A
 * quantized V cache is read only by the flash attention kernel (without it the attention multiplies
 * by V transposed, which ggml cannot do on quantized blocks), so llama.cpp refuses it, or turns flash
 * attention on when it was left to llama.cpp. sipp's policy can keep flash attention off on its own
 * (an explicit cpu or rpc load), so that case is refused here, before llama.cpp, with a reason a
 * person can act on. A quantized K cache runs either way.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/kv_cache.h"
#include "model/model.h"
#include "util/util.h"

typedef struct kv_type_name {
    const char *name;
    enum ggml_type type;
} kv_type_name;

static const kv_type_name KV_TYPES[] = {
    {"f16", GGML_TYPE_F16},
    {"q8_0", GGML_TYPE_Q8_0},
    {"q4_0", GGML_TYPE_Q4_0},
};
#define N_KV_TYPES (sizeof KV_TYPES / sizeof *KV_TYPES)

static sipp_status parse_one(const char *field, const char *value, enum ggml_type *out, char *errbuf) {
    if (!value || !*value) value = KV_TYPES[0].name;
    for (size_t i = 0; i < N_KV_TYPES; i++)
        if (strcmp(value, KV_TYPES[i].name) == 0) {
            *out = KV_TYPES[i].type;
            return SIPP_OK;
        }
    return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "%s '%.32s' is not one of f16, q8_0, q4_0", field,
                     value);
}

static const char *type_name(enum ggml_type t) {
    for (size_t i = 0; i < N_KV_TYPES; i++)
        if (KV_TYPES[i].type == t) return KV_TYPES[i].name;
    return KV_TYPES[0].name;
}

sipp_status sipp_kv_types_parse(const char *type_k, const char *type_v, sipp_kv_types *out, char *errbuf) {
    sipp_status st = parse_one("cache_type_k", type_k, &out->k, errbuf);
    return st == SIPP_OK ? parse_one("cache_type_v", type_v, &out->v, errbuf) : st;
}

static sipp_status check_flash_attn(const sipp_kv_types *t, enum llama_flash_attn_type fa,
                                    const char *fa_label, char *errbuf) {
    if (!ggml_is_quantized(t->v) || fa != LLAMA_FLASH_ATTN_TYPE_DISABLED) return SIPP_OK;
    return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                     "cache_type_v '%s' needs flash attention, and the model's load has it off (%s); "
                     "set flash_attn on (--flash-attn on), or keep cache_type_v f16",
                     type_name(t->v), fa_label ? fa_label : "flash attention off");
}

sipp_status sipp_kv_cache_check(const sipp_model_params *mp, const char *cache_type_k,
                                const char *cache_type_v, char *errbuf) {
    sipp_model_params def = sipp_model_default_params();
    sipp_kv_types t;
    sipp_status st = sipp_kv_types_parse(cache_type_k, cache_type_v, &t, errbuf);
    if (st != SIPP_OK) return st;
    enum llama_flash_attn_type fa;
    const char *label;
    if ((st = sipp_flash_attn_policy(mp ? mp : &def, &fa, &label, errbuf)) != SIPP_OK) return st;
    return check_flash_attn(&t, fa, label, errbuf);
}

/* A head's width (the model's <arch>.attention.key_length or value_length, else n_embd / n_head). */
static int64_t head_width(const sipp_model *m, const char *which) {
    char key[96], val[32];
    snprintf(key, sizeof key, "%s.attention.%s_length", m->info.architecture, which);
    if (llama_model_meta_val_str(m->lm, key, val, sizeof val) > 0) {
        char *end;
        long long w = strtoll(val, &end, 10);
        if (*end == '\0' && w > 0) return w;
    }
    return m->info.n_head > 0 ? m->info.n_embd / m->info.n_head : 0;
}

/* A quantized cache stores each head's row in blocks (32 elements for q8_0 and q4_0): a head
 * narrower or not a multiple of it cannot be cached so, and ggml would assert on it. */
static sipp_status check_heads(const sipp_model *m, const char *field, enum ggml_type t, const char *which,
                               char *errbuf) {
    int64_t width = head_width(m, which), block = ggml_blck_size(t);
    if (width <= 0 || width % block == 0) return SIPP_OK;
    return sipp_fail(
        errbuf, SIPP_ERR_INVALID_ARGUMENT,
        "%s '%s' stores blocks of %lld values, which do not divide the %lld-wide attention heads "
        "of model '%s'; keep %s f16",
        field, type_name(t), (long long)block, (long long)width, m->path, field);
}

sipp_status sipp_model_kv_types(const sipp_model *m, sipp_engine_params *p, sipp_kv_types *out,
                                char *errbuf) {
    sipp_status st = sipp_kv_types_parse(p->cache_type_k, p->cache_type_v, out, errbuf);
    if (st == SIPP_OK) st = check_flash_attn(out, m->flash_attn, m->flash_attn_label, errbuf);
    if (st == SIPP_OK) st = check_heads(m, "cache_type_k", out->k, "key", errbuf);
    if (st == SIPP_OK) st = check_heads(m, "cache_type_v", out->v, "value", errbuf);
    p->cache_type_k = type_name(out->k);
    p->cache_type_v = type_name(out->v);
    return st;
}

uint64_t sipp_kv_cell_bytes(const sipp_kv_types *t, int64_t n_embd_kv) {
    return (uint64_t)(ggml_row_size(t->k, n_embd_kv) + ggml_row_size(t->v, n_embd_kv));
}
