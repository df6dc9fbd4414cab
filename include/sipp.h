/*
 * sipp.h: the public C API of libsipp, a local inference runtime on top of llama.cpp.
 *
 * The model of use:
 *
 *   sipp_runtime_init()         once per process: load the artifact's ggml backend modules
 *   sipp_model_load()           weights on the chosen backend (cpu, vulkan, cuda, ... or auto)
 *   sipp_engine_new()           a thread that owns one llama context with `parallel` slots and
 *                               serves requests from any thread (continuous batching)
 *   sipp_engine_submit()        a query (raw prompt) or a chat (messages); tokens stream to a
 *                               callback and/or are read with sipp_request_read()
 *   sipp_request_wait()         its end: finish reason, text, stats
 *
 * Conventions, as in llama.h, curl and libuv:
 *   - Handles are opaque. Parameters come from sipp_*_default_params() and the caller changes fields.
 *   - Every fallible call returns a sipp_status. Calls that create a handle take an error buffer of
 *     SIPP_ERROR_SIZE bytes (like curl's CURLOPT_ERRORBUFFER); calls on a handle leave their message
 *     on it (sipp_model_last_error, sipp_engine_last_error, sipp_request_error).
 *   - Ownership is in the names: *_new / *_load create, *_free destroys; a `const char *` returned by
 *     a function ending in _borrow or documented as borrowed belongs to the handle.
 *   - Strings are UTF-8. Every piece of text the engine emits (sipp_piece_fn, sipp_request_read,
 *     sipp_request_text) is valid UTF-8 without NUL bytes and never splits a character: bytes a
 *     model produces that are not UTF-8 (byte tokens, a character cut off by the end of the
 *     generation) and NUL are replaced by U+FFFD in the stop filter, including its final flush.
 *     Clients need no repair of their own.
 *   - Thread safety: functions marked [any thread] may be called concurrently from any thread on the
 *     same handle. Others need the caller to serialise use of that handle.
 */
#ifndef SIPP_H
#define SIPP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define SIPP_API __attribute__((visibility("default")))
#else
#define SIPP_API
#endif

#define SIPP_ERROR_SIZE 512

/* Bumped whenever a public struct or enum changes layout, so that bindings that copy the structs
 * (Python's ctypes) can refuse a libsipp they do not match. */
#define SIPP_ABI_VERSION 11

/* The SIPP_ABI_VERSION the library was built with. [any thread] */
SIPP_API int sipp_abi_version(void);

typedef enum sipp_status {
    SIPP_OK = 0,               /* ok */
    SIPP_ERR_INVALID_ARGUMENT, /* invalid_argument: a parameter or input is wrong; the message names it */
    SIPP_ERR_NOT_FOUND,        /* not_found: a file, model, target or key does not exist */
    SIPP_ERR_IO,               /* io_error: reading or writing failed */
    SIPP_ERR_MODEL,            /* model_error: the file is not a usable GGUF model */
    SIPP_ERR_BACKEND,          /* backend_error: the backend is not compiled, not available, or failed */
    SIPP_ERR_CONTEXT_FULL,     /* context_full: the prompt (plus generation) does not fit the context */
    SIPP_ERR_BUSY,             /* busy: the queue is full; try again later */
    SIPP_ERR_CANCELLED,        /* cancelled: the request was cancelled */
    SIPP_ERR_TIMEOUT,          /* timeout: a deadline passed */
    SIPP_ERR_NO_MEMORY,        /* no_memory: an allocation failed */
    SIPP_ERR_CLOSED,           /* closed: the engine is shutting down or closed */
    SIPP_ERR_INTERNAL,         /* internal_error: llama.cpp failed in a way sipp did not expect */
} sipp_status;

/* The status's name, e.g. "invalid_argument": the word that opens each value's comment above, which
 * scripts/gen_status_names.py copies into the bindings' tables (Python, JavaScript) and this
 * function's. [any thread] */
SIPP_API const char *sipp_status_name(sipp_status status);

/* ---- runtime ------------------------------------------------------------------------------------ */

/* sipp's own version ("0.1.0") and the pinned llama.cpp release and commit. [any thread] */
SIPP_API const char *sipp_version(void);
SIPP_API const char *sipp_llama_release(void);
SIPP_API const char *sipp_llama_commit(void);

typedef enum sipp_log_level {
    SIPP_LOG_QUIET = 0, /* nothing from llama.cpp */
    SIPP_LOG_ERROR,
    SIPP_LOG_WARN,
    SIPP_LOG_INFO,
    SIPP_LOG_DEBUG,
} sipp_log_level;

typedef struct sipp_runtime_params {
    /* Directory of the artifact whose backend modules to load. NULL: $SIPP_ARTIFACT, else the
     * artifact the library was built with (the directory libllama was loaded from). */
    const char *artifact_dir;
    /* How much of llama.cpp's and ggml's own logging reaches stderr. Default SIPP_LOG_ERROR. */
    sipp_log_level log_level;
} sipp_runtime_params;

SIPP_API sipp_runtime_params sipp_runtime_default_params(void);

/* Loads the backend modules once per process. Later calls return the first call's status.
 * Every other function that needs a backend calls this with default parameters if it has not
 * been called. [any thread] */
SIPP_API sipp_status sipp_runtime_init(const sipp_runtime_params *params, char *errbuf);

/* The artifact directory in use (borrowed), or NULL before sipp_runtime_init. [any thread] */
SIPP_API const char *sipp_runtime_artifact_dir(void);

/* Artifact signatures (Ed25519, keys in PEM as `openssl genpkey -algorithm ed25519` writes them).
 * sipp_artifact_sign writes DIR/signature.json over DIR/manifest.json and DIR/sbom.spdx.json, which
 * together name every file of the artifact with its SHA-256. sipp_artifact_verify checks the
 * signature (with the public key in pub_path, or with the key the signature names when pub_path is
 * NULL, which proves integrity but not who signed), then every file against the SBOM, and fails on
 * the first difference with a message naming the file. sipp_runtime_init verifies its artifact
 * this way, and refuses it, when the environment sets SIPP_REQUIRE_SIGNED=PUB.PEM. [any thread] */
SIPP_API sipp_status sipp_artifact_sign(const char *dir, const char *key_path, char *errbuf);
SIPP_API sipp_status sipp_artifact_verify(const char *dir, const char *pub_path, char *errbuf);

/* ---- backends ----------------------------------------------------------------------------------- */

/* What a load decided: the backend used, why, and where the layers went. */
typedef struct sipp_backend_decision {
    char backend[16];  /* "cpu", "vulkan", ... */
    char reason[256];  /* e.g. "auto: vulkan is compiled but its only device is a software
                          renderer (llvmpipe); auto never picks one" */
    char devices[256]; /* the devices the model uses, comma-separated: "CPU" or "Vulkan0" */
    int gpu_layers;    /* layers placed on a GPU device */
} sipp_backend_decision;

/* Checks a backend name (auto, cpu, cuda, metal, vulkan, webgpu, rpc) without loading anything:
 * SIPP_ERR_INVALID_ARGUMENT with a message listing the names otherwise. [any thread] */
SIPP_API sipp_status sipp_backend_check_name(const char *name, char *errbuf);

typedef struct sipp_device_info {
    char backend[16];      /* "cpu", "vulkan", ... */
    char name[64];         /* ggml's device name: "CPU", "Vulkan0" */
    char description[128]; /* "llvmpipe (LLVM 15.0.6, 256 bits)" */
    char kind[8];          /* "cpu", "gpu", "igpu", "accel" */
    bool software;         /* a software renderer (lavapipe): real, but on the CPU */
    uint64_t memory_free;
    uint64_t memory_total;
} sipp_device_info;

typedef struct sipp_backend_info {
    char name[16];  /* every name of the table: auto, cpu, cuda, metal, vulkan, webgpu, rpc */
    bool compiled;  /* its module is in the active artifact */
    bool available; /* compiled and at least one device is visible */
    int n_devices;
} sipp_backend_info;

/* Fills up to cap entries, one per backend name (auto excluded); returns how many there are.
 * Initialises the runtime with defaults if needed. [any thread] */
SIPP_API int sipp_backends_list(sipp_backend_info *out, int cap);

/* Fills up to cap devices of every compiled backend; returns how many there are. [any thread] */
SIPP_API int sipp_devices_list(sipp_device_info *out, int cap);

/* What a load with this backend request would decide, without loading anything: the backend, why,
 * and its device. SIPP_ERR_BACKEND (with the reason in errbuf) when the request cannot be met.
 * order: auto's preference ("cuda,metal,vulkan,webgpu"); NULL = $SIPP_BACKEND_ORDER or default. */
SIPP_API sipp_status sipp_backend_decide(const char *requested, const char *order, sipp_backend_decision *out,
                                         char *errbuf);

/* ---- recipes: which library serves a kind of model, on which backend ----------------------------
 *
 * A recipe (Lemonade's word) is the library a kind of model is served with: llamacpp (text,
 * embeddings, rerank, images and audio in), whispercpp (speech to text), tts (libmtmd's audio
 * generation) and flite (voices with no model file). For this host, each recipe x backend says:
 *   compiled   the active artifact has the recipe's library and the backend's module
 *   available  compiled, and a device of the backend is visible
 *   state      installed (compiled), installable (this host could run it: the note names the command
 *              that builds it) or unsupported (the recipe does not run there, or the host cannot:
 *              the note says which)
 * and the recipe's auto choice, by Lemonade's rule: the first supported backend in auto's preference
 * order (SIPP_BACKEND_ORDER, else cuda, metal, vulkan, then cpu), unless a later one is already
 * installed while the earlier ones are merely installable (a backend auto cannot use here: not
 * available, or a software device only, is passed over); an explicit backend always wins. */
typedef enum sipp_recipe_state {
    SIPP_RECIPE_UNSUPPORTED,
    SIPP_RECIPE_INSTALLABLE,
    SIPP_RECIPE_INSTALLED,
} sipp_recipe_state;

#define SIPP_RECIPE_MAX_BACKENDS 8

typedef struct sipp_recipe_backend {
    char name[16]; /* "cpu", "vulkan", "cuda", "metal", "rpc" */
    bool compiled;
    bool available;
    sipp_recipe_state state;
    char note[256]; /* installable: the command that builds it; unsupported: why; installed: "" */
} sipp_recipe_backend;

typedef struct sipp_recipe_info {
    char name[16];   /* "llamacpp", "whispercpp", "tts", "flite" */
    char serves[96]; /* what it serves, in words */
    char kind[16];   /* the gateway's kind that serves its targets: "llama", "whisper", "tts" */
    int n_backends;
    sipp_recipe_backend backends[SIPP_RECIPE_MAX_BACKENDS];
    char auto_backend[16]; /* "" when no backend is supported */
    char auto_reason[256];
} sipp_recipe_info;

/* Fills up to cap recipes; returns how many there are. Initialises the runtime with defaults if
 * needed. [any thread] */
SIPP_API int sipp_recipes_list(sipp_recipe_info *out, int cap);

/* The file name of the CPU backend module ggml picks on this CPU (e.g. "libggml-cpu-haswell.so"),
 * or "" when unknown. [any thread] */
SIPP_API const char *sipp_cpu_module(void);

/* ---- rpc: ggml's RPC backend, a model split across hosts --------------------------------------- */

/* An rpc-server exposes its host's device over TCP with no authentication and no encryption; a
 * client (backend "rpc") places layers on it as if it were a local GPU. Both ends must run the same
 * protocol version, i.e. the same llama.cpp release. */
#define SIPP_RPC_DEFAULT_PORT 50052

typedef struct sipp_rpc_server_info {
    char endpoint[128];                        /* host:port as given */
    int proto_major, proto_minor, proto_patch; /* the server's protocol version */
    int n_devices;                             /* the devices it exposes */
    char device[64];                           /* the first one, as this process names it ("RPC0") */
    char description[128];
    uint64_t memory_free;
    uint64_t memory_total;
} sipp_rpc_server_info;

/* Connects to an rpc-server, checks its protocol version against this build's and reads its first
 * device and free memory. Errors name the endpoint: not a host:port, unreachable, not answering the
 * handshake (not an rpc-server, or busy serving another client: a server serves one at a time), a
 * protocol version mismatch. [any thread] */
SIPP_API sipp_status sipp_rpc_probe(const char *endpoint, sipp_rpc_server_info *info, char *errbuf);

/* Checks a server list "HOST:PORT[,HOST:PORT...]" without connecting: each entry a host and a port
 * in 1..65535, none twice, at least one. [any thread] */
SIPP_API sipp_status sipp_rpc_check_servers(const char *list, char *errbuf);

/* The handshake alone, with each server of a list "HOST:PORT[,HOST:PORT...]": reachable, an
 * rpc-server, free (one serves one client at a time) and speaking this build's protocol; errors name
 * the endpoint. Unlike sipp_rpc_probe it leaves no connection behind in ggml, so the process that
 * pings a server is not ended when that server goes away (a supervisor's probe). [any thread] */
SIPP_API sipp_status sipp_rpc_ping(const char *list, char *errbuf);

/* ggml's RPC client cannot survive losing a server it placed layers on (its dispatcher aborts the
 * process). Once a process has connected to an rpc server, sipp turns that abort into one line on
 * stderr naming the server that went away and exit status SIPP_RPC_LOST_EXIT, so that a supervisor
 * or a load balancer in front (docs/scale-out.md) restarts or routes around the process. */
#define SIPP_RPC_LOST_EXIT 75 /* EX_TEMPFAIL */

typedef struct sipp_rpc_server_params {
    const char *host;      /* address to bind; default "127.0.0.1" */
    int port;              /* default SIPP_RPC_DEFAULT_PORT */
    const char *backend;   /* the local device to serve: "cpu" (default), "vulkan", ... */
    int threads;           /* CPU threads of the served backend; 0 = the number of cores */
    const char *cache_dir; /* where the server caches tensors it received (by hash); NULL = none */
} sipp_rpc_server_params;

SIPP_API sipp_rpc_server_params sipp_rpc_server_default_params(void);

/* Serves the device until the process ends (ggml's server loop does not return while it runs; it
 * serves one client at a time and prints "Accepted client connection" / "Client connection closed"
 * on stdout). Returns only on failure: an unknown or unavailable backend, an address it cannot bind. */
SIPP_API sipp_status sipp_rpc_server_run(const sipp_rpc_server_params *params, char *errbuf);

/* ---- model store -------------------------------------------------------------------------------- */

/* The local store of pulled models ($SIPP_MODELS_DIR, default ${XDG_DATA_HOME:-~/.local/share}/sipp/
 * models): NAME.gguf (or the shards NAME-0000i-of-0000n.gguf of a split set) and NAME.json, its
 * metadata (source, per-file URL, size, sha256, pull time). A pull puts the files in place first and
 * the metadata last, so a model that is listed is complete. Functions taking `dir` use the default
 * store when it is NULL. Every function here works without the runtime (no backend is loaded).
 * [any thread], but two processes or threads changing one model at once are not serialised. */

#define SIPP_PATH_MAX 4096
#define SIPP_URL_MAX 4096
#define SIPP_NAME_MAX 128      /* bytes of a store name, without the terminating NUL */
#define SIPP_SHA256_HEX 65     /* 64 lowercase hex digits and a NUL */
#define SIPP_STORE_TIME_MAX 32 /* "YYYY-MM-DDTHH:MM:SSZ" and room to spare */
#define SIPP_RECIPE_NAME_MAX 16
#define SIPP_RECIPE_LLAMACPP "llamacpp"     /* a GGUF model, run by llama.cpp */
#define SIPP_RECIPE_WHISPERCPP "whispercpp" /* a whisper.cpp model (its ggml .bin), run by libwhisper */

/* The store directory (not created). */
SIPP_API sipp_status sipp_store_dir(char *out, size_t cap, char *errbuf);

typedef struct sipp_store_file {
    char file[SIPP_NAME_MAX + 32]; /* file name inside the store */
    char *url;                     /* where it was downloaded from; "" when unknown */
    uint64_t size;
    int64_t mtime_ns;             /* when the sha256 below was taken: it is valid while size and */
    char sha256[SIPP_SHA256_HEX]; /* mtime are unchanged; "" when not known */
} sipp_store_file;

typedef struct sipp_store_model {
    char name[SIPP_NAME_MAX + 1];
    char *source; /* what was pulled: a URL, hf://..., or a catalog name; "" if unknown */
    char pulled_at[SIPP_STORE_TIME_MAX]; /* UTC, ISO 8601; "" for a bare file */
    bool verified;                       /* every file matched a sha256 known before the download */
    bool managed;                        /* false for a bare NAME.gguf without metadata */
    int n_files;
    sipp_store_file *files;
    uint64_t size;            /* all files together */
    char path[SIPP_PATH_MAX]; /* the file to load: the only file or shard 1 */
    /* The multimodal projector pulled with it (its catalog entry's "mmproj"), stored beside it as
     * mmproj-NAME.gguf (file is that name), where --mmproj auto finds it; NULL when none. Not counted
     * in size; removed with the model. */
    sipp_store_file *mmproj;
    /* What runs it: SIPP_RECIPE_LLAMACPP (NAME.gguf or a split set) or SIPP_RECIPE_WHISPERCPP (one
     * file, NAME.bin, a whisper.cpp model). */
    char recipe[SIPP_RECIPE_NAME_MAX];
} sipp_store_model;

/* Every model in the store, sorted by name; a store that does not exist yet is empty. *out is an
 * array of *n models; free it with sipp_store_list_free. */
SIPP_API sipp_status sipp_store_list(const char *dir, sipp_store_model **out, size_t *n, char *errbuf);
SIPP_API void sipp_store_list_free(sipp_store_model *models, size_t n);

/* The entries of a store directory that sipp_store_list passes over although they look like models
 * (.gguf), or are not plain files: fn(user, entry, why) for each, why a sentence that ends with what to do
 * ("'My Model' is not a model name (...); rename the file", "it is a FIFO, not a regular file").
 * Directories, hidden entries, projectors and files of other types are not reported. */
typedef void (*sipp_store_skip_fn)(void *user, const char *entry, const char *why);
SIPP_API sipp_status sipp_store_list_skipped(const char *dir, sipp_store_skip_fn fn, void *user,
                                             char *errbuf);

/* Removes a model's files, its metadata and any partial downloads of it. SIPP_ERR_NOT_FOUND when
 * the store has no such model. */
SIPP_API sipp_status sipp_store_remove(const char *dir, const char *name, char *errbuf);

/* What a MODEL argument names: an existing file as it is; else a model in the store by name, giving
 * its GGUF file (shard 1 of a split set); else SIPP_ERR_NOT_FOUND with one line in errbuf saying how
 * to pull it (by name when the catalog knows it). Anything else (a directory, a name with '/' that
 * does not exist) is an error naming the input. Writes at most cap bytes to path_out.
 * sipp_model_load resolves its path this way itself. */
SIPP_API sipp_status sipp_store_resolve(const char *name_or_path, char *path_out, size_t cap, char *errbuf);

/* The SHA-256 of a file (lowercase hex), cached: from the store's metadata when the file is in the
 * store, else from the store's hash cache (.sha256-cache.json, keyed by path, size and mtime);
 * computed and cached only when size or mtime changed. *cached (optional) tells whether the value
 * was reused. Every file hash sipp takes goes through here (`models info`, verify manifests). */
SIPP_API sipp_status sipp_store_file_sha256(const char *path, char hex[SIPP_SHA256_HEX], bool *cached,
                                            char *errbuf);

/* The SHA-256 of a byte string (lowercase hex). False (hex "") when out of memory. The store's
 * files are hashed with sipp_store_file_sha256; this is the same function for data in memory. */
SIPP_API bool sipp_sha256_hex(const void *data, size_t len, char hex[SIPP_SHA256_HEX]);

/* The path of shard `index` (1-based) of the split set that path (a URL or file path whose last
 * segment is NAME-0000i-of-0000n.gguf) belongs to. False when path is not a shard or out is too
 * small. */
SIPP_API bool sipp_split_sibling(const char *path, int index, char *out, size_t cap);

/* Pulling. */

/* Where a download stands; passed to the progress callback several times a second. */
typedef struct sipp_pull_progress {
    int file_index; /* 1-based, of n_files */
    int n_files;
    const char *file;   /* the file's name in the store */
    uint64_t done;      /* bytes of this file on disk */
    uint64_t total;     /* bytes of this file; 0 while unknown */
    uint64_t received;  /* bytes received over the network in this pull, all files */
    double bytes_per_s; /* average over this pull */
    double eta_s;       /* seconds left for this file; -1 while unknown */
    bool file_done;     /* the file is complete (the last call for it) */
    const char *note;   /* a one-off remark ("the server ignored the range request; starting over");
                           NULL mostly */
} sipp_pull_progress;

/* Return false to stop the pull (it fails with SIPP_ERR_CANCELLED; the partial file is kept). */
typedef bool (*sipp_pull_progress_fn)(const sipp_pull_progress *p, void *user);

typedef struct sipp_pull_params {
    const char *source; /* http(s) URL, hf://ORG/REPO/FILE.gguf, or a catalog name */
    const char *name;   /* store name; NULL: the catalog's name, else one made from the URL */
    const char *sha256; /* expected digest(s), comma-separated, one per file of a split set;
                           NULL: the catalog's, when it knows them */
    bool force;         /* download even when the store already has this model from this URL */
    int retries;        /* reconnects after a transfer breaks off (default 3) */
    sipp_pull_progress_fn progress;
    void *user;
    /* For pulls on behalf of someone else (the gateway's /api/pull). public_only: https only, and
     * every connection (each redirect's too) must go to a public address: loopback, private,
     * link-local, shared, multicast and reserved addresses are refused (fault REFUSED). Behind a
     * proxy the address checked is the proxy's. keep_existing: never replace what the store has:
     * a model of the same name from another URL (or a file in the way) fails (fault EXISTS) and
     * nothing is written; the same model from the same URL is SIPP_OK with already set. */
    bool public_only;
    bool keep_existing;
} sipp_pull_params;

SIPP_API sipp_pull_params sipp_pull_default_params(void);

/* Whose fault a failed pull was, for a caller that answers someone else (a gateway's status). */
typedef enum sipp_pull_fault {
    SIPP_PULL_FAULT_NONE = 0, /* success, or a local failure (disk, parameters, cancelled) */
    SIPP_PULL_FAULT_SOURCE,   /* the source: an HTTP error, unreachable, TLS, not a GGUF file */
    SIPP_PULL_FAULT_REFUSED,  /* public_only: not https, or an address that is not public */
    SIPP_PULL_FAULT_EXISTS,   /* keep_existing: the store has this name (path names its file) */
} sipp_pull_fault;

typedef struct sipp_pull_result {
    char name[SIPP_NAME_MAX + 1];
    char path[SIPP_PATH_MAX]; /* the file to load (shard 1 of a split set) */
    char url[SIPP_URL_MAX];   /* where it came from (shard 1) */
    int n_files;
    uint64_t size;                /* bytes of all files */
    uint64_t received;            /* bytes received in this pull */
    bool verified;                /* every file matched a known sha256 */
    bool already;                 /* the store had it: nothing was downloaded */
    bool resumed;                 /* some file continued an earlier partial download */
    bool replaced;                /* the store had another model under this name; it is gone */
    char sha256[SIPP_SHA256_HEX]; /* of the first file */
    double seconds;
    sipp_pull_fault fault; /* set when the pull fails */
} sipp_pull_result;

/* Downloads a model into the store. Each file is fetched into partial/FILE.part (resuming what an
 * earlier pull left there when the server supports ranges), hashed as it arrives, checked (sha256
 * when known, GGUF magic and header), and only then renamed into the store. On any failure the
 * store itself is unchanged; a .part may remain in partial/ for the next pull to resume. */
SIPP_API sipp_status sipp_store_pull(const sipp_pull_params *params, sipp_pull_result *result, char *errbuf);

/* The catalog: the models sipp can pull by name. Two JSON files of one format: the one shipped with
 * sipp ($SIPP_CATALOG, else found beside the executable or library, see docs/models.md), and the
 * user's own, catalog.json beside the store, whose entries replace shipped ones of the same name. */

typedef struct sipp_catalog_entry {
    char *name;
    char *description; /* "" when not given */
    char *url;         /* as written: hf://ORG/REPO/FILE.gguf or http(s)://...; a split set names shard 1 */
    char **sha256;     /* lowercase digests, one per file of the set; n_sha256 is 0 when unknown */
    size_t n_sha256;
    uint64_t size; /* bytes of all files together; 0 when unknown */
    char **labels; /* chat, reasoning, tool-calling, embeddings, reranking, vision, coding */
    size_t n_labels;
    char **backends; /* suggested backends, best first */
    size_t n_backends;
    int ctx_size;       /* suggested context size; 0 when not given */
    char *license;      /* "" when not given */
    char *draft;        /* the catalog name of a draft model for speculative decoding; "" when none */
    const char *origin; /* the file it came from (borrowed from the catalog) */
    /* The multimodal projector published with the model (images and audio), pulled with it and
     * stored beside it as mmproj-NAME.gguf: its URL as written (hf://, http(s)://, or a file name in
     * the model URL's directory), "" when none; its lowercase sha256, "" when unknown. */
    char *mmproj;
    char *mmproj_sha256;
    /* "recipe": SIPP_RECIPE_LLAMACPP (GGUF; the default) or SIPP_RECIPE_WHISPERCPP (a whisper.cpp ggml
     * .bin, pulled and checked as one, stored as NAME.bin). Never NULL. */
    char *recipe;
} sipp_catalog_entry;

typedef struct sipp_catalog {
    sipp_catalog_entry *entries;
    size_t n;
    char shipped_path[SIPP_PATH_MAX]; /* "" when no shipped catalog was found */
    char user_path[SIPP_PATH_MAX];    /* where the user catalog is or would be */
    bool user_exists;
} sipp_catalog;

/* Loads the shipped catalog (when found) and the user catalog (when it exists). A file that exists
 * but is not a valid catalog is an error naming the file and the problem; a missing shipped catalog
 * is not (shipped_path stays ""). */
SIPP_API sipp_status sipp_catalog_load(sipp_catalog **out, char *errbuf);

/* The entry of that name, or NULL (also for a NULL catalog). */
SIPP_API const sipp_catalog_entry *sipp_catalog_find(const sipp_catalog *cat, const char *name);
SIPP_API void sipp_catalog_free(sipp_catalog *cat);

/* A draft model published beside a model, for speculative decoding (the ecosystem ships drafts and
 * MTP heads next to models): a .gguf file in the model's directory named like it with a "draft" or
 * "mtp" marker ("m-draft.gguf", "m.mtp.gguf", "m-draft-q4_0.gguf" beside "m-q4_0.gguf": the name
 * with its marker part removed is the model's name), else the model's catalog entry's "draft" when
 * the model is in the store by that catalog name and the draft has been pulled. Never used unless
 * asked for (sipp's --draft auto); sipp only suggests it. */
typedef struct sipp_draft_sidecar {
    char path[SIPP_PATH_MAX];        /* the draft's file; "" when there is none to load */
    char catalog[SIPP_NAME_MAX + 1]; /* the catalog's draft name when the catalog named it, else "" */
    bool pulled;                     /* a catalog draft: whether it is in the store (path set) */
} sipp_draft_sidecar;

/* Finds the draft beside model_path (a file; store_name, optional, its store name for the catalog
 * lookup). SIPP_OK with out->path set when one is found, or with only out->catalog set when the
 * catalog names one that is not pulled; SIPP_ERR_NOT_FOUND when there is none. [any thread] */
SIPP_API sipp_status sipp_store_find_draft(const char *model_path, const char *store_name,
                                           sipp_draft_sidecar *out, char *errbuf);

/* The multimodal projector published beside a model (llama.cpp's ecosystem names it mmproj-*.gguf, in
 * the model's directory), written to out: mmproj-STEM.gguf when there is one (STEM the model's file
 * name without .gguf, or its split set's name: the store names a pulled projector so); else the one
 * file there whose name starts with "mmproj" and ends in ".gguf", leaving out mmproj-OTHER.gguf
 * where OTHER.gguf (or the store's OTHER.json) is another model of that directory: the store keeps
 * every model in one directory. SIPP_ERR_NOT_FOUND when there is none, SIPP_ERR_INVALID_ARGUMENT
 * naming them when there are several (give the path then). Used only when asked for (--mmproj auto,
 * mmproj = "auto"). [any thread] */
SIPP_API sipp_status sipp_store_find_mmproj(const char *model_path, char *out, size_t cap, char *errbuf);

/* Whether the projector at path can go with the model at model_path (NULL: the projector alone), from
 * their GGUF headers only, as a load checks them before libmtmd reads the file: a projector (not a
 * text model), whose output width can be read and equals the model's n_embd. SIPP_ERR_MODEL with a
 * message naming both files and both widths otherwise. [any thread] */
SIPP_API sipp_status sipp_mmproj_check(const char *path, const char *model_path, char *errbuf);

/* A GGUF header, read without loading any weights (`sipp models info`). */

#define SIPP_GGUF_MAX_TYPES 48 /* distinct tensor types listed (ggml has fewer) */

typedef struct sipp_gguf_type_count {
    char type[16]; /* ggml's name: "f32", "q8_0", "q4_K", ... */
    int64_t n_tensors;
    uint64_t n_params; /* elements in tensors of this type */
    uint64_t bytes;
} sipp_gguf_type_count;

typedef struct sipp_gguf_info {
    char path[SIPP_PATH_MAX]; /* the file read: the one given, or shard 1 of its split set */
    char architecture[64];    /* general.architecture */
    char name[128];           /* general.name; "" when absent */
    char file_type[32];       /* general.file_type by name ("Q4_K_M"); "" when absent */
    uint32_t gguf_version;
    int n_files;        /* 1, or the shard count of a split set */
    uint64_t file_size; /* bytes of all files */
    uint64_t n_params;  /* elements of all tensors */
    int64_t n_tensors;
    /* From the "<arch>.*" keys; -1 when the model does not say. */
    int64_t n_ctx_train;
    int64_t n_embd;
    int64_t n_layer;
    int64_t n_head;
    int64_t n_head_kv;
    int64_t n_ff;
    int64_t n_vocab;    /* tokens in tokenizer.ggml.tokens, else <arch>.vocab_size */
    char pooling[8];    /* none, mean, cls, last, rank; "" when absent */
    char tokenizer[32]; /* tokenizer.ggml.model: llama, gpt2, bert, ...; "" when absent */
    bool has_chat_template;
    int n_types;
    sipp_gguf_type_count types[SIPP_GGUF_MAX_TYPES]; /* most tensors first */
    /* A multimodal projector (general.architecture "clip", an mmproj-*.gguf file): what it takes in
     * and what it gives the text model. Zero/"" for any other file. */
    bool projector;
    bool projector_vision;        /* clip.has_vision_encoder */
    bool projector_audio;         /* clip.has_audio_encoder */
    char projector_type[32];      /* clip.projector_type (or clip.vision/audio.projector_type): "mlp", ... */
    int64_t projector_image_size; /* clip.vision.image_size; -1 when it has no vision encoder */
    int64_t projector_n_embd;     /* the width of the embeddings it gives the text model: read
                                     from its output tensor for the types sipp knows (as mtmd
                                     reads it), else clip.vision/audio.projection_dim; -1 when
                                     unknown, or a known type whose output tensor is missing */
    int64_t projector_patch_size; /* clip.vision.patch_size; -1 when it has no vision encoder */
} sipp_gguf_info;

/* Reads the header of a GGUF file, and of the other shards when it is shard 1 of a split set (a
 * later shard is read as its set, from shard 1). SIPP_ERR_MODEL when it is not a GGUF model or is
 * truncated, with a message naming the file. */
SIPP_API sipp_status sipp_gguf_inspect(const char *path, sipp_gguf_info *info, char *errbuf);

/* ---- model -------------------------------------------------------------------------------------- */

typedef struct sipp_model sipp_model;

/* Called during load with progress in [0, 1]. Return false to abort the load. */
typedef bool (*sipp_progress_fn)(float progress, void *user);

typedef struct sipp_lora_adapter {
    const char *path;
    float scale; /* the adapter's default weight: 0 loads it off, 1 as trained */
} sipp_lora_adapter;

/* One adapter of the engine at a scale, as a request picks it. */
typedef struct sipp_lora_scale {
    int id; /* the index in sipp_model_params.lora */
    float scale;
} sipp_lora_scale;

typedef struct sipp_model_params {
    const char *backend;       /* "auto" (default), "cpu", "vulkan", "cuda", "metal", ... */
    const char *backend_order; /* auto's preference; NULL = $SIPP_BACKEND_ORDER or the default */
    int gpu_layers;            /* layers to offload to the GPU backend; -1 (default) = all */
    sipp_progress_fn progress;
    void *progress_user;
    bool vocab_only; /* load only the tokenizer: for tokenize/detokenize without weights */
    /* backend "rpc" only: the servers ("host:port,host:port"); NULL = $SIPP_RPC_SERVERS. */
    const char *rpc_servers;
    /* backend "rpc" only: the share of layers of the local device and of each server, in that order
     * ("1,2,2"); NULL = in proportion to each one's free memory. */
    const char *tensor_split;
    /* Flash attention in every context of the model: "on", "off", or "auto" (NULL, the default):
     * llama.cpp's own default (on where the device supports it) for a GPU load and for auto's fallback
     * to the CPU, off for a load that asked for "cpu" explicitly (the conservative path for validating
     * a model) and for an rpc split. backend_reason ends saying which one the load got. */
    const char *flash_attn;
    /* CPU weights as the file has them, without the copies llama.cpp's CPU backend repacks them into
     * at load (interleaved layouts for its faster matrix kernels): the load only maps the file, so a
     * model loaded again from a warm page cache is ready sooner and holds about half the memory, at
     * some prefill and decode speed (BENCHMARKS.md, swapping models). false (default) repacks. */
    bool no_repack;
    /* A multimodal projector file (mmproj-*.gguf, llama-server's --mmproj) for images and audio in
     * chats, through llama.cpp's libmtmd (libmtmd.so of the artifact, loaded on first use: an
     * artifact without it loads text models and refuses a projector saying why). NULL: none. A
     * projector whose output width is not the model's n_embd is refused naming both. */
    const char *mmproj;
    /* Run the projector on the model's GPU backend (llama-server's --mmproj-offload, on by default);
     * always off for a "cpu" load. */
    bool mmproj_offload;
    /* LoRA adapters (llama.cpp's GGUF adapters, as convert_lora_to_gguf.py writes them) loaded with
     * the model for it: their weights count in its measured memory, and every context libsipp makes
     * of the model applies them at their scales (an engine's requests may pick their own:
     * sipp_request_params.lora). An adapter of another architecture or shape is SIPP_ERR_MODEL naming
     * its path, a path that is not a file SIPP_ERR_NOT_FOUND. Ids are the indices. */
    const sipp_lora_adapter *lora;
    size_t n_lora;
} sipp_model_params;

/* A load on a GPU device first takes that device's residency lease: a lock file per device
 * ($SIPP_LEASE_DIR, default /tmp/sipp-leases) holding the owner's pid, released when the model is
 * freed or the process dies, and a check that the device has the model's size plus a margin
 * ($SIPP_GPU_MARGIN_MB, default 512) free. A second process asking for a leased device gets
 * SIPP_ERR_BUSY naming the owner. SIPP_GPU_LEASE=off skips both checks. CPU loads take no lease. */

SIPP_API sipp_model_params sipp_model_default_params(void);

/* Checks a flash_attn value (NULL or "" count as "auto"): SIPP_ERR_INVALID_ARGUMENT with a message
 * naming it unless it is auto, on or off. [any thread] */
SIPP_API sipp_status sipp_flash_attn_check(const char *value, char *errbuf);

/* Checks KV cache types (sipp_engine_params.cache_type_k and cache_type_v; NULL or "" count as f16)
 * for a model that would be loaded with mp (NULL: the defaults), without loading it: each is one of
 * f16, q8_0, q4_0, and a quantized V cache only where the load's flash attention would not be off.
 * SIPP_ERR_INVALID_ARGUMENT with a message naming the field and what to do. [any thread] */
SIPP_API sipp_status sipp_kv_cache_check(const sipp_model_params *mp, const char *cache_type_k,
                                         const char *cache_type_v, char *errbuf);

/* Loads a GGUF file. On failure *out is NULL and errbuf holds one line naming the file and the
 * problem. Before llama.cpp sees the file its header is checked as sipp_model_check does. */
SIPP_API sipp_status sipp_model_load(const char *path, const sipp_model_params *params, sipp_model **out,
                                     char *errbuf);
SIPP_API void sipp_model_free(sipp_model *model);

/* Checks a model file without loading its weights, as sipp_model_load does first: a whole GGUF file
 * (not truncated) with an architecture, and hyperparameters that llama.cpp's loader and ggml's ops
 * would not assert on (they abort the process instead of returning an error): block_count in 1..512,
 * finite floats, non-negative norm epsilons, consistent head, expert and RoPE counts, known RoPE
 * scaling, 32-byte-aligned tensor data, shapes that match token_embd and the blk.N layers.
 * SIPP_ERR_MODEL with one line naming the file and the key. Reads only the header. [any thread] */
SIPP_API sipp_status sipp_model_check(const char *path, char *errbuf);

/* The message of the calling thread's last failed call on this model (borrowed; valid on this thread
 * until its next failing call or error read). A thread that has not failed on the model reads the
 * last failure of any thread. [any thread] */
SIPP_API const char *sipp_model_last_error(const sipp_model *model);

/* What the load decided. Borrowed; valid while the model lives. [any thread] */
SIPP_API const sipp_backend_decision *sipp_model_backend(const sipp_model *model);

typedef struct sipp_model_info {
    char architecture[64]; /* general.architecture */
    char description[128]; /* llama.cpp's one-line description: "llama 1B Q4_0" */
    uint64_t n_params;
    uint64_t size_bytes; /* size of the weights */
    int n_ctx_train;
    int n_embd;
    int n_layer;
    int n_head;
    int n_head_kv;
    int n_vocab;
    bool has_chat_template;
    double load_ms;             /* wall time of sipp_model_load */
    char chat_template[32];     /* "model" (its own Jinja template) or "chatml (fallback)" */
    bool vision;                /* a projector that takes images is loaded (sipp_model_params.mmproj) */
    bool audio;                 /* a projector that takes audio is loaded */
    char mmproj[SIPP_PATH_MAX]; /* its file; "" when none */
} sipp_model_info;

SIPP_API void sipp_model_get_info(const sipp_model *model, sipp_model_info *info);

/* Where the weights went, one entry per device that holds any: which layers and how many bytes of
 * weight buffers. A CPU or single-GPU load has one or two entries; an rpc load one per host. Weights
 * the CPU keeps in a layout of its own (llama.cpp's "extra" buffer types: AMX on a Xeon with AMX,
 * the repacked CPU_REPACK layout) are host memory of the CPU device and get an entry of their own
 * with that layout named; its layers are its device's (the layout holds the weights of those layers
 * that its kernels take). A model loaded with a projector (mmproj) has one entry more, marked mmproj:
 * the projector's weights on the device libmtmd runs it on (the model's GPU, or the CPU with
 * mmproj_offload off or a CPU load), with no layers. */
typedef struct sipp_placement {
    char device[64];       /* ggml's device name: "CPU", "Vulkan0", "RPC0" */
    char layout[32];       /* "" for the device's own buffers; "AMX", "REPACK" for a CPU layout */
    char host[128];        /* "local", or the rpc server's host:port */
    int first_layer;       /* the first repeating layer on it; -1 when it holds none */
    int n_layers;          /* repeating layers on it */
    bool output;           /* it holds the output layer */
    uint64_t buffer_bytes; /* its model weight buffers */
    bool mmproj;           /* the entry is the multimodal projector's weights, not the model's */
} sipp_placement;

/* Fills up to cap entries; returns how many there are. [any thread] */
SIPP_API int sipp_model_placement(const sipp_model *model, sipp_placement *out, int cap);

/* The model's own chat template text (tokenizer.chat_template; borrowed, valid while the model
 * lives), or NULL when it has none. [any thread] */
SIPP_API const char *sipp_model_chat_template(const sipp_model *model);

/* The id of one of the model's special tokens, by llama.cpp's name for it: "bos", "eos", "eot",
 * "sep", "nl", "pad", "fim_pre", "fim_suf", "fim_mid", "fim_pad", "fim_rep", "fim_sep"; -1 when the
 * vocabulary has none (or the name is not one of these). [any thread] */
SIPP_API int32_t sipp_model_special_token(const sipp_model *model, const char *which);

/* Tokenizes UTF-8 text. add_special adds BOS/EOS as the model's tokenizer says; parse_special
 * turns texts like "<|im_start|>" into their special tokens. Writes at most cap tokens; *n_out is
 * the number the text needs (so a call with cap 0 sizes the buffer). SIPP_ERR_INVALID_ARGUMENT
 * when cap is too small. [any thread] */
SIPP_API sipp_status sipp_tokenize(sipp_model *model, const char *text, size_t len, bool add_special,
                                   bool parse_special, int32_t *tokens, size_t cap, size_t *n_out);

/* Detokenizes; writes at most cap bytes and NUL-terminates when room is left. *len_out is the
 * length the text needs. [any thread] */
SIPP_API sipp_status sipp_detokenize(sipp_model *model, const int32_t *tokens, size_t n_tokens,
                                     bool render_special, char *buf, size_t cap, size_t *len_out);

/* The text of one token as llama.cpp's common_token_to_piece gives it (what llama-server's
 * /tokenize with_pieces and /detokenize use): no leading space removed, special tokens rendered when
 * render_special. Writes at most cap bytes, NUL-terminated when room is left; *len_out is the length
 * the piece needs. SIPP_ERR_INVALID_ARGUMENT for a token outside the vocabulary (the message names it)
 * or a buffer too small. [any thread] */
SIPP_API sipp_status sipp_token_piece(sipp_model *model, int32_t token, bool render_special, char *buf,
                                      size_t cap, size_t *len_out);

typedef struct sipp_message {
    const char *role; /* "system", "user", "assistant" */
    const char *content;
} sipp_message;

/* Renders messages with the model's tokenizer.chat_template, or with tmpl when not NULL (a
 * template name known to llama.cpp such as "chatml", or a template text). add_assistant appends
 * the assistant's turn opening. *out is malloc'ed; free it with sipp_free. SIPP_ERR_MODEL when the
 * model has no template and none is given. */
SIPP_API sipp_status sipp_chat_render(sipp_model *model, const char *tmpl, const sipp_message *messages,
                                      size_t n_messages, bool add_assistant, char **out);

/* ---- inspection (sipp verify, sipp ops) --------------------------------------------------------- */

/* Teacher-forced logits: evaluates the tokens in a fresh context of the model and returns the logits
 * of every position, n_tokens rows of *n_vocab floats (malloc'ed; free with sipp_free). incremental
 * evaluates one token at a time through the KV cache instead of one batched prefill; the two must
 * agree within the backend's numerics. threads: 0 = 1. */
SIPP_API sipp_status sipp_model_eval_logits(sipp_model *model, const int32_t *tokens, size_t n_tokens,
                                            bool incremental, int threads, float **logits, int *n_vocab,
                                            char *errbuf);

/* The batched logits of sipp_model_eval_logits with the KV cache at cache_type (f16, q8_0, q4_0):
 * keys and values where the model's load has flash attention, the keys alone where it is off (a
 * quantized V cache needs it); *cache_type_v (optional; a static string) says which values ran.
 * SIPP_ERR_INVALID_ARGUMENT, with the reason, for a type the model's attention heads cannot take.
 * sipp verify measures each type's drift against f16 with it. */
SIPP_API sipp_status sipp_model_eval_logits_kv(sipp_model *model, const int32_t *tokens, size_t n_tokens,
                                               int threads, const char *cache_type, const char **cache_type_v,
                                               float **logits, int *n_vocab, char *errbuf);

/* The teacher-forced logits of a chat with images or audio (sipp verify's image case). */
typedef struct sipp_chat_logits {
    float *logits; /* n_rows rows of n_vocab (malloc'ed; free with sipp_free) */
    int n_rows;    /* the text positions after the last media item; the last row predicts
                      the first token the model would generate */
    int n_vocab;
    int n_prompt;              /* the prompt's positions in all, media included */
    int n_media;               /* of them, the positions of images and audio */
    char projector_device[64]; /* where the projector encoded them: "CPU", "Vulkan0" */
} sipp_chat_logits;

/* Evaluates a chat (chat_json as sipp_request_params.chat_json: the same template rendering, media
 * decoding and checks, and projector spans as a request's) in a fresh context of the model: text
 * positions in one batched prefill, each image or audio item encoded by the model's projector and its
 * embeddings decoded in place. out gets the logits of every text position after the last media item.
 * SIPP_ERR_INVALID_ARGUMENT for a chat without media or one the model cannot take (no projector, a
 * bad image; the message names the part). threads: 0 = 1. */
SIPP_API sipp_status sipp_model_eval_chat_logits(sipp_model *model, const char *chat_json, int threads,
                                                 sipp_chat_logits *out, char *errbuf);

#define SIPP_MAX_OPS 128

typedef struct sipp_op_stat {
    char op[32];    /* ggml's op name ("MUL_MAT", "ROPE", ...; unary ops by their own name) */
    int count;      /* nodes of this op in one decode step's graph */
    int supported;  /* of them, how many the chosen device supports */
    int on_device;  /* of them, how many ran on the chosen device */
    char where[64]; /* the devices they ran on, comma-separated */
} sipp_op_stat;

typedef struct sipp_graph_report {
    char backend[16];
    char device[64]; /* the chosen device ("CPU", "Vulkan0") */
    int n_nodes;     /* nodes in one decode step's graph */
    int n_ops;
    sipp_op_stat ops[SIPP_MAX_OPS];
    int boundaries_decode;  /* device changes between consecutive nodes, one decode step */
    int boundaries_prefill; /* the same for a short prefill */
} sipp_graph_report;

/* Walks the model's real compute graph (a short prefill, then one decode step) through the
 * scheduler's evaluation callback and reports per op where it ran and whether the chosen device
 * supports it. */
SIPP_API sipp_status sipp_model_trace_graph(sipp_model *model, int threads, sipp_graph_report *report,
                                            char *errbuf);

/* Frees memory that sipp allocated for the caller. */
SIPP_API void sipp_free(void *ptr);

/* ---- verify (sipp verify) ------------------------------------------------------------------------ */

/* Proves that backends agree on a model's outputs. Fixed prompts run on the reference backend first
 * (its logits are kept), then on every other backend, one model in memory at a time: teacher-forced
 * logits compared with the reference's (max and RMS difference, KL divergence in nats, top-1 and
 * top-5 agreement), incremental decoding against one batched prefill on each backend, greedy
 * continuations through an engine, and the compute graph's placement. The result is a report, which
 * is also the manifest format: JSON with "kind": "sipp-verify-manifest" (docs/verify.md describes
 * every field). Against a recorded manifest, the run repeats what it recorded and checks its
 * contracts (checkpoint, tokenizer, graph, numerics, speed). */

typedef struct sipp_verify_thresholds {
    double max_kl;          /* mean KL against the reference, nats */
    double max_kl_max;      /* worst single position's KL against the reference, nats */
    double min_top1;        /* top-1 agreement rate against the reference, [0, 1] */
    double max_cached_kl;   /* mean KL of incremental decoding against batched prefill, each backend */
    double min_cached_top1; /* top-1 agreement of incremental against batched, [0, 1] */
    double min_greedy;      /* fraction of the greedy continuation's tokens equal to the reference's */
    double speed_tolerance; /* against a manifest: how much slower pp or tg may be (fraction) */
    /* perplexity on ppl_text: the relative drift |ppl - ppl_ref| / ppl_ref allowed between backends
     * (and, against a manifest of the same model file, between this run and the recorded one) */
    double ppl_max_drift;
    /* against a manifest recorded on another quantization of the model (its main weight type
     * differs): the relative drift allowed per quantization step (f16 -> q8_0 -> q6_K -> q5 -> q4 ...) */
    double ppl_max_drift_quant;
} sipp_verify_thresholds;

/* Bits of sipp_verify_params.thresholds_given: thresholds that win over a manifest's. */
enum {
    SIPP_VERIFY_MAX_KL = 1 << 0,
    SIPP_VERIFY_MAX_KL_MAX = 1 << 1,
    SIPP_VERIFY_MIN_TOP1 = 1 << 2,
    SIPP_VERIFY_MAX_CACHED_KL = 1 << 3,
    SIPP_VERIFY_MIN_CACHED_TOP1 = 1 << 4,
    SIPP_VERIFY_MIN_GREEDY = 1 << 5,
    SIPP_VERIFY_SPEED_TOLERANCE = 1 << 6,
    SIPP_VERIFY_PPL_MAX_DRIFT = 1 << 7,
    SIPP_VERIFY_PPL_MAX_DRIFT_QUANT = 1 << 8,
};

#define SIPP_VERIFY_MAX_BACKENDS 8
#define SIPP_VERIFY_MAX_PROMPTS 64

/* Called at each stage of each backend's run ("loading the model", "greedy continuations", ...),
 * with the seconds since the run started. */
typedef void (*sipp_verify_progress_fn)(double seconds, const char *backend, const char *stage, void *user);

typedef struct sipp_verify_params {
    const char *model; /* a GGUF path; NULL with `against`: the manifest's */
    /* names (cpu, vulkan, ...), each optionally followed by "+fa" or "-fa": that backend with flash
     * attention on or off ("cpu,cpu+fa" measures what flash attention changes); NULL with `against`:
     * the manifest's */
    const char *const *backends;
    size_t n_backends;
    const char *ref;            /* the reference backend; NULL: the manifest's, else "cpu" */
    const char *const *prompts; /* NULL: the built-in prompts (or, with `against`, the manifest's) */
    size_t n_prompts;
    const char *against;                /* a manifest to check this machine against, or NULL */
    sipp_verify_thresholds thresholds;  /* default: sipp_verify_default_thresholds() */
    unsigned thresholds_given;          /* SIPP_VERIFY_* bits: these win over the manifest's */
    int threads;                        /* 0: the number of cores */
    int greedy_tokens;                  /* per prompt; default 32; 0 skips the greedy pass */
    bool bench;                         /* also run `BENCH_EXE bench -o json` per backend */
    bool no_bench;                      /* with `against`: skip the bench even if the manifest has one */
    int bench_pp, bench_tg, bench_reps; /* default 128, 32, 3 */
    const char *bench_exe;              /* the sipp executable that runs the bench; required with bench */
    const char *artifact;               /* passed to the bench (--artifact); NULL: none */
    sipp_verify_progress_fn progress;   /* optional */
    void *user;
    /* The image case: a projector (mmproj-*.gguf) for the model; every backend then evaluates a fixed
     * chat holding a fixed image, compared like the prompts. NULL: the case is skipped (the report
     * says why); with `against`: the manifest's. mmproj_offload: the projector runs on the backend's
     * GPU (default true; a cpu backend runs it on the CPU in any case). */
    const char *mmproj;
    bool mmproj_offload;
    /* The perplexity case: a text file whose perplexity every backend measures (sipp_model_perplexity,
     * ppl_ctx tokens a chunk, at most ppl_chunks chunks, -1 all), compared against
     * thresholds.ppl_max_drift. NULL: skipped; with `against`: the manifest's. */
    const char *ppl_text;
    int ppl_ctx;    /* default 512 */
    int ppl_chunks; /* default -1 */
    /* LoRA adapters every backend loads with the model (sipp_model_params.lora): the report's and the
     * manifest's "model" gains "lora": [{"path", "sha256", "scale"}], the adapters applied; with
     * `against` and none given here, the manifest's. */
    const sipp_lora_adapter *lora;
    size_t n_lora;
    /* A whisper.cpp model (recipe whispercpp, told by its file) is compared on a clip instead of
     * prompts: every backend encodes it and decodes the start-of-transcript prompt, and the decoder's
     * logits after each prompt token are compared with the reference's (the encoder through them:
     * whisper.cpp exports no getter for its output). audio: a WAV, MP3 or FLAC file of at most 30 s;
     * NULL: a fixed synthetic clip. The report's "recipe" is "whispercpp" and its "clip" says which.
     * prompts, mmproj, ppl_text, lora, bench, against and a greedy_tokens other than the default do
     * not apply to a whisper model and are refused. */
    const char *audio;
} sipp_verify_params;

SIPP_API sipp_verify_thresholds sipp_verify_default_thresholds(void);
SIPP_API sipp_verify_params sipp_verify_default_params(void);

/* Runs the comparison. *report_json (malloc'ed, free with sipp_free) is the report, with
 * "verdict": {"passed", "failures": [{backend, metric, value, threshold, flag, direction}]}, and
 * with `against` also "contracts", "context" and "against_passed". *passed: every threshold and
 * every checked contract held. SIPP_OK whenever the run completed, whatever the verdict;
 * SIPP_ERR_INVALID_ARGUMENT for bad parameters or prompts (the message names them); other statuses
 * when a backend, the model or the manifest failed. Initialises the runtime if needed. */
SIPP_API sipp_status sipp_verify_run(const sipp_verify_params *params, char **report_json, bool *passed,
                                     char *errbuf);

/* Reads a manifest and checks that it is one this sipp can use (its kind, format and the fields a
 * check needs). *json (optional; malloc'ed, free with sipp_free) receives its text. */
SIPP_API sipp_status sipp_verify_manifest_read(const char *path, char **json, char *errbuf);

/* Writes a report as a manifest file, atomically (a temporary file renamed over path). */
SIPP_API sipp_status sipp_verify_manifest_write(const char *path, const char *report_json, char *errbuf);

/* Facts about this host and the active artifact, as `sipp doctor` and manifests record them:
 * {"os": {name, kernel, machine}, "cpu": {model, cores, features, ggml_cpu_module},
 *  "artifact": {dir, manifest}}. Malloc'ed (free with sipp_free); NULL when out of memory. */
SIPP_API char *sipp_host_facts_json(void);

/* ---- perplexity (sipp perplexity) --------------------------------------------------------------- */

/* Perplexity of a model on a text by llama-perplexity's method (its default mode), so that the two
 * agree on the same file: the whole text is tokenized once (with BOS when the vocabulary adds one),
 * cut into chunks of ctx_size tokens (a remainder shorter than a chunk is dropped), each chunk is
 * evaluated in a cleared context with its first token replaced by BOS (when the vocabulary adds one),
 * and only the second half of each chunk is scored (positions ctx_size/2 .. ctx_size-2 predicting the
 * next token), so every scored token has at least ctx_size/2 tokens of context. PPL is
 * exp(mean negative log-likelihood) over every scored token; its error is llama-perplexity's
 * "+/-": PPL times the standard error of the mean NLL. */

/* Called after each chunk with the chunk's number (1-based), the number of chunks and the running
 * estimate: the PPL over the chunks done so far (llama-perplexity's "[n]x.xxxx,"). Return false to
 * stop the run (sipp_model_perplexity then returns SIPP_ERR_CANCELLED). */
typedef bool (*sipp_perplexity_chunk_fn)(int chunk, int n_chunks, double ppl, void *user);

typedef struct sipp_perplexity_params {
    int ctx_size;   /* tokens per chunk (llama-perplexity's -c); default 512, at least 8 */
    int batch_size; /* tokens per decode (-b); default 2048. Below ctx_size a chunk takes several
                       decodes; otherwise batch_size/ctx_size whole chunks share each decode as
                       separate sequences (the rest of the batch unused), as llama-perplexity does */
    int threads;    /* CPU threads; 0 (default) = the machine's cores */
    int max_chunks; /* at most this many chunks (--chunks); -1 (default) = every whole chunk */
    sipp_perplexity_chunk_fn on_chunk; /* optional */
    void *user;
} sipp_perplexity_params;

typedef struct sipp_perplexity_result {
    double ppl;            /* the final estimate */
    double ppl_error;      /* its "+/-"; 0 when every scored token had the same likelihood */
    int n_chunks;          /* chunks evaluated */
    int n_seq;             /* chunks per decode (batch_size / ctx_size, at least 1) */
    int64_t n_text_tokens; /* tokens of the whole text, BOS included */
    int64_t n_scored;      /* tokens whose likelihood was counted: n_chunks * (ctx_size - ctx_size/2 - 1) */
    double seconds;        /* wall time of evaluating and scoring the chunks (not tokenizing) */
    double tokens_per_second; /* tokens evaluated (n_chunks * ctx_size) per second */
} sipp_perplexity_result;

SIPP_API sipp_perplexity_params sipp_perplexity_default_params(void);

/* Measures the perplexity of model on text (UTF-8, len bytes; special-token texts are not parsed).
 * SIPP_ERR_INVALID_ARGUMENT, with errbuf naming the problem, for bad parameters or a text shorter
 * than 2 * ctx_size tokens (the message says how many tokens it has and the ctx_size that would
 * fit); SIPP_ERR_MODEL for a vocabulary that appends EOS to every text (llama-perplexity refuses it
 * too); SIPP_ERR_CANCELLED when on_chunk returned false (*out then holds the chunks done). The run
 * creates and frees a context of its own (ctx_size * n_seq tokens); on_chunk is called on the
 * calling thread. */
SIPP_API sipp_status sipp_model_perplexity(sipp_model *model, const char *text, size_t len,
                                           const sipp_perplexity_params *params, sipp_perplexity_result *out,
                                           char *errbuf);

/* ---- engine ------------------------------------------------------------------------------------- */

typedef struct sipp_engine sipp_engine;

typedef enum sipp_policy {
    SIPP_POLICY_BALANCED = 0,    /* decode first, moderate prefill chunks */
    SIPP_POLICY_LATENCY_FIRST,   /* decode first, small prefill chunks: steady token pace */
    SIPP_POLICY_THROUGHPUT_FIRST /* large prefill chunks: more tokens per step */
} sipp_policy;

typedef struct sipp_engine_params {
    int ctx_size;   /* tokens of context in all (shared by the slots); 0 = min(model's, 4096) */
    int parallel;   /* slots, i.e. sequences decoded together; default 4 */
    int threads;    /* CPU threads; 0 = the number of cores */
    int batch_size; /* token budget of one decode step; 0 = 512 */
    int max_queued; /* requests waiting for a slot before submit says busy; default 64 */
    sipp_policy policy;
    bool embeddings; /* also create the embedding context (sipp_engine_embed) */
    /* Speculative decoding: "none" (NULL, the default), "ngram" (prompt lookup: the tokens that
     * followed the latest earlier occurrence of the last few tokens, in the prompt or the output so
     * far; no draft model) or "draft" (draft_model below). The proposals ride in the slot's rows of
     * the same batch as the other slots and the model verifies them there, so greedy output is the
     * same token for token wherever a batch evaluates exactly as single tokens do (sipp verify's
     * cached decoding row). Refused for a model whose memory cannot drop a sequence's tail
     * (recurrent, hybrid). Sampled requests (temperature > 0) speculate too, by speculative
     * sampling: a proposal is accepted with probability min(1, p(x) / q(x)) and a rejected one
     * replaced by a draw from max(0, p - q), so the output keeps the target's distribution (not the
     * same draws as without speculation for a seed). A repeat penalty, a grammar, a thinking budget
     * or logprobs keep a request from speculating. */
    const char *speculative;
    int draft_max; /* tokens proposed per step; 0 = SIPP_DRAFT_MAX_DEFAULT, at most SIPP_DRAFT_MAX */
    int draft_min; /* a proposal shorter than this is not verified; 0 = 1 */
    /* Speculation by a draft model (speculative "draft", or NULL/"none" with draft_model set): a
     * smaller model of the same vocabulary (checked when the engine starts: token count, special
     * tokens and a sample of token texts) loaded beside the target on the same backend, with a
     * context of its own holding one sequence per slot. Each step it proposes up to draft_max tokens
     * for every speculating slot, and the proposals of all slots are verified in the one target
     * batch. The same rules as "ngram". */
    const char *draft_model;
    /* The draft stops proposing at a token whose probability under the draft is below this, in
     * [0, 1); 0 (the default, as llama-server's --spec-draft-p-min) proposes draft_max tokens
     * whatever the draft's confidence. */
    float draft_p_min;
    /* How long the proposals of a step are: "auto" (NULL, the default) lets a cost model the engine
     * measures pick the draft length of each step in [0, draft_max], 0 being a plain step, so that
     * speculation never runs where it is slower than plain decoding: the target's and the draft's
     * decode times against their rows, fitted as lines, and each slot's acceptance give the expected
     * tokens per millisecond of every length (src/engine/spec_cost.c). Until both lines are measured
     * it drafts draft_max, with every other step plain; afterwards some steps run the other way so
     * that the estimates stay current: 1 in 16 plain while it drafts, and a 2-token draft after 16
     * plain steps while it runs plain, then after 32, 64, ... up to 256 as long as plain stays
     * faster. "off": every step proposes up to draft_max, as a fixed draft length does. */
    const char *draft_cutoff;
    /* The element types of the KV cache, keys and values (llama-server's --cache-type-k and
     * --cache-type-v): "f16" (NULL or "", the default), "q8_0" (about half the bytes of f16) or
     * "q4_0" (about a quarter), at some drift of the logits (sipp verify measures it). A quantized V
     * cache needs flash attention: an engine on a model whose load has it off (flash_attn "off", or
     * "auto" with backend "cpu" or "rpc" named) refuses it with SIPP_ERR_INVALID_ARGUMENT. The draft
     * model's and the embedding context's caches stay f16. sipp_memory_estimate counts the chosen
     * types. */
    const char *cache_type_k;
    const char *cache_type_v;
    /* The pooling of the embedding context (llama-server's --pooling; --rerank is "rank"): "none",
     * "mean", "cls", "last" or "rank"; NULL or "" the model's own (mean when it has none). "rank"
     * makes the engine a reranker (sipp_engine_rerank): its score is the first output of the
     * model's rank head (cls / cls.output). SIPP_ERR_INVALID_ARGUMENT names any other value. */
    const char *pooling;
} sipp_engine_params;

#define SIPP_DRAFT_MAX_DEFAULT 8
#define SIPP_DRAFT_MAX 32

SIPP_API sipp_engine_params sipp_engine_default_params(void);

/* Starts an engine on a loaded model. The model must outlive the engine. */
SIPP_API sipp_status sipp_engine_new(sipp_model *model, const sipp_engine_params *params, sipp_engine **out,
                                     char *errbuf);

/* The same engine without a thread of its own, for hosts that have no threads (a browser page
 * without SharedArrayBuffer) or that must keep the engine on their own event loop (a Web Worker):
 * the caller drives it with sipp_engine_step. Scheduling, slots and requests are the same; only
 * who runs the steps differs. sipp_request_wait and sipp_request_read on its requests run its
 * steps themselves while they wait. Use a stepped engine and its requests from one thread. */
SIPP_API sipp_status sipp_engine_new_stepped(sipp_model *model, const sipp_engine_params *params,
                                             sipp_engine **out, char *errbuf);

/* Runs one turn of a stepped engine: queued requests into free slots, cancelled ones finished, then
 * one llama_decode for every running slot. *busy (optional) says whether requests are still queued
 * or running afterwards. Returns at once when there is nothing to do. SIPP_ERR_INVALID_ARGUMENT for
 * an engine that has its own thread. */
SIPP_API sipp_status sipp_engine_step(sipp_engine *engine, bool *busy);

/* Cancels every request still running, stops the thread and frees the context. Requests remain
 * valid handles (finished as cancelled) until freed. */
SIPP_API void sipp_engine_free(sipp_engine *engine);

/* Saved slots: the KV of context-keyed conversations kept on disk while their model is unloaded
 * (a gateway unloading an idle model), so that the next request with the key after the model comes
 * back reuses it (cached_tokens) instead of reading its history again.
 *
 * sipp_engine_save_slots writes each idle slot that holds a context_key's conversation to a file in
 * dir (made if missing, mode 0700): the key, the tokens whose KV it holds, the sequence state
 * (llama_state_seq_get_data), and the identity of the model file (a hash of its path, size,
 * modification time, inode, and the model's parameter count, vocabulary and description). Before
 * each file the oldest files of dir are removed until it holds fewer than SIPP_SLOT_STATE_MAX_FILES
 * files and, with the new one, at most max_bytes (0 = no byte bound); a slot larger than max_bytes is
 * not saved. Call it on an idle engine (nothing queued or running) just before freeing it:
 * SIPP_ERR_BUSY otherwise. *n_saved (optional) counts the files written. */
#define SIPP_SLOT_STATE_MAX_FILES 64
SIPP_API sipp_status sipp_engine_save_slots(sipp_engine *engine, const char *dir, uint64_t max_bytes,
                                            int *n_saved, char *errbuf);
/* Puts the files in dir that an engine of this model path saved back into idle slots, with their
 * keys. Every such file is removed once read: restored, or refused because the model file changed or
 * is another one (the identity differs), the file is damaged, llama.cpp does not take its state, or
 * no slot is free. Call it on a new engine before submitting to it (SIPP_ERR_BUSY otherwise). A
 * missing dir restores nothing. *n_restored (optional). */
SIPP_API sipp_status sipp_engine_restore_slots(sipp_engine *engine, const char *dir, int *n_restored,
                                               char *errbuf);

/* One slot as llama-server's /slots shows it. */
typedef struct sipp_slot_info {
    int id;
    bool busy;           /* serving a request now */
    int n_tokens;        /* tokens whose KV it holds (as of the last step for a busy slot) */
    char key[256];       /* the context_key pinned to it, truncated; "" when none */
    double last_used_ms; /* sipp_now_ms() of its last request's end; 0 when never used */
} sipp_slot_info;

/* Fills up to cap entries, one per slot; returns how many slots there are. [any thread] */
SIPP_API int sipp_engine_slots(sipp_engine *engine, sipp_slot_info *out, int cap);

/* One slot's conversation to a file and back (llama-server's /slots/ID?action=save|restore|erase):
 * the file holds the slot's tokens, its context_key and its sequence state, with the identity of
 * the model file as sipp_engine_save_slots writes it, so that a restore into an engine of another
 * (or a changed) model file is refused. A restored slot holds the same KV and tokens: the next request
 * whose prompt starts with them reuses them (cached_tokens) and continues as the saved slot would.
 * Each waits for the engine to be idle (as sipp_engine_save_slots) and is SIPP_ERR_BUSY while it serves
 * requests. Save: SIPP_ERR_INVALID_ARGUMENT for an empty slot; restore: SIPP_ERR_IO for a file that
 * cannot be read, SIPP_ERR_MODEL for one of another model or damaged (the slot is left empty).
 * *n_tokens (optional) counts the tokens saved, restored or erased; *n_bytes (optional) the file's
 * size. [any thread] */
SIPP_API sipp_status sipp_engine_slot_save(sipp_engine *engine, int slot_id, const char *path, int *n_tokens,
                                           uint64_t *n_bytes, char *errbuf);
SIPP_API sipp_status sipp_engine_slot_restore(sipp_engine *engine, int slot_id, const char *path,
                                              int *n_tokens, uint64_t *n_bytes, char *errbuf);
SIPP_API sipp_status sipp_engine_slot_erase(sipp_engine *engine, int slot_id, int *n_tokens, char *errbuf);

/* The message of the calling thread's last failed call on this engine (borrowed; valid on this thread
 * until its next failing call or error read). Threads do not see each other's messages; a thread
 * that has not failed on the engine reads the last failure of any thread. [any thread] */
SIPP_API const char *sipp_engine_last_error(const sipp_engine *engine);

typedef enum sipp_finish_reason {
    SIPP_FINISH_NONE = 0, /* still running */
    SIPP_FINISH_STOP,     /* end of generation token or a stop string */
    SIPP_FINISH_LENGTH,   /* max_tokens reached */
    SIPP_FINISH_CANCELLED,
    SIPP_FINISH_ERROR,
} sipp_finish_reason;

/* "stop", "length", "cancelled", "error" or "" */
SIPP_API const char *sipp_finish_reason_name(sipp_finish_reason reason);

/* A streamed piece of text: valid UTF-8 of complete characters only, never part of a stop string.
 * Called on the engine thread; keep it short. Return false to cancel the request. */
typedef bool (*sipp_piece_fn)(const char *piece, size_t len, void *user);

/* Called once when a request ends, however it ends (stop, length, cancelled, error), on the engine
 * thread, before waiters wake. The request must not be freed from inside it. */
typedef void (*sipp_finish_fn)(sipp_finish_reason reason, void *user);

typedef struct sipp_sampling {
    float temperature;       /* 0 = greedy; default 0.8 */
    int top_k;               /* 0 = off; default 40 */
    float top_p;             /* 1 = off; default 0.95 */
    float min_p;             /* 0 = off; default 0.05 */
    float repeat_penalty;    /* 1 = off; default 1.0 */
    int repeat_last_n;       /* tokens the penalties look back over; default 64 */
    uint32_t seed;           /* SIPP_SEED_RANDOM = a fresh seed each request */
    float frequency_penalty; /* OpenAI's: subtracted per earlier occurrence; 0 = off (default) */
    float presence_penalty;  /* OpenAI's: subtracted once a token occurred; 0 = off (default) */
} sipp_sampling;

#define SIPP_SEED_RANDOM 0xFFFFFFFFu

typedef struct sipp_request_params {
    /* Exactly one of prompt (a raw query), messages (a chat) or tokens (token ids, used as they are:
     * for benchmarks and teacher-forced checks) is set. */
    const char *prompt;
    const sipp_message *messages;
    size_t n_messages;
    const int32_t *tokens;
    size_t n_tokens;
    const char *chat_template; /* NULL: the model's */

    int max_tokens; /* default 256; -1 = until the context is full */
    sipp_sampling sampling;
    const char *const *stop; /* stop strings, matched across token boundaries, never emitted */
    size_t n_stop;
    bool ignore_eos; /* keep generating past end-of-generation tokens */

    /* Pins a conversation to a slot: the next request with the same key reuses the slot's KV and
     * evaluates only the new tokens. Two requests with one key never run at once. */
    const char *context_key;
    int timeout_ms; /* 0 = none; past it the request finishes as cancelled (timeout) */

    sipp_piece_fn on_piece;   /* optional */
    void *user;               /* given to on_piece and on_finish */
    sipp_finish_fn on_finish; /* optional */

    /* A chat in the shape of an OpenAI chat request, as JSON text (instead of messages): rendered
     * with the model's Jinja template (or chat_template) by llama.cpp's chat library. Fields:
     *   messages              [{"role": system|developer|user|assistant|tool, "content", "tool_calls",
     *                         "tool_call_id", "reasoning_content"}], content a string or parts:
     *                         {"type":"text","text"}, {"type":"image_url","image_url":{"url":
     *                         "data:image/...;base64,..."}} and {"type":"input_audio","input_audio":
     *                         {"data": base64, "format": "wav"|"mp3"|"flac"}} (images and audio need
     *                         a model loaded with a projector; other URLs than data: are refused)
     *   tools                 [{"type":"function","function":{"name","description","parameters"}}]
     *   tool_choice           "auto" (default) | "none" | "required" | {"type":"function","function":
     *                         {"name"}}: required and a named function are enforced by a grammar made
     *                         from the tools' schemas; auto starts that grammar lazily at the
     *                         template's tool-call trigger
     *   parallel_tool_calls   bool (default false)
     *   response_format       {"type":"text"|"json_object"} or {"type":"json_schema","json_schema":
     *                         {"name","schema","strict"}}
     *   json_schema, grammar  llama.cpp's extensions: a schema object, or GBNF text
     *   reasoning_format      "auto" (default) | "none" | "deepseek": how reasoning is separated
     *   chat_template_kwargs  {name: value} given to the template (e.g. enable_thinking)
     *   thinking_budget_tokens int: after that many reasoning tokens the end tag is forced
     * A field with a wrong type or value is SIPP_ERR_INVALID_ARGUMENT naming it, and so are tools,
     * schemas and grammars past the engine's sipp_schema_limits. Parse the answer with
     * sipp_chat_parser_new. */
    const char *chat_json;
    const char *grammar;     /* GBNF constraining a prompt's output (chats give it in chat_json) */
    const char *json_schema; /* a JSON Schema text constraining a prompt's output */
    /* -1 (default): no log-probabilities. 0..SIPP_MAX_TOP_LOGPROBS: each generated token's
     * log-probability and that many most likely alternatives are recorded, from the distribution
     * the sampler drew from (sipp_request_logprobs_json). */
    int logprobs;
    /* The adapters this request runs with (llama-server's "lora"): the listed ids at their scales,
     * every other adapter at 0. NULL or n_lora 0: the engine's current scales. An id the engine
     * does not have is SIPP_ERR_INVALID_ARGUMENT. Requests whose adapter scales differ are never in
     * one batch: the engine runs one set at a time, finishing the requests of the running set before
     * it starts a request of another (in queue order, so none waits for ever), and a slot's cached
     * prefix serves only a request of the same set. */
    const sipp_lora_scale *lora;
    size_t n_lora;
} sipp_request_params;

#define SIPP_MAX_TOP_LOGPROBS 20

SIPP_API sipp_request_params sipp_request_default_params(void);

typedef struct sipp_request sipp_request;

typedef struct sipp_request_stats {
    int prompt_tokens;
    int cached_tokens; /* prompt tokens reused from the KV (this slot's, or shared from
                          another slot holding the same prefix), not evaluated again */
    int generated_tokens;
    double queue_ms; /* submit to first scheduled */
    double ttft_ms;  /* submit to first token */
    double prefill_ms;
    double decode_ms;
    double prefill_tokens_per_s;
    double decode_tokens_per_s;
    double total_ms;
    int draft_tokens;    /* tokens speculation proposed (sipp_engine_params.speculative) */
    int accepted_tokens; /* of those, the ones the model confirmed: acceptance = accepted / draft */
    int draft_steps;     /* decode steps that verified a proposal of this request */
    int cutoff_steps;    /* steps that draft_cutoff "auto" ran plain where it could have drafted */
    /* Whether this request speculated: "none" (the engine does not), "ngram" or "draft" (it did, in
     * at least one step), "ngram cut off (plain was faster)" or "draft cut off (plain was faster)"
     * (draft_cutoff "auto" ran every step of it plain),
     * "off (repeat penalty)" (the distribution would depend on the proposals), "off (grammar,
     * thinking budget or logprobs)". */
    char speculation[48];
    int media_tokens;  /* prompt positions that came from images or audio (in prompt_tokens) */
    int media_encoded; /* images and audio clips the projector encoded for this request; one
                          resent in a later turn whose KV is reused is not encoded again */
    double encode_ms;  /* time the projector spent encoding them */
} sipp_request_stats;

/* Queues a request. SIPP_ERR_BUSY at once when the queue is full; SIPP_ERR_INVALID_ARGUMENT for
 * bad parameters (the message is on the engine). The request must be freed with
 * sipp_request_free. [any thread] */
SIPP_API sipp_status sipp_engine_submit(sipp_engine *engine, const sipp_request_params *params,
                                        sipp_request **out);

/* The prompt's length in positions as sipp_engine_submit would make it (the template rendered,
 * tokenized, media counted), without queueing it and whatever its length: *n_prompt, and the
 * engine's context in *n_ctx (optional). A prompt of n_ctx positions or more is one submit refuses
 * (SIPP_ERR_CONTEXT_FULL). Errors as submit's, the message on the engine. [any thread] */
SIPP_API sipp_status sipp_engine_count_prompt(sipp_engine *engine, const sipp_request_params *params,
                                              int *n_prompt, int *n_ctx);

/* The prompt text sipp_engine_submit would tokenize for params (a chat rendered by its template, with
 * its tools and switches; a prompt as given), without queueing it: *prompt is malloc'ed (sipp_free).
 * *n_prompt (optional) is its length in positions, as sipp_engine_count_prompt counts it. Errors as
 * submit's, the message on the engine. [any thread] */
SIPP_API sipp_status sipp_engine_render_prompt(sipp_engine *engine, const sipp_request_params *params,
                                               char **prompt, int *n_prompt);

/* A fill-in-the-middle request (llama-server's /infill): the code before and after the hole, an
 * optional start of the middle (prompt, special texts parsed), and other files of the project. */
typedef struct sipp_infill_extra {
    const char *filename; /* NULL: "tmp" */
    const char *text;
} sipp_infill_extra;

typedef struct sipp_infill_request {
    const char *prefix;
    const char *suffix;
    const char *prompt; /* NULL or "": none */
    const sipp_infill_extra *extra;
    size_t n_extra;
    int n_batch;   /* the cut of prefix and suffix (3/4 and 1/4 of it); 0: 2048, llama-server's default */
    int n_predict; /* what the extra files leave room for (twice it); -1 as llama-server's default */
} sipp_infill_request;

/* The prompt tokens of a fill-in-the-middle request, built as llama-server's format_prompt_infill
 * builds them with the engine's context as the slot's: [FIM_REP]myproject, each extra file under
 * [FIM_SEP]name, [BOS], [FIM_PRE] prefix prompt [FIM_SUF] suffix [FIM_MID]; submit them as
 * sipp_request_params.tokens. *tokens is malloc'ed (sipp_free). SIPP_ERR_MODEL for a model whose
 * vocabulary has no prefix, suffix or middle token (the message names the missing ones).
 * [any thread] */
SIPP_API sipp_status sipp_engine_infill_tokens(sipp_engine *engine, const sipp_infill_request *request,
                                               int32_t **tokens, size_t *n_tokens);

/* Asks the request to stop; it finishes as cancelled within one engine step. [any thread] */
SIPP_API void sipp_request_cancel(sipp_request *request);

/* Waits until the request finishes or timeout_ms passes (-1 = forever). SIPP_OK when finished,
 * SIPP_ERR_TIMEOUT when not yet. [any thread] */
SIPP_API sipp_status sipp_request_wait(sipp_request *request, int timeout_ms);

/* Copies up to cap bytes of text not yet read (valid UTF-8, cut at a character boundary) and returns the byte
 * count; waits up to timeout_ms (-1 = forever) for some. Returns 0 with *finished set once all text
 * is read and the request has ended. One reader per request. [any thread] */
SIPP_API size_t sipp_request_read(sipp_request *request, char *buf, size_t cap, int timeout_ms,
                                  bool *finished);

/* The same, but stops at the end of the piece the engine published (one token's text as the stop
 * filter released it), so a reader that falls behind still gets the pieces the engine made, one per
 * call, rather than all that arrived meanwhile at once (a binding's token stream). A piece longer
 * than cap is returned in parts. Mixed with sipp_request_read on one request, each continues where
 * the other stopped. [any thread] */
SIPP_API size_t sipp_request_read_piece(sipp_request *request, char *buf, size_t cap, int timeout_ms,
                                        bool *finished);

/* After the request finished: */
SIPP_API sipp_finish_reason sipp_request_finish_reason(const sipp_request *request);
SIPP_API sipp_status sipp_request_status(const sipp_request *request);
SIPP_API const char *sipp_request_error(const sipp_request *request); /* borrowed, "" if none */
SIPP_API const char *sipp_request_text(const sipp_request *request);  /* borrowed, whole text, valid UTF-8 */
/* The stop string (of params.stop) that ended the request; NULL when it ended otherwise (an
 * end-of-generation token, a limit, ...). Borrowed, valid until the request is freed. */
SIPP_API const char *sipp_request_stop_string(const sipp_request *request);
SIPP_API void sipp_request_get_stats(const sipp_request *request, sipp_request_stats *stats);

/* Cancels the request if it still runs, waits for its end, and frees it. */
SIPP_API void sipp_request_free(sipp_request *request);

/* One token and its log-probability, as sampling saw it: its bytes as the model renders it
 * (specials included; a byte-fallback piece may be part of a UTF-8 character). */
#define SIPP_TOKEN_BYTES_MAX 256
typedef struct sipp_token_logprob {
    int32_t token;
    float logprob;
    int n_bytes;
    char bytes[SIPP_TOKEN_BYTES_MAX]; /* not NUL-terminated */
} sipp_token_logprob;

/* A generated token's entry: the token drawn and the most likely alternatives, best first. */
typedef struct sipp_logprob_entry {
    sipp_token_logprob chosen;
    int n_top;
    sipp_token_logprob top[SIPP_MAX_TOP_LOGPROBS];
} sipp_logprob_entry;

/* The log-probabilities recorded so far from token `from` on, typed: *entries (malloc'ed, free with
 * sipp_free; NULL when none are new) gets *n of them. Returns from + *n: the tokens handed out so
 * far, the `from` of the next call. [any thread] */
SIPP_API size_t sipp_request_logprobs(const sipp_request *request, size_t from, sipp_logprob_entry **entries,
                                      size_t *n);

/* The log-probabilities recorded so far from token `from` on, as a JSON array of OpenAI's
 * {"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]} (*json malloc'ed,
 * free with sipp_free; NULL when none are new). Returns how many tokens are recorded in all.
 * [any thread] */
SIPP_API size_t sipp_request_logprobs_json(const sipp_request *request, size_t from, char **json);

/* A note about how the request was rendered (borrowed, "" if none), e.g. that the model has no chat
 * template and ChatML was used. [any thread] */
SIPP_API const char *sipp_request_warning(const sipp_request *request);

/* ---- chat answers: content, reasoning and tool calls -------------------------------------------- */

/* Parses the text of a chat request's answer with the parser its template's format calls for
 * (llama.cpp's per-family tool-call and reasoning parsers), whole or as it streams. */
typedef struct sipp_chat_parser sipp_chat_parser;

/* A parser for the answer of a request submitted with chat_json or messages. [any thread] */
SIPP_API sipp_status sipp_chat_parser_new(const sipp_request *request, sipp_chat_parser **out, char *errbuf);
SIPP_API void sipp_chat_parser_free(sipp_chat_parser *parser);

/* Feeds more of the answer's text (is_final: it is all there). *deltas_json (malloc'ed, free with
 * sipp_free; NULL when nothing changed) is a JSON array of OpenAI chat deltas: {"content"},
 * {"reasoning_content"}, or {"tool_calls":[{"index", "id", "type", "function":{"name"}}]} for a new
 * call and {"tool_calls":[{"index","function":{"arguments"}}]} for a fragment of its arguments.
 * Concatenated they give sipp_chat_parser_message. A final text the format cannot parse is
 * SIPP_ERR_INVALID_ARGUMENT (message on sipp_chat_parser_error). */
SIPP_API sipp_status sipp_chat_parser_feed(sipp_chat_parser *parser, const char *text, size_t len,
                                           bool is_final, char **deltas_json);

/* The answer so far as an OpenAI assistant message: {"role":"assistant", "content",
 * "reasoning_content" (when there is some), "tool_calls" (when there are some: ids "call_...",
 * "type":"function", "function":{"name", "arguments" (a JSON text)})}. Borrowed, valid until the
 * next feed. */
SIPP_API const char *sipp_chat_parser_message(const sipp_chat_parser *parser);
SIPP_API size_t sipp_chat_parser_n_tool_calls(const sipp_chat_parser *parser);
SIPP_API const char *sipp_chat_parser_error(const sipp_chat_parser *parser);

/* The same answer typed, for callers that render it themselves (the gateway, the CLI): what one
 * more piece of output added (llama.cpp's common_chat_msg_diff). Each non-NULL field is new:
 * content and reasoning are text appended to the answer's content or reasoning; tool_index >= 0
 * names a tool call, which this delta starts when tool_id is set (with tool_name, which may be
 * NULL) and continues with tool_arguments, a fragment of its arguments' JSON text. A delta with a
 * tool_id is the first of its call; a call ends where the next one starts or the answer ends. All
 * strings are borrowed for the callback's duration only. */
typedef struct sipp_chat_delta {
    const char *content, *reasoning;
    long tool_index; /* -1: none */
    const char *tool_id, *tool_name, *tool_arguments;
} sipp_chat_delta;
typedef void (*sipp_chat_delta_cb)(const sipp_chat_delta *delta, void *user);
/* Feeds more of the answer's text, as sipp_chat_parser_feed does, and hands each new delta to cb,
 * in order; no JSON is made. [any thread, one caller at a time per parser] */
SIPP_API sipp_status sipp_chat_parser_feed_deltas(sipp_chat_parser *parser, const char *text, size_t len,
                                                  bool is_final, sipp_chat_delta_cb cb, void *user);
/* The answer so far, typed: its content ("" when none) and reasoning (NULL when none), borrowed
 * until the next feed. */
SIPP_API const char *sipp_chat_parser_content(const sipp_chat_parser *parser);
SIPP_API const char *sipp_chat_parser_reasoning(const sipp_chat_parser *parser);
/* Its tool call i (< sipp_chat_parser_n_tool_calls): id ("call_..."), name and arguments (a JSON
 * text), borrowed until the next feed. False when there is no such call. */
SIPP_API bool sipp_chat_parser_tool_call(const sipp_chat_parser *parser, size_t i, const char **id,
                                         const char **name, const char **arguments);

/* GBNF for a JSON Schema text (llama.cpp's converter): *grammar malloc'ed (sipp_free).
 * SIPP_ERR_INVALID_ARGUMENT with the converter's reason (naming the schema feature) otherwise, or
 * naming the bound of sipp_schema_limits_default() (below) that the schema goes past. */
SIPP_API sipp_status sipp_json_schema_to_grammar(const char *schema_json, char **grammar, char *errbuf);

/* Bounds on the schemas and grammars of one request (tools' parameters, response_format,
 * json_schema, grammar), checked before llama.cpp's converter sees them: its cost grows with the
 * cube of an object's optional properties, and each token's grammar step with the alternatives an
 * enum opens. A request past a bound is SIPP_ERR_INVALID_ARGUMENT naming the field and the bound.
 * The fields are named as the gateway's [limits] keys (docs/gateway.md). Counts are per request
 * unless a field says otherwise. */
typedef struct sipp_schema_limits {
    size_t schema_max_bytes;            /* compact JSON text of the schemas together */
    size_t schema_max_depth;            /* nesting of objects and arrays within one schema */
    size_t schema_max_properties;       /* "properties" of one object */
    size_t schema_max_total_properties; /* "properties" of every object together */
    size_t schema_max_enum;             /* values of one "enum" */
    size_t schema_max_refs;             /* "$ref"s together; each a local "#/..." that resolves */
    size_t grammar_max_bytes;           /* a GBNF grammar's text */
    size_t grammar_max_alternatives;    /* its '|'s (outside literals and classes) */
    /* Converting the schemas to a grammar runs on a thread of its own; past this many milliseconds
     * the request is refused (the conversion finishes in the background, bounded by the limits). */
    int schema_convert_ms;
    /* Images and audio in a chat (chat_json's image_url and input_audio parts): the bytes of one
     * decoded file, the pixels of one image (width x height, read from its header before it is
     * decoded), and the media of one request. Past one, the request is SIPP_ERR_INVALID_ARGUMENT
     * naming the part and the limit. */
    size_t image_max_bytes;
    size_t image_max_pixels;
    size_t media_max_items;
    /* An audio clip's length, read from its header before anything is decoded: past it, or a
     * sample rate outside 8-192 kHz, or a header claiming more than its bytes hold, the request is
     * SIPP_ERR_INVALID_ARGUMENT naming the clip. */
    double max_audio_seconds;
    /* The decoded bytes of one request's media together (an image's width x height x 3, an audio
     * clip's samples as floats at the projector's rate), counted from the headers before anything is
     * decoded: past it, SIPP_ERR_INVALID_ARGUMENT naming the item that crosses it. */
    size_t media_max_decoded_bytes;
    /* A budget of decoded media shared by every engine given it (NULL: none). A request holds its
     * decoded bytes from it while its media are decoded and tokenized; when the budget cannot hold
     * them, the request is SIPP_ERR_BUSY (try again shortly) instead of taking the memory. */
    struct sipp_media_budget *media_budget;
} sipp_schema_limits;

/* A count of decoded media bytes shared by several engines (sipp_schema_limits.media_budget): the
 * gateway gives one to every target so that concurrent requests together stay within it. */
typedef struct sipp_media_budget sipp_media_budget;
/* A budget of `bytes`; NULL when out of memory. [any thread] */
SIPP_API sipp_media_budget *sipp_media_budget_new(size_t bytes);
/* Frees it; no engine may still use it. */
SIPP_API void sipp_media_budget_free(sipp_media_budget *budget);
/* The bytes held now by requests decoding media. [any thread] */
SIPP_API size_t sipp_media_budget_in_use(const sipp_media_budget *budget);

/* Defaults far above what real clients send (an agent's ~20 tools are about 60 KB, 200 properties)
 * and far below what makes the converter or the grammar stall. */
SIPP_API sipp_schema_limits sipp_schema_limits_default(void);
/* The limits of the engine's requests from the next submit on (sipp_schema_limits_default until
 * set). [any thread] */
SIPP_API void sipp_engine_set_schema_limits(sipp_engine *engine, const sipp_schema_limits *limits);

/* Renders an OpenAI chat (the chat_json form above) with a template, without a model: template is
 * a Jinja text, "chatml", or a file path. *prompt malloc'ed (sipp_free). For tests and tools. */
SIPP_API sipp_status sipp_chat_render_json(const char *tmpl, const char *chat_json, char **prompt,
                                           char *errbuf);

typedef struct sipp_engine_stats {
    int slots;
    int running; /* requests in a slot */
    int queued;  /* requests waiting */
    uint64_t requests_done;
    uint64_t tokens_in;  /* prompt tokens evaluated */
    uint64_t tokens_out; /* tokens generated */
    uint64_t decode_steps;
    double mean_busy_slots;   /* busy slots per decode step, averaged */
    uint64_t draft_tokens;    /* speculation's proposals, all requests */
    uint64_t accepted_tokens; /* of those, the ones the model confirmed */
    uint64_t draft_steps;     /* decode steps that carried proposals */
    uint64_t cutoff_steps;    /* steps that could have drafted and that draft_cutoff "auto" ran plain */
    int kv_cells;             /* the context's KV cells (ctx_size: one cache shared by the slots) */
    int kv_cells_used;        /* cells the slots hold, busy or idle (as of the engine's last turn) */
} sipp_engine_stats;

SIPP_API void sipp_engine_get_stats(sipp_engine *engine, sipp_engine_stats *stats); /* [any thread] */

/* Empties the KV of every idle slot (the cache of earlier prompts and pinned conversations; their
 * context_keys are forgotten), at the engine's next turn, so that kv_cells_used falls to what the
 * running requests hold. Busy slots are not touched. [any thread] */
SIPP_API void sipp_engine_erase_idle_slots(sipp_engine *engine);

/* ---- memory ------------------------------------------------------------------------------------- */

#define SIPP_MEMORY_MAX_DEVICES 8

typedef struct sipp_memory_device {
    char name[32]; /* ggml's device name: "CUDA0", "Vulkan0", ... */
    uint64_t bytes;
} sipp_memory_device;

/* What a model and its engine hold, by place and by kind. Host memory is RAM: the CPU's buffers,
 * mmapped weights (file pages that count in the process's RSS once read) and pinned host buffers of
 * a GPU backend. Every other buffer sits on its device. */
typedef struct sipp_memory {
    uint64_t host_bytes;
    int n_devices;
    sipp_memory_device devices[SIPP_MEMORY_MAX_DEVICES];
    uint64_t weights_bytes; /* by kind, all places together */
    uint64_t kv_bytes;
    uint64_t compute_bytes; /* compute and output buffers */
} sipp_memory;

/* host_bytes plus every device's bytes. */
SIPP_API uint64_t sipp_memory_total(const sipp_memory *m);

/* Estimates what loading path with mp and starting an engine with ep would take, from the GGUF
 * header only (nothing is loaded): the tensors' bytes placed as the backend policy would place the
 * layers (gpu_layers of n_layer+1 on the chosen GPU device, the rest on the host), the KV cache for
 * ep's ctx_size (shared by ep's parallel slots) at ep's cache types (f16 by default), and the
 * compute and output buffers of one batch, mp's projector's weights (mmproj) and mp's LoRA adapters' (their
 * files' sizes). NULL params mean the
 * defaults. SIPP_ERR_MODEL when the header cannot be read, SIPP_ERR_INVALID_ARGUMENT for an unknown cache
 * type. */
SIPP_API sipp_status sipp_memory_estimate(const char *path, const sipp_model_params *mp,
                                          const sipp_engine_params *ep, sipp_memory *out, char *errbuf);

/* What the model's load allocated (its weight buffers) and what the engine's context allocated on
 * top (KV, compute, output): the sizes of the backend buffers llama.cpp made, per place. The engine's
 * figure includes its model's. [any thread] */
SIPP_API void sipp_model_memory(const sipp_model *model, sipp_memory *out);
SIPP_API void sipp_engine_memory(const sipp_engine *engine, sipp_memory *out);

/* ---- LoRA adapters ------------------------------------------------------------------------------ */

/* The engine's adapters: how many, and adapter id's path and current default scale (what a request
 * without "lora" runs with). SIPP_ERR_INVALID_ARGUMENT for an id out of range. [any thread] */
SIPP_API size_t sipp_engine_lora_count(const sipp_engine *engine);
SIPP_API sipp_status sipp_engine_lora_get(const sipp_engine *engine, size_t id, const char **path,
                                          float *scale);

/* Sets the default scales (llama-server's POST /lora-adapters): the listed ids at their scales, every
 * other adapter at 0. Requests already submitted keep the scales they were given. [any thread] */
SIPP_API sipp_status sipp_engine_lora_set(sipp_engine *engine, const sipp_lora_scale *scales, size_t n);

/* How many requests apply adapter id at a scale other than 0: in a slot (*running) and in the
 * engine's queue (*waiting); what an inference router's LoRA affinity reads (vLLM's
 * lora_requests_info). SIPP_ERR_INVALID_ARGUMENT for an id out of range. [any thread] */
SIPP_API sipp_status sipp_engine_lora_use(sipp_engine *engine, size_t id, int *running, int *waiting);

/* ---- embeddings --------------------------------------------------------------------------------- */

/* Embeds n_texts texts with the model's pooling (mean when the model has none), in a second context
 * of the same model: the weights are shared, not loaded twice, and generation is not disturbed.
 * *out is malloc'ed (free with sipp_free) and holds n_texts rows of *n_embd floats; with normalize
 * each row has unit L2 norm. *n_tokens (optional) receives the number of tokens embedded in all.
 * Runs on the calling thread; calls on one engine are serialised. [any thread] */
SIPP_API sipp_status sipp_engine_embed(sipp_engine *engine, const char *const *texts, size_t n_texts,
                                       bool normalize, float **out, int *n_embd, int *n_tokens);

/* Scores documents against a query with a reranking model (rank pooling): *scores is malloc'ed
 * (free with sipp_free) and holds n_docs floats, higher is more relevant. Each pair is one sequence
 * built as llama-server's /v1/rerank builds it: the model's "rerank" template
 * (tokenizer.chat_template.rerank, with {query} and {document} replaced, special tokens parsed)
 * when it has one, else [BOS] query [EOS] [SEP] document [EOS], each of BOS, EOS and SEP only where
 * the vocabulary adds it (EOS falls back to SEP). SIPP_ERR_MODEL when the model is not a reranker.
 * [any thread] */
SIPP_API sipp_status sipp_engine_rerank(sipp_engine *engine, const char *query, const char *const *docs,
                                        size_t n_docs, float **scores);

/* How an embedding or rerank call may be stopped part-way, and how it embeds. Each input (each
 * document, for rerank) is one llama_decode; between two of them the call looks at the clock and
 * asks should_continue, so an abandoned call stops within one input's time and frees the embedding
 * context for the next caller. A model whose output is not finite (NaN or infinity) is an error,
 * SIPP_ERR_MODEL naming the input, never a row of garbage. */
typedef struct sipp_embed_options {
    bool normalize;                      /* embed: unit L2 norm per row (default true) */
    int timeout_ms;                      /* 0: none; past it SIPP_ERR_TIMEOUT (counted from the call) */
    bool (*should_continue)(void *user); /* NULL, or false to stop: SIPP_ERR_CANCELLED */
    void *user;
} sipp_embed_options;

SIPP_API sipp_embed_options sipp_embed_default_options(void);

/* sipp_engine_embed and sipp_engine_rerank with options (NULL: the defaults). [any thread] */
SIPP_API sipp_status sipp_engine_embed_with(sipp_engine *engine, const char *const *texts, size_t n_texts,
                                            const sipp_embed_options *options, float **out, int *n_embd,
                                            int *n_tokens);
/* *n_tokens (optional) receives the tokens of all the pairs evaluated. */
SIPP_API sipp_status sipp_engine_rerank_with(sipp_engine *engine, const char *query, const char *const *docs,
                                             size_t n_docs, const sipp_embed_options *options, float **scores,
                                             int *n_tokens);

/* ---- speech out: text to speech, and audio encoding ------------------------------------------- */

/* A voice: text in, 16-bit mono PCM out. Two engines stand behind one handle:
 *   - flite (Debian's flite, no model file): model "flite", its voices kal (8 kHz), kal16, slt,
 *     rms and awb (16 kHz). The voice is chosen per call.
 *   - libmtmd's audio generation: model is a Qwen3-TTS or Pocket TTS backbone GGUF and mmproj its
 *     projector; it generates as llama-tts does, with llama-tts's defaults (sampling, frame cap)
 *     unless the call says otherwise, and an optional speaker reference clip.
 * Long text is split at sentence ends and each sentence is spoken and handed to the caller's
 * callback as soon as it is ready (streaming), so the first audio comes after one sentence. */
typedef struct sipp_tts sipp_tts;

typedef struct sipp_tts_params {
    const char *model;   /* "flite", or the backbone GGUF of a Qwen3-TTS / Pocket TTS pair */
    const char *mmproj;  /* the pair's projector; required with a GGUF model, NULL for flite */
    const char *speaker; /* NULL, or a reference clip (WAV, MP3, FLAC) of the voice to speak in */
    const char *voice;   /* flite: the default voice (NULL: "slt"); ignored by the GGUF pipelines */
    const char *backend; /* the backbone's backend (NULL: "auto"); flite runs on the CPU */
    int n_threads;       /* 0: as the engine chooses; the backbone's and the projector's, per call */
    /* A GGUF pair: how many calls generate at once (0: 1), each in a state of its own (a backbone
     * context and a projector context on the one loaded model); more calls wait for a free one. */
    int n_parallel;
    /* Qwen3-TTS: the calls share one backbone context instead, a sequence each, and the frames of
     * calls at once are decoded together, one batch a frame. Off by default: on the CPUs measured
     * (BENCHMARKS.md) it was no faster than a context per call, and a call's samples then depend on
     * which calls shared its decodes (a call alone still gives llama-tts's). */
    bool batch_frames;
    /* A GGUF pair: more voices, each a reference clip under a name a call's voice picks (the voice
     * speaker_names[i] speaks like the clip speaker_paths[i]); "default" stays speaker's (or, without
     * one, the pair's own voice). Names are unique, not empty and not "default". */
    const char *const *speaker_names;
    const char *const *speaker_paths;
    int n_speakers;
} sipp_tts_params;

SIPP_API sipp_tts_params sipp_tts_default_params(void);

/* Loads the voice. On failure *out is NULL and errbuf (SIPP_ERROR_SIZE bytes) names the file or
 * voice and what was wrong. [any thread] */
SIPP_API sipp_status sipp_tts_new(const sipp_tts_params *params, sipp_tts **out, char *errbuf);
SIPP_API void sipp_tts_free(sipp_tts *tts);

/* The calling thread's last error on this handle (see sipp_engine_last_error). [any thread] */
SIPP_API const char *sipp_tts_last_error(const sipp_tts *tts);

/* "flite", "qwen3tts" or "pockettts". [any thread] */
SIPP_API const char *sipp_tts_pipeline(const sipp_tts *tts);
/* The rate, in Hz, the default voice speaks at (flite slt: 16000; Qwen3-TTS: 24000). [any thread] */
SIPP_API int sipp_tts_sample_rate(const sipp_tts *tts);
/* The voices it can speak with (borrowed names; i from 0 until NULL): flite's voices, or a GGUF
 * pipeline's "default" (its speaker reference, if any) and then its named speakers. [any thread] */
SIPP_API const char *sipp_tts_voice_borrow(const sipp_tts *tts, size_t i);
/* The memory it holds (weights, contexts, buffers), measured after loading. [any thread] */
SIPP_API uint64_t sipp_tts_memory_bytes(const sipp_tts *tts);
/* The same by place and kind (flite's voices are built into the library: all zero). [any thread] */
SIPP_API void sipp_tts_memory(const sipp_tts *tts, sipp_memory *out);

/* Qwen3-TTS with batch_frames: the frames the backbone has decoded since loading and the decodes they
 * took (frames / decodes is the mean batch). Zeros otherwise. [any thread] */
SIPP_API void sipp_tts_frames(sipp_tts *tts, uint64_t *frames, uint64_t *decodes);

/* A piece of speech as it is ready: n_samples samples at sample_rate. Return false to stop (the
 * call then ends with SIPP_ERR_CANCELLED). Called on the thread of sipp_tts_speak. */
typedef bool (*sipp_audio_fn)(const int16_t *samples, size_t n_samples, int sample_rate, void *user);

#define SIPP_SPEED_MIN 0.25f
#define SIPP_SPEED_MAX 4.0f

/* What a call used, in OpenAI's terms (speech.audio.done's usage): a GGUF pair's input tokens are its
 * backbone's prompt rows and its output tokens the frames it generated, summed over the sentences;
 * flite has no tokens (zeros). */
typedef struct sipp_speak_usage {
    uint64_t input_tokens, output_tokens;
} sipp_speak_usage;

typedef struct sipp_speak_options {
    const char *voice;    /* flite: one of sipp_tts_voice_borrow's names (NULL: the default) */
    const char *language; /* Qwen3-TTS: "en", "zh", ... (NULL: llama-tts's default, "en") */
    float speed;          /* 0.25-4.0 (default 1): flite by its own duration control, the GGUF
                             pipelines by resampling */
    int sample_rate;      /* 0: the voice's own rate; else every sample is resampled to this */
    uint32_t seed;        /* SIPP_SEED_RANDOM or a fixed seed (default: llama-tts's) */
    int top_k;            /* <= 0: the pipeline's default (as llama-tts) */
    float top_p;          /* <= 0: the pipeline's default */
    int max_frames;       /* <= 0: llama-tts's cap (512 frames) */
    /* NULL, or a flag another thread sets to stop the call (SIPP_ERR_CANCELLED) within one sentence
     * for flite, one frame for the GGUF pipelines */
    const volatile bool *cancel;
    sipp_audio_fn on_audio; /* NULL, or each sentence's samples as they are ready */
    void *user;
    sipp_speak_usage *usage; /* NULL, or filled in as the call goes (zeroed at its start) */
} sipp_speak_options;

SIPP_API sipp_speak_options sipp_speak_default_options(void);

/* Speaks text (UTF-8). With samples non-NULL, *samples receives all the audio (malloc'ed, free with
 * sipp_free), *n_samples its length and *sample_rate (optional) its rate. Empty text, an unknown voice
 * or a speed out of range is SIPP_ERR_INVALID_ARGUMENT naming it. Calls on one handle may come from
 * any thread: flite's synthesis is serialised process-wide (flite is not reentrant), a GGUF
 * pipeline's per handle. [any thread] */
SIPP_API sipp_status sipp_tts_speak(sipp_tts *tts, const char *text, const sipp_speak_options *options,
                                    int16_t **samples, size_t *n_samples, int *sample_rate);

/* The sentences text is spoken in: *n_parts pairs of (start, length) byte offsets in *parts
 * (malloc'ed, free with sipp_free). A sentence ends after '.', '!', '?' or a line break followed by
 * white space, and parts longer than max_bytes (0: no limit) are cut at the last space before it.
 * [any thread] */
SIPP_API sipp_status sipp_speech_split(const char *text, size_t max_bytes, size_t **parts, size_t *n_parts);

/* Audio encodings, as OpenAI's response_format names them. */
typedef enum sipp_audio_format {
    SIPP_AUDIO_WAV = 0, /* RIFF WAVE, 16-bit PCM at the input's rate */
    SIPP_AUDIO_PCM,     /* raw signed 16-bit little-endian at 24 kHz, as OpenAI defines "pcm" */
    SIPP_AUDIO_FLAC,    /* FLAC (libFLAC) at the input's rate */
    SIPP_AUDIO_MP3,     /* MPEG-1/2 layer III (libmp3lame), the input's rate if MP3 has it, else 24 kHz */
    SIPP_AUDIO_OPUS,    /* Opus in Ogg (libopus, libogg); decodes at 48 kHz as every Ogg Opus does */
} sipp_audio_format;

/* The format called name ("wav", "pcm", "flac", "mp3", "opus"); SIPP_ERR_INVALID_ARGUMENT naming
 * the known ones otherwise. [any thread] */
SIPP_API sipp_status sipp_audio_format_parse(const char *name, sipp_audio_format *out);
/* Its name and its media type ("audio/wav", "audio/pcm", "audio/flac", "audio/mpeg", "audio/ogg").
 * [any thread] */
SIPP_API const char *sipp_audio_format_name(sipp_audio_format format);
SIPP_API const char *sipp_audio_format_mime(sipp_audio_format format);

/* Encoded bytes as they are ready; return false to stop (the encoder's calls then fail with
 * SIPP_ERR_CANCELLED). */
typedef bool (*sipp_bytes_fn)(const void *data, size_t n, void *user);

typedef struct sipp_audio_encoder sipp_audio_encoder;

/* An encoder of input_rate-Hz mono 16-bit samples into format, writing to write(user).
 * streamed: bytes go out as each chunk is encoded, and headers that hold the length (WAV's sizes)
 * carry placeholders (0xFFFFFFFF, as ffmpeg writes a WAV to a pipe); not streamed: everything goes out
 * at sipp_audio_encoder_finish with exact headers (WAV sizes, FLAC's sample count and MD5, MP3's
 * LAME tag with the encoder delay, so decoders give back exactly the samples put in). */
SIPP_API sipp_status sipp_audio_encoder_new(sipp_audio_format format, int input_rate, bool streamed,
                                            sipp_bytes_fn write, void *user, sipp_audio_encoder **out,
                                            char *errbuf);
/* The rate the output decodes at (pcm: 24000; opus: 48000; otherwise the input's, or MP3's nearest). */
SIPP_API int sipp_audio_encoder_output_rate(const sipp_audio_encoder *enc);
/* Encodes n samples (at the input rate). */
SIPP_API sipp_status sipp_audio_encoder_write(sipp_audio_encoder *enc, const int16_t *samples, size_t n);
/* Flushes the last frames and trailers. Call once; no write after it. */
SIPP_API sipp_status sipp_audio_encoder_finish(sipp_audio_encoder *enc);
SIPP_API const char *sipp_audio_encoder_last_error(const sipp_audio_encoder *enc);
SIPP_API void sipp_audio_encoder_free(sipp_audio_encoder *enc);
/* ---- speech to text (whisper.cpp) ---------------------------------------------------------------
 *
 * A transcriber is a whisper.cpp model (its ggml file, e.g. ggml-tiny.bin) loaded by libwhisper, which
 * the artifact carries beside libggml (built from the pinned whisper.cpp against the same ggml, so a
 * whisper model and a llama model run in one process). It holds `parallel` whisper states: that many
 * clips are transcribed at once, each call taking a free state (waiting for one when all are busy).
 * Decoding defaults are whisper-cli's (beam 5, best of 5, the temperature fallback in steps of 0.2 and
 * its entropy, log-probability and no-speech thresholds), so a clip gives the transcript whisper-cli
 * gives with the same language and threads.
 *
 *   sipp_transcriber_new()      the model on the backend the load policy picks (as for llama models)
 *   sipp_transcribe_bytes()     a WAV/MP3/FLAC file's bytes: measured, decoded and resampled to 16 kHz
 *                               mono (the miniaudio whisper-cli uses), then transcribed
 *   sipp_transcribe_pcm()       16 kHz mono float samples
 *   sipp_transcript_*()         the result: text, language, segments (times, tokens, scores, words)
 *   sipp_transcript_render()    json, text, verbose_json, srt or vtt, as OpenAI's API returns them
 *
 * Errors: the calls take an error buffer of SIPP_ERROR_SIZE bytes rather than leaving a message on the
 * transcriber, because many threads transcribe on one transcriber at once. */
typedef struct sipp_transcriber sipp_transcriber;
typedef struct sipp_transcript sipp_transcript;

typedef struct sipp_transcriber_params {
    const char *backend;       /* auto (NULL), cpu, vulkan, cuda, metal: the policy of sipp_model_load */
    const char *backend_order; /* auto's preference (NULL: $SIPP_BACKEND_ORDER, else the default) */
    int parallel;              /* clips transcribed at once, one whisper state each (default 1) */
    int threads;               /* threads per clip; 0: min(4, CPUs), whisper-cli's default */
    bool flash_attn;           /* flash attention (default true, as whisper-cli) */
} sipp_transcriber_params;

SIPP_API sipp_transcriber_params sipp_transcriber_default_params(void);

/* Loads a whisper.cpp model. SIPP_ERR_NOT_FOUND (no file), SIPP_ERR_MODEL (not a whisper.cpp model,
 * or libwhisper refused it: the message says why), SIPP_ERR_BACKEND (the backend, or an artifact
 * without libwhisper: the message names the module and the command that builds it). */
SIPP_API sipp_status sipp_transcriber_new(const char *path, const sipp_transcriber_params *params,
                                          sipp_transcriber **out, char *errbuf);
/* Frees it. No transcription may be running on it. */
SIPP_API void sipp_transcriber_free(sipp_transcriber *t);
/* The backend it runs on ("cpu", "vulkan", ...) and why the policy chose it. Borrowed. [any thread] */
SIPP_API const char *sipp_transcriber_backend(const sipp_transcriber *t);
SIPP_API const char *sipp_transcriber_backend_reason(const sipp_transcriber *t);
/* What the model and its states hold, as libwhisper reported each buffer it allocated. [any thread] */
SIPP_API void sipp_transcriber_memory(const sipp_transcriber *t, sipp_memory *out);
/* What loading path with params would take, from the file's header alone (nothing is loaded): the
 * weights, and each of params->parallel states' KV caches (exact) and compute buffers (approximated
 * from above), placed as the backend policy would place them. SIPP_ERR_MODEL when the header is not a
 * whisper.cpp model's, SIPP_ERR_BACKEND when the backend cannot be had. [any thread] */
SIPP_API sipp_status sipp_transcriber_estimate(const char *path, const sipp_transcriber_params *params,
                                               sipp_memory *out, char *errbuf);
/* True when the file starts as a whisper.cpp model does (its ggml magic). [any thread] */
SIPP_API bool sipp_is_whisper_model(const char *path);

/* A whisper.cpp model file as its header describes it, read without loading it (sipp models info). */
typedef struct sipp_whisper_info {
    int32_t n_vocab, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer;
    int32_t n_text_ctx, n_text_state, n_text_head, n_text_layer, n_mels;
    int32_t ftype;       /* the weights' ggml file type (0 f32, 1 f16, 2 q4_0, 7 q8_0, ...) */
    int32_t qnt_version; /* the quantization format's version the header's ftype carries (ftype / 1000) */
    char ftype_name[16]; /* the main tensor type of ftype: "f32", "f16", "q8_0", ... ("unknown") */
    char size_name[16];  /* whisper.cpp's name of the size (from n_audio_layer): "tiny", "base", "small",
                            "medium", "large", or "unknown" */
    bool multilingual;   /* n_vocab >= 51865, as whisper.cpp decides */
    int n_tensors;
    uint64_t file_bytes;
} sipp_whisper_info;

/* Reads the header and walks the whole file (every section's length and every tensor checked against
 * the bytes present, as `sipp pull` checks a download). SIPP_ERR_NOT_FOUND when it cannot be opened,
 * SIPP_ERR_MODEL (naming path and what is wrong) for a file that is not a usable whisper.cpp model. */
SIPP_API sipp_status sipp_whisper_inspect(const char *path, sipp_whisper_info *out, char *errbuf);

typedef struct sipp_transcript_word {
    const char *text; /* borrowed from the transcript */
    int64_t t0_ms, t1_ms;
    float probability;
} sipp_transcript_word;

typedef struct sipp_transcript_segment {
    int64_t t0_ms, t1_ms;  /* from the start of the clip */
    const char *text;      /* borrowed from the transcript */
    const int32_t *tokens; /* the segment's text token ids (special tokens left out) */
    int n_tokens;
    float avg_logprob;                 /* mean log-probability of those tokens */
    float no_speech_prob;              /* the no-speech token's probability at the segment's window */
    const sipp_transcript_word *words; /* params.word_timestamps: its words with times, else NULL */
    int n_words;
} sipp_transcript_segment;

/* Called on the transcribing thread with each segment as it is decoded (streaming). */
typedef void (*sipp_segment_fn)(const sipp_transcript_segment *segment, void *user);

typedef struct sipp_transcribe_params {
    const char *language;       /* ISO code ("en", "de", ...); NULL or "auto": detected */
    bool translate;             /* to English */
    const char *prompt;         /* initial prompt (NULL: none) */
    float temperature;          /* first temperature (default 0) */
    float temperature_inc;      /* the fallback step (default 0.2; 0: no fallback) */
    float entropy_thold;        /* default 2.4 */
    float logprob_thold;        /* default -1 */
    float no_speech_thold;      /* default 0.6 */
    int beam_size;              /* default 5; 1: greedy */
    int best_of;                /* default 5: candidates sampled at a temperature above 0 */
    bool word_timestamps;       /* per-word times (whisper's token timestamps, joined into words) */
    int threads;                /* 0: the transcriber's */
    double max_seconds;         /* a longer clip is refused before decoding (0: no limit) */
    const volatile int *cancel; /* NULL, or set non-zero from any thread: SIPP_ERR_CANCELLED */
    sipp_segment_fn on_segment; /* NULL, or each segment as it comes */
    void *user;
    /* sipp_transcribe_bytes: a budget of decoded media shared with other requests (NULL: none). The
     * clip's decoded size (its samples as floats, at its own rate and at 16 kHz, counted from its
     * header before decoding) is held from it while the clip is decoded and transcribed; past what the
     * budget can hold now, SIPP_ERR_BUSY (try again shortly), past all of it SIPP_ERR_INVALID_ARGUMENT. */
    struct sipp_media_budget *media_budget;
} sipp_transcribe_params;

SIPP_API sipp_transcribe_params sipp_transcribe_default_params(void);

/* Transcribes 16 kHz mono samples. SIPP_ERR_INVALID_ARGUMENT (no samples, too long, an unknown
 * language), SIPP_ERR_CANCELLED, SIPP_ERR_INTERNAL (libwhisper failed). [any thread] */
SIPP_API sipp_status sipp_transcribe_pcm(sipp_transcriber *t, const float *samples, size_t n_samples,
                                         const sipp_transcribe_params *params, sipp_transcript **out,
                                         char *errbuf);
/* Transcribes an audio file's bytes (WAV, MP3 or FLAC; 8-192 kHz, any channels). The header is
 * measured before decoding: bytes that are not audio, a truncated file, zero samples or more than
 * max_seconds are SIPP_ERR_INVALID_ARGUMENT naming `where` (e.g. the file name). [any thread] */
SIPP_API sipp_status sipp_transcribe_bytes(sipp_transcriber *t, const unsigned char *data, size_t n,
                                           const char *where, const sipp_transcribe_params *params,
                                           sipp_transcript **out, char *errbuf);

SIPP_API void sipp_transcript_free(sipp_transcript *tr);
/* The whole text (the segments' texts joined). Borrowed. */
SIPP_API const char *sipp_transcript_text(const sipp_transcript *tr);
/* The language decoded in (ISO code), and its detected probability (1 when it was given). */
SIPP_API const char *sipp_transcript_language(const sipp_transcript *tr);
SIPP_API float sipp_transcript_language_probability(const sipp_transcript *tr);
/* The clip's length in seconds. */
SIPP_API double sipp_transcript_duration(const sipp_transcript *tr);
SIPP_API int sipp_transcript_n_segments(const sipp_transcript *tr);
/* Segment i (0 <= i < n_segments), borrowed, or NULL. */
SIPP_API const sipp_transcript_segment *sipp_transcript_segment_borrow(const sipp_transcript *tr, int i);

typedef enum sipp_transcript_format {
    SIPP_TRANSCRIPT_JSON,         /* {"text": ...} */
    SIPP_TRANSCRIPT_TEXT,         /* the text and a newline */
    SIPP_TRANSCRIPT_VERBOSE_JSON, /* task, language, duration, text, segments (and words) */
    SIPP_TRANSCRIPT_SRT,
    SIPP_TRANSCRIPT_VTT,
} sipp_transcript_format;

/* "json", "text", "verbose_json", "srt", "vtt" into *out; SIPP_ERR_INVALID_ARGUMENT otherwise. */
SIPP_API sipp_status sipp_transcript_format_parse(const char *name, sipp_transcript_format *out);
/* The transcript rendered as OpenAI's audio API returns it; task is "transcribe" or "translate" (in
 * verbose_json). Returns a malloc'ed string (free with sipp_free), or NULL when out of memory. */
SIPP_API char *sipp_transcript_render(const sipp_transcript *tr, sipp_transcript_format format,
                                      const char *task);

#ifdef __cplusplus
}
#endif
#endif /* SIPP_H */
