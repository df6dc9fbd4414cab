/*
 * bench.c: `sipp bench MODEL`: how fast a model runs here, measured through the engine itself.
 *
 * pp and tg mean what they mean in llama-bench, so the figures compare: pp is the rate of evaluating
 * a prompt of -p random tokens, tg the rate of generating -n tokens one at a time after a one-token
 * prompt. Each repetition uses fresh random tokens so that no prefix is reused from the KV cache.
 * They run on an engine of one slot.
 *
 * Two curves show how cost grows with work (bench/curves.py draws them beside llama.cpp's):
 * - --prompt-lengths: TTFT against prompt length, each length -r times on that same one-slot engine
 *   (a prompt of L random tokens, one token generated).
 * - --concurrency: each level c gets an engine of its own with parallel = c and c x --ctx-per-slot
 *   tokens of context (default: what one request needs), warmed up, then submits c requests at once
 *   (each its own -p token prompt, exactly -n generated tokens, end-of-generation ignored). A level
 *   reports the aggregate rate (generated tokens over the wall time from the first submission to the
 *   last completion), the per-stream decode rate (the requests' own decode rates, averaged), and the
 *   memory its engine allocated (KV, compute) beside the process's RSS: memory against
 *   ctx_size x parallel.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "cli/packages.h"

#define MAX_LEVELS 16
#define DEFAULT_PP 512
#define DEFAULT_TG 128
#define DEFAULT_REPS 5
#define CTX_MARGIN 16
#define MAX_ITL 65536
#define MAX_DEVICES 8
#define WARMUP_TOKENS 2
#define MIB (1024.0 * 1024.0)

typedef struct int_list {
    int v[MAX_LEVELS];
    int n;
} int_list;

typedef struct bench_opts {
    cli_common c; /* --backend, --threads, --ctx-size, --flash-attn, --cache-type-k, --cache-type-v,
                     --artifact, --rpc */
    const char *model, *tensor_split;
    int pp, tg, reps, ctx_per_slot;
    int_list levels, lengths;
    bool json; /* -o json */
} bench_opts;

/* What every measurement needs: the model, its vocabulary size, the options, the random stream. */
typedef struct bench_run {
    const bench_opts *o;
    sipp_model *model;
    int n_vocab;
    uint64_t rng;
} bench_run;

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double percentile(double *v, int n, double q) {
    if (n == 0) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    int i = (int)ceil(q * n) - 1;
    return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

static void mean_stddev(const double *v, int n, double *mean, double *sd) {
    double s = 0, s2 = 0;
    for (int i = 0; i < n; i++)
        s += v[i];
    *mean = n ? s / n : 0;
    for (int i = 0; i < n; i++)
        s2 += (v[i] - *mean) * (v[i] - *mean);
    *sd = n > 1 ? sqrt(s2 / (n - 1)) : 0;
}

static double mean_of(const double *v, int n) {
    double m, sd;
    mean_stddev(v, n, &m, &sd);
    return m;
}

/* The process's resident set now, from /proc/self/statm (0 where it cannot be read). */
static double rss_now_mb(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, resident = 0;
    if (!f) return 0;
    if (fscanf(f, "%ld %ld", &size, &resident) != 2) resident = 0;
    fclose(f);
    return (double)resident * (double)sysconf(_SC_PAGESIZE) / MIB;
}

/* A fresh prompt of n random token ids, as llama-bench does. */
static int32_t *random_tokens(int n, int n_vocab, uint64_t *state) {
    int32_t *t = malloc((size_t)n * sizeof *t);
    for (int i = 0; t && i < n; i++) {
        *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
        t[i] = (int32_t)((*state >> 33) % (uint64_t)n_vocab);
    }
    return t;
}

typedef struct itl_log {
    double last;
    double gaps[MAX_ITL];
    int n;
} itl_log;

static bool on_piece(const char *piece, size_t len, void *user) {
    itl_log *log = user;
    double t = now_ms();
    if (log->last > 0 && log->n < MAX_ITL) log->gaps[log->n++] = t - log->last;
    log->last = t;
    return true;
}

static sipp_request *submit(sipp_engine *e, const int32_t *toks, int n_toks, int n_gen, itl_log *log) {
    sipp_request_params p = sipp_request_default_params();
    p.tokens = toks;
    p.n_tokens = (size_t)n_toks;
    p.max_tokens = n_gen;
    p.ignore_eos = true;
    p.sampling.temperature = 0;
    p.on_piece = log ? on_piece : NULL;
    p.user = log;
    sipp_request *r = NULL;
    if (sipp_engine_submit(e, &p, &r) != SIPP_OK) cli_error("bench: %s", sipp_engine_last_error(e));
    return r;
}

static bool finished_ok(sipp_request *r) {
    sipp_request_wait(r, -1);
    if (sipp_request_finish_reason(r) == SIPP_FINISH_ERROR ||
        sipp_request_finish_reason(r) == SIPP_FINISH_CANCELLED) {
        cli_error("bench: a request failed: %s", sipp_request_error(r));
        return false;
    }
    return true;
}

/* One request of n_prompt fresh random tokens generating n_gen; its stats in *s. */
static bool run_one(bench_run *b, sipp_engine *e, int n_prompt, int n_gen, itl_log *log,
                    sipp_request_stats *s) {
    int32_t *toks = random_tokens(n_prompt, b->n_vocab, &b->rng);
    sipp_request *req = toks ? submit(e, toks, n_prompt, n_gen, log) : NULL;
    bool ok = req && finished_ok(req);
    if (ok && s) sipp_request_get_stats(req, s);
    sipp_request_free(req);
    free(toks);
    return ok;
}

/* Warm-up, as llama-bench does: the first decode of a shape pays one-time costs (allocation,
 * shaders, an rpc server's first graph of that size), so the whole prompt once, and a token. */
static bool warm_up(bench_run *b, sipp_engine *e) {
    return run_one(b, e, b->o->pp > 0 ? b->o->pp : 1, WARMUP_TOKENS, NULL, NULL);
}

static sipp_engine *new_engine(bench_run *b, int parallel, int ctx_size) {
    sipp_engine_params ep = sipp_engine_default_params();
    ep.parallel = parallel;
    ep.threads = b->o->c.threads;
    ep.ctx_size = b->o->c.ctx_size ? b->o->c.ctx_size : ctx_size;
    ep.cache_type_k = b->o->c.cache_type_k;
    ep.cache_type_v = b->o->c.cache_type_v;
    sipp_engine *e = NULL;
    char err[SIPP_ERROR_SIZE];
    if (sipp_engine_new(b->model, &ep, &e, err) != SIPP_OK) {
        cli_error("%s", err);
        return NULL;
    }
    return e;
}

/* TTFT against prompt length: each length -r times (at least once), one token generated. */
static json_t *prompt_curve(bench_run *b, sipp_engine *e, bool *ok) {
    json_t *curve = json_array();
    int reps = b->o->reps > 0 ? b->o->reps : 1;
    double *ttft = calloc((size_t)reps, sizeof(double)), *rate = calloc((size_t)reps, sizeof(double));
    *ok = ttft && rate;
    for (int l = 0; *ok && l < b->o->lengths.n; l++) {
        int len = b->o->lengths.v[l];
        for (int r = 0; *ok && r < reps; r++) {
            sipp_request_stats s = {0};
            *ok = run_one(b, e, len, 1, NULL, &s);
            ttft[r] = s.ttft_ms;
            rate[r] = s.prefill_tokens_per_s;
        }
        if (*ok)
            json_array_append_new(curve,
                                  json_pack("{s:i, s:f, s:f}", "prompt_tokens", len, "prefill_tokens_per_s",
                                            mean_of(rate, reps), "ttft_ms_p50", percentile(ttft, reps, 0.5)));
    }
    free(ttft);
    free(rate);
    return curve;
}

/* One concurrency level on an engine of its own with parallel = c (see the top of the file). */
static json_t *level(bench_run *b, int c, bool *ok) {
    const bench_opts *o = b->o;
    int n_prompt = o->pp > 0 ? o->pp : 1, n_gen = o->tg > 0 ? o->tg : 1;
    int per_slot = o->ctx_per_slot ? o->ctx_per_slot : n_prompt + n_gen + CTX_MARGIN;
    sipp_engine *e = new_engine(b, c, per_slot * c);
    *ok = e && warm_up(b, e);
    sipp_request **reqs = calloc((size_t)c, sizeof *reqs);
    int32_t **prompts = calloc((size_t)c, sizeof *prompts);
    double *ttft = calloc((size_t)c, sizeof(double)), *decode = calloc((size_t)c, sizeof(double));
    *ok = *ok && reqs && prompts && ttft && decode;
    for (int i = 0; *ok && i < c; i++)
        *ok = (prompts[i] = random_tokens(n_prompt, b->n_vocab, &b->rng)) != NULL;
    double start = now_ms();
    for (int i = 0; *ok && i < c; i++)
        *ok = (reqs[i] = submit(e, prompts[i], n_prompt, n_gen, NULL)) != NULL;
    long generated = 0;
    for (int i = 0; reqs && i < c; i++) {
        if (!reqs[i]) continue;
        *ok = finished_ok(reqs[i]) && *ok;
        sipp_request_stats s = {0};
        sipp_request_get_stats(reqs[i], &s);
        generated += s.generated_tokens;
        ttft[i] = s.ttft_ms;
        decode[i] = s.decode_tokens_per_s;
    }
    double wall = now_ms() - start;
    json_t *out = NULL;
    if (*ok) {
        sipp_memory engine_mem, model_mem;
        sipp_engine_memory(e, &engine_mem);
        sipp_model_memory(b->model, &model_mem);
        sipp_engine_stats es;
        sipp_engine_get_stats(e, &es);
        out = json_pack("{s:i, s:i, s:i, s:f, s:f, s:f, s:f, s:I, s:f, s:f, s:f, s:f}", "concurrency", c,
                        "parallel", es.slots, "ctx_size", o->c.ctx_size ? o->c.ctx_size : per_slot * c,
                        "aggregate_tokens_per_s", wall > 0 ? generated / (wall / 1e3) : 0.0,
                        "per_stream_tokens_per_s", mean_of(decode, c), "ttft_ms_p50",
                        percentile(ttft, c, 0.5), "ttft_ms_p99", percentile(ttft, c, 0.99),
                        "generated_tokens", (json_int_t)generated, "kv_mb", engine_mem.kv_bytes / MIB,
                        "compute_mb", engine_mem.compute_bytes / MIB, "engine_mb",
                        (double)(sipp_memory_total(&engine_mem) - sipp_memory_total(&model_mem)) / MIB,
                        "rss_mb", rss_now_mb());
    }
    for (int i = 0; i < c; i++) {
        if (reqs) sipp_request_free(reqs[i]);
        if (prompts) free(prompts[i]);
    }
    free(reqs);
    free(prompts);
    free(ttft);
    free(decode);
    sipp_engine_free(e);
    return out;
}

/* "1,2,4": each a number within [lo, hi], at most MAX_LEVELS of them. */
static bool int_list_parse(cli_args *a, const char *flag, long lo, long hi, int_list *out) {
    if (!a->value) return false;
    char *copy = strdup(a->value), *save = NULL;
    out->n = 0;
    for (char *t = strtok_r(copy, ",", &save); t && !a->bad; t = strtok_r(NULL, ",", &save)) {
        a->value = t;
        if (out->n == MAX_LEVELS) {
            cli_error("bench: %s takes at most %d values", flag, MAX_LEVELS);
            a->bad = true;
        } else {
            cli_int(a, flag, lo, hi, &out->v[out->n++]);
        }
    }
    free(copy);
    return !a->bad;
}

static bool parse_output(cli_args *a, const cli_option *opt, void *opts) {
    if (strcmp(a->value, "json") == 0)
        ((bench_opts *)opts)->json = true;
    else if (strcmp(a->value, "md") != 0) {
        cli_error("bench: -o '%s' is not md or json", a->value);
        return false;
    }
    return true;
}

static bool parse_levels(cli_args *a, const cli_option *opt, void *opts) {
    int_list *levels = &((bench_opts *)opts)->levels;
    if (!int_list_parse(a, "--concurrency", 0, 256, levels)) return false;
    if (levels->n == 1 && levels->v[0] == 0) levels->n = -1; /* 0: no levels at all */
    return true;
}

static bool parse_lengths(cli_args *a, const cli_option *opt, void *opts) {
    return int_list_parse(a, "--prompt-lengths", 1, 1 << 20, &((bench_opts *)opts)->lengths);
}

static const cli_option opt_pp = {.name = "-p",
                                  .arg = "N",
                                  .kind = CLI_OPT_INT,
                                  .offset = offsetof(bench_opts, pp),
                                  .lo = 0,
                                  .hi = 1 << 20,
                                  .help = "prompt tokens of the pp test (default 512)"};
static const cli_option opt_tg = {.name = "-n",
                                  .arg = "N",
                                  .kind = CLI_OPT_INT,
                                  .offset = offsetof(bench_opts, tg),
                                  .lo = 0,
                                  .hi = 1 << 20,
                                  .help = "generated tokens of the tg test (default 128)"};
static const cli_option opt_reps = {.name = "-r",
                                    .arg = "N",
                                    .kind = CLI_OPT_INT,
                                    .offset = offsetof(bench_opts, reps),
                                    .lo = 0,
                                    .hi = 1000,
                                    .help = "repetitions of each test (default 5; 0 skips pp and tg)"};
static const cli_option opt_levels = {.name = "--concurrency",
                                      .arg = "1,4|0",
                                      .kind = CLI_OPT_CUSTOM,
                                      .parse = parse_levels,
                                      .help = "the concurrency levels (default 1; 0 runs none)"};
static const cli_option opt_ctx_per_slot = {.name = "--ctx-per-slot",
                                            .arg = "N",
                                            .kind = CLI_OPT_INT,
                                            .offset = offsetof(bench_opts, ctx_per_slot),
                                            .lo = 1,
                                            .hi = 1 << 24,
                                            .help = "context per slot at each concurrency level"};
static const cli_option opt_lengths = {.name = "--prompt-lengths",
                                       .arg = "128,512,2048",
                                       .kind = CLI_OPT_CUSTOM,
                                       .parse = parse_lengths,
                                       .help = "the prompt lengths of the TTFT curve"};
static const cli_option opt_output = {.name = "-o",
                                      .arg = "md|json",
                                      .kind = CLI_OPT_CUSTOM,
                                      .parse = parse_output,
                                      .help = "a markdown table (the default) or one JSON object"};
static const cli_option opt_tensor_split = {.name = "--tensor-split",
                                            .arg = "A,B,...",
                                            .kind = CLI_OPT_STRING,
                                            .offset = offsetof(bench_opts, tensor_split),
                                            .help = "the layers' shares per device (with --backend rpc)"};

/* -ctk and -ctv are llama-bench's names for the same two options. */
static const cli_option opt_ctk_short = {
    .name = "-ctk", .like = &cli_opt_cache_type_k, .help = "--cache-type-k"};
static const cli_option opt_ctv_short = {
    .name = "-ctv", .like = &cli_opt_cache_type_v, .help = "--cache-type-v"};

static const cli_option *const options[] = {&opt_pp,
                                            &opt_tg,
                                            &opt_reps,
                                            &opt_levels,
                                            &opt_ctx_per_slot,
                                            &opt_lengths,
                                            &cli_opt_threads,
                                            &cli_opt_backend,
                                            &cli_opt_flash_attn,
                                            &cli_opt_ctx_size,
                                            &cli_opt_artifact,
                                            &opt_output,
                                            &cli_opt_rpc,
                                            &opt_tensor_split,
                                            &cli_opt_cache_type_k,
                                            &opt_ctk_short,
                                            &cli_opt_cache_type_v,
                                            &opt_ctv_short,
                                            NULL};

static const char about[] =
    "Measures cold load time, prefill (pp) and decode (tg) tokens/s with mean and standard deviation\n"
    "(as llama-bench defines them; -r 0 skips them), TTFT and inter-token latency, and two curves:\n"
    "TTFT against prompt length (--prompt-lengths, each length -r times) and, per concurrency level c,\n"
    "an engine of c slots with c x --ctx-per-slot tokens of context running c requests at once (each\n"
    "its own -p token prompt, exactly -n generated tokens): aggregate and per-stream decode, memory\n"
    "(default one level of 1; --concurrency 0 runs none). --rpc and --tensor-split go with --backend rpc.\n"
    "-o json prints one object: load_ms, pp, tg, ttft_ms_p50, itl_ms_p50, itl_ms_p99, peak_rss_mb,\n"
    "device_memory_mb, prompt_curve[] {prompt_tokens, prefill_tokens_per_s, ttft_ms_p50},\n"
    "levels[] {concurrency, parallel, ctx_size, aggregate_tokens_per_s, per_stream_tokens_per_s,\n"
    "ttft_ms_p50, ttft_ms_p99, generated_tokens, kv_mb, compute_mb, engine_mb, rss_mb}.\n";

static const cli_command command = {.name = "bench",
                                    .synopsis = "bench MODEL [OPTIONS]",
                                    .about = about,
                                    .options = options,
                                    .max_args = 1,
                                    .args_hint = "one MODEL only"};

static int parse(int argc, char **argv, bench_opts *o) {
    memset(o, 0, sizeof *o);
    o->pp = DEFAULT_PP;
    o->tg = DEFAULT_TG;
    o->reps = DEFAULT_REPS;
    o->c.backend = "auto";
    int n_args;
    int rc = cli_parse(&command, argc, argv, o, &o->model, &n_args);
    if (rc != CLI_PARSED) return rc;
    if (!o->model) {
        cli_error("bench: no MODEL given");
        return EXIT_USAGE;
    }
    for (int i = 0; i < o->levels.n; i++)
        if (o->levels.v[i] == 0) {
            cli_error("bench: --concurrency 0 means no levels; it cannot be one of several (give 0 alone, or "
                      "only levels)");
            return EXIT_USAGE;
        }
    if (!cli_cache_types_fit(o->c.backend, o->c.flash_attn, o->c.cache_type_k, o->c.cache_type_v))
        return EXIT_USAGE;
    if (o->levels.n < 0)
        o->levels.n = 0;
    else if (o->levels.n == 0 && o->reps > 0)
        o->levels.v[o->levels.n++] = 1;
    return CLI_PARSED;
}

static void print_md(const bench_opts *o, const sipp_model_info *info, const sipp_backend_decision *b,
                     json_t *out) {
    const char *desc = info->description;
    printf("| model | backend | threads | test | t/s |\n|---|---|---|---|---|\n");
    json_t *pp = json_object_get(out, "pp"), *tg = json_object_get(out, "tg");
    if (o->reps > 0 && o->pp > 0)
        printf("| %s | %s | %d | pp%d | %.2f ± %.2f |\n", desc, b->backend, o->c.threads, o->pp,
               json_real_value(json_object_get(pp, "mean")), json_real_value(json_object_get(pp, "stddev")));
    if (o->reps > 0 && o->tg > 1)
        printf("| %s | %s | %d | tg%d | %.2f ± %.2f |\n", desc, b->backend, o->c.threads, o->tg,
               json_real_value(json_object_get(tg, "mean")), json_real_value(json_object_get(tg, "stddev")));
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(out, "prompt_curve"), i, v)
        printf("| %s | %s | %d | ttft pp%d | %.2f, ttft p50 %.0f ms |\n", desc, b->backend, o->c.threads,
               (int)json_integer_value(json_object_get(v, "prompt_tokens")),
               json_real_value(json_object_get(v, "prefill_tokens_per_s")),
               json_real_value(json_object_get(v, "ttft_ms_p50")));
    json_array_foreach(json_object_get(out, "levels"), i, v) printf(
        "| %s | %s | %d | c%d pp%d+tg%d | %.2f aggregate, %.2f per stream, ttft p50 %.0f ms, kv %.1f MiB |\n",
        desc, b->backend, o->c.threads, (int)json_integer_value(json_object_get(v, "concurrency")), o->pp,
        o->tg, json_real_value(json_object_get(v, "aggregate_tokens_per_s")),
        json_real_value(json_object_get(v, "per_stream_tokens_per_s")),
        json_real_value(json_object_get(v, "ttft_ms_p50")), json_real_value(json_object_get(v, "kv_mb")));
    printf("\nload %.0f ms, itl p50 %.2f ms p99 %.2f ms, peak rss %.0f MiB, device memory %.0f MiB\n",
           json_real_value(json_object_get(out, "load_ms")),
           json_real_value(json_object_get(out, "itl_ms_p50")),
           json_real_value(json_object_get(out, "itl_ms_p99")),
           json_real_value(json_object_get(out, "peak_rss_mb")),
           json_real_value(json_object_get(out, "device_memory_mb")));
}

/* What the one-slot tests measured, and the curves. */
typedef struct bench_results {
    double load_ms, device_mb;
    double *pp_rates, *tg_rates, *ttfts; /* one per repetition */
    itl_log *itl;
    json_t *prompts, *levels;
} bench_results;

static void results_free(bench_results *res) {
    json_decref(res->prompts);
    json_decref(res->levels);
    free(res->pp_rates);
    free(res->tg_rates);
    free(res->ttfts);
    free(res->itl);
}

/* The device memory the model and its engine took: what the model's (non-CPU) devices lost. */
static double device_memory_mb(const sipp_model *m, const sipp_device_info *before, int n_before) {
    double mb = 0;
    sipp_device_info after[MAX_DEVICES];
    int n_after = sipp_devices_list(after, MAX_DEVICES);
    for (int i = 0; i < n_after && i < n_before && i < MAX_DEVICES; i++)
        if (strcmp(after[i].backend, "cpu") != 0 &&
            strcmp(after[i].backend, sipp_model_backend(m)->backend) == 0)
            mb += ((double)before[i].memory_free - (double)after[i].memory_free) / MIB;
    return mb;
}

/* pp, tg and the prompt curve, on one engine of one slot with room for the longest of them. */
static bool measure_one_slot(bench_run *b, const sipp_device_info *before, int n_before, bench_results *res) {
    const bench_opts *o = b->o;
    int longest = o->pp > 1 ? o->pp : 1;
    for (int i = 0; i < o->lengths.n; i++)
        longest = o->lengths.v[i] > longest ? o->lengths.v[i] : longest;
    sipp_engine *e = new_engine(b, 1, longest + o->tg + CTX_MARGIN);
    if (!e) return false;
    res->device_mb = device_memory_mb(b->model, before, n_before);
    bool ok = res->pp_rates && res->tg_rates && res->ttfts && res->itl && warm_up(b, e);
    for (int r = 0; ok && o->pp > 0 && r < o->reps; r++) {
        sipp_request_stats s = {0};
        ok = run_one(b, e, o->pp, 1, NULL, &s);
        res->pp_rates[r] = s.prefill_tokens_per_s;
        res->ttfts[r] = s.ttft_ms;
    }
    for (int r = 0; ok && o->tg > 1 && r < o->reps; r++) {
        sipp_request_stats s = {0};
        res->itl->last = 0;
        ok = run_one(b, e, 1, o->tg, res->itl, &s);
        res->tg_rates[r] = s.decode_tokens_per_s;
    }
    res->prompts = ok ? prompt_curve(b, e, &ok) : json_array();
    sipp_engine_free(e);
    return ok;
}

/* The report: one JSON object (-o json) or the markdown table. */
static void report(const bench_run *b, const sipp_model_info *info, bench_results *res) {
    const bench_opts *o = b->o;
    double pp_mean, pp_sd, tg_mean, tg_sd;
    mean_stddev(res->pp_rates, o->pp > 0 ? o->reps : 0, &pp_mean, &pp_sd);
    mean_stddev(res->tg_rates, o->tg > 1 ? o->reps : 0, &tg_mean, &tg_sd);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    const sipp_backend_decision *bd = sipp_model_backend(b->model);
    itl_log *itl = res->itl;
    json_t *out = json_pack(
        "{s:s, s:s, s:s, s:s, s:i, s:f, s:{s:i, s:f, s:f}, s:{s:i, s:f, s:f}, s:f, s:f, s:f, s:f, s:f, "
        "s:O, s:O}",
        "model", info->description, "backend", bd->backend, "backend_reason", bd->reason, "devices",
        bd->devices, "threads", o->c.threads, "load_ms", res->load_ms, "pp", "tokens", o->pp, "mean", pp_mean,
        "stddev", pp_sd, "tg", "tokens", o->tg, "mean", tg_mean, "stddev", tg_sd, "ttft_ms_p50",
        percentile(res->ttfts, o->pp > 0 ? o->reps : 0, 0.5), "itl_ms_p50",
        percentile(itl->gaps, itl->n, 0.5), "itl_ms_p99", percentile(itl->gaps, itl->n, 0.99), "peak_rss_mb",
        ru.ru_maxrss / 1024.0, "device_memory_mb", res->device_mb, "prompt_curve", res->prompts, "levels",
        res->levels);
    if (o->json) {
        char *s = json_dumps(out, JSON_COMPACT);
        puts(s);
        free(s);
    } else {
        print_md(o, info, bd, out);
    }
    json_decref(out);
}

int cmd_bench(int argc, char **argv) {
    bench_opts o;
    int rc = parse(argc, argv, &o);
    if (rc != CLI_PARSED) return rc;
    char err[SIPP_ERROR_SIZE];
    if (sipp_backend_check_name(o.c.backend, err) != SIPP_OK) {
        cli_error("--backend: %s", err);
        return EXIT_USAGE;
    }
    if (!cli_runtime_init_for(o.c.artifact, o.c.backend)) return EXIT_RUNTIME;
    if (o.c.threads == 0) o.c.threads = (int)sysconf(_SC_NPROCESSORS_ONLN);

    sipp_device_info before[MAX_DEVICES];
    int n_before = sipp_devices_list(before, MAX_DEVICES);
    sipp_model_params mp = sipp_model_default_params();
    mp.backend = o.c.backend;
    mp.flash_attn = o.c.flash_attn;
    mp.rpc_servers = o.c.rpc;
    mp.tensor_split = o.tensor_split;
    sipp_model *m = NULL;
    double t0 = now_ms();
    if (sipp_model_load(o.model, &mp, &m, err) != SIPP_OK) {
        cli_error("%s", err);
        return EXIT_RUNTIME;
    }
    bench_results res = {.load_ms = now_ms() - t0,
                         .pp_rates = calloc((size_t)o.reps + 1, sizeof(double)),
                         .tg_rates = calloc((size_t)o.reps + 1, sizeof(double)),
                         .ttfts = calloc((size_t)o.reps + 1, sizeof(double)),
                         .itl = calloc(1, sizeof *res.itl),
                         .levels = json_array()};
    sipp_model_info info;
    sipp_model_get_info(m, &info);
    bench_run b = {.o = &o, .model = m, .n_vocab = info.n_vocab, .rng = 42};
    bool ok = measure_one_slot(&b, before, n_before, &res);
    for (int l = 0; ok && l < o.levels.n; l++) {
        json_t *lv = level(&b, o.levels.v[l], &ok);
        if (lv) json_array_append_new(res.levels, lv);
    }
    if (ok) report(&b, &info, &res);
    results_free(&res);
    sipp_model_free(m);
    return ok ? EXIT_OK : EXIT_RUNTIME;
}
