/*
 * request_parse.c: request bodies into gw_gen, the one form every generation route runs on.
 *
 * The body is untrusted input (it is fuzzed by tests/fuzz/fuzz_request.c). It is parsed once, by
 * gw_parse_body, with duplicate keys and NUL characters refused, so every string handed on is a
 * plain C string; the route reads its target from that tree and decodes the same tree.
 * Known fields are checked strictly: a wrong type or an out-of-range value is a 400 whose message
 * names the field, e.g. "'messages[1].content' must be a string or an array of text parts". Unknown
 * fields are ignored, as OpenAI's clients send fields a server may not know (user, metadata, ...);
 * fields sipp knows but cannot honour (n > 1, logprobs, tools) are refused rather than ignored, so
 * a client never silently gets something other than it asked for.
 *
 * Sampling defaults follow OpenAI rather than the CLI: temperature 1, top_p 1, and top_k and min_p
 * off unless given (they are llama.cpp's extensions). Without max_tokens a generation runs until an
 * end-of-generation token or the context is full, as with OpenAI and llama-server.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/request_parse.h"

#define GW_MAX_TOKENS_LIMIT (1 << 24)
#define GW_TEMPERATURE_MAX 2.0
#define GW_PENALTY_LIMIT 2.0
#define GW_REPEAT_PENALTY_MAX 100.0
#define GW_TOP_K_MAX (1 << 24)
#define GW_OPENAI_TEMPERATURE 1.0f
#define GW_SEED_MASK 0xFFFFFFFFu

typedef struct dec {
    gw_gen *g;
    char *err;
    size_t errlen;
    bool failed;
} dec;

static bool fail(dec *d, const char *fmt, ...) SIPP_PRINTF(2, 3);
static bool fail(dec *d, const char *fmt, ...) {
    if (!d->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(d->err, d->errlen, fmt, ap);
        va_end(ap);
    }
    d->failed = true;
    return false;
}

static bool is_present(const json_t *v) { return v && !json_is_null(v); }

static bool get_bool(dec *d, json_t *obj, const char *key, bool *out) {
    json_t *v = json_object_get(obj, key);
    if (!is_present(v)) return true;
    if (!json_is_boolean(v)) return fail(d, "'%s' must be true or false", key);
    *out = json_is_true(v);
    return true;
}

static bool get_int(dec *d, json_t *obj, const char *key, long long lo, long long hi, long long *out, bool *found) {
    json_t *v = json_object_get(obj, key);
    if (found) *found = false;
    if (!is_present(v)) return true;
    if (!json_is_integer(v)) return fail(d, "'%s' must be an integer", key);
    long long x = json_integer_value(v);
    if (x < lo || x > hi) return fail(d, "'%s' is %lld; it must be in [%lld, %lld]", key, x, lo, hi);
    *out = x;
    if (found) *found = true;
    return true;
}

static bool get_num(dec *d, json_t *obj, const char *key, double lo, double hi, float *out) {
    json_t *v = json_object_get(obj, key);
    if (!is_present(v)) return true;
    if (!json_is_number(v)) return fail(d, "'%s' must be a number", key);
    double x = json_number_value(v);
    if (!(x >= lo && x <= hi)) return fail(d, "'%s' is %g; it must be in [%g, %g]", key, x, lo, hi);
    *out = (float)x;
    return true;
}

static bool get_str(dec *d, json_t *obj, const char *key, const char **out) {
    json_t *v = json_object_get(obj, key);
    if (!is_present(v)) return true;
    if (!json_is_string(v)) return fail(d, "'%s' must be a string", key);
    *out = json_string_value(v);
    return true;
}

static char *own(dec *d, char *s) {
    if (!s) return NULL;
    char **o = realloc(d->g->owned, (d->g->n_owned + 1) * sizeof *o);
    if (!o) {
        free(s);
        return NULL;
    }
    d->g->owned = o;
    o[d->g->n_owned++] = s;
    return s;
}

/* A message's content: a string, or an array of {"type":"text","text":...} parts joined. */
static bool message_content(dec *d, json_t *c, size_t i, const char **out) {
    if (!is_present(c)) {
        *out = "";
        return true;
    }
    if (json_is_string(c)) {
        *out = json_string_value(c);
        return true;
    }
    if (!json_is_array(c)) return fail(d, "'messages[%zu].content' must be a string or an array of text parts", i);
    sipp_buf joined = {0};
    size_t k;
    json_t *part;
    json_array_foreach(c, k, part) {
        json_t *type = json_object_get(part, "type"), *text = json_object_get(part, "text");
        if (!json_is_object(part) || !json_is_string(type) || strcmp(json_string_value(type), "text") != 0 ||
            !json_is_string(text)) {
            sipp_buf_free(&joined);
            return fail(d, "'messages[%zu].content[%zu]' must be {\"type\": \"text\", \"text\": \"...\"} (only text parts are supported)",
                        i, k);
        }
        const char *s = json_string_value(text);
        if (!sipp_buf_append(&joined, s, strlen(s))) {
            sipp_buf_free(&joined);
            return fail(d, "out of memory");
        }
    }
    *out = joined.data ? own(d, joined.data) : "";
    return *out != NULL || fail(d, "out of memory");
}

static bool decode_messages(dec *d, json_t *root) {
    json_t *msgs = json_object_get(root, "messages");
    if (!is_present(msgs)) return fail(d, "'messages' is missing: give an array of {\"role\", \"content\"} objects");
    if (!json_is_array(msgs)) return fail(d, "'messages' must be an array of {\"role\", \"content\"} objects");
    size_t n = json_array_size(msgs);
    if (n == 0) return fail(d, "'messages' is empty: give at least one message");
    if (n > GW_MAX_MESSAGES) return fail(d, "'messages' has %zu entries; at most %d are accepted", n, GW_MAX_MESSAGES);
    d->g->messages = calloc(n, sizeof *d->g->messages);
    if (!d->g->messages) return fail(d, "out of memory");
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        if (!json_is_object(m)) return fail(d, "'messages[%zu]' must be an object with \"role\" and \"content\"", i);
        json_t *role = json_object_get(m, "role");
        if (!json_is_string(role)) return fail(d, "'messages[%zu].role' must be a string (system, user or assistant)", i);
        const char *r = json_string_value(role);
        if (strcmp(r, "developer") == 0) r = "system";
        if (strcmp(r, "system") != 0 && strcmp(r, "user") != 0 && strcmp(r, "assistant") != 0)
            return fail(d, "'messages[%zu].role' is '%s'; use system, developer, user or assistant (tool messages are not supported)",
                        i, r);
        const char *content;
        if (!message_content(d, json_object_get(m, "content"), i, &content)) return false;
        d->g->messages[i] = (sipp_message){r, content};
        d->g->n_messages++;
    }
    return true;
}

/* The prompt: a string, or an array holding one string. */
static bool decode_prompt(dec *d, json_t *root) {
    json_t *p = json_object_get(root, "prompt");
    if (!is_present(p)) return fail(d, "'prompt' is missing: give the text to complete");
    if (json_is_array(p)) {
        if (json_array_size(p) != 1 || !json_is_string(json_array_get(p, 0)))
            return fail(d, "'prompt' as an array must hold exactly one string (batched and token prompts are not supported)");
        p = json_array_get(p, 0);
    }
    if (!json_is_string(p)) return fail(d, "'prompt' must be a string");
    d->g->prompt = json_string_value(p);
    return true;
}

static bool decode_stop(dec *d, json_t *root) {
    json_t *s = json_object_get(root, "stop");
    if (!is_present(s)) return true;
    if (json_is_string(s)) {
        if (*json_string_value(s)) d->g->stop[d->g->n_stop++] = json_string_value(s);
        return true;
    }
    if (!json_is_array(s)) return fail(d, "'stop' must be a string or an array of strings");
    if (json_array_size(s) > GW_MAX_STOP) return fail(d, "'stop' has %zu strings; at most %d are accepted", json_array_size(s), GW_MAX_STOP);
    size_t i;
    json_t *e;
    json_array_foreach(s, i, e) {
        if (!json_is_string(e)) return fail(d, "'stop[%zu]' must be a string", i);
        if (*json_string_value(e)) d->g->stop[d->g->n_stop++] = json_string_value(e);
    }
    return true;
}

static bool decode_sampling(dec *d, json_t *root) {
    gw_gen *g = d->g;
    long long v = 0;
    bool found = false;
    if (!get_int(d, root, "max_completion_tokens", 1, GW_MAX_TOKENS_LIMIT, &v, &found)) return false;
    if (found) g->max_tokens = (int)v;
    if (!get_int(d, root, "max_tokens", 1, GW_MAX_TOKENS_LIMIT, &v, &found)) return false;
    if (found) g->max_tokens = (int)v;
    if (!get_num(d, root, "temperature", 0, GW_TEMPERATURE_MAX, &g->sampling.temperature)) return false;
    if (!get_num(d, root, "top_p", 0, 1, &g->sampling.top_p)) return false;
    if (json_is_number(json_object_get(root, "top_p")) && !(g->sampling.top_p > 0))
        return fail(d, "'top_p' must be above 0");
    if (!get_int(d, root, "top_k", 0, GW_TOP_K_MAX, &v, &found)) return false;
    if (found) g->sampling.top_k = (int)v;
    if (!get_num(d, root, "min_p", 0, 1, &g->sampling.min_p)) return false;
    if (!get_num(d, root, "repeat_penalty", 0, GW_REPEAT_PENALTY_MAX, &g->sampling.repeat_penalty)) return false;
    if (json_is_number(json_object_get(root, "repeat_penalty")) && !(g->sampling.repeat_penalty > 0))
        return fail(d, "'repeat_penalty' must be above 0");
    float ignored = 0;
    if (!get_num(d, root, "presence_penalty", -GW_PENALTY_LIMIT, GW_PENALTY_LIMIT, &ignored)) return false;
    if (!get_num(d, root, "frequency_penalty", -GW_PENALTY_LIMIT, GW_PENALTY_LIMIT, &ignored)) return false;
    json_t *seed = json_object_get(root, "seed");
    if (is_present(seed)) {
        if (!json_is_integer(seed)) return fail(d, "'seed' must be an integer");
        g->sampling.seed = (uint32_t)((unsigned long long)json_integer_value(seed) & GW_SEED_MASK);
    }
    if (!get_bool(d, root, "ignore_eos", &g->ignore_eos)) return false;
    json_t *n = json_object_get(root, "n");
    if (is_present(n) && !(json_is_integer(n) && json_integer_value(n) == 1))
        return fail(d, "'n' must be 1: one choice per request is supported");
    bool logprobs = false;
    if (!get_bool(d, root, "logprobs", &logprobs)) return false;
    if (logprobs) return fail(d, "'logprobs' is not supported; leave it out or set it to false");
    json_t *tools = json_object_get(root, "tools");
    if (is_present(tools) && !(json_is_array(tools) && json_array_size(tools) == 0))
        return fail(d, "'tools' is not supported by this server");
    json_t *rf = json_object_get(root, "response_format");
    if (is_present(rf)) {
        json_t *type = json_object_get(rf, "type");
        if (!json_is_object(rf) || !json_is_string(type)) return fail(d, "'response_format' must be {\"type\": \"text\"}");
        if (strcmp(json_string_value(type), "text") != 0)
            return fail(d, "'response_format.type' '%s' is not supported; only \"text\" is", json_string_value(type));
    }
    return decode_stop(d, root);
}

static bool decode_stream(dec *d, json_t *root, bool dflt) {
    gw_gen *g = d->g;
    g->stream = dflt;
    if (!get_bool(d, root, "stream", &g->stream)) return false;
    json_t *so = json_object_get(root, "stream_options");
    if (!is_present(so)) return true;
    if (!json_is_object(so)) return fail(d, "'stream_options' must be an object such as {\"include_usage\": true}");
    json_t *iu = json_object_get(so, "include_usage");
    if (is_present(iu) && !json_is_boolean(iu)) return fail(d, "'stream_options.include_usage' must be true or false");
    g->include_usage = json_is_true(iu);
    return true;
}

static bool decode_inputs(dec *d, json_t *root) {
    json_t *in = json_object_get(root, "input");
    if (!is_present(in)) return fail(d, "'input' is missing: give a string or an array of strings");
    size_t n = json_is_array(in) ? json_array_size(in) : 1;
    if (!json_is_array(in) && !json_is_string(in)) return fail(d, "'input' must be a string or an array of strings");
    if (n == 0) return fail(d, "'input' is empty");
    if (n > GW_MAX_EMBED_INPUTS) return fail(d, "'input' has %zu strings; at most %d are accepted", n, GW_MAX_EMBED_INPUTS);
    d->g->inputs = calloc(n, sizeof *d->g->inputs);
    if (!d->g->inputs) return fail(d, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_is_array(in) ? json_array_get(in, i) : in;
        if (!json_is_string(e)) return fail(d, "'input[%zu]' must be a string (token arrays are not supported)", i);
        d->g->inputs[d->g->n_inputs++] = json_string_value(e);
    }
    return true;
}

void gw_gen_free(gw_gen *g) {
    if (!g) return;
    json_decref(g->root);
    free(g->messages);
    free(g->inputs);
    for (size_t i = 0; i < g->n_owned; i++) free(g->owned[i]);
    free(g->owned);
    memset(g, 0, sizeof *g);
}

json_t *gw_parse_body(const char *body, size_t len, char *err, size_t errlen) {
    json_error_t je;
    json_t *root = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES, &je);
    if (!root) snprintf(err, errlen, "the body is not valid JSON: %s (line %d, column %d)", je.text, je.line, je.column);
    return root;
}

const char *gw_body_model(json_t *root) {
    json_t *model = json_object_get(root, "model");
    return json_is_string(model) ? json_string_value(model) : NULL;
}

bool gw_body_stream(json_t *root, bool stream_default) {
    json_t *stream = json_object_get(root, "stream");
    return json_is_boolean(stream) ? json_is_true(stream) : stream_default;
}

bool gw_decode(gw_api api, json_t *body, gw_gen *g, gw_error_kind *kind, char *err, size_t errlen) {
    memset(g, 0, sizeof *g);
    g->api = api;
    g->max_tokens = -1;
    g->sampling = sipp_request_default_params().sampling;
    g->sampling.temperature = GW_OPENAI_TEMPERATURE;
    g->sampling.top_p = 1.0f;
    g->sampling.top_k = 0;
    g->sampling.min_p = 0.0f;
    dec d = {.g = g, .err = err, .errlen = errlen};
    g->root = json_incref(body);
    *kind = GW_E_INVALID_FIELD;
    if (!json_is_object(g->root)) {
        fail(&d, "the body must be a JSON object");
        gw_gen_free(g);
        return false;
    }
    json_t *root = g->root;
    bool ok = get_str(&d, root, "model", &g->model);
    switch (api) {
    /* context_key is sipp's extension of the OpenAI routes too, as llama-server's extensions are. */
    case GW_API_CHAT:
        ok = ok && decode_messages(&d, root) && decode_stream(&d, root, false) && decode_sampling(&d, root) &&
             get_str(&d, root, "context_key", &g->context_key);
        break;
    case GW_API_COMPLETION:
        ok = ok && decode_prompt(&d, root) && decode_stream(&d, root, false) && decode_sampling(&d, root) &&
             get_str(&d, root, "context_key", &g->context_key);
        break;
    case GW_API_NATIVE_QUERY:
        ok = ok && decode_prompt(&d, root) && decode_stream(&d, root, true) && decode_sampling(&d, root) &&
             get_str(&d, root, "context_key", &g->context_key);
        break;
    case GW_API_NATIVE_CHAT:
        ok = ok && decode_messages(&d, root) && decode_stream(&d, root, true) && decode_sampling(&d, root) &&
             get_str(&d, root, "context_key", &g->context_key);
        break;
    case GW_API_EMBEDDINGS:
    case GW_API_NATIVE_EMBED: {
        const char *fmt = NULL;
        g->normalize = true;
        ok = ok && decode_inputs(&d, root) && get_str(&d, root, "encoding_format", &fmt) &&
             (api == GW_API_EMBEDDINGS || get_bool(&d, root, "normalize", &g->normalize));
        if (ok && fmt && strcmp(fmt, "base64") == 0) g->base64 = true;
        else if (ok && fmt && strcmp(fmt, "float") != 0)
            ok = fail(&d, "'encoding_format' '%s' is not supported; use \"float\" or \"base64\"", fmt);
        break;
    }
    }
    if (!ok || d.failed) {
        gw_gen_free(g);
        return false;
    }
    return true;
}
