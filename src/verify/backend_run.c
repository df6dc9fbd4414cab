/*
 * backend_run.c: one backend's part of a verify run (sipp_verify_run).
 *
 * The model is loaded once per backend and freed before the next backend loads it, so a machine needs
 * memory for one copy only. On it, for every prompt (fixed tokens, the same on every backend):
 *
 *   teacher-forced logits   one batched prefill of the prompt's tokens; every position's logits are
 *                           compared with the reference backend's (the reference's are kept)
 *   cached decoding         the same tokens one at a time through the KV cache, compared with this
 *                           backend's own batched logits: a broken KV cache path shows here
 *   greedy continuation     through an engine (one slot, temperature 0, end-of-generation ignored),
 *                           so the sampler and the scheduler are in the loop as in real use
 *   graph trace             where each op of a decode step ran (for the manifest's graph contract)
 *
 * Greedy agreement is counted in tokens (greedy.c).
 *
 * The bench runs `sipp bench -o json` (params.bench_exe, the CLI passes its own binary) as a child
 * process after the model is freed: the bench then measures a cold load like a user's, and the
 * figures are the bench's own.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/util.h"
#include "verify/backend_run.h"
#include "verify/distance.h"
#include "verify/greedy.h"
#include "verify/image_case.h"
#include "verify/ppl_case.h"

#define MAX_DEVICES 32

/* Each stage, with the seconds since the run started: lavapipe and big models are slow. */
void verify_progress(const verify_config *cfg, const char *backend, const char *what) {
    if (cfg->progress) cfg->progress((sipp_now_ms() - cfg->t_start) / 1e3, backend, what, cfg->user);
}

static json_t *device_json(const sipp_backend_decision *d) {
    sipp_device_info devs[MAX_DEVICES];
    int n = sipp_devices_list(devs, MAX_DEVICES);
    for (int i = 0; i < n && i < MAX_DEVICES; i++) {
        if (strcmp(devs[i].name, d->devices) != 0) continue;
        /* ggml reports no driver version; the CPU's "driver" is the CPU module ggml picked, a GPU's is in
         * its description (lavapipe: "llvmpipe (LLVM 15.0.6, 256 bits)"). */
        const char *driver = strcmp(devs[i].backend, "cpu") == 0 ? sipp_cpu_module() : devs[i].description;
        return json_pack("{s:s, s:s, s:s, s:s, s:b, s:I, s:I}", "name", devs[i].name, "description",
                         devs[i].description, "type", devs[i].kind, "driver", driver, "software",
                         devs[i].software, "memory_total", (json_int_t)devs[i].memory_total, "memory_free",
                         (json_int_t)devs[i].memory_free);
    }
    return json_pack("{s:s}", "name", d->devices);
}

sipp_status verify_tokenize_prompts(const verify_config *cfg, verify_prompt *prompts, int n_prompts,
                                    char *err) {
    for (int p = 0; p < n_prompts; p++) {
        size_t need = 0, len = strlen(prompts[p].text);
        sipp_tokenize(cfg->vocab, prompts[p].text, len, true, false, NULL, 0, &need);
        prompts[p].tokens = malloc((need + 1) * sizeof(int32_t));
        if (!prompts[p].tokens || sipp_tokenize(cfg->vocab, prompts[p].text, len, true, false,
                                                prompts[p].tokens, need, &need) != SIPP_OK) {
            return sipp_fail(err, SIPP_ERR_INTERNAL, "cannot tokenize prompt %d ('%.40s'): %s", p + 1,
                             prompts[p].text, sipp_model_last_error(cfg->vocab));
        }
        prompts[p].n_tokens = (int)need;
        if (need == 0) {
            return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                             "prompt %d is empty after tokenization; give every prompt some text", p + 1);
        }
    }
    return SIPP_OK;
}

static sipp_status logits_pass(const verify_config *cfg, sipp_model *m, const verify_prompt *prompts,
                               int n_prompts, const verify_result *ref, verify_result *out, char *err) {
    char why[SIPP_ERROR_SIZE];
    out->logits = calloc((size_t)n_prompts, sizeof *out->logits);
    if (!out->logits) return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    for (int p = 0; p < n_prompts; p++) {
        int nv = 0;
        float *inc = NULL;
        if (sipp_model_eval_logits(m, prompts[p].tokens, (size_t)prompts[p].n_tokens, false, cfg->threads,
                                   &out->logits[p], &nv, why) != SIPP_OK ||
            sipp_model_eval_logits(m, prompts[p].tokens, (size_t)prompts[p].n_tokens, true, cfg->threads,
                                   &inc, &nv, why) != SIPP_OK)
            return sipp_fail(err, SIPP_ERR_INTERNAL, "%s: evaluating prompt %d failed: %s", out->backend,
                             p + 1, why);
        out->n_vocab = nv;
        verify_metrics_add(&out->cached, out->logits[p], inc, prompts[p].n_tokens, nv);
        sipp_free(inc);
        if (ref) {
            if (ref->n_vocab != nv)
                return sipp_fail(err, SIPP_ERR_MODEL,
                                 "%s has %d vocabulary entries, the reference %s %d: not the same model",
                                 out->backend, nv, ref->backend, ref->n_vocab);
            verify_metrics_add(&out->vs_ref, ref->logits[p], out->logits[p], prompts[p].n_tokens, nv);
        }
    }
    verify_metrics_finish(&out->cached);
    verify_metrics_finish(&out->vs_ref);
    return SIPP_OK;
}

/* Each quantized KV type's batched logits against this backend's f16 ones (out->logits): both K and V
 * at the type where the load has flash attention, K alone where it is off (a quantized V cache needs
 * it). A type the model's heads cannot take is recorded as skipped, with the reason. */
static sipp_status kv_pass(const verify_config *cfg, sipp_model *m, const verify_prompt *prompts,
                           int n_prompts, verify_result *out, char *err) {
    static const char *const types[VERIFY_KV_TYPES] = {"q8_0", "q4_0"};
    char why[SIPP_ERROR_SIZE];
    for (int i = 0; i < VERIFY_KV_TYPES; i++) {
        verify_kv_drift *d = &out->kv[i];
        d->cache_type_k = types[i];
        for (int q = 0; q < n_prompts; q++) {
            float *logits = NULL;
            int nv = 0;
            sipp_status st =
                sipp_model_eval_logits_kv(m, prompts[q].tokens, (size_t)prompts[q].n_tokens, cfg->threads,
                                          types[i], &d->cache_type_v, &logits, &nv, why);
            if (st ==
                SIPP_ERR_INVALID_ARGUMENT) { /* the model cannot take the type: recorded, not a failure */
                snprintf(d->skipped, sizeof d->skipped, "%s", why);
                break;
            }
            if (st != SIPP_OK)
                return sipp_fail(err, st, "%s: evaluating prompt %d with a %s KV cache failed: %s",
                                 out->backend, q + 1, types[i], why);
            verify_metrics_add(&d->vs_f16, out->logits[q], logits, prompts[q].n_tokens, nv);
            sipp_free(logits);
        }
        verify_metrics_finish(&d->vs_f16);
    }
    return SIPP_OK;
}

static sipp_status greedy_pass(const verify_config *cfg, sipp_model *m, const verify_prompt *prompts,
                               int n_prompts, const verify_result *ref, verify_result *out, char *err) {
    int longest = 0;
    for (int p = 0; p < n_prompts; p++)
        longest = prompts[p].n_tokens > longest ? prompts[p].n_tokens : longest;
    sipp_engine *e = NULL;
    sipp_status st = verify_engine_new(cfg, m, longest, out->backend, &e, err);
    if (st != SIPP_OK) return st;
    out->greedy = calloc((size_t)n_prompts, sizeof *out->greedy);
    out->greedy_agree = calloc((size_t)n_prompts, sizeof *out->greedy_agree);
    out->greedy_len = calloc((size_t)n_prompts, sizeof *out->greedy_len);
    sipp_status rc = out->greedy && out->greedy_agree && out->greedy_len
                         ? SIPP_OK
                         : sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    for (int p = 0; rc == SIPP_OK && p < n_prompts; p++) {
        sipp_request_params rp = sipp_request_default_params();
        rp.tokens = prompts[p].tokens;
        rp.n_tokens = (size_t)prompts[p].n_tokens;
        char what[32];
        snprintf(what, sizeof what, "prompt %d", p + 1);
        if ((rc = verify_greedy(cfg, e, &rp, out->backend, what, &out->greedy[p], err)) != SIPP_OK) break;
        const char *against = ref ? ref->greedy[p] : out->greedy[p];
        out->greedy_agree[p] =
            verify_token_agreement(cfg->vocab, against, out->greedy[p], &out->greedy_len[p]);
    }
    sipp_engine_free(e);
    return rc;
}

/* Runs `BENCH_EXE bench MODEL -o json ...` and parses its one line of JSON. */
void verify_backend_split(const char *label, char *name, size_t cap, const char **flash_attn) {
    size_t len = strlen(label), n = strlen(VERIFY_FA_ON); /* both suffixes have the same length */
    *flash_attn = NULL;
    if (len > n && strcmp(label + len - n, VERIFY_FA_ON) == 0)
        *flash_attn = "on";
    else if (len > n && strcmp(label + len - n, VERIFY_FA_OFF) == 0)
        *flash_attn = "off";
    else
        n = 0;
    snprintf(name, cap, "%.*s", (int)(len - n), label);
}

static json_t *run_bench(const verify_config *cfg, const char *label, char *err) {
    char pp[16], tg[16], reps[16], threads[16], backend[32];
    const char *flash_attn = NULL;
    verify_backend_split(label, backend, sizeof backend, &flash_attn);
    snprintf(pp, sizeof pp, "%d", cfg->bench_pp);
    snprintf(tg, sizeof tg, "%d", cfg->bench_tg);
    snprintf(reps, sizeof reps, "%d", cfg->bench_reps);
    snprintf(threads, sizeof threads, "%d", cfg->threads);
    const char *argv[] = {"sipp",
                          "bench",
                          cfg->model_path,
                          "--backend",
                          backend,
                          "-o",
                          "json",
                          "-p",
                          pp,
                          "-n",
                          tg,
                          "-r",
                          reps,
                          "--threads",
                          threads,
                          "--flash-attn",
                          flash_attn ? flash_attn : "auto", /* auto: the load policy's default */
                          cfg->artifact ? "--artifact" : NULL,
                          cfg->artifact,
                          NULL};
    int fd[2];
    if (pipe(fd) != 0) return NULL;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        return NULL;
    }
    if (pid == 0) {
        dup2(fd[1], STDOUT_FILENO);
        close(fd[0]);
        close(fd[1]);
        execv(cfg->bench_exe, (char *const *)argv);
        _exit(127);
    }
    close(fd[1]);
    /* Closing the pipe after reading (or failing to parse) ends a child that still writes (SIGPIPE),
     * so waiting for it cannot hang. */
    FILE *out = fdopen(fd[0], "r");
    json_t *j = out ? json_loadf(out, 0, NULL) : NULL;
    if (out)
        fclose(out);
    else
        close(fd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        continue;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        json_decref(j);
        j = NULL;
    }
    if (!j) sipp_fail(err, SIPP_ERR_INTERNAL, "%s: sipp bench failed (its error is above)", label);
    return j;
}

/* The top tokens of every position, so that a later run on another machine can compare its logits
 * with these without the full rows: {"ids": [[...] per position], "logits": [[...]]} per prompt. */
static json_t *top_json(const verify_result *r, const verify_prompt *prompts, int n_prompts) {
    json_t *arr = json_array();
    for (int p = 0; p < n_prompts; p++) {
        json_t *ids = json_array(), *vals = json_array();
        for (int t = 0; r->logits && r->logits[p] && t < prompts[p].n_tokens; t++) {
            int32_t id[VERIFY_TOPK];
            float v[VERIFY_TOPK];
            verify_topk(r->logits[p] + (size_t)t * r->n_vocab, r->n_vocab, VERIFY_TOPK, id, v);
            json_t *ri = json_array(), *rv = json_array();
            for (int k = 0; k < VERIFY_TOPK; k++) {
                json_array_append_new(ri, json_integer(id[k]));
                json_array_append_new(rv, isfinite(v[k]) ? json_real(v[k]) : json_null());
            }
            json_array_append_new(ids, ri);
            json_array_append_new(vals, rv);
        }
        json_array_append_new(arr, json_pack("{s:o, s:o}", "ids", ids, "logits", vals));
    }
    return arr;
}

sipp_status verify_run_backend(const verify_config *cfg, const char *backend, const verify_prompt *prompts,
                               int n_prompts, const verify_result *ref, verify_result *out, char *err) {
    char why[SIPP_ERROR_SIZE];
    snprintf(out->backend, sizeof out->backend, "%s", backend);
    verify_progress(cfg, backend, "loading the model");
    sipp_model_params mp = sipp_model_default_params();
    char name[sizeof out->backend];
    verify_backend_split(backend, name, sizeof name, &mp.flash_attn);
    mp.backend = name;
    mp.mmproj = cfg->mmproj;
    mp.mmproj_offload = cfg->mmproj_offload;
    mp.lora = cfg->lora;
    mp.n_lora = cfg->n_lora;
    sipp_model *m = NULL;
    sipp_status rc = sipp_model_load(cfg->model_path, &mp, &m, err);
    if (rc != SIPP_OK) return rc;
    sipp_model_get_info(m, &out->info);
    snprintf(out->model_desc, sizeof out->model_desc, "%s", out->info.description);
    out->device = device_json(sipp_model_backend(m));
    /* what the load decided, flash attention included */
    json_object_set_new(out->device, "backend_reason", json_string(sipp_model_backend(m)->reason));

    verify_progress(cfg, backend, "teacher-forced logits, batched and one token at a time");
    rc = logits_pass(cfg, m, prompts, n_prompts, ref, out, err);
    if (rc == SIPP_OK) out->top = top_json(out, prompts, n_prompts);
    if (rc == SIPP_OK) {
        verify_progress(cfg, backend, "logits with quantized KV caches against f16");
        rc = kv_pass(cfg, m, prompts, n_prompts, out, err);
    }
    for (int p = 0; ref && out->logits && p < n_prompts; p++) {
        free(out->logits[p]);
        out->logits[p] = NULL;
    }
    if (rc == SIPP_OK && cfg->greedy_tokens > 0) {
        verify_progress(cfg, backend, "greedy continuations");
        rc = greedy_pass(cfg, m, prompts, n_prompts, ref, out, err);
    }
    if (rc == SIPP_OK && cfg->mmproj) {
        verify_progress(cfg, backend,
                        "the image case: logits after a fixed image, and its greedy continuation");
        rc = verify_image_pass(cfg, m, ref, out, err);
    }
    if (rc == SIPP_OK && cfg->ppl_text) {
        verify_progress(cfg, backend, "the perplexity case");
        rc = verify_ppl_pass(cfg, m, out, err);
    }
    if (rc == SIPP_OK) {
        verify_progress(cfg, backend, "tracing the compute graph");
        if (sipp_model_trace_graph(m, cfg->threads, &out->graph, why) != SIPP_OK)
            rc = sipp_fail(err, SIPP_ERR_INTERNAL, "%s: tracing the graph failed: %s", backend, why);
    }
    sipp_model_free(m);
    verify_progress(cfg, backend, "done");
    if (rc == SIPP_OK && cfg->bench) {
        verify_progress(cfg, backend, "sipp bench");
        out->bench = run_bench(cfg, backend, err);
        if (!out->bench) rc = SIPP_ERR_INTERNAL;
    }
    out->ran = rc == SIPP_OK;
    return rc;
}

void verify_result_free(verify_result *r, int n_prompts) {
    for (int p = 0; p < n_prompts; p++) {
        if (r->logits) free(r->logits[p]);
        if (r->greedy) free(r->greedy[p]);
    }
    free(r->logits);
    free(r->greedy);
    free(r->greedy_agree);
    free(r->greedy_len);
    json_decref(r->device);
    json_decref(r->bench);
    json_decref(r->top);
    verify_image_free(&r->image);
    memset(r, 0, sizeof *r);
}

json_t *verify_graph_json(const sipp_graph_report *g) {
    json_t *ops = json_object();
    for (int i = 0; i < g->n_ops; i++)
        json_object_set_new(ops, g->ops[i].op,
                            json_pack("{s:i, s:i, s:i, s:s}", "count", g->ops[i].count, "supported",
                                      g->ops[i].supported, "on_device", g->ops[i].on_device, "where",
                                      g->ops[i].where));
    return json_pack("{s:s, s:i, s:i, s:i, s:o}", "device", g->device, "n_nodes", g->n_nodes,
                     "boundaries_decode", g->boundaries_decode, "boundaries_prefill", g->boundaries_prefill,
                     "ops", ops);
}

json_t *verify_result_json(const verify_result *r, const verify_prompt *prompts, int n_prompts) {
    json_t *greedy = json_array();
    for (int p = 0; r->greedy && p < n_prompts; p++)
        json_array_append_new(greedy, verify_greedy_json(r->greedy[p], r->greedy_agree[p], r->greedy_len[p]));
    json_t *o =
        json_pack("{s:s, s:O, s:s, s:o, s:o, s:o, s:o}", "backend", r->backend, "device", r->device, "model",
                  r->model_desc, "cached", verify_metrics_json(&r->cached), "greedy", greedy, "top",
                  r->top ? json_incref(r->top) : json_array(), "graph", verify_graph_json(&r->graph));
    json_object_set_new(o, "vs_ref", r->vs_ref.positions ? verify_metrics_json(&r->vs_ref) : json_null());
    json_t *kv = json_array();
    for (int i = 0; i < VERIFY_KV_TYPES && r->kv[i].cache_type_k; i++) {
        const verify_kv_drift *d = &r->kv[i];
        json_array_append_new(kv, json_pack("{s:s, s:s, s:o, s:o}", "cache_type_k", d->cache_type_k,
                                            "cache_type_v", d->cache_type_v, "vs_f16",
                                            *d->skipped ? json_null() : verify_metrics_json(&d->vs_f16),
                                            "skipped", *d->skipped ? json_string(d->skipped) : json_null()));
    }
    json_object_set_new(o, "kv_cache", kv);
    if (r->image.ran) json_object_set_new(o, "image", verify_image_json(&r->image));
    if (r->bench) json_object_set(o, "bench", r->bench);
    return o;
}
