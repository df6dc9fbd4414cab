/*
 * custom_tools.c: custom (freeform) tools as functions of one string whose grammar is enforced
 * (custom_tools.h says how).
 */
#include "chat/custom_tools.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat_bridge.h"
#include "chat/lark_gbnf.h"
#include "util/util.h"

#define MAX_CUSTOM 64

static bool grow(chat_custom *c) {
    size_t n = c->n + 1;
    char **a = realloc(c->names, n * sizeof *a);
    if (a) c->names = a;
    char **b = a ? realloc(c->gbnf_json, n * sizeof *b) : NULL;
    if (b) c->gbnf_json = b;
    char **d = b ? realloc(c->gbnf_raw, n * sizeof *d) : NULL;
    if (d) c->gbnf_raw = d;
    if (!d) return false;
    c->names[c->n] = c->gbnf_json[c->n] = c->gbnf_raw[c->n] = NULL;
    c->n = n;
    return true;
}

/* The grammar of a format, converted both ways into entry k of c. */
static sipp_status convert(json_t *format, size_t i, chat_custom *c, size_t k, char *err) {
    const char *type = json_string_value(json_object_get(format, "type"));
    if (!format || json_is_null(format) || (type && strcmp(type, "text") == 0)) return SIPP_OK;
    json_t *g = json_object_get(format, "grammar");
    const char *syntax = json_string_value(json_object_get(g, "syntax"));
    const char *def = json_string_value(json_object_get(g, "definition"));
    if (!type || strcmp(type, "grammar") != 0)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                         "'tools[%zu].custom.format.type' must be \"text\" or \"grammar\"", i);
    if (!syntax || (strcmp(syntax, "lark") != 0 && strcmp(syntax, "regex") != 0))
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                         "'tools[%zu].custom.format.grammar.syntax' must be \"lark\" or \"regex\"", i);
    if (!def)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                         "'tools[%zu].custom.format.grammar.definition' must be the grammar's text", i);
    custom_syntax syn = strcmp(syntax, "lark") == 0 ? CUSTOM_SYNTAX_LARK : CUSTOM_SYNTAX_REGEX;
    char why[SIPP_ERROR_SIZE], json_name[48], raw_name[48];
    snprintf(json_name, sizeof json_name, "sipp-custom-%zu", k);
    snprintf(raw_name, sizeof raw_name, "sipp-custom-raw-%zu", k);
    sipp_status st = custom_grammar_to_gbnf(syn, def, json_name, true, &c->gbnf_json[k], why);
    if (st == SIPP_OK) st = custom_grammar_to_gbnf(syn, def, raw_name, false, &c->gbnf_raw[k], why);
    if (st != SIPP_OK)
        return sipp_fail(err, st, "'tools[%zu].custom.format.grammar.definition' (%s) cannot be enforced: %s",
                         i, syntax, why);
    return SIPP_OK;
}

/* The function the template is shown for custom tool t (tools[i]). */
static json_t *as_function(json_t *t, size_t i, const char *name, char *err) {
    json_t *desc = json_object_get(t, "description"), *format = json_object_get(t, "format");
    if (desc && !json_is_null(desc) && !json_is_string(desc)) {
        sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "'tools[%zu].custom.description' must be a string", i);
        return NULL;
    }
    const char *d = json_string_value(desc);
    json_t *g = json_object_get(format, "grammar");
    const char *def = json_string_value(json_object_get(g, "definition"));
    sipp_buf text = {0};
    sipp_buf_appendf(&text, "%s%sA freeform tool: put its whole input, as plain text, in \"input\".",
                     d ? d : "", d ? "\n\n" : "");
    if (def)
        sipp_buf_appendf(&text, " The input follows this %s grammar:\n%s",
                         json_string_value(json_object_get(g, "syntax")), def);
    json_t *fn = json_pack("{s:s, s:s, s:{s:s, s:{s:{s:s}}, s:[s], s:b}}", "name", name, "description",
                           text.data ? text.data : "", "parameters", "type", "object", "properties", "input",
                           "type", "string", "required", "input", "additionalProperties", 0);
    sipp_buf_free(&text);
    return json_pack("{s:s, s:o}", "type", "function", "function", fn);
}

static sipp_status add_custom(json_t *t, size_t i, json_t *out, chat_custom *c, char *err) {
    json_t *body = json_object_get(t, "custom");
    const char *name = json_string_value(json_object_get(body, "name"));
    if (!json_is_object(body) || !name || !*name)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT,
                         "'tools[%zu].custom.name' must be a non-empty string", i);
    if (c->n >= MAX_CUSTOM)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "'tools' has more than %d custom tools", MAX_CUSTOM);
    if (!grow(c) || !(c->names[c->n - 1] = strdup(name)))
        return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    sipp_status st = convert(json_object_get(body, "format"), i, c, c->n - 1, err);
    if (st != SIPP_OK) return st;
    json_t *fn = as_function(body, i, name, err);
    if (!fn) return SIPP_ERR_INVALID_ARGUMENT;
    json_array_append_new(out, fn);
    return SIPP_OK;
}

sipp_status chat_custom_tools(json_t *tools, json_t **out, chat_custom *c, char *err) {
    *out = NULL;
    if (!json_is_array(tools)) {
        *out = json_incref(tools);
        return SIPP_OK;
    }
    json_t *arr = json_array();
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        const char *type = json_string_value(json_object_get(t, "type"));
        if (!type || strcmp(type, "custom") != 0) {
            json_array_append(arr, t);
            continue;
        }
        sipp_status st = add_custom(t, i, arr, c, err);
        if (st != SIPP_OK) {
            json_decref(arr);
            return st;
        }
    }
    *out = arr;
    return SIPP_OK;
}

char *chat_custom_marked(const chat_custom *c, json_t *tools) {
    bool any = false;
    json_t *copy = json_deep_copy(tools);
    size_t i;
    json_t *t;
    json_array_foreach(copy, i, t) {
        json_t *fn = json_object_get(t, "function");
        const char *name = json_string_value(json_object_get(fn, "name"));
        for (size_t k = 0; name && k < c->n; k++) {
            if (!c->gbnf_json[k] || strcmp(c->names[k], name) != 0) continue;
            json_t *input =
                json_object_get(json_object_get(json_object_get(fn, "parameters"), "properties"), "input");
            char mark[48];
            snprintf(mark, sizeof mark, "^" CHAT_CUSTOM_MARK "%zu$", k);
            json_object_set_new(input, "pattern", json_string(mark));
            any = true;
        }
    }
    char *text = any ? json_dumps(copy, JSON_COMPACT) : NULL;
    json_decref(copy);
    return text;
}

void chat_custom_free(chat_custom *c) {
    for (size_t k = 0; k < c->n; k++) {
        free(c->names[k]);
        free(c->gbnf_json[k]);
        free(c->gbnf_raw[k]);
    }
    free(c->names);
    free(c->gbnf_json);
    free(c->gbnf_raw);
    *c = (chat_custom){0};
}
