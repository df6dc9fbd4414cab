/*
 * bench.c: `sipp bench MODEL`: how fast a model runs here, measured through the engine itself.
 *
 * pp and tg mean what they mean in llama-bench, so the figures compare: pp is the rate of evaluating
 * a prompt of -p random tokens, tg the rate of generating -n tokens one at a time after a one-token
 * prompt. Each repetition uses fresh random tokens so that no prefix is reused from the KV cache.
 * Concurrency levels submit that many requests at once (each its own -p token prompt, exactly -n
 * generated tokens, end-of-generation ignored) and report the aggregate rate: generated tokens over
 * the wall time from the first submission to the last completion.
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
#include "cli/targets.h"

#define MAX_LEVELS 16
#define DEFAULT_PP 512
#define DEFAULT_TG 128
#define DEFAULT_REPS 5
#define CTX_MARGIN 16
#define MAX_ITL 65536
#define MIB (1024.0 * 1024.0)

typedef struct bench_opts {
    const char *model, *backend, *artifact, *rpc, *tensor_split, *flash_attn;
    int pp, tg, reps, threads, ctx_size;
    int levels[MAX_LEVELS];
    int n_levels;
    bool json;
} bench_opts;

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

static int parse(int argc, char **argv, bench_opts *o) {
    memset(o, 0, sizeof *o);
    o->pp = DEFAULT_PP;
    o->tg = DEFAULT_TG;
    o->reps = DEFAULT_REPS;
    o->backend = "auto";
    cli_args a = {.argc = argc, .argv = argv};
    while (a.i < argc && !a.bad) {
        const char *arg = argv[a.i];
        if (cli_flag_value(&a, "-p"))
            cli_int(&a, "-p", 0, 1 << 20, &o->pp);
        else if (cli_flag_value(&a, "-n"))
            cli_int(&a, "-n", 0, 1 << 20, &o->tg);
        else if (cli_flag_value(&a, "-r"))
            cli_int(&a, "-r", 1, 1000, &o->reps);
        else if (cli_flag_value(&a, "--threads"))
            cli_int(&a, "--threads", 1, 1024, &o->threads);
        else if (cli_flag_value(&a, "--ctx-size"))
            cli_int(&a, "--ctx-size", 0, 1 << 24, &o->ctx_size);
        else if (cli_flag_value(&a, "--backend"))
            o->backend = a.value;
        else if (cli_flag_value(&a, "--flash-attn"))
            cli_flash_attn(&a, &o->flash_attn);
        else if (cli_flag_value(&a, "--rpc"))
            o->rpc = a.value;
        else if (cli_flag_value(&a, "--tensor-split"))
            o->tensor_split = a.value;
        else if (cli_flag_value(&a, "--artifact"))
            o->artifact = a.value;
        else if (cli_flag_value(&a, "-o")) {
            if (!a.value) break;
            if (strcmp(a.value, "json") == 0)
                o->json = true;
            else if (strcmp(a.value, "md") != 0) {
                cli_error("bench: -o '%s' is not md or json", a.value);
                return EXIT_USAGE;
            }
        } else if (cli_flag_value(&a, "--concurrency")) {
            if (!a.value) break;
            char *copy = strdup(a.value), *save = NULL;
            for (char *t = strtok_r(copy, ",", &save); t && !a.bad; t = strtok_r(NULL, ",", &save)) {
                a.value = t;
                int c;
                if (o->n_levels == MAX_LEVELS) {
                    cli_error("bench: at most %d concurrency levels", MAX_LEVELS);
                    a.bad = true;
                } else if (cli_int(&a, "--concurrency", 1, 256, &c)) {
                    o->levels[o->n_levels++] = c;
                }
            }
            free(copy);
        } else if (arg[0] == '-') {
            cli_error("bench: unknown option '%s' (see sipp bench --help)", arg);
            return EXIT_USAGE;
        } else if (!o->model) {
            o->model = arg;
            a.i++;
        } else {
            cli_error("bench: unexpected argument '%s'", arg);
            return EXIT_USAGE;
        }
    }
    if (a.bad) return EXIT_USAGE;
    if (!o->model) {
        cli_error("bench: no MODEL given");
        return EXIT_USAGE;
    }
    if (o->n_levels == 0) o->levels[o->n_levels++] = 1;
    return EXIT_OK;
}

static const char usage[] =
    "usage: sipp bench MODEL [-p 512] [-n 128] [-r 5] [--concurrency 1,4] [--threads N] [--backend NAME]\n"
    "                  [--flash-attn auto|on|off] [--ctx-size N] [--artifact DIR] [-o md|json]\n"
    "                  [--rpc HOST:PORT[,...] --tensor-split A,B,...] (with --backend rpc)\n\n"
    "Measures cold load time, prefill (pp) and decode (tg) tokens/s with mean and standard deviation\n"
    "(as llama-bench defines them), TTFT and inter-token latency, and the aggregate generation rate\n"
    "at each concurrency level (each request: its own -p token prompt, exactly -n generated tokens).\n"
    "-o json prints one object: load_ms, pp, tg, ttft_ms_p50, itl_ms_p50, itl_ms_p99, peak_rss_mb,\n"
    "device_memory_mb, levels[] {concurrency, aggregate_tokens_per_s, ttft_ms_p50, ttft_ms_p99}.\n";

int cmd_bench(int argc, char **argv) {
    if (cli_wants_help(argc, argv)) {
        fputs(usage, stdout);
        return EXIT_OK;
    }
    bench_opts o;
    int rc = parse(argc, argv, &o);
    if (rc != EXIT_OK) return rc;
    char err[SIPP_ERROR_SIZE];
    if (sipp_backend_check_name(o.backend, err) != SIPP_OK) {
        cli_error("--backend: %s", err);
        return EXIT_USAGE;
    }
    if (!cli_runtime_init_for(o.artifact, o.backend)) return EXIT_RUNTIME;
    if (o.threads == 0) o.threads = (int)sysconf(_SC_NPROCESSORS_ONLN);

    int max_level = 1;
    for (int i = 0; i < o.n_levels; i++)
        max_level = o.levels[i] > max_level ? o.levels[i] : max_level;
    sipp_device_info before[8];
    int n_before = sipp_devices_list(before, 8);

    sipp_model_params mp = sipp_model_default_params();
    mp.backend = o.backend;
    mp.flash_attn = o.flash_attn;
    mp.rpc_servers = o.rpc;
    mp.tensor_split = o.tensor_split;
    sipp_model *m = NULL;
    double t0 = now_ms();
    if (sipp_model_load(o.model, &mp, &m, err) != SIPP_OK) {
        cli_error("%s", err);
        return EXIT_RUNTIME;
    }
    double load_ms = now_ms() - t0;
    sipp_model_info info;
    sipp_model_get_info(m, &info);

    sipp_engine_params ep = sipp_engine_default_params();
    ep.parallel = max_level;
    ep.threads = o.threads;
    int per_seq = (o.pp > 1 ? o.pp : 1) + o.tg + CTX_MARGIN;
    ep.ctx_size = o.ctx_size ? o.ctx_size : per_seq * max_level;
    sipp_engine *e = NULL;
    if (sipp_engine_new(m, &ep, &e, err) != SIPP_OK) {
        cli_error("%s", err);
        sipp_model_free(m);
        return EXIT_RUNTIME;
    }

    double device_mb = 0;
    sipp_device_info after[8];
    int n_after = sipp_devices_list(after, 8);
    for (int i = 0; i < n_after && i < n_before && i < 8; i++)
        if (strcmp(after[i].backend, "cpu") != 0 &&
            strcmp(after[i].backend, sipp_model_backend(m)->backend) == 0)
            device_mb += ((double)before[i].memory_free - (double)after[i].memory_free) / MIB;

    uint64_t rng = 42;
    bool ok = true;
    double *pp_rates = calloc((size_t)o.reps, sizeof(double)),
           *tg_rates = calloc((size_t)o.reps, sizeof(double));
    double *ttfts = calloc((size_t)o.reps, sizeof(double));
    itl_log *itl = calloc(1, sizeof *itl);

    /* Warm-up, as llama-bench does: the first decode of a shape pays one-time costs (allocation,
     * shaders, an rpc server's first graph of that size), so the whole prompt once, and a token. */
    int n_warm = o.pp > 0 ? o.pp : 1;
    int32_t *warm = random_tokens(n_warm, info.n_vocab, &rng);
    sipp_request *wr = warm ? submit(e, warm, n_warm, 2, NULL) : NULL;
    ok = wr && finished_ok(wr);
    sipp_request_free(wr);
    free(warm);

    for (int r = 0; ok && o.pp > 0 && r < o.reps; r++) {
        int32_t *toks = random_tokens(o.pp, info.n_vocab, &rng);
        sipp_request *req = submit(e, toks, o.pp, 1, NULL);
        ok = req && finished_ok(req);
        if (ok) {
            sipp_request_stats s;
            sipp_request_get_stats(req, &s);
            pp_rates[r] = s.prefill_tokens_per_s;
            ttfts[r] = s.ttft_ms;
        }
        sipp_request_free(req);
        free(toks);
    }
    for (int r = 0; ok && o.tg > 1 && r < o.reps; r++) {
        int32_t *tok = random_tokens(1, info.n_vocab, &rng);
        itl->last = 0;
        sipp_request *req = submit(e, tok, 1, o.tg, itl);
        ok = req && finished_ok(req);
        if (ok) {
            sipp_request_stats s;
            sipp_request_get_stats(req, &s);
            tg_rates[r] = s.decode_tokens_per_s;
        }
        sipp_request_free(req);
        free(tok);
    }

    json_t *levels = json_array();
    for (int l = 0; ok && l < o.n_levels; l++) {
        int c = o.levels[l];
        sipp_request **reqs = calloc((size_t)c, sizeof *reqs);
        int32_t **prompts = calloc((size_t)c, sizeof *prompts);
        double *lt = calloc((size_t)c, sizeof(double));
        int n_prompt = o.pp > 0 ? o.pp : 1;
        for (int i = 0; i < c; i++)
            prompts[i] = random_tokens(n_prompt, info.n_vocab, &rng);
        double start = now_ms();
        for (int i = 0; ok && i < c; i++)
            ok = (reqs[i] = submit(e, prompts[i], n_prompt, o.tg > 0 ? o.tg : 1, NULL)) != NULL;
        long generated = 0;
        for (int i = 0; i < c; i++) {
            if (!reqs[i]) continue;
            ok = finished_ok(reqs[i]) && ok;
            sipp_request_stats s;
            sipp_request_get_stats(reqs[i], &s);
            generated += s.generated_tokens;
            lt[i] = s.ttft_ms;
        }
        double wall = now_ms() - start;
        json_array_append_new(levels,
                              json_pack("{s:i, s:f, s:f, s:f, s:I}", "concurrency", c,
                                        "aggregate_tokens_per_s", wall > 0 ? generated / (wall / 1e3) : 0.0,
                                        "ttft_ms_p50", percentile(lt, c, 0.5), "ttft_ms_p99",
                                        percentile(lt, c, 0.99), "generated_tokens", (json_int_t)generated));
        for (int i = 0; i < c; i++) {
            sipp_request_free(reqs[i]);
            free(prompts[i]);
        }
        free(reqs);
        free(prompts);
        free(lt);
    }

    if (ok) {
        double pp_mean, pp_sd, tg_mean, tg_sd;
        mean_stddev(pp_rates, o.pp > 0 ? o.reps : 0, &pp_mean, &pp_sd);
        mean_stddev(tg_rates, o.tg > 1 ? o.reps : 0, &tg_mean, &tg_sd);
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        const sipp_backend_decision *b = sipp_model_backend(m);
        json_t *out =
            json_pack("{s:s, s:s, s:s, s:s, s:i, s:f, s:{s:i, s:f, s:f}, s:{s:i, s:f, s:f}, s:f, s:f, s:f, "
                      "s:f, s:f, s:O}",
                      "model", info.description, "backend", b->backend, "backend_reason", b->reason,
                      "devices", b->devices, "threads", o.threads, "load_ms", load_ms, "pp", "tokens", o.pp,
                      "mean", pp_mean, "stddev", pp_sd, "tg", "tokens", o.tg, "mean", tg_mean, "stddev",
                      tg_sd, "ttft_ms_p50", percentile(ttfts, o.pp > 0 ? o.reps : 0, 0.5), "itl_ms_p50",
                      percentile(itl->gaps, itl->n, 0.5), "itl_ms_p99", percentile(itl->gaps, itl->n, 0.99),
                      "peak_rss_mb", ru.ru_maxrss / 1024.0, "device_memory_mb", device_mb, "levels", levels);
        if (o.json) {
            char *s = json_dumps(out, JSON_COMPACT);
            puts(s);
            free(s);
        } else {
            printf("| model | backend | threads | test | t/s |\n|---|---|---|---|---|\n");
            if (o.pp > 0)
                printf("| %s | %s | %d | pp%d | %.2f ± %.2f |\n", info.description, b->backend, o.threads,
                       o.pp, pp_mean, pp_sd);
            if (o.tg > 1)
                printf("| %s | %s | %d | tg%d | %.2f ± %.2f |\n", info.description, b->backend, o.threads,
                       o.tg, tg_mean, tg_sd);
            size_t i;
            json_t *lv;
            json_array_foreach(levels, i, lv) printf(
                "| %s | %s | %d | c%d pp%d+tg%d | %.2f aggregate, ttft p50 %.0f ms |\n", info.description,
                b->backend, o.threads, (int)json_integer_value(json_object_get(lv, "concurrency")), o.pp,
                o.tg, json_real_value(json_object_get(lv, "aggregate_tokens_per_s")),
                json_real_value(json_object_get(lv, "ttft_ms_p50")));
            printf("\nload %.0f ms, itl p50 %.2f ms p99 %.2f ms, peak rss %.0f MiB, device memory %.0f MiB\n",
                   load_ms, json_real_value(json_object_get(out, "itl_ms_p50")),
                   json_real_value(json_object_get(out, "itl_ms_p99")), ru.ru_maxrss / 1024.0, device_mb);
        }
        json_decref(out);
    }
    json_decref(levels);
    free(pp_rates);
    free(tg_rates);
    free(ttfts);
    free(itl);
    sipp_engine_free(e);
    sipp_model_free(m);
    return ok ? EXIT_OK : EXIT_RUNTIME;
}
