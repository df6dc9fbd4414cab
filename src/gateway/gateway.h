/*
 * gateway.h: what the gateway's files share (internal; `sipp serve` is its only user).
 *
 * The gateway puts engines (local targets) and OpenAI-compatible servers (remote targets) behind one
 * HTTP endpoint. It is a thin client of sipp.h: nothing here knows about llama.cpp.
 *
 *   config.c          the TOML configuration: [server], [security.rate_limit], [[tokens]], [[targets]]
 *   server.c          HTTP plumbing on libmicrohttpd: one thread per connection, routing, request ids,
 *                     CORS, body limits, streamed replies, graceful shutdown
 *   errors.c          the OpenAI error shape and the table of error kinds
 *   targets.c         target runtime: local models loading in the background, readiness
 *   request_parse.c   request bodies (JSON) into generation requests, with 400s naming the field
 *   generate.c        running a generation on a local engine: waiting, streaming, cancelling
 *   sse.c             server-sent events framing
 *   routes_openai.c   /v1/models, /v1/chat/completions, /v1/completions, /v1/embeddings
 *   routes_native.c   /v1/query, /v1/chat, /v1/embed
 *   routes_ops.c      /health, /ready, /metrics, /v1/backends
 *   auth.c            bearer tokens and per-token target scopes
 *   limits.c          per-client rate limit (token bucket), admission (concurrency and queue)
 *   metrics.c         counters, gauges and histograms, rendered as Prometheus text
 *   upstream.c        remote targets: proxying with libcurl, replica ejection and health probes
 *   embed.c           embeddings on a local target
 *   web.c             the web page at "/"
 *
 * Threads. libmicrohttpd runs every connection on a thread of its own, so a handler may block while
 * it waits for an engine or an upstream, and a stream never holds up another connection. Shared
 * state is either immutable after start (the configuration, the target table) or guarded by the
 * lock of the module that owns it (metrics, limits, upstream health).
 */
#ifndef SIPP_GATEWAY_H
#define SIPP_GATEWAY_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sipp.h"
#include "util/util.h"

/* ---- configuration (config.c) ------------------------------------------------------------------- */

#define GW_DEFAULT_HOST "127.0.0.1"
#define GW_DEFAULT_PORT 8080
#define GW_DEFAULT_MAX_REQUEST_BYTES ((size_t)1 << 20)
#define GW_DEFAULT_MAX_CONCURRENT 64
#define GW_DEFAULT_MAX_QUEUE 256
#define GW_DEFAULT_REQUEST_TIMEOUT_S 600
#define GW_DEFAULT_SHUTDOWN_TIMEOUT_S 30
#define GW_DEFAULT_UPSTREAM_TIMEOUT_S 600
#define GW_MAX_PORT 65535

typedef enum gw_target_type { GW_TARGET_LOCAL, GW_TARGET_REMOTE } gw_target_type;

/* When a local target's model is loaded: at start-up (configured targets), or on its first request
 * (targets found in a models directory or the store). */
typedef enum gw_load_mode { GW_LOAD_STARTUP, GW_LOAD_ON_DEMAND } gw_load_mode;
#define GW_KEEP_ALIVE_FOREVER (-1) /* keep_alive: never unloaded for being idle (memory may still evict) */

typedef struct gw_target_config {
    char *name;
    gw_target_type type;
    int line; /* where its [[targets]] entry starts */
    /* local */
    char *model_path; /* resolved against the config file's directory */
    char *backend;
    int ctx_size, parallel, threads, gpu_layers;
    sipp_policy policy;
    gw_load_mode load;
    int64_t keep_alive_s; /* idle seconds before it is unloaded; GW_KEEP_ALIVE_FOREVER, 0 = at once */
    bool pin;             /* never evicted to make room */
    /* openai_compatible */
    char **base_urls; /* without a trailing '/', e.g. "http://10.0.0.2:8080/v1" */
    size_t n_base_urls;
    char *remote_model; /* the model name sent upstream; NULL = the target's name */
    char *api_key_env;
    int timeout_seconds;
} gw_target_config;

typedef struct gw_token_config {
    char *env;      /* the variable that holds the secret */
    char *caller;   /* who this token is, for logs, metrics and the rate limit */
    char **targets; /* allowed targets; none = all */
    size_t n_targets;
    bool admin; /* may load and unload models (POST /v1/models/{name}/load, /unload) */
    int line;
    char *secret; /* the value of env when the config was loaded; NULL when unset */
} gw_token_config;

typedef struct gw_config {
    char *path; /* NULL when made from command-line flags */
    char *host;
    int port;
    size_t max_request_bytes;
    int max_concurrent_requests;
    int max_queue;
    int request_timeout_seconds;
    int shutdown_timeout_seconds;
    char **allowed_origins;
    size_t n_allowed_origins;
    bool allow_unauthenticated;
    int64_t memory_budget_mb; /* host RAM the loaded models may hold; 0 = total RAM minus a margin */
    int max_loaded_models;    /* 0 = no cap besides memory */
    int rate_requests_per_minute; /* 0 = no rate limit */
    int rate_burst;
    gw_token_config *tokens;
    size_t n_tokens;
    gw_target_config *targets;
    size_t n_targets;
    char *models_dir; /* rescanned for new files on GET /v1/models; NULL = none */
    int64_t discovered_keep_alive_s; /* keep_alive of the targets found there */
} gw_config;

/* A configuration with every default and no targets. */
void gw_config_init(gw_config *c);
/* Parses a TOML text. Problems are appended to errs, one "FILE:LINE: problem" per line; returns
 * false when there was any. Does not touch the file system or the environment. */
bool gw_config_parse(const char *text, size_t len, const char *path, gw_config *c, sipp_buf *errs);
/* Reads and parses a file. */
bool gw_config_load(const char *path, gw_config *c, sipp_buf *errs);
/* Adds an on-demand local target per model in dir (a models directory: NAME.gguf files and split
 * sets, as the store lists them), or in the store when dir is NULL, named as the store names it;
 * a configured target of the same name is kept instead. */
bool gw_config_add_dir(gw_config *c, const char *dir, sipp_buf *errs);
/* An on-demand local target for a model found in a models directory (name and path copied). */
bool gw_target_config_discovered(gw_target_config *tc, const char *name, const char *path, int64_t keep_alive_s);
void gw_target_config_free(gw_target_config *tc);
/* Adds a local target (for `sipp serve MODEL`). */
bool gw_config_add_local(gw_config *c, const char *model_path, sipp_buf *errs);
/* Checks what depends on the machine: model files exist, backend names, token variables set, and
 * that a non-loopback listen address has authentication (or allow_unauthenticated). Loads each
 * token's secret. Problems go to errs. */
bool gw_config_validate(gw_config *c, sipp_buf *errs);
/* keep_alive as a string: "-1", "0", "90", "30s", "5m", "1h" (also Ollama's keep_alive). */
bool gw_parse_keep_alive(const char *s, int64_t *out);
/* The name `sipp serve MODEL` gives its target: the file's basename without ".gguf". */
char *gw_target_name_from_path(const char *path);
void gw_config_free(gw_config *c);

/* ---- errors (errors.c) ------------------------------------------------------------------------- */

/* The kinds of error the gateway answers with; each has an HTTP status, an OpenAI type and a code. */
typedef enum gw_error_kind {
    GW_E_INVALID_JSON,     /* 400 */
    GW_E_INVALID_FIELD,    /* 400: a field has the wrong type or value; the message names it */
    GW_E_CONTEXT_LENGTH,   /* 400: the prompt does not fit */
    GW_E_MISSING_KEY,      /* 401 */
    GW_E_INVALID_KEY,      /* 401 */
    GW_E_FORBIDDEN_TARGET, /* 403 */
    GW_E_ORIGIN_FORBIDDEN, /* 403 */
    GW_E_UNKNOWN_TARGET,   /* 404 */
    GW_E_UNKNOWN_ROUTE,    /* 404 */
    GW_E_METHOD,           /* 405 */
    GW_E_TOO_LARGE,        /* 413 */
    GW_E_RATE_LIMITED,     /* 429 */
    GW_E_QUEUE_FULL,       /* 429 */
    GW_E_INTERNAL,         /* 500 */
    GW_E_NOT_IMPLEMENTED,  /* 501 */
    GW_E_UPSTREAM,         /* 502 */
    GW_E_NOT_READY,        /* 503: the target is loading, failed to load, or the server is stopping */
    GW_E_TIMEOUT,          /* 504 */
    GW_E_COUNT
} gw_error_kind;

int gw_error_status(gw_error_kind kind);
const char *gw_error_type(gw_error_kind kind);
const char *gw_error_code(gw_error_kind kind);
/* {"error":{"message":..., "type":..., "code":...}} (new reference). */
json_t *gw_error_json(gw_error_kind kind, const char *message);
/* The error kind of a failed engine call. */
gw_error_kind gw_error_from_status(sipp_status status);

/* ---- requests (request_parse.c) ----------------------------------------------------------------------- */

typedef enum gw_api {
    GW_API_CHAT,         /* POST /v1/chat/completions */
    GW_API_COMPLETION,   /* POST /v1/completions */
    GW_API_EMBEDDINGS,   /* POST /v1/embeddings */
    GW_API_NATIVE_QUERY, /* POST /v1/query */
    GW_API_NATIVE_CHAT,  /* POST /v1/chat */
    GW_API_NATIVE_EMBED, /* POST /v1/embed */
} gw_api;

#define GW_MAX_STOP 16
#define GW_MAX_MESSAGES 4096
#define GW_MAX_EMBED_INPUTS 2048

/* A decoded request body. Strings borrow from root (or from owned) and live until gw_gen_free. */
typedef struct gw_gen {
    gw_api api;
    json_t *root;
    const char *model; /* the target name; NULL when the body has none */
    bool stream;
    bool include_usage;
    const char *prompt;        /* completions and /v1/query */
    sipp_message *messages;    /* chats */
    size_t n_messages;
    const char *stop[GW_MAX_STOP];
    size_t n_stop;
    int max_tokens; /* -1 = until the context is full */
    sipp_sampling sampling;
    bool ignore_eos;
    const char *context_key;
    const char **inputs; /* embeddings */
    size_t n_inputs;
    bool normalize; /* embeddings: unit L2 norm (always for OpenAI's route) */
    bool base64;    /* embeddings: encoding_format "base64" (little-endian float32) */
    char **owned; /* strings made while decoding (joined content parts) */
    size_t n_owned;
} gw_gen;

/* Decodes body[0..len) for api. On failure returns false with kind set (GW_E_INVALID_JSON or
 * GW_E_INVALID_FIELD) and a message naming the field in err (errlen bytes); *out is then empty. */
bool gw_decode(gw_api api, const char *body, size_t len, gw_gen *out, gw_error_kind *kind, char *err,
               size_t errlen);
void gw_gen_free(gw_gen *g);
/* Only "model" and "stream" of a body that gw_decode refused for a field (for remote targets,
 * which get the body as it is). False when the body is not a JSON object. */
bool gw_decode_head(const char *body, size_t len, bool stream_default, gw_gen *out);

/* ---- server-sent events (sse.c) ---------------------------------------------------------------- */

/* "data: JSON\n\n" (event NULL) or "event: NAME\ndata: JSON\n\n"; steals j. */
bool gw_sse_json(sipp_buf *out, const char *event, json_t *j);
/* "data: [DONE]\n\n" */
bool gw_sse_done(sipp_buf *out);
/* Appends s[0..n) with every invalid UTF-8 byte replaced by U+FFFD (JSON needs valid UTF-8; a
 * model's byte tokens need not be). */
bool gw_utf8_clean(const char *s, size_t n, sipp_buf *out);

/* ---- metrics (metrics.c) ----------------------------------------------------------------------- */

typedef struct gw_metrics gw_metrics;

gw_metrics *gw_metrics_new(size_t n_targets);
void gw_metrics_free(gw_metrics *m);
/* One finished HTTP request: target index (or -1), status, the error code when it failed (NULL
 * otherwise), and its duration. */
void gw_metrics_request(gw_metrics *m, int target, int status, const char *error_code, double seconds);
/* Tokens of one finished generation, and its time to first token (< 0: none). */
void gw_metrics_tokens(gw_metrics *m, int target, int prompt, int cached, int generated, double ttft_s);
void gw_metrics_active(gw_metrics *m, int target, int delta);
void gw_metrics_queued(gw_metrics *m, int target, int delta);

/* ---- servers, targets and calls ---------------------------------------------------------------- */

typedef enum gw_target_state { GW_STATE_UNLOADED, GW_STATE_LOADING, GW_STATE_READY, GW_STATE_FAILED } gw_target_state;

typedef struct gw_upstream gw_upstream;

typedef struct gw_target {
    const gw_target_config *cfg;
    int index;
    atomic_int state;             /* gw_target_state */
    char error[SIPP_ERROR_SIZE];  /* why it failed; written before state becomes FAILED */
    sipp_model *model;            /* local: set before state becomes READY; read only with a use held */
    sipp_engine *engine;
    gw_upstream *upstream;        /* remote */
    /* residency (residency.c), under its lock */
    int uses;          /* calls running on it or waiting for it to load */
    int peeks;         /* routes describing its engine */
    int waiting;       /* calls waiting for its load */
    double last_use_ms, last_use_unix;
    double deadline_ms, deadline_unix; /* keep_alive ends; -1 = none */
    int64_t keep_alive_override;       /* set by a request (Ollama's keep_alive) */
    bool keep_alive_override_set;
    bool unload_when_idle;
    bool ever_loaded;
    sipp_memory estimate; /* from the GGUF header */
    sipp_memory measured; /* the backend buffers of its last load */
    bool measured_valid;
    double last_load_ms;
    uint64_t n_loads, n_unloads, n_evictions;
    gw_target_config *owned_cfg; /* cfg, when found by a rescan (freed with the table) */
} gw_target;

typedef struct gw_limits gw_limits;
typedef struct gw_server gw_server;

struct gw_server {
    const gw_config *cfg;
    gw_target *targets;       /* room for max_targets; the first n_targets are listed */
    _Atomic size_t n_targets; /* grows (under the residency lock) when a models directory gains a file */
    size_t max_targets;
    gw_metrics *metrics;
    gw_limits *limits;
    atomic_bool draining;   /* SIGTERM seen: new requests get 503 */
    atomic_bool cancel_all; /* the shutdown deadline passed: in-flight work is cancelled */
    atomic_int in_flight;   /* HTTP requests being handled */
    long long started_unix; /* for "created" fields */
    struct gw_residency *residency; /* residency.c */
    struct gw_prober *prober; /* upstream.c */
};

/* ---- residency: loading on demand, eviction by memory, keep-alive (residency.c) ----------------- */

typedef enum gw_acquire_result {
    GW_ACQUIRE_OK,
    GW_ACQUIRE_NO_ROOM,   /* 503: it does not fit next to the models in use */
    GW_ACQUIRE_FAILED,    /* 503: its load failed (the reason is in the message) */
    GW_ACQUIRE_NOT_READY, /* 503: the server is stopping */
    GW_ACQUIRE_TIMEOUT,   /* 504: it was still loading at the deadline */
    GW_ACQUIRE_ABANDONED,
} gw_acquire_result;

/* Makes the budgets, estimates every local target's memory, and starts the keeper thread, which
 * loads the start-up targets in config order and then unloads idle ones at their deadlines. */
bool gw_residency_start(gw_server *srv, char *err);
void gw_residency_stop(gw_server *srv);
/* True once every start-up target has loaded (one evicted since still counts) and none has failed. */
bool gw_residency_startup_ready(gw_server *srv);
/* Takes a use of t, loading it (evicting idle models to make room) when it is unloaded and waiting
 * until deadline_ms when another call is loading it. Anything but OK leaves msg (n bytes) saying
 * why. Remote targets always succeed. */
gw_acquire_result gw_residency_acquire(gw_server *srv, gw_target *t, double deadline_ms, bool (*abandoned)(void *),
                                       void *arg, char *msg, size_t n);
/* Gives back a use: it now counts as used at this moment; its keep_alive starts. */
void gw_residency_release(gw_server *srv, gw_target *t);
/* A use that does not count as one (for describing the engine): true when t is loaded. */
bool gw_residency_peek(gw_server *srv, gw_target *t);
void gw_residency_unpeek(gw_server *srv, gw_target *t);
/* Sets how long t stays loaded after its last use from now on (Ollama's keep_alive). */
void gw_residency_keep_alive(gw_server *srv, gw_target *t, int64_t seconds);
/* Loads t (again, when it failed) and waits for it. */
gw_acquire_result gw_residency_load(gw_server *srv, gw_target *t, double deadline_ms, char *msg, size_t n);
/* Unloads t now, or when its last use ends (*deferred). False when it was not loaded. */
bool gw_residency_unload(gw_server *srv, gw_target *t, bool *deferred);
/* Adds state, memory, last use and deadline to a local target's JSON object. */
void gw_residency_describe(gw_server *srv, gw_target *t, json_t *o);
/* [{"place","budget_bytes","held_bytes"}] (new reference). */
json_t *gw_residency_budgets(gw_server *srv);
void gw_residency_metrics(gw_server *srv, sipp_buf *out);
/* Adds a target for every new model in the config's models_dir (GET /v1/models calls it). */
void gw_residency_rescan(gw_server *srv);
#define GW_MAX_DISCOVERED 256 /* targets a models directory may gain while the server runs */
/* unloaded, loading, loaded, failed */
const char *gw_state_name(int state);
/* [{"place","budget_bytes","from"}]: the budgets a gateway with cfg would start with (doctor). */
json_t *gw_budgets_json(const gw_config *cfg);
/* Total RAM minus the margin: the host budget without memory_budget_mb. */
uint64_t gw_residency_default_host_budget(void);

/* Starts loading every local target in the background (one after the other, in config order) and
 * makes every remote target's upstream. */
bool gw_targets_start(gw_server *srv, char *err);
/* Entries the target table has room for: the config's and, with a models directory, GW_MAX_DISCOVERED. */
size_t gw_targets_capacity(const gw_config *c);
/* Waits for the loader and frees engines, models and upstreams. */
void gw_targets_stop(gw_server *srv);
gw_target *gw_target_find(gw_server *srv, const char *name);
bool gw_targets_ready(gw_server *srv);

/* A stream of reply bytes (server-sent events) produced on the connection's thread. */
typedef struct gw_stream gw_stream;
struct gw_stream {
    /* Appends what comes next to out, waiting up to wait_ms for it. Returns false once the stream
     * has ended and everything has been appended. */
    bool (*pull)(gw_stream *s, sipp_buf *out, int wait_ms);
    /* Ends the stream, cancelling its work if it has not finished, and frees it. */
    void (*close)(gw_stream *s);
};

typedef struct gw_call gw_call;

/* One HTTP request as the routes see it (server.c owns it). */
struct gw_call {
    gw_server *srv;
    const char *method;
    const char *path;
    char request_id[64];
    char client[64];             /* rate-limit identity: the caller's name with a token, else the IP */
    const gw_token_config *token; /* NULL without authentication */
    const char *body;            /* the request body, NUL-terminated */
    size_t body_len;
    double t_start;
    int target; /* index of the target it names, -1 if none */
    bool admitted;
    bool resident; /* holds a use of its target (residency.c) */
    /* the reply, set by exactly one gw_reply_* call */
    int status;
    const char *error_code;
    int retry_after_s; /* > 0: a Retry-After header */
    bool replied;
    void *priv; /* server.c's connection state */
};

/* Replies. Each takes ownership of what it is given. */
void gw_reply_json(gw_call *call, int status, json_t *body);
void gw_reply_error(gw_call *call, gw_error_kind kind, const char *fmt, ...) SIPP_PRINTF(3, 4);
void gw_reply_text(gw_call *call, int status, const char *content_type, char *text, size_t len);
void gw_reply_stream(gw_call *call, const char *content_type, gw_stream *stream);
/* Adds a header to the reply a gw_reply_* call has just made (a no-op without one). */
void gw_reply_header(gw_call *call, const char *name, const char *value);

/* A request header (case-insensitive name), or NULL. */
const char *gw_call_header(gw_call *call, const char *name);
/* True when the client has closed its connection, or the server is cancelling everything. */
bool gw_call_abandoned(gw_call *call);

/* Resolves the target a generation names, checks it is allowed and ready, and takes an admission
 * permit (waiting in the queue when needed). On failure it has replied and returns NULL. */
gw_target *gw_call_target(gw_call *call, const char *name);
/* Milliseconds left before the request times out (request_timeout_seconds), at least 1. */
int gw_call_ms_left(const gw_call *call);

/* ---- auth (auth.c) ----------------------------------------------------------------------------- */

/* Checks the Authorization header: sets call->token, or replies 401 and returns false. With no
 * tokens configured every call passes. */
bool gw_auth_check(gw_call *call);
/* True when the call's token may use the target. */
bool gw_auth_allows(const gw_call *call, const gw_target_config *target);
/* True when the call may load and unload models: no tokens are configured, or its token has
 * admin = true. */
bool gw_auth_admin(const gw_call *call);

/* ---- limits (limits.c) ------------------------------------------------------------------------- */

gw_limits *gw_limits_new(const gw_config *cfg);
void gw_limits_free(gw_limits *l);
/* Takes one request from the client's bucket. False (with the seconds until the next one) when
 * the client is over its rate. */
bool gw_rate_take(gw_limits *l, const char *client, int *retry_after_s);

typedef enum gw_admit_result { GW_ADMIT_OK, GW_ADMIT_QUEUE_FULL, GW_ADMIT_TIMEOUT, GW_ADMIT_ABANDONED } gw_admit_result;
/* Waits for one of max_concurrent_requests permits until deadline_ms (sipp_now_ms clock); at most
 * max_queue calls wait. abandoned() is polled while waiting. */
gw_admit_result gw_admit(gw_limits *l, double deadline_ms, bool (*abandoned)(void *), void *arg);
void gw_release(gw_limits *l);
/* How many calls hold a permit / wait for one. */
void gw_limits_counts(gw_limits *l, int *active, int *queued);

/* ---- generation on a local target (generate.c) ------------------------------------------------- */

/* How a route renders a generation: as SSE chunks and as one JSON body. */
typedef struct gw_format gw_format;
typedef struct gw_gen_view {
    gw_call *call;
    gw_target *target;
    const gw_gen *gen;
    sipp_request *req; /* finished when end/whole are called */
    const char *text;  /* whole text, valid UTF-8: set when end/whole are called */
    const char *id;    /* "chatcmpl-..." etc. */
    long long created;
} gw_gen_view;

struct gw_format {
    const char *id_prefix;
    void (*begin)(const gw_gen_view *v, sipp_buf *out);
    void (*piece)(const gw_gen_view *v, const char *text, size_t len, sipp_buf *out);
    void (*end)(const gw_gen_view *v, sipp_buf *out);
    void (*fail)(const gw_gen_view *v, gw_error_kind kind, const char *message, sipp_buf *out);
    json_t *(*whole)(const gw_gen_view *v);
};

/* Runs g on a ready local target and replies: a stream when g->stream, else one JSON body. Takes
 * over g's contents. */
void gw_generate(gw_call *call, gw_target *target, gw_gen *g, const gw_format *fmt);
/* Embeds g's inputs on a ready local target and replies (embed.c). */
void gw_embed(gw_call *call, gw_target *target, gw_gen *g);
/* Decodes the call's body for api, resolves its target, and forwards it (remote target: to
 * base_url + upstream_suffix) or runs it: with fmt, or with gw_embed for the embedding routes. */
void gw_run_generation(gw_call *call, gw_api api, const char *upstream_suffix, const gw_format *fmt);

/* ---- remote targets (upstream.c) --------------------------------------------------------------- */

gw_upstream *gw_upstream_new(const gw_target_config *cfg, char *err);
void gw_upstream_free(gw_upstream *u);
/* Forwards the call's body (with "model" replaced by the upstream's) to base_url + suffix, on a
 * healthy replica, trying the next one when a replica cannot be reached; replies with the
 * upstream's answer, streamed through when stream is true. */
void gw_upstream_forward(gw_call *call, gw_target *target, const char *suffix, bool stream);
/* Starts/stops the thread that probes ejected replicas (nothing to do without remote targets). */
bool gw_probe_start(gw_server *srv);
void gw_probe_stop(gw_server *srv);
/* {"url":..., "healthy":...} per replica (new reference). */
json_t *gw_upstream_describe(gw_upstream *u);
/* Renders sipp_upstream_healthy gauges. */
void gw_upstream_metrics(gw_upstream *u, const char *target, sipp_buf *out);

/* ---- routes ------------------------------------------------------------------------------------ */

void gw_route_models(gw_call *call);
void gw_route_model(gw_call *call, const char *id);
/* POST /v1/models/{name}/load and /unload (routes_residency.c); name is name[0..name_len). */
void gw_route_model_residency(gw_call *call, const char *name, size_t name_len, const char *action);
void gw_route_chat_completions(gw_call *call);
void gw_route_completions(gw_call *call);
void gw_route_embeddings(gw_call *call);
void gw_route_native_query(gw_call *call);
void gw_route_native_chat(gw_call *call);
void gw_route_native_embed(gw_call *call);
void gw_route_health(gw_call *call);
void gw_route_ready(gw_call *call);
void gw_route_metrics(gw_call *call);
void gw_route_backends(gw_call *call);
/* The web page (web.c): "/" and its embedded files, with security headers of its own. */
void gw_route_web(gw_call *call);

/* Renders the metrics (metrics.c) with the server's gauges. */
void gw_metrics_render(gw_server *srv, sipp_buf *out);

/* Runs the gateway until SIGTERM or SIGINT. Returns the process exit status. */
int gw_serve(gw_config *cfg);

#endif
