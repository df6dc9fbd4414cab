/*
 * gguf_info.c: a GGUF model described from its header (gguf.h with no_alloc: only the key/value
 * section and the tensor descriptors are read, never the weights), for `sipp models info` and for the
 * check `sipp pull` makes on a finished download, and the tokenizer's identity a verify manifest
 * records.
 *
 * The hyperparameters live under the architecture's own prefix ("llama.block_count",
 * "qwen2.attention.head_count_kv", ...). Some architectures store a per-layer array where others
 * store one number (OpenELM's head counts); the largest element stands for the array.
 *
 * Opening, the truncation check and the typed getters are store/gguf_header.c's.
 *
 * A multimodal projector (general.architecture "clip", an mmproj file for llama.cpp's mtmd) has no
 * text hyperparameters; what it takes in and the width of the embeddings it gives the text model are
 * read instead (read_projector).
 *
 * A split set (gguf-split's "-00001-of-00003.gguf" files) keeps the metadata in shard 1 and spreads
 * the tensors over all shards: parameters, tensor types and sizes are summed over the shards, which
 * are found by their names, as llama.cpp finds them.
 */
#include "store/gguf_info.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"
#include "gguf.h"
#include "store/gguf_header.h"
#include "util/sha256.h"
#include "util/util.h"

#define KEY_MAX 128

/* general.file_type values (llama.h's llama_ftype; stable, they are written into files). */
static const struct {
    int value;
    const char *name;
} file_types[] = {
    {0, "F32"},     {1, "F16"},     {2, "Q4_0"},       {3, "Q4_1"},    {7, "Q8_0"},     {8, "Q5_0"},
    {9, "Q5_1"},    {10, "Q2_K"},   {11, "Q3_K_S"},    {12, "Q3_K_M"}, {13, "Q3_K_L"},  {14, "Q4_K_S"},
    {15, "Q4_K_M"}, {16, "Q5_K_S"}, {17, "Q5_K_M"},    {18, "Q6_K"},   {19, "IQ2_XXS"}, {20, "IQ2_XS"},
    {21, "Q2_K_S"}, {22, "IQ3_XS"}, {23, "IQ3_XXS"},   {24, "IQ1_S"},  {25, "IQ4_NL"},  {26, "IQ3_S"},
    {27, "IQ3_M"},  {28, "IQ2_S"},  {29, "IQ2_M"},     {30, "IQ4_XS"}, {31, "IQ1_M"},   {32, "BF16"},
    {36, "TQ1_0"},  {37, "TQ2_0"},  {38, "MXFP4_MOE"},
};

static const char *const pooling_names[] = {"none", "mean", "cls", "last", "rank"};

static int64_t get_arch_int(const sipp_gguf_header *h, const char *arch, const char *suffix) {
    char key[KEY_MAX];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return sipp_gguf_int_or(h, key, -1);
}

/* Where a projector's output width is, per clip.projector_type: the tensor llama.cpp's mtmd reads it
 * from (clip.cpp's clip_n_mmproj_embd) and which of its dimensions; the first present wins (an "mlp"
 * with mm.3 is Yi's normed variant, whose output is mm.3).  A tensor is the truth: legacy
 * llava conversions wrote clip.vision.projection_dim = 768 (CLIP's own projection), not the text
 * model's width. */
static const struct {
    const char *type;
    const char *tensor;
    int dim;
} projector_outputs[] = {
    {"mlp", "mm.3.bias", 0},
    {"mlp", "mm.2.weight", 1},
    {"pixtral", "mm.2.weight", 1},
    {"qwen2vl_merger", "mm.1.bias", 0},
    {"qwen2.5vl_merger", "mm.1.bias", 0},
    {"gemma3", "mm.input_projection.weight", 0},
    {"idefics3", "mm.model.fc.weight", 1},
    {"internvl", "mm.3.weight", 1},
    {"ultravox", "mm.a.mlp.2.weight", 1},
    {"voxtral", "mm.a.mlp.2.weight", 1},
    {"qwen2a", "mm.a.fc.weight", 1},
};

static int64_t tensor_dim(const struct gguf_context *g, const char *name, int dim) {
    int64_t t = gguf_find_tensor(g, name);
    return t >= 0 ? gguf_get_tensor_ne(g, t)[dim] : -1;
}

/* The projector fields of a "clip" file (sipp.h's sipp_gguf_info). */
static void read_projector(const sipp_gguf_header *h, sipp_gguf_info *info) {
    info->projector = true;
    info->projector_vision = sipp_gguf_bool_or(h, "clip.has_vision_encoder", false);
    info->projector_audio = sipp_gguf_bool_or(h, "clip.has_audio_encoder", false);
    const char *modality = info->projector_vision ? "vision" : "audio";
    char key[KEY_MAX];
    snprintf(key, sizeof key, "clip.%s.projector_type", modality);
    sipp_gguf_str_or(h, "clip.projector_type", info->projector_type, sizeof info->projector_type, "");
    if (!info->projector_type[0])
        sipp_gguf_str_or(h, key, info->projector_type, sizeof info->projector_type, "");
    info->projector_image_size =
        info->projector_vision ? sipp_gguf_int_or(h, "clip.vision.image_size", -1) : -1;
    info->projector_patch_size =
        info->projector_vision ? sipp_gguf_int_or(h, "clip.vision.patch_size", -1) : -1;
    /* A known type without its output tensor stays -1: mtmd would read the width from that tensor
     * and crash on its absence (a NULL dereference in clip_n_mmproj_embd), so a caller must refuse it. */
    info->projector_n_embd = -1;
    bool known = false;
    for (size_t i = 0;
         info->projector_n_embd <= 0 && i < sizeof projector_outputs / sizeof projector_outputs[0]; i++) {
        if (strcmp(projector_outputs[i].type, info->projector_type) != 0) continue;
        known = true;
        info->projector_n_embd =
            tensor_dim(sipp_gguf_header_ctx(h), projector_outputs[i].tensor, projector_outputs[i].dim);
    }
    snprintf(key, sizeof key, "clip.%s.projection_dim", modality);
    if (!known) info->projector_n_embd = sipp_gguf_int_or(h, key, -1);
}

sipp_status sipp_gguf_check(const char *path, char *errbuf) {
    sipp_gguf_header *h;
    sipp_status s = sipp_gguf_header_open(path, &h, errbuf);
    sipp_gguf_header_close(h);
    return s;
}

static void add_tensors(const sipp_gguf_header *h, sipp_gguf_type_count counts[GGML_TYPE_COUNT],
                        sipp_gguf_info *info) {
    const struct gguf_context *g = sipp_gguf_header_ctx(h);
    info->n_files++;
    info->file_size += sipp_gguf_header_file_size(h);
    for (int64_t i = 0; i < gguf_get_n_tensors(g); i++) {
        const int64_t *ne = gguf_get_tensor_ne(g, i);
        uint64_t elems = 1;
        for (int d = 0; d < GGML_MAX_DIMS; d++)
            elems *= (uint64_t)ne[d];
        info->n_params += elems;
        info->n_tensors++;
        enum ggml_type t = gguf_get_tensor_type(g, i);
        if ((int)t < 0 || t >= GGML_TYPE_COUNT) continue;
        counts[t].n_tensors++;
        counts[t].n_params += elems;
        counts[t].bytes += gguf_get_tensor_size(g, i);
    }
}

static int by_tensors(const void *a, const void *b) {
    const sipp_gguf_type_count *x = a, *y = b;
    if (x->n_tensors != y->n_tensors) return x->n_tensors > y->n_tensors ? -1 : 1;
    return strcmp(x->type, y->type);
}

sipp_status sipp_gguf_inspect(const char *path, sipp_gguf_info *info, char *errbuf) {
    memset(info, 0, sizeof *info);
    sipp_gguf_header *h;
    sipp_status s = sipp_gguf_header_open(path, &h, errbuf);
    if (s != SIPP_OK) return s;

    /* A later shard of a split set stands for its set: read shard 1 instead. */
    char shard[PATH_MAX];
    int64_t split_no = sipp_gguf_int_or(h, "split.no", -1);
    int64_t split_count = sipp_gguf_int_or(h, "split.count", -1);
    const char *first = path;
    if (split_count > 1 && split_no > 0) {
        sipp_gguf_header_close(h);
        if (!sipp_split_sibling(path, 1, shard, sizeof shard))
            return sipp_fail(errbuf, SIPP_ERR_MODEL,
                             "'%s' is shard %lld of a split set, and its name does not say where shard 1 is",
                             path, (long long)split_no + 1);
        first = shard;
        if ((s = sipp_gguf_header_open(first, &h, errbuf)) != SIPP_OK) return s;
        split_count = sipp_gguf_int_or(h, "split.count", -1);
    }
    if (split_count > SIPP_SPLIT_MAX) {
        sipp_gguf_header_close(h);
        return sipp_fail(errbuf, SIPP_ERR_MODEL, "'%s' claims %lld shards; sipp reads at most %d", first,
                         (long long)split_count, SIPP_SPLIT_MAX);
    }

    sipp_strlcpy(info->path, first, sizeof info->path);
    info->gguf_version = gguf_get_version(sipp_gguf_header_ctx(h));
    sipp_gguf_str_or(h, "general.architecture", info->architecture, sizeof info->architecture, "");
    sipp_gguf_str_or(h, "general.name", info->name, sizeof info->name, "");
    int64_t ft = sipp_gguf_int_or(h, "general.file_type", -1);
    for (size_t i = 0; ft >= 0 && i < sizeof file_types / sizeof file_types[0]; i++)
        if (file_types[i].value == ft)
            sipp_strlcpy(info->file_type, file_types[i].name, sizeof info->file_type);
    if (ft >= 0 && !info->file_type[0])
        snprintf(info->file_type, sizeof info->file_type, "type %lld", (long long)ft);
    const char *arch = info->architecture;
    info->n_ctx_train = get_arch_int(h, arch, "context_length");
    info->n_embd = get_arch_int(h, arch, "embedding_length");
    info->n_layer = get_arch_int(h, arch, "block_count");
    info->n_head = get_arch_int(h, arch, "attention.head_count");
    info->n_head_kv = get_arch_int(h, arch, "attention.head_count_kv");
    info->n_ff = get_arch_int(h, arch, "feed_forward_length");
    int64_t pooling = get_arch_int(h, arch, "pooling_type");
    if (pooling >= 0 && pooling < (int64_t)(sizeof pooling_names / sizeof pooling_names[0]))
        sipp_strlcpy(info->pooling, pooling_names[pooling], sizeof info->pooling);
    char err[SIPP_ERROR_SIZE];
    size_t n_tokens;
    info->n_vocab = sipp_gguf_get_array_len(h, "tokenizer.ggml.tokens", &n_tokens, err) == SIPP_OK
                        ? (int64_t)n_tokens
                        : get_arch_int(h, arch, "vocab_size");
    sipp_gguf_str_or(h, "tokenizer.ggml.model", info->tokenizer, sizeof info->tokenizer, "");
    info->has_chat_template = gguf_find_key(sipp_gguf_header_ctx(h), "tokenizer.chat_template") >= 0;

    if (strcmp(arch, "clip") == 0) read_projector(h, info);

    sipp_gguf_type_count counts[GGML_TYPE_COUNT];
    memset(counts, 0, sizeof counts);
    add_tensors(h, counts, info);
    sipp_gguf_header_close(h);

    for (int64_t i = 2; split_count > 1 && i <= split_count; i++) {
        char other[PATH_MAX];
        if (!sipp_split_sibling(first, (int)i, other, sizeof other))
            return sipp_fail(errbuf, SIPP_ERR_MODEL,
                             "'%s' is shard 1 of %lld, and its name does not say where the others are", first,
                             (long long)split_count);
        if ((s = sipp_gguf_header_open(other, &h, errbuf)) != SIPP_OK) {
            if (s == SIPP_ERR_NOT_FOUND)
                return sipp_fail(errbuf, SIPP_ERR_MODEL,
                                 "split set '%s' is incomplete: shard '%s' is missing", first, other);
            return s;
        }
        add_tensors(h, counts, info);
        sipp_gguf_header_close(h);
    }

    if (!info->architecture[0])
        return sipp_fail(errbuf, SIPP_ERR_MODEL, "'%s' has no general.architecture key; it is not a model",
                         first);
    for (int t = 0; t < GGML_TYPE_COUNT && info->n_types < SIPP_GGUF_MAX_TYPES; t++) {
        if (!counts[t].n_tensors) continue;
        sipp_gguf_type_count *c = &info->types[info->n_types++];
        *c = counts[t];
        sipp_strlcpy(c->type, ggml_type_name((enum ggml_type)t), sizeof c->type);
    }
    qsort(info->types, (size_t)info->n_types, sizeof info->types[0], by_tensors);
    return SIPP_OK;
}

/* The hash of a string array key, every string followed by a NUL; "" and 0 when the key is absent. */
static bool strings_hash(const struct gguf_context *g, const char *key, char hex[SIPP_SHA256_HEX],
                         size_t *count) {
    int64_t k = gguf_find_key(g, key);
    hex[0] = '\0';
    *count = 0;
    if (k < 0 || gguf_get_kv_type(g, k) != GGUF_TYPE_ARRAY || gguf_get_arr_type(g, k) != GGUF_TYPE_STRING)
        return true;
    sipp_sha256 *h = sipp_sha256_new();
    if (!h) return false;
    size_t n = gguf_get_arr_n(g, k);
    for (size_t i = 0; i < n; i++) {
        const char *str = gguf_get_arr_str(g, k, i);
        sipp_sha256_update(h, str, strlen(str) + 1);
    }
    sipp_sha256_final(h, hex);
    sipp_sha256_free(h);
    *count = n;
    return true;
}

sipp_status sipp_gguf_tokenizer_read(const char *path, sipp_gguf_tokenizer *out, char *errbuf) {
    memset(out, 0, sizeof *out);
    sipp_gguf_header *h;
    sipp_status s = sipp_gguf_header_open(path, &h, errbuf);
    if (s != SIPP_OK) return s;
    const struct gguf_context *g = sipp_gguf_header_ctx(h);
    bool ok = strings_hash(g, "tokenizer.ggml.tokens", out->tokens_sha256, &out->n_tokens) &&
              strings_hash(g, "tokenizer.ggml.merges", out->merges_sha256, &out->n_merges);
    out->bos_id = sipp_gguf_int_or(h, "tokenizer.ggml.bos_token_id", -1);
    out->eos_id = sipp_gguf_int_or(h, "tokenizer.ggml.eos_token_id", -1);
    char err[SIPP_ERROR_SIZE];
    const char *tmpl;
    if (ok && sipp_gguf_get_str(h, "tokenizer.chat_template", &tmpl, err) == SIPP_OK)
        ok = sipp_sha256_hex(tmpl, strlen(tmpl), out->chat_template_sha256);
    sipp_gguf_header_close(h);
    return ok ? SIPP_OK
              : sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory hashing the tokenizer of '%s'", path);
}
