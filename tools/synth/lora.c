/*
 * lora.c: `sipp-synth --out A.gguf --lora-for BASE.gguf [--rank R] [--seed N] [--std S]`, a LoRA
 * adapter with random weights for a base model, as llama.cpp's convert_lora_to_gguf.py writes one
 * and llama_adapter_lora_init reads it (src/llama-adapter.cpp at the pin):
 *
 *   general.type = "adapter", general.architecture = the base's, adapter.type = "lora",
 *   adapter.lora.alpha = R (so a scale s multiplies B*A by s * alpha / rank = s);
 *   for each projection of each block (attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up,
 *   ffn_down) present in the base: NAME.lora_a of ggml shape [ne0 of the base tensor, R] and
 *   NAME.lora_b of [R, ne1 of the base tensor], f32.
 *
 * Both halves are seeded noise (a trained adapter starts with B = 0; a random B is what makes the
 * adapter change the output, which is what tests need). --std sets the noise of both (default
 * LORA_STD, which moves a synthetic model's greedy output at scale 0.75).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "synth.h"

#define LORA_DEFAULT_RANK 8
#define LORA_MAX_RANK 1024
#define LORA_STD 0.25f
#define LORA_SEED 42

static const char *const TARGETS[] = {".attn_q.weight",      ".attn_k.weight",   ".attn_v.weight",
                                      ".attn_output.weight", ".ffn_gate.weight", ".ffn_up.weight",
                                      ".ffn_down.weight"};

struct lora_opts {
    const char *out, *base;
    int64_t rank;
    uint64_t seed;
    float std;
};

static int lora_usage(const char *msg) {
    report("%s", msg);
    fprintf(stderr, "usage: " PROG " --out A.gguf --lora-for BASE.gguf [--rank R] [--seed N] [--std S]\n");
    return 2;
}

static bool is_target(const char *name) {
    if (strncmp(name, "blk.", 4) != 0) return false;
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof TARGETS / sizeof TARGETS[0]; i++) {
        size_t k = strlen(TARGETS[i]);
        if (n > k && strcmp(name + n - k, TARGETS[i]) == 0) return true;
    }
    return false;
}

static int parse_lora_args(int argc, char **argv, struct lora_opts *o) {
    *o = (struct lora_opts){.rank = LORA_DEFAULT_RANK, .seed = LORA_SEED, .std = LORA_STD};
    for (int i = 1; i < argc; i += 2) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!v) return lora_usage("each flag takes a value");
        if (strcmp(argv[i], "--out") == 0) {
            o->out = v;
        } else if (strcmp(argv[i], "--lora-for") == 0) {
            o->base = v;
        } else if (strcmp(argv[i], "--rank") == 0) {
            o->rank = strtoll(v, &end, 10);
            if (*end || o->rank < 1 || o->rank > LORA_MAX_RANK)
                return lora_usage("--rank: a whole number in 1..1024");
        } else if (strcmp(argv[i], "--seed") == 0) {
            o->seed = strtoull(v, &end, 10);
            if (*end) return lora_usage("--seed: a whole number");
        } else if (strcmp(argv[i], "--std") == 0) {
            o->std = strtof(v, &end);
            if (*end || !(o->std > 0.0f) || o->std > 10.0f) return lora_usage("--std: a number in (0, 10]");
        } else {
            return lora_usage("with --lora-for only --out, --rank, --seed and --std are taken");
        }
    }
    if (!o->out || !o->base) return lora_usage("--out and --lora-for are required");
    return 0;
}

/* A seeded f32 tensor of ne0 x ne1 in ctx, named NAME.SUFFIX. */
static struct ggml_tensor *noise(struct ggml_context *ctx, const char *name, const char *suffix, int64_t ne0,
                                 int64_t ne1, const struct lora_opts *o) {
    struct ggml_tensor *t = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, ne0, ne1);
    char full[GGML_MAX_NAME];
    snprintf(full, sizeof full, "%s.%s", name, suffix);
    ggml_set_name(t, full);
    uint64_t seed = tensor_seed(o->seed, full);
    for (int64_t r = 0; r < ne1; r++)
        fill_row((float *)t->data + r * ne0, ne0, seed + (uint64_t)r, o->std);
    return t;
}

/* The bytes the adapter's tensors need, with ggml's per-tensor overhead. */
static size_t adapter_bytes(struct gguf_context *base, struct ggml_context *meta, int64_t rank, int *n) {
    size_t bytes = 0;
    *n = 0;
    for (int64_t i = 0; i < gguf_get_n_tensors(base); i++) {
        const char *name = gguf_get_tensor_name(base, i);
        struct ggml_tensor *t = ggml_get_tensor(meta, name);
        if (!t || !is_target(name) || ggml_n_dims(t) != 2) continue;
        bytes +=
            (size_t)(t->ne[0] + t->ne[1]) * (size_t)rank * sizeof(float) + 2 * (ggml_tensor_overhead() + 64);
        (*n)++;
    }
    return bytes;
}

static int write_adapter(struct gguf_context *base, struct ggml_context *meta, const struct lora_opts *o) {
    int n;
    size_t bytes = adapter_bytes(base, meta, o->rank, &n);
    if (n == 0) {
        report("%s has no block projections (blk.N.attn_q.weight, ...) to adapt", o->base);
        return 1;
    }
    struct ggml_init_params ip = {
        .mem_size = bytes + ggml_tensor_overhead(), .mem_buffer = NULL, .no_alloc = false};
    struct ggml_context *ctx = ggml_init(ip);
    struct gguf_context *out = gguf_init_empty();
    if (!ctx || !out) {
        report("out of memory");
        return 1;
    }
    int64_t arch = gguf_find_key(base, "general.architecture");
    gguf_set_val_str(out, "general.type", "adapter");
    gguf_set_val_str(out, "general.architecture", arch >= 0 ? gguf_get_val_str(base, arch) : "llama");
    gguf_set_val_str(out, "general.name", "sipp-synth lora");
    gguf_set_val_str(out, "adapter.type", "lora");
    gguf_set_val_f32(out, "adapter.lora.alpha", (float)o->rank);
    for (int64_t i = 0; i < gguf_get_n_tensors(base); i++) {
        const char *name = gguf_get_tensor_name(base, i);
        struct ggml_tensor *t = ggml_get_tensor(meta, name);
        if (!t || !is_target(name) || ggml_n_dims(t) != 2) continue;
        gguf_add_tensor(out, noise(ctx, name, "lora_a", t->ne[0], o->rank, o));
        gguf_add_tensor(out, noise(ctx, name, "lora_b", o->rank, t->ne[1], o));
    }
    bool ok = gguf_write_to_file(out, o->out, false);
    if (!ok) report("cannot write %s", o->out);
    gguf_free(out);
    ggml_free(ctx);
    if (ok)
        printf("wrote %s: a rank-%lld LoRA adapter of %d tensors for %s\n", o->out, (long long)o->rank, n,
               o->base);
    return ok ? 0 : 1;
}

int lora_synth_main(int argc, char **argv) {
    struct lora_opts o;
    int rc = parse_lora_args(argc, argv, &o);
    if (rc) return rc;
    struct ggml_context *meta = NULL;
    struct gguf_init_params gp = {.no_alloc = true, .ctx = &meta};
    struct gguf_context *base = gguf_init_from_file(o.base, gp);
    if (!base) {
        report("cannot read %s as a GGUF model", o.base);
        return 1;
    }
    rc = write_adapter(base, meta, &o);
    gguf_free(base);
    ggml_free(meta);
    return rc;
}
