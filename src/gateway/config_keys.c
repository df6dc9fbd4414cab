/*
 * config_keys.c: every key of the gateway's configuration file, one table per section
 * (config_table.h says what a row holds). Parsing (gw_config_parse), `sipp serve --check`, the
 * unknown-key error and the reference in docs/gateway.md (`sipp serve --config-keys`) all read these
 * rows: adding a key is one row here and a field in config.h.
 *
 * Rows are read in the order they are listed, so a key whose meaning depends on another comes after
 * it: model after recipe (flite takes none), draft_model after speculative, the KV cache types after
 * backend and flash_attn, tensor_split after rpc and backend. A key with a shape of its own (listen,
 * keep_alive, ctx_size, lora, ...) has a reader below its table's neighbours; the checks that span
 * several keys run after the rows (a section's check).
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "gateway/config.h"
#include "gateway/config_table.h"

#define GW_MAX_COUNT 1000000
#define GW_MAX_THREADS 1024
#define GW_MAX_GPU_LAYERS 100000
#define GW_MAX_PARALLEL 256
#define GW_MAX_REQUEST_BYTES_LIMIT ((int64_t)1 << 32)
#define GW_MAX_RATE 1000000
#define GW_MAX_CONNECTIONS 1000000
#define GW_MAX_BUDGET_MB ((int64_t)1 << 40)
#define GW_MAX_LIMIT ((int64_t)1 << 32)  /* [limits]: a value past it is a typo */
#define GW_MAX_AUDIO_SECONDS (24 * 3600) /* [limits] max_audio_seconds: a day of audio */
#define GW_MAX_MEDIA_MB (1 << 20)        /* [limits] media_*_mb: a terabyte is a typo */
#define GW_MS_PER_S_INT 1000
#define GW_MAX_TIMEOUT_MS ((double)GW_MAX_TIMEOUT_S * GW_MS_PER_S_INT)
#define GW_LORA_MAX 64
#define GW_SPEAKERS_MAX 64 /* speakers = {...}: voices of a pair */
#define GW_LANGUAGE_MAX 32 /* language = "...": within a request's own bound */
#define GW_LORA_SCALE_MAX 100.0
#define MMPROJ_AUTO "auto"
#define WHERE_SIZE 96 /* "[[targets]] #12", "target 'NAME'" */
#define HOST_SIZE 256

_Static_assert(sizeof(gw_target_type) == sizeof(int) && sizeof(gw_load_mode) == sizeof(int) &&
                   sizeof(sipp_policy) == sizeof(int),
               "GW_CFG_CHOICE stores an enum as an int");

#define LIST(type, member)                                                                                   \
    .kind = GW_CFG_LIST, .offset = offsetof(type, member), .count_offset = offsetof(type, n_##member)
/* A row that fills member of type; the row's other fields follow (.lo, .hi, .values, .help, ...). */
#define KEY(name, kind_, type, member, ...)                                                                  \
    { .key = name, .kind = kind_, .offset = offsetof(type, member), __VA_ARGS__ }
/* A list of strings: member and its count n_member. */
#define LIST_KEY(name, type, member, ...)                                                                    \
    { .key = name, LIST(type, member), __VA_ARGS__ }
/* A key read by its own reader. */
#define CUSTOM_KEY(name, reader, ...)                                                                        \
    { .key = name, .kind = GW_CFG_CUSTOM, .read = reader, __VA_ARGS__ }

/* ---- readers of the keys with a shape of their own ------------------------------------------------- */

/* A string key's value (a non-empty string), borrowed from the document; NULL when absent or refused
 * (reported). *node gets its node. */
static const char *get_text(gw_cfg_ctx *x, const toml_node *tbl, const char *key, const toml_node **node) {
    const gw_cfg_key k = {.key = key, .kind = GW_CFG_STRING};
    char *s = NULL;
    *node = toml_table_get(tbl, key);
    if (!*node || !gw_cfg_read_key(x, tbl, &k, &s)) return NULL;
    free(s);
    const char *v = NULL;
    size_t len = 0;
    toml_get_string(*node, &v, &len, NULL, 0);
    return v;
}

/* "HOST:PORT", "[V6]:PORT". */
static bool parse_listen(const char *s, char **host, int *port) {
    const char *colon, *h = s;
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
    long p = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || *end || p < 0 || p > GW_MAX_PORT) return false;
    free(*host);
    *host = strndup(h, hlen);
    *port = (int)p;
    return true;
}

static void read_listen(gw_cfg_ctx *x, const toml_node *tbl, const gw_cfg_key *k, void *obj) {
    gw_config *c = obj;
    const toml_node *n;
    const char *listen = get_text(x, tbl, k->key, &n);
    if (listen && !parse_listen(listen, &c->host, &c->port))
        gw_cfg_err(x, toml_node_line(n),
                   "[server] listen: '%s' is not HOST:PORT (e.g. \"127.0.0.1:8080\" or \"[::1]:8080\")",
                   listen);
}

/* max_buffered_bytes, when absent, is raised to max_request_bytes; given, it must hold one body. */
static void check_server(gw_cfg_ctx *x, const toml_node *srv, void *obj) {
    gw_config *c = obj;
    const toml_node *bn = toml_table_get(srv, "max_buffered_bytes");
    if (!bn && c->max_buffered_bytes < c->max_request_bytes) c->max_buffered_bytes = c->max_request_bytes;
    if (c->max_buffered_bytes < c->max_request_bytes)
        gw_cfg_err(
            x, gw_cfg_line(srv, bn),
            "[server] max_buffered_bytes (%zu) is below max_request_bytes (%zu): no body of the largest "
            "size could ever be read; raise it",
            c->max_buffered_bytes, c->max_request_bytes);
}

/* slot_state_dir is taken as given; slot_save_dir, like every other path, is relative to the file. */
static const gw_cfg_key server_keys[] = {
    CUSTOM_KEY("listen", read_listen, .value_doc = "\"HOST:PORT\" or \"[V6]:PORT\"",
               .default_doc = "`\"" GW_DEFAULT_HOST ":8080\"`", .help = "the address and port to listen on"),
    KEY("max_request_bytes", GW_CFG_SIZE, gw_config, max_request_bytes, .lo = 1,
        .hi = GW_MAX_REQUEST_BYTES_LIMIT, .help = "a larger body gets 413"),
    KEY("max_concurrent_requests", GW_CFG_INT, gw_config, max_concurrent_requests, .lo = 1,
        .hi = GW_MAX_COUNT, .help = "generations running at once, across targets"),
    KEY("max_queue", GW_CFG_INT, gw_config, max_queue, .lo = 0, .hi = GW_MAX_COUNT,
        .help = "more may wait for a turn; beyond that: 429"),
    KEY("request_timeout_seconds", GW_CFG_INT, gw_config, request_timeout_seconds, .lo = 1,
        .hi = GW_MAX_TIMEOUT_S, .help = "a request still running after this: 504"),
    KEY("shutdown_timeout_seconds", GW_CFG_INT, gw_config, shutdown_timeout_seconds, .lo = 0,
        .hi = GW_MAX_TIMEOUT_S, .help = "how long SIGTERM waits for in-flight requests"),
    KEY("read_timeout_seconds", GW_CFG_INT, gw_config, read_timeout_seconds, .lo = 1, .hi = GW_MAX_TIMEOUT_S,
        .help = "to send a whole request (headers and body); also ends idle keep-alive"),
    KEY("max_connections", GW_CFG_INT, gw_config, max_connections, .lo = 1, .hi = GW_MAX_CONNECTIONS,
        .help = "open connections in all (lowered if the fd limit cannot hold them)"),
    KEY("max_connections_per_client", GW_CFG_INT, gw_config, max_connections_per_client, .lo = 1,
        .hi = GW_MAX_CONNECTIONS, .help = "open connections from one IP address"),
    KEY("max_buffered_bytes", GW_CFG_SIZE, gw_config, max_buffered_bytes, .lo = 1,
        .hi = GW_MAX_REQUEST_BYTES_LIMIT,
        .help =
            "request bodies held while they arrive, all together; at least max_request_bytes (raised to it "
            "when absent)"),
    LIST_KEY("allowed_origins", gw_config, allowed_origins,
             .help = "CORS: origins whose pages may call the gateway (`\"http://localhost:3000\"`); `\"*\"` "
                     "allows any"),
    LIST_KEY("allowed_hosts", gw_config, allowed_hosts,
             .help = "DNS names served without tokens besides localhost (`\"sipp.lan\"`); `\"*\"` = any"),
    KEY("allow_unauthenticated", GW_CFG_BOOL, gw_config, allow_unauthenticated,
        .help = "needed to listen on a non-loopback address without `[[tokens]]`"),
    KEY("memory_budget_mb", GW_CFG_INT64, gw_config, memory_budget_mb, .lo = 1, .hi = GW_MAX_BUDGET_MB,
        .default_doc = "total RAM minus a margin",
        .help = "host RAM the loaded models may hold (docs/residency.md)"),
    KEY("max_loaded_models", GW_CFG_INT, gw_config, max_loaded_models, .lo = 1, .hi = GW_MAX_COUNT,
        .default_doc = "no cap besides memory", .help = "models loaded at once"),
    KEY("slot_state_dir", GW_CFG_STRING, gw_config, slot_state_dir,
        .default_doc = "`$XDG_CACHE_HOME/sipp/slot-state`",
        .help = "where an unloaded model's idle slots are saved (docs/residency.md)"),
    KEY("slot_state_max_mb", GW_CFG_INT64, gw_config, slot_state_max_mb, .lo = 0, .hi = GW_MAX_BUDGET_MB,
        .help = "bound on those files; 0 = save none"),
    KEY("slot_save_dir", GW_CFG_PATH, gw_config, slot_save_dir,
        .default_doc = "none: those actions are refused",
        .help = "where `POST /slots/ID?action=save` writes and `restore` reads (llama-server's "
                "`--slot-save-path`)"),
    KEY("models_follow_symlinks", GW_CFG_BOOL, gw_config, models_follow_symlinks,
        .help = "`--models-dir`: serve models there that link to files outside it (docs/residency.md)"),
    LIST_KEY("mcp_allowed_hosts", gw_config, mcp_allowed_hosts,
             .help = "hosts an `[[mcp]]` url may name besides loopback ones (`\"mcp.lan\"`)"),
};

static void init_config(void *obj) { gw_config_init(obj); }
static void fini_config(void *obj) { gw_config_free(obj); }

#define CONFIG_SECTION .obj_size = sizeof(gw_config), .init = init_config, .fini = fini_config

static const gw_cfg_section server_section = {
    .name = "[server]", GW_CFG_KEYS(server_keys), .check = check_server, CONFIG_SECTION};

static const gw_cfg_key rate_limit_keys[] = {
    KEY("requests_per_minute", GW_CFG_INT, gw_config, rate_requests_per_minute, .lo = 0, .hi = GW_MAX_RATE,
        .help = "per client; 0 = no rate limit"),
    KEY("burst", GW_CFG_INT, gw_config, rate_burst, .lo = 1, .hi = GW_MAX_RATE,
        .default_doc = "requests_per_minute", .help = "requests a client may make at once"),
};
static const gw_cfg_section rate_limit_section = {
    .name = "[security.rate_limit]", GW_CFG_KEYS(rate_limit_keys), CONFIG_SECTION};
static const gw_cfg_key security_keys[] = {
    {.key = "rate_limit", .kind = GW_CFG_TABLE, .sub = &rate_limit_section, .help = "the rate limit, below"},
};
static const gw_cfg_section security_section = {
    .name = "[security]", GW_CFG_KEYS(security_keys), CONFIG_SECTION};

static const gw_cfg_key responses_keys[] = {
    KEY("max_stored", GW_CFG_INT, gw_config, responses_max_stored, .lo = 0, .hi = GW_MAX_COUNT,
        .help = "responses kept; the oldest go first (0 = store nothing)"),
    KEY("max_stored_bytes", GW_CFG_SIZE, gw_config, responses_max_bytes, .lo = 0,
        .hi = GW_MAX_REQUEST_BYTES_LIMIT, .help = "their JSON, all together"),
    KEY("ttl_seconds", GW_CFG_INT, gw_config, responses_ttl_seconds, .lo = 1, .hi = GW_MAX_TIMEOUT_S,
        .help = "a stored response expires after this"),
};
static const gw_cfg_section responses_section = {.name = "[responses]",
                                                 GW_CFG_KEYS(responses_keys),
                                                 CONFIG_SECTION,
                                                 .help =
                                                     "The Responses API's store (`previous_response_id`)."};

static const gw_cfg_key store_keys[] = {
    KEY("allow_private_sources", GW_CFG_BOOL, gw_config, store_allow_private_sources,
        .help = "true: pulls may use http:// and loopback, private, link-local addresses"),
};
static const gw_cfg_section store_section = {.name = "[store]",
                                             GW_CFG_KEYS(store_keys),
                                             CONFIG_SECTION,
                                             .help = "The model store as `/api/pull` changes it."};

static const gw_cfg_key media_keys[] = {
    KEY("fetch", GW_CFG_BOOL, gw_config, media_fetch,
        .help = "true: the gateway fetches them for local targets; false: a 400 naming this key"),
    KEY("fetch_max_bytes", GW_CFG_SIZE, gw_config, media_fetch_max_bytes, .lo = 1, .hi = GW_MAX_LIMIT,
        .default_doc = "`[limits]` image_max_bytes", .help = "one image's body"),
    KEY("fetch_timeout_ms", GW_CFG_INT, gw_config, media_fetch_timeout_ms, .lo = 1, .hi = GW_MAX_TIMEOUT_MS,
        .help = "a request's fetches, all together (and never past its own deadline)"),
    KEY("fetch_allow_private", GW_CFG_BOOL, gw_config, media_fetch_allow_private,
        .help = "true: fetches may reach loopback, private and link-local addresses"),
};
static const gw_cfg_section media_section = {
    .name = "[media]",
    GW_CFG_KEYS(media_keys),
    CONFIG_SECTION,
    .help = "Images chats name by http(s) URL (see Images and audio): off by default, since it has the "
            "server reach an address a caller chose."};

static const gw_cfg_key web_keys[] = {
    KEY("serve_model_files", GW_CFG_BOOL, gw_config, web_serve_model_files,
        .help = "true: `GET /v1/models/NAME/file` serves local targets' GGUF files"),
    KEY("runtime_dir", GW_CFG_PATH, gw_config, web_runtime_dir,
        .default_doc = "web/ beside the binary's bin/", .help = "make web's browser runtime (`build/web`)"),
};
static const gw_cfg_section web_section = {.name = "[web]",
                                           GW_CFG_KEYS(web_keys),
                                           CONFIG_SECTION,
                                           .help =
                                               "The web page's \"run in this browser\" mode (docs/web.md)."};

#define LIMIT(name, doc)                                                                                     \
    {                                                                                                        \
        .key = #name, .kind = GW_CFG_SIZE, .offset = offsetof(gw_config, limits.name), .lo = 1,              \
        .hi = GW_MAX_LIMIT, .help = doc                                                                      \
    }
static const gw_cfg_key limits_keys[] = {
    LIMIT(schema_max_bytes, "JSON of the request's schemas together (tools, response_format, json_schema)"),
    LIMIT(schema_max_depth, "nesting of objects and arrays within one schema"),
    LIMIT(schema_max_properties, "\"properties\" of one object (the converter's cost grows with their cube)"),
    LIMIT(schema_max_total_properties, "\"properties\" of every object of the request together"),
    LIMIT(schema_max_enum, "values of one \"enum\" (each is scanned at every token)"),
    LIMIT(schema_max_refs, "\"$ref\"s together; each must be a local \"#/...\" pointer that resolves"),
    LIMIT(grammar_max_bytes, "a GBNF \"grammar\""),
    LIMIT(grammar_max_alternatives, "its '\\|'s outside literals, classes and comments"),
    LIMIT(image_max_bytes, "one image or audio file, decoded (see Images and audio)"),
    LIMIT(image_max_pixels, "one image's width x height, read from its header before decoding"),
    LIMIT(media_max_items, "images and audio clips of one request"),
    KEY("schema_convert_ms", GW_CFG_INT, gw_config, limits.schema_convert_ms, .lo = 1,
        .hi = GW_MAX_TIMEOUT_MS, .help = "converting the request's schemas to a grammar, all together"),
    KEY("max_audio_seconds", GW_CFG_SECONDS, gw_config, limits.max_audio_seconds, .lo = 1,
        .hi = GW_MAX_AUDIO_SECONDS,
        .help = "one audio clip's length, from its header before decoding (8-192 kHz only)"),
    KEY("media_max_decoded_mb", GW_CFG_MB, gw_config, limits.media_max_decoded_bytes, .lo = 1,
        .hi = GW_MAX_MEDIA_MB,
        .help = "one request's images and audio together, decoded (width x height x 3; samples x 4 at the "
                "projector's rate), counted from the headers"),
    KEY("media_decoded_budget_mb", GW_CFG_MB, gw_config, media_decoded_budget, .lo = 1, .hi = GW_MAX_MEDIA_MB,
        .help = "every request's decoded media at once; past it a request waits: 429"),
    KEY("max_speech_chars", GW_CFG_SIZE, gw_config, max_speech_chars, .lo = 1, .hi = GW_MAX_LIMIT,
        .help = "one `/v1/audio/speech` input, in characters (OpenAI's bound)"),
};
static const gw_cfg_section limits_section = {
    .name = "[limits]",
    GW_CFG_KEYS(limits_keys),
    CONFIG_SECTION,
    .help = "Bounds on a request's schemas, grammars and media (see Structured output; sipp_schema_limits in "
            "sipp.h)."};

/* ---- [[tokens]] ---------------------------------------------------------------------------------- */

static void check_token(gw_cfg_ctx *x, const toml_node *t, void *obj) {
    gw_token_config *tc = obj;
    (void)t;
    if (!tc->env)
        gw_cfg_err(x, tc->line, "%s: 'env' is missing: name the environment variable that holds the secret",
                   x->where);
    if (!tc->caller) tc->caller = strdup(tc->env ? tc->env : "token");
}

static const gw_cfg_key token_keys[] = {
    KEY("env", GW_CFG_STRING, gw_token_config, env, .default_doc = "required",
        .help = "the environment variable that holds the bearer secret (at least 16 bytes)"),
    KEY("caller", GW_CFG_STRING, gw_token_config, caller, .default_doc = "env",
        .help = "a name for logs, the rate limit and stored responses"),
    LIST_KEY("targets", gw_token_config, targets, .default_doc = "all",
             .help = "the targets it may use; absent or empty = all"),
    KEY("admin", GW_CFG_BOOL, gw_token_config, admin,
        .help = "true: may load/unload models and change the store"),
};
static const gw_cfg_section token_section = {
    .name = "[[tokens]]", GW_CFG_KEYS(token_keys), .check = check_token, .obj_size = sizeof(gw_token_config)};

/* [[tokens]], [[targets]], [[mcp]]: an array of tables, each read by one. */
typedef void (*read_entry_fn)(gw_cfg_ctx *x, const toml_node *t, gw_config *c, char *where);

static void read_array(gw_cfg_ctx *x, const toml_node *tbl, const gw_cfg_key *k, void *obj, const char *title,
                       void **items, size_t item_size, read_entry_fn read) {
    const toml_node *arr = toml_table_get(tbl, k->key);
    if (!arr || !gw_cfg_expect(x, arr, TOML_ARRAY, title, "an array of tables")) return;
    size_t n = toml_array_len(arr);
    *items = calloc(n ? n : 1, item_size);
    const char *top = x->where;
    for (size_t i = 0; *items && i < n; i++) {
        const toml_node *t = toml_array_at(arr, i);
        char where[WHERE_SIZE];
        snprintf(where, sizeof where, "%s #%zu", title, i + 1);
        x->where = where;
        if (gw_cfg_expect(x, t, TOML_TABLE, "", "a table")) read(x, t, obj, where);
    }
    x->where = top;
}

static void read_token(gw_cfg_ctx *x, const toml_node *t, gw_config *c, char *where) {
    (void)where;
    gw_token_config *tc = &c->tokens[c->n_tokens++];
    tc->line = toml_node_line(t);
    gw_cfg_read_section(x, t, &token_section, tc);
}

static void read_tokens(gw_cfg_ctx *x, const toml_node *tbl, const gw_cfg_key *k, void *obj) {
    gw_config *c = obj;
    read_array(x, tbl, k, obj, "[[tokens]]", (void **)&c->tokens, sizeof *c->tokens, read_token);
}

/* ---- [[targets]] --------------------------------------------------------------------------------- */

static bool is_recipe(const gw_target_config *tc, const char *recipe) {
    return tc->recipe && strcmp(tc->recipe, recipe) == 0;
}

/* A target's model: a path (relative to the config file) or, when no such file exists and the value
 * has no '/', a model in the local store by name. */
static char *resolve_model(gw_cfg_ctx *x, const gw_target_config *tc, const char *model) {
    char *path = gw_cfg_resolve_path(x->path, model);
    struct stat st;
    if (!path || strchr(model, '/') || stat(path, &st) == 0) return path;
    char found[PATH_MAX], err[SIPP_ERROR_SIZE];
    free(path);
    if (sipp_store_resolve(model, found, sizeof found, err) == SIPP_OK) return strdup(found);
    gw_cfg_err(x, tc->line, "%s: %s", x->where, err);
    return NULL; /* reported here; validation skips a target without a path */
}

/* model: a path or a store name; none for flite, whose voices are built into the library. */
static void read_model(gw_cfg_ctx *x, const toml_node *t, const gw_cfg_key *k, void *obj) {
    gw_target_config *tc = obj;
    const toml_node *n;
    const char *model = get_text(x, t, k->key, &n);
    bool flite = is_recipe(tc, "flite");
    if (!model && !flite)
        gw_cfg_err(x, tc->line, "%s: a local target needs model = \"PATH.gguf\" or a store name", x->where);
    else if (model && flite)
        gw_cfg_err(x, toml_node_line(n),
                   "%s model: recipe \"flite\" speaks with flite's built-in voices and takes no model file; "
                   "drop model, or use recipe = \"tts\" for a Qwen3-TTS / Pocket TTS pair",
                   x->where);
    else if (model)
        tc->model_path = resolve_model(x, tc, model);
}

static bool check_flash_attn(const void *obj, const char *value, char *err) {
    (void)obj;
    return sipp_flash_attn_check(value, err) == SIPP_OK;
}

/* The KV cache's types: known ones, and a quantized V cache only where the target's flash attention
 * (flash_attn and backend, read before) is not off. */
static bool check_cache_type(const gw_target_config *tc, const char *k, const char *v, char *err) {
    sipp_model_params mp = sipp_model_default_params();
    mp.backend = tc->backend;
    mp.flash_attn = tc->flash_attn;
    return sipp_kv_cache_check(&mp, k, v, err) == SIPP_OK;
}
static bool check_cache_k(const void *obj, const char *value, char *err) {
    return check_cache_type(obj, value, NULL, err);
}
static bool check_cache_v(const void *obj, const char *value, char *err) {
    return check_cache_type(obj, NULL, value, err);
}

/* draft_model: like model; it goes with speculative "draft" (the default when it is given). */
static void read_draft_model(gw_cfg_ctx *x, const toml_node *t, const gw_cfg_key *k, void *obj) {
    gw_target_config *tc = obj;
    const toml_node *n, *sn = toml_table_get(t, "speculative");
    const char *draft = get_text(x, t, k->key, &n);
    bool wants_draft = tc->speculative && strcmp(tc->speculative, "draft") == 0;
    if (draft) tc->draft_model = resolve_model(x, tc, draft);
    if (draft && tc->speculative && !wants_draft)
        gw_cfg_err(x, toml_node_line(n), "%s draft_model: given, but speculative is '%s'; drop one of them",
                   x->where, tc->speculative);
    if (!draft && wants_draft)
        gw_cfg_err(x, gw_cfg_line(t, sn),
                   "%s speculative: 'draft' needs draft_model = \"PATH.gguf\" (or a store name)", x->where);
}

/* lora = [{path = "A.gguf", scale = 1.0}, ...]: each path a file (relative to the config file). */
static void read_lora_path(gw_cfg_ctx *x, const toml_node *e, const gw_cfg_key *k, void *obj) {
    gw_lora *l = obj;
    const toml_node *n;
    const char *path = get_text(x, e, k->key, &n);
    if (!n) gw_cfg_err(x, toml_node_line(e), "%s: 'path' is missing: the adapter's GGUF file", x->where);
    if (!path) return;
    l->path = gw_cfg_resolve_path(x->path, path);
    struct stat st;
    if (l->path && (stat(l->path, &st) != 0 || !S_ISREG(st.st_mode)))
        gw_cfg_err(x, toml_node_line(e), "%s path: '%s' is not a file", x->where, l->path);
}

static const gw_cfg_key lora_keys[] = {
    CUSTOM_KEY("path", read_lora_path, .value_doc = "path (relative to the file)", .default_doc = "required",
               .help = "a LoRA adapter (GGUF, as llama.cpp's convert_lora_to_gguf writes it)"),
    KEY("scale", GW_CFG_FRACTION, gw_lora, scale, .lo = -GW_LORA_SCALE_MAX, .hi = GW_LORA_SCALE_MAX,
        .help = "0 loads it off (a request or `POST /lora-adapters` turns it on)"),
};
static void init_lora(void *obj) { ((gw_lora *)obj)->scale = 1.0f; }
static const gw_cfg_section lora_section = {.name = "lora = [{...}]",
                                            GW_CFG_KEYS(lora_keys),
                                            .obj_size = sizeof(gw_lora),
                                            .init = init_lora,
                                            .help =
                                                "A local target's LoRA adapters, ids 0, 1, ... in order."};

static void read_lora(gw_cfg_ctx *x, const toml_node *t, const gw_cfg_key *k, void *obj) {
    gw_target_config *tc = obj;
    const toml_node *n = toml_table_get(t, k->key);
    if (!n || !gw_cfg_expect(x, n, TOML_ARRAY, k->key, "an array of {path, scale} tables")) return;
    size_t count = toml_array_len(n);
    if (count > GW_LORA_MAX) {
        gw_cfg_err(x, toml_node_line(n), "%s lora: %zu adapters; at most %d", x->where, count, GW_LORA_MAX);
        return;
    }
    tc->lora = calloc(count ? count : 1, sizeof *tc->lora);
    const char *where = x->where;
    for (size_t i = 0; tc->lora && i < count; i++) {
        const toml_node *e = toml_array_at(n, i);
        char w[WHERE_SIZE];
        snprintf(w, sizeof w, "%s lora[%zu]", where, i);
        x->where = w;
        if (!gw_cfg_expect(x, e, TOML_TABLE, "", "a table {path, scale}")) continue;
        gw_lora *l = &tc->lora[tc->n_lora++];
        init_lora(l);
        gw_cfg_read_section(x, e, &lora_section, l);
    }
    x->where = where;
}

/* mmproj: a projector file (like model: a path or a store name), or "auto" (found at validation). */
static void read_mmproj(gw_cfg_ctx *x, const toml_node *t, const gw_cfg_key *k, void *obj) {
    gw_target_config *tc = obj;
    const toml_node *n;
    const char *mmproj = get_text(x, t, k->key, &n);
    if (mmproj && strcmp(mmproj, MMPROJ_AUTO) == 0)
        tc->mmproj_auto = true;
    else if (mmproj)
        tc->mmproj = resolve_model(x, tc, mmproj);
}

/* speaker: a reference clip (a path, resolved like model) of a recipe "tts" pair. */
static void read_speaker(gw_cfg_ctx *x, const toml_node *t, const gw_cfg_key *k, void *obj) {
    gw_target_config *tc = obj;
    const toml_node *n;
    const char *speaker = get_text(x, t, k->key, &n);
    if (speaker) tc->speaker = gw_cfg_resolve_path(x->path, speaker);
    if (n && tc->recipe && !is_recipe(tc, "tts")) /* absent: told from the projector later */
        gw_cfg_err(x, toml_node_line(n),
                   "%s speaker: only a recipe = \"tts\" pair speaks in a reference voice", x->where);
}

/* speakers = { NAME = "CLIP", ... }: a recipe "tts" pair's other voices (paths resolved like model). */
static void read_speakers(gw_cfg_ctx *x, const toml_node *t, const gw_cfg_key *k, void *obj) {
    gw_target_config *tc = obj;
    const toml_node *n = toml_table_get(t, k->key);
    if (!n || !gw_cfg_expect(x, n, TOML_TABLE, k->key, "a table of voice names and clips")) return;
    size_t count = toml_table_len(n);
    if (count > GW_SPEAKERS_MAX) {
        gw_cfg_err(x, toml_node_line(n), "%s speakers: %zu voices; at most %d", x->where, count,
                   GW_SPEAKERS_MAX);
        return;
    }
    tc->speaker_names = calloc(count ? count : 1, sizeof *tc->speaker_names);
    tc->speaker_paths = calloc(count ? count : 1, sizeof *tc->speaker_paths);
    for (size_t i = 0; tc->speaker_names && tc->speaker_paths && i < count; i++) {
        const toml_entry *e = toml_table_at(n, i);
        const char *path = NULL;
        if (strlen(e->key) != e->key_len || !*e->key || !strcmp(e->key, "default")) {
            gw_cfg_err(x, e->line, "%s speakers: a voice needs a name other than \"default\"", x->where);
        } else if (!toml_get_string(e->value, &path, NULL, NULL, 0)) {
            gw_cfg_err(x, e->line, "%s speakers.%s: give the clip's path as a string", x->where, e->key);
        } else {
            tc->speaker_names[tc->n_speakers] = strdup(e->key);
            tc->speaker_paths[tc->n_speakers++] = gw_cfg_resolve_path(x->path, path);
        }
    }
    if (tc->recipe && !is_recipe(tc, "tts")) /* absent: told from the projector later */
        gw_cfg_err(x, toml_node_line(n),
                   "%s speakers: only a recipe = \"tts\" pair speaks in reference voices", x->where);
}

/* language: a speech target's default language (a pair's or whisper's; flite speaks English only). */
static void read_language(gw_cfg_ctx *x, const toml_node *t, const gw_cfg_key *k, void *obj) {
    gw_target_config *tc = obj;
    const toml_node *n;
    const char *language = get_text(x, t, k->key, &n);
    if (language && (!*language || strlen(language) >= GW_LANGUAGE_MAX))
        gw_cfg_err(x, toml_node_line(n), "%s language: give a language's code or name (en, zh, german, ...)",
                   x->where);
    else if (language)
        tc->language = strdup(language);
    if (n && tc->recipe && !is_recipe(tc, "tts") && !is_recipe(tc, "whispercpp")) /* absent: told later */
        gw_cfg_err(x, toml_node_line(n),
                   "%s language: only a speech target (recipe \"tts\" or \"whispercpp\") has one", x->where);
}

/* batch_frames: a recipe "tts" pair's shared backbone (sipp_tts_params.batch_frames). */
static void read_batch_frames(gw_cfg_ctx *x, const toml_node *t, const gw_cfg_key *k, void *obj) {
    gw_target_config *tc = obj;
    const gw_cfg_key plain = {.key = k->key, .kind = GW_CFG_BOOL};
    const toml_node *n = toml_table_get(t, k->key);
    if (!n || !gw_cfg_read_key(x, t, &plain, &tc->batch_frames)) return;
    if (tc->recipe && !is_recipe(tc, "tts")) /* absent: told from the projector later */
        gw_cfg_err(x, toml_node_line(n),
                   "%s batch_frames: only a recipe = \"tts\" pair (Qwen3-TTS) batches frames", x->where);
}

/* voice: flite's default voice, checked against the voices flite has. */
static void read_voice(gw_cfg_ctx *x, const toml_node *t, const gw_cfg_key *k, void *obj) {
    gw_target_config *tc = obj;
    const toml_node *n;
    const char *voice = get_text(x, t, k->key, &n);
    if (voice) tc->voice = strdup(voice);
    if (n && !is_recipe(tc, "flite"))
        gw_cfg_err(x, toml_node_line(n), "%s voice: only recipe = \"flite\" has voices to choose from",
                   x->where);
    if (!tc->voice) return;
    sipp_tts_params p = sipp_tts_default_params();
    p.model = "flite";
    p.voice = tc->voice;
    sipp_tts *flite = NULL;
    char err[SIPP_ERROR_SIZE];
    if (sipp_tts_new(&p, &flite, err) != SIPP_OK)
        gw_cfg_err(x, toml_node_line(n), "%s voice: %s", x->where, err);
    sipp_tts_free(flite);
}

/* chat_template: "chatml" or a template file (relative to the config file's directory). */
static void read_chat_template(gw_cfg_ctx *x, const toml_node *t, const gw_cfg_key *k, void *obj) {
    gw_target_config *tc = obj;
    const toml_node *n;
    const char *tmpl = get_text(x, t, k->key, &n);
    if (tmpl)
        tc->chat_template = strcmp(tmpl, "chatml") == 0 ? strdup(tmpl) : gw_cfg_resolve_path(x->path, tmpl);
}

/* ctx_size: tokens, or "auto" (the largest context that fits the memory budget, worked out at start). */
static void read_ctx_size(gw_cfg_ctx *x, const toml_node *t, const gw_cfg_key *k, void *obj) {
    gw_target_config *tc = obj;
    const toml_node *n = toml_table_get(t, k->key);
    if (!n || toml_node_kind(n) != TOML_STRING) {
        const gw_cfg_key tokens = {.key = k->key, .kind = GW_CFG_INT, .lo = 0, .hi = GW_MAX_CTX};
        gw_cfg_read_key(x, t, &tokens, &tc->ctx_size);
        return;
    }
    const char *s = get_text(x, t, k->key, &n);
    tc->ctx_auto = s && strcmp(s, "auto") == 0;
    if (s && !tc->ctx_auto)
        gw_cfg_err(x, toml_node_line(n), "%s ctx_size: '%s' is not a number of tokens or \"auto\"", x->where,
                   s);
}

/* rpc = ["host:port", ...], joined by ',' as SIPP_RPC_SERVERS takes them. */
typedef struct strv {
    char **v;
    size_t n;
} strv;

static void read_rpc(gw_cfg_ctx *x, const toml_node *t, const gw_cfg_key *k, void *obj) {
    gw_target_config *tc = obj;
    const gw_cfg_key strings = {.key = k->key, .kind = GW_CFG_LIST, .count_offset = offsetof(strv, n)};
    const toml_node *rn = toml_table_get(t, k->key);
    strv servers = {0};
    if (!rn) return;
    gw_cfg_read_key(x, t, &strings, &servers);
    sipp_buf joined = {0};
    for (size_t i = 0; i < servers.n; i++)
        sipp_buf_appendf(&joined, "%s%s", i ? "," : "", servers.v[i]);
    gw_cfg_free_strv(servers.v, servers.n);
    char err[SIPP_ERROR_SIZE];
    if (!joined.data || sipp_rpc_check_servers(joined.data, err) != SIPP_OK)
        gw_cfg_err(x, toml_node_line(rn), "%s rpc: %s", x->where,
                   joined.data ? err : "give at least one \"host:port\"");
    tc->rpc_servers = joined.data;
}

/* tensor_split = [1, 2, 2] (local first) as "1,2,2"; then what backend "rpc" needs and only it takes. */
static void read_tensor_split(gw_cfg_ctx *x, const toml_node *t, const gw_cfg_key *k, void *obj) {
    gw_target_config *tc = obj;
    const toml_node *sn = toml_table_get(t, k->key), *rn = toml_table_get(t, "rpc");
    if (sn && gw_cfg_expect(x, sn, TOML_ARRAY, k->key, "an array of numbers")) {
        sipp_buf split = {0};
        for (size_t i = 0; i < toml_array_len(sn); i++) {
            const toml_node *e = toml_array_at(sn, i);
            double v = -1;
            if (toml_node_kind(e) == TOML_FLOAT || toml_node_kind(e) == TOML_INTEGER)
                toml_get_float(e, &v, NULL, 0);
            if (!(v >= 0) || isinf(v))
                gw_cfg_err(x, gw_cfg_line(sn, e),
                           "%s tensor_split: element %zu must be a non-negative number", x->where, i);
            sipp_buf_appendf(&split, "%s%g", i ? "," : "", v);
        }
        tc->tensor_split = split.data;
    }
    bool is_rpc = tc->backend && strcmp(tc->backend, "rpc") == 0;
    if (!is_rpc && (rn || sn))
        gw_cfg_err(x, toml_node_line(rn ? rn : sn),
                   "%s %s: only used with backend = \"rpc\" (the backend is '%s')", x->where,
                   rn ? "rpc" : "tensor_split", tc->backend ? tc->backend : "auto");
    if (is_rpc && !rn && !getenv("SIPP_RPC_SERVERS"))
        gw_cfg_err(x, tc->line,
                   "%s: backend \"rpc\" needs its servers: rpc = [\"host:port\", ...] (or SIPP_RPC_SERVERS)",
                   x->where);
}

/* keep_alive = SECONDS (-1 forever, 0 unload when idle) or "30s", "5m", "1h". */
static void read_keep_alive(gw_cfg_ctx *x, const toml_node *t, const gw_cfg_key *k, void *obj) {
    gw_target_config *tc = obj;
    const toml_node *n = toml_table_get(t, k->key);
    if (!n) return;
    if (toml_node_kind(n) == TOML_INTEGER) {
        const gw_cfg_key seconds = {
            .key = k->key, .kind = GW_CFG_INT64, .lo = GW_KEEP_ALIVE_FOREVER, .hi = GW_MAX_KEEP_ALIVE_S};
        gw_cfg_read_key(x, t, &seconds, &tc->keep_alive_s);
        return;
    }
    const char *s = NULL;
    size_t len = 0;
    if (toml_node_kind(n) != TOML_STRING || !toml_get_string(n, &s, &len, NULL, 0) || strlen(s) != len ||
        !gw_parse_keep_alive(s, &tc->keep_alive_s))
        gw_cfg_err(x, toml_node_line(n),
                   "%s keep_alive: expected seconds (-1 = forever, 0 = unload when idle) or a duration like "
                   "\"30s\", \"5m\", \"1h\" up to %d s",
                   x->where, GW_MAX_KEEP_ALIVE_S);
}

static void init_target(void *obj) { gw_target_config_init(obj); }
static void fini_target(void *obj) { gw_target_config_free(obj); }
#define TARGET_SECTION .obj_size = sizeof(gw_target_config), .init = init_target, .fini = fini_target

/* The local target's keys, in the order they are read. */
static const gw_cfg_key local_keys[] = {
    KEY("recipe", GW_CFG_ENUM, gw_target_config, recipe, .values = "llamacpp|whispercpp|tts|flite",
        .default_doc = "the file says",
        .help = "what serves it (see Recipes below): llamacpp (a GGUF), whispercpp (a whisper.cpp "
                "`ggml-*.bin`), tts, flite"),
    CUSTOM_KEY("model", read_model, .value_doc = "path (relative to the file) or a store name",
               .default_doc = "required (none for flite)", .help = "the model file"),
    KEY("backend", GW_CFG_STRING, gw_target_config, backend,
        .help = "auto, cpu, vulkan, cuda, metal, webgpu, rpc"),
    KEY("flash_attn", GW_CFG_ENUM, gw_target_config, flash_attn, .values = "auto|on|off",
        .check = check_flash_attn, .default_doc = "`\"auto\"`",
        .help = "flash attention; auto is llama.cpp's default (off for backend \"cpu\")"),
    KEY("speculative", GW_CFG_ENUM, gw_target_config, speculative, .values = "none|ngram|draft",
        .default_doc = "`\"none\"` (`\"draft\"` with draft_model)",
        .help = "speculative decoding: ngram (prompt lookup), draft (not with repeat penalties)"),
    CUSTOM_KEY("draft_model", read_draft_model, .value_doc = "path (relative to the file) or a store name",
               .default_doc = "none",
               .help = "speculative \"draft\"'s model: same vocabulary; readable like model"),
    KEY("draft_max", GW_CFG_INT, gw_target_config, draft_max, .lo = 1, .hi = SIPP_DRAFT_MAX,
        .default_doc = "the engine's (8)", .help = "tokens proposed per step"),
    KEY("draft_min", GW_CFG_INT, gw_target_config, draft_min, .lo = 1, .hi = SIPP_DRAFT_MAX,
        .default_doc = "the engine's (1)", .help = "shorter proposals are not verified"),
    KEY("draft_p_min", GW_CFG_FRACTION, gw_target_config, draft_p_min, .lo = 0, .hi = 1,
        .help = "the draft stops at a token it gives less than this"),
    KEY("draft_cutoff", GW_CFG_ENUM, gw_target_config, draft_cutoff, .values = "auto|off",
        .default_doc = "`\"auto\"`",
        .help = "auto: measured costs pick each step's draft length (0 = plain); off: draft_max"),
    KEY("cache_type_k", GW_CFG_ENUM, gw_target_config, cache_type_k, .values = "f16|q8_0|q4_0",
        .check = check_cache_k, .default_doc = "`\"f16\"`",
        .help = "the KV cache's key type (q8_0: about half the bytes)"),
    KEY("cache_type_v", GW_CFG_ENUM, gw_target_config, cache_type_v, .values = "f16|q8_0|q4_0",
        .check = check_cache_v, .default_doc = "`\"f16\"`",
        .help = "its value type; q8_0 and q4_0 need flash attention (not off, nor backend \"cpu\" without "
                "flash_attn = \"on\")"),
    CUSTOM_KEY("lora", read_lora, .value_doc = "array of `{path, scale}` tables", .default_doc = "none",
               .help = "LoRA adapters (`lora = [...]` below)"),
    KEY("pooling", GW_CFG_ENUM, gw_target_config, pooling, .values = "none|mean|cls|last|rank",
        .refusal = "is not one of none, mean, cls, last, rank (\"rank\": a reranker)",
        .default_doc = "the model's",
        .help =
            "the embedding context's pooling; rank: a reranker (`/v1/rerank`, as llama-server `--rerank`)"),
    CUSTOM_KEY(
        "mmproj", read_mmproj, .value_doc = "path (relative to the file), a store name, or \"auto\"",
        .default_doc = "none",
        .help =
            "a projector: images (and audio) in chats; \"auto\" = the one `mmproj*.gguf` beside the model"),
    KEY("mmproj_offload", GW_CFG_BOOL, gw_target_config, mmproj_offload,
        .help = "run the projector on the model's GPU backend (never for backend \"cpu\")"),
    CUSTOM_KEY("speaker", read_speaker, .value_doc = "path (relative to the file)", .default_doc = "none",
               .help = "recipe tts: a clip of the voice to speak in (WAV, MP3 or FLAC, at most 60 s)"),
    CUSTOM_KEY(
        "language", read_language, .value_doc = "a code or name (en, zh, german, ...)",
        .default_doc = "the model's",
        .help = "recipe tts or whispercpp: the language a request without one is spoken or transcribed in"),
    CUSTOM_KEY("speakers", read_speakers, .value_doc = "table of name = clip path", .default_doc = "none",
               .help = "recipe tts: more voices, each a reference clip a request's `voice` names"),
    CUSTOM_KEY("batch_frames", read_batch_frames, .value_doc = "true or false", .default_doc = "`false`",
               .help =
                   "recipe tts, a Qwen3-TTS pair: the calls at once share one backbone context and decode "
                   "their frames in one batch (off: a context per call; see docs/speech.md)"),
    CUSTOM_KEY("voice", read_voice, .value_doc = "kal, kal16, slt, rms, awb", .default_doc = "`\"slt\"`",
               .help = "recipe flite: its voice"),
    CUSTOM_KEY("chat_template", read_chat_template,
               .value_doc = "\"chatml\" or a path (relative to the file)", .default_doc = "the model's",
               .help = "the chat template (see Chat templates)"),
    CUSTOM_KEY("ctx_size", read_ctx_size, .value_doc = "integer, 0 to 16777216, or \"auto\"",
               .default_doc = "`0`",
               .help = "tokens, shared by the slots (0 = the model's, at most 4096; \"auto\" = the largest "
                       "that fits the "
                       "memory budget, below)"),
    KEY("parallel", GW_CFG_INT, gw_target_config, parallel, .lo = 1, .hi = GW_MAX_PARALLEL,
        .help = "slots: requests generated at once"),
    KEY("threads", GW_CFG_INT, gw_target_config, threads, .lo = 0, .hi = GW_MAX_THREADS,
        .help = "CPU threads (0 = all cores)"),
    KEY("gpu_layers", GW_CFG_INT, gw_target_config, gpu_layers, .lo = -1, .hi = GW_MAX_GPU_LAYERS,
        .help = "layers on the GPU backend; -1 = all"),
    CUSTOM_KEY("rpc", read_rpc, .value_doc = "array of \"host:port\"", .default_doc = "`$SIPP_RPC_SERVERS`",
               .help = "backend \"rpc\" only (docs/scale-out.md): the rpc servers"),
    CUSTOM_KEY("tensor_split", read_tensor_split, .value_doc = "array of numbers",
               .default_doc = "by free memory",
               .help = "backend \"rpc\" only: the layer shares, local first, then each server"),
    KEY("policy", GW_CFG_CHOICE, gw_target_config, policy,
        .values = "balanced|latency_first|throughput_first",
        .help = "how the scheduler orders decode and prefill"),
    KEY("load", GW_CFG_CHOICE, gw_target_config, load, .values = "startup|on_demand",
        .refusal = "is not \"startup\" or \"on_demand\"",
        .help = "when the model is loaded (docs/residency.md)"),
    CUSTOM_KEY("keep_alive", read_keep_alive,
               .value_doc = "seconds (-1 = forever, 0 = unload when idle) or \"30s\", \"5m\", \"1h\"",
               .default_doc = "`-1`", .help = "idle time before it is unloaded (docs/residency.md)"),
    KEY("pin", GW_CFG_BOOL, gw_target_config, pin, .help = "never evicted to make room"),
    KEY("repack", GW_CFG_BOOL, gw_target_config, repack,
        .help = "repack CPU weights at load for faster kernels"),
    KEY("max_tokens", GW_CFG_INT, gw_target_config, max_tokens, .lo = 1, .hi = GW_MAX_CTX,
        .default_doc = "none",
        .help =
            "output cap: the default of a request that gives none, the ceiling of one that asks more (like "
            "llama-server's -n)"),
};

/* base_url or base_urls: one upstream, or several tried in turn. */
static void read_base_urls(gw_cfg_ctx *x, const toml_node *t, const gw_cfg_key *k, void *obj) {
    gw_target_config *tc = obj;
    const toml_node *one, *many = toml_table_get(t, "base_urls");
    const char *single = get_text(x, t, k->key, &one);
    const gw_cfg_key urls = {.key = "base_urls", LIST(gw_target_config, base_urls)};
    if (one && many)
        gw_cfg_err(x, toml_node_line(many), "%s: give base_url or base_urls, not both", x->where);
    if (single && (tc->base_urls = calloc(1, sizeof *tc->base_urls)) && (tc->base_urls[0] = strdup(single)))
        tc->n_base_urls = 1;
    else if (!single && many)
        gw_cfg_read_key(x, t, &urls, tc);
    if (tc->n_base_urls == 0)
        gw_cfg_err(
            x, tc->line,
            "%s: an openai_compatible target needs base_url (or base_urls), e.g. \"http://10.0.0.2:8080/v1\"",
            x->where);
    for (size_t i = 0; i < tc->n_base_urls; i++) {
        char *u = tc->base_urls[i];
        for (size_t n = strlen(u); n > 0 && u[n - 1] == '/';)
            u[--n] = '\0';
        if (strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0)
            gw_cfg_err(x, gw_cfg_line(t, one ? one : many),
                       "%s: base URL '%s' must start with http:// or https://", x->where, u);
    }
}

static void read_nothing(gw_cfg_ctx *x, const toml_node *t, const gw_cfg_key *k, void *obj) {
    (void)x, (void)t, (void)k, (void)obj; /* base_urls: read with base_url */
}

static const gw_cfg_key remote_keys[] = {
    CUSTOM_KEY("base_url", read_base_urls, .value_doc = "http(s) URL",
               .default_doc = "required (or base_urls)",
               .help = "the upstream's API root, e.g. `\"http://10.0.0.2:8080/v1\"`"),
    CUSTOM_KEY("base_urls", read_nothing, .value_doc = "array of http(s) URLs", .default_doc = "none",
               .help = "several upstreams serving the same model"),
    KEY("model", GW_CFG_STRING, gw_target_config, remote_model, .default_doc = "the target's name",
        .help = "the model name sent upstream"),
    KEY("api_key_env", GW_CFG_STRING, gw_target_config, api_key_env,
        .help = "the environment variable that holds the upstream's bearer key"),
    KEY("timeout_seconds", GW_CFG_INT, gw_target_config, timeout_seconds, .lo = 1, .hi = GW_MAX_TIMEOUT_S,
        .help = "one upstream request"),
};

static const gw_cfg_key target_keys[] = {
    KEY("name", GW_CFG_STRING, gw_target_config, name, .default_doc = "required",
        .help = "what clients send as \"model\""),
    KEY("type", GW_CFG_CHOICE, gw_target_config, type, .values = "local|openai_compatible",
        .help =
            "local: a model this gateway runs; openai_compatible: another sipp, llama-server, a provider"),
    LIST_KEY("aliases", gw_target_config, aliases,
             .help =
                 "other model names routed here (globs, e.g. `\"claude-*\"`): the first target whose glob "
                 "matches wins"),
};
static const gw_cfg_section target_section = {
    .name = "[[targets]]", GW_CFG_KEYS(target_keys), TARGET_SECTION, .help = "Keys of either type."};
static const gw_cfg_section local_section = {
    .name = "[[targets]] type = \"local\"", GW_CFG_KEYS(local_keys), .also = &target_section, TARGET_SECTION};
static const gw_cfg_section remote_section = {.name = "[[targets]] type = \"openai_compatible\"",
                                              GW_CFG_KEYS(remote_keys),
                                              .also = &target_section,
                                              TARGET_SECTION};

/* The keys of each type, in the order of the type row's words. */
static const gw_cfg_section *const type_sections[] = {&local_section, &remote_section};

static const gw_cfg_key *target_key(const char *key) {
    for (size_t i = 0; i < sizeof target_keys / sizeof *target_keys; i++)
        if (strcmp(target_keys[i].key, key) == 0) return &target_keys[i];
    return NULL;
}

/* name first (messages name the target by it from then on), then type, which says the other keys. */
static void read_target(gw_cfg_ctx *x, const toml_node *t, gw_config *c, char *where) {
    gw_target_config *tc = &c->targets[c->n_targets++];
    gw_target_config_init(tc);
    tc->line = toml_node_line(t);
    gw_cfg_read_key(x, t, target_key("name"), tc);
    if (!tc->name) {
        gw_cfg_err(x, tc->line, "%s: 'name' is missing: the name clients give as \"model\"", where);
        tc->name = strdup("");
    } else {
        snprintf(where, WHERE_SIZE, "target '%s'", tc->name);
    }
    for (size_t k = 0; k + 1 < c->n_targets; k++)
        if (*tc->name && strcmp(c->targets[k].name, tc->name) == 0)
            gw_cfg_err(x, tc->line, "duplicate target name '%s' (first defined on line %d)", tc->name,
                       c->targets[k].line);
    if (gw_cfg_read_key(x, t, target_key("type"), tc)) gw_cfg_read_section(x, t, type_sections[tc->type], tc);
    gw_cfg_read_key(x, t, target_key("aliases"), tc);
}

static void read_targets(gw_cfg_ctx *x, const toml_node *tbl, const gw_cfg_key *k, void *obj) {
    gw_config *c = obj;
    read_array(x, tbl, k, obj, "[[targets]]", (void **)&c->targets, sizeof *c->targets, read_target);
}

/* ---- [[mcp]] ------------------------------------------------------------------------------------- */

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

/* url: an http(s) URL whose host is a loopback name or address, or in [server] mcp_allowed_hosts
 * (a gateway that reaches any host a config names is one edit away from reaching an internal one). */
static void check_mcp_url(gw_cfg_ctx *x, const gw_config *c, const gw_mcp_config *m) {
    char host[HOST_SIZE];
    if (!url_host(m->url, host, sizeof host)) {
        gw_cfg_err(x, m->line,
                   "%s url: '%s' is not an http:// or https:// URL (e.g. \"http://127.0.0.1:8931/mcp\")",
                   x->where, m->url);
        return;
    }
    if (gw_config_is_loopback(host)) return;
    for (size_t i = 0; i < c->n_mcp_allowed_hosts; i++)
        if (strcasecmp(c->mcp_allowed_hosts[i], host) == 0) return;
    gw_cfg_err(
        x, m->line,
        "%s url: host '%s' is not a loopback address; add it to [server] mcp_allowed_hosts to allow it",
        x->where, host);
}

/* env = { KEY = "VALUE", ... } as "KEY=VALUE" entries. */
static void read_mcp_env(gw_cfg_ctx *x, const toml_node *t, const gw_cfg_key *k, void *obj) {
    gw_mcp_config *m = obj;
    const toml_node *n = toml_table_get(t, k->key);
    if (!n || !gw_cfg_expect(x, n, TOML_TABLE, k->key, "a table of strings ({ KEY = \"VALUE\" })")) return;
    size_t count = toml_table_len(n);
    m->env = calloc(count ? count : 1, sizeof *m->env);
    for (size_t i = 0; m->env && i < count; i++) {
        const toml_entry *e = toml_table_at(n, i);
        const char *v = NULL;
        size_t len = 0;
        if (toml_node_kind(e->value) != TOML_STRING || !toml_get_string(e->value, &v, &len, NULL, 0) ||
            strlen(v) != len || strlen(e->key) != e->key_len || !*e->key || strchr(e->key, '=')) {
            gw_cfg_err(x, e->line, "%s env: '%s' must be a NAME (no '=') with a string value", x->where,
                       e->key);
            continue;
        }
        size_t size = e->key_len + len + 2;
        char *kv = malloc(size);
        if (kv) snprintf(kv, size, "%s=%s", e->key, v);
        if (kv) m->env[m->n_env++] = kv;
    }
}

static const gw_cfg_key mcp_keys[] = {
    KEY("name", GW_CFG_STRING, gw_mcp_config, name, .default_doc = "required",
        .help = "the server_label requests name it by"),
    LIST_KEY("command", gw_mcp_config, command, .default_doc = "none (or url)",
             .help =
                 "a program spoken to over stdin/stdout and its arguments, e.g. `[\"node\", \"server.js\"]`"),
    KEY("url", GW_CFG_STRING, gw_mcp_config, url, .default_doc = "none (or command)",
        .help = "a streamable HTTP endpoint on loopback or a host of `[server]` mcp_allowed_hosts"),
    LIST_KEY("allowed_tools", gw_mcp_config, allowed_tools, .default_doc = "every tool it lists",
             .help = "the tools requests may use"),
    KEY("timeout_seconds", GW_CFG_INT, gw_mcp_config, timeout_seconds, .lo = 1, .hi = GW_MAX_TIMEOUT_S,
        .help = "one call (initialize, tools/list, tools/call)"),
    CUSTOM_KEY("env", read_mcp_env, .value_doc = "table of strings", .default_doc = "none",
               .help = "added to a command's environment: `{ KEY = \"VALUE\" }`"),
};
static void init_mcp(void *obj) { ((gw_mcp_config *)obj)->timeout_seconds = GW_DEFAULT_MCP_TIMEOUT_S; }
static const gw_cfg_section mcp_section = {.name = "[[mcp]]",
                                           GW_CFG_KEYS(mcp_keys),
                                           .obj_size = sizeof(gw_mcp_config),
                                           .init = init_mcp,
                                           .help = "MCP servers the Responses API's tools may run."};

/* command or url, exactly one. */
static void check_mcp(gw_cfg_ctx *x, const toml_node *t, const gw_config *c, gw_mcp_config *m) {
    bool cmd = toml_table_get(t, "command") != NULL;
    if (cmd == (m->url != NULL))
        gw_cfg_err(
            x, m->line,
            "%s: give exactly one of 'command' (a program spoken to over stdin/stdout, e.g. [\"node\", "
            "\"server.js\"]) or 'url' (a streamable HTTP endpoint)",
            x->where);
    else if (cmd && m->n_command == 0)
        gw_cfg_err(x, m->line, "%s command: must name the program, e.g. [\"node\", \"server.js\"]", x->where);
    else if (m->url)
        check_mcp_url(x, c, m);
    if (m->url && m->n_env)
        gw_cfg_err(x, m->line, "%s env: only a 'command' server is started with an environment", x->where);
}

static void read_one_mcp(gw_cfg_ctx *x, const toml_node *t, gw_config *c, char *where) {
    gw_mcp_config *m = &c->mcp[c->n_mcp++];
    init_mcp(m);
    m->line = toml_node_line(t);
    gw_cfg_check_keys(x, t, &mcp_section);
    gw_cfg_read_key(x, t, &mcp_keys[0], m);
    if (!m->name) {
        gw_cfg_err(x, m->line, "%s: 'name' is missing: the server_label requests name this server by", where);
        m->name = strdup("");
    } else {
        snprintf(where, WHERE_SIZE, "[[mcp]] '%s'", m->name);
    }
    for (size_t i = 1; i < sizeof mcp_keys / sizeof *mcp_keys; i++)
        gw_cfg_read_key(x, t, &mcp_keys[i], m);
    check_mcp(x, t, c, m);
    for (size_t k = 0; k + 1 < c->n_mcp; k++)
        if (*m->name && strcmp(c->mcp[k].name, m->name) == 0)
            gw_cfg_err(x, m->line, "duplicate [[mcp]] name '%s' (first defined on line %d)", m->name,
                       c->mcp[k].line);
}

static void read_mcp(gw_cfg_ctx *x, const toml_node *tbl, const gw_cfg_key *k, void *obj) {
    gw_config *c = obj;
    read_array(x, tbl, k, obj, "[[mcp]]", (void **)&c->mcp, sizeof *c->mcp, read_one_mcp);
}

/* ---- the file ------------------------------------------------------------------------------------ */

#define SECTION(name, section)                                                                               \
    { .key = name, .kind = GW_CFG_TABLE, .sub = &section }
static const gw_cfg_key file_keys[] = {
    SECTION("server", server_section),
    SECTION("security", security_section),
    SECTION("responses", responses_section),
    SECTION("store", store_section),
    SECTION("media", media_section),
    SECTION("web", web_section),
    SECTION("limits", limits_section),
    {.key = "tokens", .kind = GW_CFG_CUSTOM, .read = read_tokens},
    {.key = "targets", .kind = GW_CFG_CUSTOM, .read = read_targets},
    {.key = "mcp", .kind = GW_CFG_CUSTOM, .read = read_mcp},
};
const gw_cfg_section gw_config_file = {.name = "the top level", GW_CFG_KEYS(file_keys)};

const gw_cfg_section *const gw_config_sections[] = {&server_section,    &rate_limit_section,
                                                    &responses_section, &store_section,
                                                    &media_section,     &web_section,
                                                    &limits_section,    &token_section,
                                                    &target_section,    &local_section,
                                                    &lora_section,      &remote_section,
                                                    &mcp_section,       NULL};
