/*
 * verify_types.h: the data a verify run's files share (internal; the API is the verify section of
 * sipp.h): its inputs and configuration, and what one backend produced. Types only: each file of
 * src/verify declares its functions in its own header.
 *
 *   verify.c      sipp_verify_run: the order of the runs, thresholds, the report (the manifest)
 *   distance.c    comparing two sets of logits (max/RMS difference, KL divergence, top-k agreement)
 *   backend_run.c one backend's run: load, teacher-forced logits, cached decoding, greedy
 *                 continuations, the graph trace, the optional bench
 *   greedy.c      an engine for a case, a greedy continuation through it, and how far two agree
 *   image_case.c  the image case: a fixed chat with a fixed image through each backend's projector
 *   ppl_case.c    the perplexity case: a text's perplexity on each backend, and its drift
 *   browser.c     the WebAssembly runtime in headless Chromium, compared like a backend
 *   whisper_case.c a whisper.cpp model (recipe whispercpp): a clip through each backend's encoder, the
 *                 decoder's first logits compared (through the speech layer's whisper_probe.h)
 *   against.c     the contracts (checkpoint, tokenizer, graph, numerics, speed) a recorded manifest
 *                 states, checked on this machine
 *   manifest.c    the model's facts read from its GGUF header and file; reading and writing manifests
 *   host.c        facts about this host and the active artifact (also sipp doctor's, via sipp.h)
 *
 * The layers among them, lowest first: distance, host < manifest; greedy < image_case, ppl_case <
 * backend_run, browser < whisper_case, against < verify. Failures return a sipp_status with one line in `err`
 * (SIPP_ERROR_SIZE bytes).
 */
#ifndef SIPP_VERIFY_VERIFY_TYPES_H
#define SIPP_VERIFY_VERIFY_TYPES_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "sipp.h"
#include "verify/distance.h"

typedef struct verify_prompt {
    char *text;
    int32_t *tokens;
    int n_tokens;
} verify_prompt;

typedef struct verify_config {
    const char *model_path;
    sipp_model *vocab; /* a vocabulary-only load of the model: tokenizes prompts and continuations */
    const char *artifact;
    int threads;
    int greedy_tokens; /* tokens of greedy continuation per prompt */
    bool bench;        /* also run `sipp bench` per backend */
    const char *bench_exe;
    int bench_pp, bench_tg, bench_reps;
    sipp_verify_progress_fn progress;
    void *user;
    double t_start;     /* sipp_now_ms() when the run started, for progress */
    const char *mmproj; /* the image case's projector; NULL: the case is skipped */
    bool mmproj_offload;
    char *image_chat;     /* the image case's chat (chat_json), made once (verify_image_chat) */
    const char *ppl_text; /* the perplexity case's text (ppl_len bytes); NULL: skipped */
    size_t ppl_len;
    int ppl_ctx, ppl_chunks;
    const sipp_lora_adapter *lora; /* loaded with the model on every backend */
    size_t n_lora;
} verify_config;

/* The quantized KV cache types whose drift against f16 every backend measures. */
#define VERIFY_KV_TYPES 2

/* One KV cache type's batched logits against the same backend's f16 cache. */
typedef struct verify_kv_drift {
    const char *cache_type_k, *cache_type_v; /* static names; v stays f16 where flash attention is off */
    char skipped[SIPP_ERROR_SIZE];           /* why it did not run ("" when it ran) */
    verify_metrics vs_f16;
} verify_kv_drift;

/* The image case on one backend: the logits of the text after the image, and a greedy continuation. */
typedef struct verify_image_result {
    bool ran;
    sipp_chat_logits logits; /* kept for the reference only, like verify_result.logits */
    int n_rows, n_prompt, n_media;
    char projector_device[64];
    verify_metrics vs_ref;
    char *greedy;                 /* the continuation's text, NULL with greedy_tokens 0 */
    int greedy_agree, greedy_len; /* leading tokens equal to the reference's, and its count */
} verify_image_result;

/* The perplexity case on one backend. */
typedef struct verify_ppl_result {
    bool ran;
    sipp_perplexity_result r;
} verify_ppl_result;

/* Everything one backend produced. The reference's logits stay alive for the others' comparison. */
typedef struct verify_result {
    char backend[16];
    bool ran;
    char skipped[SIPP_ERROR_SIZE]; /* why it did not run ("" when it ran) */
    json_t *device;                /* {name, description, type, software, memory_total, memory_free} */
    char model_desc[128];
    sipp_model_info info;
    float **logits; /* per prompt: n_tokens rows of n_vocab (batched prefill); kept for the
                       reference only, freed after the comparison for the others */
    json_t *top;    /* per prompt and position: the top tokens and their logits */
    int n_vocab;
    verify_metrics vs_ref; /* batched logits against the reference backend's */
    verify_metrics cached; /* incremental against batched, on this backend */
    verify_kv_drift kv[VERIFY_KV_TYPES];
    char **greedy;     /* per prompt: the continuation's text */
    int *greedy_agree; /* per prompt: leading tokens equal to the reference's */
    int *greedy_len;   /* per prompt: tokens in the reference's continuation */
    sipp_graph_report graph;
    json_t *bench; /* `sipp bench -o json` output, or NULL */
    verify_image_result image;
    verify_ppl_result ppl;
} verify_result;

#endif
