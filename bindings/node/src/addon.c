/*
 * addon.c: the Node-API addon of sipp's Node.js binding: libsipp's handles and calls, made safe for
 * JavaScript's event loop. lib/local.js builds the public API on top of it.
 *
 * The event loop never waits on the engine. Slow calls (model load, engine start and stop,
 * embeddings) run as napi_async_work on libuv's thread pool and settle a promise. A generation gets
 * a reader thread of its own: it submits the request, reads the text with sipp_request_read_piece
 * as the engine produces it, and hands each piece, then the end, to JavaScript through a thread-safe
 * function. Each piece is one the engine published (a token's text), even when this thread falls
 * behind on a busy machine: the token stream a caller iterates has the engine's pieces, not
 * whatever had piled up between two reads. Submitting on the reader thread keeps tokenisation and
 * chat-template rendering off the loop too, so every outcome of a request, including a submit error, arrives
 * as an event.
 *
 * Lifetimes. An endpoint (model + engine) is shared by its JavaScript handle, by every reader
 * thread and by every async work that uses it, each holding a reference; the memory goes with the
 * last one. The engine itself is freed by close() (or by the last reference, if JavaScript dropped
 * the handle without closing). Calls that use the engine (submit, embed, stats) enter a gate that
 * close() shuts and drains before freeing, so none runs on a freed engine. Requests submitted
 * before close() stay valid: libsipp finishes them as cancelled, and their readers end normally.
 * A request is shared by its JavaScript handle (for cancel) and its reader; the reader alone frees
 * the sipp_request, under the request's lock, so a cancel never touches a freed one.
 *
 * Only include/sipp.h is used, as for every client of libsipp.
 */
#define NAPI_VERSION 8
#include <node_api.h>

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sipp.h"

#define READ_CAP 16384                   /* bytes one sipp_request_read_piece may hand over */
#define READER_STACK (256 * 1024)        /* the reader thread keeps its buffer on the heap */
#define MAX_STRING (64u * 1024u * 1024u) /* longest prompt or message accepted, in bytes */

/* ---- small helpers ------------------------------------------------------------------------------ */

/* Evaluates a napi call; on failure throws (unless an exception is pending) and returns NULL. */
#define NAPI_CALL(env, call)                                                                                 \
    do {                                                                                                     \
        if ((call) != napi_ok) {                                                                             \
            throw_last(env, #call);                                                                          \
            return NULL;                                                                                     \
        }                                                                                                    \
    } while (0)

static void throw_last(napi_env env, const char *what) {
    bool pending = false;
    napi_is_exception_pending(env, &pending);
    if (pending) return;
    const napi_extended_error_info *info = NULL;
    napi_get_last_error_info(env, &info);
    char msg[256];
    snprintf(msg, sizeof msg, "sipp addon: %s failed: %s", what,
             info && info->error_message ? info->error_message : "unknown Node-API error");
    napi_throw_error(env, "internal_error", msg);
}

/* An Error whose .code is libsipp's status name and .status its number. */
static napi_value make_error(napi_env env, sipp_status status, const char *message) {
    napi_value code, msg, err, num;
    napi_create_string_utf8(env, sipp_status_name(status), NAPI_AUTO_LENGTH, &code);
    napi_create_string_utf8(env, message && *message ? message : sipp_status_name(status), NAPI_AUTO_LENGTH,
                            &msg);
    napi_create_error(env, code, msg, &err);
    napi_create_int32(env, (int32_t)status, &num);
    napi_set_named_property(env, err, "status", num);
    return err;
}

static napi_value throw_status(napi_env env, sipp_status status, const char *message) {
    napi_throw(env, make_error(env, status, message));
    return NULL;
}

static napi_value type_error(napi_env env, const char *message) {
    napi_throw_type_error(env, "invalid_argument", message);
    return NULL;
}

static void set_str(napi_env env, napi_value obj, const char *key, const char *value) {
    napi_value v;
    napi_create_string_utf8(env, value ? value : "", NAPI_AUTO_LENGTH, &v);
    napi_set_named_property(env, obj, key, v);
}

static void set_num(napi_env env, napi_value obj, const char *key, double value) {
    napi_value v;
    napi_create_double(env, value, &v);
    napi_set_named_property(env, obj, key, v);
}

static void set_bool(napi_env env, napi_value obj, const char *key, bool value) {
    napi_value v;
    napi_get_boolean(env, value, &v);
    napi_set_named_property(env, obj, key, v);
}

/* A property of obj, or NULL when it is absent, undefined or null. */
static napi_value prop(napi_env env, napi_value obj, const char *key) {
    napi_value v;
    napi_valuetype t;
    if (napi_get_named_property(env, obj, key, &v) != napi_ok) return NULL;
    if (napi_typeof(env, v, &t) != napi_ok || t == napi_undefined || t == napi_null) return NULL;
    return v;
}

/* A malloc'ed UTF-8 copy of a JS string; NULL (with a TypeError thrown) if v is not one. */
static char *dup_string(napi_env env, napi_value v, const char *what) {
    size_t len = 0;
    if (napi_get_value_string_utf8(env, v, NULL, 0, &len) != napi_ok) {
        char msg[160];
        snprintf(msg, sizeof msg, "%s must be a string", what);
        type_error(env, msg);
        return NULL;
    }
    if (len > MAX_STRING) {
        char msg[160];
        snprintf(msg, sizeof msg, "%s is %zu bytes; at most %u are accepted", what, len, MAX_STRING);
        type_error(env, msg);
        return NULL;
    }
    char *s = malloc(len + 1);
    if (!s) {
        throw_status(env, SIPP_ERR_NO_MEMORY, "out of memory");
        return NULL;
    }
    napi_get_value_string_utf8(env, v, s, len + 1, &len);
    return s;
}

/* A string argument, or NULL for undefined/null; false (TypeError thrown) for anything else. */
static bool opt_string(napi_env env, napi_value v, const char *what, char **out) {
    *out = NULL;
    napi_valuetype t;
    if (!v || napi_typeof(env, v, &t) != napi_ok || t == napi_undefined || t == napi_null) return true;
    return (*out = dup_string(env, v, what)) != NULL;
}

static bool get_number(napi_env env, napi_value obj, const char *key, double *out, bool *found) {
    napi_value v = prop(env, obj, key);
    *found = v != NULL;
    if (!v) return true;
    if (napi_get_value_double(env, v, out) != napi_ok) {
        char msg[160];
        snprintf(msg, sizeof msg, "%s must be a number", key);
        type_error(env, msg);
        return false;
    }
    return true;
}

/* Sets *out from obj[key] when present; false (TypeError thrown) when it is not a number. */
static bool opt_int(napi_env env, napi_value obj, const char *key, int *out) {
    double d;
    bool found;
    if (!get_number(env, obj, key, &d, &found)) return false;
    if (!found) return true;
    if (!(d >= INT_MIN && d <= INT_MAX)) {
        char msg[160];
        snprintf(msg, sizeof msg, "%s is out of range", key);
        type_error(env, msg);
        return false;
    }
    *out = (int)d;
    return true;
}

static bool opt_float(napi_env env, napi_value obj, const char *key, float *out) {
    double d;
    bool found;
    if (!get_number(env, obj, key, &d, &found)) return false;
    if (found) *out = (float)d;
    return true;
}

static bool opt_bool(napi_env env, napi_value obj, const char *key, bool *out) {
    napi_value v = prop(env, obj, key);
    if (!v) return true;
    if (napi_get_value_bool(env, v, out) != napi_ok) {
        char msg[160];
        snprintf(msg, sizeof msg, "%s must be a boolean", key);
        type_error(env, msg);
        return false;
    }
    return true;
}

static bool get_args(napi_env env, napi_callback_info info, size_t want, napi_value *argv) {
    size_t argc = want;
    if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < want) {
        type_error(env, "sipp addon: too few arguments");
        return false;
    }
    return true;
}

/* ---- runtime ------------------------------------------------------------------------------------ */

static napi_value runtime_object(napi_env env) {
    napi_value o;
    napi_create_object(env, &o);
    set_str(env, o, "artifact", sipp_runtime_artifact_dir());
    set_str(env, o, "version", sipp_version());
    set_str(env, o, "llamaRelease", sipp_llama_release());
    set_str(env, o, "llamaCommit", sipp_llama_commit());
    return o;
}

/* init(artifactDir | null): loads the artifact's backend modules, once per process. Synchronous:
 * lib/index.js calls it at load for an explicit backend (where blocking is what loading a module
 * does anyway) and otherwise through initAsync. */
static napi_value js_init(napi_env env, napi_callback_info info) {
    napi_value argv[1];
    if (!get_args(env, info, 1, argv)) return NULL;
    char *dir = NULL;
    napi_valuetype t;
    napi_typeof(env, argv[0], &t);
    if (t == napi_string && !(dir = dup_string(env, argv[0], "artifactDir"))) return NULL;
    sipp_runtime_params p = sipp_runtime_default_params();
    p.artifact_dir = dir;
    char err[SIPP_ERROR_SIZE] = "";
    sipp_status st = sipp_runtime_init(&p, err);
    free(dir);
    if (st != SIPP_OK) return throw_status(env, st, err);
    return runtime_object(env);
}

typedef struct init_work {
    napi_async_work work;
    napi_deferred deferred;
    char *dir;
    sipp_status status;
    char err[SIPP_ERROR_SIZE];
} init_work;

static void init_execute(napi_env env, void *data) {
    init_work *w = data;
    sipp_runtime_params p = sipp_runtime_default_params();
    p.artifact_dir = w->dir;
    w->status = sipp_runtime_init(&p, w->err);
}

static void init_complete(napi_env env, napi_status status, void *data) {
    init_work *w = data;
    if (w->status == SIPP_OK)
        napi_resolve_deferred(env, w->deferred, runtime_object(env));
    else
        napi_reject_deferred(env, w->deferred, make_error(env, w->status, w->err));
    napi_delete_async_work(env, w->work);
    free(w->dir);
    free(w);
}

static napi_value js_init_async(napi_env env, napi_callback_info info) {
    napi_value argv[1], promise, name;
    if (!get_args(env, info, 1, argv)) return NULL;
    init_work *w = calloc(1, sizeof *w);
    if (!w) return throw_status(env, SIPP_ERR_NO_MEMORY, "out of memory");
    napi_valuetype t;
    napi_typeof(env, argv[0], &t);
    if (t == napi_string && !(w->dir = dup_string(env, argv[0], "artifactDir"))) {
        free(w);
        return NULL;
    }
    NAPI_CALL(env, napi_create_promise(env, &w->deferred, &promise));
    napi_create_string_utf8(env, "sipp.init", NAPI_AUTO_LENGTH, &name);
    NAPI_CALL(env, napi_create_async_work(env, NULL, name, init_execute, init_complete, w, &w->work));
    NAPI_CALL(env, napi_queue_async_work(env, w->work));
    return promise;
}

static napi_value decision_object(napi_env env, const sipp_backend_decision *d) {
    napi_value o;
    napi_create_object(env, &o);
    set_str(env, o, "backend", d->backend);
    set_str(env, o, "reason", d->reason);
    set_str(env, o, "devices", d->devices);
    set_num(env, o, "gpuLayers", d->gpu_layers);
    return o;
}

/* backendDecide(name): what a load with this backend would decide, or throws why it cannot. */
static napi_value js_backend_decide(napi_env env, napi_callback_info info) {
    napi_value argv[1];
    if (!get_args(env, info, 1, argv)) return NULL;
    char *name = dup_string(env, argv[0], "backend");
    if (!name) return NULL;
    sipp_backend_decision d;
    memset(&d, 0, sizeof d);
    char err[SIPP_ERROR_SIZE] = "";
    sipp_status st = sipp_backend_decide(name, NULL, &d, err);
    free(name);
    if (st != SIPP_OK) return throw_status(env, st, err);
    return decision_object(env, &d);
}

/* backendsList(): [{name, compiled, available, devices}] for every backend name but auto. */
static napi_value js_backends_list(napi_env env, napi_callback_info info) {
    sipp_backend_info infos[16];
    int n = sipp_backends_list(infos, 16);
    if (n > 16) n = 16;
    napi_value arr;
    NAPI_CALL(env, napi_create_array_with_length(env, (size_t)n, &arr));
    for (int i = 0; i < n; i++) {
        napi_value o;
        napi_create_object(env, &o);
        set_str(env, o, "name", infos[i].name);
        set_bool(env, o, "compiled", infos[i].compiled);
        set_bool(env, o, "available", infos[i].available);
        set_num(env, o, "devices", infos[i].n_devices);
        napi_set_element(env, arr, (uint32_t)i, o);
    }
    return arr;
}

/* ---- endpoints ---------------------------------------------------------------------------------- */

typedef struct endpoint {
    atomic_int refs;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    sipp_model *model;
    sipp_engine *engine;
    int inside;   /* threads inside a call that uses the engine */
    bool closing; /* the gate is shut: no new calls */
    bool freed;   /* engine and model are gone */
} endpoint;

static void ep_free_engine(endpoint *ep) {
    sipp_engine_free(ep->engine);
    sipp_model_free(ep->model);
    ep->engine = NULL;
    ep->model = NULL;
    ep->freed = true;
}

static void ep_retain(endpoint *ep) { atomic_fetch_add(&ep->refs, 1); }

static void ep_release(endpoint *ep) {
    if (atomic_fetch_sub(&ep->refs, 1) != 1) return;
    if (!ep->freed) ep_free_engine(ep); /* dropped without close(): nobody else can be inside */
    pthread_cond_destroy(&ep->cv);
    pthread_mutex_destroy(&ep->mu);
    free(ep);
}

/* Enters the gate; false when the endpoint is closing or closed. */
static bool ep_enter(endpoint *ep) {
    pthread_mutex_lock(&ep->mu);
    bool ok = !ep->closing;
    if (ok) ep->inside++;
    pthread_mutex_unlock(&ep->mu);
    return ok;
}

static void ep_leave(endpoint *ep) {
    pthread_mutex_lock(&ep->mu);
    if (--ep->inside == 0) pthread_cond_broadcast(&ep->cv);
    pthread_mutex_unlock(&ep->mu);
}

static void ep_finalize(napi_env env, void *data, void *hint) { ep_release(data); }

static endpoint *get_endpoint(napi_env env, napi_value v) {
    void *p = NULL;
    if (napi_get_value_external(env, v, &p) != napi_ok || !p) {
        type_error(env, "sipp addon: not an endpoint handle");
        return NULL;
    }
    return p;
}

static const char ENDPOINT_CLOSED[] = "the endpoint is closed; create a new SippClient and add it again";

typedef struct open_work {
    napi_async_work work;
    napi_deferred deferred;
    char *path;
    char *backend;
    char *flash_attn;
    char *speculative;
    char *draft_model;
    char *draft_cutoff;
    char *cache_type_k, *cache_type_v;
    char *mmproj;
    sipp_model_params mp;
    sipp_engine_params ep_params;
    sipp_model *model;
    sipp_engine *engine;
    sipp_status status;
    char err[SIPP_ERROR_SIZE];
} open_work;

static void open_work_free(open_work *w) {
    free(w->path);
    free(w->backend);
    free(w->flash_attn);
    free(w->speculative);
    free(w->draft_model);
    free(w->draft_cutoff);
    free(w->cache_type_k);
    free(w->cache_type_v);
    free(w->mmproj);
    free(w);
}

static void open_execute(napi_env env, void *data) {
    open_work *w = data;
    w->mp.backend = w->backend;
    w->mp.flash_attn = w->flash_attn;
    w->mp.mmproj = w->mmproj;
    w->ep_params.speculative = w->speculative;
    w->ep_params.draft_model = w->draft_model;
    w->ep_params.draft_cutoff = w->draft_cutoff;
    w->ep_params.cache_type_k = w->cache_type_k;
    w->ep_params.cache_type_v = w->cache_type_v;
    w->status = sipp_model_load(w->path, &w->mp, &w->model, w->err);
    if (w->status != SIPP_OK) return;
    w->status = sipp_engine_new(w->model, &w->ep_params, &w->engine, w->err);
    if (w->status != SIPP_OK) {
        sipp_model_free(w->model);
        w->model = NULL;
    }
}

static napi_value info_object(napi_env env, const sipp_model *model) {
    sipp_model_info mi;
    sipp_model_get_info(model, &mi);
    napi_value o;
    napi_create_object(env, &o);
    set_str(env, o, "architecture", mi.architecture);
    set_str(env, o, "description", mi.description);
    set_num(env, o, "nParams", (double)mi.n_params);
    set_num(env, o, "sizeBytes", (double)mi.size_bytes);
    set_num(env, o, "nCtxTrain", mi.n_ctx_train);
    set_num(env, o, "nEmbd", mi.n_embd);
    set_num(env, o, "nLayer", mi.n_layer);
    set_num(env, o, "nHead", mi.n_head);
    set_num(env, o, "nHeadKv", mi.n_head_kv);
    set_num(env, o, "nVocab", mi.n_vocab);
    set_bool(env, o, "hasChatTemplate", mi.has_chat_template);
    set_num(env, o, "loadMs", mi.load_ms);
    return o;
}

static void open_complete(napi_env env, napi_status status, void *data) {
    open_work *w = data;
    if (w->status != SIPP_OK) {
        napi_reject_deferred(env, w->deferred, make_error(env, w->status, w->err));
    } else {
        endpoint *ep = calloc(1, sizeof *ep);
        napi_value handle, result;
        if (!ep || napi_create_external(env, ep, ep_finalize, NULL, &handle) != napi_ok) {
            free(ep);
            sipp_engine_free(w->engine);
            sipp_model_free(w->model);
            napi_reject_deferred(env, w->deferred, make_error(env, SIPP_ERR_NO_MEMORY, "out of memory"));
        } else {
            atomic_init(&ep->refs, 1);
            pthread_mutex_init(&ep->mu, NULL);
            pthread_cond_init(&ep->cv, NULL);
            ep->model = w->model;
            ep->engine = w->engine;
            napi_create_object(env, &result);
            napi_set_named_property(env, result, "handle", handle);
            napi_set_named_property(env, result, "backend",
                                    decision_object(env, sipp_model_backend(w->model)));
            napi_set_named_property(env, result, "info", info_object(env, w->model));
            napi_resolve_deferred(env, w->deferred, result);
        }
    }
    napi_delete_async_work(env, w->work);
    open_work_free(w);
}

/* open(path, options) -> Promise<{handle, backend, info}>: loads a model and starts its engine. */
static napi_value js_open(napi_env env, napi_callback_info info) {
    napi_value argv[2], promise, name;
    if (!get_args(env, info, 2, argv)) return NULL;
    open_work *w = calloc(1, sizeof *w);
    if (!w) return throw_status(env, SIPP_ERR_NO_MEMORY, "out of memory");
    w->mp = sipp_model_default_params();
    w->ep_params = sipp_engine_default_params();
    napi_value o = argv[1], b;
    bool ok = (w->path = dup_string(env, argv[0], "model")) != NULL;
    if (ok && (b = prop(env, o, "backend")))
        ok = (w->backend = dup_string(env, b, "options.backend")) != NULL;
    if (ok && (b = prop(env, o, "flashAttn")))
        ok = (w->flash_attn = dup_string(env, b, "options.flashAttn")) != NULL;
    if (ok && (b = prop(env, o, "speculative")))
        ok = (w->speculative = dup_string(env, b, "options.speculative")) != NULL;
    if (ok && (b = prop(env, o, "draftCutoff")))
        ok = (w->draft_cutoff = dup_string(env, b, "options.draftCutoff")) != NULL;
    if (ok && (b = prop(env, o, "cacheTypeK")))
        ok = (w->cache_type_k = dup_string(env, b, "options.cacheTypeK")) != NULL;
    if (ok && (b = prop(env, o, "cacheTypeV")))
        ok = (w->cache_type_v = dup_string(env, b, "options.cacheTypeV")) != NULL;
    if (ok && (b = prop(env, o, "draftModel")))
        ok = (w->draft_model = dup_string(env, b, "options.draftModel")) != NULL;
    if (ok && (b = prop(env, o, "mmproj"))) ok = (w->mmproj = dup_string(env, b, "options.mmproj")) != NULL;
    if (ok && (b = prop(env, o, "mmprojOffload")))
        ok = napi_get_value_bool(env, b, &w->mp.mmproj_offload) == napi_ok;
    ok = ok && opt_int(env, o, "gpuLayers", &w->mp.gpu_layers) &&
         opt_int(env, o, "ctxSize", &w->ep_params.ctx_size) &&
         opt_int(env, o, "parallel", &w->ep_params.parallel) &&
         opt_int(env, o, "threads", &w->ep_params.threads) &&
         opt_int(env, o, "batchSize", &w->ep_params.batch_size) &&
         opt_int(env, o, "maxQueued", &w->ep_params.max_queued) &&
         opt_bool(env, o, "embeddings", &w->ep_params.embeddings) &&
         opt_int(env, o, "draftMax", &w->ep_params.draft_max) &&
         opt_int(env, o, "draftMin", &w->ep_params.draft_min) &&
         opt_float(env, o, "draftPMin", &w->ep_params.draft_p_min);
    if (!ok) {
        open_work_free(w);
        return NULL;
    }
    NAPI_CALL(env, napi_create_promise(env, &w->deferred, &promise));
    napi_create_string_utf8(env, "sipp.open", NAPI_AUTO_LENGTH, &name);
    NAPI_CALL(env, napi_create_async_work(env, NULL, name, open_execute, open_complete, w, &w->work));
    NAPI_CALL(env, napi_queue_async_work(env, w->work));
    return promise;
}

typedef struct close_work {
    napi_async_work work;
    napi_deferred deferred;
    endpoint *ep;
} close_work;

static void close_execute(napi_env env, void *data) {
    endpoint *ep = ((close_work *)data)->ep;
    pthread_mutex_lock(&ep->mu);
    bool first = !ep->closing;
    ep->closing = true;
    while (ep->inside > 0)
        pthread_cond_wait(&ep->cv, &ep->mu);
    pthread_mutex_unlock(&ep->mu);
    if (first) ep_free_engine(ep); /* cancels what still runs; readers then see the end */
}

static void close_complete(napi_env env, napi_status status, void *data) {
    close_work *w = data;
    napi_value undef;
    napi_get_undefined(env, &undef);
    napi_resolve_deferred(env, w->deferred, undef);
    napi_delete_async_work(env, w->work);
    ep_release(w->ep);
    free(w);
}

/* close(handle) -> Promise<void>: cancels running requests, frees the engine and the model. */
static napi_value js_close(napi_env env, napi_callback_info info) {
    napi_value argv[1], promise, name;
    if (!get_args(env, info, 1, argv)) return NULL;
    endpoint *ep = get_endpoint(env, argv[0]);
    if (!ep) return NULL;
    close_work *w = calloc(1, sizeof *w);
    if (!w) return throw_status(env, SIPP_ERR_NO_MEMORY, "out of memory");
    w->ep = ep;
    ep_retain(ep);
    NAPI_CALL(env, napi_create_promise(env, &w->deferred, &promise));
    napi_create_string_utf8(env, "sipp.close", NAPI_AUTO_LENGTH, &name);
    NAPI_CALL(env, napi_create_async_work(env, NULL, name, close_execute, close_complete, w, &w->work));
    NAPI_CALL(env, napi_queue_async_work(env, w->work));
    return promise;
}

/* stats(handle) -> the engine's counters. Quick: libsipp copies them under a lock. */
static napi_value js_stats(napi_env env, napi_callback_info info) {
    napi_value argv[1];
    if (!get_args(env, info, 1, argv)) return NULL;
    endpoint *ep = get_endpoint(env, argv[0]);
    if (!ep) return NULL;
    if (!ep_enter(ep)) return throw_status(env, SIPP_ERR_CLOSED, ENDPOINT_CLOSED);
    sipp_engine_stats s;
    sipp_engine_get_stats(ep->engine, &s);
    ep_leave(ep);
    napi_value o;
    napi_create_object(env, &o);
    set_num(env, o, "slots", s.slots);
    set_num(env, o, "running", s.running);
    set_num(env, o, "queued", s.queued);
    set_num(env, o, "requestsDone", (double)s.requests_done);
    set_num(env, o, "tokensIn", (double)s.tokens_in);
    set_num(env, o, "tokensOut", (double)s.tokens_out);
    set_num(env, o, "decodeSteps", (double)s.decode_steps);
    set_num(env, o, "meanBusySlots", s.mean_busy_slots);
    return o;
}

/* ---- embeddings --------------------------------------------------------------------------------- */

typedef struct embed_work {
    napi_async_work work;
    napi_deferred deferred;
    endpoint *ep;
    char **texts;
    size_t n;
    bool normalize;
    float *out;
    int n_embd, n_tokens;
    sipp_status status;
    char err[SIPP_ERROR_SIZE];
} embed_work;

static void embed_execute(napi_env env, void *data) {
    embed_work *w = data;
    if (!ep_enter(w->ep)) {
        w->status = SIPP_ERR_CLOSED;
        snprintf(w->err, sizeof w->err, "%s", ENDPOINT_CLOSED);
        return;
    }
    w->status = sipp_engine_embed(w->ep->engine, (const char *const *)w->texts, w->n, w->normalize, &w->out,
                                  &w->n_embd, &w->n_tokens);
    if (w->status != SIPP_OK) snprintf(w->err, sizeof w->err, "%s", sipp_engine_last_error(w->ep->engine));
    ep_leave(w->ep);
}

static void embed_complete(napi_env env, napi_status status, void *data) {
    embed_work *w = data;
    if (w->status != SIPP_OK) {
        napi_reject_deferred(env, w->deferred, make_error(env, w->status, w->err));
    } else {
        napi_value rows, result;
        napi_create_array_with_length(env, w->n, &rows);
        for (size_t i = 0; i < w->n; i++) {
            void *bytes = NULL;
            napi_value ab, row;
            size_t n = (size_t)w->n_embd;
            napi_create_arraybuffer(env, n * sizeof(float), &bytes, &ab);
            memcpy(bytes, w->out + i * n, n * sizeof(float));
            napi_create_typedarray(env, napi_float32_array, n, ab, 0, &row);
            napi_set_element(env, rows, (uint32_t)i, row);
        }
        napi_create_object(env, &result);
        napi_set_named_property(env, result, "vectors", rows);
        set_num(env, result, "tokens", w->n_tokens);
        napi_resolve_deferred(env, w->deferred, result);
    }
    sipp_free(w->out);
    for (size_t i = 0; i < w->n; i++)
        free(w->texts[i]);
    free(w->texts);
    napi_delete_async_work(env, w->work);
    ep_release(w->ep);
    free(w);
}

/* embed(handle, texts[], normalize) -> Promise<{vectors: Float32Array[], tokens}> */
static napi_value js_embed(napi_env env, napi_callback_info info) {
    napi_value argv[3], promise, name;
    if (!get_args(env, info, 3, argv)) return NULL;
    endpoint *ep = get_endpoint(env, argv[0]);
    if (!ep) return NULL;
    uint32_t n = 0;
    if (napi_get_array_length(env, argv[1], &n) != napi_ok) return type_error(env, "texts must be an array");
    embed_work *w = calloc(1, sizeof *w);
    if (!w || !(w->texts = calloc(n ? n : 1, sizeof *w->texts))) {
        free(w);
        return throw_status(env, SIPP_ERR_NO_MEMORY, "out of memory");
    }
    bool ok = napi_get_value_bool(env, argv[2], &w->normalize) == napi_ok;
    for (uint32_t i = 0; ok && i < n; i++) {
        napi_value e;
        ok = napi_get_element(env, argv[1], i, &e) == napi_ok &&
             (w->texts[i] = dup_string(env, e, "input")) != NULL;
        if (ok) w->n++;
    }
    if (!ok) {
        for (size_t i = 0; i < w->n; i++)
            free(w->texts[i]);
        free(w->texts);
        free(w);
        return NULL;
    }
    w->ep = ep;
    ep_retain(ep);
    NAPI_CALL(env, napi_create_promise(env, &w->deferred, &promise));
    napi_create_string_utf8(env, "sipp.embed", NAPI_AUTO_LENGTH, &name);
    NAPI_CALL(env, napi_create_async_work(env, NULL, name, embed_execute, embed_complete, w, &w->work));
    NAPI_CALL(env, napi_queue_async_work(env, w->work));
    return promise;
}

/* ---- speech ------------------------------------------------------------------------------------- */

/* One speech(): a voice loaded for the call, its audio encoded into one buffer, on libuv's pool. */
typedef struct speech_work {
    napi_async_work work;
    napi_deferred deferred;
    char *model, *mmproj, *speaker, *voice, *language, *format, *text;
    sipp_speak_options o;
    sipp_audio_encoder *enc;
    sipp_audio_format fmt;
    char *out; /* the encoded bytes so far */
    size_t len, cap;
    sipp_status status;
    char err[SIPP_ERROR_SIZE];
    /* speechStream(): each encoded chunk goes to JavaScript as it is made, through tsfn, and the
     * call stops when the shared flag (also held by the JavaScript handle) is set */
    napi_threadsafe_function tsfn;
    struct speech_flag *flag;
} speech_work;

/* A stream's cancel flag, shared by its work and its JavaScript handle: freed by the last of them. */
typedef struct speech_flag {
    volatile bool cancel;
    atomic_int refs;
} speech_flag;

static void flag_release(speech_flag *f) {
    if (f && atomic_fetch_sub(&f->refs, 1) == 1) free(f);
}

static void flag_finalize(napi_env env, void *data, void *hint) { flag_release(data); }

/* What a stream hands to JavaScript: encoded bytes, or (end) the outcome. */
typedef struct speech_event {
    char *bytes;
    size_t len;
    bool end;
    sipp_status status;
    char err[SIPP_ERROR_SIZE];
} speech_event;

/* onEvent(error, chunk): a Buffer per chunk; at the end (null, null), or (Error) when it failed. */
static void speech_call_js(napi_env env, napi_value js_cb, void *context, void *data) {
    speech_event *ev = data;
    if (env && js_cb) {
        napi_value argv[2], undef;
        napi_get_undefined(env, &undef);
        napi_get_null(env, &argv[0]);
        napi_get_null(env, &argv[1]);
        void *copy = NULL;
        if (ev->end && ev->status != SIPP_OK)
            argv[0] = make_error(env, ev->status, ev->err);
        else if (!ev->end)
            napi_create_buffer_copy(env, ev->len, ev->len ? ev->bytes : "", &copy, &argv[1]);
        napi_call_function(env, undef, js_cb, 2, argv, NULL);
    }
    free(ev->bytes);
    free(ev);
}

static bool speech_post(speech_work *w, const void *data, size_t n, bool end) {
    speech_event *ev = calloc(1, sizeof *ev);
    if (!ev || (n && !(ev->bytes = malloc(n)))) {
        free(ev);
        return false;
    }
    if (n) memcpy(ev->bytes, data, n);
    ev->len = n;
    ev->end = end;
    ev->status = w->status;
    snprintf(ev->err, sizeof ev->err, "%s", w->err);
    if (napi_call_threadsafe_function(w->tsfn, ev, napi_tsfn_blocking) == napi_ok) return true;
    free(ev->bytes);
    free(ev);
    return false;
}

static bool speech_bytes(const void *data, size_t n, void *user) {
    speech_work *w = user;
    if (w->tsfn) return !w->flag->cancel && speech_post(w, data, n, false);
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? w->cap : 65536;
        while (cap < w->len + n)
            cap *= 2;
        char *b = realloc(w->out, cap);
        if (!b) return false;
        w->out = b;
        w->cap = cap;
    }
    memcpy(w->out + w->len, data, n);
    w->len += n;
    return true;
}

static void speech_work_free(speech_work *w) {
    char *strings[] = {w->model, w->mmproj, w->speaker, w->voice, w->language, w->format, w->text, w->out};
    for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++)
        free(strings[i]);
    sipp_audio_encoder_free(w->enc);
    flag_release(w->flag);
    free(w);
}

static bool speech_audio(const int16_t *samples, size_t n, int rate, void *user) {
    speech_work *w = user;
    if (!w->enc &&
        sipp_audio_encoder_new(w->fmt, rate, w->tsfn != NULL, speech_bytes, w, &w->enc, w->err) != SIPP_OK)
        return false;
    if (sipp_audio_encoder_write(w->enc, samples, n) == SIPP_OK) return true;
    snprintf(w->err, sizeof w->err, "%s", sipp_audio_encoder_last_error(w->enc));
    return false;
}

static void speech_execute(napi_env env, void *data) {
    speech_work *w = data;
    sipp_tts_params p = sipp_tts_default_params();
    p.model = w->model;
    p.mmproj = w->mmproj;
    p.speaker = w->speaker;
    sipp_tts *t;
    if ((w->status = sipp_tts_new(&p, &t, w->err)) != SIPP_OK) return;
    w->o.voice = w->voice;
    w->o.language = w->language;
    w->o.on_audio = speech_audio;
    w->o.user = w;
    if (w->flag) w->o.cancel = &w->flag->cancel;
    w->status = sipp_tts_speak(t, w->text, &w->o, NULL, NULL, NULL);
    if (w->status != SIPP_OK && !*w->err) snprintf(w->err, sizeof w->err, "%s", sipp_tts_last_error(t));
    if (w->status == SIPP_OK && w->enc && (w->status = sipp_audio_encoder_finish(w->enc)) != SIPP_OK)
        snprintf(w->err, sizeof w->err, "%s", sipp_audio_encoder_last_error(w->enc));
    sipp_tts_free(t);
    if (w->tsfn) speech_post(w, NULL, 0, true);
}

static void speech_complete(napi_env env, napi_status status, void *data) {
    speech_work *w = data;
    if (w->tsfn) { /* a stream: its end went through tsfn, after its chunks */
        napi_release_threadsafe_function(w->tsfn, napi_tsfn_release);
    } else if (w->status != SIPP_OK) {
        napi_reject_deferred(env, w->deferred, make_error(env, w->status, w->err));
    } else {
        napi_value buf;
        void *bytes = NULL;
        napi_create_buffer_copy(env, w->len, w->len ? w->out : "", &bytes, &buf);
        napi_resolve_deferred(env, w->deferred, buf);
    }
    napi_delete_async_work(env, w->work);
    speech_work_free(w);
}

/* The options of speech(): strings and numbers, as sipp.h names them. */
static bool speech_options(napi_env env, napi_value opts, speech_work *w) {
    int seed = -1;
    bool ok = opt_string(env, prop(env, opts, "mmproj"), "mmproj", &w->mmproj) &&
              opt_string(env, prop(env, opts, "speaker"), "speaker", &w->speaker) &&
              opt_string(env, prop(env, opts, "voice"), "voice", &w->voice) &&
              opt_string(env, prop(env, opts, "language"), "language", &w->language) &&
              opt_string(env, prop(env, opts, "format"), "format", &w->format) &&
              opt_float(env, opts, "speed", &w->o.speed) &&
              opt_int(env, opts, "sampleRate", &w->o.sample_rate) && opt_int(env, opts, "seed", &seed);
    if (ok && seed >= 0) w->o.seed = (uint32_t)seed;
    return ok;
}

/* A speech_work for speech(model, text, options, ...); NULL after throwing. */
static speech_work *speech_prepare(napi_env env, napi_value *argv) {
    speech_work *w = calloc(1, sizeof *w);
    if (!w) {
        throw_status(env, SIPP_ERR_NO_MEMORY, "out of memory");
        return NULL;
    }
    w->o = sipp_speak_default_options();
    bool ok = (w->model = dup_string(env, argv[0], "model")) &&
              (w->text = dup_string(env, argv[1], "input")) && speech_options(env, argv[2], w);
    if (ok && sipp_audio_format_parse(w->format ? w->format : "wav", &w->fmt) != SIPP_OK) {
        char msg[200];
        snprintf(msg, sizeof msg, "unknown audio format '%.40s': give one of wav, pcm, flac, mp3, opus",
                 w->format);
        throw_status(env, SIPP_ERR_INVALID_ARGUMENT, msg);
        ok = false;
    }
    if (ok) return w;
    speech_work_free(w);
    return NULL;
}

static bool speech_queue(napi_env env, speech_work *w) {
    napi_value name;
    napi_create_string_utf8(env, "sipp.speech", NAPI_AUTO_LENGTH, &name);
    return napi_create_async_work(env, NULL, name, speech_execute, speech_complete, w, &w->work) == napi_ok &&
           napi_queue_async_work(env, w->work) == napi_ok;
}

/* speech(model, text, options) -> Promise<Buffer>: the encoded audio (options.format, default wav). */
static napi_value js_speech(napi_env env, napi_callback_info info) {
    napi_value argv[3], promise;
    if (!get_args(env, info, 3, argv)) return NULL;
    speech_work *w = speech_prepare(env, argv);
    if (!w) return NULL;
    if (napi_create_promise(env, &w->deferred, &promise) == napi_ok && speech_queue(env, w)) return promise;
    speech_work_free(w);
    return NULL;
}

/* speechStream(model, text, options, onEvent) -> handle: the audio as it is encoded, each sentence's
 * bytes as soon as it is spoken (a streamed WAV carries placeholder sizes); speechCancel(handle) stops
 * it within one sentence (flite) or one frame (a GGUF pair), ending it with a cancelled error. */
static napi_value js_speech_stream(napi_env env, napi_callback_info info) {
    napi_value argv[4], name, handle;
    if (!get_args(env, info, 4, argv)) return NULL;
    speech_work *w = speech_prepare(env, argv);
    if (!w) return NULL;
    if (!(w->flag = calloc(1, sizeof *w->flag))) {
        speech_work_free(w);
        return throw_status(env, SIPP_ERR_NO_MEMORY, "out of memory");
    }
    atomic_init(&w->flag->refs, 2); /* the work's and the handle's */
    napi_create_string_utf8(env, "sipp.speechStream", NAPI_AUTO_LENGTH, &name);
    if (napi_create_external(env, w->flag, flag_finalize, NULL, &handle) != napi_ok) {
        atomic_fetch_sub(&w->flag->refs, 1);
        speech_work_free(w);
        throw_last(env, "napi_create_external");
        return NULL;
    }
    if (napi_create_threadsafe_function(env, argv[3], NULL, name, 0, 1, NULL, NULL, NULL, speech_call_js,
                                        &w->tsfn) != napi_ok) {
        speech_work_free(w);
        throw_last(env, "napi_create_threadsafe_function");
        return NULL;
    }
    if (speech_queue(env, w)) return handle;
    napi_release_threadsafe_function(w->tsfn, napi_tsfn_abort);
    speech_work_free(w);
    return throw_status(env, SIPP_ERR_INTERNAL, "cannot queue the speech");
}

/* speechCancel(handle): stops a speechStream. */
static napi_value js_speech_cancel(napi_env env, napi_callback_info info) {
    napi_value argv[1];
    if (!get_args(env, info, 1, argv)) return NULL;
    void *p = NULL;
    if (napi_get_value_external(env, argv[0], &p) != napi_ok || !p)
        return type_error(env, "not a speech stream handle");
    ((speech_flag *)p)->cancel = true;
    return NULL;
}

/* ---- requests ----------------------------------------------------------------------------------- */

typedef enum event_kind { EV_PIECE, EV_DELTA, EV_END, EV_ERROR } event_kind;

/* What a reader thread hands to JavaScript. */
typedef struct event {
    event_kind kind;
    char *text;    /* EV_PIECE: the piece; EV_DELTA: a JSON array of chat deltas; EV_END/EV_ERROR: the error
                      message (may be "") */
    char *message; /* EV_END of a chat: the parsed message (JSON), or NULL */
    size_t len;
    sipp_status status;
    sipp_finish_reason finish;
    sipp_request_stats stats;
} event;

typedef struct request {
    atomic_int refs; /* the JavaScript handle and the reader thread */
    endpoint *ep;
    pthread_mutex_t mu;
    sipp_request *r; /* set by the reader once submitted; NULL again before it is freed */
    bool cancelled;  /* cancel() came, maybe before the submit */
    napi_threadsafe_function tsfn;

    /* the parameters and the memory they point into, owned by the request */
    sipp_request_params params;
    char *prompt, *chat_template, *context_key, *chat_json;
    sipp_message *messages;
    size_t n_messages;
    char **stop;
    size_t n_stop;
} request;

static void request_release(request *q) {
    if (atomic_fetch_sub(&q->refs, 1) != 1) return;
    free(q->prompt);
    free(q->chat_template);
    free(q->context_key);
    free(q->chat_json);
    for (size_t i = 0; i < q->n_messages; i++) {
        free((char *)q->messages[i].role);
        free((char *)q->messages[i].content);
    }
    free(q->messages);
    for (size_t i = 0; i < q->n_stop; i++)
        free(q->stop[i]);
    free(q->stop);
    pthread_mutex_destroy(&q->mu);
    free(q);
}

static void request_finalize(napi_env env, void *data, void *hint) { request_release(data); }

static void event_free(event *ev) {
    if (!ev) return;
    free(ev->text);
    free(ev->message);
    free(ev);
}

static napi_value stats_object(napi_env env, const sipp_request_stats *s) {
    napi_value o;
    napi_create_object(env, &o);
    set_num(env, o, "promptTokens", s->prompt_tokens);
    set_num(env, o, "cachedTokens", s->cached_tokens);
    set_num(env, o, "generatedTokens", s->generated_tokens);
    set_num(env, o, "queueMs", s->queue_ms);
    set_num(env, o, "ttftMs", s->ttft_ms);
    set_num(env, o, "prefillMs", s->prefill_ms);
    set_num(env, o, "decodeMs", s->decode_ms);
    set_num(env, o, "prefillTokensPerS", s->prefill_tokens_per_s);
    set_num(env, o, "decodeTokensPerS", s->decode_tokens_per_s);
    set_num(env, o, "totalMs", s->total_ms);
    set_num(env, o, "draftTokens", s->draft_tokens);
    set_num(env, o, "acceptedTokens", s->accepted_tokens);
    set_num(env, o, "draftSteps", s->draft_steps);
    set_num(env, o, "cutoffSteps", s->cutoff_steps);
    set_str(env, o, "speculation", *s->speculation ? s->speculation : "none");
    set_num(env, o, "mediaTokens", s->media_tokens);
    set_num(env, o, "mediaEncoded", s->media_encoded);
    set_num(env, o, "encodeMs", s->encode_ms);
    return o;
}

/* Runs on the JavaScript thread: onEvent('piece', text) | ('end', {...}) | ('error', Error). */
static void call_js(napi_env env, napi_value js_cb, void *context, void *data) {
    event *ev = data;
    if (!env || !js_cb) { /* the environment is going away */
        event_free(ev);
        return;
    }
    napi_value argv[2], undef;
    napi_get_undefined(env, &undef);
    const char *kind = ev->kind == EV_PIECE   ? "piece"
                       : ev->kind == EV_DELTA ? "delta"
                       : ev->kind == EV_END   ? "end"
                                              : "error";
    napi_create_string_utf8(env, kind, NAPI_AUTO_LENGTH, &argv[0]);
    if (ev->kind == EV_PIECE || ev->kind == EV_DELTA) {
        napi_create_string_utf8(env, ev->text, ev->len, &argv[1]);
    } else if (ev->kind == EV_ERROR) {
        argv[1] = make_error(env, ev->status, ev->text);
    } else {
        napi_create_object(env, &argv[1]);
        set_str(env, argv[1], "finishReason", sipp_finish_reason_name(ev->finish));
        set_str(env, argv[1], "status", sipp_status_name(ev->status));
        napi_value code;
        napi_create_int32(env, (int32_t)ev->status, &code);
        napi_set_named_property(env, argv[1], "statusCode", code);
        set_str(env, argv[1], "error", ev->text);
        napi_set_named_property(env, argv[1], "stats", stats_object(env, &ev->stats));
        if (ev->message) set_str(env, argv[1], "message", ev->message);
    }
    event_free(ev);
    napi_call_function(env, undef, js_cb, 2, argv, NULL);
    /* An exception thrown by the callback is reported by Node as uncaught, as for any callback. */
}

static void post(request *q, event *ev) {
    if (!ev) return;
    if (napi_call_threadsafe_function(q->tsfn, ev, napi_tsfn_blocking) != napi_ok) event_free(ev);
}

static event *new_event(event_kind kind, const char *text, size_t len) {
    event *ev = calloc(1, sizeof *ev);
    if (!ev) return NULL;
    ev->kind = kind;
    ev->len = len;
    if (!(ev->text = malloc(len + 1))) {
        free(ev);
        return NULL;
    }
    memcpy(ev->text, text, len);
    ev->text[len] = '\0';
    return ev;
}

static void *reader_main(void *arg) {
    request *q = arg;
    endpoint *ep = q->ep;
    sipp_request *r = NULL;
    sipp_status st;
    char msg[SIPP_ERROR_SIZE] = "";

    pthread_mutex_lock(&q->mu);
    bool cancelled_early = q->cancelled;
    pthread_mutex_unlock(&q->mu);
    if (cancelled_early) { /* cancelled before it was submitted: never submit it */
        event *ev = new_event(EV_END, "", 0);
        if (ev) {
            ev->status = SIPP_ERR_CANCELLED;
            ev->finish = SIPP_FINISH_CANCELLED;
        }
        post(q, ev);
        goto done;
    }
    if (ep_enter(ep)) {
        st = sipp_engine_submit(ep->engine, &q->params, &r);
        if (st != SIPP_OK) snprintf(msg, sizeof msg, "%s", sipp_engine_last_error(ep->engine));
        ep_leave(ep);
    } else {
        st = SIPP_ERR_CLOSED;
        snprintf(msg, sizeof msg, "%s", ENDPOINT_CLOSED);
    }
    char *buf = st == SIPP_OK ? malloc(READ_CAP) : NULL;
    if (st == SIPP_OK && !buf) {
        sipp_request_free(r);
        st = SIPP_ERR_NO_MEMORY;
        snprintf(msg, sizeof msg, "out of memory");
    }
    if (st != SIPP_OK) {
        event *ev = new_event(EV_ERROR, msg, strlen(msg));
        if (ev) ev->status = st;
        post(q, ev);
    } else {
        pthread_mutex_lock(&q->mu);
        q->r = r;
        if (q->cancelled) sipp_request_cancel(r);
        pthread_mutex_unlock(&q->mu);

        /* A chat's answer is parsed here as it streams (llama.cpp's parser for its template):
         * JavaScript gets the parsed deltas and, at the end, the message. */
        sipp_chat_parser *parser = NULL;
        char perr[SIPP_ERROR_SIZE];
        if (q->chat_json && sipp_chat_parser_new(r, &parser, perr) != SIPP_OK) parser = NULL;
        bool finished = false;
        while (!finished) {
            size_t n = sipp_request_read_piece(r, buf, READ_CAP, -1, &finished);
            char *deltas = NULL;
            if (parser && (n || finished) &&
                sipp_chat_parser_feed(parser, buf, n, finished, &deltas) == SIPP_OK) {
                if (deltas) post(q, new_event(EV_DELTA, deltas, strlen(deltas)));
                sipp_free(deltas);
            } else if (n) {
                post(q, new_event(EV_PIECE, buf, n));
            }
        }
        const char *error = sipp_request_error(r);
        event *ev = new_event(EV_END, error ? error : "", error ? strlen(error) : 0);
        if (ev && parser) ev->message = strdup(sipp_chat_parser_message(parser));
        sipp_chat_parser_free(parser);
        if (ev) {
            ev->status = sipp_request_status(r);
            ev->finish = sipp_request_finish_reason(r);
            sipp_request_get_stats(r, &ev->stats);
        }
        pthread_mutex_lock(&q->mu);
        q->r = NULL;
        pthread_mutex_unlock(&q->mu);
        sipp_request_free(r);
        free(buf);
        post(q, ev);
    }
done:
    napi_release_threadsafe_function(q->tsfn, napi_tsfn_release);
    ep_release(ep);
    request_release(q);
    return NULL;
}

/* Copies the generation options of a JS object into q->params. false with an exception pending. */
static bool read_params(napi_env env, napi_value o, request *q) {
    sipp_request_params *p = &q->params;
    *p = sipp_request_default_params();
    napi_value v;
    if ((v = prop(env, o, "prompt")) && !(q->prompt = dup_string(env, v, "prompt"))) return false;
    p->prompt = q->prompt;
    if ((v = prop(env, o, "messages"))) {
        uint32_t n = 0;
        if (napi_get_array_length(env, v, &n) != napi_ok)
            return type_error(env, "messages must be an array"), false;
        if (!(q->messages = calloc(n ? n : 1, sizeof *q->messages)))
            return throw_status(env, SIPP_ERR_NO_MEMORY, "out of memory"), false;
        for (uint32_t i = 0; i < n; i++) {
            napi_value m, role, content;
            if (napi_get_element(env, v, i, &m) != napi_ok || !(role = prop(env, m, "role")) ||
                !(content = prop(env, m, "content")))
                return type_error(env, "every message needs a role and a content"), false;
            q->n_messages++;
            if (!(q->messages[i].role = dup_string(env, role, "a message's role"))) return false;
            if (!(q->messages[i].content = dup_string(env, content, "a message's content"))) return false;
        }
        p->messages = q->messages;
        p->n_messages = q->n_messages;
    }
    if ((v = prop(env, o, "chatJson")) && !(q->chat_json = dup_string(env, v, "chatJson"))) return false;
    p->chat_json = q->chat_json;
    if ((v = prop(env, o, "chatTemplate")) && !(q->chat_template = dup_string(env, v, "chatTemplate")))
        return false;
    p->chat_template = q->chat_template;
    if ((v = prop(env, o, "contextKey")) && !(q->context_key = dup_string(env, v, "contextKey")))
        return false;
    p->context_key = q->context_key;
    if ((v = prop(env, o, "stop"))) {
        uint32_t n = 0;
        if (napi_get_array_length(env, v, &n) != napi_ok)
            return type_error(env, "stop must be an array"), false;
        if (!(q->stop = calloc(n ? n : 1, sizeof *q->stop)))
            return throw_status(env, SIPP_ERR_NO_MEMORY, "out of memory"), false;
        for (uint32_t i = 0; i < n; i++) {
            napi_value s;
            if (napi_get_element(env, v, i, &s) != napi_ok) return false;
            q->n_stop++;
            if (!(q->stop[i] = dup_string(env, s, "a stop string"))) return false;
        }
        p->stop = (const char *const *)q->stop;
        p->n_stop = q->n_stop;
    }
    double seed = 0;
    bool has_seed = false;
    if (!get_number(env, o, "seed", &seed, &has_seed)) return false;
    if (has_seed) {
        if (!(seed >= 0 && seed < SIPP_SEED_RANDOM))
            return type_error(env, "seed must be an integer in [0, 2^32 - 2]"), false;
        p->sampling.seed = (uint32_t)seed;
    }
    return opt_int(env, o, "maxTokens", &p->max_tokens) &&
           opt_float(env, o, "temperature", &p->sampling.temperature) &&
           opt_int(env, o, "topK", &p->sampling.top_k) && opt_float(env, o, "topP", &p->sampling.top_p) &&
           opt_float(env, o, "minP", &p->sampling.min_p) &&
           opt_float(env, o, "repeatPenalty", &p->sampling.repeat_penalty) &&
           opt_bool(env, o, "ignoreEos", &p->ignore_eos) && opt_int(env, o, "timeoutMs", &p->timeout_ms);
}

/* submit(handle, params, onEvent) -> request handle. Never blocks: the reader thread submits. */
static napi_value js_submit(napi_env env, napi_callback_info info) {
    napi_value argv[3], name, handle;
    if (!get_args(env, info, 3, argv)) return NULL;
    endpoint *ep = get_endpoint(env, argv[0]);
    if (!ep) return NULL;
    request *q = calloc(1, sizeof *q);
    if (!q) return throw_status(env, SIPP_ERR_NO_MEMORY, "out of memory");
    atomic_init(&q->refs, 1);
    pthread_mutex_init(&q->mu, NULL);
    if (!read_params(env, argv[1], q)) {
        request_release(q);
        return NULL;
    }
    napi_create_string_utf8(env, "sipp.request", NAPI_AUTO_LENGTH, &name);
    if (napi_create_threadsafe_function(env, argv[2], NULL, name, 0, 1, NULL, NULL, q, call_js, &q->tsfn) !=
        napi_ok) {
        request_release(q);
        throw_last(env, "napi_create_threadsafe_function");
        return NULL;
    }
    if (napi_create_external(env, q, request_finalize, NULL, &handle) != napi_ok) {
        napi_release_threadsafe_function(q->tsfn, napi_tsfn_abort);
        request_release(q);
        throw_last(env, "napi_create_external");
        return NULL;
    }
    /* From here the JS handle owns one reference; the reader takes another. */
    q->ep = ep;
    ep_retain(ep);
    atomic_fetch_add(&q->refs, 1);
    pthread_attr_t attr;
    pthread_t thread;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, READER_STACK);
    int rc = pthread_create(&thread, &attr, reader_main, q);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        napi_release_threadsafe_function(q->tsfn, napi_tsfn_abort);
        ep_release(ep);
        request_release(q);
        return throw_status(env, SIPP_ERR_INTERNAL, "cannot start a reader thread for the request");
    }
    return handle;
}

/* cancel(request): asks the request to stop; it ends as cancelled within one engine step. */
static napi_value js_cancel(napi_env env, napi_callback_info info) {
    napi_value argv[1];
    if (!get_args(env, info, 1, argv)) return NULL;
    void *p = NULL;
    if (napi_get_value_external(env, argv[0], &p) != napi_ok || !p)
        return type_error(env, "not a request handle");
    request *q = p;
    pthread_mutex_lock(&q->mu);
    q->cancelled = true;
    if (q->r) sipp_request_cancel(q->r);
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

/* ---- the model store ------------------------------------------------------------------------------ */

/* storeList, storeInfo and storePull run on libuv's thread pool (a store listing reads files, info
 * hashes the model, a pull downloads it) and settle a promise. A pull's progress goes to JavaScript
 * through a thread-safe function; the JavaScript callback returning false sets `stop`, which the
 * pull's own progress callback (on the worker thread) reads and answers, so the pull ends as
 * cancelled at its next progress report. */

typedef enum { STORE_LIST, STORE_INFO, STORE_PULL } store_op;

typedef struct store_work {
    napi_async_work work;
    napi_deferred deferred;
    store_op op;
    char *target; /* list: the store directory (NULL: the default); info: a name or path; pull: the source */
    char *name, *sha256;
    bool force, hash;
    int retries;
    napi_threadsafe_function progress; /* pull only, NULL without a callback */
    atomic_bool *stop;                 /* the progress function's context: it outlives this work */
    sipp_status status;
    char err[SIPP_ERROR_SIZE];
    sipp_store_model *models;
    size_t n_models;
    sipp_gguf_info *info;
    char sha[SIPP_SHA256_HEX];
    sipp_pull_result result;
} store_work;

/* A pull's progress report on its way to JavaScript. Reports still queued when the pull ends are
 * delivered after its work is freed, so they reach the stop flag through the function's context,
 * which the function's finalizer frees after the last one. */
typedef struct progress_event {
    sipp_pull_progress p;
    char *file, *note;
} progress_event;

static void set_u64(napi_env env, napi_value obj, const char *key, uint64_t value) {
    set_num(env, obj, key, (double)value);
}

/* A number, or null when negative (the header does not say). */
static void set_known(napi_env env, napi_value obj, const char *key, int64_t value) {
    napi_value v;
    if (value < 0)
        napi_get_null(env, &v);
    else
        napi_create_double(env, (double)value, &v);
    napi_set_named_property(env, obj, key, v);
}

/* A string, or null when empty. */
static void set_str_or_null(napi_env env, napi_value obj, const char *key, const char *value) {
    napi_value v;
    if (!value || !*value)
        napi_get_null(env, &v);
    else
        napi_create_string_utf8(env, value, NAPI_AUTO_LENGTH, &v);
    napi_set_named_property(env, obj, key, v);
}

static napi_value store_model_object(napi_env env, const sipp_store_model *m) {
    napi_value o, files;
    napi_create_object(env, &o);
    set_str(env, o, "name", m->name);
    set_str(env, o, "path", m->path);
    set_u64(env, o, "size", m->size);
    set_num(env, o, "nFiles", m->n_files);
    set_str_or_null(env, o, "source", m->source);
    set_str_or_null(env, o, "pulledAt", m->pulled_at);
    set_bool(env, o, "verified", m->verified);
    set_bool(env, o, "managed", m->managed);
    set_str(env, o, "recipe", m->recipe);
    napi_create_array_with_length(env, (size_t)m->n_files, &files);
    for (int i = 0; i < m->n_files; i++) {
        napi_value f;
        napi_create_object(env, &f);
        set_str(env, f, "file", m->files[i].file);
        set_str(env, f, "url", m->files[i].url);
        set_u64(env, f, "size", m->files[i].size);
        set_str_or_null(env, f, "sha256", m->files[i].sha256);
        napi_set_element(env, files, (uint32_t)i, f);
    }
    napi_set_named_property(env, o, "files", files);
    return o;
}

static napi_value gguf_info_object(napi_env env, const sipp_gguf_info *g, const char *sha) {
    napi_value o, types;
    napi_create_object(env, &o);
    set_str(env, o, "path", g->path);
    set_str(env, o, "architecture", g->architecture);
    set_str_or_null(env, o, "generalName", g->name);
    set_str_or_null(env, o, "fileType", g->file_type);
    set_num(env, o, "ggufVersion", g->gguf_version);
    set_num(env, o, "nFiles", g->n_files);
    set_u64(env, o, "fileSize", g->file_size);
    set_u64(env, o, "nParams", g->n_params);
    set_known(env, o, "nTensors", g->n_tensors);
    set_known(env, o, "nCtxTrain", g->n_ctx_train);
    set_known(env, o, "nEmbd", g->n_embd);
    set_known(env, o, "nLayer", g->n_layer);
    set_known(env, o, "nHead", g->n_head);
    set_known(env, o, "nHeadKv", g->n_head_kv);
    set_known(env, o, "nFf", g->n_ff);
    set_known(env, o, "nVocab", g->n_vocab);
    set_str_or_null(env, o, "pooling", g->pooling);
    set_str_or_null(env, o, "tokenizer", g->tokenizer);
    set_bool(env, o, "hasChatTemplate", g->has_chat_template);
    napi_create_array_with_length(env, (size_t)g->n_types, &types);
    for (int i = 0; i < g->n_types; i++) {
        napi_value t;
        napi_create_object(env, &t);
        set_str(env, t, "type", g->types[i].type);
        set_known(env, t, "nTensors", g->types[i].n_tensors);
        set_u64(env, t, "nParams", g->types[i].n_params);
        set_u64(env, t, "bytes", g->types[i].bytes);
        napi_set_element(env, types, (uint32_t)i, t);
    }
    napi_set_named_property(env, o, "tensorTypes", types);
    set_str_or_null(env, o, "sha256", sha);
    return o;
}

static napi_value pull_result_object(napi_env env, const sipp_pull_result *r) {
    napi_value o;
    napi_create_object(env, &o);
    set_str(env, o, "name", r->name);
    set_str(env, o, "path", r->path);
    set_str(env, o, "url", r->url);
    set_num(env, o, "nFiles", r->n_files);
    set_u64(env, o, "size", r->size);
    set_u64(env, o, "received", r->received);
    set_bool(env, o, "verified", r->verified);
    set_bool(env, o, "already", r->already);
    set_bool(env, o, "resumed", r->resumed);
    set_bool(env, o, "replaced", r->replaced);
    set_str(env, o, "sha256", r->sha256);
    set_num(env, o, "seconds", r->seconds);
    return o;
}

/* On the main thread: one progress report to the JavaScript callback; false from it stops the pull. */
static void progress_call_js(napi_env env, napi_value js_cb, void *context, void *data) {
    progress_event *ev = data;
    atomic_bool *stop = context;
    if (env && js_cb) {
        const sipp_pull_progress *p = &ev->p;
        napi_value o, undefined, ret;
        napi_create_object(env, &o);
        set_num(env, o, "fileIndex", p->file_index);
        set_num(env, o, "nFiles", p->n_files);
        set_str(env, o, "file", ev->file);
        set_u64(env, o, "done", p->done);
        set_u64(env, o, "total", p->total);
        set_u64(env, o, "received", p->received);
        set_num(env, o, "bytesPerS", p->bytes_per_s);
        set_num(env, o, "etaS", p->eta_s);
        set_bool(env, o, "fileDone", p->file_done);
        set_str_or_null(env, o, "note", ev->note);
        napi_get_undefined(env, &undefined);
        bool go_on = true;
        if (napi_call_function(env, undefined, js_cb, 1, &o, &ret) != napi_ok) {
            go_on = false; /* the callback threw: stop; the exception is reported by Node */
        } else {
            napi_valuetype t;
            napi_typeof(env, ret, &t);
            if (t == napi_boolean) napi_get_value_bool(env, ret, &go_on);
        }
        if (!go_on) atomic_store(stop, true);
    }
    free(ev->file);
    free(ev->note);
    free(ev);
}

static void free_stop(napi_env env, void *data, void *hint) { free(data); }

/* On the worker thread: passes the report on (copied: the pull reuses its strings), answers stop. */
static bool on_pull_progress(const sipp_pull_progress *p, void *user) {
    store_work *w = user;
    progress_event *ev = calloc(1, sizeof *ev);
    if (ev) {
        ev->p = *p;
        ev->file = strdup(p->file ? p->file : "");
        ev->note = p->note ? strdup(p->note) : NULL;
        if (napi_call_threadsafe_function(w->progress, ev, napi_tsfn_nonblocking) != napi_ok) {
            free(ev->file);
            free(ev->note);
            free(ev);
        }
    }
    return !atomic_load(w->stop);
}

static void store_execute(napi_env env, void *data) {
    store_work *w = data;
    switch (w->op) {
    case STORE_LIST: w->status = sipp_store_list(w->target, &w->models, &w->n_models, w->err); break;
    case STORE_INFO: {
        char path[SIPP_PATH_MAX];
        w->status = sipp_store_resolve(w->target, path, sizeof path, w->err);
        if (w->status != SIPP_OK) break;
        if (!(w->info = malloc(sizeof *w->info))) {
            w->status = SIPP_ERR_NO_MEMORY;
            snprintf(w->err, sizeof w->err, "out of memory");
            break;
        }
        w->status = sipp_gguf_inspect(path, w->info, w->err);
        if (w->status == SIPP_OK && w->hash) w->status = sipp_store_file_sha256(path, w->sha, NULL, w->err);
        break;
    }
    case STORE_PULL: {
        sipp_pull_params p = sipp_pull_default_params();
        p.source = w->target;
        p.name = w->name;
        p.sha256 = w->sha256;
        p.force = w->force;
        if (w->retries >= 0) p.retries = w->retries;
        if (w->progress) {
            p.progress = on_pull_progress;
            p.user = w;
        }
        w->status = sipp_store_pull(&p, &w->result, w->err);
        break;
    }
    }
}

static void store_work_free(napi_env env, store_work *w) {
    if (w->progress) napi_release_threadsafe_function(w->progress, napi_tsfn_release);
    sipp_store_list_free(w->models, w->n_models);
    free(w->info);
    free(w->target);
    free(w->name);
    free(w->sha256);
    napi_delete_async_work(env, w->work);
    free(w);
}

static void store_complete(napi_env env, napi_status status, void *data) {
    store_work *w = data;
    if (w->status != SIPP_OK) {
        napi_reject_deferred(env, w->deferred, make_error(env, w->status, w->err));
    } else if (w->op == STORE_LIST) {
        napi_value arr;
        napi_create_array_with_length(env, w->n_models, &arr);
        for (size_t i = 0; i < w->n_models; i++)
            napi_set_element(env, arr, (uint32_t)i, store_model_object(env, &w->models[i]));
        napi_resolve_deferred(env, w->deferred, arr);
    } else if (w->op == STORE_INFO) {
        napi_resolve_deferred(env, w->deferred, gguf_info_object(env, w->info, w->hash ? w->sha : NULL));
    } else {
        napi_resolve_deferred(env, w->deferred, pull_result_object(env, &w->result));
    }
    store_work_free(env, w);
}

static napi_value store_queue(napi_env env, store_work *w, const char *name) {
    napi_value promise, resource;
    if (napi_create_promise(env, &w->deferred, &promise) != napi_ok) {
        store_work_free(env, w);
        throw_last(env, "napi_create_promise");
        return NULL;
    }
    napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &resource);
    if (napi_create_async_work(env, NULL, resource, store_execute, store_complete, w, &w->work) != napi_ok ||
        napi_queue_async_work(env, w->work) != napi_ok) {
        throw_last(env, "napi_queue_async_work");
        store_work_free(env, w); /* the promise is never settled: nobody received it */
        return NULL;
    }
    return promise;
}

static store_work *store_work_new(napi_env env, store_op op) {
    store_work *w = calloc(1, sizeof *w);
    if (!w)
        throw_status(env, SIPP_ERR_NO_MEMORY, "out of memory");
    else {
        w->op = op;
        w->retries = -1;
    }
    return w;
}

/* storeList(dir | null): resolves to [{name, path, size, nFiles, source, pulledAt, verified, managed,
 * files: [{file, url, size, sha256}]}], sorted by name. */
static napi_value js_store_list(napi_env env, napi_callback_info info) {
    napi_value argv[1];
    if (!get_args(env, info, 1, argv)) return NULL;
    store_work *w = store_work_new(env, STORE_LIST);
    if (!w) return NULL;
    if (!opt_string(env, argv[0], "dir", &w->target)) {
        free(w);
        return NULL;
    }
    return store_queue(env, w, "sipp.storeList");
}

/* storeInfo(nameOrPath, hash): resolves to the GGUF header's facts (and the sha256 when hash). */
static napi_value js_store_info(napi_env env, napi_callback_info info) {
    napi_value argv[2];
    if (!get_args(env, info, 2, argv)) return NULL;
    store_work *w = store_work_new(env, STORE_INFO);
    if (!w) return NULL;
    bool named = (w->target = dup_string(env, argv[0], "nameOrPath")) != NULL;
    if (!named || napi_get_value_bool(env, argv[1], &w->hash) != napi_ok) {
        free(w->target);
        free(w);
        return named ? type_error(env, "hash must be a boolean") : NULL;
    }
    return store_queue(env, w, "sipp.storeInfo");
}

/* storePull(source, {name, sha256, force, retries}, onProgress | null): resolves to the pull's result. */
static napi_value js_store_pull(napi_env env, napi_callback_info info) {
    napi_value argv[3];
    if (!get_args(env, info, 3, argv)) return NULL;
    store_work *w = store_work_new(env, STORE_PULL);
    if (!w) return NULL;
    bool ok = (w->target = dup_string(env, argv[0], "source")) != NULL &&
              opt_string(env, prop(env, argv[1], "name"), "name", &w->name) &&
              opt_string(env, prop(env, argv[1], "sha256"), "sha256", &w->sha256) &&
              opt_bool(env, argv[1], "force", &w->force) && opt_int(env, argv[1], "retries", &w->retries);
    napi_valuetype t = napi_undefined;
    if (ok) napi_typeof(env, argv[2], &t);
    if (ok && t == napi_function) {
        napi_value resource;
        napi_create_string_utf8(env, "sipp.storePull.progress", NAPI_AUTO_LENGTH, &resource);
        ok = (w->stop = calloc(1, sizeof *w->stop)) != NULL &&
             napi_create_threadsafe_function(env, argv[2], NULL, resource, 0, 1, w->stop, free_stop, w->stop,
                                             progress_call_js, &w->progress) == napi_ok;
        if (!ok) {
            free(w->stop);
            w->progress = NULL;
            throw_last(env, "napi_create_threadsafe_function");
        }
    } else if (ok && t != napi_null && t != napi_undefined) {
        ok = false;
        type_error(env, "onProgress must be a function");
    }
    if (!ok) {
        if (w->progress) napi_release_threadsafe_function(w->progress, napi_tsfn_release);
        free(w->target);
        free(w->name);
        free(w->sha256);
        free(w);
        return NULL;
    }
    return store_queue(env, w, "sipp.storePull");
}

/* ---- speech to text ------------------------------------------------------------------------------ */

/* transcribe(model, audio Buffer, where, language|null, translate, format, threads, backend) runs on
 * libuv's thread pool: the whisper model is loaded, the clip transcribed and the transcriber freed
 * (sipp.h's speech section), and the promise resolves to the rendered transcript (a string). */
typedef struct transcribe_work {
    napi_async_work work;
    napi_deferred deferred;
    char *model, *where, *language, *format, *backend;
    unsigned char *audio;
    size_t n;
    bool translate;
    int threads;
    char *out;
    sipp_status status;
    char err[SIPP_ERROR_SIZE];
} transcribe_work;

static void transcribe_execute(napi_env env, void *data) {
    transcribe_work *w = data;
    sipp_transcriber_params tp = sipp_transcriber_default_params();
    tp.backend = w->backend;
    tp.threads = w->threads;
    sipp_transcribe_params p = sipp_transcribe_default_params();
    p.language = w->language;
    p.translate = w->translate;
    sipp_transcript_format format = SIPP_TRANSCRIPT_VERBOSE_JSON;
    sipp_transcriber *t = NULL;
    sipp_transcript *tr = NULL;
    if ((w->status = sipp_transcript_format_parse(w->format, &format)) != SIPP_OK)
        snprintf(w->err, sizeof w->err, "format '%s': expected json, text, verbose_json, srt or vtt",
                 w->format);
    else if ((w->status = sipp_transcriber_new(w->model, &tp, &t, w->err)) == SIPP_OK &&
             (w->status = sipp_transcribe_bytes(t, w->audio, w->n, w->where, &p, &tr, w->err)) == SIPP_OK &&
             !(w->out = sipp_transcript_render(tr, format, w->translate ? "translate" : "transcribe"))) {
        w->status = SIPP_ERR_NO_MEMORY;
        snprintf(w->err, sizeof w->err, "out of memory rendering the transcript");
    }
    sipp_transcript_free(tr);
    sipp_transcriber_free(t);
}

static void transcribe_work_free(transcribe_work *w) {
    free(w->model);
    free(w->where);
    free(w->language);
    free(w->format);
    free(w->backend);
    free(w->audio);
    sipp_free(w->out);
    free(w);
}

static void transcribe_complete(napi_env env, napi_status status, void *data) {
    transcribe_work *w = data;
    napi_value result;
    if (w->status != SIPP_OK) {
        napi_reject_deferred(env, w->deferred, make_error(env, w->status, w->err));
    } else {
        napi_create_string_utf8(env, w->out, NAPI_AUTO_LENGTH, &result);
        napi_resolve_deferred(env, w->deferred, result);
    }
    napi_delete_async_work(env, w->work);
    transcribe_work_free(w);
}

/* The audio Buffer's bytes, copied (the work outlives the call). */
static bool copy_buffer(napi_env env, napi_value v, transcribe_work *w) {
    void *bytes = NULL;
    size_t n = 0;
    if (napi_get_buffer_info(env, v, &bytes, &n) != napi_ok) {
        type_error(env, "audio must be a Buffer");
        return false;
    }
    if (!(w->audio = malloc(n ? n : 1))) return false;
    memcpy(w->audio, bytes, n);
    w->n = n;
    return true;
}

static napi_value js_transcribe(napi_env env, napi_callback_info info) {
    napi_value argv[8], promise, name;
    napi_valuetype lt;
    if (!get_args(env, info, 8, argv)) return NULL;
    transcribe_work *w = calloc(1, sizeof *w);
    if (!w) return throw_status(env, SIPP_ERR_NO_MEMORY, "out of memory");
    bool ok = (w->model = dup_string(env, argv[0], "model")) && copy_buffer(env, argv[1], w) &&
              (w->where = dup_string(env, argv[2], "where")) && napi_typeof(env, argv[3], &lt) == napi_ok &&
              (lt != napi_string || (w->language = dup_string(env, argv[3], "language"))) &&
              napi_get_value_bool(env, argv[4], &w->translate) == napi_ok &&
              (w->format = dup_string(env, argv[5], "format")) &&
              napi_get_value_int32(env, argv[6], &w->threads) == napi_ok &&
              (w->backend = dup_string(env, argv[7], "backend"));
    if (!ok) {
        transcribe_work_free(w);
        return NULL;
    }
    NAPI_CALL(env, napi_create_promise(env, &w->deferred, &promise));
    napi_create_string_utf8(env, "sipp.transcribe", NAPI_AUTO_LENGTH, &name);
    NAPI_CALL(env,
              napi_create_async_work(env, NULL, name, transcribe_execute, transcribe_complete, w, &w->work));
    NAPI_CALL(env, napi_queue_async_work(env, w->work));
    return promise;
}

/* ---- module ------------------------------------------------------------------------------------- */

static napi_value init_module(napi_env env, napi_value exports) {
    static const struct {
        const char *name;
        napi_callback fn;
    } fns[] = {
        {"init", js_init},
        {"initAsync", js_init_async},
        {"backendDecide", js_backend_decide},
        {"backendsList", js_backends_list},
        {"open", js_open},
        {"close", js_close},
        {"stats", js_stats},
        {"embed", js_embed},
        {"speech", js_speech},
        {"speechStream", js_speech_stream},
        {"speechCancel", js_speech_cancel},
        {"submit", js_submit},
        {"cancel", js_cancel},
        {"storeList", js_store_list},
        {"storeInfo", js_store_info},
        {"storePull", js_store_pull},
        {"transcribe", js_transcribe},
    };
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        napi_value f;
        NAPI_CALL(env, napi_create_function(env, fns[i].name, NAPI_AUTO_LENGTH, fns[i].fn, NULL, &f));
        NAPI_CALL(env, napi_set_named_property(env, exports, fns[i].name, f));
    }
    set_str(env, exports, "version", sipp_version());
    return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init_module)
