/*
 * verify.c: sipp_verify_run, proving that backends agree on a model's outputs.
 *
 * The reference backend (params.ref, default cpu) runs first and its logits are kept; every other
 * backend then runs in turn (one model in memory at a time, see run.c) and is compared with it. Each
 * backend is also compared with itself: incremental decoding through the KV cache against one batched
 * prefill. The figures are checked against thresholds; the failures are listed in the report's
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
#include "verify/verify_internal.h"

#define DEFAULT_GREEDY_TOKENS 32
#define DEFAULT_BENCH_PP 128
#define DEFAULT_BENCH_TG 32
#define DEFAULT_BENCH_REPS 3
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
typedef struct run {
    const char *model, *ref;
    char backends[SIPP_VERIFY_MAX_BACKENDS][BACKEND_NAME];
    int n_backends;
    bool backends_given; /* named by the caller (not taken from a manifest) */
    sipp_verify_thresholds t;
    verify_config cfg;
} run;

sipp_verify_params sipp_verify_default_params(void) {
    sipp_verify_params p = {.thresholds = sipp_verify_default_thresholds(),
                            .greedy_tokens = DEFAULT_GREEDY_TOKENS,
                            .bench_pp = DEFAULT_BENCH_PP,
                            .bench_tg = DEFAULT_BENCH_TG,
                            .bench_reps = DEFAULT_BENCH_REPS};
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

static void add_failure(json_t *failures, const char *backend, const char *metric, double value, double limit,
                        const char *flag, bool above) {
    json_array_append_new(failures,
                          json_pack("{s:s, s:s, s:o, s:f, s:s, s:s}", "backend", backend, "metric", metric,
                                    "value", isfinite(value) ? json_real(value) : json_null(), "threshold",
                                    limit, "flag", flag, "direction", above ? "above" : "below"));
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
        const verify_metrics *v = &r->vs_ref;
        if (!(v->kl_mean <= t->max_kl))
            add_failure(failures, r->backend, "kl_mean", v->kl_mean, t->max_kl, "--max-kl", true);
        if (!(v->kl_max <= t->max_kl_max))
            add_failure(failures, r->backend, "kl_max", v->kl_max, t->max_kl_max, "--max-kl-max", true);
        if (!(v->top1 >= t->min_top1))
            add_failure(failures, r->backend, "top1_agreement", v->top1, t->min_top1, "--min-top1", false);
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

static json_t *build_report(const run *o, json_t *model, const verify_result *res, int n,
                            const verify_prompt *prompts, int n_prompts, json_t *failures) {
    char created[TIME_TEXT];
    time_t now = time(NULL);
    struct tm tm;
    strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
    json_t *backends = json_object();
    for (int i = 0; i < n; i++)
        if (res[i].ran)
            json_object_set_new(backends, res[i].backend, verify_result_json(&res[i], prompts, n_prompts));
    json_t *skipped = json_object();
    for (int i = 0; i < n; i++)
        if (!res[i].ran && res[i].skipped[0])
            json_object_set_new(skipped, res[i].backend, json_string(res[i].skipped));
    json_t *bench = o->cfg.bench ? json_pack("{s:i, s:i, s:i}", "pp", o->cfg.bench_pp, "tg", o->cfg.bench_tg,
                                             "reps", o->cfg.bench_reps)
                                 : json_null();
    return json_pack("{s:s, s:i, s:s, s:o, s:o, s:o, s:s, s:o, s:o, s:i, s:i, s:o, s:o, s:o, s:{s:b, s:O}}",
                     "kind", VERIFY_MANIFEST_KIND, "format", VERIFY_MANIFEST_FORMAT, "created", created,
                     "model", model, "runtime", manifest_runtime_json(), "host", manifest_host_json(),
                     "reference", o->ref, "thresholds", verify_thresholds_json(&o->t), "prompts",
                     prompts_json(prompts, n_prompts), "greedy_tokens", o->cfg.greedy_tokens, "threads",
                     o->cfg.threads, "bench", bench, "backends", backends, "not_run", skipped, "verdict",
                     "passed", json_array_size(failures) == 0, "failures", failures);
}

/* Settings a manifest recorded become this run's, unless the caller gave them. */
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
} holdings;

static void holdings_free(holdings *h, run *o) {
    for (int i = 0; i < SIPP_VERIFY_MAX_BACKENDS; i++)
        verify_result_free(&h->res[i], h->n_prompts);
    for (int p = 0; p < h->n_prompts; p++) {
        free(h->prompts[p].text);
        free(h->prompts[p].tokens);
    }
    if (o->cfg.vocab) sipp_model_free(o->cfg.vocab);
    json_decref(h->recorded);
    json_decref(h->model);
    json_decref(h->failures);
    json_decref(h->report);
    free(h);
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
                             .t_start = sipp_now_ms()};
    if (p->against && (st = manifest_load(p->against, &h->recorded, err)) != SIPP_OK) return st;
    if (h->recorded && (st = adopt_manifest(o, p, h->recorded, err)) != SIPP_OK) return st;
    if (p->no_bench) o->cfg.bench = false;
    if (!o->ref) o->ref = DEFAULT_REF;
    if ((st = reference_first(o, err)) != SIPP_OK) return st;
    char why[SIPP_ERROR_SIZE];
    if ((st = sipp_runtime_init(NULL, why)) != SIPP_OK) return sipp_fail(err, st, "%s", why);
    o->cfg.model_path = o->model;
    if (o->cfg.threads == 0) o->cfg.threads = (int)sysconf(_SC_NPROCESSORS_ONLN);

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
    if ((st = verify_tokenize_prompts(&o->cfg, h->prompts, h->n_prompts, err)) != SIPP_OK) return st;
    if ((st = check_positions(h->prompts, h->n_prompts, err)) != SIPP_OK) return st;

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
    h->report = build_report(o, json_incref(h->model), h->res, o->n_backends, h->prompts, h->n_prompts,
                             json_incref(h->failures));
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
