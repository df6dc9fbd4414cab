/*
 * fuzz_translate.c: libFuzzer harness for the request translations of the Responses, Messages and
 * Ollama routes (src/gateway/api/responses.c, api/anthropic.c, api/ollama.c and
 * translate.c): the code that turns untrusted bodies of those APIs into chat requests.
 *
 * Each input is posted as the body of POST /v1/responses, /v1/messages, /api/chat, /api/generate
 * and /api/embed to the real route functions. What lies beyond the translation is replaced by
 * small stand-ins defined here: the HTTP replies (recorded, not sent), the target table (one local
 * target, "tiny", whose embeddings end at the target), and gw_generate, which checks and frees
 * what it is given instead of running a model; libsipp itself is the static archive. The path to
 * gw_generate (dispatch.c) and the store of previous responses are the real ones. Every route must reply
 * exactly once, never crash, leak or read out of bounds; an error reply must be in the route's own shape with
 * a non-empty message.
 *
 * Built by `make fuzz-bins` and run briefly by tests/run.sh, like the other harnesses.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/api/api.h"

#define MSG_SIZE 1024
#define HTTP_OK 200
#define HTTP_ERROR_MIN 400

static gw_config cfg;
/* with a projector, so that translated images reach gw_generate */
static gw_target_config target_cfg = {
    .name = "tiny", .type = GW_TARGET_LOCAL, .ctx_size = 2048, .mmproj = "mmproj.gguf"};
static gw_target target = {.cfg = &target_cfg};
static gw_server srv = {.cfg = &cfg, .targets = &target, .n_targets = 1};
static int replies;
static json_t *last_body;

/* ---- stand-ins for server.c, targets.c, generate.c, auth.c, metrics.c ---------------------------- */

void gw_reply_json(gw_call *call, int status, json_t *body) {
    replies++;
    call->replied = true;
    call->status = status;
    json_decref(last_body);
    last_body = body;
}

static void reply_error_v(gw_call *call, gw_error_kind kind, const char *fmt, va_list ap) {
    char msg[MSG_SIZE];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (!msg[0]) abort(); /* an error names what is wrong */
    gw_reply_json(call, gw_error_status(kind), gw_error_json_in(call->dialect, kind, msg));
}

void gw_reply_error(gw_call *call, gw_error_kind kind, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    reply_error_v(call, kind, fmt, ap);
    va_end(ap);
}

bool gw_reply_invalid_field(gw_call *call, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    reply_error_v(call, GW_E_INVALID_FIELD, fmt, ap);
    va_end(ap);
    return false;
}

void gw_reply_text(gw_call *call, int status, const char *content_type, char *text, size_t len) {
    free(text);
    gw_reply_json(call, status, NULL);
}

void gw_reply_stream(gw_call *call, const char *content_type, gw_stream *stream) {
    stream->close(stream);
    gw_reply_json(call, HTTP_OK, NULL);
}

void gw_reply_header(gw_call *call, const char *name, const char *value) {}
const char *gw_call_header(gw_call *call, const char *name) { return NULL; }
const char *gw_call_query(gw_call *call, const char *name) { return NULL; }
const char *gw_call_query_unknown(gw_call *call, const char *const *known) { return NULL; }
bool gw_call_abandoned(gw_call *call) { return false; }
bool gw_residency_unload(gw_server *s, gw_target *t, bool *deferred) { return *deferred = false; }
bool gw_auth_allows(const gw_call *call, const gw_target_config *t) { return true; }
bool gw_auth_admin(const gw_call *call) { return true; } /* no tokens: everyone is admin */
const char *gw_auth_caller(const gw_call *call) { return ""; }
void gw_metrics_tokens(gw_metrics *m, int t, int prompt, int cached, int generated, double ttft_s) {}

gw_target *gw_target_find(gw_server *s, const char *name) {
    return name && strcmp(name, "tiny") == 0 ? &target : NULL;
}

/* The whisper and tts kinds (kinds/whisper.c, kinds/tts.c) are recipes the fuzzed config never names. */
const gw_kind gw_kind_whisper = {.name = "whisper"};
const gw_kind gw_kind_tts = {.name = "tts"};

/* The harness serves more than one name ("tiny" only resolves): no body without a model picks one. */
gw_target *gw_targets_only(gw_server *s) { return NULL; }

json_t *gw_model_capabilities(gw_call *call, gw_target *t) { return json_array(); }

gw_target *gw_call_lookup(gw_call *call, const char *name) {
    gw_target *t = gw_target_find(call->srv, name);
    if (!t) gw_reply_error(call, GW_E_UNKNOWN_TARGET, "no model '%s'", name ? name : "(none)");
    return t;
}

/* Embeddings would run on the engine right after this, so their requests end here. */
gw_target *gw_call_target(gw_call *call, const char *name) {
    gw_target *t = gw_target_find(call->srv, name);
    if (!t)
        gw_reply_error(call, GW_E_UNKNOWN_TARGET, "no model '%s'", name ? name : "(none)");
    else if (strncmp(call->path, "/api/embed", strlen("/api/embed")) == 0)
        gw_reply_error(call, GW_E_NOT_READY, "no engine in the harness");
    return strncmp(call->path, "/api/embed", strlen("/api/embed")) == 0 ? NULL : t;
}

/* A decoded request reaches the engine here: check what the parser handed on, then free it. */
void gw_generate(gw_call *call, gw_target *t, gw_gen *g, const gw_format *fmt) {
    if (!g->messages && !g->prompt) abort();
    if ((g->n_images || g->n_audio) && !g->chat) abort(); /* media only in chats */
    for (size_t i = 0; i < g->n_messages; i++)
        if (strlen(g->messages[i].role) == 0) abort();
    gw_gen_free(g);
    gw_reply_json(call, HTTP_OK, NULL);
}

int gw_call_ms_left(const gw_call *call) { return 1; }

/* The fuzzed target is local; a remote one would be reached here. */
gw_stream *gw_upstream_open(gw_call *call, gw_target *t, const char *suffix, json_t *body, long *status,
                            json_t **answer) {
    abort();
}

void gw_upstream_forward(gw_call *call, gw_target *t, const char *suffix, json_t *body, bool stream) {
    abort();
}

/* Embeddings end at the target (gw_call_target above). */
void gw_embed(gw_call *call, gw_target *t, gw_gen *g, const gw_embed_format *fmt) { abort(); }
void gw_rerank(gw_call *call, gw_target *t, gw_gen *g) { abort(); }
/* Responses' input_tokens and Messages' count_tokens end at the target too. */
void gw_count_tokens(gw_call *call, gw_target *t, gw_gen *g, const gw_rename *renames) { abort(); }
void gw_input_tokens(gw_call *call, gw_target *t, gw_gen *g) { abort(); }
/* What the kinds (src/gateway/kinds/) describe targets with: never reached by a translation. */
void gw_target_view_open(gw_server *srv, gw_target *t, gw_target_view *v) { abort(); }
void gw_target_view_close(gw_server *srv, gw_target *t, gw_target_view *v) { abort(); }
json_t *gw_upstream_describe(gw_upstream *u) { abort(); }
int gw_supervise_state(gw_target *t, char *why, size_t n) { abort(); }
void gw_supervise_describe(gw_target *t, json_t *o) { abort(); }
json_t *gw_supervise_backend(gw_target *t) { abort(); }

bool gw_upstream_fetch(gw_call *call, gw_target *t, const char *suffix, json_t *body, long *status,
                       json_t **answer) {
    abort();
}

/* ---- the harness -------------------------------------------------------------------------------- */

typedef struct route {
    const char *path;
    void (*fn)(gw_call *call);
    gw_dialect dialect;
} route;

static const route routes[] = {
    {"/v1/responses", gw_route_responses, GW_DIALECT_OPENAI},
    {"/v1/messages", gw_route_messages, GW_DIALECT_ANTHROPIC},
    {"/api/chat", gw_route_ollama_chat, GW_DIALECT_OLLAMA},
    {"/api/generate", gw_route_ollama_generate, GW_DIALECT_OLLAMA},
    {"/api/embed", gw_route_ollama_embed, GW_DIALECT_OLLAMA},
    {"/api/embeddings", gw_route_ollama_embed, GW_DIALECT_OLLAMA},
};

static void check_error_shape(gw_dialect d, json_t *b) {
    json_t *e = json_object_get(b, "error");
    switch (d) {
    case GW_DIALECT_OPENAI:
        if (!json_is_string(json_object_get(e, "message")) || !json_is_string(json_object_get(e, "code")))
            abort();
        break;
    case GW_DIALECT_ANTHROPIC:
        if (!json_is_string(json_object_get(b, "type")) || !json_is_string(json_object_get(e, "type")))
            abort();
        break;
    case GW_DIALECT_OLLAMA:
        if (!json_is_string(e)) abort();
        break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!srv.responses) {
        cfg.responses_max_stored = GW_DEFAULT_RESPONSES_MAX;
        cfg.responses_max_bytes = GW_DEFAULT_RESPONSES_BYTES;
        cfg.responses_ttl_seconds = GW_DEFAULT_RESPONSES_TTL_S;
        srv.responses = gw_responses_new(&cfg);
        atomic_store(&target.state, GW_STATE_LOADING);
    }
    char *body = malloc(size + 1);
    if (!body) return 0;
    memcpy(body, data, size);
    body[size] = 0;
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        gw_call call = {.srv = &srv,
                        .method = "POST",
                        .path = routes[i].path,
                        .body = body,
                        .body_len = size,
                        .target = -1,
                        .dialect = routes[i].dialect};
        snprintf(call.request_id, sizeof call.request_id, "fuzz");
        replies = 0;
        routes[i].fn(&call);
        if (replies != 1) abort(); /* exactly one reply, whatever the body */
        if (call.status >= HTTP_ERROR_MIN) check_error_shape(routes[i].dialect, last_body);
        json_decref(last_body);
        last_body = NULL;
    }
    free(body);
    return 0;
}
