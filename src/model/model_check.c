/*
 * model_check.c: the hyperparameters a model's header must have before llama.cpp sees it.
 *
 * llama.cpp trusts much of a GGUF header and asserts where it finds nonsense (GGML_ASSERT, which
 * aborts the process: `block_count` 0 or above LLAMA_MAX_LAYERS, expert counts that do not add up, an
 * unknown RoPE scaling type), or it loads the model and a ggml op asserts on the first request (a NaN
 * or negative norm epsilon, a RoPE dimension count that is odd or wider than a head, tensor data that
 * is not 32-byte aligned). An abort cannot be caught, and in the gateway it takes every other target
 * with it, so everything llama.cpp would assert on is checked here first and refused with a message
 * that names the key.
 *
 * The checks follow llama_model_base::load_hparams at the pinned commit (src/llama-model.cpp) and are
 * general: they hold for every architecture, under its own key prefix ("<arch>.block_count"). Where
 * llama.cpp already throws a clean error (a missing required key, a key of the wrong type, a tensor
 * of the wrong shape) the check need not, but the common cases are caught here with a clearer message.
 * Tensor shapes are compared with the hyperparameters for the llama layout (token_embd is n_embd by
 * n_vocab, one blk.N group per layer), which the llama family and sipp-synth's models share; a split
 * model keeps its tensors in other files, so those comparisons apply to the tensors this file holds.
 */
#include "model/model_check.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "util/util.h"

#define KEY_MAX 160

/* Architectures whose tensors follow the llama layout checked against the header. */
static const char *const llama_layout[] = {"llama", "mistral3", "granite", "llama-embed", "deci"};

/* RoPE scaling types llama.cpp knows (LLAMA_ROPE_SCALING_TYPES); another string makes it assert. */
static const char *const rope_scaling_types[] = {"none", "linear", "yarn", "longrope"};

/* tokenizer.ggml.model values that mean "no vocabulary" to llama.cpp. */
static const char *const no_vocab_models[] = {"none", "no_vocab"};

/* Architectures for which llama.cpp reads an expert count of 0 or 1 as "not a mixture of experts". */
static const char *const expert_count_optional[] = {"hunyuan-dense", "hunyuan_vl"};

typedef struct check {
    const sipp_gguf_header *h;
    const char *path;
    const char *arch;
    char key[KEY_MAX];
    char *err;
} check;

static bool in_list(const char *s, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(s, list[i]) == 0) return true;
    return false;
}
#define IN_LIST(s, list) in_list((s), (list), sizeof(list) / sizeof((list)[0]))

static const char *arch_key(check *c, const char *suffix) {
    snprintf(c->key, sizeof c->key, "%s.%s", c->arch, suffix);
    return c->key;
}

/* An optional unsigned hyperparameter (the largest element of a per-layer array): SIPP_OK with the
 * value, SIPP_ERR_NOT_FOUND with *v = dflt, or SIPP_ERR_MODEL with the getter's message. */
static sipp_status get_u(check *c, const char *suffix, uint64_t dflt, uint64_t *v) {
    sipp_status st = sipp_gguf_get_uint(c->h, arch_key(c, suffix), v, NULL, c->err);
    if (st == SIPP_ERR_NOT_FOUND) *v = dflt;
    return st;
}

static sipp_status bad(check *c, const char *fmt, ...) SIPP_PRINTF(2, 3);
static sipp_status bad(check *c, const char *fmt, ...) {
    char why[SIPP_ERROR_SIZE];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return sipp_fail(c->err, SIPP_ERR_MODEL,
                     "model '%s' has a bad header: %s; the file is corrupt or was written wrong", c->path,
                     why);
}

/* Every float under the architecture's prefix, scalar or array, must be a finite number: llama.cpp
 * passes them to ggml ops (epsilons, RoPE bases and factors, soft caps) unchecked. */
static sipp_status check_floats(check *c) {
    const struct gguf_context *g = sipp_gguf_header_ctx(c->h);
    size_t plen = strlen(c->arch);
    for (int64_t k = 0; k < gguf_get_n_kv(g); k++) {
        const char *key = gguf_get_key(g, k);
        if (strncmp(key, c->arch, plen) != 0 || key[plen] != '.') continue;
        enum gguf_type t = gguf_get_kv_type(g, k);
        if (t == GGUF_TYPE_FLOAT32 || t == GGUF_TYPE_FLOAT64) {
            double v = t == GGUF_TYPE_FLOAT32 ? gguf_get_val_f32(g, k) : gguf_get_val_f64(g, k);
            if (!isfinite(v)) return bad(c, "%s is %g, not a finite number", key, v);
        } else if (t == GGUF_TYPE_ARRAY) {
            enum gguf_type et = gguf_get_arr_type(g, k);
            if (et != GGUF_TYPE_FLOAT32 && et != GGUF_TYPE_FLOAT64) continue;
            const void *data = gguf_get_arr_data(g, k);
            for (size_t i = 0; i < gguf_get_arr_n(g, k); i++) {
                double v = et == GGUF_TYPE_FLOAT32 ? ((const float *)data)[i] : ((const double *)data)[i];
                if (!isfinite(v)) return bad(c, "%s[%zu] is %g, not a finite number", key, i, v);
            }
        }
    }
    return SIPP_OK;
}

/* A float key that must be >= min (or > min when strict), when present. */
static sipp_status check_float_min(check *c, const char *suffix, double min, bool strict) {
    double v;
    sipp_status st = sipp_gguf_get_float(c->h, arch_key(c, suffix), &v, c->err);
    if (st == SIPP_ERR_NOT_FOUND) return SIPP_OK;
    if (st != SIPP_OK) return st;
    if (strict ? !(v > min) : !(v >= min))
        return bad(c, "%s is %g; it must be %s %g", c->key, v, strict ? "above" : "at least", min);
    return SIPP_OK;
}

static sipp_status check_layers(check *c, uint64_t *n_layer) {
    sipp_status st = get_u(c, "block_count", 0, n_layer);
    if (st == SIPP_ERR_NOT_FOUND)
        return bad(c, "%s is missing; llama.cpp needs the number of layers", c->key);
    if (st != SIPP_OK) return st;
    if (*n_layer == 0 || *n_layer > SIPP_LLAMA_MAX_LAYERS)
        return bad(c, "%s is %llu; it must be 1 to %d", c->key, (unsigned long long)*n_layer,
                   SIPP_LLAMA_MAX_LAYERS);
    uint64_t nextn;
    if ((st = get_u(c, "nextn_predict_layers", 0, &nextn)) == SIPP_ERR_MODEL) return st;
    if (nextn > *n_layer)
        return bad(c, "%s is %llu, more than the %llu layers", c->key, (unsigned long long)nextn,
                   (unsigned long long)*n_layer);
    return SIPP_OK;
}

/* Mixture-of-experts counts, as load_hparams asserts them. */
static sipp_status check_experts(check *c, uint64_t *n_expert_out) {
    uint64_t n_expert, used, groups, group_used;
    sipp_status st;
    if ((st = get_u(c, "expert_count", 0, &n_expert)) == SIPP_ERR_MODEL) return st;
    if ((st = get_u(c, "expert_used_count", 0, &used)) == SIPP_ERR_MODEL) return st;
    if ((st = get_u(c, "expert_group_count", 0, &groups)) == SIPP_ERR_MODEL) return st;
    if ((st = get_u(c, "expert_group_used_count", 0, &group_used)) == SIPP_ERR_MODEL) return st;
    if (IN_LIST(c->arch, expert_count_optional) && n_expert <= 1) n_expert = used = 0;
    *n_expert_out = n_expert;
    char count_key[KEY_MAX];
    snprintf(count_key, sizeof count_key, "%s.expert_count", c->arch);
    if (n_expert > SIPP_LLAMA_MAX_EXPERTS)
        return bad(c, "%s is %llu; llama.cpp allows at most %d", count_key, (unsigned long long)n_expert,
                   SIPP_LLAMA_MAX_EXPERTS);
    if (used > n_expert)
        return bad(c, "%s.expert_used_count is %llu, more than %s (%llu)", c->arch, (unsigned long long)used,
                   count_key, (unsigned long long)n_expert);
    if (n_expert == 0) {
        if (groups != 0)
            return bad(c, "%s.expert_group_count is %llu in a model without experts", c->arch,
                       (unsigned long long)groups);
        return SIPP_OK;
    }
    if (used == 0)
        return bad(c, "%s.expert_used_count is 0 (or missing) in a model with %llu experts", c->arch,
                   (unsigned long long)n_expert);
    if (groups >= n_expert)
        return bad(c, "%s.expert_group_count is %llu; it must be below %s (%llu)", c->arch,
                   (unsigned long long)groups, count_key, (unsigned long long)n_expert);
    if (groups > 1 && (n_expert % groups != 0 || group_used == 0 || group_used >= groups))
        return bad(c, "%s.expert_group_count %llu and expert_group_used_count %llu do not fit %llu experts",
                   c->arch, (unsigned long long)groups, (unsigned long long)group_used,
                   (unsigned long long)n_expert);
    return SIPP_OK;
}

/* Attention and RoPE shapes: sizes that become tensor dimensions must be positive, heads must
 * divide into KV groups, and RoPE rotates an even number of dimensions within a head. */
static sipp_status check_attention(check *c, uint64_t n_embd, uint64_t n_expert) {
    uint64_t n_head, n_head_kv, head_k, n_rot, n_ff;
    size_t n_head_elems = 1, n_kv_elems = 1;
    sipp_status st =
        sipp_gguf_get_uint(c->h, arch_key(c, "attention.head_count"), &n_head, &n_head_elems, c->err);
    if (st == SIPP_ERR_MODEL) return st;
    if (st == SIPP_ERR_NOT_FOUND) n_head = 0;
    st = sipp_gguf_get_uint(c->h, arch_key(c, "attention.head_count_kv"), &n_head_kv, &n_kv_elems, c->err);
    if (st == SIPP_ERR_MODEL) return st;
    if (st == SIPP_ERR_NOT_FOUND) n_head_kv = n_head;
    if (n_head_elems == 1 && n_kv_elems == 1 && n_head_kv > 0 && n_head % n_head_kv != 0)
        return bad(c, "%s.attention.head_count_kv is %llu, which does not divide head_count %llu", c->arch,
                   (unsigned long long)n_head_kv, (unsigned long long)n_head);
    if (n_head_kv > n_head)
        return bad(c, "%s.attention.head_count_kv is %llu, more than head_count %llu", c->arch,
                   (unsigned long long)n_head_kv, (unsigned long long)n_head);
    if ((st = get_u(c, "feed_forward_length", 1, &n_ff)) == SIPP_ERR_MODEL) return st;
    if (n_ff == 0 && n_expert == 0) return bad(c, "%s is 0; the feed-forward layers need a width", c->key);
    if (n_head == 0) return SIPP_OK; /* not a transformer: no heads, no RoPE */
    if ((st = get_u(c, "attention.key_length", n_embd / n_head, &head_k)) == SIPP_ERR_MODEL) return st;
    if (head_k == 0) return bad(c, "%s is 0 (or %s.embedding_length is below head_count)", c->key, c->arch);
    uint64_t head_v;
    if ((st = get_u(c, "attention.value_length", n_embd / n_head, &head_v)) == SIPP_ERR_MODEL) return st;
    if (head_v == 0) return bad(c, "%s is 0 (or %s.embedding_length is below head_count)", c->key, c->arch);
    if ((st = get_u(c, "rope.dimension_count", head_k, &n_rot)) == SIPP_ERR_MODEL) return st;
    if (n_rot % 2 != 0 || n_rot > head_k)
        return bad(c, "%s is %llu; RoPE needs an even count of at most the head size %llu", c->key,
                   (unsigned long long)n_rot, (unsigned long long)head_k);
    const char *scaling;
    st = sipp_gguf_get_str(c->h, arch_key(c, "rope.scaling.type"), &scaling, c->err);
    if (st == SIPP_ERR_MODEL) return st;
    if (st == SIPP_OK && !IN_LIST(scaling, rope_scaling_types))
        return bad(c, "%s is '%s'; llama.cpp knows none, linear, yarn and longrope", c->key, scaling);
    return SIPP_OK;
}

/* The data section as ggml maps it: every tensor's data 32-byte aligned (general.alignment sets the
 * padding; 1, say, leaves tensors wherever the header ends). */
static sipp_status check_alignment(check *c) {
    const struct gguf_context *g = sipp_gguf_header_ctx(c->h);
    size_t base = gguf_get_data_offset(g);
    for (int64_t i = 0; i < gguf_get_n_tensors(g); i++) {
        size_t at = base + gguf_get_tensor_offset(g, i);
        if (at % SIPP_GGML_TENSOR_ALIGNMENT != 0)
            return bad(c, "tensor '%s' starts at byte %zu, not a multiple of %d (general.alignment is %zu)",
                       gguf_get_tensor_name(g, i), at, SIPP_GGML_TENSOR_ALIGNMENT, gguf_get_alignment(g));
    }
    return SIPP_OK;
}

/* The llama layout's tensors against the header: token_embd is n_embd by n_vocab, and the blk.N
 * groups number block_count. */
static sipp_status check_llama_tensors(check *c, uint64_t n_embd, uint64_t n_layer) {
    const struct gguf_context *g = sipp_gguf_header_ctx(c->h);
    int64_t te = gguf_find_tensor(g, "token_embd.weight");
    if (te >= 0) {
        const int64_t *ne = gguf_get_tensor_ne(g, te);
        if ((uint64_t)ne[0] != n_embd)
            return bad(c, "%s.embedding_length is %llu but tensor token_embd.weight has rows of %lld",
                       c->arch, (unsigned long long)n_embd, (long long)ne[0]);
    }
    uint64_t split_count = 0;
    if (sipp_gguf_get_uint(c->h, "split.count", &split_count, NULL, c->err) == SIPP_OK && split_count > 1)
        return SIPP_OK; /* the other shards hold the other layers */
    long long top = -1;
    for (int64_t i = 0; i < gguf_get_n_tensors(g); i++) {
        long long layer;
        if (sscanf(gguf_get_tensor_name(g, i), "blk.%lld.", &layer) == 1 && layer > top) top = layer;
    }
    if (top >= 0 && (uint64_t)(top + 1) != n_layer)
        return bad(c, "%s.block_count is %llu but the file has tensors for %lld layers", c->arch,
                   (unsigned long long)n_layer, top + 1);
    return SIPP_OK;
}

sipp_status sipp_model_check_hparams(const sipp_gguf_header *h, char *errbuf) {
    check c = {.h = h, .path = sipp_gguf_header_path(h), .err = errbuf};
    sipp_status st = sipp_gguf_get_str(h, "general.architecture", &c.arch, errbuf);
    if (st != SIPP_OK) return st;
    if (strcmp(c.arch, "clip") == 0) return SIPP_OK; /* llama.cpp reads no hyperparameters for it */
    if ((st = check_alignment(&c)) != SIPP_OK) return st;
    uint64_t n_layer, n_embd, n_ctx, n_expert;
    if ((st = check_layers(&c, &n_layer)) != SIPP_OK) return st;
    if ((st = get_u(&c, "embedding_length", 0, &n_embd)) == SIPP_ERR_MODEL) return st;
    if (n_embd == 0) return bad(&c, "%s is 0 or missing; llama.cpp needs the embedding width", c.key);
    if ((st = get_u(&c, "context_length", 0, &n_ctx)) == SIPP_ERR_MODEL) return st;
    if (n_ctx == 0) return bad(&c, "%s is 0 or missing; llama.cpp needs the training context length", c.key);
    if ((st = check_experts(&c, &n_expert)) != SIPP_OK) return st;
    if ((st = check_attention(&c, n_embd, n_expert)) != SIPP_OK) return st;
    if ((st = check_floats(&c)) != SIPP_OK) return st;
    /* ggml's norms assert a non-negative epsilon; RoPE's base must be a positive frequency. */
    if ((st = check_float_min(&c, "attention.layer_norm_rms_epsilon", 0, false)) != SIPP_OK) return st;
    if ((st = check_float_min(&c, "attention.layer_norm_epsilon", 0, false)) != SIPP_OK) return st;
    if ((st = check_float_min(&c, "rope.freq_base", 0, true)) != SIPP_OK) return st;
    if ((st = check_float_min(&c, "rope.scaling.factor", 0, false)) != SIPP_OK) return st;
    if (IN_LIST(c.arch, llama_layout) && (st = check_llama_tensors(&c, n_embd, n_layer)) != SIPP_OK)
        return st;
    return SIPP_OK;
}

sipp_status sipp_model_check_vocab(const sipp_gguf_header *h, char *errbuf) {
    const char *tok;
    if (sipp_gguf_get_str(h, "tokenizer.ggml.model", &tok, errbuf) != SIPP_OK)
        return SIPP_OK; /* llama.cpp says */
    if (IN_LIST(tok, no_vocab_models))
        return sipp_fail(
            errbuf, SIPP_ERR_MODEL,
            "model '%s' has no vocabulary (tokenizer.ggml.model is '%s'); sipp needs a tokenizer to "
            "read prompts and write text",
            sipp_gguf_header_path(h), tok);
    return SIPP_OK;
}
