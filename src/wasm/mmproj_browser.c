/*
 * mmproj_browser.c: multimodal projectors as the browser runtime has them, that is none.
 *
 * Natively, src/model/mmproj.c opens libmtmd.so from the artifact at run time. The browser's
 * WebAssembly module links llama.cpp without libmtmd, so this file replaces mmproj.c in `make web`
 * and only there: a projector is refused by name, and a chat with images never reaches the engine
 * (the browser's chat layer has no media parts).
 */
#include <limits.h>
#include <stdlib.h>

#include "model/mmproj.h"
#include "util/util.h"

sipp_status sipp_mmproj_load(const char *path, const struct llama_model *lm, const char *text_path,
                             bool use_gpu, enum llama_flash_attn_type flash_attn, int n_threads,
                             sipp_memory *mem, sipp_mmproj **out, char *errbuf) {
    *out = NULL;
    return sipp_fail(
        errbuf, SIPP_ERR_BACKEND,
        "cannot load projector '%s': the browser runtime has no libmtmd, so it runs text models only", path);
}

void sipp_mmproj_free(sipp_mmproj *p) {}
bool sipp_mmproj_vision(const sipp_mmproj *p) { return false; }
bool sipp_mmproj_audio(const sipp_mmproj *p) { return false; }
const char *sipp_mmproj_device(const sipp_mmproj *p) { return ""; }
int sipp_mmproj_audio_rate(const sipp_mmproj *p) { return 0; }

void sipp_media_bytes_free(sipp_media_bytes *items, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(items[i].data);
    free(items);
}

sipp_status sipp_media_tokenize(sipp_mmproj *p, const char *text, const sipp_media_bytes *items, size_t n,
                                llama_token **tokens, int *n_tokens, sipp_media_prompt **out, char *errbuf) {
    return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "the browser runtime takes no images or audio");
}

void sipp_media_prompt_free(sipp_media_prompt *mp) {}
int sipp_media_n_spans(const sipp_media_prompt *mp) { return 0; }
const sipp_media_span *sipp_media_span_get(const sipp_media_prompt *mp, int i) { return NULL; }
int sipp_media_span_at(const sipp_media_prompt *mp, int pos) { return -1; }
int sipp_media_next_start(const sipp_media_prompt *mp, int pos) { return INT_MAX; }
int sipp_media_align(const sipp_media_prompt *mp, int n) { return n; }

sipp_status sipp_media_eval(sipp_mmproj *p, struct llama_context *ctx, const sipp_media_prompt *mp, int i,
                            llama_seq_id seq_id, int n_batch, double *encode_ms, char *errbuf) {
    return sipp_fail(errbuf, SIPP_ERR_INTERNAL, "the browser runtime takes no images or audio");
}
