/*
 * verify.c: sipp_verify_run, proving that backends agree on a model's outputs.
 *
 * The reference backend (params.ref, default cpu) runs first and its logits are kept; every other
 * backend then runs in turn (one model in memory at a time, see backend_run.c) and is compared with
 * it. Each backend is also compared with itself: incremental decoding through the KV cache against one
 * batched prefill. The figures are checked against thresholds; the failures are listed in the report's
 * verdict, naming the metric, the backend and the CLI flag that sets the threshold, which makes this
 * the numeric-drift gate for CI.
 *
 * The report is the manifest: model, runtime, host, devices, figures, greedy outputs, graphs. Against
 * a recorded manifest, the run takes the manifest's model, backends, prompts and thresholds (those
 * given explicitly win), reruns them here, and adds per contract what holds and what changed
 * (against.c).
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/util.h"
#include "verify/against.h"
#include "verify/backend_run.h"
#include "verify/browser.h"
#include "verify/distance.h"
#include "verify/image_case.h"
#include "verify/manifest.h"
#include "verify/ppl_case.h"
#include "verify/whisper_case.h"

#define DEFAULT_GREEDY_TOKENS 32
#define DEFAULT_BENCH_PP 128
#define DEFAULT_BENCH_TG 32
#define DEFAULT_BENCH_REPS 3
#define DEFAULT_PPL_CTX 512 /* sipp perplexity's and llama-perplexity's default */
#define DEFAULT_PPL_CHUNKS -1
#define PPL_MIN_CTX 8
#define AUTO "auto"
#define DEFAULT_REF "cpu"
/* Positions in all: the reference keeps every position's logits, 4 bytes x vocabulary each (512 MiB
 * for 1024 positions of a 128k vocabulary). */
#define MAX_POSITIONS 1024
#define BACKEND_NAME 16
#define TIME_TEXT 32

/* Fixed inputs: prose, code, numbers and punctuation, and several scripts, so that many kinds of
 * tokens and positions are exercised. Changing them changes every manifest: don't. */
static const char *const builtin_prompts[] = {
    "The quick brown fox jumps over the lazy dog. A portable model gives the same answer on every machine.",
    "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n\nprint([fib(i) for i in range(10)])",
    "1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144; pi = 3.14159, e = 2.71828 (approximately).",
    "Gr\xc3\xbc\xc3\x9f"
    "e aus M\xc3\xbcnchen! "
    "\xe6\x9d\xb1\xe4\xba\xac\xe3\x81\xaf\xe6\x99\xb4\xe3\x82\x8c\xe3\x81\xa7\xe3\x81\x99\xe3\x80\x82 "
    "\xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82, \xd0\xbc\xd0\xb8\xd1\x80!",
};
#define N_BUILTIN (int)(sizeof builtin_prompts / sizeof builtin_prompts[0])

/* One run's settings, after a manifest's were adopted. */
#define VERIFY_LORA_MAX 16

typedef struct run {
    const char *model, *ref;
    char backends[SIPP_VERIFY_MAX_BACKENDS][BACKEND_NAME];
    int n_backends;
    bool backends_given; /* named by the caller (not taken from a manifest) */
    sipp_verify_thresholds t;
    verify_config cfg;
    const char *ppl_path;
    char mmproj_buf[SIPP_PATH_MAX];          /* --mmproj auto: the projector found beside the model */
    char whisper_buf[SIPP_PATH_MAX];         /* a whisper model's file, when MODEL is its store name */
    sipp_lora_adapter lora[VERIFY_LORA_MAX]; /* --against: the manifest's adapters (paths borrowed from it) */
} run;

sipp_verify_params sipp_verify_default_params(void) {
    sipp_verify_params p = {.thresholds = sipp_verify_default_thresholds(),
                            .greedy_tokens = DEFAULT_GREEDY_TOKENS,
                            .bench_pp = DEFAULT_BENCH_PP,
                            .bench_tg = DEFAULT_BENCH_TG,
                            .bench_reps = DEFAULT_BENCH_REPS,
                            .mmproj_offload = true,
                            .ppl_ctx = DEFAULT_PPL_CTX,
                            .ppl_chunks = DEFAULT_PPL_CHUNKS};
    return p;
}

/* A backend name, optionally with a flash attention suffix (verify_backend_split). */
static sipp_status check_backend_label(const char *label, char *why) {
    char name[BACKEND_NAME];
    const char *flash_attn = NULL;
    if (strlen(label) >= BACKEND_NAME)
        return sipp_fail(why, SIPP_ERR_INVALID_ARGUMENT, "'%s' is too long", label);
    verify_backend_split(label, name, sizeof name, &flash_attn);
    return sipp_backend_check_name(name, why);
}

/* Adds a backend once. `bad` is the status for a bad name: a caller's mistake, or a manifest's. */
static sipp_status add_backend(run *o, const char *name, sipp_status bad, char *err) {
    char why[SIPP_ERROR_SIZE];
    if (strcmp(name, "auto") == 0)
        return sipp_fail(
            err, bad, "--backends: 'auto' is not a backend to compare; name them (cpu, vulkan, cuda, ...)");
    if (!verify_is_browser(name) && check_backend_label(name, why) != SIPP_OK)
        return sipp_fail(err, bad,
                         "--backends: %s (or browser: the WebAssembly runtime in headless Chromium)", why);
    for (int i = 0; i < o->n_backends; i++)
        if (strcmp(o->backends[i], name) == 0) return SIPP_OK;
    if (o->n_backends == SIPP_VERIFY_MAX_BACKENDS)
        return sipp_fail(err, bad, "--backends: at most %d backends", SIPP_VERIFY_MAX_BACKENDS);
    snprintf(o->backends[o->n_backends++], sizeof o->backends[0], "%s", name);
    return SIPP_OK;
}

static sipp_status check_params(const sipp_verify_params *p, char *err) {
    const sipp_verify_thresholds *t = &p->thresholds;
    if (t->min_top1 > 1 || t->min_cached_top1 > 1 || t->min_greedy > 1)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                         "--min-top1, --min-cached-top1 and --min-greedy are fractions in [0, 1]");
    if (p->against && p->prompts)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                         "--prompts and --against do not mix: --against reruns the manifest's own prompts");
    if (!p->against && p->n_backends == 0)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                         "--backends is required (e.g. --backends cpu,vulkan), or --against MANIFEST");
    if (!p->against && !p->model)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                         "no MODEL given (sipp verify MODEL --backends cpu,vulkan)");
    if (p->n_prompts > SIPP_VERIFY_MAX_PROMPTS)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "more than %d prompts; use fewer",
                         SIPP_VERIFY_MAX_PROMPTS);
    if (p->greedy_tokens < 0 || p->threads < 0 || p->bench_pp < 0 || p->bench_tg < 0 || p->bench_reps < 0)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                         "greedy_tokens, threads and the bench sizes must not be negative");
    if (p->ppl_ctx < PPL_MIN_CTX || p->ppl_chunks == 0 || p->ppl_chunks < -1)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                         "--ppl-ctx must be at least %d and --ppl-chunks positive (or -1, every chunk)",
                         PPL_MIN_CTX);
    if (p->bench && !p->bench_exe)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                         "the bench needs bench_exe, the sipp executable to run");
    char why[SIPP_ERROR_SIZE];
    if (p->ref && (strcmp(p->ref, "auto") == 0 || check_backend_label(p->ref, why) != SIPP_OK))
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "--ref: %s",
                         strcmp(p->ref, "auto") == 0 ? "'auto' is not a backend to compare with" : why);
    return SIPP_OK;
}

/* Which backends can run here. Against a manifest, a backend this machine lacks is reported as not
 * checked; asked for by name, it is an error. The reference must run in any case. */
static sipp_status resolve_backends(run *o, const json_t *recorded, verify_result *res, bool *runnable,
                                    char *err) {
    char why[SIPP_ERROR_SIZE];
    for (int i = 0; i < o->n_backends; i++) {
        snprintf(res[i].backend, sizeof res[i].backend, "%s", o->backends[i]);
        sipp_backend_decision d;
        char name[BACKEND_NAME];
        const char *flash_attn = NULL;
        verify_backend_split(o->backends[i], name, sizeof name, &flash_attn);
        runnable[i] =
            verify_is_browser(o->backends[i]) || sipp_backend_decide(name, NULL, &d, why) == SIPP_OK;
        if (runnable[i]) continue;
        if (recorded && !o->backends_given && strcmp(o->backends[i], o->ref) != 0) {
            snprintf(res[i].skipped, sizeof res[i].skipped, "%s", why);
            continue;
        }
        return sipp_fail(err, SIPP_ERR_BACKEND, "--backends: %s", why);
    }
    return SIPP_OK;
}

/* The prompts a manifest recorded (their texts; the tokens are compared by the tokenizer contract). */
static sipp_status manifest_prompts(const json_t *m, verify_prompt *prompts, int *n, char *err) {
    json_t *arr = json_object_get(m, "prompts"), *p;
    size_t i;
    *n = 0;
    json_array_foreach(arr, i, p) {
        const char *text = json_string_value(json_object_get(p, "text"));
        if (!text || *n == SIPP_VERIFY_MAX_PROMPTS)
            return sipp_fail(err, SIPP_ERR_MODEL, "--against: the manifest's prompt %zu has no text", i + 1);
        if (!(prompts[(*n)++].text = strdup(text)))
            return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    }
    if (*n == 0) return sipp_fail(err, SIPP_ERR_MODEL, "--against: the manifest records no prompts");
    return SIPP_OK;
}

static sipp_status copy_prompts(const char *const *texts, int n, verify_prompt *prompts, int *n_out,
                                char *err) {
    *n_out = 0;
    for (int i = 0; i < n; i++) {
        if (!texts[i]) return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "prompt %d is NULL", i + 1);
        if (!(prompts[(*n_out)++].text = strdup(texts[i])))
            return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    }
    return SIPP_OK;
}

/* ---- thresholds ---- */

/* detail (optional): what the value was computed from, for the message. */
static void add_failure_detail(json_t *failures, const char *backend, const char *metric, double value,
                               double limit, const char *flag, bool above, const char *detail) {
    json_t *f = json_pack("{s:s, s:s, s:o, s:f, s:s, s:s}", "backend", backend, "metric", metric, "value",
                          isfinite(value) ? json_real(value) : json_null(), "threshold", limit, "flag", flag,
                          "direction", above ? "above" : "below");
    if (detail) json_object_set_new(f, "detail", json_string(detail));
    json_array_append_new(failures, f);
}

static void add_failure(json_t *failures, const char *backend, const char *metric, double value, double limit,
                        const char *flag, bool above) {
    add_failure_detail(failures, backend, metric, value, limit, flag, above, NULL);
}

/* The logits thresholds on one set of metrics against the reference; prefix names the case ("" for the
 * prompts, "image." for the image case). */
static void check_vs_ref(const char *backend, const char *prefix, const verify_metrics *v,
                         const sipp_verify_thresholds *t, json_t *failures) {
    char metric[64];
    snprintf(metric, sizeof metric, "%skl_mean", prefix);
    if (!(v->kl_mean <= t->max_kl))
        add_failure(failures, backend, metric, v->kl_mean, t->max_kl, "--max-kl", true);
    snprintf(metric, sizeof metric, "%skl_max", prefix);
    if (!(v->kl_max <= t->max_kl_max))
        add_failure(failures, backend, metric, v->kl_max, t->max_kl_max, "--max-kl-max", true);
    snprintf(metric, sizeof metric, "%stop1_agreement", prefix);
    if (!(v->top1 >= t->min_top1))
        add_failure(failures, backend, metric, v->top1, t->min_top1, "--min-top1", false);
}

/* The image case (logits after the image, its greedy continuation) and the perplexity case, against
 * the reference res[0]. */
static void check_cases(const verify_result *res, int n, const sipp_verify_thresholds *t, json_t *failures) {
    const verify_result *ref = &res[0];
    for (int i = 1; i < n; i++) {
        const verify_result *r = &res[i];
        if (!r->ran) continue;
        if (r->image.ran) {
            check_vs_ref(r->backend, "image.", &r->image.vs_ref, t, failures);
            const verify_image_result *im = &r->image;
            double frac = im->greedy_len ? (double)im->greedy_agree / im->greedy_len : 1.0;
            if (im->greedy && !(frac >= t->min_greedy))
                add_failure(failures, r->backend, "image.greedy_agreement", frac, t->min_greedy,
                            "--min-greedy", false);
        }
        if (r->ppl.ran && ref->ppl.ran) {
            double drift = verify_ppl_drift(r->ppl.r.ppl, ref->ppl.r.ppl);
            char detail[SIPP_ERROR_SIZE];
            snprintf(detail, sizeof detail, "perplexity %.4f on %.16s against %.4f on %.16s", r->ppl.r.ppl,
                     r->backend, ref->ppl.r.ppl, ref->backend);
            if (!(drift <= t->ppl_max_drift))
                add_failure_detail(failures, r->backend, "perplexity.drift", drift, t->ppl_max_drift,
                                   "--ppl-max-drift", true, detail);
        }
    }
}

static void check_thresholds(const verify_result *res, int n, const char *ref,
                             const sipp_verify_thresholds *t, json_t *failures) {
    for (int i = 0; i < n; i++) {
        const verify_result *r = &res[i];
        if (!r->ran) continue;
        const verify_metrics *c = &r->cached;
        if (!(c->kl_mean <= t->max_cached_kl))
            add_failure(failures, r->backend, "cached.kl_mean", c->kl_mean, t->max_cached_kl,
                        "--max-cached-kl", true);
        if (!(c->top1 >= t->min_cached_top1))
            add_failure(failures, r->backend, "cached.top1_agreement", c->top1, t->min_cached_top1,
                        "--min-cached-top1", false);
        if (strcmp(r->backend, ref) == 0) continue;
        check_vs_ref(r->backend, "", &r->vs_ref, t, failures);
    }
}

/* Greedy agreement: a fraction over every prompt's continuation. Kept apart because it needs the
 * prompt count. */
static void check_greedy(const verify_result *res, int n, int n_prompts, const char *ref,
                         const sipp_verify_thresholds *t, json_t *failures) {
    for (int i = 0; i < n; i++) {
        const verify_result *r = &res[i];
        if (!r->ran || !r->greedy || strcmp(r->backend, ref) == 0) continue;
        long agree = 0, total = 0;
        for (int p = 0; p < n_prompts; p++) {
            agree += r->greedy_agree[p];
            total += r->greedy_len[p];
        }
        double frac = total ? (double)agree / (double)total : 1.0;
        if (!(frac >= t->min_greedy))
            add_failure(failures, r->backend, "greedy_agreement", frac, t->min_greedy, "--min-greedy", false);
    }
}

/* ---- the report ---- */

static json_t *prompts_json(const verify_prompt *prompts, int n) {
    json_t *arr = json_array();
    for (int p = 0; p < n; p++) {
        json_t *toks = json_array();
        for (int t = 0; t < prompts[p].n_tokens; t++)
            json_array_append_new(toks, json_integer(prompts[p].tokens[t]));
        json_array_append_new(arr, json_pack("{s:s, s:o}", "text", prompts[p].text, "tokens", toks));
    }
    return arr;
}

/* The fields every report has, whatever the recipe; takes the references it is given. */
static json_t *report_base(const run *o, json_t *model, json_t *prompts, json_t *backends, json_t *skipped,
                           json_t *failures) {
    char created[TIME_TEXT];
    time_t now = time(NULL);
    struct tm tm;
    strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
    const bool passed = json_array_size(failures) == 0;
    return json_pack("{s:s, s:i, s:s, s:o, s:o, s:o, s:s, s:o, s:o, s:i, s:o, s:o, s:{s:b, s:o}}", "kind",
                     VERIFY_MANIFEST_KIND, "format", VERIFY_MANIFEST_FORMAT, "created", created, "model",
                     model, "runtime", manifest_runtime_json(), "host", manifest_host_json(), "reference",
                     o->ref, "thresholds", verify_thresholds_json(&o->t), "prompts", prompts, "threads",
                     o->cfg.threads, "backends", backends, "not_run", skipped, "verdict", "passed", passed,
                     "failures", failures);
}

static json_t *build_report(const run *o, json_t *model, json_t *cases, const verify_result *res, int n,
                            const verify_prompt *prompts, int n_prompts, json_t *failures) {
    json_t *backends = json_object();
    for (int i = 0; i < n; i++) {
        if (!res[i].ran) continue;
        json_t *b = verify_result_json(&res[i], prompts, n_prompts);
        if (res[i].ppl.ran)
            json_object_set_new(b, "perplexity",
                                verify_ppl_json(&res[i].ppl, i > 0 && res[0].ppl.ran ? &res[0].ppl : NULL));
        json_object_set_new(backends, res[i].backend, b);
    }
    json_t *skipped = json_object();
    for (int i = 0; i < n; i++)
        if (!res[i].ran && res[i].skipped[0])
            json_object_set_new(skipped, res[i].backend, json_string(res[i].skipped));
    json_t *bench = o->cfg.bench ? json_pack("{s:i, s:i, s:i}", "pp", o->cfg.bench_pp, "tg", o->cfg.bench_tg,
                                             "reps", o->cfg.bench_reps)
                                 : json_null();
    json_t *report = report_base(o, model, prompts_json(prompts, n_prompts), backends, skipped, failures);
    if (report) {
        json_object_set_new(report, "recipe", json_string(SIPP_RECIPE_LLAMACPP));
        json_object_set_new(report, "greedy_tokens", json_integer(o->cfg.greedy_tokens));
        json_object_set_new(report, "bench", bench);
        json_object_update(report, cases); /* "image" and "perplexity" */
    } else {
        json_decref(bench);
    }
    json_decref(cases);
    return report;
}

/* Settings a manifest recorded become this run's, unless the caller gave them. */
/* The adapters applied, in the model's record: [{path, sha256, scale}]. */
static sipp_status record_lora(const verify_config *cfg, json_t *model, char *err) {
    if (cfg->n_lora == 0) return SIPP_OK;
    json_t *arr = json_array();
    json_object_set_new(model, "lora", arr);
    for (size_t i = 0; i < cfg->n_lora; i++) {
        char sha[SIPP_SHA256_HEX];
        if (!cfg->lora[i].path)
            return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "LoRA adapter %zu has no path", i);
        sipp_status st = sipp_store_file_sha256(cfg->lora[i].path, sha, NULL, err);
        if (st != SIPP_OK) return st;
        json_array_append_new(arr, json_pack("{s:s, s:s, s:f}", "path", cfg->lora[i].path, "sha256", sha,
                                             "scale", (double)cfg->lora[i].scale));
    }
    return SIPP_OK;
}

static sipp_status adopt_manifest(run *o, const sipp_verify_params *p, const json_t *m, char *err) {
    if (!o->model) o->model = json_string_value(json_object_get(json_object_get(m, "model"), "path"));
    if (!o->model)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                         "--against: the manifest names no model path; give MODEL");
    if (!o->ref) o->ref = json_string_value(json_object_get(m, "reference"));
    if (o->n_backends == 0) {
        const char *name;
        json_t *v;
        sipp_status st = add_backend(o, o->ref, SIPP_ERR_BACKEND, err);
        json_object_foreach(json_object_get(m, "backends"), name, v) {
            if (st != SIPP_OK) break;
            st = add_backend(o, name, SIPP_ERR_BACKEND, err);
        }
        if (st != SIPP_OK) return st;
    }
    sipp_verify_thresholds given = o->t;
    verify_thresholds_from_json(json_object_get(m, "thresholds"), &o->t);
    unsigned g = p->thresholds_given;
    if (g & SIPP_VERIFY_MAX_KL) o->t.max_kl = given.max_kl;
    if (g & SIPP_VERIFY_MAX_KL_MAX) o->t.max_kl_max = given.max_kl_max;
    if (g & SIPP_VERIFY_MIN_TOP1) o->t.min_top1 = given.min_top1;
    if (g & SIPP_VERIFY_MAX_CACHED_KL) o->t.max_cached_kl = given.max_cached_kl;
    if (g & SIPP_VERIFY_MIN_CACHED_TOP1) o->t.min_cached_top1 = given.min_cached_top1;
    if (g & SIPP_VERIFY_MIN_GREEDY) o->t.min_greedy = given.min_greedy;
    if (g & SIPP_VERIFY_SPEED_TOLERANCE) o->t.speed_tolerance = given.speed_tolerance;
    if (g & SIPP_VERIFY_PPL_MAX_DRIFT) o->t.ppl_max_drift = given.ppl_max_drift;
    if (g & SIPP_VERIFY_PPL_MAX_DRIFT_QUANT) o->t.ppl_max_drift_quant = given.ppl_max_drift_quant;
    /* The adapters it applied, unless the caller gives some. */
    const json_t *lora = json_object_get(json_object_get(m, "model"), "lora");
    size_t n_lora = json_array_size(lora) < VERIFY_LORA_MAX ? json_array_size(lora) : VERIFY_LORA_MAX;
    if (o->cfg.n_lora == 0 && n_lora > 0) {
        for (size_t i = 0; i < n_lora; i++) {
            const json_t *a = json_array_get(lora, i);
            o->lora[i] = (sipp_lora_adapter){json_string_value(json_object_get(a, "path")),
                                             (float)json_number_value(json_object_get(a, "scale"))};
        }
        o->cfg.lora = o->lora;
        o->cfg.n_lora = n_lora;
    }
    /* The cases the manifest ran, on the files it names (the checkpoint contract compares their hashes). */
    const json_t *image = json_object_get(m, "image");
    if (!o->cfg.mmproj &&
        (o->cfg.mmproj = json_string_value(json_object_get(json_object_get(image, "projector"), "path"))))
        o->cfg.mmproj_offload = !json_is_false(json_object_get(image, "offload"));
    const json_t *ppl = json_object_get(m, "perplexity");
    const char *text = json_string_value(json_object_get(json_object_get(ppl, "text"), "path"));
    if (!o->ppl_path && text) {
        o->ppl_path = text;
        if (json_is_integer(json_object_get(ppl, "ctx_size")))
            o->cfg.ppl_ctx = (int)json_integer_value(json_object_get(ppl, "ctx_size"));
        if (json_is_integer(json_object_get(ppl, "chunks")))
            o->cfg.ppl_chunks = (int)json_integer_value(json_object_get(ppl, "chunks"));
        if (o->cfg.ppl_ctx < PPL_MIN_CTX || o->cfg.ppl_chunks == 0 || o->cfg.ppl_chunks < -1)
            return sipp_fail(
                err, SIPP_ERR_MODEL,
                "--against: the manifest's perplexity.ctx_size %d or chunks %d is not one sipp writes",
                o->cfg.ppl_ctx, o->cfg.ppl_chunks);
    }
    json_t *greedy = json_object_get(m, "greedy_tokens");
    if (json_is_integer(greedy)) o->cfg.greedy_tokens = (int)json_integer_value(greedy);
    json_t *b = json_object_get(m, "bench");
    if (json_is_object(b) && !p->no_bench) {
        if (!p->bench_exe)
            return sipp_fail(
                err, SIPP_ERR_INVALID_ARGUMENT,
                "the manifest has bench figures, and checking them needs bench_exe (or no_bench)");
        o->cfg.bench = true;
        o->cfg.bench_pp = (int)json_integer_value(json_object_get(b, "pp"));
        o->cfg.bench_tg = (int)json_integer_value(json_object_get(b, "tg"));
        o->cfg.bench_reps = (int)json_integer_value(json_object_get(b, "reps"));
    }
    return SIPP_OK;
}

/* The reference runs first: the others are compared with its kept logits. */
static sipp_status reference_first(run *o, char *err) {
    char ref[BACKEND_NAME];
    snprintf(ref, sizeof ref, "%s", o->ref);
    sipp_status st = add_backend(o, ref, SIPP_ERR_INVALID_ARGUMENT, err);
    if (st != SIPP_OK) return st;
    for (int i = 1; i < o->n_backends; i++)
        if (strcmp(o->backends[i], ref) == 0) {
            memmove(o->backends[1], o->backends[0], (size_t)i * sizeof o->backends[0]);
            snprintf(o->backends[0], sizeof o->backends[0], "%s", ref);
        }
    return SIPP_OK;
}

static sipp_status check_positions(const verify_prompt *prompts, int n_prompts, char *err) {
    long positions = 0;
    for (int p = 0; p < n_prompts; p++)
        positions += prompts[p].n_tokens;
    if (positions > MAX_POSITIONS)
        return sipp_fail(
            err, SIPP_ERR_INVALID_ARGUMENT,
            "the prompts are %ld tokens in all, more than %d (the reference's logits of every position "
            "are kept in memory); use fewer or shorter prompts",
            positions, MAX_POSITIONS);
    return SIPP_OK;
}

/* Everything a run holds, freed in one place. */
typedef struct holdings {
    verify_result res[SIPP_VERIFY_MAX_BACKENDS];
    verify_prompt prompts[SIPP_VERIFY_MAX_PROMPTS];
    int n_prompts;
    json_t *recorded, *model, *failures, *report;
    json_t *cases; /* the report's "image" and "perplexity" */
    char *ppl_text;
    /* a whisper.cpp model's run */
    verify_whisper_result wres[SIPP_VERIFY_MAX_BACKENDS];
    float *clip;
    size_t n_clip;
    json_t *clip_json;
} holdings;

static void holdings_free(holdings *h, run *o) {
    for (int i = 0; i < SIPP_VERIFY_MAX_BACKENDS; i++) {
        verify_result_free(&h->res[i], h->n_prompts);
        verify_whisper_result_free(&h->wres[i]);
    }
    free(h->clip);
    json_decref(h->clip_json);
    for (int p = 0; p < h->n_prompts; p++) {
        free(h->prompts[p].text);
        free(h->prompts[p].tokens);
    }
    if (o->cfg.vocab) sipp_model_free(o->cfg.vocab);
    free(o->cfg.image_chat);
    free(h->ppl_text);
    json_decref(h->recorded);
    json_decref(h->model);
    json_decref(h->failures);
    json_decref(h->report);
    json_decref(h->cases);
    free(h);
}

/* A text too short for the perplexity case is refused before any backend runs (sipp_model_perplexity
 * would refuse it on the reference, after the other passes). */
static sipp_status check_ppl_length(const run *o, char *err) {
    size_t need = 0;
    sipp_tokenize(o->cfg.vocab, o->cfg.ppl_text, o->cfg.ppl_len, true, false, NULL, 0, &need);
    if (need >= 2 * (size_t)o->cfg.ppl_ctx) return SIPP_OK;
    return sipp_fail(
        err, SIPP_ERR_INVALID_ARGUMENT,
        "--ppl-text '%s' is %zu tokens; the perplexity case with --ppl-ctx %d needs at least %d (2 x "
        "ctx); give a longer text or a smaller --ppl-ctx",
        o->ppl_path, need, o->cfg.ppl_ctx, 2 * o->cfg.ppl_ctx);
}

/* The image and perplexity cases: --mmproj auto resolved, the image chat made, the text read; *cases
 * gets the report's "image" and "perplexity" objects (what ran on which files, or why it was skipped). */
static sipp_status prepare_cases(run *o, holdings *h, json_t **cases, char *err) {
    *cases = NULL;
    if (o->cfg.mmproj && strcmp(o->cfg.mmproj, AUTO) == 0) {
        char why[SIPP_ERROR_SIZE];
        if (sipp_store_find_mmproj(o->model, o->mmproj_buf, sizeof o->mmproj_buf, why) != SIPP_OK)
            return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "--mmproj auto: %s", why);
        o->cfg.mmproj = o->mmproj_buf;
    }
    char sha[SIPP_SHA256_HEX];
    int w, hgt;
    if (o->cfg.mmproj && !(o->cfg.image_chat = verify_image_chat(sha, &w, &hgt)))
        return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    sipp_status st;
    if (o->ppl_path && (st = verify_ppl_read(o->ppl_path, &h->ppl_text, &o->cfg.ppl_len, err)) != SIPP_OK)
        return st;
    o->cfg.ppl_text = h->ppl_text;
    if (o->ppl_path && (st = check_ppl_length(o, err)) != SIPP_OK) return st;
    json_t *image = verify_image_case_json(&o->cfg, err);
    if (!image) return SIPP_ERR_IO;
    *cases =
        json_pack("{s:o, s:o}", "image", image, "perplexity", verify_ppl_case_json(o->ppl_path, &o->cfg));
    return *cases ? SIPP_OK : sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
}

/* ---- a whisper.cpp model ---- */

/* What applies to a llama model's prompts only is refused, naming the flag. */
static sipp_status whisper_options(const sipp_verify_params *p, const run *o, char *err) {
    const char *bad = p->against                                  ? "--against"
                      : p->prompts                                ? "--prompts"
                      : p->mmproj                                 ? "--mmproj"
                      : p->ppl_text                               ? "--ppl-text"
                      : p->n_lora                                 ? "--lora"
                      : p->bench                                  ? "--bench"
                      : p->greedy_tokens != DEFAULT_GREEDY_TOKENS ? "--greedy-tokens"
                                                                  : NULL;
    for (int i = 0; !bad && i < o->n_backends; i++)
        if (verify_is_browser(o->backends[i])) bad = "--backends browser";
    if (!bad) return SIPP_OK;
    return sipp_fail(
        err, SIPP_ERR_INVALID_ARGUMENT,
        "%s does not apply to '%s', a whisper.cpp model (recipe %s): verify compares its decoder's "
        "logits on a clip (--audio FILE, or the built-in one) across --backends",
        bad, o->model, SIPP_RECIPE_WHISPERCPP);
}

/* Checking a recorded whisper manifest is not written yet: say so before adopting anything from it. */
static sipp_status refuse_whisper_manifest(const json_t *m, const char *path, char *err) {
    const char *recipe = json_string_value(json_object_get(m, "recipe"));
    if (!recipe || strcmp(recipe, SIPP_RECIPE_WHISPERCPP) != 0) return SIPP_OK;
    return sipp_fail(
        err, SIPP_ERR_INVALID_ARGUMENT,
        "--against: manifest '%s' records a whisper.cpp model, and --against checks llama models' "
        "manifests only; rerun sipp verify MODEL --backends LIST --manifest OUT and compare the "
        "two manifests' drift",
        path);
}

/* A whisper.cpp model, by path or by store name (sipp pull whisper-tiny): o->model becomes its file. */
static bool is_whisper(run *o) {
    char why[SIPP_ERROR_SIZE];
    if (sipp_store_resolve(o->model, o->whisper_buf, sizeof o->whisper_buf, why) != SIPP_OK ||
        !sipp_is_whisper_model(o->whisper_buf))
        return false;
    o->model = o->cfg.model_path = o->whisper_buf;
    return true;
}

/* The clip through every backend, each backend's logits against the reference's (whisper_case.c). */
static sipp_status verify_whisper_model(const sipp_verify_params *p, run *o, holdings *h, bool *passed,
                                        char *err) {
    sipp_status st = whisper_options(p, o, err);
    bool runnable[SIPP_VERIFY_MAX_BACKENDS] = {0};
    if (st != SIPP_OK || (st = resolve_backends(o, NULL, h->res, runnable, err)) != SIPP_OK) return st;
    if (!(h->model = verify_whisper_model_json(o->model, err))) return SIPP_ERR_MODEL;
    if ((st = verify_whisper_clip(p->audio, &h->clip, &h->n_clip, &h->clip_json, err)) != SIPP_OK) return st;
    for (int i = 0; i < o->n_backends; i++) {
        const verify_whisper_result *ref = i == 0 ? NULL : &h->wres[0];
        st = verify_whisper_run(&o->cfg, o->backends[i], h->clip, h->n_clip, ref, &h->wres[i], err);
        if (st != SIPP_OK) return st;
    }
    json_t *backends = json_object();
    if (!(h->failures = json_array()) || !backends) {
        json_decref(backends);
        return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    }
    for (int i = 0; i < o->n_backends; i++) {
        if (i > 0) check_vs_ref(h->wres[i].backend, "", &h->wres[i].vs_ref, &o->t, h->failures);
        json_object_set_new(backends, h->wres[i].backend, verify_whisper_result_json(&h->wres[i], i == 0));
    }
    h->report = report_base(o, json_incref(h->model), verify_whisper_prompts_json(&h->wres[0]), backends,
                            json_object(), json_incref(h->failures));
    if (!h->report) return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory building the report");
    json_object_set_new(h->report, "recipe", json_string(SIPP_RECIPE_WHISPERCPP));
    json_object_set_new(h->report, "clip", json_incref(h->clip_json));
    *passed = json_array_size(h->failures) == 0;
    return SIPP_OK;
}

static sipp_status verify(const sipp_verify_params *p, run *o, holdings *h, bool *passed, char *err) {
    sipp_status st = check_params(p, err);
    if (st != SIPP_OK) return st;
    o->model = p->model;
    o->ref = p->ref;
    o->t = p->thresholds;
    o->backends_given = p->n_backends > 0;
    for (size_t i = 0; i < p->n_backends; i++)
        if ((st = add_backend(o, p->backends[i], SIPP_ERR_INVALID_ARGUMENT, err)) != SIPP_OK) return st;
    o->cfg = (verify_config){.threads = p->threads,
                             .greedy_tokens = p->greedy_tokens,
                             .bench = p->bench,
                             .bench_exe = p->bench_exe,
                             .bench_pp = p->bench_pp,
                             .bench_tg = p->bench_tg,
                             .bench_reps = p->bench_reps,
                             .artifact = p->artifact,
                             .progress = p->progress,
                             .user = p->user,
                             .t_start = sipp_now_ms(),
                             .mmproj = p->mmproj,
                             .mmproj_offload = p->mmproj_offload,
                             .ppl_ctx = p->ppl_ctx,
                             .ppl_chunks = p->ppl_chunks,
                             .lora = p->lora,
                             .n_lora = p->n_lora};
    o->ppl_path = p->ppl_text;
    if (p->against && (st = manifest_load(p->against, &h->recorded, err)) != SIPP_OK) return st;
    if (h->recorded && (st = refuse_whisper_manifest(h->recorded, p->against, err)) != SIPP_OK) return st;
    if (h->recorded && (st = adopt_manifest(o, p, h->recorded, err)) != SIPP_OK) return st;
    if (p->no_bench) o->cfg.bench = false;
    if (!o->ref) o->ref = DEFAULT_REF;
    if ((st = reference_first(o, err)) != SIPP_OK) return st;
    char why[SIPP_ERROR_SIZE];
    if ((st = sipp_runtime_init(NULL, why)) != SIPP_OK) return sipp_fail(err, st, "%s", why);
    o->cfg.model_path = o->model;
    if (o->cfg.threads == 0) o->cfg.threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (is_whisper(o)) return verify_whisper_model(p, o, h, passed, err);
    if (p->audio)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                         "--audio is for whisper.cpp models (recipe %s); '%s' is not one",
                         SIPP_RECIPE_WHISPERCPP, o->model);

    bool runnable[SIPP_VERIFY_MAX_BACKENDS] = {0};
    if ((st = resolve_backends(o, h->recorded, h->res, runnable, err)) != SIPP_OK) return st;
    if (h->recorded)
        st = manifest_prompts(h->recorded, h->prompts, &h->n_prompts, err);
    else if (p->prompts)
        st = copy_prompts(p->prompts, (int)p->n_prompts, h->prompts, &h->n_prompts, err);
    else
        st = copy_prompts(builtin_prompts, N_BUILTIN, h->prompts, &h->n_prompts, err);
    if (st != SIPP_OK) return st;
    if (h->n_prompts == 0) return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "no prompts given");

    /* The tokenizer: a vocabulary-only load (tokenization does not depend on the backend). It comes
     * first because its errors about a file that is not a model are the clearest. */
    sipp_model_params vp = sipp_model_default_params();
    vp.vocab_only = true;
    if ((st = sipp_model_load(o->model, &vp, &o->cfg.vocab, err)) != SIPP_OK) return st;
    if (!(h->model = manifest_model_json(o->model, err))) return SIPP_ERR_MODEL;
    if ((st = record_lora(&o->cfg, h->model, err)) != SIPP_OK) return st;
    if ((st = verify_tokenize_prompts(&o->cfg, h->prompts, h->n_prompts, err)) != SIPP_OK) return st;
    if ((st = check_positions(h->prompts, h->n_prompts, err)) != SIPP_OK) return st;
    if ((st = prepare_cases(o, h, &h->cases, err)) != SIPP_OK) return st;

    for (int i = 0; i < o->n_backends; i++) {
        if (!runnable[i]) continue;
        const verify_result *ref = i == 0 ? NULL : &h->res[0];
        st =
            verify_is_browser(o->backends[i])
                ? verify_run_browser(&o->cfg, h->prompts, h->n_prompts, ref, &h->res[i], err)
                : verify_run_backend(&o->cfg, o->backends[i], h->prompts, h->n_prompts, ref, &h->res[i], err);
        if (st != SIPP_OK) return st;
    }
    if (!(h->failures = json_array())) return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    check_thresholds(h->res, o->n_backends, o->ref, &o->t, h->failures);
    check_greedy(h->res, o->n_backends, h->n_prompts, o->ref, &o->t, h->failures);
    check_cases(h->res, o->n_backends, &o->t, h->failures);
    h->report = build_report(o, json_incref(h->model), json_incref(h->cases), h->res, o->n_backends,
                             h->prompts, h->n_prompts, json_incref(h->failures));
    if (!h->report) return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory building the report");
    bool contracts_hold = true;
    if (h->recorded) contracts_hold = verify_against(o->cfg.vocab, h->recorded, h->report, &o->t, h->report);
    *passed = json_array_size(h->failures) == 0 && contracts_hold;
    return SIPP_OK;
}

sipp_status sipp_verify_run(const sipp_verify_params *params, char **report_json, bool *passed,
                            char *errbuf) {
    if (report_json) *report_json = NULL;
    if (passed) *passed = false;
    if (!params || !report_json || !passed)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "no parameters, report or verdict pointer given");
    run *o = calloc(1, sizeof *o);
    holdings *h = calloc(1, sizeof *h);
    if (!o || !h) {
        free(o);
        free(h);
        return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory");
    }
    sipp_status st = verify(params, o, h, passed, errbuf);
    if (st == SIPP_OK && !(*report_json = json_dumps(h->report, JSON_INDENT(1) | JSON_REAL_PRECISION(9))))
        st = sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory");
    if (st != SIPP_OK) *passed = false;
    holdings_free(h, o);
    free(o);
    return st;
}
