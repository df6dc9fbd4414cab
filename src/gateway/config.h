/*
 * config.h: the gateway's configuration (config.c), the bottom layer: it depends on nothing else in
 * the gateway, so every other layer may read it.
 */
#ifndef SIPP_GATEWAY_CONFIG_H
#define SIPP_GATEWAY_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sipp.h"
#include "util/schema_limits.h"
#include "util/util.h"

#define GW_DEFAULT_HOST "127.0.0.1"
#define GW_DEFAULT_PORT 8080
#define GW_DEFAULT_MAX_REQUEST_BYTES ((size_t)1 << 20)
#define GW_DEFAULT_MAX_CONCURRENT 64
#define GW_DEFAULT_MAX_QUEUE 256
#define GW_DEFAULT_REQUEST_TIMEOUT_S 600
#define GW_DEFAULT_SHUTDOWN_TIMEOUT_S 30
#define GW_DEFAULT_UPSTREAM_TIMEOUT_S 600
#define GW_DEFAULT_READ_TIMEOUT_S 30
#define GW_DEFAULT_MAX_CONNECTIONS 1000
#define GW_DEFAULT_MAX_CONNECTIONS_PER_CLIENT 256
#define GW_DEFAULT_MAX_BUFFERED_BYTES ((size_t)64 << 20)
#define GW_DEFAULT_RESPONSES_MAX 1024                 /* stored responses */
#define GW_DEFAULT_RESPONSES_BYTES ((size_t)64 << 20) /* their JSON, all together */
#define GW_DEFAULT_RESPONSES_TTL_S 3600
#define GW_DEFAULT_FETCH_TIMEOUT_MS 10000 /* [media] fetch_timeout_ms */
#define GW_DEFAULT_MAX_SPEECH_CHARS 4096  /* [limits] max_speech_chars: OpenAI's own bound */
#define GW_MIN_TOKEN_SECRET 16            /* bytes: shorter secrets are refused by gw_config_validate */
#define GW_MAX_PORT 65535
#define GW_MAX_CTX (1 << 24)                 /* ctx_size's ceiling */
#define GW_MAX_TIMEOUT_S (7 * 24 * 3600)     /* the longest timeout a key may give */
#define GW_MAX_KEEP_ALIVE_S GW_MAX_TIMEOUT_S /* keep_alive's longest */

typedef enum gw_target_type { GW_TARGET_LOCAL, GW_TARGET_REMOTE } gw_target_type;

/* When a local target's model is loaded: at start-up (configured targets), or on its first request
 * (targets found in a models directory or the store). */
typedef enum gw_load_mode { GW_LOAD_STARTUP, GW_LOAD_ON_DEMAND } gw_load_mode;
#define GW_DEFAULT_SLOT_STATE_MB 1024 /* [server] slot_state_max_mb */
#define GW_KEEP_ALIVE_FOREVER (-1)    /* keep_alive: never unloaded for being idle (memory may still evict) */

/* A LoRA adapter of a local target: lora = [{path = "A.gguf", scale = 0.75}]. */
typedef struct gw_lora {
    char *path; /* resolved against the config file's directory; a file (checked) */
    float scale;
} gw_lora;

typedef struct gw_target_config {
    char *name;
    gw_target_type type;
    int line; /* where its [[targets]] entry starts */
    /* local */
    char *recipe;     /* what serves it (DESIGN.md "Recipes and kinds"): NULL = "llamacpp" */
    char *model_path; /* resolved against the config file's directory */
    char *backend;
    char *flash_attn;         /* "auto", "on", "off"; NULL = auto */
    char *speculative;        /* "none", "ngram", "draft"; NULL = none (draft when draft_model is set) */
    char *draft_model;        /* speculative "draft": resolved like model_path; NULL = none */
    int draft_max, draft_min; /* 0 = the engine's defaults */
    float draft_p_min;        /* 0 = none */
    char *draft_cutoff;       /* "auto" or "off"; NULL = auto */
    char *cache_type_k;       /* the KV cache's types: "f16", "q8_0", "q4_0"; NULL = f16 */
    char *cache_type_v;
    gw_lora *lora; /* its LoRA adapters, ids in order; none: NULL */
    size_t n_lora;
    char *pooling;       /* sipp_engine_params.pooling: "rank" for a reranker; NULL = the model's */
    char *chat_template; /* NULL: the model's; "chatml" or a template file's path */
    /* A projector for images and audio (sipp_model_params.mmproj): resolved like model_path; NULL =
     * none (the target takes text only). mmproj = "auto" sets mmproj_auto, and gw_config_validate
     * finds the one mmproj*.gguf beside the model. */
    char *mmproj;
    bool mmproj_auto;
    bool mmproj_offload; /* sipp_model_params.mmproj_offload; default true */
    /* text to speech (the tts kind): a reference clip of the voice a Qwen3-TTS / Pocket TTS pair speaks
     * in (resolved like model_path; NULL = none), and flite's default voice (NULL = "slt") */
    char *speaker;
    char *voice;
    bool batch_frames; /* recipe tts: sipp_tts_params.batch_frames */
    char
        *language; /* recipe tts or whispercpp: a request's language when it gives none; NULL = the model's */
    /* recipe tts: speakers = { NAME = "CLIP", ... }, the pair's other voices (paths resolved like
     * model_path), n_speakers of them */
    char **speaker_names, **speaker_paths;
    int n_speakers;
    int ctx_size, parallel, threads, gpu_layers;
    bool ctx_auto;  /* ctx_size = "auto": resolved to tokens at start (gw_budgets_fit_contexts) */
    int max_tokens; /* a request's output: the default when it gives none, the ceiling when it asks more; 0 =
                       none */
    char *rpc_servers;  /* backend "rpc": rpc = ["host:port", ...] joined by ','; NULL = $SIPP_RPC_SERVERS */
    char *tensor_split; /* backend "rpc": tensor_split = [1, 2, 2] as "1,2,2"; NULL = by free memory */
    sipp_policy policy;
    gw_load_mode load;
    int64_t keep_alive_s; /* idle seconds before it is unloaded; GW_KEEP_ALIVE_FOREVER, 0 = at once */
    bool pin;             /* never evicted to make room */
    bool repack;          /* CPU weights repacked at load (sipp_model_params.no_repack); default true */
    /* openai_compatible */
    char **base_urls; /* without a trailing '/', e.g. "http://10.0.0.2:8080/v1" */
    size_t n_base_urls;
    char *remote_model; /* the model name sent upstream; NULL = the target's name */
    char *api_key_env;
    int timeout_seconds;
    /* Other model names routed here: globs (fnmatch), e.g. "claude-*", "gpt-5*" (either type) */
    char **aliases;
    size_t n_aliases;
} gw_target_config;

/* An MCP server the Responses API's {"type": "mcp"} tools may run ([[mcp]], mcp_client.c): a child
 * process spoken to over stdin/stdout (command), or a streamable HTTP endpoint (url) on loopback or
 * a host of [server] mcp_allowed_hosts. */
#define GW_DEFAULT_MCP_TIMEOUT_S 30
typedef struct gw_mcp_config {
    char *name;     /* the server_label requests name it by */
    char **command; /* stdio: the program and its arguments (argv); NULL for url */
    size_t n_command;
    char *url;            /* streamable HTTP: the MCP endpoint; NULL for command */
    char **allowed_tools; /* the tools requests may use; none = every tool it lists */
    size_t n_allowed_tools;
    char **env; /* "KEY=VALUE" entries added to the child's environment (env = { KEY = "VALUE" }) */
    size_t n_env;
    int timeout_seconds; /* one call (initialize, tools/list, tools/call) */
    int line;
} gw_mcp_config;

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
    int read_timeout_seconds;       /* to send a request's headers and body (and idle keep-alive) */
    int max_connections;            /* open connections in all; capped below the fd limit at start */
    int max_connections_per_client; /* open connections from one IP address */
    size_t max_buffered_bytes;      /* request bodies held while they arrive, all connections together */
    char **allowed_origins;
    size_t n_allowed_origins;
    char **allowed_hosts; /* Host header values served without tokens besides loopback names */
    size_t n_allowed_hosts;
    char **mcp_allowed_hosts; /* hosts an [[mcp]] url may name besides loopback ones */
    size_t n_mcp_allowed_hosts;
    bool allow_unauthenticated;
    int64_t memory_budget_mb; /* host RAM the loaded models may hold; 0 = total RAM minus a margin */
    int max_loaded_models;    /* 0 = no cap besides memory */
    /* Where the idle context-keyed slots of an unloaded model are saved (residency.c): a directory of
     * this gateway's own under it; NULL = $XDG_CACHE_HOME/sipp/slot-state (or ~/.cache/...). */
    char *slot_state_dir;
    int64_t slot_state_max_mb; /* bound on those files; 0 = save none */
    /* Where POST /slots/ID?action=save|restore reads and writes the files it names (llama-server's
     * --slot-save-path); NULL = those actions are refused. */
    char *slot_save_dir;
    int rate_requests_per_minute; /* 0 = no rate limit */
    int rate_burst;
    int responses_max_stored; /* [responses]: 0 = store nothing */
    size_t responses_max_bytes;
    int responses_ttl_seconds;
    /* [store]: /api/pull may reach loopback, private and link-local addresses, and plain http:// */
    bool store_allow_private_sources;
    /* [media]: images a chat names by http(s) URL, fetched for a local target (media_fetch.c) */
    bool media_fetch;               /* false: such a URL is refused, naming the key */
    size_t media_fetch_max_bytes;   /* one image's body; 0 = [limits] image_max_bytes */
    int media_fetch_timeout_ms;     /* a request's fetches, all together */
    bool media_fetch_allow_private; /* may reach loopback, private and link-local addresses */
    gw_token_config *tokens;
    size_t n_tokens;
    gw_target_config *targets;
    size_t n_targets;
    gw_mcp_config *mcp; /* [[mcp]] servers, in file order */
    size_t n_mcp;
    char *models_dir;                /* rescanned for new files on GET /v1/models; NULL = none */
    bool models_follow_symlinks;     /* [server]: serve models there that link to files outside it */
    int64_t discovered_keep_alive_s; /* keep_alive of the targets found there */
    int discovered_max_tokens;       /* max_tokens of the targets found there (sipp serve --max-tokens) */
    /* [web]: the page's "run in this browser" mode (docs/web.md) */
    bool web_serve_model_files; /* GET /v1/models/{name}/file serves local targets' GGUF files */
    char *web_runtime_dir;      /* the browser runtime (make web's build/web); NULL = beside the binary */
    bool supervised_child; /* serves one target for a parent gateway, on the socket it passed (supervise.c) */
    sipp_schema_limits limits;   /* [limits]: bounds on a request's schemas and grammars */
    size_t media_decoded_budget; /* [limits] media_decoded_budget_mb, in bytes: all requests' media at once */
    size_t max_speech_chars;     /* [limits]: the characters of one /v1/audio/speech input */
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
/* Whether a model of the models directory becomes a target: not a multimodal projector (a file
 * named mmproj*, as llama.cpp's ecosystem names them: it goes with a model, mmproj = "auto"). */
bool gw_discoverable(const sipp_store_model *m);

/* An on-demand local target for a model found in a models directory (name and path copied). */
bool gw_target_config_discovered(gw_target_config *tc, const char *name, const char *path,
                                 int64_t keep_alive_s);
void gw_target_config_free(gw_target_config *tc);
/* A local target with every default and no name (configured, added, or found in a directory). */
void gw_target_config_init(gw_target_config *tc);
/* keep_alive as a string: "-1", "0", "90", "30s", "5m", "1h" (also Ollama's keep_alive). */
bool gw_parse_keep_alive(const char *s, int64_t *out);
/* Adds a flite target named "voice" speaking voice (NULL: flite's default) (`sipp serve --voice`). */
#define GW_VOICE_TARGET "voice"
bool gw_config_add_voice(gw_config *c, const char *voice, sipp_buf *errs);
/* Adds a local target (for `sipp serve MODEL`). */
bool gw_config_add_local(gw_config *c, const char *model_path, sipp_buf *errs);
/* Checks what depends on the machine: model files exist, backend names, token variables set (and
 * at least GW_MIN_TOKEN_SECRET bytes long), and that a non-loopback listen address has
 * authentication (or allow_unauthenticated). Loads each token's secret. Problems go to errs. */
bool gw_config_validate(gw_config *c, sipp_buf *errs);
/* Whether host is "localhost" or a loopback address (127.0.0.0/8, ::1). */
bool gw_config_is_loopback(const char *host);
/* Appends the configuration file's keys as Markdown, one table per section with each key's kind,
 * range, default and help line: docs/gateway.md's reference (`sipp serve --config-keys`). */
bool gw_config_reference(sipp_buf *out);
/* The name `sipp serve MODEL` gives its target: the file's basename without ".gguf". */
char *gw_target_name_from_path(const char *path);
void gw_config_free(gw_config *c);

#endif
