/*
 * gguf_header.c: opening a GGUF header (gguf.h with no_alloc: the key/value section and the tensor
 * descriptors, never the weights), checking it, and typed key getters.
 *
 * gguf.h reports a malformed header through ggml's logger. A header read here captures this
 * thread's error line (sipp_log_capture, backend/log.c), so that it becomes part of sipp's one-line
 * message instead of a second line on stderr; that works before the runtime is initialised, so
 * `models info` loads no backend.
 *
 * The truncation check: gguf.h checks that the header is whole, not that the data section is. The
 * end of the furthest tensor (data offset + tensor offset + size) must lie inside the file.
 */
#include "store/gguf_header.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend/backend.h"
#include "ggml.h"
#include "gguf.h"
#include "util/util.h"

#define GGUF_MAGIC "GGUF"
#define GGUF_MAGIC_LEN 4

struct sipp_gguf_header {
    struct gguf_context *g;
    uint64_t file_size;
    char path[PATH_MAX];
};

/* gguf_init_from_file with this thread's error line caught into why (SIPP_ERROR_SIZE bytes). */
static struct gguf_context *read_header(const char *path, char *why) {
    struct gguf_init_params gp = {.no_alloc = true, .ctx = NULL};
    sipp_log_capture(why);
    struct gguf_context *g = gguf_init_from_file(path, gp);
    sipp_log_capture(NULL);
    return g;
}

sipp_status sipp_gguf_header_open(const char *path, sipp_gguf_header **out, char *errbuf) {
    *out = NULL;
    struct stat st;
    if (stat(path, &st) != 0)
        return sipp_fail(errbuf, errno == ENOENT ? SIPP_ERR_NOT_FOUND : SIPP_ERR_IO, "cannot open '%s': %s",
                         path, strerror(errno));
    if (S_ISDIR(st.st_mode))
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                         "'%s' is a directory; give the path of a .gguf file", path);
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
    uint64_t need = gguf_get_data_offset(g);
    for (int64_t i = 0; i < gguf_get_n_tensors(g); i++) {
        uint64_t end =
            (uint64_t)gguf_get_data_offset(g) + gguf_get_tensor_offset(g, i) + gguf_get_tensor_size(g, i);
        if (end > need) need = end;
    }
    if ((uint64_t)st.st_size < need) {
        gguf_free(g);
        return sipp_fail(errbuf, SIPP_ERR_MODEL,
                         "'%s' is truncated: %lld bytes, its tensors need %llu; download it again", path,
                         (long long)st.st_size, (unsigned long long)need);
    }
    sipp_gguf_header *h = calloc(1, sizeof *h);
    if (!h) {
        gguf_free(g);
        return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory reading '%s'", path);
    }
    h->g = g;
    h->file_size = (uint64_t)st.st_size;
    sipp_strlcpy(h->path, path, sizeof h->path);
    *out = h;
    return SIPP_OK;
}

void sipp_gguf_header_close(sipp_gguf_header *h) {
    if (!h) return;
    gguf_free(h->g);
    free(h);
}

const char *sipp_gguf_header_path(const sipp_gguf_header *h) { return h->path; }
uint64_t sipp_gguf_header_file_size(const sipp_gguf_header *h) { return h->file_size; }
const struct gguf_context *sipp_gguf_header_ctx(const sipp_gguf_header *h) { return h->g; }

static int64_t find(const sipp_gguf_header *h, const char *key, char *errbuf) {
    int64_t k = gguf_find_key(h->g, key);
    if (k < 0) sipp_fail(errbuf, SIPP_ERR_NOT_FOUND, "'%s' has no key %s", h->path, key);
    return k;
}

static sipp_status wrong_type(const sipp_gguf_header *h, const char *key, int64_t k, const char *want,
                              char *errbuf) {
    enum gguf_type t = gguf_get_kv_type(h->g, k);
    if (t == GGUF_TYPE_ARRAY)
        return sipp_fail(errbuf, SIPP_ERR_MODEL, "'%s': key %s is an array of %s, expected %s", h->path, key,
                         gguf_type_name(gguf_get_arr_type(h->g, k)), want);
    return sipp_fail(errbuf, SIPP_ERR_MODEL, "'%s': key %s is a %s, expected %s", h->path, key,
                     gguf_type_name(t), want);
}

/* Element i of integer data of type t: its value in *u, or *negative and the value in *s. False when
 * t is not an integer type. */
static bool int_at(enum gguf_type t, const void *data, size_t i, int64_t *s, uint64_t *u, bool *negative) {
    *negative = false;
    switch (t) {
    case GGUF_TYPE_UINT8: *u = ((const uint8_t *)data)[i]; return true;
    case GGUF_TYPE_UINT16: *u = ((const uint16_t *)data)[i]; return true;
    case GGUF_TYPE_UINT32: *u = ((const uint32_t *)data)[i]; return true;
    case GGUF_TYPE_UINT64: *u = ((const uint64_t *)data)[i]; return true;
    case GGUF_TYPE_INT8: *s = ((const int8_t *)data)[i]; break;
    case GGUF_TYPE_INT16: *s = ((const int16_t *)data)[i]; break;
    case GGUF_TYPE_INT32: *s = ((const int32_t *)data)[i]; break;
    case GGUF_TYPE_INT64: *s = ((const int64_t *)data)[i]; break;
    default: return false;
    }
    *negative = *s < 0;
    *u = *negative ? 0 : (uint64_t)*s;
    return true;
}

sipp_status sipp_gguf_get_uint(const sipp_gguf_header *h, const char *key, uint64_t *out, size_t *n_elems,
                               char *errbuf) {
    int64_t k = find(h, key, errbuf);
    if (k < 0) return SIPP_ERR_NOT_FOUND;
    enum gguf_type t = gguf_get_kv_type(h->g, k);
    const void *data;
    size_t n = 1;
    if (t == GGUF_TYPE_ARRAY) {
        t = gguf_get_arr_type(h->g, k);
        n = gguf_get_arr_n(h->g, k);
        if (t == GGUF_TYPE_STRING || t == GGUF_TYPE_ARRAY) return wrong_type(h, key, k, "an integer", errbuf);
        if (n == 0) return sipp_fail(errbuf, SIPP_ERR_MODEL, "'%s': key %s is an empty array", h->path, key);
        data = gguf_get_arr_data(h->g, k);
    } else {
        /* gguf_get_val_data asserts on a string: only a number's bytes are asked for. */
        if (t == GGUF_TYPE_STRING || t == GGUF_TYPE_BOOL || t == GGUF_TYPE_FLOAT32 || t == GGUF_TYPE_FLOAT64)
            return wrong_type(h, key, k, "an integer", errbuf);
        data = gguf_get_val_data(h->g, k);
    }
    uint64_t best = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t s = 0;
        uint64_t u = 0;
        bool negative;
        if (!int_at(t, data, i, &s, &u, &negative)) return wrong_type(h, key, k, "an integer", errbuf);
        if (negative)
            return sipp_fail(errbuf, SIPP_ERR_MODEL, "'%s': key %s is %lld, which is negative", h->path, key,
                             (long long)s);
        if (u > best) best = u;
    }
    *out = best;
    if (n_elems) *n_elems = n;
    return SIPP_OK;
}

sipp_status sipp_gguf_get_float(const sipp_gguf_header *h, const char *key, double *out, char *errbuf) {
    int64_t k = find(h, key, errbuf);
    if (k < 0) return SIPP_ERR_NOT_FOUND;
    enum gguf_type t = gguf_get_kv_type(h->g, k);
    if (t == GGUF_TYPE_FLOAT32)
        *out = gguf_get_val_f32(h->g, k);
    else if (t == GGUF_TYPE_FLOAT64)
        *out = gguf_get_val_f64(h->g, k);
    else
        return wrong_type(h, key, k, "a float", errbuf);
    return SIPP_OK;
}

sipp_status sipp_gguf_get_str(const sipp_gguf_header *h, const char *key, const char **out, char *errbuf) {
    int64_t k = find(h, key, errbuf);
    if (k < 0) return SIPP_ERR_NOT_FOUND;
    if (gguf_get_kv_type(h->g, k) != GGUF_TYPE_STRING) return wrong_type(h, key, k, "a string", errbuf);
    *out = gguf_get_val_str(h->g, k);
    return SIPP_OK;
}

sipp_status sipp_gguf_get_array_len(const sipp_gguf_header *h, const char *key, size_t *out, char *errbuf) {
    int64_t k = find(h, key, errbuf);
    if (k < 0) return SIPP_ERR_NOT_FOUND;
    if (gguf_get_kv_type(h->g, k) != GGUF_TYPE_ARRAY) return wrong_type(h, key, k, "an array", errbuf);
    *out = gguf_get_arr_n(h->g, k);
    return SIPP_OK;
}

int64_t sipp_gguf_int_or(const sipp_gguf_header *h, const char *key, int64_t dflt) {
    char err[SIPP_ERROR_SIZE];
    uint64_t v;
    if (sipp_gguf_get_uint(h, key, &v, NULL, err) != SIPP_OK || v > INT64_MAX) return dflt;
    return (int64_t)v;
}

void sipp_gguf_str_or(const sipp_gguf_header *h, const char *key, char *out, size_t cap, const char *dflt) {
    char err[SIPP_ERROR_SIZE];
    const char *s;
    sipp_strlcpy(out, sipp_gguf_get_str(h, key, &s, err) == SIPP_OK ? s : dflt, cap);
}

bool sipp_gguf_bool_or(const sipp_gguf_header *h, const char *key, bool dflt) {
    int64_t k = gguf_find_key(h->g, key);
    return k >= 0 && gguf_get_kv_type(h->g, k) == GGUF_TYPE_BOOL ? gguf_get_val_bool(h->g, k) : dflt;
}
