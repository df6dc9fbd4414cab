/*
 * schema_limits.c: bounds on the schemas and grammars of one request.
 *
 * llama.cpp's json_schema_to_grammar and grammar sampler have no bounds of their own that protect a
 * server. Measured at the pin: an object of n optional properties costs the converter about n^3
 * (256: 1 s, 512: 6 s, 2,000: 69 s; 20,000 ran out of stack in a connection thread after taking
 * 6 GB, since it recurses once per property and copies the rest of the list at each level); an
 * enum of 50,000 values makes each token's grammar step scan 50,000 stacks over the vocabulary, for
 * minutes; each distinct "$ref" copies the whole schema. So before any schema reaches the converter
 * this walk counts what makes it expensive and refuses, with the [limits] key to raise, a request
 * that goes past a bound: the bytes of its schemas, their nesting, the properties of one object and
 * of all, the enum values and the "$ref"s (each a local "#/..." pointer that must resolve, so that
 * neither a remote fetch nor llama.cpp's error path, which prints the whole schema per bad
 * reference, is reached). A "$ref" is counted, never expanded: the converter makes one rule per
 * reference, so a cycle costs nothing more than its rule, and the walk stays linear in the input.
 *
 * The walk recurses, but only after checking the depth, so its stack use is bounded by
 * schema_max_depth frames. A GBNF grammar is bounded by its bytes and its alternatives ('|', which
 * cost each token's step as enum values do); llama.cpp's parser bounds its repetitions ({m,n}).
 *
 * The per-token cost, measured on a 128k-token vocabulary: an enum of 1,024 values that share a
 * prefix took about 2.5 s per token (the grammar scans the vocabulary once per live alternative when
 * the sampler's pick is refused), 4,096 about 17 s; hence the default of 256 enum values and 256
 * grammar alternatives.
 */
#include "util/schema_limits.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REF_SHOWN 64 /* characters of a bad $ref quoted in a message */

typedef struct walk {
    const sipp_schema_limits *lim;
    const json_t *root; /* the schema being walked: what its "$ref"s point into */
    const char *field;  /* its name in the request, for messages */
    size_t bytes, properties, refs;
    char *err;
    size_t errlen;
} walk;

static bool refuse(walk *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool refuse(walk *w, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->err, w->errlen, fmt, ap);
    va_end(ap);
    return false;
}

static bool over(walk *w, const char *what, size_t n, size_t limit, const char *key) {
    return refuse(w,
                  "'%s': the request's schemas have %zu %s, over the limit of %zu ([limits] %s); simplify "
                  "the schema or raise the limit in the gateway's config",
                  w->field, n, what, limit, key);
}

/* The node a local JSON pointer ("#/$defs/a", "#/properties/x/items") names in root, or NULL.
 * Read as llama.cpp's converter reads it: "/"-separated keys, array indexes in decimal, no escapes. */
static const json_t *resolve(const json_t *root, const char *ref) {
    if (ref[0] != '#' || ref[1] != '/') return NULL; /* the converter takes no other form */
    const char *p = ref + 1;
    const json_t *at = root;
    while (*p) {
        if (*p != '/') return NULL;
        p++;
        size_t n = strcspn(p, "/");
        if (json_is_object(at)) {
            char *key = strndup(p, n);
            if (!key) return NULL;
            at = json_object_get(at, key);
            free(key);
        } else if (json_is_array(at)) {
            char *end = NULL;
            unsigned long long i = strtoull(p, &end, 10);
            at = n && end == p + n && i < json_array_size(at) ? json_array_get(at, (size_t)i) : NULL;
        } else {
            at = NULL;
        }
        if (!at) return NULL;
        p += n;
    }
    return at;
}

static bool walk_node(walk *w, const json_t *node, size_t depth);

static bool walk_keyword(walk *w, const char *key, const json_t *v, size_t depth) {
    if (strcmp(key, "properties") == 0 && json_is_object(v)) {
        size_t n = json_object_size(v);
        if (n > w->lim->schema_max_properties)
            return refuse(w,
                          "'%s': an object of the schema has %zu properties, over the limit of %zu ([limits] "
                          "schema_max_properties); split it or raise the limit in the gateway's config",
                          w->field, n, w->lim->schema_max_properties);
        w->properties += n;
        if (w->properties > w->lim->schema_max_total_properties)
            return over(w, "properties", w->properties, w->lim->schema_max_total_properties,
                        "schema_max_total_properties");
    } else if (strcmp(key, "enum") == 0 && json_is_array(v)) {
        /* One enum's values are alternatives alive at once; different enums are not. */
        if (json_array_size(v) > w->lim->schema_max_enum)
            return refuse(
                w,
                "'%s': an enum of the schema has %zu values, over the limit of %zu ([limits] "
                "schema_max_enum): each is scanned at every token; shorten it (or use a pattern) or "
                "raise the limit in the gateway's config",
                w->field, json_array_size(v), w->lim->schema_max_enum);
    } else if (strcmp(key, "$ref") == 0) {
        if (++w->refs > w->lim->schema_max_refs)
            return over(w, "$refs", w->refs, w->lim->schema_max_refs, "schema_max_refs");
        const char *ref = json_is_string(v) ? json_string_value(v) : "";
        if (!resolve(w->root, ref))
            return refuse(w,
                          "'%s': '$ref' \"%.*s\" does not name a part of the same schema; only local "
                          "references such as \"#/$defs/name\" are followed (nothing is fetched)",
                          w->field, REF_SHOWN, ref);
        return true;
    }
    return walk_node(w, v, depth + 1);
}

static bool walk_node(walk *w, const json_t *node, size_t depth) {
    if (depth > w->lim->schema_max_depth)
        return refuse(w,
                      "'%s': the schema nests deeper than %zu objects and arrays ([limits] "
                      "schema_max_depth); flatten it or raise the limit in the gateway's config",
                      w->field, w->lim->schema_max_depth);
    if (json_is_object(node)) {
        const char *key;
        json_t *v;
        json_object_foreach((json_t *)node, key, v) {
            if (!walk_keyword(w, key, v, depth)) return false;
        }
    } else if (json_is_array(node)) {
        size_t i;
        json_t *v;
        json_array_foreach((json_t *)node, i, v) {
            if (!walk_node(w, v, depth + 1)) return false;
        }
    }
    return true;
}

static bool check_schema(walk *w, const json_t *schema, const char *field) {
    if (!json_is_object(schema)) return true; /* the request's own checks name the wrong shape */
    w->root = schema;
    w->field = field;
    w->bytes += json_dumpb(schema, NULL, 0, JSON_COMPACT);
    if (w->bytes > w->lim->schema_max_bytes)
        return over(w, "bytes", w->bytes, w->lim->schema_max_bytes, "schema_max_bytes");
    return walk_node(w, schema, 1);
}

/* The alternatives ('|') of a GBNF text, outside its string literals, character classes and
 * comments. Each alternative the grammar may be in is a stack that every token's step scans. */
static size_t gbnf_alternatives(const char *s, size_t n) {
    size_t count = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '"' || c == '[') {
            char close = c == '"' ? '"' : ']';
            for (i++; i < n && s[i] != close; i++)
                if (s[i] == '\\') i++;
        } else if (c == '#') {
            while (i < n && s[i] != '\n')
                i++;
        } else if (c == '|') {
            count++;
        }
    }
    return count;
}

bool sipp_schema_limits_check_body(const json_t *body, const sipp_schema_limits *lim, char *err,
                                   size_t errlen) {
    walk w = {.lim = lim, .err = err, .errlen = errlen};
    if (!json_is_object(body)) return true;
    json_t *tools = json_object_get(body, "tools");
    if (json_is_array(tools)) {
        size_t i;
        json_t *t;
        json_array_foreach(tools, i, t) {
            char field[64];
            snprintf(field, sizeof field, "tools[%zu].function.parameters", i);
            if (!check_schema(&w, json_object_get(json_object_get(t, "function"), "parameters"), field))
                return false;
        }
    }
    json_t *rf = json_object_get(body, "response_format");
    if (!check_schema(&w, json_object_get(json_object_get(rf, "json_schema"), "schema"),
                      "response_format.json_schema.schema"))
        return false;
    if (!check_schema(&w, json_object_get(body, "json_schema"), "json_schema")) return false;
    json_t *g = json_object_get(body, "grammar");
    if (json_is_string(g) && json_string_length(g) > lim->grammar_max_bytes) {
        snprintf(err, errlen,
                 "'grammar' has %zu bytes, over the limit of %zu ([limits] grammar_max_bytes); shorten it or "
                 "raise the limit in the gateway's config",
                 json_string_length(g), lim->grammar_max_bytes);
        return false;
    }
    size_t alts = json_is_string(g) ? gbnf_alternatives(json_string_value(g), json_string_length(g)) : 0;
    if (alts > lim->grammar_max_alternatives) {
        snprintf(
            err, errlen,
            "'grammar' has %zu alternatives ('|'s), over the limit of %zu ([limits] "
            "grammar_max_alternatives): each is scanned at every token; simplify it or raise the limit in "
            "the gateway's config",
            alts, lim->grammar_max_alternatives);
        return false;
    }
    return true;
}
