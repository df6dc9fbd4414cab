/*
 * mmproj_check.c: whether a projector file can go with a model, from the two GGUF headers only.
 *
 * libmtmd finds out at load time, after reading the whole projector, and some of what it does not
 * check crashes it; `sipp serve --check` must say the same before anything is loaded. So the checks
 * live here, on sipp_gguf_inspect's reading of the headers, and the load runs them first too.
 */
#include <stdlib.h>

#include "model/mmproj_check.h"
#include "util/util.h"

#define CLIP_ARCH "clip" /* a projector's general.architecture */

sipp_status sipp_mmproj_check_file(const char *path, int64_t *n_embd, char *errbuf) {
    sipp_gguf_info *info = calloc(1, sizeof *info);
    if (!info) return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory reading '%s'", path);
    sipp_status st = sipp_gguf_inspect(path, info, errbuf);
    if (st == SIPP_OK && !info->projector)
        st = sipp_fail(
            errbuf, SIPP_ERR_MODEL,
            "'%s' is not a multimodal projector (its architecture is '%s', a projector's is '" CLIP_ARCH
            "'); give the mmproj-*.gguf file published with the model",
            path, *info->architecture ? info->architecture : "unset");
    else if (st == SIPP_OK && info->projector_n_embd <= 0)
        st = sipp_fail(errbuf, SIPP_ERR_MODEL,
                       "projector '%s' (type '%s') has no output layer to read its embedding width from; the "
                       "file is damaged or of a kind sipp does not know",
                       path, info->projector_type);
    if (st == SIPP_OK && n_embd) *n_embd = info->projector_n_embd;
    free(info);
    return st;
}

sipp_status sipp_mmproj_width_error(char *errbuf, const char *path, int64_t proj, const char *text_path,
                                    int64_t text) {
    return sipp_fail(errbuf, SIPP_ERR_MODEL,
                     "projector '%s' gives %lld-wide embeddings but model '%s' takes %lld (n_embd); use the "
                     "projector made for this model",
                     path, (long long)proj, text_path, (long long)text);
}

sipp_status sipp_mmproj_check(const char *path, const char *model_path, char *errbuf) {
    int64_t proj = 0;
    sipp_status st = sipp_mmproj_check_file(path, &proj, errbuf);
    if (st != SIPP_OK || !model_path) return st;
    sipp_gguf_info *info = calloc(1, sizeof *info);
    if (!info) return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory reading '%s'", model_path);
    st = sipp_gguf_inspect(model_path, info, errbuf);
    if (st == SIPP_OK && info->n_embd > 0 && info->n_embd != proj)
        st = sipp_mmproj_width_error(errbuf, path, proj, model_path, info->n_embd);
    free(info);
    return st;
}
