/*
 * request_parse.c: request bodies into gw_gen, the one form every generation route runs on.
 *
 * The body is untrusted input (it is fuzzed by tests/fuzz/fuzz_request.c). It is parsed once, by
 * gw_parse_body, with duplicate keys and NUL characters refused, so every string handed on is a
 * plain C string; the route reads its target from that tree and decodes the same tree.
 * Known fields are checked strictly: a wrong type or an out-of-range value is a 400 whose message
 * names the field, e.g. "'messages[1].content' must be a string or an array of content parts".
 *
 * Every field a route accepts is in one table (FIELDS, documented in docs/gateway.md): supported,
 * accepted and ignored because it cannot change the output (user, metadata, store, ...), or refused
 * with a 400 that names it (logit_bias, audio, ...). A field in no row is refused as unknown, so a
 * client never silently gets something other than it asked for.
 *
 * Chats (chat completions and the native chat) are kept as an OpenAI chat body in gw_gen.chat:
 * messages, tools, tool_choice, response_format, json_schema, grammar and the reasoning options go
 * to libsipp as they are (sipp_request_params.chat_json), which checks them against the template
 * and the tools' schemas; its errors name the field too.
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

#include "gateway/media_parts.h"
#include "gateway/request_parse.h"

#define GW_MAX_TOKENS_LIMIT (1 << 24)
#define GW_TEMPERATURE_MAX 2.0
#define GW_PENALTY_LIMIT 2.0
#define GW_REPEAT_PENALTY_MAX 100.0
#define GW_TOP_K_MAX (1 << 24)
#define GW_OPENAI_TEMPERATURE 1.0f
#define GW_SEED_MASK 0xFFFFFFFFu
#define GW_MAX_N 128
#define GW_MAX_COMPLETION_LOGPROBS 5
#define SYSTEM_FOLD_SEPARATOR "\n\n"
#define GW_IGNORED_NAME_SIZE 96 /* "messages[4095].content[...].image_url.detail" */

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

static bool get_int(dec *d, json_t *obj, const char *key, long long lo, long long hi, long long *out,
                    bool *found) {
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

/* Ignores a hint the body carried inside a message (a path made here, kept until gw_gen_free). */
static void ignore_path(dec *d, const char *fmt, size_t i, size_t k) {
    char name[GW_IGNORED_NAME_SIZE];
    snprintf(name, sizeof name, fmt, i, k);
    char *kept = own(d, strdup(name));
    if (kept && d->g->n_ignored < GW_MAX_IGNORED) d->g->ignored[d->g->n_ignored++] = kept;
}

/* An image_url part: the URL a string or {"url", "detail"?}, a data: URL or an http(s) one
 * (media_parts.c; whether the gateway fetches it is the config's, decided for a local target by
 * gw_media_fetch, and a remote target is sent it as it is); detail is a hint for OpenAI's models,
 * named in sipp-ignored. */
static bool image_part(dec *d, json_t *part, size_t i, size_t k) {
    json_t *iu = json_object_get(part, "image_url");
    json_t *url = json_is_object(iu) ? json_object_get(iu, "url") : iu;
    if (!json_is_string(url))
        return fail(d,
                    "'messages[%zu].content[%zu].image_url' must be {\"url\": \"data:image/...;base64,...\"} "
                    "or that URL as a string",
                    i, k);
    const char *why = gw_image_url_refusal(json_string_value(url), true);
    if (why) return fail(d, "'messages[%zu].content[%zu].image_url.url' is %s", i, k, why);
    const char *key;
    json_t *v;
    json_object_foreach(iu, key, v) { /* none when iu is the URL itself */
        if (strcmp(key, "detail") == 0)
            ignore_path(d, "messages[%zu].content[%zu].image_url.detail", i, k);
        else if (strcmp(key, "url") != 0)
            return fail(d, "'messages[%zu].content[%zu].image_url.%s' is not a field sipp knows; give url", i,
                        k, key);
    }
    d->g->n_images++;
    return true;
}

/* An input_audio part: base64 data of a format libsipp decodes. */
static bool audio_part(dec *d, json_t *part, size_t i, size_t k) {
    json_t *a = json_object_get(part, "input_audio");
    json_t *data = json_object_get(a, "data"), *format = json_object_get(a, "format");
    if (!json_is_object(a) || !json_is_string(data) || !json_is_string(format))
        return fail(d,
                    "'messages[%zu].content[%zu].input_audio' must be {\"data\": \"BASE64\", \"format\": "
                    "\"wav\" | \"mp3\" | \"flac\"}",
                    i, k);
    if (!gw_audio_format_known(json_string_value(format)))
        return fail(d, "'messages[%zu].content[%zu].input_audio.format' is '%s'; use wav, mp3 or flac", i, k,
                    json_string_value(format));
    d->g->n_audio++;
    return true;
}

/* A message's content: a string, or an array of parts: text (joined into the message's text),
 * image_url and input_audio (counted; the chat body carries them to libsipp). */
static bool message_content(dec *d, json_t *c, size_t i, const char **out) {
    if (!is_present(c)) {
        *out = "";
        return true;
    }
    if (json_is_string(c)) {
        *out = json_string_value(c);
        return true;
    }
    if (!json_is_array(c))
        return fail(d, "'messages[%zu].content' must be a string or an array of content parts", i);
    sipp_buf joined = {0};
    size_t k;
    json_t *part;
    bool ok = true;
    json_array_foreach(c, k, part) {
        const char *type = json_string_value(json_object_get(part, "type"));
        json_t *text = json_object_get(part, "text");
        if (type && strcmp(type, "image_url") == 0) {
            ok = image_part(d, part, i, k);
        } else if (type && strcmp(type, "input_audio") == 0) {
            ok = audio_part(d, part, i, k);
        } else if (!type || strcmp(type, "text") != 0 || !json_is_string(text)) {
            ok = fail(d,
                      "'messages[%zu].content[%zu]' must be {\"type\": \"text\", \"text\": \"...\"}, an "
                      "image_url or an input_audio part",
                      i, k);
        } else if (!sipp_buf_append(&joined, json_string_value(text), json_string_length(text))) {
            ok = fail(d, "out of memory");
        }
        if (!ok) break;
    }
    if (!ok) {
        sipp_buf_free(&joined);
        return false;
    }
    *out = joined.data ? own(d, joined.data) : "";
    return *out != NULL || fail(d, "out of memory");
}

static bool decode_messages(dec *d, json_t *root) {
    json_t *msgs = json_object_get(root, "messages");
    if (!is_present(msgs))
        return fail(d, "'messages' is missing: give an array of {\"role\", \"content\"} objects");
    if (!json_is_array(msgs))
        return fail(d, "'messages' must be an array of {\"role\", \"content\"} objects");
    size_t n = json_array_size(msgs);
    if (n == 0) return fail(d, "'messages' is empty: give at least one message");
    if (n > GW_MAX_MESSAGES)
        return fail(d, "'messages' has %zu entries; at most %d are accepted", n, GW_MAX_MESSAGES);
    d->g->messages = calloc(n, sizeof *d->g->messages);
    if (!d->g->messages) return fail(d, "out of memory");
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        if (!json_is_object(m))
            return fail(d, "'messages[%zu]' must be an object with \"role\" and \"content\"", i);
        json_t *role = json_object_get(m, "role");
        if (!json_is_string(role))
            return fail(d, "'messages[%zu].role' must be a string (system, user, assistant or tool)", i);
        const char *r = json_string_value(role);
        if (strcmp(r, "developer") == 0) r = "system";
        if (strcmp(r, "system") != 0 && strcmp(r, "user") != 0 && strcmp(r, "assistant") != 0 &&
            strcmp(r, "tool") != 0)
            return fail(d, "'messages[%zu].role' is '%s'; use system, developer, user, assistant or tool", i,
                        r);
        json_t *calls = json_object_get(m, "tool_calls");
        if (is_present(calls) && (strcmp(r, "assistant") != 0 || !json_is_array(calls)))
            return fail(d, "'messages[%zu].tool_calls' must be an array, on an assistant message", i);
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
            return fail(d, "'prompt' as an array must hold exactly one string (batched and token prompts are "
                           "not supported)");
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
    if (json_array_size(s) > GW_MAX_STOP)
        return fail(d, "'stop' has %zu strings; at most %d are accepted", json_array_size(s), GW_MAX_STOP);
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
    if (!get_num(d, root, "repeat_penalty", 0, GW_REPEAT_PENALTY_MAX, &g->sampling.repeat_penalty))
        return false;
    if (json_is_number(json_object_get(root, "repeat_penalty")) && !(g->sampling.repeat_penalty > 0))
        return fail(d, "'repeat_penalty' must be above 0");
    if (!get_num(d, root, "presence_penalty", -GW_PENALTY_LIMIT, GW_PENALTY_LIMIT,
                 &g->sampling.presence_penalty))
        return false;
    if (!get_num(d, root, "frequency_penalty", -GW_PENALTY_LIMIT, GW_PENALTY_LIMIT,
                 &g->sampling.frequency_penalty))
        return false;
    json_t *seed = json_object_get(root, "seed");
    if (is_present(seed)) {
        if (!json_is_integer(seed)) return fail(d, "'seed' must be an integer");
        g->sampling.seed = (uint32_t)((unsigned long long)json_integer_value(seed) & GW_SEED_MASK);
    }
    if (!get_bool(d, root, "ignore_eos", &g->ignore_eos)) return false;
    if (!get_int(d, root, "n", 1, GW_MAX_N, &v, &found)) return false;
    if (found) g->n = (int)v;
    return decode_stop(d, root);
}

/* ---- the field table ------------------------------------------------------------------------ */

/* Which routes a field belongs to. */
#define F_CHAT (1u << 0)       /* /v1/chat/completions, /v1/chat */
#define F_PROMPT (1u << 1)     /* /v1/completions, /v1/query */
#define F_EMBED (1u << 2)      /* /v1/embeddings, /v1/embed */
#define F_RERANK (1u << 3)     /* /v1/rerank, /rerank, /v1/reranking */
#define F_TOKENIZE (1u << 4)   /* /tokenize */
#define F_DETOKENIZE (1u << 5) /* /detokenize */
#define F_INFILL (1u << 6)     /* /infill */
#define F_GEN (F_CHAT | F_PROMPT)
#define F_ALL (F_GEN | F_EMBED | F_RERANK | F_TOKENIZE | F_DETOKENIZE | F_INFILL)
#define F_SAMPLE (F_GEN | F_INFILL) /* the samplers, stop and stream: also /infill's */

typedef enum field_kind { FIELD_SUPPORTED, FIELD_IGNORED, FIELD_REFUSED } field_kind;

typedef struct field_rule {
    const char *name;
    unsigned routes;
    field_kind kind;
    const char *why; /* refused: what to do instead; ignored: why it cannot change the output */
} field_rule;

/* docs/api-fields.md has this table (api "chat"); tests/integration/test_api_fields.py checks each
 * row against a running gateway. */
static const field_rule FIELDS[] = {
    {"model", F_ALL, FIELD_SUPPORTED, NULL},
    {"messages", F_CHAT, FIELD_SUPPORTED, NULL},
    {"prompt", F_PROMPT | F_INFILL, FIELD_SUPPORTED, NULL},
    {"input", F_EMBED, FIELD_SUPPORTED, NULL},
    {"encoding_format", F_EMBED, FIELD_SUPPORTED, NULL},
    {"normalize", F_EMBED, FIELD_SUPPORTED, NULL},
    {"query", F_RERANK, FIELD_SUPPORTED, NULL},
    {"documents", F_RERANK, FIELD_SUPPORTED, NULL},
    {"top_n", F_RERANK, FIELD_SUPPORTED, NULL},
    {"return_documents", F_RERANK, FIELD_SUPPORTED, NULL},
    {"texts", F_RERANK, FIELD_REFUSED, "Text Embeddings Inference's shape is not served; send documents"},
    {"rank_fields", F_RERANK, FIELD_REFUSED, "documents are ranked by their text; send objects with text"},
    {"max_chunks_per_doc", F_RERANK, FIELD_REFUSED, "a document is ranked whole; split it yourself"},
    {"content", F_TOKENIZE, FIELD_SUPPORTED, NULL},
    {"add_special", F_TOKENIZE, FIELD_SUPPORTED, NULL},
    {"parse_special", F_TOKENIZE, FIELD_SUPPORTED, NULL},
    {"with_pieces", F_TOKENIZE, FIELD_SUPPORTED, NULL},
    {"tokens", F_DETOKENIZE, FIELD_SUPPORTED, NULL},
    {"input_prefix", F_INFILL, FIELD_SUPPORTED, NULL},
    {"input_suffix", F_INFILL, FIELD_SUPPORTED, NULL},
    {"input_extra", F_INFILL, FIELD_SUPPORTED, NULL},
    {"n_predict", F_INFILL, FIELD_SUPPORTED, NULL},
    {"id_slot", F_INFILL, FIELD_REFUSED, "sipp places each request in a slot itself; leave it out"},
    {"n_probs", F_INFILL, FIELD_REFUSED, "/infill renders no probabilities; use /v1/completions' logprobs"},
    {"stream", F_SAMPLE, FIELD_SUPPORTED, NULL},
    {"stream_options", F_GEN, FIELD_SUPPORTED, NULL},
    {"max_tokens", F_SAMPLE, FIELD_SUPPORTED, NULL},
    {"max_completion_tokens", F_GEN, FIELD_SUPPORTED, NULL},
    {"temperature", F_SAMPLE, FIELD_SUPPORTED, NULL},
    {"top_p", F_SAMPLE, FIELD_SUPPORTED, NULL},
    {"top_k", F_SAMPLE, FIELD_SUPPORTED, NULL},
    {"min_p", F_SAMPLE, FIELD_SUPPORTED, NULL},
    {"repeat_penalty", F_SAMPLE, FIELD_SUPPORTED, NULL},
    {"presence_penalty", F_SAMPLE, FIELD_SUPPORTED, NULL},
    {"frequency_penalty", F_SAMPLE, FIELD_SUPPORTED, NULL},
    {"seed", F_SAMPLE, FIELD_SUPPORTED, NULL},
    {"stop", F_SAMPLE, FIELD_SUPPORTED, NULL},
    {"ignore_eos", F_SAMPLE, FIELD_SUPPORTED, NULL},
    {"context_key", F_GEN, FIELD_SUPPORTED, NULL},
    {"lora", F_GEN, FIELD_SUPPORTED, NULL},
    {"n", F_GEN, FIELD_SUPPORTED, NULL},
    {"logprobs", F_GEN, FIELD_SUPPORTED, NULL},
    {"top_logprobs", F_CHAT, FIELD_SUPPORTED, NULL},
    {"tools", F_CHAT, FIELD_SUPPORTED, NULL},
    {"tool_choice", F_CHAT, FIELD_SUPPORTED, NULL},
    {"parallel_tool_calls", F_CHAT, FIELD_SUPPORTED, NULL},
    {"response_format", F_GEN, FIELD_SUPPORTED, NULL},
    {"json_schema", F_GEN, FIELD_SUPPORTED, NULL},
    {"grammar", F_GEN, FIELD_SUPPORTED, NULL},
    {"reasoning_format", F_CHAT, FIELD_SUPPORTED, NULL},
    {"reasoning_effort", F_CHAT, FIELD_SUPPORTED, NULL},
    {"chat_template_kwargs", F_CHAT, FIELD_SUPPORTED, NULL},
    {"thinking_budget_tokens", F_CHAT, FIELD_SUPPORTED, NULL},
    {"user", F_ALL, FIELD_IGNORED, "an end-user id for the provider's abuse monitoring"},
    {"metadata", F_GEN, FIELD_IGNORED, "tags for the provider's dashboard"},
    {"store", F_GEN, FIELD_IGNORED, "whether the provider keeps the completion; sipp keeps none"},
    {"service_tier", F_GEN, FIELD_IGNORED, "the provider's billing tier"},
    {"safety_identifier", F_GEN, FIELD_IGNORED, "an end-user id for the provider's abuse monitoring"},
    {"prompt_cache_key", F_GEN, FIELD_IGNORED, "a cache hint; sipp reuses shared prefixes by itself"},
    {"cache_prompt", F_SAMPLE, FIELD_IGNORED,
     "llama.cpp's cache hint; sipp reuses shared prefixes by itself"},
    {"prompt_cache_retention", F_GEN, FIELD_IGNORED, "a cache hint; sipp reuses shared prefixes by itself"},
    {"logit_bias", F_GEN, FIELD_REFUSED, "use grammar or json_schema to constrain tokens"},
    {"modalities", F_CHAT, FIELD_REFUSED, "sipp answers in text only; leave it out"},
    {"audio", F_CHAT, FIELD_REFUSED, "sipp answers in text only; leave it out"},
    {"prediction", F_CHAT, FIELD_REFUSED, "predicted outputs are not implemented; leave it out"},
    {"web_search_options", F_CHAT, FIELD_REFUSED, "sipp has no web search; give the model a tool instead"},
    {"verbosity", F_CHAT, FIELD_IGNORED, "a length hint for OpenAI's models; no template here reads one"},
    {"functions", F_CHAT, FIELD_REFUSED, "the deprecated form of tools; send tools"},
    {"function_call", F_CHAT, FIELD_REFUSED, "the deprecated form of tool_choice; send tool_choice"},
    {"chat_template", F_CHAT, FIELD_REFUSED,
     "a target's template is set in its config (chat_template = \"chatml\" or a file): a request may not "
     "name "
     "files on the server"},
    {"echo", F_PROMPT, FIELD_REFUSED, "the prompt is not echoed; prepend it yourself"},
    {"suffix", F_PROMPT, FIELD_REFUSED, "fill-in-the-middle is POST /infill (input_prefix, input_suffix)"},
    {"best_of", F_PROMPT, FIELD_REFUSED, "use n and choose yourself"},
    {"dimensions", F_EMBED, FIELD_REFUSED, "the model's embedding width is fixed"},
};

static unsigned route_bit(gw_api api) {
    switch (api) {
    case GW_API_CHAT:
    case GW_API_NATIVE_CHAT: return F_CHAT;
    case GW_API_COMPLETION:
    case GW_API_NATIVE_QUERY: return F_PROMPT;
    case GW_API_RERANK: return F_RERANK;
    case GW_API_TOKENIZE: return F_TOKENIZE;
    case GW_API_DETOKENIZE: return F_DETOKENIZE;
    case GW_API_INFILL: return F_INFILL;
    default: return F_EMBED;
    }
}

/* Every field of the body must have a row for its route: refused rows and unknown fields are 400s. */
static bool check_field_table(dec *d, json_t *root, gw_api api) {
    unsigned bit = route_bit(api);
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        const field_rule *rule = NULL;
        for (size_t i = 0; i < sizeof FIELDS / sizeof *FIELDS && !rule; i++)
            if (strcmp(FIELDS[i].name, key) == 0) rule = &FIELDS[i];
        if (!rule)
            return fail(d, "'%s' is not a field sipp knows; docs/gateway.md lists the fields of each route",
                        key);
        if (!(rule->routes & bit))
            return fail(
                d, "'%s' does not apply to this route; docs/gateway.md lists the fields of each route", key);
        if (rule->kind == FIELD_REFUSED && is_present(v))
            return fail(d, "'%s' is not supported: %s", key, rule->why);
        if (rule->kind == FIELD_IGNORED && d->g->n_ignored < GW_MAX_IGNORED)
            d->g->ignored[d->g->n_ignored++] = rule->name;
    }
    return true;
}

/* ---- chats and constraints -------------------------------------------------------------------- */

/* The fields libsipp checks and applies to a chat, passed on as they are. */
static const char *const CHAT_FIELDS[] = {
    "tools",   "tool_choice",      "parallel_tool_calls",  "response_format",       "json_schema",
    "grammar", "reasoning_format", "chat_template_kwargs", "thinking_budget_tokens"};

/* The image parts as libsipp takes them (chat_json in sipp.h): image_url always an object, without
 * the detail hint (message_content checked every part). */
static void normalize_media(json_t *msgs) {
    size_t i, k;
    json_t *m, *part;
    json_array_foreach(msgs, i, m) {
        json_t *c = json_object_get(m, "content");
        if (!json_is_array(c)) continue;
        json_array_foreach(c, k, part) {
            json_t *iu = json_object_get(part, "image_url");
            if (json_is_string(iu))
                json_object_set_new(part, "image_url", json_pack("{s:O}", "url", iu));
            else if (json_is_object(iu))
                json_object_del(iu, "detail");
        }
    }
}

static bool decode_chat(dec *d, json_t *root) {
    gw_gen *g = d->g;
    g->chat = json_object();
    if (!g->chat ||
        json_object_set_new(g->chat, "messages", json_deep_copy(json_object_get(root, "messages"))) != 0)
        return fail(d, "out of memory");
    normalize_media(json_object_get(g->chat, "messages"));
    for (size_t i = 0; i < sizeof CHAT_FIELDS / sizeof *CHAT_FIELDS; i++) {
        json_t *v = json_object_get(root, CHAT_FIELDS[i]);
        if (is_present(v)) json_object_set_new(g->chat, CHAT_FIELDS[i], json_deep_copy(v));
    }
    /* reasoning_effort is a template argument (gpt-oss reads it); "none" turns thinking off, as in
     * llama-server. */
    json_t *effort = json_object_get(root, "reasoning_effort");
    if (is_present(effort)) {
        if (!json_is_string(effort))
            return fail(d, "'reasoning_effort' must be a string (none, low, medium, high)");
        json_t *kw = json_object_get(g->chat, "chat_template_kwargs");
        if (!kw) json_object_set_new(g->chat, "chat_template_kwargs", kw = json_object());
        if (!json_is_object(kw)) return fail(d, "'chat_template_kwargs' must be an object");
        if (strcmp(json_string_value(effort), "none") == 0)
            json_object_set_new(kw, "enable_thinking", json_false());
        else
            json_object_set_new(kw, "reasoning_effort", json_string(json_string_value(effort)));
    }
    bool logprobs = false;
    long long top = 0;
    bool found = false;
    if (!get_bool(d, root, "logprobs", &logprobs)) return false;
    if (!get_int(d, root, "top_logprobs", 0, SIPP_MAX_TOP_LOGPROBS, &top, &found)) return false;
    if (found && !logprobs) return fail(d, "'top_logprobs' needs 'logprobs': true");
    g->logprobs = logprobs ? (int)top : -1;
    return true;
}

/* A prompt's constraint: grammar, json_schema or response_format; its logprobs an integer. */
static bool decode_prompt_constraints(dec *d, json_t *root) {
    gw_gen *g = d->g;
    long long lp = 0;
    bool found = false;
    if (!get_int(d, root, "logprobs", 0, GW_MAX_COMPLETION_LOGPROBS, &lp, &found)) return false;
    g->logprobs = found ? (int)lp : -1;
    if (!get_str(d, root, "grammar", &g->grammar)) return false;
    json_t *schema = json_object_get(root, "json_schema"), *rf = json_object_get(root, "response_format");
    const char *from = "json_schema";
    if (is_present(rf)) {
        json_t *type = json_object_get(rf, "type");
        if (!json_is_object(rf) || !json_is_string(type))
            return fail(
                d, "'response_format' must be {\"type\": \"text\" | \"json_object\" | \"json_schema\", ...}");
        const char *t = json_string_value(type);
        json_t *from_rf = NULL;
        if (strcmp(t, "json_object") == 0)
            from_rf = json_pack("{s:s}", "type", "object");
        else if (strcmp(t, "json_schema") == 0)
            from_rf = json_incref(json_object_get(json_object_get(rf, "json_schema"), "schema"));
        else if (strcmp(t, "text") != 0)
            return fail(d, "'response_format.type' is '%s'; use text, json_object or json_schema", t);
        if (strcmp(t, "json_schema") == 0 && !json_is_object(from_rf)) {
            json_decref(from_rf);
            return fail(d, "'response_format.json_schema.schema' must be a JSON Schema object");
        }
        if (from_rf && is_present(schema)) {
            json_decref(from_rf);
            return fail(d, "give either 'response_format' or 'json_schema', not both");
        }
        if (from_rf) {
            g->json_schema = json_dumps(from_rf, JSON_COMPACT);
            json_decref(from_rf);
            from = "response_format";
        }
    }
    if (is_present(schema)) {
        if (!json_is_object(schema)) return fail(d, "'json_schema' must be a JSON Schema object");
        g->json_schema = json_dumps(schema, JSON_COMPACT);
    }
    if (g->json_schema && g->grammar) return fail(d, "give either 'grammar' or '%s', not both", from);
    return true;
}

static bool decode_stream(dec *d, json_t *root, bool dflt) {
    gw_gen *g = d->g;
    g->stream = dflt;
    if (!get_bool(d, root, "stream", &g->stream)) return false;
    json_t *so = json_object_get(root, "stream_options");
    if (!is_present(so)) return true;
    if (!json_is_object(so))
        return fail(d, "'stream_options' must be an object such as {\"include_usage\": true}");
    json_t *iu = json_object_get(so, "include_usage");
    if (is_present(iu) && !json_is_boolean(iu))
        return fail(d, "'stream_options.include_usage' must be true or false");
    g->include_usage = json_is_true(iu);
    return true;
}

static bool decode_inputs(dec *d, json_t *root) {
    json_t *in = json_object_get(root, "input");
    if (!is_present(in)) return fail(d, "'input' is missing: give a string or an array of strings");
    size_t n = json_is_array(in) ? json_array_size(in) : 1;
    if (!json_is_array(in) && !json_is_string(in))
        return fail(d, "'input' must be a string or an array of strings");
    if (n == 0) return fail(d, "'input' is empty");
    if (n > GW_MAX_EMBED_INPUTS)
        return fail(d, "'input' has %zu strings; at most %d are accepted", n, GW_MAX_EMBED_INPUTS);
    d->g->inputs = calloc(n, sizeof *d->g->inputs);
    if (!d->g->inputs) return fail(d, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_is_array(in) ? json_array_get(in, i) : in;
        if (!json_is_string(e))
            return fail(d, "'input[%zu]' must be a string (token arrays are not supported)", i);
        d->g->inputs[d->g->n_inputs++] = json_string_value(e);
    }
    return true;
}

/* rerank: query, documents (strings or objects with a "text" string), top_n, return_documents. */
static bool decode_rerank(dec *d, json_t *root) {
    gw_gen *g = d->g;
    json_t *q = json_object_get(root, "query"), *docs = json_object_get(root, "documents");
    if (!json_is_string(q))
        return fail(d, "'query' must be a string (the text the documents are ranked for)");
    g->query = json_string_value(q);
    size_t n = json_array_size(docs);
    if (!json_is_array(docs) || n == 0)
        return fail(d, "'documents' must be a non-empty array of strings or objects with \"text\"");
    if (n > GW_MAX_EMBED_INPUTS)
        return fail(d, "'documents' has %zu entries; at most %d are accepted", n, GW_MAX_EMBED_INPUTS);
    if (!(g->inputs = calloc(n, sizeof *g->inputs))) return fail(d, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(docs, i);
        json_t *text = json_is_object(e) ? json_object_get(e, "text") : e;
        if (!json_is_string(text))
            return fail(d, "'documents[%zu]' must be a string or an object with a \"text\" string", i);
        g->inputs[g->n_inputs++] = json_string_value(text);
    }
    long long top_n = (long long)n;
    if (!get_int(d, root, "top_n", 1, INT32_MAX, &top_n, NULL)) return false;
    g->top_n = top_n < (long long)n ? (int)top_n : (int)n;
    return get_bool(d, root, "return_documents", &g->return_documents);
}

/* tokenize: content (a string, or an array of strings and token ids, as llama-server's
 * tokenize_mixed), add_special, parse_special, with_pieces. */
static bool decode_tokenize(dec *d, json_t *root) {
    gw_gen *g = d->g;
    json_t *c = json_object_get(root, "content");
    if (!json_is_string(c) && !json_is_array(c))
        return fail(d, "'content' must be a string (or an array of strings and token ids)");
    for (size_t i = 0; i < json_array_size(c); i++) {
        json_t *e = json_array_get(c, i);
        if (!json_is_string(e) && !json_is_integer(e))
            return fail(d, "'content[%zu]' must be a string or a token id", i);
    }
    g->content = c;
    g->parse_special = true;
    return get_bool(d, root, "add_special", &g->add_special) &&
           get_bool(d, root, "parse_special", &g->parse_special) &&
           get_bool(d, root, "with_pieces", &g->with_pieces);
}

/* detokenize: tokens, an array of token ids (checked against the vocabulary when it is run). */
static bool decode_detokenize(dec *d, json_t *root) {
    json_t *t = json_object_get(root, "tokens");
    if (!json_is_array(t)) return fail(d, "'tokens' must be an array of token ids");
    for (size_t i = 0; i < json_array_size(t); i++) {
        json_t *e = json_array_get(t, i);
        if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) > INT32_MAX)
            return fail(d, "'tokens[%zu]' must be a token id (an integer >= 0)", i);
    }
    d->g->token_ids = t;
    return true;
}

/* infill: input_prefix and input_suffix (required), input_extra [{filename?, text}], prompt,
 * n_predict (llama-server's name of max_tokens; -1: until the context is full). */
static bool decode_infill(dec *d, json_t *root) {
    gw_gen *g = d->g;
    json_t *pre = json_object_get(root, "input_prefix"), *suf = json_object_get(root, "input_suffix");
    if (!json_is_string(pre))
        return fail(d, "'input_prefix' is required: the code before the hole, a string");
    if (!json_is_string(suf)) return fail(d, "'input_suffix' is required: the code after the hole, a string");
    g->input_prefix = json_string_value(pre);
    g->input_suffix = json_string_value(suf);
    json_t *extra = json_object_get(root, "input_extra");
    if (is_present(extra) && !json_is_array(extra))
        return fail(d, "'input_extra' must be an array of {\"filename\": string, \"text\": string}");
    size_t n = json_array_size(extra);
    if (n && !(g->input_extra = calloc(n, sizeof *g->input_extra))) return fail(d, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(extra, i), *text = json_object_get(e, "text"),
               *name = json_object_get(e, "filename");
        if (!json_is_string(text)) return fail(d, "'input_extra[%zu].text' must be a string", i);
        if (is_present(name) && !json_is_string(name))
            return fail(d, "'input_extra[%zu].filename' must be a string", i);
        g->input_extra[g->n_input_extra++] =
            (sipp_infill_extra){.filename = json_string_value(name), .text = json_string_value(text)};
    }
    long long n_predict = -1;
    bool found = false;
    if (!get_int(d, root, "n_predict", -1, GW_MAX_TOKENS_LIMIT, &n_predict, &found)) return false;
    if (found && n_predict != 0) g->max_tokens = (int)n_predict;
    if (found && n_predict == 0)
        return fail(d, "'n_predict' is 0; ask for at least 1 token, or -1 for no limit");
    return get_str(d, root, "prompt", &g->prompt);
}

void gw_gen_free(gw_gen *g) {
    if (!g) return;
    if (g->route_free) g->route_free(g->route);
    json_decref(g->root);
    json_decref(g->chat);
    free(g->json_schema);
    free(g->messages);
    free(g->inputs);
    free(g->input_extra);
    sipp_free(g->prompt_tokens);
    for (size_t i = 0; i < g->n_owned; i++)
        free(g->owned[i]);
    free(g->owned);
    memset(g, 0, sizeof *g);
}

json_t *gw_parse_body(const char *body, size_t len, char *err, size_t errlen) {
    json_error_t je;
    json_t *root = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        snprintf(err, errlen, "the body is not valid JSON: %s (line %d, column %d)", je.text, je.line,
                 je.column);
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

/* lora: [{"id": N, "scale": S}], llama-server's per-request adapters (ids of the target's lora list;
 * libsipp checks the range). */
static bool decode_lora(dec *d, json_t *root) {
    json_t *l = json_object_get(root, "lora");
    if (!is_present(l)) return true;
    if (!json_is_array(l) || json_array_size(l) > GW_MAX_LORA)
        return fail(d, "'lora' must be an array of at most %d {\"id\", \"scale\"} objects", GW_MAX_LORA);
    size_t i;
    json_t *e;
    json_array_foreach(l, i, e) {
        json_t *id = json_object_get(e, "id"), *scale = json_object_get(e, "scale");
        if (!json_is_object(e) || !json_is_integer(id) || json_integer_value(id) < 0 ||
            json_integer_value(id) > INT32_MAX)
            return fail(
                d, "'lora[%zu].id' must be an adapter's id (0, 1, ...: GET /lora-adapters lists them)", i);
        if (!json_is_number(scale) || !isfinite(json_number_value(scale)))
            return fail(d, "'lora[%zu].scale' must be a number", i);
        d->g->lora[i] = (sipp_lora_scale){(int)json_integer_value(id), (float)json_number_value(scale)};
    }
    d->g->n_lora = json_array_size(l);
    return true;
}

bool gw_decode(gw_api api, json_t *body, gw_gen *g, gw_error_kind *kind, char *err, size_t errlen) {
    memset(g, 0, sizeof *g);
    g->api = api;
    g->max_tokens = -1;
    g->n = 1;
    g->logprobs = -1;
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
    bool ok = check_field_table(&d, root, api) && get_str(&d, root, "model", &g->model) &&
              (api == GW_API_EMBEDDINGS || api == GW_API_NATIVE_EMBED || decode_lora(&d, root));
    switch (api) {
    /* context_key is sipp's extension of the OpenAI routes too, as llama-server's extensions are. */
    case GW_API_CHAT:
        ok = ok && decode_messages(&d, root) && decode_stream(&d, root, false) && decode_sampling(&d, root) &&
             decode_chat(&d, root) && get_str(&d, root, "context_key", &g->context_key);
        break;
    case GW_API_COMPLETION:
        ok = ok && decode_prompt(&d, root) && decode_stream(&d, root, false) && decode_sampling(&d, root) &&
             decode_prompt_constraints(&d, root) && get_str(&d, root, "context_key", &g->context_key);
        break;
    case GW_API_NATIVE_QUERY:
        ok = ok && decode_prompt(&d, root) && decode_stream(&d, root, true) && decode_sampling(&d, root) &&
             decode_prompt_constraints(&d, root) && get_str(&d, root, "context_key", &g->context_key);
        break;
    case GW_API_NATIVE_CHAT:
        ok = ok && decode_messages(&d, root) && decode_stream(&d, root, true) && decode_sampling(&d, root) &&
             decode_chat(&d, root) && get_str(&d, root, "context_key", &g->context_key);
        break;
    case GW_API_EMBEDDINGS:
    case GW_API_NATIVE_EMBED: {
        const char *fmt = NULL;
        g->normalize = true;
        ok = ok && decode_inputs(&d, root) && get_str(&d, root, "encoding_format", &fmt) &&
             (api == GW_API_EMBEDDINGS || get_bool(&d, root, "normalize", &g->normalize));
        if (ok && fmt && strcmp(fmt, "base64") == 0)
            g->base64 = true;
        else if (ok && fmt && strcmp(fmt, "float") != 0)
            ok = fail(&d, "'encoding_format' '%s' is not supported; use \"float\" or \"base64\"", fmt);
        break;
    }
    case GW_API_RERANK: ok = ok && decode_rerank(&d, root); break;
    case GW_API_TOKENIZE: ok = ok && decode_tokenize(&d, root); break;
    case GW_API_DETOKENIZE: ok = ok && decode_detokenize(&d, root); break;
    case GW_API_INFILL:
        /* llama-server's samplers, as /completion's: the engine's defaults (temperature 0.8, top_k 40,
         * top_p 0.95, min_p 0.05), not OpenAI's */
        g->sampling = sipp_request_default_params().sampling;
        ok = ok && decode_infill(&d, root) && decode_stream(&d, root, false) && decode_sampling(&d, root);
        break;
    }
    if (!ok || d.failed) {
        gw_gen_free(g);
        return false;
    }
    return true;
}

bool gw_chat_fold_system(json_t *chat) {
    json_t *msgs = json_object_get(chat, "messages");
    sipp_buf folded = {0};
    for (size_t i = 1; i < json_array_size(msgs);) {
        json_t *m = json_array_get(msgs, i);
        const char *role = json_string_value(json_object_get(m, "role"));
        const char *text = json_string_value(json_object_get(m, "content"));
        if (!role || (strcmp(role, "system") != 0 && strcmp(role, "developer") != 0) || !text) {
            i++;
            continue;
        }
        sipp_buf_appendf(&folded, "%s%s", folded.len ? SYSTEM_FOLD_SEPARATOR : "", text);
        json_array_remove(msgs, i);
        /* The user turns it stood between become one, as templates that refuse it want turns to
         * alternate. */
        json_t *before = json_array_get(msgs, i - 1), *after = json_array_get(msgs, i);
        const char *rb = json_string_value(json_object_get(before, "role"));
        const char *ra = json_string_value(json_object_get(after, "role"));
        const char *tb = json_string_value(json_object_get(before, "content"));
        const char *ta = json_string_value(json_object_get(after, "content"));
        if (rb && ra && tb && ta && strcmp(rb, "user") == 0 && strcmp(ra, "user") == 0) {
            sipp_buf joined = {0};
            sipp_buf_appendf(&joined, "%s%s%s", tb, SYSTEM_FOLD_SEPARATOR, ta);
            json_object_set_new(before, "content", json_string(joined.data ? joined.data : ""));
            sipp_buf_free(&joined);
            json_array_remove(msgs, i);
        }
    }
    if (!folded.len) return false;
    json_t *first = json_array_get(msgs, 0);
    const char *role = json_string_value(json_object_get(first, "role"));
    const char *text = json_string_value(json_object_get(first, "content"));
    if (role && (strcmp(role, "system") == 0 || strcmp(role, "developer") == 0) && text) {
        sipp_buf joined = {0};
        sipp_buf_appendf(&joined, "%s%s%s", text, SYSTEM_FOLD_SEPARATOR, folded.data);
        json_object_set_new(first, "content", json_string(joined.data ? joined.data : ""));
        sipp_buf_free(&joined);
    } else {
        json_array_insert_new(msgs, 0, json_pack("{s:s, s:s}", "role", "system", "content", folded.data));
    }
    sipp_buf_free(&folded);
    return true;
}
