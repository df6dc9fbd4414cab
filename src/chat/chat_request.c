/*
 * chat_request.c: a request's chat, checked and rendered into a plan for the engine.
 *
 * A chat arrives as OpenAI-shaped JSON (sipp_request_params.chat_json) or as sipp_message[] (turned
 * into the same JSON). Everything that decides the output is checked here, in C, before llama.cpp's
 * chat library sees it, so that a mistake is a one-line error naming the field ("'tool_choice' names
 * function 'x', which is not in 'tools' (tools: a, b)") rather than a library exception far away.
 * Then chat_apply (chat_bridge.cpp) renders the messages with the Jinja template and returns the
 * plan: the prompt, the grammar (from the tools' schemas, a json_schema or the caller's GBNF), the
 * lazy-grammar triggers, the tokens to render, the parser of the answer.
 *
 * tool_choice. "required" and a named function are enforced by the grammar the library makes from
 * the tools' schemas; a named function is "required" over a tools list holding only that function,
 * so the model can neither answer in prose nor call another tool. "auto" gets the library's lazy
 * grammar: free text until the template's tool-call trigger, then the schema. "none" renders the
 * tools (the template may mention them) and parses no calls.
 *
 * Templates. A model's templates are parsed once and cached on the model (made with it); a template given by
 * the request (a file, a Jinja text, "chatml") is cached too, up to CACHE_MAX of them, since a gateway target
 * sends the same one with every request. A model without a template is rendered with ChatML, as llama-server
 * does, and the request carries a warning saying so.
 */
#include "chat/chat_request.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat_media.h"
#include "chat/custom_tools.h"
#include "chat/schema_convert.h"
#include "model/model.h"
#include "util/chat_delta_json.h"
#include "util/schema_limits.h"
#include "util/util.h"

#define CACHE_MAX 8
#define TEMPLATE_FILE_MAX (1 << 20)
#define THINKING_BUDGET_MAX (1 << 24)
#define MAX_TOOLS 512

/* ---- the model's templates -------------------------------------------------------------------- */

typedef struct cached_tmpl {
    char *source; /* "" for the model's own */
    chat_templates *t;
    bool fallback;
} cached_tmpl;

typedef struct chat_cache {
    pthread_mutex_t mu;
    cached_tmpl entries[CACHE_MAX];
    int n;
} chat_cache;

static void chat_cache_free(void *p) {
    chat_cache *c = p;
    if (!c) return;
    for (int i = 0; i < c->n; i++) {
        free(c->entries[i].source);
        chat_templates_free(c->entries[i].t);
    }
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* The model's template cache (sipp_model.chat), made on first use; NULL when out of memory. */
static chat_cache *chat_cache_of(sipp_model *m) {
    pthread_mutex_lock(&m->chat_mu);
    if (!m->chat && (m->chat = calloc(1, sizeof(chat_cache)))) {
        pthread_mutex_init(&((chat_cache *)m->chat)->mu, NULL);
        m->chat_free = chat_cache_free;
    }
    chat_cache *c = m->chat;
    pthread_mutex_unlock(&m->chat_mu);
    return c;
}

static bool looks_like_jinja(const char *s) { return strstr(s, "{%") || strstr(s, "{{"); }

/* The template text a chat_template value names: "" (the model's), "chatml", a Jinja text, or the
 * contents of a file. *owned is malloc'ed when a file was read. */
static sipp_status template_source(const char *name, const char **src, char **owned, char *err) {
    *owned = NULL;
    *src = name ? name : "";
    if (!**src || strcmp(*src, "chatml") == 0 || looks_like_jinja(*src)) return SIPP_OK;
    FILE *f = fopen(*src, "rb");
    if (!f)
        return sipp_fail(
            err, SIPP_ERR_INVALID_ARGUMENT,
            "chat template '%.200s' is neither a file, a Jinja text nor a known name (chatml); give a "
            "template file (e.g. one of llama.cpp's models/templates/*.jinja)",
            *src);
    sipp_buf b = {0};
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0 && b.len <= TEMPLATE_FILE_MAX)
        sipp_buf_append(&b, chunk, n);
    fclose(f);
    if (b.len > TEMPLATE_FILE_MAX) {
        sipp_buf_free(&b);
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "chat template file '%.200s' is over %d bytes", name,
                         TEMPLATE_FILE_MAX);
    }
    if (!b.data || !*b.data) {
        sipp_buf_free(&b);
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "chat template file '%.200s' is empty", name);
    }
    *src = *owned = b.data;
    return SIPP_OK;
}

/* The parsed templates for a source ("" = the model's), borrowed from the cache; or, with the cache
 * full, made for this request alone (*owned set: the caller frees it). */
static sipp_status templates_for(sipp_model *m, const char *source, chat_templates **out, bool *owned,
                                 bool *fallback, char *err) {
    *owned = false;
    chat_cache *c = chat_cache_of(m);
    if (!c) return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory reading the chat template");
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->entries[i].source, source) == 0) {
            *out = c->entries[i].t;
            *fallback = c->entries[i].fallback;
            pthread_mutex_unlock(&c->mu);
            return SIPP_OK;
        }
    const char *bos = NULL, *eos = NULL;
    sipp_status st = chat_templates_new(m->lm, *source ? source : NULL, bos, eos, out, fallback, err);
    if (st == SIPP_OK) {
        char *copy = c->n < CACHE_MAX ? strdup(source) : NULL;
        if (copy)
            c->entries[c->n++] = (cached_tmpl){copy, *out, *fallback};
        else
            *owned = true;
    }
    pthread_mutex_unlock(&c->mu);
    return st;
}

/* ---- checking the chat's fields --------------------------------------------------------------- */

/* What bounds a request's schemas: the limits, checked before any conversion, and the deadline
 * (sipp_now_ms) that all its conversions together must meet. */
typedef struct schema_budget {
    const sipp_schema_limits *lim;
    double deadline_ms;
} schema_budget;

static schema_budget budget_from(const sipp_schema_limits *lim) {
    return (schema_budget){lim, sipp_now_ms() + lim->schema_convert_ms};
}

/* The limits on the constraints a body carries (tools, response_format, json_schema, grammar). */
static sipp_status check_limits(const json_t *body, const schema_budget *b, char *err) {
    char why[SIPP_ERROR_SIZE];
    if (sipp_schema_limits_check_body(body, b->lim, why, sizeof why)) return SIPP_OK;
    return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "%s", why);
}

typedef struct chat_fields {
    json_t *messages; /* borrowed from root */
    json_t *tools;    /* owned: the tools given to the template (filtered for a named choice) */
    chat_tool_choice choice;
    bool parallel;
    char *json_schema; /* owned JSON text */
    const char *grammar;
    chat_reasoning reasoning;
    bool enable_thinking;
    int thinking_budget;
    const char **kw_keys;
    char **kw_values;
    size_t n_kw;
    chat_custom custom; /* the custom tools' grammars (custom_tools.c) */
} chat_fields;

static void fields_free(chat_fields *f) {
    json_decref(f->tools);
    free(f->json_schema);
    for (size_t i = 0; i < f->n_kw; i++)
        free(f->kw_values[i]);
    free(f->kw_values);
    free(f->kw_keys);
    chat_custom_free(&f->custom);
}

static bool is_present(const json_t *v) { return v && !json_is_null(v); }

static const char *ROLES[] = {"system", "developer", "user", "assistant", "tool"};

/* The tool calls of an assistant message (messages[i]): each names a function, and its arguments
 * are a JSON text; an object is accepted and written as one, as OpenAI sends a text. */
static sipp_status check_tool_calls(json_t *calls, size_t i, char *err) {
    if (!json_is_array(calls))
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "'messages[%zu].tool_calls' must be an array", i);
    size_t k;
    json_t *tc;
    json_array_foreach(calls, k, tc) {
        json_t *fn = json_object_get(tc, "function");
        json_t *args = json_object_get(fn, "arguments");
        if (!json_is_object(fn) || !json_is_string(json_object_get(fn, "name")))
            return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                             "'messages[%zu].tool_calls[%zu].function' must have a \"name\"", i, k);
        if (json_is_object(args)) {
            char *text = json_dumps(args, JSON_COMPACT);
            json_object_set_new(fn, "arguments", json_string(text ? text : "{}"));
            free(text);
        } else if (!json_is_string(args)) {
            return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                             "'messages[%zu].tool_calls[%zu].function.arguments' must be a JSON text", i, k);
        }
    }
    return SIPP_OK;
}

/* messages[i]: an object with a known role (developer becomes system) and well-formed tool calls. */
static sipp_status check_message(json_t *m, size_t i, char *err) {
    json_t *role = json_object_get(m, "role");
    if (!json_is_object(m) || !json_is_string(role))
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "'messages[%zu]' must be an object with a \"role\"",
                         i);
    const char *r = json_string_value(role);
    bool known = false;
    for (size_t k = 0; k < sizeof ROLES / sizeof *ROLES; k++)
        known = known || strcmp(r, ROLES[k]) == 0;
    if (!known)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                         "'messages[%zu].role' is '%.64s'; use system, developer, user, assistant or tool", i,
                         r);
    /* Templates know "system"; OpenAI's newer name for it is "developer". */
    if (strcmp(r, "developer") == 0) json_object_set_new(m, "role", json_string("system"));
    json_t *calls = json_object_get(m, "tool_calls");
    return is_present(calls) ? check_tool_calls(calls, i, err) : SIPP_OK;
}

static sipp_status check_messages(json_t *msgs, char *err) {
    if (!is_present(msgs)) return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "'messages' is missing");
    if (!json_is_array(msgs) || json_array_size(msgs) == 0)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "'messages' must be a non-empty array of messages");
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        sipp_status st = check_message(m, i, err);
        if (st != SIPP_OK) return st;
    }
    return SIPP_OK;
}

/* ---- what llama.cpp's schema converter enforces -------------------------------------------------
 *
 * json_schema_to_grammar enforces most of JSON Schema but passes some keywords over in silence
 * (minimum on a number, multipleOf, uniqueItems, patternProperties, not, if/then, most formats) and
 * turns an unanchored pattern into "any string" with only a line on stderr. A schema with such a
 * keyword would be accepted and not enforced, so each one is refused here by name. */

static const char *const SCHEMA_ANNOTATIONS[] = {"description", "title",    "default",  "examples",
                                                 "$schema",     "$id",      "$comment", "deprecated",
                                                 "readOnly",    "writeOnly"};
static const char *const SCHEMA_ENFORCED[] = {"type",      "properties",  "required", "additionalProperties",
                                              "items",     "prefixItems", "minItems", "maxItems",
                                              "enum",      "const",       "anyOf",    "oneOf",
                                              "allOf",     "$ref",        "$defs",    "definitions",
                                              "minLength", "maxLength"};
static const char *const SCHEMA_INTEGER_BOUNDS[] = {"minimum", "maximum", "exclusiveMinimum",
                                                    "exclusiveMaximum"};
static const char *const SCHEMA_FORMATS[] = {"date",  "time",  "date-time", "uuid", "uuid1",
                                             "uuid2", "uuid3", "uuid4",     "uuid5"};

static bool in_list(const char *s, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(s, list[i]) == 0) return true;
    return false;
}
#define IN(s, list) in_list((s), (list), sizeof(list) / sizeof *(list))

static bool is_type(const json_t *node, const char *type) {
    json_t *t = json_object_get(node, "type");
    return json_is_string(t) && strcmp(json_string_value(t), type) == 0;
}

static sipp_status schema_node(const json_t *node, const char *field, sipp_buf *path, char *err);

static sipp_status schema_children(const json_t *v, const char *key, const char *field, sipp_buf *path,
                                   bool map, char *err) {
    size_t at = path->len;
    sipp_status st = SIPP_OK;
    if (map && json_is_object(v)) {
        const char *k;
        json_t *child;
        json_object_foreach((json_t *)v, k, child) {
            path->len = at;
            sipp_buf_appendf(path, "%s%s.%s", at ? "." : "", key, k);
            if ((st = schema_node(child, field, path, err)) != SIPP_OK) break;
        }
    } else if (json_is_array(v)) {
        size_t i;
        json_t *child;
        json_array_foreach(v, i, child) {
            path->len = at;
            sipp_buf_appendf(path, "%s%s[%zu]", at ? "." : "", key, i);
            if ((st = schema_node(child, field, path, err)) != SIPP_OK) break;
        }
    } else if (json_is_object(v)) {
        sipp_buf_appendf(path, "%s%s", at ? "." : "", key);
        st = schema_node(v, field, path, err);
    }
    path->len = at;
    if (path->data) path->data[at] = '\0';
    return st;
}

static sipp_status schema_node(const json_t *node, const char *field, sipp_buf *path, char *err) {
    if (json_is_boolean(node)) return SIPP_OK;
    const char *where = path->len ? path->data : "the top";
    if (!json_is_object(node))
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "'%s': the schema at %s must be an object", field,
                         where);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)node, key, v) {
        if (IN(key, SCHEMA_ANNOTATIONS)) continue;
        if (IN(key, SCHEMA_INTEGER_BOUNDS)) {
            if (is_type(node, "integer")) continue;
            return sipp_fail(
                err, SIPP_ERR_INVALID_ARGUMENT,
                "'%s': '%s' at %s is enforced by llama.cpp's grammar converter only on integers; make it "
                "\"type\": \"integer\" or remove it",
                field, key, where);
        }
        if (strcmp(key, "pattern") == 0) {
            const char *pat = json_is_string(v) ? json_string_value(v) : "";
            size_t n = strlen(pat);
            if (n >= 2 && pat[0] == '^' && pat[n - 1] == '$') continue;
            return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                             "'%s': 'pattern' at %s must be anchored with ^ and $ to be enforced", field,
                             where);
        }
        if (strcmp(key, "format") == 0) {
            if (json_is_string(v) && IN(json_string_value(v), SCHEMA_FORMATS)) continue;
            return sipp_fail(
                err, SIPP_ERR_INVALID_ARGUMENT,
                "'%s': 'format' '%.64s' at %s cannot be enforced (enforced formats: date, time, date-time, "
                "uuid); use a pattern",
                field, json_is_string(v) ? json_string_value(v) : "?", where);
        }
        if (!IN(key, SCHEMA_ENFORCED))
            return sipp_fail(
                err, SIPP_ERR_INVALID_ARGUMENT,
                "'%s': '%.64s' at %s cannot be enforced by llama.cpp's grammar converter; remove it or give "
                "a GBNF 'grammar' instead",
                field, key, where);
    }
    static const char *const maps[] = {"properties", "$defs", "definitions"};
    static const char *const lists[] = {"items", "prefixItems", "anyOf",
                                        "oneOf", "allOf",       "additionalProperties"};
    for (size_t i = 0; i < sizeof maps / sizeof *maps; i++) {
        json_t *c = json_object_get(node, maps[i]);
        sipp_status st = c ? schema_children(c, maps[i], field, path, true, err) : SIPP_OK;
        if (st != SIPP_OK) return st;
    }
    for (size_t i = 0; i < sizeof lists / sizeof *lists; i++) {
        json_t *c = json_object_get(node, lists[i]);
        sipp_status st = c ? schema_children(c, lists[i], field, path, false, err) : SIPP_OK;
        if (st != SIPP_OK) return st;
    }
    return SIPP_OK;
}

/* Checks that a schema is one llama.cpp's converter can express; the message names the feature.
 * The schema is within b's limits (check_limits ran on the body), so the walk's depth is bounded;
 * the conversion runs within b's deadline. Its grammar goes to *out when out is not NULL. */
static sipp_status check_schema(const json_t *schema, const char *field, const schema_budget *b, char **out,
                                char *err) {
    sipp_buf path = {0};
    sipp_status st = schema_node(schema, field, &path, err);
    sipp_buf_free(&path);
    if (st != SIPP_OK) return st;
    char *text = json_dumps(schema, JSON_COMPACT), *grammar = NULL;
    char why[SIPP_ERROR_SIZE];
    st = text ? chat_schema_convert_until(text, field, b->deadline_ms, b->lim->schema_convert_ms, &grammar,
                                          why)
              : SIPP_ERR_NO_MEMORY;
    free(text);
    if (out)
        *out = grammar;
    else
        free(grammar);
    if (st == SIPP_ERR_NO_MEMORY) return sipp_fail(err, st, "out of memory");
    if (st == SIPP_ERR_TIMEOUT) return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "%s", why);
    if (st != SIPP_OK)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "'%s' cannot be enforced: %s", field, why);
    return SIPP_OK;
}

static sipp_status check_tools(json_t *tools, const schema_budget *b, char *err) {
    if (!json_is_array(tools))
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "'tools' must be an array of tools");
    if (json_array_size(tools) > MAX_TOOLS)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "'tools' has %zu entries; at most %d are accepted",
                         json_array_size(tools), MAX_TOOLS);
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        json_t *type = json_object_get(t, "type"), *fn = json_object_get(t, "function");
        if (!json_is_object(t) || !json_is_string(type) || strcmp(json_string_value(type), "function") != 0)
            return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                             "'tools[%zu]' must be {\"type\": \"function\", \"function\": {...}} or "
                             "{\"type\": \"custom\", \"custom\": {...}}",
                             i);
        json_t *name = json_object_get(fn, "name");
        if (!json_is_object(fn) || !json_is_string(name) || !*json_string_value(name))
            return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                             "'tools[%zu].function.name' must be a non-empty string", i);
        json_t *desc = json_object_get(fn, "description"), *params = json_object_get(fn, "parameters");
        if (is_present(desc) && !json_is_string(desc))
            return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                             "'tools[%zu].function.description' must be a string", i);
        if (is_present(params)) {
            if (!json_is_object(params))
                return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                                 "'tools[%zu].function.parameters' must be a JSON Schema object", i);
            char field[64];
            snprintf(field, sizeof field, "tools[%zu].function.parameters", i);
            sipp_status st = check_schema(params, field, b, NULL, err);
            if (st != SIPP_OK) return st;
        }
        for (size_t k = 0; k < i; k++)
            if (strcmp(json_string_value(
                           json_object_get(json_object_get(json_array_get(tools, k), "function"), "name")),
                       json_string_value(name)) == 0)
                return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                                 "'tools[%zu]': the name '%.64s' is also tools[%zu]'s", i,
                                 json_string_value(name), k);
    }
    return SIPP_OK;
}

/* tool_choice: a string, or {"type":"function","function":{"name"}} which keeps only that tool. */
static sipp_status check_tool_choice(json_t *root, chat_fields *f, char *err) {
    json_t *tc = json_object_get(root, "tool_choice");
    f->choice = CHAT_TOOLS_AUTO;
    if (!is_present(tc)) return SIPP_OK;
    bool have_tools = f->tools && json_array_size(f->tools) > 0;
    if (json_is_string(tc)) {
        const char *s = json_string_value(tc);
        if (strcmp(s, "auto") == 0)
            f->choice = CHAT_TOOLS_AUTO;
        else if (strcmp(s, "none") == 0)
            f->choice = CHAT_TOOLS_NONE;
        else if (strcmp(s, "required") == 0)
            f->choice = CHAT_TOOLS_REQUIRED;
        else
            return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                             "'tool_choice' is '%.64s'; use auto, none, required or {\"type\": \"function\", "
                             "\"function\": {\"name\": ...}}",
                             s);
        if (f->choice == CHAT_TOOLS_REQUIRED && !have_tools)
            return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                             "'tool_choice' is required but 'tools' is empty");
        return SIPP_OK;
    }
    json_t *fn = json_object_get(tc, "function");
    if (!fn) fn = json_object_get(tc, "custom"); /* {"type": "custom", "custom": {"name"}} */
    json_t *name = json_object_get(fn, "name");
    if (!json_is_object(tc) || !json_is_string(name))
        return sipp_fail(
            err, SIPP_ERR_INVALID_ARGUMENT,
            "'tool_choice' must be a string or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    const char *want = json_string_value(name);
    json_t *kept = json_array();
    sipp_buf names = {0};
    size_t i;
    json_t *t;
    json_array_foreach(f->tools, i, t) {
        const char *n = json_string_value(json_object_get(json_object_get(t, "function"), "name"));
        if (strcmp(n, want) == 0) json_array_append(kept, t);
        sipp_buf_appendf(&names, "%s%s", names.len ? ", " : "", n);
    }
    if (json_array_size(kept) == 0) {
        sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                  "'tool_choice' names function '%.64s', which is not in 'tools' (tools: %.200s)", want,
                  names.data ? names.data : "none");
        json_decref(kept);
        sipp_buf_free(&names);
        return SIPP_ERR_INVALID_ARGUMENT;
    }
    sipp_buf_free(&names);
    json_decref(f->tools);
    f->tools = kept;
    f->choice = CHAT_TOOLS_REQUIRED;
    return SIPP_OK;
}

/* response_format and llama.cpp's json_schema / grammar: at most one constraint on the answer. */
static sipp_status check_format(json_t *root, chat_fields *f, const schema_budget *b, char *err) {
    json_t *rf = json_object_get(root, "response_format"), *schema = NULL;
    json_t *js = json_object_get(root, "json_schema"), *gr = json_object_get(root, "grammar");
    const char *from = NULL;
    if (is_present(rf)) {
        json_t *type = json_object_get(rf, "type");
        if (!json_is_object(rf) || !json_is_string(type))
            return sipp_fail(
                err, SIPP_ERR_INVALID_ARGUMENT,
                "'response_format' must be {\"type\": \"text\" | \"json_object\" | \"json_schema\", ...}");
        const char *t = json_string_value(type);
        if (strcmp(t, "json_object") == 0) {
            schema = json_pack("{s:s}", "type", "object");
            from = "response_format";
        } else if (strcmp(t, "json_schema") == 0) {
            json_t *inner = json_object_get(rf, "json_schema");
            json_t *s = json_object_get(inner, "schema");
            if (!json_is_object(inner) || !json_is_object(s))
                return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                                 "'response_format.json_schema.schema' must be a JSON Schema object");
            schema = json_incref(s);
            from = "response_format.json_schema.schema";
        } else if (strcmp(t, "text") != 0) {
            return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                             "'response_format.type' is '%.64s'; use text, json_object or json_schema", t);
        }
    }
    if (is_present(js)) {
        if (schema) {
            json_decref(schema);
            return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                             "give either 'response_format' or 'json_schema', not both");
        }
        if (!json_is_object(js))
            return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "'json_schema' must be a JSON Schema object");
        schema = json_incref(js);
        from = "json_schema";
    }
    if (is_present(gr)) {
        if (!json_is_string(gr)) {
            json_decref(schema);
            return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "'grammar' must be a GBNF text");
        }
        if (schema) {
            json_decref(schema);
            return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                             "give either 'grammar' or a JSON schema, not both");
        }
        f->grammar = json_string_value(gr);
    }
    bool tools_active = f->tools && json_array_size(f->tools) > 0 && f->choice != CHAT_TOOLS_NONE;
    if (tools_active && (schema || f->grammar)) {
        json_decref(schema);
        return sipp_fail(
            err, SIPP_ERR_INVALID_ARGUMENT,
            "'%s' cannot be combined with 'tools' (the tools' schemas constrain the answer); set "
            "tool_choice to none or leave it out",
            f->grammar ? "grammar" : from);
    }
    if (!schema) return SIPP_OK;
    sipp_status st = check_schema(schema, from, b, NULL, err);
    if (st == SIPP_OK && !(f->json_schema = json_dumps(schema, JSON_COMPACT)))
        st = sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    json_decref(schema);
    return st;
}

static sipp_status check_reasoning(json_t *root, chat_fields *f, char *err) {
    json_t *rf = json_object_get(root, "reasoning_format");
    f->reasoning = CHAT_REASONING_AUTO;
    f->enable_thinking = true;
    f->thinking_budget = -1;
    if (is_present(rf)) {
        const char *s = json_is_string(rf) ? json_string_value(rf) : "";
        if (strcmp(s, "auto") == 0)
            f->reasoning = CHAT_REASONING_AUTO;
        else if (strcmp(s, "none") == 0)
            f->reasoning = CHAT_REASONING_NONE;
        else if (strcmp(s, "deepseek") == 0)
            f->reasoning = CHAT_REASONING_DEEPSEEK;
        else
            return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                             "'reasoning_format' must be auto, none or deepseek");
    }
    json_t *b = json_object_get(root, "thinking_budget_tokens");
    if (is_present(b)) {
        if (!json_is_integer(b) || json_integer_value(b) < -1 || json_integer_value(b) > THINKING_BUDGET_MAX)
            return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                             "'thinking_budget_tokens' must be an integer in [-1, %d]", THINKING_BUDGET_MAX);
        f->thinking_budget = (int)json_integer_value(b);
    }
    json_t *kw = json_object_get(root, "chat_template_kwargs");
    if (!is_present(kw)) return SIPP_OK;
    if (!json_is_object(kw))
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "'chat_template_kwargs' must be an object");
    size_t n = json_object_size(kw);
    f->kw_keys = calloc(n ? n : 1, sizeof *f->kw_keys);
    f->kw_values = calloc(n ? n : 1, sizeof *f->kw_values);
    if (!f->kw_keys || !f->kw_values) return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    const char *key;
    json_t *v;
    json_object_foreach(kw, key, v) {
        if (strcmp(key, "enable_thinking") == 0) {
            if (!json_is_boolean(v))
                return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                                 "'chat_template_kwargs.enable_thinking' must be true or false");
            f->enable_thinking = json_is_true(v);
        }
        char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        if (!text) return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
        f->kw_keys[f->n_kw] = key;
        f->kw_values[f->n_kw++] = text;
    }
    return SIPP_OK;
}

static sipp_status check_fields(json_t *root, chat_fields *f, const schema_budget *b, char *err) {
    sipp_status st = check_limits(root, b, err);
    if (st == SIPP_OK) st = check_messages(json_object_get(root, "messages"), err);
    if (st != SIPP_OK) return st;
    f->messages = json_object_get(root, "messages");
    json_t *tools = json_object_get(root, "tools");
    if (is_present(tools)) {
        if ((st = chat_custom_tools(tools, &f->tools, &f->custom, err)) != SIPP_OK) return st;
        if ((st = check_tools(f->tools, b, err)) != SIPP_OK) return st;
    }
    if ((st = check_tool_choice(root, f, err)) != SIPP_OK) return st;
    json_t *par = json_object_get(root, "parallel_tool_calls");
    if (is_present(par) && !json_is_boolean(par))
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "'parallel_tool_calls' must be true or false");
    f->parallel = json_is_true(par);
    if ((st = check_format(root, f, b, err)) != SIPP_OK) return st;
    return check_reasoning(root, f, err);
}

/* sipp_message[] as the OpenAI JSON the library takes. */
static json_t *messages_json(const sipp_message *msgs, size_t n, char *err) {
    json_t *root = json_object(), *arr = json_array();
    json_object_set_new(root, "messages", arr);
    for (size_t i = 0; i < n; i++) {
        if (!msgs[i].role || !msgs[i].content) {
            json_decref(root);
            sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "message %zu has no %s", i,
                      msgs[i].role ? "content" : "role");
            return NULL;
        }
        json_array_append_new(arr, json_pack("{s:s, s:s}", "role", msgs[i].role, "content", msgs[i].content));
    }
    return root;
}

/* Renders checked fields with templates t. */
static sipp_status apply_fields(const chat_templates *t, const struct llama_vocab *vocab,
                                const chat_fields *f, chat_plan **plan, char *err) {
    char *msgs = json_dumps(f->messages, JSON_COMPACT);
    char *tools = f->tools && json_array_size(f->tools) ? json_dumps(f->tools, JSON_COMPACT) : NULL;
    char *marked = tools ? chat_custom_marked(&f->custom, f->tools) : NULL;
    sipp_status st = msgs ? SIPP_OK : sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    if (st == SIPP_OK) {
        chat_inputs in = {.messages_json = msgs,
                          .tools_json = tools,
                          .tool_choice = f->choice,
                          .parallel_tool_calls = f->parallel,
                          .json_schema = f->json_schema,
                          .grammar = f->grammar,
                          .reasoning = f->reasoning,
                          .enable_thinking = f->enable_thinking,
                          .add_generation_prompt = true,
                          .kwarg_keys = f->kw_keys,
                          .kwarg_values = (const char *const *)f->kw_values,
                          .n_kwargs = f->n_kw,
                          .marked_tools_json = marked,
                          .custom_gbnf_json = (const char *const *)f->custom.gbnf_json,
                          .custom_gbnf_raw = (const char *const *)f->custom.gbnf_raw,
                          .n_custom = f->custom.n};
        st = chat_apply(t, vocab, &in, plan, err);
    }
    free(msgs);
    free(tools);
    free(marked);
    return st;
}

/* ---- planning a request ----------------------------------------------------------------------- */

/* A prompt's json_schema (a JSON text) or GBNF grammar as the grammar to enforce, within b. */
static sipp_status grammar_of_prompt(const char *schema_json, const char *gbnf, const schema_budget *b,
                                     char **grammar, char *err) {
    *grammar = NULL;
    json_t *body = json_object();
    if (!body) return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    json_t *schema = NULL;
    sipp_status st = SIPP_OK;
    if (schema_json) {
        json_error_t je;
        schema = json_loads(schema_json, JSON_DECODE_ANY, &je);
        if (!schema)
            st = sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "'json_schema' is not valid JSON: %s", je.text);
        else
            json_object_set(body, "json_schema", schema);
    }
    if (gbnf) json_object_set_new(body, "grammar", json_string(gbnf));
    if (st == SIPP_OK) st = check_limits(body, b, err);
    if (st == SIPP_OK && schema) {
        st = check_schema(schema, "json_schema", b, grammar, err);
    } else if (st == SIPP_OK && gbnf && !(*grammar = strdup(gbnf))) {
        st = sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    }
    json_decref(schema);
    json_decref(body);
    return st;
}

static sipp_status prepare_chat(sipp_model *m, const sipp_request_params *p, const schema_budget *b,
                                json_t *root, chat_request *out, char *err) {
    chat_fields f = {0};
    const char *src = NULL;
    char *file_src = NULL;
    chat_templates *t = NULL;
    bool owned = false, fallback = false;
    sipp_status st = check_fields(root, &f, b, err);
    if (st == SIPP_OK) st = template_source(p->chat_template, &src, &file_src, err);
    if (st == SIPP_OK) st = templates_for(m, src, &t, &owned, &fallback, err);
    if (st == SIPP_OK) st = apply_fields(t, m->vocab, &f, &out->plan, err);
    if (st == SIPP_OK) {
        chat_plan *pl = out->plan;
        out->grammar_lazy = pl->grammar_lazy;
        out->grammar_prefill = pl->grammar_prefill;
        if (pl->grammar && !(out->grammar = strdup(pl->grammar)))
            st = sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
        out->thinking_budget = f.thinking_budget;
        /* A template without tool-call syntax (ChatML, say) renders no tools and parses no calls:
         * the tools would be dropped in silence. */
        bool tools_active = f.tools && json_array_size(f.tools) > 0 && f.choice != CHAT_TOOLS_NONE;
        if (st == SIPP_OK && tools_active && !pl->grammar)
            st = sipp_fail(
                err, SIPP_ERR_INVALID_ARGUMENT,
                "'tools': this chat template (format %s) has no tool-call syntax, so tools can be neither "
                "shown to the model nor parsed from its answer; use a template with tool support "
                "(chat_template, e.g. one of llama.cpp's models/templates/*.jinja)",
                pl->format);
        if (f.thinking_budget >= 0 && (!*pl->thinking_start || pl->n_thinking_end == 0))
            st = sipp_fail(
                err, SIPP_ERR_INVALID_ARGUMENT,
                "'thinking_budget_tokens' needs a reasoning model; this template's format (%s) has no "
                "thinking tags",
                pl->format);
        if (fallback)
            snprintf(out->warning, sizeof out->warning,
                     "model '%.300s' has no chat template (tokenizer.chat_template); the chat was rendered "
                     "with ChatML",
                     m->path);
    }
    free(file_src);
    if (owned) chat_templates_free(t);
    fields_free(&f);
    return st;
}

sipp_status chat_request_prepare(sipp_model *m, const sipp_request_params *p,
                                 const sipp_schema_limits *limits, chat_request *out, char *err) {
    memset(out, 0, sizeof *out);
    schema_budget b = budget_from(limits);
    out->thinking_budget = -1;
    sipp_status st = SIPP_OK;
    if (p->chat_json || p->messages) {
        if (p->grammar || p->json_schema)
            return sipp_fail(
                err, SIPP_ERR_INVALID_ARGUMENT,
                "a chat takes its grammar or json_schema inside chat_json, not as request parameters");
        json_t *root;
        if (p->chat_json) {
            json_error_t je;
            root = json_loads(p->chat_json, JSON_REJECT_DUPLICATES, &je);
            if (!root)
                return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "chat_json is not valid JSON: %s", je.text);
            if (!json_is_object(root)) {
                json_decref(root);
                return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                                 "chat_json must be a JSON object with \"messages\"");
            }
        } else if (!(root = messages_json(p->messages, p->n_messages, err))) {
            return SIPP_ERR_INVALID_ARGUMENT;
        }
        json_t *msgs = json_object_get(root, "messages");
        if (json_is_array(msgs)) st = chat_media_extract(msgs, limits, m, &out->media, &out->n_media, err);
        if (st == SIPP_OK) st = prepare_chat(m, p, &b, root, out, err);
        json_decref(root);
    } else if (p->json_schema || p->grammar) {
        if (p->grammar && p->json_schema)
            return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "give either grammar or json_schema, not both");
        st = grammar_of_prompt(p->json_schema, p->grammar, &b, &out->grammar, err);
    }
    if (st != SIPP_OK) chat_request_clear(out);
    return st;
}

void chat_request_clear(chat_request *c) {
    chat_plan_free(c->plan);
    sipp_media_bytes_free(c->media, c->n_media);
    free(c->grammar);
    memset(c, 0, sizeof *c);
    c->thinking_budget = -1;
}

/* ---- the public parser ------------------------------------------------------------------------ */

/* The answer's message is made as JSON only when it is asked for (the bindings'
 * sipp_chat_parser_message), once per feed at most: the gateway and the CLI read it typed. */
struct sipp_chat_parser {
    chat_parser *ps;
    char *message;      /* the JSON of the message, when made */
    bool message_stale; /* a feed came after it was made */
    size_t n_tool_calls;
    char error[SIPP_ERROR_SIZE];
};

static char *message_json(const chat_message *m) {
    json_t *o = json_pack("{s:s, s:s}", "role", "assistant", "content", m->content ? m->content : "");
    if (m->reasoning && *m->reasoning) json_object_set_new(o, "reasoning_content", json_string(m->reasoning));
    if (m->n_tool_calls) {
        json_t *calls = json_array();
        for (size_t i = 0; i < m->n_tool_calls; i++)
            json_array_append_new(calls,
                                  json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", m->tool_calls[i].id, "type",
                                            "function", "function", "name", m->tool_calls[i].name,
                                            "arguments", m->tool_calls[i].arguments));
        json_object_set_new(o, "tool_calls", calls);
    }
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

sipp_status sipp_chat_parser_new_from_plan(const chat_plan *plan, sipp_chat_parser **out, char *errbuf) {
    *out = NULL;
    if (!plan)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                         "the request is not a chat: there is no answer to parse");
    sipp_chat_parser *p = calloc(1, sizeof *p);
    if (!p) return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory");
    sipp_status st = chat_parser_new(plan, &p->ps, errbuf);
    if (st != SIPP_OK) {
        free(p);
        return st;
    }
    p->message_stale = true;
    *out = p;
    return SIPP_OK;
}

void sipp_chat_parser_free(sipp_chat_parser *p) {
    if (!p) return;
    chat_parser_free(p->ps);
    free(p->message);
    free(p);
}

sipp_status sipp_chat_parser_feed_deltas(sipp_chat_parser *p, const char *text, size_t len, bool is_final,
                                         sipp_chat_delta_cb cb, void *user) {
    chat_delta *d = NULL;
    size_t n = 0;
    sipp_status st = chat_parser_feed(p->ps, text, len, is_final, &d, &n, p->error);
    if (st != SIPP_OK) return st;
    p->message_stale = true;
    p->n_tool_calls = chat_parser_message(p->ps)->n_tool_calls;
    for (size_t i = 0; cb && i < n; i++) {
        sipp_chat_delta typed = {.content = d[i].content,
                                 .reasoning = d[i].reasoning,
                                 .tool_index = d[i].tool_index,
                                 .tool_id = d[i].tool_id,
                                 .tool_name = d[i].tool_name,
                                 .tool_arguments = d[i].tool_arguments};
        cb(&typed, user);
    }
    chat_deltas_free(d, n);
    return SIPP_OK;
}

/* Collects typed deltas as the JSON array sipp_chat_parser_feed hands out. */
static void append_delta_json(const sipp_chat_delta *d, void *arr) {
    json_array_append_new(arr, sipp_openai_delta_json(d));
}

sipp_status sipp_chat_parser_feed(sipp_chat_parser *p, const char *text, size_t len, bool is_final,
                                  char **deltas_json) {
    *deltas_json = NULL;
    json_t *arr = json_array();
    sipp_status st = sipp_chat_parser_feed_deltas(p, text, len, is_final, append_delta_json, arr);
    if (st == SIPP_OK && json_array_size(arr)) *deltas_json = json_dumps(arr, JSON_COMPACT);
    json_decref(arr);
    return st;
}

const char *sipp_chat_parser_message(const sipp_chat_parser *cp) {
    sipp_chat_parser *p = (sipp_chat_parser *)cp; /* the JSON is a cache of the parsed message */
    if (p->message_stale) {
        char *msg = message_json(chat_parser_message(p->ps));
        if (msg) {
            free(p->message);
            p->message = msg;
            p->message_stale = false;
        }
    }
    return p->message ? p->message : "{}";
}

const char *sipp_chat_parser_content(const sipp_chat_parser *p) {
    const chat_message *m = chat_parser_message(p->ps);
    return m->content ? m->content : "";
}

const char *sipp_chat_parser_reasoning(const sipp_chat_parser *p) {
    const chat_message *m = chat_parser_message(p->ps);
    return m->reasoning && *m->reasoning ? m->reasoning : NULL;
}

bool sipp_chat_parser_tool_call(const sipp_chat_parser *p, size_t i, const char **id, const char **name,
                                const char **arguments) {
    const chat_message *m = chat_parser_message(p->ps);
    if (i >= m->n_tool_calls) return false;
    *id = m->tool_calls[i].id;
    *name = m->tool_calls[i].name;
    *arguments = m->tool_calls[i].arguments;
    return true;
}
size_t sipp_chat_parser_n_tool_calls(const sipp_chat_parser *p) { return p->n_tool_calls; }
const char *sipp_chat_parser_error(const sipp_chat_parser *p) { return p->error; }

sipp_status sipp_json_schema_to_grammar(const char *schema_json, char **grammar, char *errbuf) {
    if (grammar) *grammar = NULL;
    if (!schema_json || !grammar) return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "no schema given");
    sipp_schema_limits lim = sipp_schema_limits_default();
    schema_budget b = budget_from(&lim);
    return grammar_of_prompt(schema_json, NULL, &b, grammar, errbuf);
}

sipp_status sipp_chat_render_json(const char *tmpl, const char *chat_json, char **prompt, char *errbuf) {
    *prompt = NULL;
    const char *src = NULL;
    char *file_src = NULL;
    if (!tmpl || !*tmpl) return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "no template given");
    sipp_status st = template_source(tmpl, &src, &file_src, errbuf);
    if (st != SIPP_OK) return st;
    json_error_t je;
    json_t *root = chat_json ? json_loads(chat_json, JSON_REJECT_DUPLICATES, &je) : NULL;
    chat_templates *t = NULL;
    chat_fields f = {0};
    sipp_schema_limits lim = sipp_schema_limits_default();
    schema_budget b = budget_from(&lim);
    if (!json_is_object(root))
        st = sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "chat_json must be a JSON object");
    if (st == SIPP_OK) st = check_fields(root, &f, &b, errbuf);
    if (st == SIPP_OK) st = chat_templates_new(NULL, src, "<s>", "</s>", &t, NULL, errbuf);
    if (st == SIPP_OK) {
        chat_plan *plan = NULL;
        st = apply_fields(t, NULL, &f, &plan, errbuf);
        if (st == SIPP_OK && !(*prompt = strdup(plan->prompt)))
            st = sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory");
        chat_plan_free(plan);
    }
    fields_free(&f);
    chat_templates_free(t);
    json_decref(root);
    free(file_src);
    return st;
}
