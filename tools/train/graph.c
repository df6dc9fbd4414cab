/*
 * graph.c: the llama architecture's forward pass, written with ggml for training.
 *
 * Why sipp-train has its own graph
 *   llama.cpp's trainer (llama_opt_*) runs llama.cpp's inference graph backwards, and at the pinned
 *   commit that graph cuts two gradients: K and V go into the KV cache with SET_ROWS and come back
 *   as a view of the cache tensor, so attn_k and attn_v never learn, and the token embeddings are
 *   left out on purpose (a FIXME). A model whose keys and values stay random cannot learn where to
 *   look (docs/training.md has the measurements). This graph is the same computation for one
 *   sequence of a window's tokens, with causal attention over the window instead of a cache, built
 *   only from operations ggml can differentiate, so every weight trains.
 *
 * The same computation as llama.cpp's
 *   Each step mirrors llm_build_llama at the pinned commit for a model sipp-synth writes: RMS norm
 *   times its weight; Q, K, V projections; RoPE in llama's normal mode (rope type 0) with the file's
 *   base frequency and no scaling; attention scaled by 1/sqrt(head size) with grouped K/V heads
 *   broadcast over the query heads (mul_mat's broadcast, whose backward sums each group back into
 *   its K/V head); the output projection and the residual; a SwiGLU feed-forward and the residual;
 *   the final norm and the output matrix (the token embeddings when the file ties them). A file
 *   this trainer writes is therefore read by llama.cpp as it was trained (docs/training.md compares
 *   the held-out loss printed here with llama.cpp's perplexity of the same text).
 *
 * Weights
 *   All f32, loaded from the GGUF into one CPU backend buffer that ggml-opt updates in place, and
 *   saved back under the input file's key-values, so the output keeps its chat template and name.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ggml-alloc.h"
#include "graph.h"
#include "train.h"

#define ARCH_KEY "general.architecture"
#define ARCH "llama"
#define DEFAULT_RMS_EPS 1e-5f
#define DEFAULT_ROPE_FREQ_BASE 10000.0f
#define ROPE_TYPE_NORM 0 /* llama.cpp's LLAMA_ROPE_TYPE_NORM, the llama architecture's */
#define YARN_BETA_FAST 32.0f
#define YARN_BETA_SLOW 1.0f
#define MAX_LAYERS 16 /* the forward, backward and optimizer graphs fit ggml's default graph size */
#define TMP_SUFFIX ".tmp"

/* An integer key of the llama.* namespace, as any of the integer types a writer may have used. */
static bool get_int(const struct gguf_context *meta, const char *suffix, int64_t *out, bool required) {
    char key[128];
    snprintf(key, sizeof key, ARCH ".%s", suffix);
    const int64_t id = gguf_find_key(meta, key);
    if (id < 0) {
        if (required) train_report("the model has no %s: not a complete llama-architecture GGUF", key);
        return !required;
    }
    switch (gguf_get_kv_type(meta, id)) {
    case GGUF_TYPE_UINT32: *out = gguf_get_val_u32(meta, id); return true;
    case GGUF_TYPE_INT32: *out = gguf_get_val_i32(meta, id); return true;
    case GGUF_TYPE_UINT64: *out = (int64_t)gguf_get_val_u64(meta, id); return true;
    case GGUF_TYPE_INT64: *out = gguf_get_val_i64(meta, id); return true;
    default: train_report("the model's %s is not an integer", key); return false;
    }
}

static void get_float(const struct gguf_context *meta, const char *suffix, float *out) {
    char key[128];
    snprintf(key, sizeof key, ARCH ".%s", suffix);
    const int64_t id = gguf_find_key(meta, key);
    if (id >= 0 && gguf_get_kv_type(meta, id) == GGUF_TYPE_FLOAT32) *out = gguf_get_val_f32(meta, id);
}

static bool read_hparams(struct net_hparams *hp, const struct gguf_context *meta, const char *path) {
    const int64_t arch = gguf_find_key(meta, ARCH_KEY);
    const char *name = arch >= 0 && gguf_get_kv_type(meta, arch) == GGUF_TYPE_STRING
                           ? gguf_get_val_str(meta, arch)
                           : "(none)";
    if (strcmp(name, ARCH) != 0) {
        train_report("--model %s: architecture '%s'; sipp-train trains the llama architecture (sipp-synth's)",
                     path, name);
        return false;
    }
    *hp = (struct net_hparams){.rms_eps = DEFAULT_RMS_EPS, .rope_freq_base = DEFAULT_ROPE_FREQ_BASE};
    if (!get_int(meta, "embedding_length", &hp->n_embd, true) ||
        !get_int(meta, "block_count", &hp->n_layer, true) ||
        !get_int(meta, "attention.head_count", &hp->n_head, true) ||
        !get_int(meta, "feed_forward_length", &hp->n_ff, true))
        return false;
    hp->n_head_kv = hp->n_head;
    hp->n_rot = hp->n_head > 0 ? hp->n_embd / hp->n_head : 0;
    hp->n_ctx_train = 0;
    int64_t experts = 0;
    if (!get_int(meta, "attention.head_count_kv", &hp->n_head_kv, false) ||
        !get_int(meta, "rope.dimension_count", &hp->n_rot, false) ||
        !get_int(meta, "context_length", &hp->n_ctx_train, false) ||
        !get_int(meta, "expert_count", &experts, false))
        return false;
    get_float(meta, "attention.layer_norm_rms_epsilon", &hp->rms_eps);
    get_float(meta, "rope.freq_base", &hp->rope_freq_base);
    const char *problem = NULL;
    if (hp->n_layer < 1 || hp->n_layer > MAX_LAYERS)
        problem = "a block count from 1 to 16";
    else if (hp->n_head < 1 || hp->n_embd % hp->n_head != 0)
        problem = "a head count that divides the width";
    else if (hp->n_head_kv < 1 || hp->n_head % hp->n_head_kv != 0)
        problem = "a K/V head count that divides the heads";
    else if (hp->n_rot != hp->n_embd / hp->n_head)
        problem = "RoPE over the whole head";
    else if (experts > 0)
        problem = "a dense model, not a mixture of experts";
    if (problem) {
        train_report("--model %s: sipp-train trains llama models with %s", path, problem);
        return false;
    }
    return true;
}

/* The tensor called name, of the shape [ne0, ne1] (ne1 0: a vector), from the loaded file. */
static struct ggml_tensor *take(struct net *n, struct ggml_context *file, const char *name, int64_t ne0,
                                int64_t ne1, bool required, const char *path) {
    struct ggml_tensor *src = ggml_get_tensor(file, name);
    if (!src) {
        if (required) train_report("--model %s has no tensor %s", path, name);
        return NULL;
    }
    const bool shape_ok =
        src->ne[0] == ne0 && (ne1 ? src->ne[1] == ne1 && ggml_n_dims(src) == 2 : ggml_n_dims(src) == 1);
    if (!shape_ok) {
        train_report("--model %s: tensor %s is [%lld, %lld], expected [%lld, %lld]", path, name,
                     (long long)src->ne[0], (long long)src->ne[1], (long long)ne0,
                     (long long)(ne1 ? ne1 : 1));
        return NULL;
    }
    struct ggml_tensor *t = ggml_dup_tensor(n->ctx, src);
    ggml_set_name(t, name);
    return t;
}

/* Every tensor of the file is one this graph uses, and f32 (ggml's backward pass works in f32). */
static bool check_tensors(const struct gguf_context *meta, struct ggml_context *file, const struct net *n,
                          const char *path) {
    int64_t f32 = 0;
    const int64_t count = gguf_get_n_tensors(meta);
    for (int64_t i = 0; i < count; i++) {
        const struct ggml_tensor *t = ggml_get_tensor(file, gguf_get_tensor_name(meta, i));
        f32 += t && t->type == GGML_TYPE_F32 && ggml_n_dims(t) == 2;
    }
    if (f32 == 0) {
        train_report(
            "--model %s has no f32 weight matrices, and sipp-train trains f32 weights; start from a model "
            "written with sipp-synth --type f32",
            path);
        return false;
    }
    for (int64_t i = 0; i < count; i++) {
        const char *name = gguf_get_tensor_name(meta, i);
        if (gguf_get_tensor_type(meta, i) != GGML_TYPE_F32) {
            train_report("--model %s: tensor %s is %s; sipp-train trains f32 weights (sipp-synth --type f32)",
                         path, name, ggml_type_name(gguf_get_tensor_type(meta, i)));
            return false;
        }
        if (!ggml_get_tensor(n->ctx, name)) {
            train_report("--model %s: tensor %s is not part of the llama layout sipp-train trains", path,
                         name);
            return false;
        }
    }
    return true;
}

static bool plan_tensors(struct net *n, struct ggml_context *file, const char *path) {
    const struct net_hparams *hp = &n->hp;
    const int64_t hd = hp->n_embd / hp->n_head, kv = hd * hp->n_head_kv;
    struct ggml_tensor *embd = ggml_get_tensor(file, "token_embd.weight");
    if (!embd) {
        train_report("--model %s has no tensor token_embd.weight", path);
        return false;
    }
    n->hp.n_vocab = embd->ne[1];
    const int64_t V = n->hp.n_vocab, E = hp->n_embd;
    n->tok_embd = take(n, file, "token_embd.weight", E, V, true, path);
    n->output_norm = take(n, file, "output_norm.weight", E, 0, true, path);
    if (!n->tok_embd || !n->output_norm) return false;
    if (ggml_get_tensor(file, "output.weight")) {
        n->output = take(n, file, "output.weight", E, V, true, path);
        if (!n->output) return false;
    } else {
        n->output = n->tok_embd;
    }
    n->layers = calloc((size_t)hp->n_layer, sizeof *n->layers);
    if (!n->layers) {
        train_report("out of memory loading --model %s", path);
        return false;
    }
    for (int64_t il = 0; il < hp->n_layer; il++) {
        struct net_layer *l = &n->layers[il];
        char name[64];
#define TAKE(field, suffix, ne0, ne1)                                                                        \
    snprintf(name, sizeof name, "blk.%lld." suffix ".weight", (long long)il);                                \
    if (!(l->field = take(n, file, name, ne0, ne1, true, path))) return false
        TAKE(attn_norm, "attn_norm", E, 0);
        TAKE(wq, "attn_q", E, E);
        TAKE(wk, "attn_k", E, kv);
        TAKE(wv, "attn_v", E, kv);
        TAKE(wo, "attn_output", E, E);
        TAKE(ffn_norm, "ffn_norm", E, 0);
        TAKE(ffn_gate, "ffn_gate", E, hp->n_ff);
        TAKE(ffn_up, "ffn_up", E, hp->n_ff);
        TAKE(ffn_down, "ffn_down", hp->n_ff, E);
#undef TAKE
    }
    return true;
}

bool net_load(struct net *n, const struct gguf_context *meta, const char *path, ggml_backend_t backend) {
    *n = (struct net){0};
    if (!read_hparams(&n->hp, meta, path)) return false;
    struct ggml_context *file = NULL;
    struct gguf_context *data =
        gguf_init_from_file(path, (struct gguf_init_params){.no_alloc = false, .ctx = &file});
    if (!data) {
        train_report("--model %s: cannot read its tensors (a truncated file?)", path);
        return false;
    }
    const size_t n_tensors = (size_t)gguf_get_n_tensors(meta);
    n->ctx = ggml_init((struct ggml_init_params){
        .mem_size = (n_tensors + 1) * ggml_tensor_overhead(), .mem_buffer = NULL, .no_alloc = true});
    bool ok = n->ctx && plan_tensors(n, file, path) && check_tensors(meta, file, n, path);
    if (ok) {
        n->buf = ggml_backend_alloc_ctx_tensors(n->ctx, backend);
        if (!n->buf) train_report("out of memory for the weights of --model %s", path);
        ok = n->buf != NULL;
    }
    for (struct ggml_tensor *t = ok ? ggml_get_first_tensor(n->ctx) : NULL; t;
         t = ggml_get_next_tensor(n->ctx, t)) {
        ggml_backend_tensor_set(t, ggml_get_tensor(file, t->name)->data, 0, ggml_nbytes(t));
        ggml_set_param(t);
        n->n_params += ggml_nelements(t);
    }
    gguf_free(data);
    ggml_free(file);
    return ok;
}

void net_free(struct net *n) {
    if (n->buf) ggml_backend_buffer_free(n->buf);
    if (n->ctx) ggml_free(n->ctx);
    free(n->layers);
    *n = (struct net){0};
}

static struct ggml_tensor *norm(struct ggml_context *ctx, struct ggml_tensor *x, struct ggml_tensor *w,
                                float eps) {
    return ggml_mul(ctx, ggml_rms_norm(ctx, x, eps), w);
}

static struct ggml_tensor *rope(struct ggml_context *ctx, const struct net_hparams *hp, struct ggml_tensor *x,
                                struct ggml_tensor *pos) {
    return ggml_rope_ext(ctx, x, pos, NULL, (int)hp->n_rot, ROPE_TYPE_NORM, (int)hp->n_ctx_train,
                         hp->rope_freq_base, 1.0f, 0.0f, 1.0f, YARN_BETA_FAST, YARN_BETA_SLOW);
}

/* Causal self-attention of one block over the window: [n_embd, T] in, [n_embd, T] out. */
static struct ggml_tensor *attention(struct ggml_context *ctx, const struct net *n, const struct net_layer *l,
                                     struct ggml_tensor *x, struct ggml_tensor *pos) {
    const struct net_hparams *hp = &n->hp;
    const int64_t T = x->ne[1], hd = hp->n_embd / hp->n_head;
    struct ggml_tensor *q =
        rope(ctx, hp, ggml_reshape_3d(ctx, ggml_mul_mat(ctx, l->wq, x), hd, hp->n_head, T), pos);
    struct ggml_tensor *k =
        rope(ctx, hp, ggml_reshape_3d(ctx, ggml_mul_mat(ctx, l->wk, x), hd, hp->n_head_kv, T), pos);
    struct ggml_tensor *v = ggml_reshape_3d(ctx, ggml_mul_mat(ctx, l->wv, x), hd, hp->n_head_kv, T);
    q = ggml_cont(ctx, ggml_permute(ctx, q, 0, 2, 1, 3));                      /* [hd, T, n_head] */
    k = ggml_cont(ctx, ggml_permute(ctx, k, 0, 2, 1, 3));                      /* [hd, T, n_head_kv] */
    struct ggml_tensor *vt = ggml_cont(ctx, ggml_permute(ctx, v, 1, 2, 0, 3)); /* [T, hd, n_head_kv] */
    struct ggml_tensor *kq = ggml_mul_mat(ctx, k, q); /* [T keys, T queries, n_head] */
    kq = ggml_diag_mask_inf(ctx, kq, 0);
    kq = ggml_soft_max_ext(ctx, kq, NULL, 1.0f / sqrtf((float)hd), 0.0f);
    struct ggml_tensor *o = ggml_mul_mat(ctx, vt, kq);    /* [hd, T, n_head] */
    o = ggml_cont(ctx, ggml_permute(ctx, o, 0, 2, 1, 3)); /* [hd, n_head, T] */
    return ggml_mul_mat(ctx, l->wo, ggml_reshape_2d(ctx, o, hp->n_embd, T));
}

static struct ggml_tensor *feed_forward(struct ggml_context *ctx, const struct net_layer *l,
                                        struct ggml_tensor *x) {
    struct ggml_tensor *h =
        ggml_swiglu_split(ctx, ggml_mul_mat(ctx, l->ffn_gate, x), ggml_mul_mat(ctx, l->ffn_up, x));
    return ggml_mul_mat(ctx, l->ffn_down, h);
}

struct ggml_tensor *net_forward(const struct net *n, struct ggml_context *ctx, struct ggml_tensor *tokens,
                                struct ggml_tensor *pos) {
    const struct net_hparams *hp = &n->hp;
    struct ggml_tensor *x = ggml_get_rows(ctx, n->tok_embd, tokens);
    for (int64_t il = 0; il < hp->n_layer; il++) {
        const struct net_layer *l = &n->layers[il];
        x = ggml_add(ctx, x, attention(ctx, n, l, norm(ctx, x, l->attn_norm, hp->rms_eps), pos));
        x = ggml_add(ctx, x, feed_forward(ctx, l, norm(ctx, x, l->ffn_norm, hp->rms_eps)));
    }
    return ggml_mul_mat(ctx, n->output, norm(ctx, x, n->output_norm, hp->rms_eps));
}

bool net_save(const struct net *n, const struct gguf_context *meta, const char *path) {
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s" TMP_SUFFIX, path) >= (int)sizeof tmp) {
        train_report("cannot write %s: the path is too long", path);
        return false;
    }
    if (!ggml_backend_buffer_is_host(n->buf)) {
        train_report("cannot write %s: the weights are not in host memory", path);
        return false;
    }
    struct gguf_context *out = gguf_init_empty();
    if (!out) {
        train_report("cannot write %s: out of memory", path);
        return false;
    }
    gguf_set_kv(out, meta);
    for (int64_t i = 0; i < gguf_get_n_tensors(meta); i++)
        gguf_add_tensor(out, ggml_get_tensor(n->ctx, gguf_get_tensor_name(meta, i)));
    bool ok = gguf_write_to_file(out, tmp, false);
    if (!ok) train_report("cannot write %s: %s", tmp, strerror(errno));
    if (ok && rename(tmp, path) != 0) {
        train_report("cannot rename %s to %s: %s", tmp, path, strerror(errno));
        ok = false;
    }
    if (!ok) unlink(tmp);
    gguf_free(out);
    return ok;
}
