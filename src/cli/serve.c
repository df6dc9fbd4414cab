/*
 * serve.c: `sipp serve`: run the gateway (src/gateway): OpenAI-compatible and sipp-native HTTP
 * routes in front of local models and remote OpenAI-compatible servers.
 *
 *   sipp serve [flags]                   every model in the store, loaded on first use
 *   sipp serve --models-dir DIR [flags]  every GGUF file (or split set) in DIR, loaded on first use
 *   sipp serve MODEL [flags]             one local target, named after the file
 *   sipp serve --config FILE [flags]     the targets, tokens and limits of a TOML file
 *   sipp serve --check --config FILE     validate the file (and what it refers to) and exit
 *
 * Flags given with --config override the file's [server] listen address. The configuration is
 * validated before anything is loaded; every problem is printed as "FILE:LINE: problem".
 *
 * --supervised-target NAME (repeated) is internal: a gateway runs its own arguments with it to
 * serve its rpc targets in child processes it supervises (src/gateway/supervise.c).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "gateway/gateway.h"
#include "gateway/supervise.h"

#define SERVE_MAX_PORT 65535
#define SERVE_MAX_PARALLEL 256
#define SERVE_MAX_CTX (1 << 24)
#define SERVE_MAX_THREADS 1024
#define SERVE_MAX_GPU_LAYERS 100000
#define SERVE_MAX_BUDGET_MB (1 << 30)
#define SERVE_MAX_LOADED 100000
#define SERVE_MAX_SUPERVISED 256 /* targets one supervised child serves */

static const char usage[] =
    "usage: sipp serve [MODEL | --models-dir DIR] [options]\n"
    "       sipp serve --config FILE [--host ADDR] [--port N]\n"
    "       sipp serve --check --config FILE\n"
    "\n"
    "Runs the gateway: OpenAI-compatible routes (/v1/models, /v1/chat/completions, /v1/completions,\n"
    "/v1/embeddings), sipp-native routes (/v1/query, /v1/chat, /v1/embed) and /health, /ready,\n"
    "/metrics, /v1/backends. MODEL becomes one local target named after its file (without .gguf).\n"
    "Without MODEL or --config, every model in the store ($SIPP_MODELS_DIR) is served under its\n"
    "store name, loaded on its first request and unloaded when memory is needed.\n"
    "\n"
    "options:\n"
    "  --config FILE            targets, tokens and limits from a TOML file (see docs/gateway.md)\n"
    "  --check                  validate --config FILE and exit (0 valid, 1 not)\n"
    "  --models-dir DIR         serve every GGUF file in DIR (also with --config: added to its targets)\n"
    "  --memory-budget-mb N     host RAM the loaded models may hold ([server] memory_budget_mb)\n"
    "  --max-loaded-models N    at most N models loaded at once ([server] max_loaded_models)\n"
    "  --keep-alive DURATION    discovered models' idle time before unload: -1 (default, never), 0, 30s, 5m\n"
    "  --host ADDR              listen address (default 127.0.0.1)\n"
    "  --port N                 listen port (default 8080; 0 = any free port, printed at start)\n"
    "  --backend NAME           MODEL's backend: auto (default), cpu, vulkan, cuda, metal, ...\n"
    "  --parallel N             MODEL's slots: requests decoded together (default 4)\n"
    "  --ctx-size N|auto        MODEL's context in tokens, shared by the slots (default: the model's, at "
    "most 4096;\n"
    "                           auto: the largest that fits the memory budget)\n"
    "  --threads N              MODEL's CPU threads (default: all cores)\n"
    "  --gpu-layers N           MODEL's layers on the GPU backend (default: all)\n"
    "  --max-tokens N           MODEL's (or the served directory's) output cap: a request's default when it\n"
    "                           gives none, its ceiling when it asks more (default: none)\n"
    "  --flash-attn MODE        MODEL's flash attention: auto (default; off with --backend cpu), on, off\n"
    "  --cache-type-k TYPE      MODEL's KV cache key type: f16 (default), q8_0, q4_0\n"
    "  --cache-type-v TYPE      MODEL's KV cache value type: f16 (default), q8_0, q4_0 (needs flash "
    "attention)\n"
    "  --spec none|ngram|draft  MODEL's speculative decoding (greedy and sampled requests)\n"
    "  --draft DRAFT|auto       MODEL's draft model (speculative \"draft\"; a path or a store name; auto:\n"
    "                           the draft published beside MODEL, for development)\n"
    "  --allow-unauthenticated  allow a non-loopback --host without [[tokens]]\n"
    "  --artifact DIR           use the llama.cpp libraries in DIR (also SIPP_ARTIFACT)\n"
    "\n"
    "SIGTERM or Ctrl-C stops accepting, lets requests finish (shutdown_timeout_seconds), exits 0.\n"
    "exit status: 0 clean stop or valid config, 1 runtime failure or invalid config, 2 bad usage\n";

typedef struct serve_opts {
    const char *model;
    const char *config;
    const char *host;
    const char *artifact;
    const char *backend;
    const char *models_dir;
    const char *keep_alive;
    const char *supervised[SERVE_MAX_SUPERVISED]; /* internal: see the top of the file */
    size_t n_supervised;
    int memory_budget_mb, max_loaded_models;
    const char *flash_attn;
    const char *cache_type_k, *cache_type_v;
    const char *speculative;
    const char *draft;
    int port; /* -1 = not given */
    int parallel, ctx_size, threads, gpu_layers, max_tokens;
    bool parallel_set, ctx_set, ctx_auto, threads_set, gpu_set, max_tokens_set;
    bool check;
    bool allow_unauthenticated;
} serve_opts;

static int parse(int argc, char **argv, serve_opts *o) {
    memset(o, 0, sizeof *o);
    o->port = -1;
    cli_args a = {.argc = argc, .argv = argv};
    while (a.i < argc && !a.bad) {
        const char *arg = argv[a.i];
        if (cli_flag(&a, "--check"))
            o->check = true;
        else if (cli_flag(&a, "--allow-unauthenticated"))
            o->allow_unauthenticated = true;
        else if (cli_flag_value(&a, "--config"))
            o->config = a.value;
        else if (cli_flag_value(&a, "--host"))
            o->host = a.value;
        else if (cli_flag_value(&a, "--artifact"))
            o->artifact = a.value;
        else if (cli_flag_value(&a, "--backend"))
            o->backend = a.value;
        else if (cli_flag_value(&a, "--models-dir"))
            o->models_dir = a.value;
        else if (cli_flag_value(&a, "--keep-alive"))
            o->keep_alive = a.value;
        else if (cli_flag_value(&a, "--supervised-target")) {
            if (o->n_supervised == SERVE_MAX_SUPERVISED) {
                cli_error("serve: --supervised-target: at most %d", SERVE_MAX_SUPERVISED);
                return EXIT_USAGE;
            }
            o->supervised[o->n_supervised++] = a.value;
        } else if (cli_flag_value(&a, "--memory-budget-mb"))
            cli_int(&a, "--memory-budget-mb", 1, SERVE_MAX_BUDGET_MB, &o->memory_budget_mb);
        else if (cli_flag_value(&a, "--max-loaded-models"))
            cli_int(&a, "--max-loaded-models", 1, SERVE_MAX_LOADED, &o->max_loaded_models);
        else if (cli_flag_value(&a, "--flash-attn"))
            cli_flash_attn(&a, &o->flash_attn);
        else if (cli_flag_value(&a, "--cache-type-k"))
            cli_cache_type(&a, "--cache-type-k", &o->cache_type_k);
        else if (cli_flag_value(&a, "--cache-type-v"))
            cli_cache_type(&a, "--cache-type-v", &o->cache_type_v);
        else if (cli_flag_value(&a, "--spec"))
            cli_speculative(&a, &o->speculative);
        else if (cli_flag_value(&a, "--draft"))
            o->draft = a.value;
        else if (cli_flag_value(&a, "--port"))
            cli_int(&a, "--port", 0, SERVE_MAX_PORT, &o->port);
        else if (cli_flag_value(&a, "--parallel"))
            o->parallel_set = cli_int(&a, "--parallel", 1, SERVE_MAX_PARALLEL, &o->parallel);
        else if (cli_flag_value(&a, "--ctx-size")) {
            o->ctx_auto = a.value && strcmp(a.value, "auto") == 0;
            o->ctx_set = o->ctx_auto || cli_int(&a, "--ctx-size", 0, SERVE_MAX_CTX, &o->ctx_size);
        } else if (cli_flag_value(&a, "--threads"))
            o->threads_set = cli_int(&a, "--threads", 1, SERVE_MAX_THREADS, &o->threads);
        else if (cli_flag_value(&a, "--max-tokens"))
            o->max_tokens_set = cli_int(&a, "--max-tokens", 1, SERVE_MAX_CTX, &o->max_tokens);
        else if (cli_flag_value(&a, "--gpu-layers"))
            o->gpu_set = cli_int(&a, "--gpu-layers", -1, SERVE_MAX_GPU_LAYERS, &o->gpu_layers);
        else if (arg[0] == '-' && arg[1] != '\0') {
            cli_error("serve: unknown option '%s' (see sipp serve --help)", arg);
            return EXIT_USAGE;
        } else if (o->model) {
            cli_error(
                "serve: unexpected argument '%s': give one MODEL, or several targets with --config FILE",
                arg);
            return EXIT_USAGE;
        } else {
            o->model = arg;
            a.i++;
        }
    }
    if (a.bad) return EXIT_USAGE;
    if (o->model && (o->config || o->models_dir)) {
        cli_error(o->config ? "serve: give MODEL or --config FILE, not both"
                            : "serve: give MODEL or --models-dir DIR, not both");
        return EXIT_USAGE;
    }
    int64_t ka;
    if (o->keep_alive && !gw_parse_keep_alive(o->keep_alive, &ka)) {
        cli_error("serve: --keep-alive '%s' is not -1, 0, seconds or a duration like 30s, 5m, 1h",
                  o->keep_alive);
        return EXIT_USAGE;
    }
    if (o->check && !o->config) {
        cli_error("serve: --check needs --config FILE");
        return EXIT_USAGE;
    }
    if (o->config &&
        (o->backend || o->flash_attn || o->speculative || o->draft || o->parallel_set || o->ctx_set ||
         o->threads_set || o->gpu_set || o->max_tokens_set || o->cache_type_k || o->cache_type_v)) {
        cli_error(
            "serve: --backend, --flash-attn, --spec, --draft, --parallel, --ctx-size, --threads, "
            "--gpu-layers, --max-tokens, --cache-type-k and --cache-type-v apply to MODEL; with --config "
            "set them per target in the file (max_tokens = N)");
        return EXIT_USAGE;
    }
    return cli_cache_types_fit(o->backend, o->flash_attn, o->cache_type_k, o->cache_type_v) ? EXIT_OK
                                                                                            : EXIT_USAGE;
}

static void print_errors(const sipp_buf *errs) {
    const char *p = errs->data ? errs->data : "";
    while (*p) {
        const char *nl = strchr(p, '\n');
        int n = nl ? (int)(nl - p) : (int)strlen(p);
        fprintf(stderr, "sipp: %.*s\n", n, p);
        p += n + (nl ? 1 : 0);
    }
}

/* The header check a load makes first: a model llama.cpp would abort on is invalid here, not a
 * crash at start (serve itself marks such a target failed and serves the others). A model file
 * that cannot be read is skipped: gw_config_validate has reported it. */
static bool check_models(const gw_config *cfg, const char *config, sipp_buf *errs) {
    bool ok = true;
    for (size_t i = 0; i < cfg->n_targets; i++) {
        char err[SIPP_ERROR_SIZE];
        const gw_target_config *t = &cfg->targets[i];
        struct stat st;
        if (t->type != GW_TARGET_LOCAL || !t->model_path || stat(t->model_path, &st) != 0 ||
            !S_ISREG(st.st_mode) || access(t->model_path, R_OK) != 0 ||
            sipp_model_check(t->model_path, err) == SIPP_OK)
            continue;
        sipp_buf_appendf(errs, "%s: target '%s': %s\n", config, t->name, err);
        ok = false;
    }
    return ok;
}

int cmd_serve(int argc, char **argv) {
    if (cli_wants_help(argc, argv)) {
        fputs(usage, stdout);
        return EXIT_OK;
    }
    serve_opts o;
    int rc = parse(argc, argv, &o);
    if (rc != EXIT_OK) return rc;

    gw_config cfg;
    gw_config_init(&cfg);
    sipp_buf errs = {0};
    bool ok = o.config  ? gw_config_load(o.config, &cfg, &errs)
              : o.model ? gw_config_add_local(&cfg, o.model, &errs)
                        : true;
    if (o.keep_alive) gw_parse_keep_alive(o.keep_alive, &cfg.discovered_keep_alive_s);
    if (o.max_tokens_set) cfg.discovered_max_tokens = o.max_tokens;
    /* the store when nothing else is named; a models directory besides a config's targets */
    if (ok && !o.model && (o.models_dir || !o.config)) ok = gw_config_add_dir(&cfg, o.models_dir, &errs);
    if (o.memory_budget_mb) cfg.memory_budget_mb = o.memory_budget_mb;
    if (o.max_loaded_models) cfg.max_loaded_models = o.max_loaded_models;
    if (ok && o.model) {
        gw_target_config *t = &cfg.targets[0];
        if (o.backend) {
            free(t->backend);
            t->backend = strdup(o.backend);
        }
        if (o.flash_attn) {
            free(t->flash_attn);
            t->flash_attn = strdup(o.flash_attn);
        }
        if (o.speculative) {
            free(t->speculative);
            t->speculative = strdup(o.speculative);
        }
        if (o.cache_type_k) t->cache_type_k = strdup(o.cache_type_k);
        if (o.cache_type_v) t->cache_type_v = strdup(o.cache_type_v);
        char draft_buf[PATH_MAX];
        const char *draft = NULL;
        if (!cli_draft_model(o.model, o.draft, &draft, draft_buf, sizeof draft_buf)) {
            gw_config_free(&cfg);
            sipp_buf_free(&errs);
            return EXIT_RUNTIME;
        }
        if (draft) {
            free(t->draft_model);
            t->draft_model = strdup(draft);
        }
        if (o.parallel_set) t->parallel = o.parallel;
        if (o.ctx_set) t->ctx_size = o.ctx_size;
        t->ctx_auto = o.ctx_auto;
        if (o.threads_set) t->threads = o.threads;
        if (o.gpu_set) t->gpu_layers = o.gpu_layers;
        if (o.max_tokens_set) t->max_tokens = o.max_tokens;
    }
    if (o.host) {
        free(cfg.host);
        cfg.host = strdup(o.host);
    }
    if (o.port >= 0) cfg.port = o.port;
    if (o.allow_unauthenticated) cfg.allow_unauthenticated = true;
    if (ok && o.n_supervised) ok = gw_config_supervised(&cfg, o.supervised, o.n_supervised, &errs);
    /* Every problem, not only the first group: a file that parsed as TOML (cfg.path is set then)
     * is also validated against the machine (model files, token variables) when its keys had
     * errors, and --check reads the model headers too, so one run lists all there is to fix. */
    bool parsed = ok || cfg.path;
    if (parsed) ok = gw_config_validate(&cfg, &errs) && ok;
    if (parsed && o.check) ok = check_models(&cfg, o.config, &errs) && ok;
    if (!ok) {
        print_errors(&errs);
        sipp_buf_free(&errs);
        gw_config_free(&cfg);
        return EXIT_RUNTIME;
    }
    sipp_buf_free(&errs);
    if (o.check) {
        printf("%s: valid: %zu target%s (", o.config, cfg.n_targets, cfg.n_targets == 1 ? "" : "s");
        for (size_t i = 0; i < cfg.n_targets; i++)
            printf("%s%s", i ? ", " : "", cfg.targets[i].name);
        printf("), %zu token%s, listen %s:%d\n", cfg.n_tokens, cfg.n_tokens == 1 ? "" : "s", cfg.host,
               cfg.port);
        gw_config_free(&cfg);
        return EXIT_OK;
    }
    if (!cli_runtime_init(o.artifact)) {
        gw_config_free(&cfg);
        return EXIT_RUNTIME;
    }
    rc = gw_serve(&cfg);
    gw_config_free(&cfg);
    return rc;
}
