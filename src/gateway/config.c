/*
 * config.c: the gateway's TOML configuration.
 *
 *   [server]                 listen, max_request_bytes, max_concurrent_requests, max_queue,
 *                            request_timeout_seconds, shutdown_timeout_seconds, read_timeout_seconds,
 *                            max_connections, max_connections_per_client, max_buffered_bytes,
 *                            allowed_origins, allowed_hosts, allow_unauthenticated, memory_budget_mb,
 *                            max_loaded_models, slot_state_dir, slot_state_max_mb
 *   [security.rate_limit]    requests_per_minute, burst (per client)
 *   [responses]              max_stored, max_stored_bytes, ttl_seconds (the Responses API's store)
 *   [store]                  allow_private_sources (what /api/pull may download from)
 *   [media]                  fetch, fetch_max_bytes, fetch_timeout_ms, fetch_allow_private (images
 *                            chats name by http(s) URL)
 *   [web]                    serve_model_files, runtime_dir (the page's "run in this browser" mode)
 *   [limits]                 schema_max_bytes, schema_max_depth, schema_max_properties,
 *                            schema_max_total_properties, schema_max_enum, schema_max_refs,
 *                            grammar_max_bytes, grammar_max_alternatives, schema_convert_ms,
 *                            image_max_bytes, image_max_pixels, media_max_items
 *                            (sipp_schema_limits in sipp.h)
 *   [[tokens]]               env, caller, targets, admin
 *   [[targets]]              name, type = "local" | "openai_compatible"; local: recipe, model, backend,
 *                            flash_attn, speculative, draft_model, draft_max, draft_min, draft_p_min,
 *                            draft_cutoff, cache_type_k, cache_type_v, mmproj, mmproj_offload,
 *                            ctx_size, parallel, threads, gpu_layers, policy, rpc, tensor_split, load,
 *                            keep_alive, pin, repack, max_tokens;
 *                            openai_compatible:
 *                            base_url or base_urls, model, api_key_env, timeout_seconds;
 *                            both: aliases (globs of other model names routed to the target)
 *
 * The file is read with sipp's own TOML parser (util/toml.h), whose nodes carry their line, so each
 * problem is reported as "FILE:LINE: problem". Parsing does not stop at the first problem: every
 * unknown key, wrong type and duplicate name is listed, so that one `sipp serve --check` run shows
 * all of them. What depends on the machine (model files, environment variables, the listen address)
 * is checked separately by gw_config_validate, so that the parser stays pure and fuzzable.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gateway/config.h"
#include "gateway/errors.h"
#include "gateway/models_dir.h"
#include "util/toml.h"

#define GW_MAX_TIMEOUT_S (7 * 24 * 3600)
#define GW_MAX_COUNT 1000000
#define GW_MAX_THREADS 1024
#define GW_MAX_GPU_LAYERS 100000
#define GW_MAX_PARALLEL 256
#define GW_MAX_REQUEST_BYTES_LIMIT ((int64_t)1 << 32)
#define GW_MAX_RATE 1000000
#define GW_MAX_CONNECTIONS 1000000
#define GW_CONFIG_MAX_FILE_BYTES ((size_t)16 << 20)
#define GW_MODEL_SUFFIX ".gguf"
#define GW_MAX_BUDGET_MB ((int64_t)1 << 40)
#define GW_MAX_LIMIT ((int64_t)1 << 32)  /* [limits]: a value past it is a typo */
#define WHISPER_RECIPE "whispercpp"      /* the recipe of whisper.cpp models (kinds/whisper.c) */
#define GW_MAX_AUDIO_SECONDS (24 * 3600) /* [limits] max_audio_seconds: a day of audio */
#define GW_MAX_MEDIA_MB (1 << 20)        /* [limits] media_*_mb: a terabyte is a typo */
#define GW_MEDIA_DECODED_BUDGET_DEFAULT ((size_t)1 << 30) /* all requests' decoded media at once: 1 GB */
#define MMPROJ_AUTO "auto"
#define GW_MS_PER_S_INT 1000
#define GW_MAX_KEEP_ALIVE_S GW_MAX_TIMEOUT_S

typedef struct cfg_ctx {
    const char *file; /* for messages */
    const char *path; /* the config file, NULL when there is none */
    sipp_buf *errs;
    bool ok;
} cfg_ctx;

static void cfg_err(cfg_ctx *x, int line, const char *fmt, ...) SIPP_PRINTF(3, 4);
static void cfg_err(cfg_ctx *x, int line, const char *fmt, ...) {
    char msg[SIPP_ERROR_SIZE];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* A message may quote a value from the file: escaped, a newline in it cannot start a line. */
    sipp_buf clean = {0};
    gw_echo_escape(msg, &clean);
    if (line > 0)
        sipp_buf_appendf(x->errs, "%s:%d: %s\n", x->file, line, clean.data ? clean.data : "");
    else
        sipp_buf_appendf(x->errs, "%s: %s\n", x->file, clean.data ? clean.data : "");
    sipp_buf_free(&clean);
    x->ok = false;
}

void gw_config_init(gw_config *c) {
    memset(c, 0, sizeof *c);
    c->host = strdup(GW_DEFAULT_HOST);
    c->port = GW_DEFAULT_PORT;
    c->max_request_bytes = GW_DEFAULT_MAX_REQUEST_BYTES;
    c->max_concurrent_requests = GW_DEFAULT_MAX_CONCURRENT;
    c->max_queue = GW_DEFAULT_MAX_QUEUE;
    c->request_timeout_seconds = GW_DEFAULT_REQUEST_TIMEOUT_S;
    c->discovered_keep_alive_s = GW_KEEP_ALIVE_FOREVER;
    c->slot_state_max_mb = GW_DEFAULT_SLOT_STATE_MB;
    c->shutdown_timeout_seconds = GW_DEFAULT_SHUTDOWN_TIMEOUT_S;
    c->read_timeout_seconds = GW_DEFAULT_READ_TIMEOUT_S;
    c->max_connections = GW_DEFAULT_MAX_CONNECTIONS;
    c->max_connections_per_client = GW_DEFAULT_MAX_CONNECTIONS_PER_CLIENT;
    c->max_buffered_bytes = GW_DEFAULT_MAX_BUFFERED_BYTES;
    c->responses_max_stored = GW_DEFAULT_RESPONSES_MAX;
    c->responses_max_bytes = GW_DEFAULT_RESPONSES_BYTES;
    c->responses_ttl_seconds = GW_DEFAULT_RESPONSES_TTL_S;
    c->media_fetch_timeout_ms = GW_DEFAULT_FETCH_TIMEOUT_MS;
    c->limits = sipp_schema_limits_default();
    c->media_decoded_budget = GW_MEDIA_DECODED_BUDGET_DEFAULT;
    c->max_speech_chars = GW_DEFAULT_MAX_SPEECH_CHARS;
}

static void free_strv(char **v, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

void gw_config_free(gw_config *c) {
    if (!c) return;
    free(c->path);
    free(c->host);
    free_strv(c->allowed_origins, c->n_allowed_origins);
    free_strv(c->allowed_hosts, c->n_allowed_hosts);
    free_strv(c->mcp_allowed_hosts, c->n_mcp_allowed_hosts);
    for (size_t i = 0; i < c->n_mcp; i++) {
        gw_mcp_config *m = &c->mcp[i];
        free(m->name);
        free(m->url);
        free_strv(m->command, m->n_command);
        free_strv(m->allowed_tools, m->n_allowed_tools);
        free_strv(m->env, m->n_env);
    }
    free(c->mcp);
    for (size_t i = 0; i < c->n_tokens; i++) {
        gw_token_config *t = &c->tokens[i];
        free(t->env);
        free(t->caller);
        free(t->secret);
        free_strv(t->targets, t->n_targets);
    }
    free(c->tokens);
    for (size_t i = 0; i < c->n_targets; i++)
        gw_target_config_free(&c->targets[i]);
    free(c->targets);
    free(c->models_dir);
    free(c->web_runtime_dir);
    free(c->slot_state_dir);
    memset(c, 0, sizeof *c);
}

void gw_target_config_free(gw_target_config *t) {
    free(t->name);
    free(t->model_path);
    free(t->backend);
    free(t->flash_attn);
    free(t->speculative);
    free(t->draft_model);
    free(t->mmproj);
    free(t->recipe);
    free(t->speaker);
    free(t->voice);
    free(t->draft_cutoff);
    free(t->cache_type_k);
    free(t->cache_type_v);
    free(t->chat_template);
    free(t->rpc_servers);
    free(t->tensor_split);
    free(t->remote_model);
    free(t->api_key_env);
    free_strv(t->base_urls, t->n_base_urls);
    free_strv(t->aliases, t->n_aliases);
}

/* ---- typed lookups ------------------------------------------------------------------------------ */

static int node_line(const toml_node *tbl, const toml_node *n) {
    return n ? toml_node_line(n) : toml_node_line(tbl);
}

/* Every key of tbl must be in known (NULL-terminated). */
static void check_keys(cfg_ctx *x, const toml_node *tbl, const char *where, const char *const *known) {
    for (size_t i = 0; i < toml_table_len(tbl); i++) {
        const toml_entry *e = toml_table_at(tbl, i);
        bool found = false;
        for (const char *const *k = known; *k && !found; k++)
            found = strlen(*k) == e->key_len && !memcmp(*k, e->key, e->key_len);
        if (found) continue;
        sipp_buf list = {0};
        for (const char *const *k = known; *k; k++)
            sipp_buf_appendf(&list, "%s%s", k == known ? "" : ", ", *k);
        cfg_err(x, e->line, "unknown key '%s' in %s (known keys: %s)", e->key, where,
                list.data ? list.data : "none");
        sipp_buf_free(&list);
    }
}

static bool expect_kind(cfg_ctx *x, const toml_node *n, toml_kind kind, const char *where, const char *key,
                        const char *what) {
    if (toml_node_kind(n) == kind) return true;
    cfg_err(x, toml_node_line(n), "%s %s: expected %s, found %s", where, key, what,
            toml_kind_name(toml_node_kind(n)));
    return false;
}

/* Reads an optional integer key within [lo, hi]; leaves *out alone when the key is absent. */
static void get_int(cfg_ctx *x, const toml_node *tbl, const char *where, const char *key, int64_t lo,
                    int64_t hi, int64_t *out) {
    const toml_node *n = toml_table_get(tbl, key);
    if (!n || !expect_kind(x, n, TOML_INTEGER, where, key, "an integer")) return;
    int64_t v = 0;
    toml_get_int(n, &v, NULL, 0);
    if (v < lo || v > hi) {
        cfg_err(x, toml_node_line(n), "%s %s: %lld is out of range [%lld, %lld]", where, key, (long long)v,
                (long long)lo, (long long)hi);
        return;
    }
    *out = v;
}

static void get_int32(cfg_ctx *x, const toml_node *tbl, const char *where, const char *key, int lo, int hi,
                      int *out) {
    int64_t v = *out;
    get_int(x, tbl, where, key, lo, hi, &v);
    *out = (int)v;
}

/* Reads an optional number key (a float or an integer) within [lo, hi); leaves *out alone when absent. */
static void get_fraction(cfg_ctx *x, const toml_node *tbl, const char *where, const char *key, double lo,
                         double hi, float *out) {
    const toml_node *n = toml_table_get(tbl, key);
    if (!n) return;
    double v = NAN;
    int64_t iv = 0;
    if (toml_node_kind(n) == TOML_FLOAT)
        toml_get_float(n, &v, NULL, 0);
    else if (toml_node_kind(n) == TOML_INTEGER && toml_get_int(n, &iv, NULL, 0))
        v = (double)iv;
    else if (!expect_kind(x, n, TOML_FLOAT, where, key, "a number"))
        return;
    if (!(v >= lo && v < hi)) {
        cfg_err(x, toml_node_line(n), "%s %s: %g is out of range [%g, %g)", where, key, v, lo, hi);
        return;
    }
    *out = (float)v;
}

static void get_bool(cfg_ctx *x, const toml_node *tbl, const char *where, const char *key, bool *out) {
    const toml_node *n = toml_table_get(tbl, key);
    if (n && expect_kind(x, n, TOML_BOOL, where, key, "true or false")) toml_get_bool(n, out, NULL, 0);
}

/* A non-empty string; *out is replaced by a copy. Returns the node when present. */
static const toml_node *get_str(cfg_ctx *x, const toml_node *tbl, const char *where, const char *key,
                                char **out) {
    const toml_node *n = toml_table_get(tbl, key);
    if (!n || !expect_kind(x, n, TOML_STRING, where, key, "a string")) return n;
    const char *s = NULL;
    size_t len = 0;
    toml_get_string(n, &s, &len, NULL, 0);
    if (len == 0 || strlen(s) != len) {
        cfg_err(x, toml_node_line(n), "%s %s: must be a non-empty string without NUL characters", where, key);
        return n;
    }
    free(*out);
    *out = strdup(s);
    return n;
}

/* An array of non-empty strings. */
static const toml_node *get_strv(cfg_ctx *x, const toml_node *tbl, const char *where, const char *key,
                                 char ***out, size_t *n_out) {
    const toml_node *n = toml_table_get(tbl, key);
    if (!n || !expect_kind(x, n, TOML_ARRAY, where, key, "an array of strings")) return n;
    size_t count = toml_array_len(n);
    char **v = calloc(count ? count : 1, sizeof *v);
    size_t k = 0;
    for (size_t i = 0; v && i < count; i++) {
        const toml_node *e = toml_array_at(n, i);
        const char *s = NULL;
        size_t len = 0;
        if (toml_node_kind(e) != TOML_STRING || !toml_get_string(e, &s, &len, NULL, 0) || len == 0 ||
            strlen(s) != len) {
            cfg_err(x, node_line(n, e), "%s %s: element %zu must be a non-empty string", where, key, i);
            continue;
        }
        v[k++] = strdup(s);
    }
    free_strv(*out, *n_out);
    *out = v;
    *n_out = k;
    return n;
}

/* ---- sections ----------------------------------------------------------------------------------- */

/* "HOST:PORT", "[V6]:PORT". */
static bool parse_listen(const char *s, char **host, int *port) {
    const char *colon;
    const char *h = s;
    size_t hlen;
    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (!close || close[1] != ':') return false;
        h = s + 1;
        hlen = (size_t)(close - h);
        colon = close + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon) return false;
        hlen = (size_t)(colon - s);
    }
    if (hlen == 0) return false;
    char *end;
    errno = 0;
    long p = strtol(colon + 1, &end, 10);
    if (errno || end == colon + 1 || *end || p < 0 || p > GW_MAX_PORT) return false;
    free(*host);
    *host = strndup(h, hlen);
    *port = (int)p;
    return true;
}

static void parse_server(cfg_ctx *x, const toml_node *srv, gw_config *c) {
    static const char *const known[] = {"listen",
                                        "max_request_bytes",
                                        "max_concurrent_requests",
                                        "max_queue",
                                        "request_timeout_seconds",
                                        "shutdown_timeout_seconds",
                                        "read_timeout_seconds",
                                        "max_connections",
                                        "max_connections_per_client",
                                        "max_buffered_bytes",
                                        "allowed_origins",
                                        "allowed_hosts",
                                        "allow_unauthenticated",
                                        "memory_budget_mb",
                                        "max_loaded_models",
                                        "slot_state_dir",
                                        "slot_state_max_mb",
                                        "models_follow_symlinks",
                                        "mcp_allowed_hosts",
                                        NULL};
    const char *where = "[server]";
    check_keys(x, srv, where, known);
    char *listen = NULL;
    const toml_node *ln = get_str(x, srv, where, "listen", &listen);
    if (listen && !parse_listen(listen, &c->host, &c->port))
        cfg_err(x, toml_node_line(ln),
                "[server] listen: '%s' is not HOST:PORT (e.g. \"127.0.0.1:8080\" or \"[::1]:8080\")", listen);
    free(listen);
    int64_t mrb = (int64_t)c->max_request_bytes;
    get_int(x, srv, where, "max_request_bytes", 1, GW_MAX_REQUEST_BYTES_LIMIT, &mrb);
    c->max_request_bytes = (size_t)mrb;
    get_int32(x, srv, where, "max_concurrent_requests", 1, GW_MAX_COUNT, &c->max_concurrent_requests);
    get_int32(x, srv, where, "max_queue", 0, GW_MAX_COUNT, &c->max_queue);
    get_int32(x, srv, where, "request_timeout_seconds", 1, GW_MAX_TIMEOUT_S, &c->request_timeout_seconds);
    get_int32(x, srv, where, "shutdown_timeout_seconds", 0, GW_MAX_TIMEOUT_S, &c->shutdown_timeout_seconds);
    get_int32(x, srv, where, "read_timeout_seconds", 1, GW_MAX_TIMEOUT_S, &c->read_timeout_seconds);
    get_int32(x, srv, where, "max_connections", 1, GW_MAX_CONNECTIONS, &c->max_connections);
    get_int32(x, srv, where, "max_connections_per_client", 1, GW_MAX_CONNECTIONS,
              &c->max_connections_per_client);
    int64_t mbb = (int64_t)c->max_buffered_bytes;
    get_int(x, srv, where, "max_buffered_bytes", 1, GW_MAX_REQUEST_BYTES_LIMIT, &mbb);
    const toml_node *bn = toml_table_get(srv, "max_buffered_bytes");
    c->max_buffered_bytes = (size_t)mbb;
    if (!bn && c->max_buffered_bytes < c->max_request_bytes) c->max_buffered_bytes = c->max_request_bytes;
    if (c->max_buffered_bytes < c->max_request_bytes)
        cfg_err(x, toml_node_line(bn ? bn : srv),
                "[server] max_buffered_bytes (%zu) is below max_request_bytes (%zu): no body of the largest "
                "size could "
                "ever be read; raise it",
                c->max_buffered_bytes, c->max_request_bytes);
    get_strv(x, srv, where, "allowed_origins", &c->allowed_origins, &c->n_allowed_origins);
    get_strv(x, srv, where, "allowed_hosts", &c->allowed_hosts, &c->n_allowed_hosts);
    get_bool(x, srv, where, "allow_unauthenticated", &c->allow_unauthenticated);
    get_int(x, srv, where, "memory_budget_mb", 1, GW_MAX_BUDGET_MB, &c->memory_budget_mb);
    get_int32(x, srv, where, "max_loaded_models", 1, GW_MAX_COUNT, &c->max_loaded_models);
    get_str(x, srv, where, "slot_state_dir", &c->slot_state_dir);
    get_int(x, srv, where, "slot_state_max_mb", 0, GW_MAX_BUDGET_MB, &c->slot_state_max_mb);
    get_bool(x, srv, where, "models_follow_symlinks", &c->models_follow_symlinks);
    get_strv(x, srv, where, "mcp_allowed_hosts", &c->mcp_allowed_hosts, &c->n_mcp_allowed_hosts);
}

static void parse_security(cfg_ctx *x, const toml_node *sec, gw_config *c) {
    static const char *const known[] = {"rate_limit", NULL};
    static const char *const rl_known[] = {"requests_per_minute", "burst", NULL};
    check_keys(x, sec, "[security]", known);
    const toml_node *rl = toml_table_get(sec, "rate_limit");
    if (!rl || !expect_kind(x, rl, TOML_TABLE, "[security]", "rate_limit", "a table")) return;
    const char *where = "[security.rate_limit]";
    check_keys(x, rl, where, rl_known);
    get_int32(x, rl, where, "requests_per_minute", 0, GW_MAX_RATE, &c->rate_requests_per_minute);
    get_int32(x, rl, where, "burst", 1, GW_MAX_RATE, &c->rate_burst);
}

static void parse_responses(cfg_ctx *x, const toml_node *r, gw_config *c) {
    static const char *const known[] = {"max_stored", "max_stored_bytes", "ttl_seconds", NULL};
    const char *where = "[responses]";
    check_keys(x, r, where, known);
    get_int32(x, r, where, "max_stored", 0, GW_MAX_COUNT, &c->responses_max_stored);
    int64_t bytes = (int64_t)c->responses_max_bytes;
    get_int(x, r, where, "max_stored_bytes", 0, GW_MAX_REQUEST_BYTES_LIMIT, &bytes);
    c->responses_max_bytes = (size_t)bytes;
    get_int32(x, r, where, "ttl_seconds", 1, GW_MAX_TIMEOUT_S, &c->responses_ttl_seconds);
}

static void parse_tokens(cfg_ctx *x, const toml_node *arr, gw_config *c) {
    static const char *const known[] = {"env", "caller", "targets", "admin", NULL};
    size_t n = toml_array_len(arr);
    c->tokens = calloc(n ? n : 1, sizeof *c->tokens);
    if (!c->tokens) return;
    for (size_t i = 0; i < n; i++) {
        const toml_node *t = toml_array_at(arr, i);
        char where[64];
        snprintf(where, sizeof where, "[[tokens]] #%zu", i + 1);
        if (!expect_kind(x, t, TOML_TABLE, where, "", "a table")) continue;
        gw_token_config *tc = &c->tokens[c->n_tokens++];
        tc->line = toml_node_line(t);
        check_keys(x, t, where, known);
        get_str(x, t, where, "env", &tc->env);
        get_str(x, t, where, "caller", &tc->caller);
        get_strv(x, t, where, "targets", &tc->targets, &tc->n_targets);
        get_bool(x, t, where, "admin", &tc->admin);
        if (!tc->env)
            cfg_err(x, tc->line, "%s: 'env' is missing: name the environment variable that holds the secret",
                    where);
        if (!tc->caller) tc->caller = strdup(tc->env ? tc->env : "token");
    }
}

static bool parse_policy(const char *s, sipp_policy *p) {
    static const struct {
        const char *name;
        sipp_policy policy;
    } names[] = {{"balanced", SIPP_POLICY_BALANCED},
                 {"latency_first", SIPP_POLICY_LATENCY_FIRST},
                 {"throughput_first", SIPP_POLICY_THROUGHPUT_FIRST}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(s, names[i].name) == 0) {
            *p = names[i].policy;
            return true;
        }
    return false;
}

/* A relative model path is relative to the config file's directory. */
static char *resolve_path(const char *config_path, const char *p) {
    if (p[0] == '/' || !config_path) return strdup(p);
    char *copy = strdup(config_path);
    if (!copy) return NULL;
    const char *dir = dirname(copy);
    size_t n = strlen(dir) + strlen(p) + 2;
    char *out = malloc(n);
    if (out) snprintf(out, n, "%s/%s", dir, p);
    free(copy);
    return out;
}

/* A target's model: a path (relative to the config file) or, when no such file exists and the value
 * has no '/', a model in the local store by name. */
static char *resolve_model(cfg_ctx *x, gw_target_config *tc, const char *where, const char *model) {
    char *path = resolve_path(x->path, model);
    struct stat st;
    if (!path || strchr(model, '/') || stat(path, &st) == 0) return path;
    char found[PATH_MAX], err[SIPP_ERROR_SIZE];
    if (sipp_store_resolve(model, found, sizeof found, err) != SIPP_OK) {
        cfg_err(x, tc->line, "%s: %s", where, err);
        free(path);
        return NULL; /* reported here; validation skips a target without a path */
    }
    free(path);
    return strdup(found);
}

static void init_target(gw_target_config *t) {
    memset(t, 0, sizeof *t);
    t->backend = strdup("auto");
    t->parallel = sipp_engine_default_params().parallel;
    t->gpu_layers = sipp_model_default_params().gpu_layers;
    t->timeout_seconds = GW_DEFAULT_UPSTREAM_TIMEOUT_S;
    t->load = GW_LOAD_STARTUP;
    t->keep_alive_s = GW_KEEP_ALIVE_FOREVER;
    t->repack = true;
}

bool gw_parse_keep_alive(const char *s, int64_t *out) {
    static const struct {
        char unit;
        int64_t seconds;
    } units[] = {{'s', 1}, {'m', 60}, {'h', 3600}};
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || errno || v < GW_KEEP_ALIVE_FOREVER || v > GW_MAX_KEEP_ALIVE_S) return false;
    if (v < 0 && *end) return false; /* "-1" only, without a unit */
    int64_t mul = 1;
    if (*end) {
        size_t i = 0;
        while (i < sizeof units / sizeof *units && units[i].unit != *end)
            i++;
        if (i == sizeof units / sizeof *units || end[1]) return false;
        mul = units[i].seconds;
    }
    if (v * mul > GW_MAX_KEEP_ALIVE_S) return false;
    *out = v < 0 ? GW_KEEP_ALIVE_FOREVER : v * mul;
    return true;
}

/* keep_alive = SECONDS (-1 forever, 0 unload when idle) or "30s", "5m", "1h". */
static void get_keep_alive(cfg_ctx *x, const toml_node *t, const char *where, int64_t *out) {
    const toml_node *n = toml_table_get(t, "keep_alive");
    if (!n) return;
    if (toml_node_kind(n) == TOML_INTEGER) {
        get_int(x, t, where, "keep_alive", GW_KEEP_ALIVE_FOREVER, GW_MAX_KEEP_ALIVE_S, out);
        return;
    }
    const char *s = NULL;
    size_t len = 0;
    if (toml_node_kind(n) != TOML_STRING || !toml_get_string(n, &s, &len, NULL, 0) || strlen(s) != len ||
        !gw_parse_keep_alive(s, out))
        cfg_err(x, toml_node_line(n),
                "%s keep_alive: expected seconds (-1 = forever, 0 = unload when idle) or a duration like "
                "\"30s\", "
                "\"5m\", \"1h\" up to %d s",
                where, GW_MAX_KEEP_ALIVE_S);
}

static void trim_slash(char *s) {
    size_t n = strlen(s);
    while (n > 0 && s[n - 1] == '/')
        s[--n] = '\0';
}

static void parse_remote(cfg_ctx *x, const toml_node *t, const char *where, gw_target_config *tc) {
    char *single = NULL;
    const toml_node *one = get_str(x, t, where, "base_url", &single);
    const toml_node *many = toml_table_get(t, "base_urls");
    if (one && many) cfg_err(x, toml_node_line(many), "%s: give base_url or base_urls, not both", where);
    if (single) {
        tc->base_urls = calloc(1, sizeof *tc->base_urls);
        if (tc->base_urls)
            tc->base_urls[tc->n_base_urls++] = single;
        else
            free(single);
    } else if (many) {
        get_strv(x, t, where, "base_urls", &tc->base_urls, &tc->n_base_urls);
    }
    if (tc->n_base_urls == 0)
        cfg_err(
            x, tc->line,
            "%s: an openai_compatible target needs base_url (or base_urls), e.g. \"http://10.0.0.2:8080/v1\"",
            where);
    for (size_t i = 0; i < tc->n_base_urls; i++) {
        trim_slash(tc->base_urls[i]);
        if (strncmp(tc->base_urls[i], "http://", 7) != 0 && strncmp(tc->base_urls[i], "https://", 8) != 0)
            cfg_err(x, node_line(t, one ? one : many),
                    "%s: base URL '%s' must start with http:// or https://", where, tc->base_urls[i]);
    }
    get_str(x, t, where, "model", &tc->remote_model);
    get_str(x, t, where, "api_key_env", &tc->api_key_env);
    get_int32(x, t, where, "timeout_seconds", 1, GW_MAX_TIMEOUT_S, &tc->timeout_seconds);
}

/* rpc = ["host:port", ...] and tensor_split = [1, 2, 2] (local first), for backend "rpc". */
static void parse_rpc_keys(cfg_ctx *x, const toml_node *t, const char *where, gw_target_config *tc) {
    char **servers = NULL;
    size_t n = 0;
    const toml_node *rn = get_strv(x, t, where, "rpc", &servers, &n);
    sipp_buf joined = {0};
    for (size_t i = 0; i < n; i++)
        sipp_buf_appendf(&joined, "%s%s", i ? "," : "", servers[i]);
    free_strv(servers, n);
    char err[SIPP_ERROR_SIZE];
    if (rn && (!joined.data || sipp_rpc_check_servers(joined.data, err) != SIPP_OK))
        cfg_err(x, toml_node_line(rn), "%s rpc: %s", where,
                joined.data ? err : "give at least one \"host:port\"");
    tc->rpc_servers = joined.data;
    const toml_node *sn = toml_table_get(t, "tensor_split");
    if (sn && expect_kind(x, sn, TOML_ARRAY, where, "tensor_split", "an array of numbers")) {
        sipp_buf split = {0};
        for (size_t i = 0; i < toml_array_len(sn); i++) {
            const toml_node *e = toml_array_at(sn, i);
            double v = -1;
            int64_t iv = 0;
            if (toml_node_kind(e) == TOML_FLOAT)
                toml_get_float(e, &v, NULL, 0);
            else if (toml_node_kind(e) == TOML_INTEGER && toml_get_int(e, &iv, NULL, 0))
                v = (double)iv;
            if (!(v >= 0) || isinf(v))
                cfg_err(x, node_line(sn, e), "%s tensor_split: element %zu must be a non-negative number",
                        where, i);
            sipp_buf_appendf(&split, "%s%g", i ? "," : "", v);
        }
        tc->tensor_split = split.data;
    }
    bool is_rpc = tc->backend && strcmp(tc->backend, "rpc") == 0;
    if (!is_rpc && (rn || sn))
        cfg_err(x, toml_node_line(rn ? rn : sn),
                "%s %s: only used with backend = \"rpc\" (the backend is '%s')", where,
                rn ? "rpc" : "tensor_split", tc->backend ? tc->backend : "auto");
    if (is_rpc && !rn && !getenv("SIPP_RPC_SERVERS"))
        cfg_err(x, tc->line,
                "%s: backend \"rpc\" needs its servers: rpc = [\"host:port\", ...] (or SIPP_RPC_SERVERS)",
                where);
}

/* ctx_size: tokens, or "auto" (the largest context that fits the memory budget, worked out at start). */
static void get_ctx_size(cfg_ctx *x, const toml_node *t, const char *where, gw_target_config *tc) {
    const toml_node *n = toml_table_get(t, "ctx_size");
    if (!n || toml_node_kind(n) != TOML_STRING) {
        get_int32(x, t, where, "ctx_size", 0, GW_MAX_CTX, &tc->ctx_size);
        return;
    }
    char *s = NULL;
    get_str(x, t, where, "ctx_size", &s);
    tc->ctx_auto = s && strcmp(s, "auto") == 0;
    if (s && !tc->ctx_auto)
        cfg_err(x, toml_node_line(n), "%s ctx_size: '%s' is not a number of tokens or \"auto\"", where, s);
    free(s);
}

/* cache_type_k, cache_type_v: known types, and a quantized V cache only where the target's flash
 * attention (flash_attn and backend, read before) is not off. */
/* The recipes a local target may name (DESIGN.md "Recipes and kinds"; kinds/kind.c maps each to its
 * kind). */
static const char *const recipes[] = {"llamacpp", "whispercpp", "tts", "flite", NULL};

static void parse_recipe(cfg_ctx *x, const toml_node *t, const char *where, gw_target_config *tc) {
    const toml_node *rn = get_str(x, t, where, "recipe", &tc->recipe);
    if (!tc->recipe) return;
    for (int i = 0; recipes[i]; i++)
        if (strcmp(tc->recipe, recipes[i]) == 0) return;
    char known[SIPP_ERROR_SIZE] = "";
    for (int i = 0; recipes[i]; i++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", recipes[i]);
    cfg_err(x, toml_node_line(rn), "%s recipe: '%s' is not one of %s", where, tc->recipe, known);
}

static void parse_kv_keys(cfg_ctx *x, const toml_node *t, const char *where, gw_target_config *tc) {
    const toml_node *kn = get_str(x, t, where, "cache_type_k", &tc->cache_type_k);
    const toml_node *vn = get_str(x, t, where, "cache_type_v", &tc->cache_type_v);
    sipp_model_params mp = sipp_model_default_params();
    mp.backend = tc->backend;
    mp.flash_attn = tc->flash_attn;
    char err[SIPP_ERROR_SIZE];
    if (kn && sipp_kv_cache_check(&mp, tc->cache_type_k, NULL, err) != SIPP_OK)
        cfg_err(x, toml_node_line(kn), "%s: %s", where, err);
    if (vn && sipp_kv_cache_check(&mp, NULL, tc->cache_type_v, err) != SIPP_OK)
        cfg_err(x, toml_node_line(vn), "%s: %s", where, err);
}

static bool is_flite(const gw_target_config *tc) { return tc->recipe && strcmp(tc->recipe, "flite") == 0; }

/* speaker: a reference clip (a path, resolved like model); voice: flite's default voice, checked
 * against the voices flite has. */
static void parse_speech_keys(cfg_ctx *x, const toml_node *t, const char *where, gw_target_config *tc) {
    char *speaker = NULL;
    const toml_node *sn = get_str(x, t, where, "speaker", &speaker);
    if (speaker) tc->speaker = resolve_path(x->path, speaker);
    free(speaker);
    if (sn && tc->recipe && strcmp(tc->recipe, "tts") != 0) /* absent: told from the projector later */
        cfg_err(x, toml_node_line(sn), "%s speaker: only a recipe = \"tts\" pair speaks in a reference voice",
                where);
    const toml_node *vn = get_str(x, t, where, "voice", &tc->voice);
    if (vn && !is_flite(tc))
        cfg_err(x, toml_node_line(vn), "%s voice: only recipe = \"flite\" has voices to choose from", where);
    sipp_tts_params p = sipp_tts_default_params();
    p.model = "flite";
    p.voice = tc->voice;
    sipp_tts *flite = NULL;
    char err[SIPP_ERROR_SIZE];
    if (tc->voice && sipp_tts_new(&p, &flite, err) != SIPP_OK)
        cfg_err(x, toml_node_line(vn), "%s voice: %s", where, err);
    sipp_tts_free(flite);
}

/* model: a path or a store name; none for flite, whose voices are built into the library. */
static void parse_model(cfg_ctx *x, const toml_node *t, const char *where, gw_target_config *tc) {
    char *model = NULL;
    const toml_node *mn = get_str(x, t, where, "model", &model);
    if (!model && !is_flite(tc))
        cfg_err(x, tc->line, "%s: a local target needs model = \"PATH.gguf\" or a store name", where);
    else if (model && is_flite(tc))
        cfg_err(x, toml_node_line(mn),
                "%s model: recipe \"flite\" speaks with flite's built-in voices and takes no model file; "
                "drop model, or use recipe = \"tts\" for a Qwen3-TTS / Pocket TTS pair",
                where);
    else if (model)
        tc->model_path = resolve_model(x, tc, where, model);
    free(model);
}

static void parse_local(cfg_ctx *x, const toml_node *t, const char *where, gw_target_config *tc) {
    parse_recipe(x, t, where, tc);
    parse_model(x, t, where, tc);
    get_str(x, t, where, "backend", &tc->backend);
    const toml_node *fn = get_str(x, t, where, "flash_attn", &tc->flash_attn);
    char ferr[SIPP_ERROR_SIZE];
    if (tc->flash_attn && sipp_flash_attn_check(tc->flash_attn, ferr) != SIPP_OK)
        cfg_err(x, toml_node_line(fn), "%s: %s", where, ferr);
    const toml_node *sn = get_str(x, t, where, "speculative", &tc->speculative);
    if (tc->speculative && strcmp(tc->speculative, "none") != 0 && strcmp(tc->speculative, "ngram") != 0 &&
        strcmp(tc->speculative, "draft") != 0)
        cfg_err(x, toml_node_line(sn), "%s speculative: '%s' is not one of none, ngram, draft", where,
                tc->speculative);
    char *draft = NULL;
    const toml_node *dn = get_str(x, t, where, "draft_model", &draft);
    bool has_draft = draft != NULL;
    if (draft) tc->draft_model = resolve_model(x, tc, where, draft);
    free(draft);
    if (has_draft && tc->speculative && strcmp(tc->speculative, "draft") != 0)
        cfg_err(x, toml_node_line(dn), "%s draft_model: given, but speculative is '%s'; drop one of them",
                where, tc->speculative);
    if (!has_draft && tc->speculative && strcmp(tc->speculative, "draft") == 0)
        cfg_err(x, toml_node_line(sn),
                "%s speculative: 'draft' needs draft_model = \"PATH.gguf\" (or a store name)", where);
    get_int32(x, t, where, "draft_max", 1, SIPP_DRAFT_MAX, &tc->draft_max);
    get_int32(x, t, where, "draft_min", 1, SIPP_DRAFT_MAX, &tc->draft_min);
    get_fraction(x, t, where, "draft_p_min", 0, 1, &tc->draft_p_min);
    const toml_node *cn = get_str(x, t, where, "draft_cutoff", &tc->draft_cutoff);
    if (tc->draft_cutoff && strcmp(tc->draft_cutoff, "auto") != 0 && strcmp(tc->draft_cutoff, "off") != 0)
        cfg_err(x, toml_node_line(cn), "%s draft_cutoff: '%s' is not one of auto, off", where,
                tc->draft_cutoff);
    parse_kv_keys(x, t, where, tc);
    /* mmproj: a projector file (like model: a path or a store name), or "auto" (found at validation) */
    char *mmproj = NULL;
    get_str(x, t, where, "mmproj", &mmproj);
    if (mmproj && strcmp(mmproj, MMPROJ_AUTO) == 0)
        tc->mmproj_auto = true;
    else if (mmproj)
        tc->mmproj = resolve_model(x, tc, where, mmproj);
    free(mmproj);
    get_bool(x, t, where, "mmproj_offload", &tc->mmproj_offload);
    parse_speech_keys(x, t, where, tc);
    /* chat_template: "chatml" or a template file (relative to the config file's directory). */
    char *tmpl = NULL;
    get_str(x, t, where, "chat_template", &tmpl);
    if (tmpl) tc->chat_template = strcmp(tmpl, "chatml") == 0 ? strdup(tmpl) : resolve_path(x->path, tmpl);
    free(tmpl);
    get_ctx_size(x, t, where, tc);
    get_int32(x, t, where, "parallel", 1, GW_MAX_PARALLEL, &tc->parallel);
    get_int32(x, t, where, "threads", 0, GW_MAX_THREADS, &tc->threads);
    get_int32(x, t, where, "gpu_layers", -1, GW_MAX_GPU_LAYERS, &tc->gpu_layers);
    parse_rpc_keys(x, t, where, tc);
    char *policy = NULL;
    const toml_node *pn = get_str(x, t, where, "policy", &policy);
    if (policy && !parse_policy(policy, &tc->policy))
        cfg_err(x, toml_node_line(pn),
                "%s policy: '%s' is not one of balanced, latency_first, throughput_first", where, policy);
    free(policy);
    char *load = NULL;
    const toml_node *ldn = get_str(x, t, where, "load", &load);
    if (load && strcmp(load, "startup") == 0)
        tc->load = GW_LOAD_STARTUP;
    else if (load && strcmp(load, "on_demand") == 0)
        tc->load = GW_LOAD_ON_DEMAND;
    else if (load)
        cfg_err(x, toml_node_line(ldn), "%s load: '%s' is not \"startup\" or \"on_demand\"", where, load);
    free(load);
    get_keep_alive(x, t, where, &tc->keep_alive_s);
    get_bool(x, t, where, "pin", &tc->pin);
    get_bool(x, t, where, "repack", &tc->repack);
}

/* [store]: the model store as the gateway's callers may change it (/api/pull, /api/delete). */
static void parse_store(cfg_ctx *x, const toml_node *t, gw_config *c) {
    static const char *const known[] = {"allow_private_sources", NULL};
    const char *where = "[store]";
    check_keys(x, t, where, known);
    get_bool(x, t, where, "allow_private_sources", &c->store_allow_private_sources);
}

/* [media]: fetching the images chats name by http(s) URL (off by default: it has the server reach
 * an address a caller chose). */
static void parse_media(cfg_ctx *x, const toml_node *t, gw_config *c) {
    static const char *const known[] = {"fetch", "fetch_max_bytes", "fetch_timeout_ms", "fetch_allow_private",
                                        NULL};
    const char *where = "[media]";
    check_keys(x, t, where, known);
    get_bool(x, t, where, "fetch", &c->media_fetch);
    int64_t max = (int64_t)c->media_fetch_max_bytes;
    get_int(x, t, where, "fetch_max_bytes", 1, GW_MAX_LIMIT, &max);
    c->media_fetch_max_bytes = (size_t)max;
    get_int32(x, t, where, "fetch_timeout_ms", 1, GW_MAX_TIMEOUT_S * GW_MS_PER_S_INT,
              &c->media_fetch_timeout_ms);
    get_bool(x, t, where, "fetch_allow_private", &c->media_fetch_allow_private);
}

/* [web]: serving local models' files to the page (off by default: it hands out the weights to every
 * caller the targets allow), and where the browser runtime is (relative to the config file). */
/* [limits]: each key is a field of sipp_schema_limits of the same name. */
static void parse_limits(cfg_ctx *x, const toml_node *t, gw_config *c) {
    static const char *const known[] = {"schema_max_bytes",
                                        "schema_max_depth",
                                        "schema_max_properties",
                                        "schema_max_total_properties",
                                        "schema_max_enum",
                                        "schema_max_refs",
                                        "grammar_max_bytes",
                                        "grammar_max_alternatives",
                                        "image_max_bytes",
                                        "image_max_pixels",
                                        "media_max_items",
                                        "schema_convert_ms",
                                        "max_audio_seconds",
                                        "media_max_decoded_mb",
                                        "media_decoded_budget_mb",
                                        "max_speech_chars",
                                        NULL};
    size_t *sizes[] = {&c->limits.schema_max_bytes,      &c->limits.schema_max_depth,
                       &c->limits.schema_max_properties, &c->limits.schema_max_total_properties,
                       &c->limits.schema_max_enum,       &c->limits.schema_max_refs,
                       &c->limits.grammar_max_bytes,     &c->limits.grammar_max_alternatives,
                       &c->limits.image_max_bytes,       &c->limits.image_max_pixels,
                       &c->limits.media_max_items};
    /* sizes are the first keys of known, in order */
    check_keys(x, t, "[limits]", known);
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        int64_t v = (int64_t)*sizes[i];
        get_int(x, t, "[limits]", known[i], 1, GW_MAX_LIMIT, &v);
        *sizes[i] = (size_t)v;
    }
    get_int32(x, t, "[limits]", "schema_convert_ms", 1, GW_MAX_TIMEOUT_S * GW_MS_PER_S_INT,
              &c->limits.schema_convert_ms);
    int64_t seconds = (int64_t)c->limits.max_audio_seconds;
    get_int(x, t, "[limits]", "max_audio_seconds", 1, GW_MAX_AUDIO_SECONDS, &seconds);
    c->limits.max_audio_seconds = (double)seconds;
    int64_t mb = (int64_t)(c->limits.media_max_decoded_bytes >> 20);
    get_int(x, t, "[limits]", "media_max_decoded_mb", 1, GW_MAX_MEDIA_MB, &mb);
    c->limits.media_max_decoded_bytes = (size_t)mb << 20;
    mb = (int64_t)(c->media_decoded_budget >> 20);
    get_int(x, t, "[limits]", "media_decoded_budget_mb", 1, GW_MAX_MEDIA_MB, &mb);
    c->media_decoded_budget = (size_t)mb << 20;
    int64_t chars = (int64_t)c->max_speech_chars;
    get_int(x, t, "[limits]", "max_speech_chars", 1, GW_MAX_LIMIT, &chars);
    c->max_speech_chars = (size_t)chars;
}

static void parse_web(cfg_ctx *x, const toml_node *w, gw_config *c) {
    static const char *const known[] = {"serve_model_files", "runtime_dir", NULL};
    const char *where = "[web]";
    check_keys(x, w, where, known);
    get_bool(x, w, where, "serve_model_files", &c->web_serve_model_files);
    char *dir = NULL;
    get_str(x, w, where, "runtime_dir", &dir);
    if (dir) {
        free(c->web_runtime_dir);
        c->web_runtime_dir = resolve_path(x->path, dir);
    }
    free(dir);
}

static void parse_targets(cfg_ctx *x, const toml_node *arr, gw_config *c) {
    static const char *const local_keys[] = {"name",        "type",          "model",        "backend",
                                             "ctx_size",    "parallel",      "threads",      "gpu_layers",
                                             "policy",      "chat_template", "rpc",          "tensor_split",
                                             "flash_attn",  "speculative",   "draft_max",    "draft_min",
                                             "load",        "keep_alive",    "pin",          "draft_model",
                                             "draft_p_min", "repack",        "draft_cutoff", "aliases",
                                             "max_tokens",  "cache_type_k",  "cache_type_v", "mmproj_offload",
                                             "mmproj",      "recipe",        "speaker",      "voice",
                                             NULL};
    static const char *const remote_keys[] = {
        "name", "type", "base_url", "base_urls", "model", "api_key_env", "timeout_seconds", "aliases", NULL};
    size_t n = toml_array_len(arr);
    c->targets = calloc(n ? n : 1, sizeof *c->targets);
    if (!c->targets) return;
    for (size_t i = 0; i < n; i++) {
        const toml_node *t = toml_array_at(arr, i);
        char where[64];
        snprintf(where, sizeof where, "[[targets]] #%zu", i + 1);
        if (!expect_kind(x, t, TOML_TABLE, where, "", "a table")) continue;
        gw_target_config *tc = &c->targets[c->n_targets++];
        init_target(tc);
        tc->line = toml_node_line(t);
        get_str(x, t, where, "name", &tc->name);
        if (!tc->name) {
            cfg_err(x, tc->line, "%s: 'name' is missing: the name clients give as \"model\"", where);
            tc->name = strdup("");
        } else {
            snprintf(where, sizeof where, "target '%s'", tc->name);
        }
        for (size_t k = 0; k + 1 < c->n_targets; k++)
            if (strcmp(c->targets[k].name, tc->name) == 0 && *tc->name)
                cfg_err(x, tc->line, "duplicate target name '%s' (first defined on line %d)", tc->name,
                        c->targets[k].line);
        char *type = NULL;
        const toml_node *tn = get_str(x, t, where, "type", &type);
        if (!type || strcmp(type, "local") == 0) {
            tc->type = GW_TARGET_LOCAL;
            check_keys(x, t, where, local_keys);
            parse_local(x, t, where, tc);
        } else if (strcmp(type, "openai_compatible") == 0) {
            tc->type = GW_TARGET_REMOTE;
            check_keys(x, t, where, remote_keys);
            parse_remote(x, t, where, tc);
        } else {
            cfg_err(x, toml_node_line(tn), "%s type: '%s' is not one of local, openai_compatible", where,
                    type);
        }
        free(type);
        get_strv(x, t, where, "aliases", &tc->aliases, &tc->n_aliases);
        if (tc->type == GW_TARGET_LOCAL) get_int32(x, t, where, "max_tokens", 1, GW_MAX_CTX, &tc->max_tokens);
    }
}

/* ---- [[mcp]] ------------------------------------------------------------------------------------ */

/* The host of an http(s) URL ("http://HOST[:PORT]/...", "[V6]" without its brackets) into out;
 * false when url is not one. */
static bool url_host(const char *url, char *out, size_t cap) {
    const char *p = strncmp(url, "http://", 7) == 0    ? url + 7
                    : strncmp(url, "https://", 8) == 0 ? url + 8
                                                       : NULL;
    if (!p || !*p) return false;
    const char *end;
    if (*p == '[') {
        end = strchr(++p, ']');
        if (!end) return false;
    } else {
        end = p + strcspn(p, ":/?#");
    }
    size_t n = (size_t)(end - p);
    if (n == 0 || n >= cap || memchr(p, '@', n)) return false;
    memcpy(out, p, n);
    out[n] = 0;
    return true;
}

static bool is_loopback(const char *host);

/* url: an http(s) URL whose host is a loopback name or address, or in [server] mcp_allowed_hosts
 * (a gateway that reaches any host a config names is one edit away from reaching an internal one). */
static void check_mcp_url(cfg_ctx *x, const gw_config *c, const gw_mcp_config *m, const char *where) {
    char host[256];
    if (!url_host(m->url, host, sizeof host)) {
        cfg_err(x, m->line,
                "%s url: '%s' is not an http:// or https:// URL (e.g. \"http://127.0.0.1:8931/mcp\")", where,
                m->url);
        return;
    }
    if (is_loopback(host)) return;
    for (size_t i = 0; i < c->n_mcp_allowed_hosts; i++)
        if (strcasecmp(c->mcp_allowed_hosts[i], host) == 0) return;
    cfg_err(x, m->line,
            "%s url: host '%s' is not a loopback address; add it to [server] mcp_allowed_hosts to allow it",
            where, host);
}

/* env = { KEY = "VALUE", ... } as "KEY=VALUE" entries. */
static void get_env_table(cfg_ctx *x, const toml_node *t, const char *where, gw_mcp_config *m) {
    const toml_node *n = toml_table_get(t, "env");
    if (!n || !expect_kind(x, n, TOML_TABLE, where, "env", "a table of strings ({ KEY = \"VALUE\" })"))
        return;
    size_t count = toml_table_len(n);
    m->env = calloc(count ? count : 1, sizeof *m->env);
    for (size_t i = 0; m->env && i < count; i++) {
        const toml_entry *e = toml_table_at(n, i);
        const char *v = NULL;
        size_t len = 0;
        if (toml_node_kind(e->value) != TOML_STRING || !toml_get_string(e->value, &v, &len, NULL, 0) ||
            strlen(v) != len || strlen(e->key) != e->key_len || !*e->key || strchr(e->key, '=')) {
            cfg_err(x, e->line, "%s env: '%s' must be a NAME (no '=') with a string value", where, e->key);
            continue;
        }
        size_t size = e->key_len + len + 2;
        char *kv = malloc(size);
        if (kv) snprintf(kv, size, "%s=%s", e->key, v);
        if (kv) m->env[m->n_env++] = kv;
    }
}

static void parse_one_mcp(cfg_ctx *x, const toml_node *t, const gw_config *c, gw_mcp_config *m, char *where,
                          size_t where_cap) {
    static const char *const known[] = {"name", "command", "url", "allowed_tools", "timeout_seconds",
                                        "env",  NULL};
    m->line = toml_node_line(t);
    m->timeout_seconds = GW_DEFAULT_MCP_TIMEOUT_S;
    check_keys(x, t, where, known);
    get_str(x, t, where, "name", &m->name);
    if (!m->name) {
        cfg_err(x, m->line, "%s: 'name' is missing: the server_label requests name this server by", where);
        m->name = strdup("");
    } else {
        snprintf(where, where_cap, "[[mcp]] '%s'", m->name);
    }
    get_strv(x, t, where, "command", &m->command, &m->n_command);
    get_str(x, t, where, "url", &m->url);
    get_strv(x, t, where, "allowed_tools", &m->allowed_tools, &m->n_allowed_tools);
    get_int32(x, t, where, "timeout_seconds", 1, GW_MAX_TIMEOUT_S, &m->timeout_seconds);
    get_env_table(x, t, where, m);
    bool cmd = toml_table_get(t, "command") != NULL;
    if (cmd == (m->url != NULL))
        cfg_err(x, m->line,
                "%s: give exactly one of 'command' (a program spoken to over stdin/stdout, e.g. [\"node\", "
                "\"server.js\"]) or 'url' (a streamable HTTP endpoint)",
                where);
    else if (cmd && m->n_command == 0)
        cfg_err(x, m->line, "%s command: must name the program, e.g. [\"node\", \"server.js\"]", where);
    else if (m->url)
        check_mcp_url(x, c, m, where);
    if (m->url && m->n_env)
        cfg_err(x, m->line, "%s env: only a 'command' server is started with an environment", where);
}

static void parse_mcp(cfg_ctx *x, const toml_node *arr, gw_config *c) {
    size_t n = toml_array_len(arr);
    c->mcp = calloc(n ? n : 1, sizeof *c->mcp);
    if (!c->mcp) return;
    for (size_t i = 0; i < n; i++) {
        const toml_node *t = toml_array_at(arr, i);
        char where[96];
        snprintf(where, sizeof where, "[[mcp]] #%zu", i + 1);
        if (!expect_kind(x, t, TOML_TABLE, where, "", "a table")) continue;
        gw_mcp_config *m = &c->mcp[c->n_mcp++];
        parse_one_mcp(x, t, c, m, where, sizeof where);
        for (size_t k = 0; k + 1 < c->n_mcp; k++)
            if (*m->name && strcmp(c->mcp[k].name, m->name) == 0)
                cfg_err(x, m->line, "duplicate [[mcp]] name '%s' (first defined on line %d)", m->name,
                        c->mcp[k].line);
    }
}

bool gw_config_parse(const char *text, size_t len, const char *path, gw_config *c, sipp_buf *errs) {
    cfg_ctx x = {.file = path ? path : "<config>", .path = path, .errs = errs, .ok = true};
    char terr[SIPP_ERROR_SIZE];
    toml_doc *doc = toml_parse(text, len, x.file, terr, sizeof terr);
    if (!doc) {
        sipp_buf_appendf(errs, "%s\n", terr);
        return false;
    }
    free(c->path);
    c->path = path ? strdup(path) : NULL;
    const toml_node *root = toml_root(doc);
    static const char *const known[] = {"server", "security", "responses", "store", "media", "web",
                                        "limits", "tokens",   "targets",   "mcp",   NULL};
    check_keys(&x, root, "the top level", known);
    const toml_node *n;
    if ((n = toml_table_get(root, "server")) && expect_kind(&x, n, TOML_TABLE, "", "[server]", "a table"))
        parse_server(&x, n, c);
    if ((n = toml_table_get(root, "security")) && expect_kind(&x, n, TOML_TABLE, "", "[security]", "a table"))
        parse_security(&x, n, c);
    if ((n = toml_table_get(root, "responses")) &&
        expect_kind(&x, n, TOML_TABLE, "", "[responses]", "a table"))
        parse_responses(&x, n, c);
    if ((n = toml_table_get(root, "store")) && expect_kind(&x, n, TOML_TABLE, "", "[store]", "a table"))
        parse_store(&x, n, c);
    if ((n = toml_table_get(root, "media")) && expect_kind(&x, n, TOML_TABLE, "", "[media]", "a table"))
        parse_media(&x, n, c);
    if ((n = toml_table_get(root, "web")) && expect_kind(&x, n, TOML_TABLE, "", "[web]", "a table"))
        parse_web(&x, n, c);
    if ((n = toml_table_get(root, "limits")) && expect_kind(&x, n, TOML_TABLE, "", "[limits]", "a table"))
        parse_limits(&x, n, c);
    if ((n = toml_table_get(root, "tokens")) &&
        expect_kind(&x, n, TOML_ARRAY, "", "[[tokens]]", "an array of tables"))
        parse_tokens(&x, n, c);
    if ((n = toml_table_get(root, "targets")) &&
        expect_kind(&x, n, TOML_ARRAY, "", "[[targets]]", "an array of tables"))
        parse_targets(&x, n, c);
    if ((n = toml_table_get(root, "mcp")) &&
        expect_kind(&x, n, TOML_ARRAY, "", "[[mcp]]", "an array of tables"))
        parse_mcp(&x, n, c);
    if (c->n_targets == 0)
        cfg_err(&x, 0, "no [[targets]]: add at least one, e.g. name = \"tiny\" and model = \"tiny.gguf\"");
    if (c->rate_requests_per_minute > 0 && c->rate_burst == 0) c->rate_burst = c->rate_requests_per_minute;
    for (size_t i = 0; i < c->n_tokens; i++)
        for (size_t k = 0; k < c->tokens[i].n_targets; k++) {
            bool found = false;
            for (size_t j = 0; j < c->n_targets && !found; j++)
                found = strcmp(c->targets[j].name, c->tokens[i].targets[k]) == 0;
            if (!found)
                cfg_err(&x, c->tokens[i].line, "[[tokens]] '%s': targets names '%s', which is not a target",
                        c->tokens[i].caller, c->tokens[i].targets[k]);
        }
    toml_free(doc);
    return x.ok;
}

bool gw_config_load(const char *path, gw_config *c, sipp_buf *errs) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        sipp_buf_appendf(errs, "%s: cannot open the config file: %s\n", path, strerror(errno));
        return false;
    }
    sipp_buf text = {0};
    char chunk[4096];
    size_t n;
    bool ok = true;
    while (ok && (n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        ok = sipp_buf_append(&text, chunk, n) && text.len <= GW_CONFIG_MAX_FILE_BYTES;
    }
    if (ferror(f) || !ok) {
        sipp_buf_appendf(errs, "%s: cannot read the config file (or it is over %zu bytes)\n", path,
                         GW_CONFIG_MAX_FILE_BYTES);
        ok = false;
    }
    fclose(f);
    if (ok) ok = gw_config_parse(text.data ? text.data : "", text.len, path, c, errs);
    sipp_buf_free(&text);
    return ok;
}

char *gw_target_name_from_path(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base), sl = strlen(GW_MODEL_SUFFIX);
    if (n > sl && strcasecmp(base + n - sl, GW_MODEL_SUFFIX) == 0) n -= sl;
    return strndup(base, n);
}

/* A new local target at the end of c's, with the defaults; NULL when out of memory. */
static gw_target_config *add_target(gw_config *c) {
    gw_target_config *t = realloc(c->targets, (c->n_targets + 1) * sizeof *t);
    if (!t) return NULL;
    c->targets = t;
    gw_target_config *tc = &c->targets[c->n_targets++];
    init_target(tc);
    tc->type = GW_TARGET_LOCAL;
    return tc;
}

bool gw_config_add_local(gw_config *c, const char *model_path, sipp_buf *errs) {
    gw_target_config *tc = add_target(c);
    if (!tc) return false;
    tc->name = gw_target_name_from_path(model_path);
    /* `sipp serve NAME` takes a store name as well as a path. */
    char found[PATH_MAX], err[SIPP_ERROR_SIZE];
    struct stat st;
    bool from_store =
        stat(model_path, &st) != 0 && sipp_store_resolve(model_path, found, sizeof found, err) == SIPP_OK;
    tc->model_path = strdup(from_store ? found : model_path);
    if (!tc->name || !*tc->name) {
        sipp_buf_appendf(errs, "MODEL '%s' has no file name to name the target after\n", model_path);
        return false;
    }
    return true;
}

bool gw_config_add_voice(gw_config *c, const char *voice, sipp_buf *errs) {
    for (size_t i = 0; i < c->n_targets; i++)
        if (strcmp(c->targets[i].name, GW_VOICE_TARGET) == 0) {
            sipp_buf_appendf(errs,
                             "--voice adds a target named '%s', and the configuration has one already; drop "
                             "--voice or rename that target\n",
                             GW_VOICE_TARGET);
            return false;
        }
    sipp_tts_params p = sipp_tts_default_params();
    p.model = "flite";
    p.voice = voice;
    sipp_tts *flite = NULL;
    char err[SIPP_ERROR_SIZE];
    if (sipp_tts_new(&p, &flite, err) != SIPP_OK) {
        sipp_buf_appendf(errs, "--voice: %s\n", err);
        return false;
    }
    sipp_tts_free(flite);
    gw_target_config *tc = add_target(c);
    if (!tc) return false;
    tc->name = strdup(GW_VOICE_TARGET);
    tc->recipe = strdup("flite");
    tc->voice = voice ? strdup(voice) : NULL;
    return tc->name && tc->recipe && (!voice || tc->voice);
}

bool gw_discoverable(const sipp_store_model *m) {
    const char *slash = strrchr(m->path, '/');
    return strncasecmp(slash ? slash + 1 : m->path, "mmproj", strlen("mmproj")) != 0;
}

bool gw_target_config_discovered(gw_target_config *tc, const char *name, const char *path,
                                 int64_t keep_alive_s) {
    init_target(tc);
    tc->type = GW_TARGET_LOCAL;
    tc->load = GW_LOAD_ON_DEMAND;
    tc->keep_alive_s = keep_alive_s;
    tc->name = strdup(name);
    tc->model_path = strdup(path);
    return tc->name && tc->model_path && tc->backend;
}

bool gw_config_add_dir(gw_config *c, const char *dir, sipp_buf *errs) {
    char store[PATH_MAX], err[SIPP_ERROR_SIZE];
    if (!dir) {
        if (sipp_store_dir(store, sizeof store, err) != SIPP_OK) {
            sipp_buf_appendf(errs, "%s\n", err);
            return false;
        }
        dir = store;
    }
    sipp_store_model *models = NULL;
    size_t n = 0;
    if (sipp_store_list(dir, &models, &n, err) != SIPP_OK) {
        sipp_buf_appendf(errs, "models directory '%s': %s\n", dir, err);
        return false;
    }
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        bool taken = false;
        for (size_t k = 0; k < c->n_targets && !taken; k++)
            taken = strcmp(c->targets[k].name, models[i].name) == 0;
        if (taken || !gw_discoverable(&models[i])) continue; /* a configured target of that name wins */
        if (!gw_models_dir_allows(dir, &models[i], c->models_follow_symlinks)) continue;
        gw_target_config *t = realloc(c->targets, (c->n_targets + 1) * sizeof *t);
        if (!t) {
            ok = false;
            break;
        }
        c->targets = t;
        ok = gw_target_config_discovered(&c->targets[c->n_targets++], models[i].name, models[i].path,
                                         c->discovered_keep_alive_s);
        c->targets[c->n_targets - 1].max_tokens = c->discovered_max_tokens;
    }
    sipp_store_list_free(models, n);
    gw_models_dir_report(dir);
    free(c->models_dir);
    c->models_dir = strdup(dir);
    ok = ok && c->models_dir;
    if (!ok) sipp_buf_appendf(errs, "out of memory listing '%s'\n", dir);
    return ok;
}

/* ---- what depends on the machine ---------------------------------------------------------------- */

static bool is_loopback(const char *host) {
    if (strcmp(host, "localhost") == 0) return true;
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, host, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1) return IN6_IS_ADDR_LOOPBACK(&a6);
    return false;
}

/* Why a model file cannot be read, or NULL. */
static const char *file_problem(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return strerror(errno);
    if (!S_ISREG(st.st_mode)) return "not a regular file";
    if (access(path, R_OK) != 0) return strerror(errno);
    return NULL;
}

/* mmproj = "auto": the one projector file in the model's directory, where llama.cpp's ecosystem
 * publishes it (mmproj-model-f16.gguf beside model.gguf; sipp_store_find_mmproj). None, or several,
 * is an error that says what to write instead. */
static void resolve_auto_mmproj(cfg_ctx *x, int line, gw_target_config *t) {
    char path[PATH_MAX], err[SIPP_ERROR_SIZE];
    if (sipp_store_find_mmproj(t->model_path, path, sizeof path, err) == SIPP_OK)
        t->mmproj = strdup(path);
    else
        cfg_err(x, line, "target '%s': mmproj = \"auto\": %s, or name its file: mmproj = \"FILE\"", t->name,
                err);
}

/* Whether program runs: a path with a '/' (relative to dir, the config file's directory, where the
 * child starts) is an executable file; a bare name is one on PATH, as posix_spawnp finds it. */
static bool program_found(const char *program, const char *dir) {
    char path[PATH_MAX];
    if (strchr(program, '/')) {
        if (program[0] == '/' || !dir) return access(program, X_OK) == 0;
        snprintf(path, sizeof path, "%s/%s", dir, program);
        return access(path, X_OK) == 0;
    }
    const char *env = getenv("PATH");
    for (const char *p = env ? env : "/usr/bin:/bin"; *p;) {
        size_t n = strcspn(p, ":");
        snprintf(path, sizeof path, "%.*s/%s", (int)n, p, program);
        if (n && access(path, X_OK) == 0) return true;
        p += n + (p[n] == ':');
    }
    return false;
}

/* An [[mcp]] command's program can be started (it is not started here: --check runs nothing). */
static void validate_mcp(cfg_ctx *x, const gw_config *c) {
    char dir[PATH_MAX] = "";
    if (c->path) {
        sipp_strlcpy(dir, c->path, sizeof dir);
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = 0;
        else
            sipp_strlcpy(dir, ".", sizeof dir);
    }
    for (size_t i = 0; i < c->n_mcp; i++) {
        const gw_mcp_config *m = &c->mcp[i];
        if (m->n_command && !program_found(m->command[0], c->path ? dir : NULL))
            cfg_err(
                x, c->path ? m->line : 0,
                "[[mcp]] '%s' command: program '%s' is not found (not on PATH, or not executable); install "
                "it or give its path",
                m->name, m->command[0]);
    }
}

/* A local target's recipe from its model file when it names none (a whisper.cpp model's ggml magic:
 * whispercpp), and a named one that the file contradicts; the keys only llama models take are
 * refused on a whisper target. */
static void detect_recipe(cfg_ctx *x, int line, gw_target_config *t) {
    bool whisper = sipp_is_whisper_model(t->model_path);
    if (!t->recipe && whisper) t->recipe = sipp_strdup(WHISPER_RECIPE);
    bool named_whisper = t->recipe && strcmp(t->recipe, WHISPER_RECIPE) == 0;
    if (named_whisper && !whisper)
        cfg_err(
            x, line,
            "target '%s': recipe = \"%s\" but '%s' is not a whisper.cpp model (no ggml magic at its start)",
            t->name, WHISPER_RECIPE, t->model_path);
    else if (!named_whisper && whisper)
        cfg_err(x, line, "target '%s': '%s' is a whisper.cpp model; set recipe = \"%s\" or leave recipe out",
                t->name, t->model_path, WHISPER_RECIPE);
    const char *llama_only = t->mmproj || t->mmproj_auto ? "mmproj"
                             : t->draft_model            ? "draft_model"
                             : t->speculative            ? "speculative"
                                                         : NULL;
    if (named_whisper && whisper && llama_only)
        cfg_err(x, line, "target '%s': %s is a key of llama models; a whisper.cpp model takes none", t->name,
                llama_only);
}

/* Whether the projector at path is a speech pair's (Qwen3-TTS, Pocket TTS), from its header. */
static bool tts_projector(const char *path) {
    static const char *const types[] = {"qwen3tts", "pockettts"};
    sipp_gguf_info *info = calloc(1, sizeof *info);
    char err[SIPP_ERROR_SIZE];
    bool yes = false;
    if (info && sipp_gguf_inspect(path, info, err) == SIPP_OK)
        for (size_t i = 0; i < sizeof types / sizeof *types; i++)
            yes = yes || strncmp(info->projector_type, types[i], strlen(types[i])) == 0;
    free(info);
    return yes;
}

/* A speech pair's recipe from its projector when it names none (tts), and its speaker clip. */
static void speech_files(cfg_ctx *x, int line, gw_target_config *t) {
    if (!t->recipe && t->mmproj && !file_problem(t->mmproj) && tts_projector(t->mmproj))
        t->recipe = strdup("tts");
    const char *why;
    if (t->speaker && (!t->recipe || strcmp(t->recipe, "tts") != 0))
        cfg_err(x, line,
                "target '%s': speaker is for a Qwen3-TTS / Pocket TTS pair (recipe = \"tts\"), and "
                "its mmproj is not a speech projector",
                t->name);
    else if (t->speaker && (why = file_problem(t->speaker)))
        cfg_err(x, line, "target '%s': speaker clip '%s' cannot be read (%s); check the path", t->name,
                t->speaker, why);
}

bool gw_config_validate(gw_config *c, sipp_buf *errs) {
    cfg_ctx x = {.file = c->path ? c->path : "sipp serve", .errs = errs, .ok = true};
    int line;
    validate_mcp(&x, c);
    for (size_t i = 0; i < c->n_targets; i++) {
        gw_target_config *t = &c->targets[i];
        line = c->path ? t->line : 0;
        if (t->type == GW_TARGET_LOCAL) {
            if (!t->model_path) continue; /* already reported where the target was parsed */
            const char *why = file_problem(t->model_path);
            if (why)
                cfg_err(&x, line, "target '%s': model file '%s' cannot be read (%s); check the path", t->name,
                        t->model_path ? t->model_path : "", why);
            if (t->draft_model && (why = file_problem(t->draft_model)))
                cfg_err(&x, line, "target '%s': draft_model file '%s' cannot be read (%s); check the path",
                        t->name, t->draft_model, why);
            if (!why) detect_recipe(&x, line, t);
            if (t->mmproj_auto && !t->mmproj) resolve_auto_mmproj(&x, line, t);
            if (t->mmproj && (why = file_problem(t->mmproj)))
                cfg_err(&x, line, "target '%s': mmproj file '%s' cannot be read (%s); check the path",
                        t->name, t->mmproj, why);
            speech_files(&x, line, t);
            char berr[SIPP_ERROR_SIZE];
            if (sipp_backend_check_name(t->backend, berr) != SIPP_OK)
                cfg_err(&x, line, "target '%s' backend: %s", t->name, berr);
        } else if (t->api_key_env && !getenv(t->api_key_env)) {
            cfg_err(&x, line,
                    "target '%s': api_key_env names '%s', which is not set; export it with the "
                    "upstream's key",
                    t->name, t->api_key_env);
        }
    }
    for (size_t i = 0; i < c->n_tokens; i++) {
        gw_token_config *tk = &c->tokens[i];
        if (!tk->env) continue; /* already reported where the token was parsed */
        const char *v = getenv(tk->env);
        if (!v || !*v) {
            cfg_err(&x, c->path ? tk->line : 0,
                    "[[tokens]] '%s': environment variable '%s' is not set (or empty); export it with the "
                    "bearer secret",
                    tk->caller, tk->env);
            continue;
        }
        if (strlen(v) < GW_MIN_TOKEN_SECRET) {
            cfg_err(&x, c->path ? tk->line : 0,
                    "[[tokens]] '%s': the secret in '%s' is %zu bytes; use at least %d (e.g. `openssl rand "
                    "-hex 32`)",
                    tk->caller, tk->env, strlen(v), GW_MIN_TOKEN_SECRET);
            continue;
        }
        free(tk->secret);
        tk->secret = strdup(v);
    }
    if (c->n_tokens == 0 && !c->allow_unauthenticated && !is_loopback(c->host))
        cfg_err(&x, 0,
                "refusing to listen on %s without authentication: add [[tokens]], or set "
                "allow_unauthenticated = true "
                "in [server] (--allow-unauthenticated) if this network is trusted",
                c->host);
    return x.ok;
}
