/*
 * inspect.c: a GGUF model described from its header (gguf.h with no_alloc: only the key/value
 * section and the tensor descriptors are read, never the weights), for `sipp models info` and for the
 * check `sipp pull` makes on a finished download, and the tokenizer's identity a verify manifest
 * records.
 *
 * The hyperparameters live under the architecture's own prefix ("llama.block_count",
 * "qwen2.attention.head_count_kv", ...). Some architectures store a per-layer array where others
 * store one number (OpenELM's head counts); the largest element stands for the array.
 *
 * gguf.h reports a malformed header through ggml's logger. A header read here captures this
 * thread's error line (sipp_log_capture, backend/log.c) so that it becomes part of sipp's one-line
 * message instead of a second line on stderr.
 *
 * A split set (gguf-split's "-00001-of-00003.gguf" files) keeps the metadata in shard 1 and spreads
 * the tensors over all shards: parameters, tensor types and sizes are summed over the shards, which
 * are found by their names, as llama.cpp finds them.
 */
#include "store/inspect.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ggml.h"
#include "gguf.h"
#include "backend/backend.h"
#include "store/sha256.h"
#include "util/util.h"

#define GGUF_MAGIC "GGUF"
#define GGUF_MAGIC_LEN 4
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

/* An integer key (any integer type, or the largest element of an integer array); -1 when absent. */
static int64_t get_int(const struct gguf_context *g, const char *key) {
    int64_t k = gguf_find_key(g, key);
    if (k < 0) return -1;
    enum gguf_type t = gguf_get_kv_type(g, k);
    const void *data = NULL;
    size_t n = 1;
    if (t == GGUF_TYPE_ARRAY) {
        t = gguf_get_arr_type(g, k);
        n = gguf_get_arr_n(g, k);
        if (t == GGUF_TYPE_STRING || t == GGUF_TYPE_ARRAY || n == 0) return -1;
        data = gguf_get_arr_data(g, k);
    } else if (t != GGUF_TYPE_STRING) {
        data = gguf_get_val_data(g, k); /* gguf aborts when asked for a string's data this way */
    } else {
        return -1;
    }
    int64_t best = -1;
    for (size_t i = 0; i < n; i++) {
        int64_t v;
        switch (t) {
        case GGUF_TYPE_UINT8: v = ((const uint8_t *)data)[i]; break;
        case GGUF_TYPE_INT8: v = ((const int8_t *)data)[i]; break;
        case GGUF_TYPE_UINT16: v = ((const uint16_t *)data)[i]; break;
        case GGUF_TYPE_INT16: v = ((const int16_t *)data)[i]; break;
        case GGUF_TYPE_UINT32: v = ((const uint32_t *)data)[i]; break;
        case GGUF_TYPE_INT32: v = ((const int32_t *)data)[i]; break;
        case GGUF_TYPE_UINT64: v = (int64_t)((const uint64_t *)data)[i]; break;
        case GGUF_TYPE_INT64: v = ((const int64_t *)data)[i]; break;
        default: return -1;
        }
        if (v > best) best = v;
    }
    return best;
}

static void get_str(const struct gguf_context *g, const char *key, char *out, size_t cap) {
    int64_t k = gguf_find_key(g, key);
    if (k >= 0 && gguf_get_kv_type(g, k) == GGUF_TYPE_STRING)
        sipp_strlcpy(out, gguf_get_val_str(g, k), cap);
    else
        out[0] = '\0';
}

static int64_t get_arch_int(const struct gguf_context *g, const char *arch, const char *suffix) {
    char key[KEY_MAX];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return get_int(g, key);
}

/* gguf_init_from_file with its error message caught into why (SIPP_ERROR_SIZE bytes). */
static struct gguf_context *read_header(const char *path, char *why) {
    struct gguf_init_params gp = {.no_alloc = true, .ctx = NULL};
    sipp_log_capture(why);
    struct gguf_context *g = gguf_init_from_file(path, gp);
    sipp_log_capture(NULL);
    return g;
}

/* Opens one file as GGUF and checks that its tensor data fits. *g is the header's context. */
static sipp_status open_gguf(const char *path, struct gguf_context **out, uint64_t *size, char *errbuf) {
    *out = NULL;
    struct stat st;
    if (stat(path, &st) != 0)
        return sipp_fail(errbuf, errno == ENOENT ? SIPP_ERR_NOT_FOUND : SIPP_ERR_IO, "cannot open '%s': %s",
                         path, strerror(errno));
    if (!S_ISREG(st.st_mode)) return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "'%s' is not a file", path);
    FILE *f = fopen(path, "rb");
    if (!f) return sipp_fail(errbuf, SIPP_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    char magic[GGUF_MAGIC_LEN] = {0};
    size_t got = fread(magic, 1, sizeof magic, f);
    fclose(f);
    if (got != sizeof magic || memcmp(magic, GGUF_MAGIC, sizeof magic) != 0)
        return sipp_fail(errbuf, SIPP_ERR_MODEL, "'%s' is not a GGUF file (it does not start with 'GGUF')",
                         path);
    char why[SIPP_ERROR_SIZE];
    struct gguf_context *g = read_header(path, why);
    if (!g)
        return sipp_fail(errbuf, SIPP_ERR_MODEL,
                         "'%s' is not a valid GGUF file (truncated or corrupt header%s%s)", path,
                         why[0] ? ": " : "", why);
    size_t need = gguf_get_data_offset(g);
    for (int64_t i = 0; i < gguf_get_n_tensors(g); i++) {
        size_t end = gguf_get_data_offset(g) + gguf_get_tensor_offset(g, i) + gguf_get_tensor_size(g, i);
        if (end > need) need = end;
    }
    if ((uint64_t)st.st_size < need) {
        gguf_free(g);
        return sipp_fail(errbuf, SIPP_ERR_MODEL, "'%s' is truncated: %lld bytes, its tensors need %zu", path,
                         (long long)st.st_size, need);
    }
    *out = g;
    *size = (uint64_t)st.st_size;
    return SIPP_OK;
}

sipp_status sipp_gguf_check(const char *path, char *errbuf) {
    struct gguf_context *g;
    uint64_t size;
    sipp_status s = open_gguf(path, &g, &size, errbuf);
    if (g) gguf_free(g);
    return s;
}

static void add_tensors(const struct gguf_context *g, sipp_gguf_type_count counts[GGML_TYPE_COUNT],
                        sipp_gguf_info *info) {
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
    struct gguf_context *g;
    uint64_t size;
    sipp_status s = open_gguf(path, &g, &size, errbuf);
    if (s != SIPP_OK) return s;

    /* A later shard of a split set stands for its set: read shard 1 instead. */
    char shard[PATH_MAX];
    int64_t split_no = get_int(g, "split.no");
    int64_t split_count = get_int(g, "split.count");
    const char *first = path;
    if (split_count > 1 && split_no > 0) {
        gguf_free(g);
        if (!sipp_split_sibling(path, 1, shard, sizeof shard))
            return sipp_fail(errbuf, SIPP_ERR_MODEL,
                             "'%s' is shard %lld of a split set, and its name does not say where shard 1 is",
                             path, (long long)split_no + 1);
        first = shard;
        if ((s = open_gguf(first, &g, &size, errbuf)) != SIPP_OK) return s;
        split_count = get_int(g, "split.count");
    }
    if (split_count > SIPP_SPLIT_MAX) {
        gguf_free(g);
        return sipp_fail(errbuf, SIPP_ERR_MODEL, "'%s' claims %lld shards; sipp reads at most %d", first,
                         (long long)split_count, SIPP_SPLIT_MAX);
    }

    sipp_strlcpy(info->path, first, sizeof info->path);
    info->gguf_version = gguf_get_version(g);
    get_str(g, "general.architecture", info->architecture, sizeof info->architecture);
    get_str(g, "general.name", info->name, sizeof info->name);
    int64_t ft = get_int(g, "general.file_type");
    for (size_t i = 0; ft >= 0 && i < sizeof file_types / sizeof file_types[0]; i++)
        if (file_types[i].value == ft)
            sipp_strlcpy(info->file_type, file_types[i].name, sizeof info->file_type);
    if (ft >= 0 && !info->file_type[0])
        snprintf(info->file_type, sizeof info->file_type, "type %lld", (long long)ft);
    const char *arch = info->architecture;
    info->n_ctx_train = get_arch_int(g, arch, "context_length");
    info->n_embd = get_arch_int(g, arch, "embedding_length");
    info->n_layer = get_arch_int(g, arch, "block_count");
    info->n_head = get_arch_int(g, arch, "attention.head_count");
    info->n_head_kv = get_arch_int(g, arch, "attention.head_count_kv");
    info->n_ff = get_arch_int(g, arch, "feed_forward_length");
    int64_t pooling = get_arch_int(g, arch, "pooling_type");
    if (pooling >= 0 && pooling < (int64_t)(sizeof pooling_names / sizeof pooling_names[0]))
        sipp_strlcpy(info->pooling, pooling_names[pooling], sizeof info->pooling);
    int64_t k = gguf_find_key(g, "tokenizer.ggml.tokens");
    info->n_vocab = k >= 0 && gguf_get_kv_type(g, k) == GGUF_TYPE_ARRAY ? (int64_t)gguf_get_arr_n(g, k)
                                                                        : get_arch_int(g, arch, "vocab_size");
    get_str(g, "tokenizer.ggml.model", info->tokenizer, sizeof info->tokenizer);
    info->has_chat_template = gguf_find_key(g, "tokenizer.chat_template") >= 0;

    sipp_gguf_type_count counts[GGML_TYPE_COUNT];
    memset(counts, 0, sizeof counts);
    info->n_files = 1;
    info->file_size = size;
    add_tensors(g, counts, info);
    gguf_free(g);

    for (int64_t i = 2; split_count > 1 && i <= split_count; i++) {
        char other[PATH_MAX];
        if (!sipp_split_sibling(first, (int)i, other, sizeof other))
            return sipp_fail(errbuf, SIPP_ERR_MODEL,
                             "'%s' is shard 1 of %lld, and its name does not say where the others are", first,
                             (long long)split_count);
        if ((s = open_gguf(other, &g, &size, errbuf)) != SIPP_OK) {
            if (s == SIPP_ERR_NOT_FOUND)
                return sipp_fail(errbuf, SIPP_ERR_MODEL,
                                 "split set '%s' is incomplete: shard '%s' is missing", first, other);
            return s;
        }
        info->n_files++;
        info->file_size += size;
        add_tensors(g, counts, info);
        gguf_free(g);
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
static bool strings_hash(const struct gguf_context *g, const char *key, char hex[SIPP_SHA256_HEX], size_t *count) {
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
    struct gguf_context *g;
    uint64_t size;
    sipp_status s = open_gguf(path, &g, &size, errbuf);
    if (s != SIPP_OK) return s;
    bool ok = strings_hash(g, "tokenizer.ggml.tokens", out->tokens_sha256, &out->n_tokens) &&
              strings_hash(g, "tokenizer.ggml.merges", out->merges_sha256, &out->n_merges);
    out->bos_id = get_int(g, "tokenizer.ggml.bos_token_id");
    out->eos_id = get_int(g, "tokenizer.ggml.eos_token_id");
    int64_t k = gguf_find_key(g, "tokenizer.chat_template");
    if (ok && k >= 0 && gguf_get_kv_type(g, k) == GGUF_TYPE_STRING) {
        const char *tmpl = gguf_get_val_str(g, k);
        ok = sipp_sha256_hex(tmpl, strlen(tmpl), out->chat_template_sha256);
    }
    gguf_free(g);
    return ok ? SIPP_OK : sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory hashing the tokenizer of '%s'", path);
}
