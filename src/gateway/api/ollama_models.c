/*
 * ollama_models.c: Ollama's model routes: GET /api/version, /api/tags, /api/ps; POST /api/show,
 * /api/pull; DELETE /api/delete (ollama.c has the generation routes and what both share: names,
 * targets, lines). What they list and how a pull runs is described in ollama.c's header.
 */
#include "gateway/api/api.h"
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The Ollama API version whose shapes these routes follow (clients check it for features). */
#define GW_OLLAMA_VERSION "0.12.0"
#define NAME_SIZE 256
#define BILLION 1e9
#define MILLION 1e6
#define THOUSAND 1e3
/* A model that stays loaded "forever" has this expiry in /api/ps, as Ollama shows keep_alive -1. */
#define FOREVER_TIME "2318-11-03T00:00:00Z"
#define PULL_WAIT_SLICE_MS 100

/* "1.2B", "500M": Ollama's parameter_size. */
static void param_size(uint64_t n, char *out, size_t cap) {
    if (n >= BILLION)
        snprintf(out, cap, "%.1fB", n / BILLION);
    else if (n >= MILLION)
        snprintf(out, cap, "%.1fM", n / MILLION);
    else
        snprintf(out, cap, "%.1fK", n / THOUSAND);
}

/* The quantization in llama.cpp's description ("llama 1B Q4_0" -> "Q4_0"). */
static const char *quantization(const sipp_model_info *info) {
    const char *sp = strrchr(info->description, ' ');
    return sp ? sp + 1 : info->description;
}

/* What Ollama's listings say of a model: from the loaded model, else from its GGUF header. */
typedef struct model_facts {
    char format[8]; /* "gguf", or "ggml" for a whisper.cpp model */
    char architecture[64];
    char quantization[sizeof((sipp_model_info *)0)->description];
    uint64_t n_params, size_bytes;
    int64_t n_ctx_train, n_embd, n_layer, n_head, n_head_kv, n_vocab;
} model_facts;

/* The GGUF's file type, or else the type most of its tensors have ("Q8_0"). */
static void gguf_quantization(const sipp_gguf_info *g, char *out, size_t cap) {
    snprintf(out, cap, "%s", *g->file_type || !g->n_types ? g->file_type : g->types[0].type);
    for (char *c = out; *c; c++)
        if (*c >= 'a' && *c <= 'z') *c = (char)(*c - 'a' + 'A');
}

/* A whisper.cpp model (its own ggml format, no GGUF header): its format, family and file size. */
static bool whisper_facts(const char *path, model_facts *f) {
    struct stat st;
    if (!path || !sipp_is_whisper_model(path) || stat(path, &st) != 0) return false;
    snprintf(f->format, sizeof f->format, "ggml");
    snprintf(f->architecture, sizeof f->architecture, "whisper");
    f->size_bytes = (uint64_t)st.st_size;
    return true;
}

/* Reads t's model under a residency peek when it is loaded (it may be unloaded meanwhile: then its
 * file is read), else its file's header, without loading it. False when neither can be read. */
static bool read_facts(gw_server *srv, gw_target *t, model_facts *f) {
    memset(f, 0, sizeof *f);
    snprintf(f->format, sizeof f->format, "gguf");
    if (whisper_facts(t->cfg->model_path, f)) return true;
    if (gw_residency_peek(srv, t)) {
        sipp_model_info info;
        bool gguf = t->model != NULL; /* a kind of its own (a whisper model) has no llama model */
        if (gguf) sipp_model_get_info(t->model, &info);
        gw_residency_unpeek(srv, t);
        if (!gguf) return false;
        snprintf(f->architecture, sizeof f->architecture, "%s", info.architecture);
        snprintf(f->quantization, sizeof f->quantization, "%s", quantization(&info));
        f->n_params = info.n_params;
        f->size_bytes = info.size_bytes;
        f->n_ctx_train = info.n_ctx_train;
        f->n_embd = info.n_embd;
        f->n_layer = info.n_layer;
        f->n_head = info.n_head;
        f->n_head_kv = info.n_head_kv;
        f->n_vocab = info.n_vocab;
        return true;
    }
    sipp_gguf_info *g = malloc(sizeof *g); /* large: its tensor type table */
    char err[SIPP_ERROR_SIZE];
    bool ok = g && t->cfg->model_path && sipp_gguf_inspect(t->cfg->model_path, g, err) == SIPP_OK;
    if (ok) {
        snprintf(f->architecture, sizeof f->architecture, "%s", g->architecture);
        gguf_quantization(g, f->quantization, sizeof f->quantization);
        f->n_params = g->n_params;
        f->size_bytes = g->file_size;
        f->n_ctx_train = g->n_ctx_train;
        f->n_embd = g->n_embd;
        f->n_layer = g->n_layer;
        f->n_head = g->n_head;
        f->n_head_kv = g->n_head_kv;
        f->n_vocab = g->n_vocab;
    }
    free(g);
    return ok;
}

static json_t *details(const model_facts *f) {
    char ps[32] = "";
    if (f->n_params) param_size(f->n_params, ps, sizeof ps);
    return json_pack("{s:s, s:s, s:s, s:[s], s:s, s:s}", "parent_model", "", "format", f->format, "family",
                     f->architecture, "families", f->architecture, "parameter_size", ps, "quantization_level",
                     f->quantization);
}

static json_t *modified_at(const gw_target *t) {
    struct stat st;
    char out[SIPP_TIME_SIZE];
    if (!t->cfg->model_path || stat(t->cfg->model_path, &st) != 0) return gw_ollama_now_json();
    sipp_iso_time((double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec / BILLION, out, sizeof out);
    return json_string(out);
}

/* ---- read-only routes --------------------------------------------------------------------------- */

void gw_route_ollama_version(gw_call *call) {
    gw_reply_json(call, 200, json_pack("{s:s}", "version", GW_OLLAMA_VERSION));
}

/* An /api/tags entry, or with resident (a loaded model) an /api/ps one: its size there is what the
 * load holds (weights, KV cache, compute buffers), size_vram the part on GPU devices. */
static json_t *model_entry(gw_call *call, gw_target *t, const gw_resident *resident) {
    model_facts f;
    read_facts(call->srv, t, &f); /* a file gone unreadable lists with empty details */
    uint64_t size = resident ? resident->total_bytes : f.size_bytes;
    json_t *m =
        json_pack("{s:o, s:o, s:I, s:s, s:o}", "name", gw_ollama_listed_name(t), "model",
                  gw_ollama_listed_name(t), "size", (json_int_t)size, "digest", "", "details", details(&f));
    if (resident) {
        char at[SIPP_TIME_SIZE];
        if (resident->unload_at >= 0) sipp_iso_time(resident->unload_at, at, sizeof at);
        json_object_set_new(m, "expires_at", json_string(resident->unload_at >= 0 ? at : FOREVER_TIME));
        json_object_set_new(m, "size_vram", json_integer((json_int_t)resident->device_bytes));
        if (t->cfg->ctx_size > 0) json_object_set_new(m, "context_length", json_integer(t->cfg->ctx_size));
    } else {
        json_object_set_new(m, "modified_at", modified_at(t));
    }
    return m;
}

static void list_models(gw_call *call, bool running) {
    json_t *models = json_array();
    for (size_t i = 0; i < call->srv->n_targets; i++) {
        gw_target *t = &call->srv->targets[i];
        if (!gw_kind_of(t)->resident || !gw_target_listed(t) || !gw_auth_allows(call, t->cfg)) continue;
        gw_resident r;
        if (!running)
            json_array_append_new(models, model_entry(call, t, NULL));
        else if (gw_residency_loaded(call->srv, t, &r))
            json_array_append_new(models, model_entry(call, t, &r));
    }
    gw_reply_json(call, 200, json_pack("{s:o}", "models", models));
}

void gw_route_ollama_tags(gw_call *call) { list_models(call, false); }
void gw_route_ollama_ps(gw_call *call) { list_models(call, true); }

/* What t takes, as its kind says with what the fleet reads of it now. */
static json_t *kind_capabilities(gw_call *call, gw_target *t) {
    gw_target_view v;
    gw_target_view_open(call->srv, t, &v);
    json_t *caps = gw_kind_of(t)->capabilities(call, t, &v);
    gw_target_view_close(call->srv, t, &v);
    return caps;
}

/* Show for a target of another kind than llama (whisper.cpp, text to speech): no GGUF facts to read,
 * so the kind names the family and its own capabilities ("transcription", "speech"), as they are. */
static void show_other_kind(gw_call *call, gw_target *t) {
    const gw_kind *k = gw_kind_of(t);
    const char *path = t->cfg->model_path;
    size_t n = path ? strlen(path) : 0;
    const char *format = !path ? "builtin" : n > 5 && strcmp(path + n - 5, ".gguf") == 0 ? "gguf" : "ggml";
    json_t *details =
        json_pack("{s:s, s:s, s:s, s:[s], s:s, s:s}", "parent_model", "", "format", format, "family", k->name,
                  "families", k->name, "parameter_size", "", "quantization_level", "");
    json_t *mi = json_pack("{s:s}", "general.architecture", k->name);
    json_t *caps = k->capabilities ? kind_capabilities(call, t) : json_array();
    gw_reply_json(call, 200,
                  json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:o}", "modelfile", "", "parameters", "",
                            "template", "", "details", details, "model_info", mi, "capabilities", caps,
                            "modified_at", modified_at(t)));
}

void gw_route_ollama_show(gw_call *call) {
    json_t *root = gw_body_object(call);
    if (!root) return;
    const char *name = gw_ollama_body_model(root);
    gw_target *t = gw_ollama_find_target(call->srv, name);
    model_facts f;
    if (!name) {
        gw_reply_invalid_field(call, "'model' is missing: name one of the models GET /api/tags lists");
    } else if (!t || !gw_kind_of(t)->resident || !gw_auth_allows(call, t->cfg)) {
        gw_reply_error(call, GW_E_UNKNOWN_TARGET, "model '%s' not found; GET /api/tags lists the models",
                       name);
    } else if (gw_kind_of(t) != &gw_kind_llama) {
        show_other_kind(call, t);
    } else if (!read_facts(call->srv, t, &f)) {
        gw_reply_error(call, GW_E_NOT_READY,
                       "model '%s': its file %s cannot be read; sipp models info says why", name,
                       t->cfg->model_path ? t->cfg->model_path : "(none)");
    } else {
        json_t *mi = json_pack("{s:s, s:I}", "general.architecture", f.architecture,
                               "general.parameter_count", (json_int_t)f.n_params);
        char key[NAME_SIZE];
        const struct {
            const char *suffix;
            int64_t value;
        } arch_keys[] = {{"context_length", f.n_ctx_train},
                         {"embedding_length", f.n_embd},
                         {"block_count", f.n_layer},
                         {"attention.head_count", f.n_head},
                         {"attention.head_count_kv", f.n_head_kv},
                         {"vocab_size", f.n_vocab}};
        for (size_t i = 0; i < sizeof arch_keys / sizeof arch_keys[0]; i++) {
            if (arch_keys[i].value < 0) continue; /* the file does not say */
            snprintf(key, sizeof key, "%s.%s", f.architecture, arch_keys[i].suffix);
            json_object_set_new(mi, key, json_integer((json_int_t)arch_keys[i].value));
        }
        /* as Ollama lists them: "completion", and "vision" for a model that takes images */
        json_t *caps = json_pack("[s]", "completion"), *media = kind_capabilities(call, t);
        size_t k;
        json_t *c;
        json_array_foreach(media, k, c) {
            if (strcmp(json_string_value(c), "vision") == 0) json_array_append(caps, c);
        }
        json_decref(media);
        gw_reply_json(call, 200,
                      json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:o}", "modelfile", "", "parameters", "",
                                "template", "", "details", details(&f), "model_info", mi, "capabilities",
                                caps, "modified_at", modified_at(t)));
    }
    json_decref(root);
}

/* ---- the store: pull and delete ----------------------------------------------------------------- */

typedef struct pull_job {
    gw_stream base;
    gw_call *call;
    pthread_t thread;
    bool started;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    sipp_buf lines; /* NDJSON not yet handed to the stream */
    bool finished;
    atomic_bool cancel;
    sipp_pull_params params;
    sipp_pull_result res;
    char *source;
    char last_file[NAME_SIZE];
    sipp_status status;
    char err[SIPP_ERROR_SIZE];
    gw_error_kind kind; /* of a failure, with its message: */
    char message[2 * SIPP_ERROR_SIZE];
} pull_job;

static void push_line(pull_job *j, json_t *obj) {
    pthread_mutex_lock(&j->lock);
    gw_ollama_append_line(&j->lines, obj);
    pthread_cond_signal(&j->cond);
    pthread_mutex_unlock(&j->lock);
}

static bool pull_progress(const sipp_pull_progress *p, void *user) {
    pull_job *j = user;
    if (p->note) push_line(j, json_pack("{s:s}", "status", p->note));
    char status[NAME_SIZE + 16];
    snprintf(status, sizeof status, "pulling %s", p->file);
    snprintf(j->last_file, sizeof j->last_file, "%s", p->file);
    json_t *line_obj =
        json_pack("{s:s, s:s, s:I}", "status", status, "digest", p->file, "completed", (json_int_t)p->done);
    if (p->total) json_object_set_new(line_obj, "total", json_integer((json_int_t)p->total));
    push_line(j, line_obj);
    return !atomic_load(&j->cancel);
}

/* The target that serves the file at path, or NULL. */
static const gw_target *serving(gw_server *srv, const char *path) {
    struct stat a, b;
    if (stat(path, &a) != 0) return NULL;
    for (size_t i = 0; i < srv->n_targets; i++) {
        const char *m = gw_target_listed(&srv->targets[i]) ? srv->targets[i].cfg->model_path : NULL;
        if (m && stat(m, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) return &srv->targets[i];
    }
    return NULL;
}

/* j->kind and j->message of a failed pull: whose fault it was decides the status. */
static void pull_failure(pull_job *j) {
    const gw_target *t = NULL;
    switch (j->res.fault) {
    case SIPP_PULL_FAULT_SOURCE:
        j->kind = GW_E_UPSTREAM;
        snprintf(j->message, sizeof j->message, "the source '%s' failed: %s", j->source, j->err);
        return;
    case SIPP_PULL_FAULT_REFUSED:
        j->kind = GW_E_INVALID_FIELD;
        snprintf(j->message, sizeof j->message,
                 "'model': %s (an admin of this server allows loopback, private addresses and http:// with "
                 "[store] allow_private_sources = true)",
                 j->err);
        return;
    case SIPP_PULL_FAULT_EXISTS:
        j->kind = GW_E_CONFLICT;
        t = serving(j->call->srv, j->res.path);
        if (t)
            snprintf(
                j->message, sizeof j->message,
                "%s (served by target '%s'); a pull never replaces a model file. To replace it, an admin "
                "runs `sipp pull --force SOURCE` on the server's host, then POST /v1/models/%s/unload so "
                "the next load reads the new file",
                j->err, t->cfg->name, t->cfg->name);
        else
            snprintf(
                j->message, sizeof j->message,
                "%s; a pull never replaces a model file. To replace it, an admin runs `sipp pull --force "
                "SOURCE` on the server's host (or DELETE /api/delete first)",
                j->err);
        return;
    default:
        j->kind = gw_error_from_status(j->status);
        snprintf(j->message, sizeof j->message, "%s", j->err);
        return;
    }
}

static void *pull_main(void *arg) {
    pull_job *j = arg;
    sipp_pull_result *res = &j->res;
    push_line(j, json_pack("{s:s}", "status", "pulling manifest"));
    j->status = sipp_store_pull(&j->params, res, j->err);
    if (j->status == SIPP_OK) {
        push_line(j, json_pack("{s:s}", "status",
                               res->verified ? "verifying sha256 digest" : "checking the GGUF header"));
        push_line(j, json_pack("{s:s}", "status", "writing manifest"));
        push_line(j, json_pack("{s:s, s:s, s:s}", "status", "success", "name", res->name, "path", res->path));
    } else {
        pull_failure(j);
        fprintf(stderr, "sipp: /api/pull of %s failed: %s\n", j->source, j->message);
        push_line(j, gw_error_json_in(GW_DIALECT_OLLAMA, j->kind, j->message));
    }
    pthread_mutex_lock(&j->lock);
    j->finished = true;
    pthread_cond_signal(&j->cond);
    pthread_mutex_unlock(&j->lock);
    return NULL;
}

static bool pull_pull(gw_stream *s, sipp_buf *out, int wait_ms) {
    pull_job *j = (pull_job *)s;
    pthread_mutex_lock(&j->lock);
    if (j->lines.len == 0 && !j->finished) {
        struct timespec ts;
        sipp_deadline_in(&ts, CLOCK_REALTIME, wait_ms);
        pthread_cond_timedwait(&j->cond, &j->lock, &ts);
    }
    if (j->lines.len) {
        sipp_buf_append(out, j->lines.data, j->lines.len);
        j->lines.len = 0;
    }
    bool more = !j->finished || j->lines.len;
    pthread_mutex_unlock(&j->lock);
    return more;
}

static void pull_close(gw_stream *s) {
    pull_job *j = (pull_job *)s;
    atomic_store(&j->cancel, true);
    if (j->started) pthread_join(j->thread, NULL);
    pthread_mutex_destroy(&j->lock);
    pthread_cond_destroy(&j->cond);
    sipp_buf_free(&j->lines);
    free(j->source);
    free(j);
}

void gw_route_ollama_pull(gw_call *call) {
    if (!gw_auth_admin(call)) {
        gw_ollama_refuse_non_admin(call, "pull models into the store");
        return;
    }
    json_t *root = gw_body_object(call);
    if (!root) return;
    static const char *const fields[] = {"model", "name", "insecure", "stream", NULL};
    const char *source = gw_ollama_body_model(root);
    json_t *stream = json_object_get(root, "stream");
    pull_job *j = NULL;
    if (!gw_check_fields(call, root, fields, GW_OLLAMA_API_NAME)) {
    } else if (!source || !*source) {
        gw_reply_invalid_field(
            call, "'model' is missing: give a URL (http, https), hf://ORG/REPO/FILE.gguf or a catalog name");
    } else if (json_is_true(json_object_get(root, "insecure"))) {
        gw_reply_invalid_field(call, "'insecure' is not supported: downloads always verify TLS");
    } else if (!(j = calloc(1, sizeof *j)) || !(j->source = strdup(source))) {
        gw_reply_error(call, GW_E_INTERNAL, "out of memory");
    } else {
        pthread_mutex_init(&j->lock, NULL);
        pthread_cond_init(&j->cond, NULL);
        j->call = call;
        j->base.pull = pull_pull;
        j->base.close = pull_close;
        j->params = sipp_pull_default_params();
        j->params.source = j->source;
        j->params.progress = pull_progress;
        j->params.user = j;
        j->params.public_only = !call->srv->cfg->store_allow_private_sources;
        j->params.keep_existing = true;
        if (pthread_create(&j->thread, NULL, pull_main, j) != 0) {
            gw_reply_error(call, GW_E_INTERNAL, "cannot start the download thread");
            pull_close(&j->base);
        } else if ((j->started = true) && !json_is_false(stream)) {
            gw_reply_stream(call, GW_OLLAMA_NDJSON, &j->base);
        } else {
            /* Not streamed: wait here, cancelling when the client goes away. */
            sipp_buf progress = {0}; /* dropped: only the outcome is sent */
            while (pull_pull(&j->base, &progress, PULL_WAIT_SLICE_MS)) {
                progress.len = 0;
                if (gw_call_abandoned(call)) atomic_store(&j->cancel, true);
            }
            sipp_buf_free(&progress);
            pthread_join(j->thread, NULL);
            j->started = false;
            if (j->status == SIPP_OK)
                gw_reply_json(call, 200, json_pack("{s:s}", "status", "success"));
            else
                gw_reply_error(call, j->kind, "%s", j->message);
            pull_close(&j->base);
        }
    }
    json_decref(root);
}

void gw_route_ollama_delete(gw_call *call) {
    if (!gw_auth_admin(call)) {
        gw_ollama_refuse_non_admin(call, "delete models from the store");
        return;
    }
    json_t *root = gw_body_object(call);
    if (!root) return;
    const char *name = gw_ollama_body_model(root);
    char dir[PATH_MAX], err[SIPP_ERROR_SIZE];
    if (!name || !*name) {
        gw_reply_invalid_field(call, "'model' is missing: name a model in the store (sipp models list)");
    } else if (gw_ollama_find_target(call->srv, name)) {
        gw_reply_error(
            call, GW_E_INVALID_FIELD,
            "model '%s' is a target of this server and stays loaded; it cannot be deleted while served",
            name);
    } else if (sipp_store_dir(dir, sizeof dir, err) != SIPP_OK) {
        gw_reply_error(call, GW_E_INTERNAL, "%s", err);
    } else {
        sipp_status st = sipp_store_remove(dir, name, err);
        if (st == SIPP_OK)
            gw_reply_text(call, 200, "application/json", NULL, 0);
        else
            gw_reply_error(call, st == SIPP_ERR_NOT_FOUND ? GW_E_NOT_FOUND : gw_error_from_status(st), "%s",
                           err);
    }
    json_decref(root);
}
