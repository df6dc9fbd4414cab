/*
 * manifest.c: the facts a verify manifest records about the model, the runtime and the host, and
 * reading a manifest back.
 *
 * The model's facts come from the file itself, not from a load: the SHA-256 of every byte (the
 * checkpoint contract; sipp_store_file_sha256, so a model hashed once is not hashed again while it
 * is unchanged), and from the GGUF header as the store reads it (src/store/gguf_info.c, metadata only,
 * no tensor data read) the architecture, the parameter count (the sum of every tensor's elements),
 * the tensor types by count, and the tokenizer: its model name and the hashes of its vocabulary, BPE
 * merges and chat template (sipp_gguf_tokenizer_read).
 *
 * A manifest is a JSON object with "kind": "sipp-verify-manifest" and "format": 1; readers refuse
 * other kinds and newer formats with a message saying so, rather than misreading them.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "store/gguf_info.h"
#include "util/util.h"
#include "verify/host.h"
#include "verify/manifest.h"

static json_t *hash_or_null(const char *hex) { return hex[0] ? json_string(hex) : json_null(); }
static json_t *id_or_null(int64_t id) { return id >= 0 ? json_integer((json_int_t)id) : json_null(); }

json_t *manifest_model_json(const char *path, char *err) {
    struct stat st;
    if (stat(path, &st) != 0) {
        sipp_fail(err, SIPP_ERR_IO, "cannot read model '%s': %s", path, strerror(errno));
        return NULL;
    }
    sipp_gguf_info *g = malloc(sizeof *g);
    sipp_gguf_tokenizer tok;
    char sha[SIPP_SHA256_HEX];
    if (!g) {
        sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
        return NULL;
    }
    if (sipp_gguf_inspect(path, g, err) != SIPP_OK || sipp_gguf_tokenizer_read(path, &tok, err) != SIPP_OK ||
        sipp_store_file_sha256(path, sha, NULL, err) != SIPP_OK) {
        free(g);
        return NULL;
    }
    json_t *types = json_object();
    for (int i = 0; i < g->n_types; i++)
        json_object_set_new(types, g->types[i].type, json_integer((json_int_t)g->types[i].n_tensors));
    char abs[SIPP_PATH_MAX];
    json_t *model = json_pack(
        "{s:s, s:s, s:I, s:s, s:s?, s:s?, s:I, s:I, s:o, s:{s:s?, s:I, s:o, s:I, s:o, s:o, s:o}, s:o}",
        "path", path, "abs_path", realpath(path, abs) ? abs : path, "size_bytes", (json_int_t)st.st_size,
        "sha256", sha, "architecture", g->architecture[0] ? g->architecture : NULL, "name",
        g->name[0] ? g->name : NULL, "n_params", (json_int_t)g->n_params, "n_tensors",
        (json_int_t)g->n_tensors, "tensor_types", types, "tokenizer", "model",
        g->tokenizer[0] ? g->tokenizer : NULL, "n_vocab", (json_int_t)tok.n_tokens, "vocab_sha256",
        hash_or_null(tok.tokens_sha256), "n_merges", (json_int_t)tok.n_merges, "merges_sha256",
        hash_or_null(tok.merges_sha256), "bos_id", id_or_null(tok.bos_id), "eos_id", id_or_null(tok.eos_id),
        "chat_template_sha256", hash_or_null(tok.chat_template_sha256));
    free(g);
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
        return sipp_fail(
            err, SIPP_ERR_IO,
            "cannot read manifest '%s': %s; write one with sipp verify MODEL --backends LIST --manifest OUT",
            path, strerror(errno));
    json_t *m = json_loadf(f, 0, &jerr);
    fclose(f);
    if (!m)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                         "manifest '%s' is not valid JSON (line %d, column %d: %s)", path, jerr.line,
                         jerr.column, jerr.text);
    const char *kind = json_string_value(json_object_get(m, "kind"));
    json_t *fmt = json_object_get(m, "format");
    const char *problem = NULL;
    if (!json_is_object(m) || !kind || strcmp(kind, VERIFY_MANIFEST_KIND) != 0)
        problem = "is not a sipp verify manifest (no \"kind\": \"" VERIFY_MANIFEST_KIND "\")";
    else if (!json_is_integer(fmt) || json_integer_value(fmt) > VERIFY_MANIFEST_FORMAT)
        problem = "has a format this sipp does not know (written by a newer sipp?)";
    else if (!json_is_object(json_object_get(m, "model")) ||
             !json_is_object(json_object_get(m, "backends")) ||
             !json_is_array(json_object_get(m, "prompts")) ||
             !json_is_string(json_object_get(m, "reference")))
        problem = "lacks one of \"model\", \"backends\", \"prompts\", \"reference\"";
    if (problem) {
        json_decref(m);
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                         "manifest '%s' %s; write one with sipp verify MODEL --backends LIST --manifest OUT",
                         path, problem);
    }
    *out = m;
    return SIPP_OK;
}

sipp_status manifest_write(const char *path, const json_t *manifest, char *err) {
    char tmp[SIPP_PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "manifest path '%.64s...' is too long", path);
    if (json_dump_file(manifest, tmp, JSON_INDENT(1) | JSON_REAL_PRECISION(9)) != 0 ||
        rename(tmp, path) != 0) {
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
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                         "the report is not valid JSON (line %d, column %d: %s)", jerr.line, jerr.column,
                         jerr.text);
    const char *kind = json_string_value(json_object_get(m, "kind"));
    sipp_status st =
        !kind || strcmp(kind, VERIFY_MANIFEST_KIND) != 0
            ? sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                        "the report is not a sipp verify report (no \"kind\": \"" VERIFY_MANIFEST_KIND "\")")
            : manifest_write(path, m, errbuf);
    json_decref(m);
    return st;
}
