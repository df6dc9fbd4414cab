/*
 * sipp_wasm.c: the flat functions the browser package's Web Worker calls in the WebAssembly module.
 *
 * The module is libsipp itself (its engine, backend and util sources) and the pinned llama.cpp,
 * compiled by `make web`; this file only turns sipp.h into calls that JavaScript can make with
 * numbers and C strings (Emscripten's ccall): no structs cross, and results that have several
 * fields come back as one JSON text.
 *
 * The engine is a stepped one (sipp_engine_new_stepped): the worker runs its steps between its
 * message handlers, so a cancel that arrives while a request runs is seen within one step, and the
 * single-thread build (no SharedArrayBuffer, hence no pthreads) runs the same engine as the pthread
 * build. ggml's own worker threads, in the pthread build, do the matrix work of each step.
 *
 * A request is built in a pending parameter set (sw_req_*), then submitted; the strings given are
 * copied here and freed once the submit has taken what it needs. One worker drives one module, so
 * the pending set and the result buffer are plain statics.
 */
#include <emscripten/emscripten.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sipp.h"

#define MAX_STOPS 16
#define MAX_MESSAGES 256
#define MAX_EMBED_TEXTS 256
#define JSON_CAP 8192
/* make web links src/wasm/chat_browser.c in place of src/chat (the Makefile's WEB_SRCS): chats are
 * rendered with llama.cpp's built-in templates, and what needs the chat library is refused. */
#define CHAT_LIBRARY "false"

static char last_error[SIPP_ERROR_SIZE];
static char json[JSON_CAP];

static struct {
    sipp_request_params p;
    char *prompt;
    char *template;
    char *context_key;
    int32_t *tokens;
    char *stops[MAX_STOPS];
    sipp_message messages[MAX_MESSAGES];
    char *texts[2 * MAX_MESSAGES]; /* the role and content strings of messages */
    size_t n_stop, n_messages, n_tokens;
} pending;

static struct {
    char *texts[MAX_EMBED_TEXTS];
    size_t n;
    float *vectors;
    int n_embd;
    int n_tokens;
} embed;

static void set_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
}

/* Appends text to json as a JSON string (quoted and escaped). */
static size_t json_string(size_t at, const char *text) {
    if (at < JSON_CAP - 1) json[at++] = '"';
    for (const unsigned char *c = (const unsigned char *)text; *c && at < JSON_CAP - 8; c++) {
        if (*c == '"' || *c == '\\')
            at += (size_t)snprintf(json + at, JSON_CAP - at, "\\%c", *c);
        else if (*c < 0x20)
            at += (size_t)snprintf(json + at, JSON_CAP - at, "\\u%04x", *c);
        else
            json[at++] = (char)*c;
    }
    if (at < JSON_CAP - 1) json[at++] = '"';
    json[at] = '\0';
    return at;
}

static size_t json_raw(size_t at, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static size_t json_raw(size_t at, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(json + at, JSON_CAP - at, fmt, ap);
    va_end(ap);
    size_t end = at + (n > 0 ? (size_t)n : 0);
    return end < JSON_CAP ? end : JSON_CAP - 1;
}

static char *copy(const char *s) { return s ? strdup(s) : NULL; }

EMSCRIPTEN_KEEPALIVE const char *sw_error(void) { return last_error; }

/* log_level: how much of llama.cpp's logging reaches the console (sipp_log_level). */
EMSCRIPTEN_KEEPALIVE int sw_init(int log_level) {
    sipp_runtime_params rp = sipp_runtime_default_params();
    rp.log_level = (sipp_log_level)log_level;
    return (int)sipp_runtime_init(&rp, last_error);
}

/* {"version","llamaRelease","llamaCommit","threads": compiled with pthreads} */
EMSCRIPTEN_KEEPALIVE const char *sw_runtime_json(void) {
    size_t at = json_raw(0, "{\"version\":");
    at = json_string(at, sipp_version());
    at = json_raw(at, ",\"llamaRelease\":");
    at = json_string(at, sipp_llama_release());
    at = json_raw(at, ",\"llamaCommit\":");
    at = json_string(at, sipp_llama_commit());
    at = json_raw(at, ",\"chatLibrary\":" CHAT_LIBRARY);
#ifdef __EMSCRIPTEN_PTHREADS__
    at = json_raw(at, ",\"pthreads\":true}");
#else
    at = json_raw(at, ",\"pthreads\":false}");
#endif
    return json;
}

/* The decision of auto or cpu, without loading: {"backend","reason"} or NULL (sw_error). */
EMSCRIPTEN_KEEPALIVE const char *sw_backend_decide(const char *requested) {
    sipp_backend_decision d;
    if (sipp_backend_decide(requested, NULL, &d, last_error) != SIPP_OK) return NULL;
    size_t at = json_raw(0, "{\"backend\":");
    at = json_string(at, d.backend);
    at = json_raw(at, ",\"reason\":");
    at = json_string(at, d.reason);
    json_raw(at, "}");
    return json;
}

EMSCRIPTEN_KEEPALIVE sipp_model *sw_model_load(const char *path, const char *backend) {
    sipp_model_params mp = sipp_model_default_params();
    mp.backend = backend;
    sipp_model *m = NULL;
    if (sipp_model_load(path, &mp, &m, last_error) != SIPP_OK) return NULL;
    return m;
}

EMSCRIPTEN_KEEPALIVE void sw_model_free(sipp_model *m) { sipp_model_free(m); }

/* What the load decided and what the model is, as JSON. */
EMSCRIPTEN_KEEPALIVE const char *sw_model_json(sipp_model *m) {
    const sipp_backend_decision *d = sipp_model_backend(m);
    sipp_model_info info;
    sipp_model_get_info(m, &info);
    size_t at = json_raw(0, "{\"backend\":{\"backend\":");
    at = json_string(at, d->backend);
    at = json_raw(at, ",\"reason\":");
    at = json_string(at, d->reason);
    at = json_raw(at, ",\"devices\":");
    at = json_string(at, d->devices);
    at = json_raw(at, ",\"gpuLayers\":%d},\"info\":{\"architecture\":", d->gpu_layers);
    at = json_string(at, info.architecture);
    at = json_raw(at, ",\"description\":");
    at = json_string(at, info.description);
    json_raw(at,
             ",\"nParams\":%llu,\"sizeBytes\":%llu,\"nCtxTrain\":%d,\"nEmbd\":%d,\"nLayer\":%d,\"nVocab\":%d,"
             "\"hasChatTemplate\":%s,\"loadMs\":%.3f}}",
             (unsigned long long)info.n_params, (unsigned long long)info.size_bytes, info.n_ctx_train,
             info.n_embd, info.n_layer, info.n_vocab, info.has_chat_template ? "true" : "false",
             info.load_ms);
    return json;
}

EMSCRIPTEN_KEEPALIVE sipp_engine *sw_engine_new(sipp_model *m, int ctx_size, int parallel, int threads,
                                                int batch_size, int embeddings) {
    sipp_engine_params ep = sipp_engine_default_params();
    ep.ctx_size = ctx_size;
    if (parallel > 0) ep.parallel = parallel;
    ep.threads = threads > 0 ? threads : 1;
    ep.batch_size = batch_size;
    ep.embeddings = embeddings != 0;
    sipp_engine *e = NULL;
    if (sipp_engine_new_stepped(m, &ep, &e, last_error) != SIPP_OK) return NULL;
    return e;
}

EMSCRIPTEN_KEEPALIVE void sw_engine_free(sipp_engine *e) { sipp_engine_free(e); }

/* One engine turn; returns 1 while requests are queued or running. */
EMSCRIPTEN_KEEPALIVE int sw_step(sipp_engine *e) {
    bool busy = false;
    sipp_engine_step(e, &busy);
    return busy;
}

/* ---- requests ----------------------------------------------------------------------------------- */

static void pending_clear(void) {
    free(pending.prompt);
    free(pending.template);
    free(pending.context_key);
    free(pending.tokens);
    for (size_t i = 0; i < pending.n_stop; i++)
        free(pending.stops[i]);
    for (size_t i = 0; i < 2 * pending.n_messages; i++)
        free(pending.texts[i]);
    memset(&pending, 0, sizeof pending);
    pending.p = sipp_request_default_params();
}

EMSCRIPTEN_KEEPALIVE void sw_req_begin(void) { pending_clear(); }

EMSCRIPTEN_KEEPALIVE void sw_req_prompt(const char *prompt) {
    free(pending.prompt);
    pending.prompt = copy(prompt);
}

/* A prompt of token ids, used as they are (sipp verify's teacher-forced and greedy checks). */
EMSCRIPTEN_KEEPALIVE int sw_req_tokens(const int32_t *tokens, int n) {
    free(pending.tokens);
    pending.tokens = n > 0 ? malloc((size_t)n * sizeof *tokens) : NULL;
    if (n > 0 && !pending.tokens) {
        set_error("out of memory");
        return 0;
    }
    if (n > 0) memcpy(pending.tokens, tokens, (size_t)n * sizeof *tokens);
    pending.n_tokens = (size_t)(n > 0 ? n : 0);
    return 1;
}

EMSCRIPTEN_KEEPALIVE int sw_req_message(const char *role, const char *content) {
    if (pending.n_messages >= MAX_MESSAGES) {
        set_error("messages has more than %d entries, the most the browser runtime takes", MAX_MESSAGES);
        return 0;
    }
    size_t i = pending.n_messages++;
    pending.texts[2 * i] = copy(role);
    pending.texts[2 * i + 1] = copy(content);
    pending.messages[i].role = pending.texts[2 * i];
    pending.messages[i].content = pending.texts[2 * i + 1];
    return 1;
}

EMSCRIPTEN_KEEPALIVE int sw_req_stop(const char *stop) {
    if (pending.n_stop >= MAX_STOPS) {
        set_error("stop has more than %d strings, the most the browser runtime takes", MAX_STOPS);
        return 0;
    }
    pending.stops[pending.n_stop++] = copy(stop);
    return 1;
}

/* Numbers cross as doubles, NaN meaning "not given: libsipp's default"; the seed as a double so that
 * the whole uint32 range crosses from JavaScript. Out-of-range values are left for libsipp's own
 * checks to refuse, with its message. */
#define GIVEN(x) (!isnan(x))
EMSCRIPTEN_KEEPALIVE void sw_req_sampling(double temperature, double top_k, double top_p, double min_p,
                                          double repeat_penalty, double seed) {
    sipp_sampling *s = &pending.p.sampling;
    if (GIVEN(temperature)) s->temperature = (float)temperature;
    if (GIVEN(top_k)) s->top_k = (int)top_k;
    if (GIVEN(top_p)) s->top_p = (float)top_p;
    if (GIVEN(min_p)) s->min_p = (float)min_p;
    if (GIVEN(repeat_penalty)) s->repeat_penalty = (float)repeat_penalty;
    if (GIVEN(seed)) s->seed = (uint32_t)seed;
}

EMSCRIPTEN_KEEPALIVE void sw_req_limits(double max_tokens, int ignore_eos, int timeout_ms) {
    if (GIVEN(max_tokens)) pending.p.max_tokens = (int)max_tokens;
    pending.p.ignore_eos = ignore_eos != 0;
    pending.p.timeout_ms = timeout_ms;
}

EMSCRIPTEN_KEEPALIVE void sw_req_context_key(const char *key) {
    free(pending.context_key);
    pending.context_key = copy(key);
}

EMSCRIPTEN_KEEPALIVE void sw_req_template(const char *tmpl) {
    free(pending.template);
    pending.template = copy(tmpl);
}

EMSCRIPTEN_KEEPALIVE sipp_request *sw_req_submit(sipp_engine *e) {
    sipp_request_params *p = &pending.p;
    p->prompt = pending.prompt;
    p->tokens = pending.tokens;
    p->n_tokens = pending.n_tokens;
    p->messages = pending.n_messages ? pending.messages : NULL;
    p->n_messages = pending.n_messages;
    p->chat_template = pending.template;
    p->context_key = pending.context_key;
    p->stop = (const char *const *)pending.stops;
    p->n_stop = pending.n_stop;
    sipp_request *r = NULL;
    sipp_status st = sipp_engine_submit(e, p, &r);
    if (st != SIPP_OK) set_error("%s", sipp_engine_last_error(e));
    pending_clear();
    return st == SIPP_OK ? r : NULL;
}

/* The status name of the last failed submit, load or engine start. */
EMSCRIPTEN_KEEPALIVE const char *sw_status_of_error(int status) {
    return sipp_status_name((sipp_status)status);
}

/* Text produced since the last read, without waiting; *finished once everything is read and the
 * request has ended. */
EMSCRIPTEN_KEEPALIVE int sw_req_read(sipp_request *r, char *buf, int cap, int *finished) {
    bool fin = false;
    size_t n = sipp_request_read(r, buf, (size_t)cap, 0, &fin);
    *finished = fin;
    return (int)n;
}

EMSCRIPTEN_KEEPALIVE void sw_req_cancel(sipp_request *r) { sipp_request_cancel(r); }
EMSCRIPTEN_KEEPALIVE void sw_req_free(sipp_request *r) { sipp_request_free(r); }

/* How a finished request ended: finish reason, status, error and its stats. */
EMSCRIPTEN_KEEPALIVE const char *sw_req_result_json(sipp_request *r) {
    sipp_request_stats s;
    sipp_request_get_stats(r, &s);
    size_t at = json_raw(0, "{\"finishReason\":");
    at = json_string(at, sipp_finish_reason_name(sipp_request_finish_reason(r)));
    at = json_raw(at, ",\"status\":");
    at = json_string(at, sipp_status_name(sipp_request_status(r)));
    at = json_raw(at, ",\"error\":");
    at = json_string(at, sipp_request_error(r));
    json_raw(at,
             ",\"stats\":{\"promptTokens\":%d,\"cachedTokens\":%d,\"generatedTokens\":%d,\"queueMs\":%.3f,"
             "\"ttftMs\":%.3f,\"prefillMs\":%.3f,\"decodeMs\":%.3f,\"prefillTokensPerS\":%.3f,"
             "\"decodeTokensPerS\":%.3f,\"totalMs\":%.3f}}",
             s.prompt_tokens, s.cached_tokens, s.generated_tokens, s.queue_ms, s.ttft_ms, s.prefill_ms,
             s.decode_ms, s.prefill_tokens_per_s, s.decode_tokens_per_s, s.total_ms);
    return json;
}

/* ---- embeddings --------------------------------------------------------------------------------- */

static void embed_clear(void) {
    for (size_t i = 0; i < embed.n; i++)
        free(embed.texts[i]);
    sipp_free(embed.vectors);
    memset(&embed, 0, sizeof embed);
}

EMSCRIPTEN_KEEPALIVE int sw_embed_text(const char *text) {
    if (embed.n >= MAX_EMBED_TEXTS) {
        set_error("embed takes at most %d texts at once in the browser runtime", MAX_EMBED_TEXTS);
        return 0;
    }
    embed.texts[embed.n++] = copy(text);
    return 1;
}

/* Embeds the texts given since the last run; returns the vectors (n rows of sw_embed_dim floats),
 * valid until the next run, or NULL (sw_error). */
EMSCRIPTEN_KEEPALIVE const float *sw_embed_run(sipp_engine *e, int normalize) {
    sipp_free(embed.vectors);
    embed.vectors = NULL;
    sipp_status st = sipp_engine_embed(e, (const char *const *)embed.texts, embed.n, normalize != 0,
                                       &embed.vectors, &embed.n_embd, &embed.n_tokens);
    for (size_t i = 0; i < embed.n; i++)
        free(embed.texts[i]);
    embed.n = 0;
    if (st != SIPP_OK) {
        set_error("%s", sipp_engine_last_error(e));
        return NULL;
    }
    return embed.vectors;
}

EMSCRIPTEN_KEEPALIVE int sw_embed_dim(void) { return embed.n_embd; }
EMSCRIPTEN_KEEPALIVE int sw_embed_tokens(void) { return embed.n_tokens; }
EMSCRIPTEN_KEEPALIVE void sw_embed_reset(void) { embed_clear(); }

/* ---- inspection (sipp verify's browser runtime) ------------------------------------------------- */

/* Teacher-forced logits of n tokens, in one batch or one token at a time through the KV cache: n rows
 * of n_vocab floats (free with sw_free), or NULL. */
EMSCRIPTEN_KEEPALIVE float *sw_eval_logits(sipp_model *m, const int32_t *tokens, int n, int incremental,
                                           int threads) {
    float *logits = NULL;
    int n_vocab = 0;
    if (sipp_model_eval_logits(m, tokens, (size_t)n, incremental != 0, threads, &logits, &n_vocab,
                               last_error) != SIPP_OK)
        return NULL;
    return logits;
}

EMSCRIPTEN_KEEPALIVE void sw_free(void *p) { sipp_free(p); }
