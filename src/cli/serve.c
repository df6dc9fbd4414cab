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
 * serve its rpc targets in child processes it supervises (src/gateway/kinds/supervise.c).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "gateway/fleet/fleet.h"
#include "gateway/gateway.h"
#include "gateway/kinds/kinds.h"

#define SERVE_MAX_PORT 65535
#define SERVE_MAX_PARALLEL 256
#define SERVE_MAX_CTX (1 << 24)
#define GPU_LAYERS_UNSET INT_MIN
#define SERVE_MAX_BUDGET_MB (1 << 30)
#define SERVE_MAX_LOADED 100000
#define SERVE_MAX_SUPERVISED 256 /* targets one supervised child serves */

typedef struct serve_opts {
    cli_common c; /* --artifact, and MODEL's --backend, --threads, --gpu-layers, --flash-attn,
                     --cache-type-k, --cache-type-v, --spec, --draft */
    const char *model;
    const char *config;
    const char *host;
    const char *models_dir;
    const char *keep_alive;
    const char *pooling;        /* MODEL's embedding pooling ("rank": a reranker); NULL = the model's */
    const char *slot_save_path; /* [server] slot_save_dir */
    bool rerank;                /* --rerank: --pooling rank, llama-server's name */
    const char *supervised[SERVE_MAX_SUPERVISED]; /* internal: see the top of the file */
    size_t n_supervised;
    int memory_budget_mb, max_loaded_models;
    int port;                 /* -1 = not given */
    int parallel, max_tokens; /* 0 = not given */
    bool ctx_set, ctx_auto;
    bool check;
    bool config_keys; /* --config-keys: print the file's keys (docs/gateway.md's reference) */
    bool allow_unauthenticated;
    bool no_auth;
    bool follow_symlinks;
    bool voice;             /* --voice: a flite target named "voice" */
    const char *voice_name; /* --voice=NAME: the voice it speaks */
} serve_opts;

/* --ctx-size N|auto: auto is the largest context the memory budget fits. */
static bool parse_ctx_size(cli_args *a, const cli_option *opt, void *opts) {
    serve_opts *o = opts;
    o->ctx_auto = strcmp(a->value, "auto") == 0;
    o->ctx_set = o->ctx_auto || cli_int(a, opt->name, 0, SERVE_MAX_CTX, &o->c.ctx_size);
    return o->ctx_set;
}

/* --supervised-target NAME, once per target. */
static bool parse_supervised(cli_args *a, const cli_option *opt, void *opts) {
    serve_opts *o = opts;
    if (o->n_supervised == SERVE_MAX_SUPERVISED) {
        cli_error("serve: %s: at most %d", opt->name, SERVE_MAX_SUPERVISED);
        return false;
    }
    o->supervised[o->n_supervised++] = a->value;
    return true;
}

static const cli_option opt_config = {
    .name = "--config",
    .arg = "FILE",
    .kind = CLI_OPT_STRING,
    .offset = offsetof(serve_opts, config),
    .help = "targets, tokens and limits from a TOML file (see docs/gateway.md)"};
static const cli_option opt_check = {.name = "--check",
                                     .kind = CLI_OPT_FLAG,
                                     .offset = offsetof(serve_opts, check),
                                     .help = "validate --config FILE and exit (0 valid, 1 not)"};
static const cli_option opt_config_keys = {
    .name = "--config-keys",
    .kind = CLI_OPT_FLAG,
    .offset = offsetof(serve_opts, config_keys),
    .help = "print every key --config FILE may hold (kind, range, default, meaning) as Markdown"};
static const cli_option opt_models_dir = {
    .name = "--models-dir",
    .arg = "DIR",
    .kind = CLI_OPT_STRING,
    .offset = offsetof(serve_opts, models_dir),
    .help = "serve every GGUF file in DIR (also with --config: added to its targets)"};
static const cli_option opt_follow_symlinks = {
    .name = "--models-follow-symlinks",
    .kind = CLI_OPT_FLAG,
    .offset = offsetof(serve_opts, follow_symlinks),
    .help = "also serve models in DIR that link to files outside it ([server] models_follow_symlinks)"};
static const cli_option opt_memory_budget = {.name = "--memory-budget-mb",
                                             .arg = "N",
                                             .kind = CLI_OPT_INT,
                                             .offset = offsetof(serve_opts, memory_budget_mb),
                                             .lo = 1,
                                             .hi = SERVE_MAX_BUDGET_MB,
                                             .help = "host RAM the loaded models may hold ([server] "
                                                     "memory_budget_mb)"};
static const cli_option opt_max_loaded = {.name = "--max-loaded-models",
                                          .arg = "N",
                                          .kind = CLI_OPT_INT,
                                          .offset = offsetof(serve_opts, max_loaded_models),
                                          .lo = 1,
                                          .hi = SERVE_MAX_LOADED,
                                          .help =
                                              "at most N models loaded at once ([server] max_loaded_models)"};
static const cli_option opt_keep_alive = {
    .name = "--keep-alive",
    .arg = "DURATION",
    .kind = CLI_OPT_STRING,
    .offset = offsetof(serve_opts, keep_alive),
    .help = "discovered models' idle time before unload: -1 (default, never), 0, 30s, 5m"};
static const cli_option opt_host = {.name = "--host",
                                    .arg = "ADDR",
                                    .kind = CLI_OPT_STRING,
                                    .offset = offsetof(serve_opts, host),
                                    .help = "listen address (default 127.0.0.1)"};
static const cli_option opt_port = {.name = "--port",
                                    .arg = "N",
                                    .kind = CLI_OPT_INT,
                                    .offset = offsetof(serve_opts, port),
                                    .lo = 0,
                                    .hi = SERVE_MAX_PORT,
                                    .help =
                                        "listen port (default 8080; 0 = any free port, printed at start)"};
static const cli_option opt_backend = {
    .like = &cli_opt_backend, .help = "MODEL's backend: auto (default), cpu, vulkan, cuda, metal, ..."};
static const cli_option opt_parallel = {.name = "--parallel",
                                        .arg = "N",
                                        .kind = CLI_OPT_INT,
                                        .offset = offsetof(serve_opts, parallel),
                                        .lo = 1,
                                        .hi = SERVE_MAX_PARALLEL,
                                        .help = "MODEL's slots: requests decoded together (default 4)"};
static const cli_option opt_ctx_size = {
    .name = "--ctx-size",
    .arg = "N|auto",
    .kind = CLI_OPT_CUSTOM,
    .parse = parse_ctx_size,
    .help = "MODEL's context in tokens, shared by the slots (default: the model's, at most\n"
            "4096; auto: the largest that fits the memory budget)"};
static const cli_option opt_threads = {.like = &cli_opt_threads,
                                       .help = "MODEL's CPU threads (default: all cores)"};
static const cli_option opt_gpu_layers = {.like = &cli_opt_gpu_layers,
                                          .help = "MODEL's layers on the GPU backend (default: all)"};
static const cli_option opt_max_tokens = {
    .name = "--max-tokens",
    .arg = "N",
    .kind = CLI_OPT_INT,
    .offset = offsetof(serve_opts, max_tokens),
    .lo = 1,
    .hi = SERVE_MAX_CTX,
    .help = "MODEL's (or the served directory's) output cap: a request's default when it\n"
            "gives none, its ceiling when it asks more (default: none)"};
static const cli_option opt_flash_attn = {
    .like = &cli_opt_flash_attn,
    .help = "MODEL's flash attention: auto (default; off with --backend cpu), on, off"};
static const cli_option opt_cache_type_k = {.like = &cli_opt_cache_type_k,
                                            .help = "MODEL's KV cache type for keys (default f16)"};
static const cli_option opt_cache_type_v = {
    .like = &cli_opt_cache_type_v,
    .help = "MODEL's KV cache type for values (default f16; a quantized one needs flash\n"
            "attention)"};
static const cli_option opt_spec = {.like = &cli_opt_spec,
                                    .help = "MODEL's speculative decoding (greedy and sampled requests)"};
static const cli_option opt_draft = {
    .like = &cli_opt_draft,
    .help = "MODEL's draft model (speculative \"draft\"; a path or a store name; auto:\n"
            "the draft published beside MODEL, for development)"};
static const cli_option opt_pooling = {
    .name = "--pooling",
    .arg = "TYPE",
    .kind = CLI_OPT_STRING,
    .offset = offsetof(serve_opts, pooling),
    .help = "MODEL's embedding pooling: none, mean, cls, last, rank (default: the\n"
            "model's own; rank serves /v1/rerank)"};
static const cli_option opt_rerank = {.name = "--rerank",
                                      .kind = CLI_OPT_FLAG,
                                      .offset = offsetof(serve_opts, rerank),
                                      .help =
                                          "MODEL is a reranker: --pooling rank (llama-server's --rerank)"};
static const cli_option opt_slot_save_path = {
    .name = "--slot-save-path",
    .arg = "DIR",
    .kind = CLI_OPT_STRING,
    .offset = offsetof(serve_opts, slot_save_path),
    .help = "where POST /slots/ID?action=save|restore keeps its files ([server] slot_save_dir)"};
static const cli_option opt_allow_unauthenticated = {.name = "--allow-unauthenticated",
                                                     .kind = CLI_OPT_FLAG,
                                                     .offset = offsetof(serve_opts, allow_unauthenticated),
                                                     .help =
                                                         "allow a non-loopback --host without [[tokens]]"};
static const cli_option opt_no_auth = {
    .name = "--no-auth",
    .kind = CLI_OPT_FLAG,
    .offset = offsetof(serve_opts, no_auth),
    .help = "serve without tokens on any --host, with a warning (the operator's choice: in a\n"
            "container behind a network policy; refused with [[tokens]])"};
static const cli_option opt_voice = {
    .name = "--voice",
    .kind = CLI_OPT_FLAG,
    .offset = offsetof(serve_opts, voice),
    .help = "add a text-to-speech target named 'voice' (flite: no model file) for /v1/audio/speech;\n"
            "--voice=NAME speaks with flite's voice NAME (slt, kal, kal16, rms, awb; default slt)"};
/* --voice=NAME (listed after the flag, which takes a bare --voice): no help line of its own */
static const cli_option opt_voice_name = {
    .name = "--voice", .arg = "NAME", .kind = CLI_OPT_STRING, .offset = offsetof(serve_opts, voice_name)};
static const cli_option opt_supervised = {.name = "--supervised-target",
                                          .arg = "NAME",
                                          .kind = CLI_OPT_CUSTOM,
                                          .parse = parse_supervised}; /* internal: no help line */

static const cli_option *const options[] = {&opt_config,
                                            &opt_check,
                                            &opt_config_keys,
                                            &opt_models_dir,
                                            &opt_follow_symlinks,
                                            &opt_memory_budget,
                                            &opt_max_loaded,
                                            &opt_keep_alive,
                                            &opt_host,
                                            &opt_port,
                                            &opt_backend,
                                            &opt_parallel,
                                            &opt_ctx_size,
                                            &opt_threads,
                                            &opt_gpu_layers,
                                            &opt_max_tokens,
                                            &opt_flash_attn,
                                            &opt_cache_type_k,
                                            &cli_opt_lora,
                                            &opt_cache_type_v,
                                            &opt_spec,
                                            &opt_draft,
                                            &opt_pooling,
                                            &opt_rerank,
                                            &opt_slot_save_path,
                                            &opt_allow_unauthenticated,
                                            &opt_no_auth,
                                            &opt_voice,
                                            &opt_voice_name,
                                            &cli_opt_artifact,
                                            &opt_supervised,
                                            NULL};

static const char about[] =
    "Runs the gateway: OpenAI-compatible routes (/v1/models, /v1/chat/completions, /v1/completions,\n"
    "/v1/embeddings), sipp-native routes (/v1/query, /v1/chat, /v1/embed) and /health, /ready,\n"
    "/metrics, /v1/backends. MODEL becomes one local target named after its file (without .gguf).\n"
    "Without MODEL or --config, every model in the store ($SIPP_MODELS_DIR) is served under its\n"
    "store name, loaded on its first request and unloaded when memory is needed.\n"
    "\n"
    "SIGTERM or Ctrl-C stops accepting, lets requests finish (shutdown_timeout_seconds), exits 0.\n"
    "SIGHUP reads --config FILE again: targets added, removed or changed load, drain and unload;\n"
    "the others serve on; a file with problems changes nothing (see docs/gateway.md).\n"
    "exit status: 0 clean stop or valid config, 1 runtime failure or invalid config, 2 bad usage,\n"
    "75 a model file was cut short under a running request\n";

static const cli_command command = {.name = "serve",
                                    .synopsis = "serve [MODEL | --models-dir DIR] [options]\n"
                                                "       sipp serve --config FILE [--host ADDR] [--port N]\n"
                                                "       sipp serve --check --config FILE",
                                    .about = about,
                                    .options = options,
                                    .max_args = 1,
                                    .args_hint = "give one MODEL, or several targets with --config FILE"};

/* Whether one of MODEL's options was given (they have no place beside --config). */
static bool model_options_given(const serve_opts *o) {
    const cli_common *c = &o->c;
    return c->backend || c->flash_attn || c->speculative || c->draft || o->parallel || o->ctx_set ||
           c->threads || c->gpu_layers != GPU_LAYERS_UNSET || o->max_tokens || c->cache_type_k ||
           c->cache_type_v || c->n_lora || o->pooling || o->rerank;
}

/* Returns CLI_PARSED, EXIT_OK after --help, or EXIT_USAGE after printing what is wrong. */
static int parse(int argc, char **argv, serve_opts *o) {
    memset(o, 0, sizeof *o);
    o->port = -1;
    o->c.gpu_layers = GPU_LAYERS_UNSET;
    int n_args;
    int rc = cli_parse(&command, argc, argv, o, &o->model, &n_args);
    if (rc != CLI_PARSED) return rc;
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
    if (o->config && model_options_given(o)) {
        cli_error(
            "serve: --backend, --flash-attn, --spec, --draft, --parallel, --ctx-size, --threads, "
            "--gpu-layers, --max-tokens, --cache-type-k, --cache-type-v, --lora, --pooling and --rerank "
            "apply to MODEL; with --config set them per target in the file (max_tokens = N, lora = "
            "[{path, scale}], pooling = \"rank\")");
        return EXIT_USAGE;
    }
    static const char *const poolings[] = {"none", "mean", "cls", "last", "rank"};
    bool known = !o->pooling;
    for (size_t i = 0; i < sizeof poolings / sizeof *poolings && !known; i++)
        known = strcmp(o->pooling, poolings[i]) == 0;
    if (!known) {
        cli_error("serve: --pooling '%s' is not one of none, mean, cls, last, rank", o->pooling);
        return EXIT_USAGE;
    }
    if (o->rerank && o->pooling && strcmp(o->pooling, "rank") != 0) {
        cli_error("serve: --rerank is --pooling rank; --pooling %s contradicts it", o->pooling);
        return EXIT_USAGE;
    }
    return cli_cache_types_fit(o->c.backend, o->c.flash_attn, o->c.cache_type_k, o->c.cache_type_v)
               ? CLI_PARSED
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

/* Sets a configuration string to value, when one is given. */
static void set_string(char **field, const char *value) {
    if (!value) return;
    free(*field);
    *field = strdup(value);
}

/* MODEL's options onto its target; false after printing why its --draft cannot be used. */
static bool apply_model_options(const serve_opts *o, gw_target_config *t) {
    const cli_common *c = &o->c;
    char draft_buf[PATH_MAX];
    const char *draft = NULL;
    if (!cli_draft_model(o->model, c->draft, &draft, draft_buf, sizeof draft_buf)) return false;
    set_string(&t->backend, c->backend);
    set_string(&t->flash_attn, c->flash_attn);
    set_string(&t->speculative, c->speculative);
    set_string(&t->cache_type_k, c->cache_type_k);
    set_string(&t->cache_type_v, c->cache_type_v);
    set_string(&t->draft_model, draft);
    set_string(&t->pooling, o->rerank ? "rank" : o->pooling);
    if (o->parallel) t->parallel = o->parallel;
    if (o->ctx_set) t->ctx_size = c->ctx_size;
    t->ctx_auto = o->ctx_auto;
    if (c->threads) t->threads = c->threads;
    if (c->gpu_layers != GPU_LAYERS_UNSET) t->gpu_layers = c->gpu_layers;
    if (o->max_tokens) t->max_tokens = o->max_tokens;
    if (c->n_lora && !(t->lora = calloc((size_t)c->n_lora, sizeof *t->lora))) return false;
    for (int i = 0; i < c->n_lora; i++) {
        t->lora[i] = (gw_lora){realpath(c->lora[i].path, NULL), c->lora[i].scale};
        t->n_lora += t->lora[i].path != NULL;
    }
    return true;
}

/* --no-auth: no token on any address, said once on stderr; a config with [[tokens]] contradicts it. */
static bool apply_no_auth(const serve_opts *o, const gw_config *cfg) {
    if (!o->no_auth) return true;
    if (cfg->n_tokens > 0) {
        cli_error("--no-auth contradicts the %zu [[tokens]] of %s: drop the flag, or the tokens",
                  cfg->n_tokens, o->config ? o->config : "the configuration");
        return false;
    }
    fprintf(stderr,
            "sipp: warning: --no-auth: %s:%d checks no token; whoever reaches the port may use, load and "
            "unload every model. Keep it behind a network policy or an authenticating proxy, or add "
            "[[tokens]].\n",
            cfg->host, cfg->port);
    return true;
}

/* The configuration from the file or MODEL, then the command line's overrides, validated (and with
 * check, the model headers read as --check does); false with the problems in errs (or, when MODEL's
 * --draft cannot be used, printed already and *printed set). At start, and again at each SIGHUP. */
static bool build_config(const serve_opts *o, bool check, gw_config *cfg, sipp_buf *errs, bool *printed) {
    *printed = false;
    bool ok = o->config  ? gw_config_load(o->config, cfg, errs)
              : o->model ? gw_config_add_local(cfg, o->model, errs)
                         : true;
    if (o->keep_alive) gw_parse_keep_alive(o->keep_alive, &cfg->discovered_keep_alive_s);
    if (o->max_tokens) cfg->discovered_max_tokens = o->max_tokens;
    if (o->follow_symlinks) cfg->models_follow_symlinks = true;
    if (ok && (o->voice || o->voice_name)) ok = gw_config_add_voice(cfg, o->voice_name, errs);
    /* the store when nothing else is named; a models directory besides a config's targets */
    if (ok && !o->model && (o->models_dir || !o->config)) ok = gw_config_add_dir(cfg, o->models_dir, errs);
    if (o->memory_budget_mb) cfg->memory_budget_mb = o->memory_budget_mb;
    if (o->max_loaded_models) cfg->max_loaded_models = o->max_loaded_models;
    if (ok && o->model && !apply_model_options(o, &cfg->targets[0])) {
        *printed = true;
        return false;
    }
    set_string(&cfg->host, o->host);
    set_string(&cfg->slot_save_dir, o->slot_save_path);
    if (o->port >= 0) cfg->port = o->port;
    if (o->allow_unauthenticated || o->no_auth) cfg->allow_unauthenticated = true;
    if (ok && o->n_supervised) ok = gw_config_supervised(cfg, o->supervised, o->n_supervised, errs);
    /* Every problem, not only the first group: a file that parsed as TOML (cfg.path is set then)
     * is also validated against the machine (model files, token variables) when its keys had
     * errors, and --check reads the model headers too, so one run lists all there is to fix. */
    bool parsed = ok || cfg->path;
    if (parsed) ok = gw_config_validate(cfg, errs) && ok;
    if (parsed && check) ok = gw_config_check_deep(cfg, o->config, o->check, errs) && ok;
    return ok;
}

/* SIGHUP's builder (gw_reloader): the file as --check would take it. */
static bool rebuild_config(void *arg, gw_config *out, sipp_buf *errs) {
    bool printed;
    return build_config(arg, true, out, errs, &printed);
}

/* --config-keys: the reference docs/gateway.md holds (tests/lint/test_config_keys.py compares them). */
static int print_config_keys(void) {
    sipp_buf doc = {0};
    bool ok = gw_config_reference(&doc);
    if (ok) fputs(doc.data, stdout);
    sipp_buf_free(&doc);
    return ok ? EXIT_OK : EXIT_RUNTIME;
}

int cmd_serve(int argc, char **argv) {
    serve_opts o;
    int rc = parse(argc, argv, &o);
    if (rc != CLI_PARSED) return rc;
    if (o.config_keys) return print_config_keys();

    gw_config cfg;
    gw_config_init(&cfg);
    sipp_buf errs = {0};
    bool printed;
    bool ok = build_config(&o, o.check, &cfg, &errs, &printed);
    if (printed) {
        gw_config_free(&cfg);
        sipp_buf_free(&errs);
        return EXIT_RUNTIME;
    }
    if (ok && !apply_no_auth(&o, &cfg)) {
        sipp_buf_free(&errs);
        gw_config_free(&cfg);
        return EXIT_USAGE;
    }
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
    if (!cli_runtime_init(o.c.artifact)) {
        gw_config_free(&cfg);
        return EXIT_RUNTIME;
    }
    /* a supervised child serves what its parent gave it: the parent reloads, not the child */
    gw_reloader reload = {.build = rebuild_config, .arg = &o};
    rc = gw_serve(&cfg, o.config && !o.n_supervised ? &reload : NULL);
    gw_config_free(&cfg);
    return rc;
}
