/*
 * verify.c: `sipp verify MODEL --backends cpu,vulkan`: prove that backends agree on a model's outputs.
 *
 * The reference backend (--ref, default cpu) runs first and its logits are kept; every other backend
 * then runs in turn (one model in memory at a time, see verify_run.c) and is compared with it. Each
 * backend is also compared with itself: incremental decoding through the KV cache against one batched
 * prefill. The figures are checked against thresholds; one exceeded exits with status 3 and names the
 * metric and the backend, which makes this the numeric-drift gate for CI.
 *
 * `--manifest OUT` writes everything (model, runtime, host, devices, figures, greedy outputs, graphs)
 * to a JSON manifest; `--against MANIFEST` reruns what a manifest recorded, on this machine, and says
 * per contract what holds and what changed (verify_against.c).
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/verify.h"

#define DEFAULT_GREEDY_TOKENS 32
#define DEFAULT_BENCH_PP 128
#define DEFAULT_BENCH_TG 32
#define DEFAULT_BENCH_REPS 3
#define MAX_PROMPTS 64
/* Positions in all: the reference keeps every position's logits, 4 bytes x vocabulary each (512 MiB
 * for 1024 positions of a 128k vocabulary). */
#define MAX_POSITIONS 1024
#define MAX_LINE (1 << 16)

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

/* The thresholds, to remember which were given on the command line. */
enum { T_KL, T_KL_MAX, T_TOP1, T_CKL, T_CTOP1, T_GREEDY, T_SPEED, T_COUNT };

typedef struct verify_opts {
    const char *model, *backends_arg, *ref, *prompts_file, *manifest_out, *against, *artifact;
    bool json, no_bench;
    verify_thresholds t;
    bool t_set[T_COUNT]; /* which thresholds were given on the command line (they win over a manifest's) */
    verify_config cfg;
    char backends[VERIFY_MAX_BACKENDS][16];
    int n_backends;
} verify_opts;

/* The usage text; the %g are the default thresholds, printed from verify_default_thresholds(). */
static const char usage_fmt[] =
    "usage: sipp verify MODEL --backends cpu,vulkan[,cuda...] [--ref cpu] [--prompts FILE] [--json]\n"
    "                   [--manifest OUT] [--against MANIFEST] [--threads N] [--greedy-tokens 32]\n"
    "                   [--max-kl X] [--max-kl-max X] [--min-top1 X] [--max-cached-kl X]\n"
    "                   [--min-cached-top1 X] [--min-greedy X] [--bench] [--bench-p 128] [--bench-n 32]\n"
    "                   [--bench-r 3] [--speed-tolerance X] [--no-bench] [--artifact DIR]\n\n"
    "Evaluates fixed prompts (built in, or FILE with one prompt per line) on every backend and compares\n"
    "each with the reference backend (--ref, default cpu): teacher-forced logits (max and RMS difference,\n"
    "mean and worst KL divergence of the softmax in nats, top-1 agreement, top-5 overlap), cached decoding\n"
    "(one token at a time against one batched prefill, on every backend), and greedy continuations\n"
    "(--greedy-tokens per prompt, temperature 0; agreement counted in tokens after re-tokenizing the "
    "text).\n\n"
    "Thresholds (defaults): --max-kl %g mean KL against the reference; --max-kl-max %g worst position;\n"
    "--min-top1 %g top-1 agreement; --max-cached-kl %g and --min-cached-top1 %g for cached decoding;\n"
    "--min-greedy %g fraction of greedy tokens equal to the reference's (greedy paths may split at a near\n"
    "tie, so by default they are reported, not gated). Exceeding one exits 3 naming metric and backend.\n\n"
    "--manifest OUT writes a JSON manifest: model (sha256, architecture, parameters, tensor types,\n"
    "tokenizer and vocabulary hash, chat template hash), runtime, host, devices, every figure, greedy\n"
    "output hashes, the graph per backend, and with --bench `sipp bench` figures (-p/-n/-r from --bench-*).\n"
    "--against MANIFEST reruns what it recorded here (MODEL and --backends default to the manifest's) and\n"
    "reports per contract (checkpoint, tokenizer, graph, numerics, speed) what holds and what changed;\n"
    "speed is checked when the manifest has bench figures (--no-bench skips it), allowing pp/tg to be\n"
    "--speed-tolerance (%g) slower. Exit status: 0 all within thresholds, 1 failure, 2 usage, 3 drift or a\n"
    "changed contract. Vulkan on a software device (lavapipe) needs GGML_VK_VISIBLE_DEVICES=0.\n"
    "'browser' in --backends is the WebAssembly runtime (make web) in headless Chromium, compared like a\n"
    "backend (needs /usr/bin/chromium and npm ci in tests/integration/web).\n";

static bool add_backend(verify_opts *o, const char *name) {
    char err[SIPP_ERROR_SIZE];
    if (strcmp(name, "auto") == 0) {
        cli_error(
            "verify: --backends: 'auto' is not a backend to compare; name them (cpu, vulkan, cuda, ...)");
        return false;
    }
    if (!verify_is_browser(name) && sipp_backend_check_name(name, err) != SIPP_OK) {
        cli_error("verify: --backends: %s (or browser: the WebAssembly runtime in headless Chromium)", err);
        return false;
    }
    for (int i = 0; i < o->n_backends; i++)
        if (strcmp(o->backends[i], name) == 0) return true;
    if (o->n_backends == VERIFY_MAX_BACKENDS) {
        cli_error("verify: --backends: at most %d backends", VERIFY_MAX_BACKENDS);
        return false;
    }
    snprintf(o->backends[o->n_backends++], sizeof o->backends[0], "%s", name);
    return true;
}

static bool parse_backends(verify_opts *o, const char *list) {
    char *copy = strdup(list), *save = NULL;
    bool ok = copy != NULL;
    for (char *t = strtok_r(copy, ",", &save); ok && t; t = strtok_r(NULL, ",", &save))
        ok = add_backend(o, t);
    free(copy);
    return ok;
}

static bool threshold_flag(cli_args *a, verify_opts *o, const char *flag, int which, double *field) {
    if (!cli_flag_value(a, flag)) return false;
    float v;
    if (a->value && cli_float(a, flag, 0, 1e9, &v)) {
        *field = v;
        o->t_set[which] = true;
    }
    return true;
}

static int parse(int argc, char **argv, verify_opts *o) {
    o->t = verify_default_thresholds();
    o->cfg.greedy_tokens = DEFAULT_GREEDY_TOKENS;
    o->cfg.bench_pp = DEFAULT_BENCH_PP;
    o->cfg.bench_tg = DEFAULT_BENCH_TG;
    o->cfg.bench_reps = DEFAULT_BENCH_REPS;
    cli_args a = {.argc = argc, .argv = argv};
    while (a.i < argc && !a.bad) {
        const char *arg = argv[a.i];
        if (cli_flag_value(&a, "--backends"))
            o->backends_arg = a.value;
        else if (cli_flag_value(&a, "--ref"))
            o->ref = a.value;
        else if (cli_flag_value(&a, "--prompts"))
            o->prompts_file = a.value;
        else if (cli_flag_value(&a, "--manifest"))
            o->manifest_out = a.value;
        else if (cli_flag_value(&a, "--against"))
            o->against = a.value;
        else if (cli_flag_value(&a, "--artifact"))
            o->artifact = a.value;
        else if (cli_flag_value(&a, "--threads"))
            cli_int(&a, "--threads", 1, 1024, &o->cfg.threads);
        else if (cli_flag_value(&a, "--greedy-tokens"))
            cli_int(&a, "--greedy-tokens", 0, 4096, &o->cfg.greedy_tokens);
        else if (cli_flag_value(&a, "--bench-p"))
            cli_int(&a, "--bench-p", 0, 1 << 16, &o->cfg.bench_pp);
        else if (cli_flag_value(&a, "--bench-n"))
            cli_int(&a, "--bench-n", 0, 1 << 16, &o->cfg.bench_tg);
        else if (cli_flag_value(&a, "--bench-r"))
            cli_int(&a, "--bench-r", 1, 1000, &o->cfg.bench_reps);
        else if (threshold_flag(&a, o, "--max-kl-max", T_KL_MAX, &o->t.max_kl_max))
            continue;
        else if (threshold_flag(&a, o, "--max-kl", T_KL, &o->t.max_kl))
            continue;
        else if (threshold_flag(&a, o, "--min-top1", T_TOP1, &o->t.min_top1))
            continue;
        else if (threshold_flag(&a, o, "--max-cached-kl", T_CKL, &o->t.max_cached_kl))
            continue;
        else if (threshold_flag(&a, o, "--min-cached-top1", T_CTOP1, &o->t.min_cached_top1))
            continue;
        else if (threshold_flag(&a, o, "--min-greedy", T_GREEDY, &o->t.min_greedy))
            continue;
        else if (threshold_flag(&a, o, "--speed-tolerance", T_SPEED, &o->t.speed_tolerance))
            continue;
        else if (cli_flag(&a, "--json"))
            o->json = true;
        else if (cli_flag(&a, "--bench"))
            o->cfg.bench = true;
        else if (cli_flag(&a, "--no-bench"))
            o->no_bench = true;
        else if (arg[0] == '-' && arg[1] != '\0') {
            cli_error("verify: unknown option '%s' (see sipp verify --help)", arg);
            return EXIT_USAGE;
        } else if (!o->model) {
            o->model = arg;
            a.i++;
        } else {
            cli_error("verify: unexpected argument '%s' (one MODEL only)", arg);
            return EXIT_USAGE;
        }
    }
    if (a.bad) return EXIT_USAGE;
    if (o->t.min_top1 > 1 || o->t.min_cached_top1 > 1 || o->t.min_greedy > 1) {
        cli_error("verify: --min-top1, --min-cached-top1 and --min-greedy are fractions in [0, 1]");
        return EXIT_USAGE;
    }
    if (o->against && o->prompts_file) {
        cli_error("verify: --prompts and --against do not mix: --against reruns the manifest's own prompts");
        return EXIT_USAGE;
    }
    if (o->backends_arg && !parse_backends(o, o->backends_arg)) return EXIT_USAGE;
    if (!o->against && o->n_backends == 0) {
        cli_error("verify: --backends is required (e.g. --backends cpu,vulkan), or --against MANIFEST");
        return EXIT_USAGE;
    }
    if (!o->against && !o->model) {
        cli_error("verify: no MODEL given (sipp verify MODEL --backends cpu,vulkan)");
        return EXIT_USAGE;
    }
    char err[SIPP_ERROR_SIZE];
    if (o->ref && (strcmp(o->ref, "auto") == 0 || sipp_backend_check_name(o->ref, err) != SIPP_OK)) {
        cli_error("verify: --ref: %s",
                  strcmp(o->ref, "auto") == 0 ? "'auto' is not a backend to compare with" : err);
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

/* One prompt per line; empty lines are skipped; "\n" in a line stays literal. */
static int read_prompts(const char *path, verify_prompt *prompts, int *n) {
    FILE *f = fopen(path, "r");
    if (!f) {
        cli_error("verify: cannot read --prompts '%s': %m", path);
        return EXIT_RUNTIME;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int lineno = 0;
    *n = 0;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (len == 0) continue;
        if (len > MAX_LINE || *n == MAX_PROMPTS) {
            cli_error("verify: --prompts '%s' line %d: %s", path, lineno,
                      *n == MAX_PROMPTS ? "more than 64 prompts; use fewer" : "longer than 64 KiB");
            free(line);
            fclose(f);
            return EXIT_USAGE;
        }
        prompts[(*n)++].text = strdup(line);
    }
    free(line);
    fclose(f);
    if (*n == 0) {
        cli_error("verify: --prompts '%s' has no prompt (one per line)", path);
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

/* The prompts a manifest recorded (their texts; the tokens are compared by the tokenizer contract). */
static int manifest_prompts(const json_t *m, verify_prompt *prompts, int *n) {
    json_t *arr = json_object_get(m, "prompts"), *p;
    size_t i;
    *n = 0;
    json_array_foreach(arr, i, p) {
        const char *text = json_string_value(json_object_get(p, "text"));
        if (!text || *n == MAX_PROMPTS) {
            cli_error("verify: --against: the manifest's prompt %zu has no text", i + 1);
            return EXIT_RUNTIME;
        }
        prompts[(*n)++].text = strdup(text);
    }
    if (*n == 0) {
        cli_error("verify: --against: the manifest records no prompts");
        return EXIT_RUNTIME;
    }
    return EXIT_OK;
}

/* ---- thresholds ---- */

static void add_failure(json_t *failures, const char *backend, const char *metric, double value, double limit,
                        const char *flag, bool above) {
    json_array_append_new(failures,
                          json_pack("{s:s, s:s, s:o, s:f, s:s, s:s}", "backend", backend, "metric", metric,
                                    "value", isfinite(value) ? json_real(value) : json_null(), "threshold",
                                    limit, "flag", flag, "direction", above ? "above" : "below"));
}

static void check_thresholds(const verify_result *res, int n, const char *ref, const verify_thresholds *t,
                             json_t *failures) {
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
                         const verify_thresholds *t, json_t *failures) {
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

static const char *metric_unit(const char *metric) { return strstr(metric, "kl") ? " nats" : ""; }

static void print_metrics_row(const char *backend, const verify_metrics *m) {
    printf("  %-8s %10.3g %10.3g %10.3g %10.3g %7.1f%% %7.1f%%\n", backend, m->max_abs, m->rms, m->kl_mean,
           m->kl_max, 100 * m->top1, 100 * m->top5);
}

static void print_text(const verify_opts *o, const verify_result *res, int n, const verify_prompt *prompts,
                       int n_prompts, const json_t *failures) {
    long positions = 0;
    for (int p = 0; p < n_prompts; p++)
        positions += prompts[p].n_tokens;
    const char *ref = o->ref;
    printf("sipp verify: %s (%s), %d prompt%s, %ld positions, reference %s\n", res[0].model_desc,
           o->cfg.model_path, n_prompts, n_prompts == 1 ? "" : "s", positions, ref);
    for (int i = 0; i < n; i++) {
        const verify_result *r = &res[i];
        if (!r->ran)
            printf("  %-8s not run: %s\n", r->backend, r->skipped);
        else
            printf("  %-8s %s (%s)\n", r->backend, json_string_value(json_object_get(r->device, "name")),
                   json_string_value(json_object_get(r->device, "description")));
    }
    printf("\nteacher-forced logits against %s\n", ref);
    printf("  %-8s %10s %10s %10s %10s %8s %8s\n", "backend", "max |d|", "rms", "KL mean", "KL max", "top-1",
           "top-5");
    for (int i = 0; i < n; i++) {
        const verify_result *r = &res[i];
        if (!r->ran) continue;
        if (strcmp(r->backend, ref) == 0)
            printf("  %-8s reference\n", r->backend);
        else
            print_metrics_row(r->backend, &r->vs_ref);
    }
    printf("\ncached decoding: one token at a time against one batched prefill, same backend\n");
    for (int i = 0; i < n; i++)
        if (res[i].ran) print_metrics_row(res[i].backend, &res[i].cached);
    if (o->cfg.greedy_tokens > 0) {
        printf("\ngreedy continuations (%d tokens per prompt, temperature 0): tokens equal to %s's\n",
               o->cfg.greedy_tokens, ref);
        for (int i = 0; i < n; i++) {
            const verify_result *r = &res[i];
            if (!r->ran || !r->greedy) continue;
            long agree = 0, total = 0;
            printf("  %-8s", r->backend);
            for (int p = 0; p < n_prompts; p++) {
                printf(" %d/%d", r->greedy_agree[p], r->greedy_len[p]);
                agree += r->greedy_agree[p];
                total += r->greedy_len[p];
            }
            printf("   (%.1f%%)\n", total ? 100.0 * agree / total : 100.0);
        }
    }
    printf("\ngraph: device boundaries per decode step\n");
    for (int i = 0; i < n; i++) {
        const verify_result *r = &res[i];
        if (!r->ran) continue;
        printf("  %-8s %d node%s on %s, %d boundar%s per decode step, %d per prefill\n", r->backend,
               r->graph.n_nodes, r->graph.n_nodes == 1 ? "" : "s", r->graph.device,
               r->graph.boundaries_decode, r->graph.boundaries_decode == 1 ? "y" : "ies",
               r->graph.boundaries_prefill);
    }
    for (int i = 0; i < n; i++) {
        const verify_result *r = &res[i];
        if (!r->bench) continue;
        json_t *pp = json_object_get(r->bench, "pp"), *tg = json_object_get(r->bench, "tg");
        printf(
            "%s  %-8s pp%lld %.2f ± %.2f t/s, tg%lld %.2f ± %.2f t/s, load %.0f ms\n",
            i == 0 ? "\nbench\n" : "", r->backend,
            (long long)json_integer_value(json_object_get(pp, "tokens")),
            json_number_value(json_object_get(pp, "mean")), json_number_value(json_object_get(pp, "stddev")),
            (long long)json_integer_value(json_object_get(tg, "tokens")),
            json_number_value(json_object_get(tg, "mean")), json_number_value(json_object_get(tg, "stddev")),
            json_number_value(json_object_get(r->bench, "load_ms")));
    }
    const verify_thresholds *t = &o->t;
    printf(
        "\nthresholds: KL mean <= %g, KL max <= %g, top-1 >= %g; cached KL mean <= %g, cached top-1 >= %g; "
        "greedy >= %g\n",
        t->max_kl, t->max_kl_max, t->min_top1, t->max_cached_kl, t->min_cached_top1, t->min_greedy);
    printf("result: %s\n", json_array_size(failures) ? "FAIL" : "pass");
}

static void print_failures(const json_t *failures) {
    size_t i;
    json_t *f;
    json_array_foreach(failures, i, f) {
        const char *metric = json_string_value(json_object_get(f, "metric"));
        json_t *v = json_object_get(f, "value");
        char value[64];
        if (json_is_number(v))
            snprintf(value, sizeof value, "%.4g%s", json_number_value(v), metric_unit(metric));
        else
            snprintf(value, sizeof value, "not finite");
        cli_error("verify: %s on %s is %s, %s the threshold %g (%s)", metric,
                  json_string_value(json_object_get(f, "backend")), value,
                  json_string_value(json_object_get(f, "direction")),
                  json_number_value(json_object_get(f, "threshold")),
                  json_string_value(json_object_get(f, "flag")));
    }
}

static void print_contracts(const json_t *report) {
    json_t *contracts = json_object_get(report, "contracts"), *c, *d;
    size_t i, k;
    printf("\ncontracts against the manifest\n");
    json_array_foreach(contracts, i, c) {
        printf("  %-10s %s\n", json_string_value(json_object_get(c, "contract")),
               json_string_value(json_object_get(c, "status")));
        json_array_foreach(json_object_get(c, "details"), k, d) printf("    %s\n", json_string_value(d));
    }
    json_t *ctx = json_object_get(report, "context");
    if (json_array_size(ctx)) {
        printf("  context (not contracts; where the machines differ)\n");
        json_array_foreach(ctx, k, d) printf("    %s\n", json_string_value(d));
    }
}

/* ---- the command ---- */

static int resolve_backends(verify_opts *o, const json_t *recorded, verify_result *res, bool *runnable) {
    char err[SIPP_ERROR_SIZE];
    for (int i = 0; i < o->n_backends; i++) {
        snprintf(res[i].backend, sizeof res[i].backend, "%s", o->backends[i]);
        sipp_backend_decision d;
        runnable[i] = verify_is_browser(o->backends[i]) || sipp_backend_decide(o->backends[i], NULL, &d, err) == SIPP_OK;
        if (runnable[i]) continue;
        /* Against a manifest, a backend this machine lacks is reported as not checked; asked for by
         * name, it is an error. The reference must run in any case. */
        if (recorded && !o->backends_arg && strcmp(o->backends[i], o->ref) != 0) {
            snprintf(res[i].skipped, sizeof res[i].skipped, "%s", err);
            continue;
        }
        cli_error("verify: --backends: %s", err);
        return EXIT_RUNTIME;
    }
    return EXIT_OK;
}

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

static json_t *build_report(const verify_opts *o, json_t *model, const verify_result *res, int n,
                            const verify_prompt *prompts, int n_prompts, json_t *failures) {
    char created[32];
    time_t now = time(NULL);
    strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
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

/* Settings a manifest recorded become this run's, unless given on the command line. */
static int adopt_manifest(verify_opts *o, const json_t *m) {
    if (!o->model) o->model = json_string_value(json_object_get(json_object_get(m, "model"), "path"));
    if (!o->model) {
        cli_error("verify: --against: the manifest names no model path; give MODEL");
        return EXIT_USAGE;
    }
    if (!o->ref) o->ref = json_string_value(json_object_get(m, "reference"));
    if (o->n_backends == 0) {
        const char *name;
        json_t *v;
        if (!add_backend(o, o->ref)) return EXIT_RUNTIME;
        json_object_foreach(json_object_get(m, "backends"), name,
                            v) if (!add_backend(o, name)) return EXIT_RUNTIME;
    }
    verify_thresholds given = o->t;
    verify_thresholds_from_json(json_object_get(m, "thresholds"), &o->t);
    if (o->t_set[T_KL]) o->t.max_kl = given.max_kl;
    if (o->t_set[T_KL_MAX]) o->t.max_kl_max = given.max_kl_max;
    if (o->t_set[T_TOP1]) o->t.min_top1 = given.min_top1;
    if (o->t_set[T_CKL]) o->t.max_cached_kl = given.max_cached_kl;
    if (o->t_set[T_CTOP1]) o->t.min_cached_top1 = given.min_cached_top1;
    if (o->t_set[T_GREEDY]) o->t.min_greedy = given.min_greedy;
    if (o->t_set[T_SPEED]) o->t.speed_tolerance = given.speed_tolerance;
    json_t *g = json_object_get(m, "greedy_tokens");
    if (json_is_integer(g)) o->cfg.greedy_tokens = (int)json_integer_value(g);
    json_t *b = json_object_get(m, "bench");
    if (json_is_object(b) && !o->no_bench) {
        o->cfg.bench = true;
        o->cfg.bench_pp = (int)json_integer_value(json_object_get(b, "pp"));
        o->cfg.bench_tg = (int)json_integer_value(json_object_get(b, "tg"));
        o->cfg.bench_reps = (int)json_integer_value(json_object_get(b, "reps"));
    }
    return EXIT_OK;
}

int cmd_verify(int argc, char **argv) {
    if (cli_wants_help(argc, argv)) {
        verify_thresholds t = verify_default_thresholds();
        printf(usage_fmt, t.max_kl, t.max_kl_max, t.min_top1, t.max_cached_kl, t.min_cached_top1, t.min_greedy,
               t.speed_tolerance);
        return EXIT_OK;
    }
    verify_opts o;
    memset(&o, 0, sizeof o);
    int rc = parse(argc, argv, &o);
    if (rc != EXIT_OK) return rc;
    json_t *recorded = NULL;
    if (o.against && !(recorded = manifest_load(o.against))) return EXIT_RUNTIME;
    if (recorded && (rc = adopt_manifest(&o, recorded)) != EXIT_OK) goto out_manifest;
    if (o.no_bench) o.cfg.bench = false;
    if (!o.ref) o.ref = "cpu";
    /* The reference runs first: the others are compared with its kept logits. */
    {
        char ref[16];
        snprintf(ref, sizeof ref, "%s", o.ref);
        if (!add_backend(&o, ref)) {
            rc = EXIT_USAGE;
            goto out_manifest;
        }
        for (int i = 0; i < o.n_backends; i++)
            if (strcmp(o.backends[i], ref) == 0 && i > 0) {
                memmove(o.backends[1], o.backends[0], (size_t)i * sizeof o.backends[0]);
                snprintf(o.backends[0], sizeof o.backends[0], "%s", ref);
            }
    }
    if (!cli_runtime_init(o.artifact)) {
        rc = EXIT_RUNTIME;
        goto out_manifest;
    }
    o.cfg.model_path = o.model;
    o.cfg.artifact = o.artifact;
    o.cfg.quiet = !isatty(STDERR_FILENO) && !getenv("SIPP_VERIFY_PROGRESS");
    if (o.cfg.threads == 0) o.cfg.threads = (int)sysconf(_SC_NPROCESSORS_ONLN);

    verify_result res[VERIFY_MAX_BACKENDS];
    bool runnable[VERIFY_MAX_BACKENDS];
    memset(res, 0, sizeof res);
    verify_prompt prompts[MAX_PROMPTS];
    memset(prompts, 0, sizeof prompts);
    int n_prompts = 0;
    json_t *model = NULL, *failures = json_array(), *report = NULL;
    if ((rc = resolve_backends(&o, recorded, res, runnable)) != EXIT_OK) goto out;

    if (recorded)
        rc = manifest_prompts(recorded, prompts, &n_prompts);
    else if (o.prompts_file)
        rc = read_prompts(o.prompts_file, prompts, &n_prompts);
    else
        for (n_prompts = 0; n_prompts < N_BUILTIN; n_prompts++)
            prompts[n_prompts].text = strdup(builtin_prompts[n_prompts]);
    if (rc != EXIT_OK) goto out;

    /* The tokenizer: a vocabulary-only load (tokenization does not depend on the backend). It comes
     * first because its errors about a file that is not a model are the clearest. */
    char err[SIPP_ERROR_SIZE];
    sipp_model_params vp = sipp_model_default_params();
    vp.vocab_only = true;
    if (sipp_model_load(o.model, &vp, &o.cfg.vocab, err) != SIPP_OK) {
        cli_error("verify: %s", err);
        rc = EXIT_RUNTIME;
        goto out;
    }
    if (!(model = manifest_model_json(o.model))) {
        rc = EXIT_RUNTIME;
        goto out;
    }
    if ((rc = verify_tokenize_prompts(&o.cfg, prompts, n_prompts)) != EXIT_OK) goto out;
    long positions = 0;
    for (int p = 0; p < n_prompts; p++)
        positions += prompts[p].n_tokens;
    if (positions > MAX_POSITIONS) {
        cli_error("verify: the prompts are %ld tokens in all, more than %d (the reference's logits of every "
                  "position are kept in memory); use fewer or shorter prompts",
                  positions, MAX_POSITIONS);
        rc = EXIT_USAGE;
        goto out;
    }

    for (int i = 0; i < o.n_backends; i++) {
        if (!runnable[i]) continue;
        const verify_result *ref = i == 0 ? NULL : &res[0];
        rc = verify_is_browser(o.backends[i]) ? verify_run_browser(&o.cfg, prompts, n_prompts, ref, &res[i])
                                              : verify_run_backend(&o.cfg, o.backends[i], prompts, n_prompts, ref, &res[i]);
        if (rc != EXIT_OK) goto out;
    }
    check_thresholds(res, o.n_backends, o.ref, &o.t, failures);
    check_greedy(res, o.n_backends, n_prompts, o.ref, &o.t, failures);
    report =
        build_report(&o, json_incref(model), res, o.n_backends, prompts, n_prompts, json_incref(failures));
    bool contracts_hold = true;
    if (recorded) contracts_hold = verify_against(o.cfg.vocab, recorded, report, &o.t, report);
    if (o.manifest_out && !manifest_write(o.manifest_out, report)) {
        rc = EXIT_RUNTIME;
        goto out;
    }
    if (o.json) {
        json_t *shown = json_deep_copy(report);
        const char *name;
        json_t *b;
        json_object_foreach(json_object_get(shown, "backends"), name, b) json_object_del(b, "top");
        char *s = json_dumps(shown, JSON_INDENT(2) | JSON_REAL_PRECISION(9));
        puts(s);
        free(s);
        json_decref(shown);
    } else {
        print_text(&o, res, o.n_backends, prompts, n_prompts, failures);
        if (recorded) print_contracts(report);
    }
    print_failures(failures);
    if (recorded && !contracts_hold)
        cli_error("verify: a contract of manifest '%s' changed on this machine (see the report)", o.against);
    rc = json_array_size(failures) || !contracts_hold ? EXIT_DRIFT : EXIT_OK;
out:
    for (int i = 0; i < o.n_backends; i++)
        verify_result_free(&res[i], n_prompts);
    for (int p = 0; p < n_prompts; p++) {
        free(prompts[p].text);
        free(prompts[p].tokens);
    }
    if (o.cfg.vocab) sipp_model_free(o.cfg.vocab);
    json_decref(model);
    json_decref(failures);
    json_decref(report);
out_manifest:
    json_decref(recorded);
    return rc;
}
