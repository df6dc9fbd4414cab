/*
 * manifest.c: the facts a verify manifest records about the model, the runtime and the host, and
 * reading a manifest back.
 *
 * The model's facts come from the file itself, not from a load: the SHA-256 of every byte (the
 * checkpoint contract), and from the GGUF header (gguf.h, metadata only, no tensor data read) the
 * architecture, the parameter count (the sum of every tensor's elements), the tensor types by count,
 * and the tokenizer: its model name, a hash of its vocabulary (the token strings in id order, each
 * followed by a NUL so that "ab","c" and "a","bc" differ), a hash of its BPE merges, and a hash of the
 * chat template. Two files with equal hashes tokenize and render chats the same way.
 *
 * A manifest is a JSON object with "kind": "sipp-verify-manifest" and "format": 1; readers refuse
 * other kinds and newer formats with a message saying so, rather than misreading them.
 */
#include <errno.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "ggml.h"
#include "gguf.h"
#include "util/util.h"
#include "verify/verify_internal.h"

#define HASH_CHUNK (1 << 20)
#define HEX_SHA256 65
#define GGUF_MAGIC_BYTES 4

static void hex(const unsigned char *md, unsigned int n, char out[HEX_SHA256]) {
    for (unsigned int i = 0; i < n && i < 32; i++)
        sprintf(out + 2 * i, "%02x", md[i]);
    out[64] = '\0';
}

/* The SHA-256 of a whole file, read in chunks (models are gigabytes). */
static bool file_sha256(const char *path, char out[HEX_SHA256]) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned char *buf = malloc(HASH_CHUNK);
    bool ok = md && buf && EVP_DigestInit_ex(md, EVP_sha256(), NULL);
    size_t n;
    while (ok && (n = fread(buf, 1, HASH_CHUNK, f)) > 0)
        ok = EVP_DigestUpdate(md, buf, n);
    ok = ok && !ferror(f);
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (ok) ok = EVP_DigestFinal_ex(md, digest, &len);
    if (ok) hex(digest, len, out);
    EVP_MD_CTX_free(md);
    free(buf);
    fclose(f);
    return ok;
}

/* Hash of a string array key: every string followed by a NUL. NULL when the key is absent. */
static json_t *strings_hash(const struct gguf_context *g, const char *key, size_t *count) {
    int64_t k = gguf_find_key(g, key);
    *count = 0;
    if (k < 0 || gguf_get_kv_type(g, k) != GGUF_TYPE_ARRAY || gguf_get_arr_type(g, k) != GGUF_TYPE_STRING)
        return json_null();
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    EVP_DigestInit_ex(md, EVP_sha256(), NULL);
    size_t n = gguf_get_arr_n(g, k);
    for (size_t i = 0; i < n; i++) {
        const char *s = gguf_get_arr_str(g, k, i);
        EVP_DigestUpdate(md, s, strlen(s) + 1);
    }
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(md, digest, &len);
    EVP_MD_CTX_free(md);
    char out[HEX_SHA256];
    hex(digest, len, out);
    *count = n;
    return json_string(out);
}

static const char *str_key(const struct gguf_context *g, const char *key) {
    int64_t k = gguf_find_key(g, key);
    return k >= 0 && gguf_get_kv_type(g, k) == GGUF_TYPE_STRING ? gguf_get_val_str(g, k) : NULL;
}

static json_t *int_key(const struct gguf_context *g, const char *key) {
    int64_t k = gguf_find_key(g, key);
    if (k < 0) return json_null();
    switch (gguf_get_kv_type(g, k)) {
    case GGUF_TYPE_UINT32: return json_integer(gguf_get_val_u32(g, k));
    case GGUF_TYPE_INT32: return json_integer(gguf_get_val_i32(g, k));
    default: return json_null();
    }
}

json_t *manifest_model_json(const char *path, char *err) {
    struct stat st;
    if (stat(path, &st) != 0) {
        sipp_fail(err, SIPP_ERR_IO, "cannot read model '%s': %s", path, strerror(errno));
        return NULL;
    }
    /* gguf.h logs its own complaint about a bad magic; check it first to keep the error one line. */
    char magic[GGUF_MAGIC_BYTES] = {0};
    FILE *f = fopen(path, "rb");
    size_t got = f ? fread(magic, 1, sizeof magic, f) : 0;
    if (f) fclose(f);
    if (got != sizeof magic || memcmp(magic, GGUF_MAGIC, sizeof magic) != 0) {
        sipp_fail(err, SIPP_ERR_MODEL, "'%s' is not a GGUF file (it does not start with \"GGUF\")", path);
        return NULL;
    }
    struct gguf_init_params gp = {.no_alloc = true, .ctx = NULL};
    struct gguf_context *g = gguf_init_from_file(path, gp);
    if (!g) {
        sipp_fail(err, SIPP_ERR_MODEL, "'%s' is not a readable GGUF file (its header does not parse)", path);
        return NULL;
    }
    char sha[HEX_SHA256];
    if (!file_sha256(path, sha)) {
        sipp_fail(err, SIPP_ERR_IO, "cannot hash model '%s': %s", path, strerror(errno));
        gguf_free(g);
        return NULL;
    }
    json_t *types = json_object();
    uint64_t params = 0;
    for (int64_t i = 0; i < gguf_get_n_tensors(g); i++) {
        const int64_t *ne = gguf_get_tensor_ne(g, i);
        uint64_t n = 1;
        for (int d = 0; d < GGML_MAX_DIMS; d++)
            n *= (uint64_t)ne[d];
        params += n;
        const char *tn = ggml_type_name(gguf_get_tensor_type(g, i));
        json_t *c = json_object_get(types, tn);
        json_object_set_new(types, tn, json_integer(c ? json_integer_value(c) + 1 : 1));
    }
    size_t n_tokens = 0, n_merges = 0;
    json_t *vocab_hash = strings_hash(g, "tokenizer.ggml.tokens", &n_tokens);
    json_t *merges_hash = strings_hash(g, "tokenizer.ggml.merges", &n_merges);
    const char *tmpl = str_key(g, "tokenizer.chat_template");
    json_t *tmpl_hash = json_null();
    if (tmpl) {
        char th[HEX_SHA256];
        verify_sha256_hex(tmpl, strlen(tmpl), th);
        tmpl_hash = json_string(th);
    }
    char abs[4096];
    const char *arch = str_key(g, "general.architecture"), *tok_model = str_key(g, "tokenizer.ggml.model");
    json_t *model = json_pack(
        "{s:s, s:s, s:I, s:s, s:s?, s:s?, s:I, s:I, s:o, s:{s:s?, s:I, s:o, s:I, s:o, s:o, s:o}, s:o}",
        "path", path, "abs_path", realpath(path, abs) ? abs : path, "size_bytes", (json_int_t)st.st_size,
        "sha256", sha, "architecture", arch, "name", str_key(g, "general.name"), "n_params",
        (json_int_t)params, "n_tensors", (json_int_t)gguf_get_n_tensors(g), "tensor_types", types,
        "tokenizer", "model", tok_model, "n_vocab", (json_int_t)n_tokens, "vocab_sha256", vocab_hash,
        "n_merges", (json_int_t)n_merges, "merges_sha256", merges_hash, "bos_id",
        int_key(g, "tokenizer.ggml.bos_token_id"), "eos_id", int_key(g, "tokenizer.ggml.eos_token_id"),
        "chat_template_sha256", tmpl_hash);
    gguf_free(g);
    return model;
}

json_t *manifest_runtime_json(void) {
    return json_pack("{s:s, s:s, s:s, s:s, s:o}", "sipp_version", sipp_version(), "llama_release",
                     sipp_llama_release(), "llama_commit", sipp_llama_commit(), "ggml_cpu_module",
                     sipp_cpu_module(), "artifact", verify_artifact_json());
}

json_t *manifest_host_json(void) {
    return json_pack("{s:o, s:o}", "cpu", verify_host_cpu_json(), "os", verify_host_os_json());
}

sipp_status manifest_load(const char *path, json_t **out, char *err) {
    *out = NULL;
    json_error_t jerr;
    FILE *f = fopen(path, "r");
    if (!f)
        return sipp_fail(err, SIPP_ERR_IO,
                         "cannot read manifest '%s': %s; write one with sipp verify MODEL --backends LIST --manifest OUT",
                         path, strerror(errno));
    json_t *m = json_loadf(f, 0, &jerr);
    fclose(f);
    if (!m)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "manifest '%s' is not valid JSON (line %d, column %d: %s)",
                         path, jerr.line, jerr.column, jerr.text);
    const char *kind = json_string_value(json_object_get(m, "kind"));
    json_t *fmt = json_object_get(m, "format");
    const char *problem = NULL;
    if (!json_is_object(m) || !kind || strcmp(kind, VERIFY_MANIFEST_KIND) != 0)
        problem = "is not a sipp verify manifest (no \"kind\": \"" VERIFY_MANIFEST_KIND "\")";
    else if (!json_is_integer(fmt) || json_integer_value(fmt) > VERIFY_MANIFEST_FORMAT)
        problem = "has a format this sipp does not know (written by a newer sipp?)";
    else if (!json_is_object(json_object_get(m, "model")) || !json_is_object(json_object_get(m, "backends")) ||
             !json_is_array(json_object_get(m, "prompts")) || !json_is_string(json_object_get(m, "reference")))
        problem = "lacks one of \"model\", \"backends\", \"prompts\", \"reference\"";
    if (problem) {
        json_decref(m);
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                         "manifest '%s' %s; write one with sipp verify MODEL --backends LIST --manifest OUT", path,
                         problem);
    }
    *out = m;
    return SIPP_OK;
}

sipp_status manifest_write(const char *path, const json_t *manifest, char *err) {
    char tmp[SIPP_PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "manifest path '%.64s...' is too long", path);
    if (json_dump_file(manifest, tmp, JSON_INDENT(1) | JSON_REAL_PRECISION(9)) != 0 || rename(tmp, path) != 0) {
        sipp_status st = sipp_fail(err, SIPP_ERR_IO, "cannot write manifest '%s': %s", path, strerror(errno));
        remove(tmp);
        return st;
    }
    return SIPP_OK;
}

sipp_status sipp_verify_manifest_read(const char *path, char **json, char *errbuf) {
    if (json) *json = NULL;
    if (!path) return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "no manifest path given");
    json_t *m;
    sipp_status st = manifest_load(path, &m, errbuf);
    if (st != SIPP_OK) return st;
    if (json && !(*json = json_dumps(m, JSON_INDENT(1) | JSON_REAL_PRECISION(9)))) {
        json_decref(m);
        return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory");
    }
    json_decref(m);
    return SIPP_OK;
}

sipp_status sipp_verify_manifest_write(const char *path, const char *report_json, char *errbuf) {
    if (!path || !report_json)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "no manifest path or no report given");
    json_error_t jerr;
    json_t *m = json_loads(report_json, 0, &jerr);
    if (!m)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "the report is not valid JSON (line %d, column %d: %s)",
                         jerr.line, jerr.column, jerr.text);
    const char *kind = json_string_value(json_object_get(m, "kind"));
    sipp_status st = !kind || strcmp(kind, VERIFY_MANIFEST_KIND) != 0
                         ? sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                                     "the report is not a sipp verify report (no \"kind\": \"" VERIFY_MANIFEST_KIND
                                     "\")")
                         : manifest_write(path, m, errbuf);
    json_decref(m);
    return st;
}
