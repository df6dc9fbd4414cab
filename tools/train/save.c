/*
 * save.c: writing the model sipp-train holds as an ordinary GGUF file.
 *
 * llama_model_save_to_file writes the weights, but it rebuilds the key-values from what llama.cpp
 * kept of the model, and that is not all of them: the chat template and most of general.* are lost,
 * and the context length is the training context (llama_opt_init sets it). So what it writes is a
 * first stage: its tensors are read back and written again under every key-value of the file the
 * model was loaded from, in that file's tensor order, and the second stage is renamed into place.
 * A checkpoint that is being rewritten is therefore never half a file, even when Ctrl-C comes twice.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "save.h"
#include "train.h"

#define STAGE_SUFFIX ".stage.tmp"
#define TMP_SUFFIX ".tmp"

/* The tensors of the stage file (their data in *data) under src's key-values. */
static struct gguf_context *restamp(const struct gguf_context *src, struct ggml_context *data,
                                    const char *path) {
    struct gguf_context *out = gguf_init_empty();
    if (!out) return NULL;
    gguf_set_kv(out, src);
    for (int64_t i = 0; i < gguf_get_n_tensors(src); i++) {
        const char *name = gguf_get_tensor_name(src, i);
        struct ggml_tensor *t = ggml_get_tensor(data, name);
        if (!t) {
            train_report("cannot write %s: llama.cpp's save has no tensor '%s'", path, name);
            gguf_free(out);
            return NULL;
        }
        gguf_add_tensor(out, t);
    }
    return out;
}

bool model_save(const struct llama_model *model, const struct gguf_context *src, const char *path) {
    char stage[PATH_MAX], tmp[PATH_MAX];
    const int a = snprintf(stage, sizeof stage, "%s" STAGE_SUFFIX, path);
    const int b = snprintf(tmp, sizeof tmp, "%s" TMP_SUFFIX, path);
    if (a < 0 || b < 0 || (size_t)a >= sizeof stage || (size_t)b >= sizeof tmp) {
        train_report("cannot write %s: the path is too long", path);
        return false;
    }

    bool ok = false;
    struct ggml_context *data = NULL;
    struct gguf_context *out = NULL;
    llama_model_save_to_file(model, stage);
    struct gguf_context *saved =
        gguf_init_from_file(stage, (struct gguf_init_params){.no_alloc = false, .ctx = &data});
    if (!saved) {
        train_report(
            "cannot write %s: llama.cpp's save to %s failed (is the directory writable, the disk full?)",
            path, stage);
        goto done;
    }
    out = restamp(src, data, path);
    if (!out) goto done;
    if (!gguf_write_to_file(out, tmp, false)) {
        train_report("cannot write %s: %s", tmp, strerror(errno));
        goto done;
    }
    if (rename(tmp, path) != 0) {
        train_report("cannot rename %s to %s: %s", tmp, path, strerror(errno));
        goto done;
    }
    ok = true;
done:
    unlink(stage);
    if (!ok) unlink(tmp);
    if (out) gguf_free(out);
    if (saved) gguf_free(saved);
    if (data) ggml_free(data);
    return ok;
}

bool model_quantize_q8_0(const char *in, const char *out) {
    struct llama_model_quantize_params qp = llama_model_quantize_default_params();
    qp.ftype = LLAMA_FTYPE_MOSTLY_Q8_0;
    if (llama_model_quantize(in, out, &qp) != 0) {
        train_report("cannot write %s: llama.cpp's quantizer failed on %s", out, in);
        return false;
    }
    return true;
}
