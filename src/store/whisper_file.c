/*
 * whisper_file.c: reading and checking a whisper.cpp model file without loading it (format in
 * whisper_file.h).
 *
 * whisper.cpp's loader trusts the file: a tensor with more than four dimensions writes past its
 * array, and a name or vocabulary length sizes an allocation before anything is read. So the check a
 * pull runs walks the file the way the loader will, with a cursor that knows how many bytes are left,
 * and refuses any claim larger than that (or outside what whisper.cpp can hold) before it moves.
 * Nothing is allocated: sections and tensor data are skipped with fseeko.
 */
#include "store/whisper_file.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "ggml.h"
#include "util/util.h"

#define MAX_DIMS 4          /* whisper.cpp reads a tensor's sizes into int32_t ne[4] */
#define TENSOR_NAME_MAX 256 /* whisper.cpp's names are short ("decoder.blocks.31.mlp.0.weight") */
#define I32 4
#define QNT_VERSION_FACTOR 1000  /* GGML_QNT_VERSION_FACTOR: ftype = version * 1000 + the file type */
#define MULTILINGUAL_VOCAB 51865 /* whisper.cpp's is_multilingual(): n_vocab >= this */

/* A cursor over the file that knows how many bytes are left. */
typedef struct {
    FILE *f;
    const char *path;
    uint64_t left;
    char *errbuf;
} reader;

static sipp_status unusable(const reader *r, const char *what) {
    return sipp_fail(r->errbuf, SIPP_ERR_MODEL,
                     "'%s' is not a usable whisper.cpp model: %s (a truncated or damaged file?)", r->path,
                     what);
}

static bool read_i32(reader *r, int32_t *v) {
    if (r->left < I32 || fread(v, I32, 1, r->f) != 1) return false;
    r->left -= I32;
    return true;
}

static bool skip(reader *r, uint64_t n) {
    if (n > r->left || fseeko(r->f, (off_t)n, SEEK_CUR) != 0) return false;
    r->left -= n;
    return true;
}

static bool hparams_valid(const sipp_whisper_hparams *h) {
    const int32_t sizes[] = {h->n_vocab,       h->n_audio_ctx, h->n_audio_state, h->n_audio_head,
                             h->n_audio_layer, h->n_text_ctx,  h->n_text_state,  h->n_text_head,
                             h->n_text_layer,  h->n_mels};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        if (sizes[i] <= 0) return false;
    return h->ftype >= 0;
}

/* The ggml file types (enum ggml_ftype) whisper.cpp's models come in, and their main tensor type:
 * those ggml_ftype_to_ggml_type maps (it aborts on any other). */
static const struct {
    int32_t ftype;
    enum ggml_type type;
} ftypes[] = {
    {0, GGML_TYPE_F32},      {1, GGML_TYPE_F16},     {2, GGML_TYPE_Q4_0},     {3, GGML_TYPE_Q4_1},
    {7, GGML_TYPE_Q8_0},     {8, GGML_TYPE_Q5_0},    {9, GGML_TYPE_Q5_1},     {10, GGML_TYPE_Q2_K},
    {11, GGML_TYPE_Q3_K},    {12, GGML_TYPE_Q4_K},   {13, GGML_TYPE_Q5_K},    {14, GGML_TYPE_Q6_K},
    {15, GGML_TYPE_IQ2_XXS}, {16, GGML_TYPE_IQ2_XS}, {17, GGML_TYPE_IQ3_XXS}, {18, GGML_TYPE_IQ1_S},
    {19, GGML_TYPE_IQ4_NL},  {20, GGML_TYPE_IQ3_S},  {21, GGML_TYPE_IQ2_S},   {22, GGML_TYPE_IQ4_XS},
    {23, GGML_TYPE_IQ1_M},   {24, GGML_TYPE_BF16},
};

/* The main tensor type's name of a file type, or NULL for one whisper.cpp cannot load. */
static const char *ftype_type(int32_t ftype) {
    for (size_t i = 0; i < sizeof ftypes / sizeof *ftypes; i++)
        if (ftypes[i].ftype == ftype) return ggml_type_name(ftypes[i].type);
    return NULL;
}

/* Opens path and reads the magic and hyperparameters; r->left is then what follows them. */
static sipp_status open_header(reader *r, const char *path, sipp_whisper_hparams *h, char *errbuf) {
    memset(r, 0, sizeof *r);
    r->path = path;
    r->errbuf = errbuf;
    struct stat st;
    if (!(r->f = fopen(path, "rb")))
        return sipp_fail(errbuf, SIPP_ERR_NOT_FOUND, "whisper model '%s' cannot be opened: %s", path,
                         strerror(errno));
    if (fstat(fileno(r->f), &st) != 0 || !S_ISREG(st.st_mode))
        return sipp_fail(errbuf, SIPP_ERR_MODEL, "'%s' is not a regular file", path);
    r->left = (uint64_t)st.st_size;
    uint32_t magic = 0;
    if (!read_i32(r, (int32_t *)&magic) || magic != SIPP_WHISPER_MAGIC || r->left < sizeof *h ||
        fread(h, sizeof *h, 1, r->f) != 1 || !hparams_valid(h))
        return sipp_fail(errbuf, SIPP_ERR_MODEL,
                         "'%s' is not a whisper.cpp model (no ggml magic and header at its start)", path);
    r->left -= sizeof *h;
    /* whisper.cpp hands the file type to ggml_ftype_to_ggml_type, which aborts on one it does not know */
    if (!ftype_type(h->ftype % QNT_VERSION_FACTOR)) {
        char what[SIPP_ERROR_SIZE / 2];
        snprintf(what, sizeof what, "its weight type (ftype %d) is none whisper.cpp loads", (int)h->ftype);
        return unusable(r, what);
    }
    return SIPP_OK;
}

sipp_status sipp_whisper_header_read(const char *path, sipp_whisper_hparams *h, uint64_t *file_bytes,
                                     char *errbuf) {
    reader r;
    sipp_status st = open_header(&r, path, h, errbuf);
    if (st == SIPP_OK) *file_bytes = r.left + I32 + sizeof *h;
    if (r.f) fclose(r.f);
    return st;
}

/* The mel filters and the vocabulary. */
static sipp_status check_tables(reader *r) {
    int32_t n_mel = 0, n_fft = 0, n_vocab = 0;
    if (!read_i32(r, &n_mel) || !read_i32(r, &n_fft) || n_mel <= 0 || n_fft <= 0 ||
        !skip(r, (uint64_t)n_mel * (uint64_t)n_fft * sizeof(float)))
        return unusable(r, "its mel filters do not fit in the file");
    /* each token takes at least its length field: a count beyond that is a false claim */
    if (!read_i32(r, &n_vocab) || n_vocab < 0 || (uint64_t)n_vocab > r->left / I32)
        return unusable(r, "its vocabulary size does not fit in the file");
    for (int32_t i = 0; i < n_vocab; i++) {
        int32_t len = 0;
        if (!read_i32(r, &len) || len < 0 || !skip(r, (uint64_t)len))
            return unusable(r, "its vocabulary is cut short");
    }
    return SIPP_OK;
}

/* The bytes of a tensor of type t and sizes ne, or 0 when that is no tensor ggml can hold. */
static uint64_t tensor_bytes(int32_t t, const int32_t *ne, int n_dims) {
    if (t < 0 || t >= GGML_TYPE_COUNT) return 0;
    const int64_t blck = ggml_blck_size((enum ggml_type)t);
    const size_t type_size = ggml_type_size((enum ggml_type)t);
    if (blck <= 0 || type_size == 0 || ne[0] % blck != 0) return 0;
    uint64_t bytes = (uint64_t)(ne[0] / blck) * type_size;
    for (int i = 1; i < n_dims; i++) {
        if (bytes > UINT64_MAX / (uint64_t)ne[i]) return 0;
        bytes *= (uint64_t)ne[i];
    }
    return bytes;
}

/* One tensor's descriptor and data. */
static sipp_status check_tensor(reader *r, int index) {
    int32_t n_dims = 0, name_len = 0, type = -1, ne[MAX_DIMS] = {1, 1, 1, 1};
    char what[SIPP_ERROR_SIZE / 2];
    if (!read_i32(r, &n_dims) || !read_i32(r, &name_len) || !read_i32(r, &type)) {
        snprintf(what, sizeof what, "tensor #%d is cut short", index + 1);
        return unusable(r, what);
    }
    if (n_dims < 1 || n_dims > MAX_DIMS || name_len < 1 || name_len > TENSOR_NAME_MAX) {
        snprintf(what, sizeof what, "tensor #%d claims %d dimensions and a %d-byte name (at most %d and %d)",
                 index + 1, n_dims, name_len, MAX_DIMS, TENSOR_NAME_MAX);
        return unusable(r, what);
    }
    for (int i = 0; i < n_dims; i++)
        if (!read_i32(r, &ne[i]) || ne[i] <= 0) {
            snprintf(what, sizeof what, "tensor #%d has a size that is missing or not positive", index + 1);
            return unusable(r, what);
        }
    char name[TENSOR_NAME_MAX + 1];
    if ((uint64_t)name_len > r->left || fread(name, 1, (size_t)name_len, r->f) != (size_t)name_len) {
        snprintf(what, sizeof what, "tensor #%d's name is cut short", index + 1);
        return unusable(r, what);
    }
    r->left -= (uint64_t)name_len;
    name[name_len] = '\0';
    const uint64_t bytes = tensor_bytes(type, ne, n_dims);
    if (bytes == 0) {
        snprintf(what, sizeof what, "tensor '%.64s' has ggml type %d, which cannot hold its sizes", name,
                 type);
        return unusable(r, what);
    }
    if (!skip(r, bytes)) {
        snprintf(what, sizeof what, "tensor '%.64s' needs %llu bytes, %llu are left", name,
                 (unsigned long long)bytes, (unsigned long long)r->left);
        return unusable(r, what);
    }
    return SIPP_OK;
}

sipp_status sipp_whisper_file_check(const char *path, sipp_whisper_hparams *h, int *n_tensors, char *errbuf) {
    reader r;
    sipp_status st = open_header(&r, path, h, errbuf);
    if (st == SIPP_OK) st = check_tables(&r);
    int n = 0;
    while (st == SIPP_OK && r.left > 0)
        st = check_tensor(&r, n++);
    if (st == SIPP_OK && n == 0) st = unusable(&r, "it holds no tensors");
    if (n_tensors) *n_tensors = n;
    if (r.f) fclose(r.f);
    return st;
}

/* whisper.cpp's name of a model's size: its e_model, decided by the encoder's depth alone. */
static const char *size_name(int32_t n_audio_layer) {
    static const struct {
        int32_t layers;
        const char *name;
    } sizes[] = {{4, "tiny"}, {6, "base"}, {12, "small"}, {24, "medium"}, {32, "large"}};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        if (sizes[i].layers == n_audio_layer) return sizes[i].name;
    return "unknown";
}

sipp_status sipp_whisper_inspect(const char *path, sipp_whisper_info *out, char *errbuf) {
    memset(out, 0, sizeof *out);
    if (!path) return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "no whisper model path given");
    sipp_whisper_hparams h;
    uint64_t bytes = 0;
    sipp_status st = sipp_whisper_header_read(path, &h, &bytes, errbuf);
    if (st == SIPP_OK) st = sipp_whisper_file_check(path, &h, &out->n_tensors, errbuf);
    if (st != SIPP_OK) return st;
    *out = (sipp_whisper_info){.n_vocab = h.n_vocab,
                               .n_audio_ctx = h.n_audio_ctx,
                               .n_audio_state = h.n_audio_state,
                               .n_audio_head = h.n_audio_head,
                               .n_audio_layer = h.n_audio_layer,
                               .n_text_ctx = h.n_text_ctx,
                               .n_text_state = h.n_text_state,
                               .n_text_head = h.n_text_head,
                               .n_text_layer = h.n_text_layer,
                               .n_mels = h.n_mels,
                               .ftype = h.ftype % QNT_VERSION_FACTOR,
                               .qnt_version = h.ftype / QNT_VERSION_FACTOR,
                               .multilingual = h.n_vocab >= MULTILINGUAL_VOCAB,
                               .n_tensors = out->n_tensors,
                               .file_bytes = bytes};
    sipp_strlcpy(out->ftype_name, ftype_type(out->ftype), sizeof out->ftype_name);
    sipp_strlcpy(out->size_name, size_name(h.n_audio_layer), sizeof out->size_name);
    return SIPP_OK;
}
