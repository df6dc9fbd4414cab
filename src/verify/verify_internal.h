/*
 * verify_internal.h: what the files of src/verify share (internal; the API is the verify section of
 * sipp.h).
 *
 *   verify.c    sipp_verify_run: the order of the runs, thresholds, the report (the manifest)
 *   distance.c  comparing two sets of logits (max/RMS difference, KL divergence, top-k agreement)
 *   run.c       one backend's run: load, teacher-forced logits, cached decoding, greedy continuations,
 *               the graph trace, the optional bench
 *   against.c   the contracts (checkpoint, tokenizer, graph, numerics, speed) a recorded manifest
 *               states, checked on this machine
 *   manifest.c  the model's facts read from its GGUF header and file; reading and writing manifests
 *   host.c      facts about this host and the active artifact (also sipp doctor's, via sipp.h)
 *   image_case.c  the image case: a fixed chat with a fixed image through each backend's projector
 *   ppl_case.c    the perplexity case: a text's perplexity on each backend, and its drift
 *
 * Failures return a sipp_status with one line in `err` (SIPP_ERROR_SIZE bytes).
 */
#ifndef SIPP_VERIFY_INTERNAL_H
#define SIPP_VERIFY_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "sipp.h"

#define VERIFY_TOPK 5 /* top-k overlap and the recorded top tokens per position */
#define VERIFY_MANIFEST_FORMAT 1
#define VERIFY_MANIFEST_KIND "sipp-verify-manifest"

/* ---- metrics ---- */

/* Drift of one set of logits against another, accumulated over many positions (rows). */
typedef struct verify_metrics {
    long positions;
    double max_abs; /* largest |a - b| over every logit */
    double rms;     /* sqrt(mean (a - b)^2) over every logit */
    double kl_mean; /* mean over positions of KL(softmax(ref) || softmax(other)), nats */
    double kl_max;  /* the worst position's KL */
    double top1;    /* fraction of positions whose argmax agrees */
    double top5;    /* mean fraction of the reference's top-5 tokens also in the other's top-5 */
    /* running sums, internal to verify_metrics_add / verify_metrics_finish */
    double sum_sq, sum_kl, sum_top5;
    long n_values, top1_hits;
} verify_metrics;

/* Adds n_rows positions of n_vocab logits each. */
void verify_metrics_add(verify_metrics *m, const float *ref, const float *other, int n_rows, int n_vocab);
void verify_metrics_finish(verify_metrics *m);
json_t *verify_metrics_json(const verify_metrics *m);
/* Reads back what verify_metrics_json wrote; false when a field is missing. */
bool verify_metrics_from_json(const json_t *j, verify_metrics *m);

/* The k largest logits of a row, largest first. */
void verify_topk(const float *row, int n_vocab, int k, int32_t *ids, float *values);

/* ---- thresholds ---- */

json_t *verify_thresholds_json(const sipp_verify_thresholds *t);
/* Overwrites the fields present in j. */
void verify_thresholds_from_json(const json_t *j, sipp_verify_thresholds *t);

/* ---- inputs and one backend's run ---- */

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

/* Leading tokens two texts share, both tokenized with vocab; *n_ref: tokens of ref. Equal texts
 * count as fully equal. */
int verify_token_agreement(sipp_model *vocab, const char *ref, const char *other, int *n_ref);

/* Tokenizes the prompts with cfg->vocab (tokenization does not depend on the backend).
 * SIPP_ERR_INVALID_ARGUMENT for a prompt that has no tokens. */
sipp_status verify_tokenize_prompts(const verify_config *cfg, verify_prompt *prompts, int n_prompts,
                                    char *err);

/* A backend as verify names it: a backend name, or one followed by VERIFY_FA_ON ("+fa": flash
 * attention on) or VERIFY_FA_OFF ("-fa": off), so that a backend is compared with itself with and
 * without flash attention (--backends cpu,cpu+fa). Without a suffix the load takes the policy's
 * default (off for cpu). Writes the backend name into name (cap bytes) and sets *flash_attn to "on",
 * "off" or NULL. */
#define VERIFY_FA_ON "+fa"
#define VERIFY_FA_OFF "-fa"
void verify_backend_split(const char *label, char *name, size_t cap, const char **flash_attn);

/* An engine of one slot with room for prompt_positions and the greedy continuation. */
sipp_status verify_engine_new(const verify_config *cfg, sipp_model *m, int prompt_positions,
                              const char *backend, sipp_engine **e, char *err);
/* A greedy continuation of rp through engine e (temperature 0, end-of-generation ignored, max_tokens
 * cfg->greedy_tokens); *text malloc'ed. what names the input in errors ("prompt 2"). */
sipp_status verify_greedy(const verify_config *cfg, sipp_engine *e, sipp_request_params *rp,
                          const char *backend, const char *what, char **text, char *err);

/* ---- the image case (image_case.c) ---- */

/* The fixed chat: one user message holding the fixed image and a fixed question, as chat_json
 * (malloc'ed). *image_sha256 (SIPP_SHA256_HEX) is the image file's hash. NULL when out of memory. */
char *verify_image_chat(char image_sha256[SIPP_SHA256_HEX], int *width, int *height);
/* Runs the image case on the loaded model m (with cfg->mmproj), comparing with ref's (NULL: this is
 * the reference). */
sipp_status verify_image_pass(const verify_config *cfg, sipp_model *m, const verify_result *ref,
                              verify_result *out, char *err);
void verify_image_free(verify_image_result *r);
json_t *verify_image_json(const verify_image_result *r);
/* The top-level "image" object: the projector (path, sha256), the image, the prompt; or the reason the
 * case was skipped. NULL (err) when the projector cannot be read. */
json_t *verify_image_case_json(const verify_config *cfg, char *err);

/* ---- the perplexity case (ppl_case.c) ---- */

/* Reads the text file (*text malloc'ed). SIPP_ERR_IO naming it when it cannot be read or is empty. */
sipp_status verify_ppl_read(const char *path, char **text, size_t *len, char *err);
sipp_status verify_ppl_pass(const verify_config *cfg, sipp_model *m, verify_result *out, char *err);
/* |ppl - ref| / ref; infinite when either is not a finite positive number. */
double verify_ppl_drift(double ppl, double ref);
json_t *verify_ppl_json(const verify_ppl_result *r, const verify_ppl_result *ref);
/* The top-level "perplexity" object: the text (path, sha256, bytes), ctx_size, chunks; or why skipped. */
json_t *verify_ppl_case_json(const char *path, const verify_config *cfg);
/* The main weight type's place on the quantization ladder (f32/f16/bf16 0, q8_0 1, q6 2, q5 3, q4 4,
 * q3 5, q2 6...): the steps between two models' tensor_types objects (manifest "model.tensor_types"). */
int verify_quant_steps(const json_t *types_a, const json_t *types_b, const char **main_a,
                       const char **main_b);

/* Runs one backend; ref is the reference's result (NULL when this is the reference). */
sipp_status verify_run_backend(const verify_config *cfg, const char *backend, const verify_prompt *prompts,
                               int n_prompts, const verify_result *ref, verify_result *out, char *err);
void verify_result_free(verify_result *r, int n_prompts);

/* "browser": the WebAssembly runtime (make web) in headless Chromium, compared like a backend
 * (browser.c). Same contract as verify_run_backend. */
bool verify_is_browser(const char *name);
sipp_status verify_run_browser(const verify_config *cfg, const verify_prompt *prompts, int n_prompts,
                               const verify_result *ref, verify_result *out, char *err);

/* The results of one backend as the manifest records them: device, metrics, greedy outputs and their
 * hashes, the reference-relative top tokens, the graph, the bench figures. */
json_t *verify_result_json(const verify_result *r, const verify_prompt *prompts, int n_prompts);

/* One greedy continuation as the manifest records it: {sha256 (of the bytes), text (valid UTF-8),
 * agree_tokens, ref_tokens}. */
json_t *verify_greedy_json(const char *generated, int agree, int ref_tokens);

/* A graph report as JSON: {n_nodes, boundaries_decode, boundaries_prefill, ops: {OP: {...}}}. */
json_t *verify_graph_json(const sipp_graph_report *g);

/* ---- manifest ---- */

/* The model's facts: path, size, sha256, GGUF architecture, parameters, tensor types, tokenizer model,
 * vocabulary hash, chat template hash. NULL (message in err) when the file cannot be read. */
json_t *manifest_model_json(const char *path, char *err);
/* sipp's version, the llama.cpp release and commit, the artifact and its manifest. */
json_t *manifest_runtime_json(void);
/* CPU, ISA features, OS, kernel. */
json_t *manifest_host_json(void);
/* Reads and checks a manifest file: SIPP_ERR_IO when it cannot be read, SIPP_ERR_INVALID_ARGUMENT
 * when it is not a manifest this sipp can use. */
sipp_status manifest_load(const char *path, json_t **out, char *err);
sipp_status manifest_write(const char *path, const json_t *manifest, char *err);

/* ---- host (host.c) ---- */

/* {"model", "cores", "features": [ISA flags that matter to ggml's CPU modules], "ggml_cpu_module"} */
json_t *verify_host_cpu_json(void);
/* {"name" (os-release PRETTY_NAME), "kernel", "machine"} */
json_t *verify_host_os_json(void);
/* {"dir", "manifest": <artifact>/manifest.json or null} */
json_t *verify_artifact_json(void);

/* ---- against ---- */

/* Compares this machine's run with a manifest, contract by contract; adds "contracts", "context" and
 * "against_passed" to report. Returns true when every checked contract holds. */
bool verify_against(sipp_model *vocab, const json_t *recorded, const json_t *current,
                    const sipp_verify_thresholds *t, json_t *report);

#endif
