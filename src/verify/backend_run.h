/*
 * backend_run.h: one backend's part of a verify run (backend_run.c).
 */
#ifndef SIPP_VERIFY_BACKEND_RUN_H
#define SIPP_VERIFY_BACKEND_RUN_H

#include <jansson.h>
#include <stddef.h>

#include "sipp.h"
#include "verify/verify_types.h"

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

/* Reports a stage of a backend's run to cfg->progress (when set), with the seconds since the start. */
void verify_progress(const verify_config *cfg, const char *backend, const char *what);

/* Runs one backend; ref is the reference's result (NULL when this is the reference). */
sipp_status verify_run_backend(const verify_config *cfg, const char *backend, const verify_prompt *prompts,
                               int n_prompts, const verify_result *ref, verify_result *out, char *err);
void verify_result_free(verify_result *r, int n_prompts);

/* The results of one backend as the manifest records them: device, metrics, greedy outputs and their
 * hashes, the reference-relative top tokens, the graph, the bench figures. */
json_t *verify_result_json(const verify_result *r, const verify_prompt *prompts, int n_prompts);

/* A graph report as JSON: {n_nodes, boundaries_decode, boundaries_prefill, ops: {OP: {...}}}. */
json_t *verify_graph_json(const sipp_graph_report *g);

#endif
