/*
 * verify.h: what the files of `sipp verify` share.
 *
 *   verify.c          the command: options, the order of the runs, thresholds, the report
 *   verify_metrics.c  comparing two sets of logits (max/RMS difference, KL divergence, top-k agreement)
 *   verify_run.c      one backend's run: load, teacher-forced logits, cached decoding, greedy
 *                     continuations, the graph trace, the optional bench
 *   verify_against.c  `--against MANIFEST`: the contracts (checkpoint, tokenizer, graph, numerics,
 *                     speed) a recorded manifest states, checked on this machine
 *   manifest.c        the model's facts read from its GGUF header and file, and the manifest's JSON
 *
 * Exit status: 0 everything within thresholds, 1 a runtime failure, 2 bad usage, 3 a threshold
 * exceeded or a contract changed.
 */
#ifndef SIPP_CLI_VERIFY_H
#define SIPP_CLI_VERIFY_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "cli/cli.h"

enum { EXIT_DRIFT = 3 };

#define VERIFY_MAX_BACKENDS 8
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

typedef struct verify_thresholds {
    double max_kl;          /* mean KL against the reference, nats */
    double max_kl_max;      /* worst single position's KL against the reference, nats */
    double min_top1;        /* top-1 agreement rate against the reference */
    double max_cached_kl;   /* mean KL of incremental decoding against batched prefill, each backend */
    double min_cached_top1; /* top-1 agreement of incremental against batched */
    double min_greedy;      /* fraction of the greedy continuation's tokens equal to the reference's */
    double speed_tolerance; /* --against: how much slower pp or tg may be than recorded (fraction) */
} verify_thresholds;

verify_thresholds verify_default_thresholds(void);
json_t *verify_thresholds_json(const verify_thresholds *t);
/* Overwrites the fields present in j. */
void verify_thresholds_from_json(const json_t *j, verify_thresholds *t);

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
    int bench_pp, bench_tg, bench_reps;
    bool quiet; /* no progress lines on stderr */
} verify_config;

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
    char **greedy;         /* per prompt: the continuation's text */
    int *greedy_agree;     /* per prompt: leading tokens equal to the reference's */
    int *greedy_len;       /* per prompt: tokens in the reference's continuation */
    sipp_graph_report graph;
    json_t *bench; /* `sipp bench -o json` output, or NULL */
} verify_result;

/* Leading tokens two texts share, both tokenized with vocab; *n_ref: tokens of ref. Equal texts
 * count as fully equal. */
int verify_token_agreement(sipp_model *vocab, const char *ref, const char *other, int *n_ref);

/* Tokenizes the prompts with cfg->vocab (tokenization does not depend on the backend). */
int verify_tokenize_prompts(const verify_config *cfg, verify_prompt *prompts, int n_prompts);

/* Runs one backend; ref is the reference's result (NULL when this is the reference). Returns an exit
 * status (EXIT_OK or EXIT_RUNTIME, after printing the error). */
int verify_run_backend(const verify_config *cfg, const char *backend, const verify_prompt *prompts,
                       int n_prompts, const verify_result *ref, verify_result *out);
void verify_result_free(verify_result *r, int n_prompts);

/* "browser": the WebAssembly runtime (make web) in headless Chromium, compared like a backend
 * (verify_browser.c). Same contract as verify_run_backend. */
bool verify_is_browser(const char *name);
int verify_run_browser(const verify_config *cfg, const verify_prompt *prompts, int n_prompts,
                       const verify_result *ref, verify_result *out);

/* The results of one backend as the manifest records them: device, metrics, greedy outputs and their
 * hashes, the reference-relative top tokens, the graph, the bench figures. */
json_t *verify_result_json(const verify_result *r, const verify_prompt *prompts, int n_prompts);

/* A graph report as JSON: {n_nodes, boundaries_decode, boundaries_prefill, ops: {OP: {...}}}. */
json_t *verify_graph_json(const sipp_graph_report *g);

/* The hex SHA-256 of a byte string (out: 65 bytes). */
void verify_sha256_hex(const void *data, size_t len, char out[65]);

/* ---- manifest ---- */

/* The model's facts: path, size, sha256, GGUF architecture, parameters, tensor types, tokenizer model,
 * vocabulary hash, chat template hash. NULL (message printed) when the file cannot be read. */
json_t *manifest_model_json(const char *path);
/* sipp's version, the llama.cpp release and commit, the artifact and its manifest. */
json_t *manifest_runtime_json(void);
/* CPU, ISA features, OS, kernel. */
json_t *manifest_host_json(void);
/* Reads and checks a manifest file; NULL with a one-line error printed. */
json_t *manifest_load(const char *path);
bool manifest_write(const char *path, const json_t *manifest);

/* ---- --against ---- */

/* Compares this machine's run with a manifest, contract by contract; prints the report (text, or
 * adds "contracts" to report_json). Returns true when every checked contract holds. */
bool verify_against(sipp_model *vocab, const json_t *recorded, const json_t *current,
                    const verify_thresholds *t, json_t *report);

#endif
