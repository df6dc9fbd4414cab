/*
 * fuzz_schema.c: libFuzzer harness for the bounds on request schemas (src/util/schema_limits.c) and
 * the conversion they guard: sipp_json_schema_to_grammar, which checks the limits, the keywords
 * llama.cpp can enforce, and then runs llama.cpp's json_schema_to_grammar on a worker thread within
 * schema_convert_ms (src/chat/schema_convert.c).
 *
 * An input is used two ways:
 *   - as JSON text: a request body (its tools, response_format, json_schema, grammar are checked
 *     against tight limits, so that every refusal is reached) and as a schema to convert;
 *   - when it starts with GEN_TAG, as a recipe for a schema: each byte picks the next node (an
 *     object of N properties, some required; an array; an enum of up to thousands of values; a
 *     "$ref" to a definition, to itself or to nothing; a pattern, well or badly formed), so that
 *     deep nesting, huge enums and "$ref" loops are reached from a few bytes.
 * Nothing may crash, leak, or take longer than the conversion budget plus SLACK_MS; a refusal must
 * come with a message. libFuzzer's -rss_limit_mb (2 GB by default) bounds the memory.
 *
 *   make fuzz-bins && build/fuzz/fuzz_schema -max_total_time=30 -max_len=4096 DIR tests/fuzz/corpus/schema
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sipp.h"
#include "util/schema_limits.h"
#include "util/util.h"

#define GEN_TAG 0x01
#define GEN_MAX_DEPTH 80   /* past the default schema_max_depth, to reach its refusal */
#define GEN_MAX_NODES 4000 /* nodes one recipe may make */
#define GEN_ENUM_SCALE 64  /* a byte n makes an enum of n * GEN_ENUM_SCALE values */
#define GEN_PROPS_SCALE 2  /* a byte n makes an object of n * GEN_PROPS_SCALE properties */
#define TIGHT 8            /* the tight limits of the body check */
#define SLACK_MS 3000.0    /* the check, the JSON and a loaded machine, beyond the budget */

typedef struct gen {
    const uint8_t *p, *end;
    int nodes;
} gen;

static int next(gen *g) { return g->p < g->end ? *g->p++ : -1; }

static const char *const PATTERNS[] = {"^[a-z]+$", "^(a|b)*c{2,5}$",  "^((a)$",
                                       "^[$",      "^a{99999}$",      "^(?:x)$",
                                       "abc",      "^\\d{3}-\\d{4}$", "^[^\\]]*$"};

static json_t *gen_node(gen *g, int depth) {
    int op = next(g);
    if (op < 0 || depth > GEN_MAX_DEPTH || ++g->nodes > GEN_MAX_NODES)
        return json_pack("{s:s}", "type", "string");
    int arg = next(g);
    if (arg < 0) arg = 0;
    switch (op % 8) {
    case 0: { /* an object: arg properties, every other one required */
        json_t *o = json_pack("{s:s}", "type", "object"), *props = json_object(), *req = json_array();
        for (int i = 0; i < (arg % 64) * GEN_PROPS_SCALE && g->nodes < GEN_MAX_NODES; i++) {
            char k[16];
            snprintf(k, sizeof k, "p%d", i);
            json_object_set_new(props, k,
                                i % 3 ? json_pack("{s:s}", "type", "integer") : gen_node(g, depth + 1));
            if (i % 2) json_array_append_new(req, json_string(k));
        }
        json_object_set_new(o, "properties", props);
        json_object_set_new(o, "required", req);
        return o;
    }
    case 1:
        return json_pack("{s:s, s:o, s:i}", "type", "array", "items", gen_node(g, depth + 1), "maxItems",
                         arg);
    case 2: { /* an enum: up to 255 * GEN_ENUM_SCALE values */
        json_t *e = json_array();
        for (int i = 0; i < arg * GEN_ENUM_SCALE; i++) {
            char v[16];
            snprintf(v, sizeof v, "v%d", i);
            json_array_append_new(e, json_string(v));
        }
        return json_pack("{s:s, s:o}", "type", "string", "enum", e);
    }
    case 3: /* a reference: to the definitions, to the root, to nothing, or remote */
        return json_pack("{s:s}", "$ref",
                         (const char *[]){"#/$defs/a", "#/$defs/b", "#", "#/$defs/none",
                                          "https://x.invalid/s", "#/properties/p0", "#/$defs/a/properties/p0",
                                          "#/items/0"}[arg % 8]);
    case 4:
        return json_pack("{s:s, s:s}", "type", "string", "pattern",
                         PATTERNS[arg % (sizeof PATTERNS / sizeof *PATTERNS)]);
    case 5:
        return json_pack("{s:[o, o]}", arg % 2 ? "anyOf" : "allOf", gen_node(g, depth + 1),
                         gen_node(g, depth + 1));
    case 6: return json_pack("{s:s, s:i, s:i}", "type", "string", "minLength", arg % 16, "maxLength", arg);
    default: return json_pack("{s:s, s:i, s:i}", "type", "integer", "minimum", -arg, "maximum", arg * 1000);
    }
}

/* A schema made from a recipe: a root with two definitions that may refer to each other. */
static json_t *generate(const uint8_t *data, size_t size) {
    gen g = {data + 1, data + size, 0};
    json_t *root = gen_node(&g, 1);
    if (!json_is_object(root)) return root;
    json_t *defs = json_object();
    json_object_set_new(defs, "a", gen_node(&g, 2));
    json_object_set_new(defs, "b", gen_node(&g, 2));
    json_object_set_new(root, "$defs", defs);
    return root;
}

static void check_body(const json_t *body) {
    sipp_schema_limits tight = {.schema_max_bytes = TIGHT * TIGHT,
                                .schema_max_depth = TIGHT,
                                .schema_max_properties = TIGHT,
                                .schema_max_total_properties = TIGHT,
                                .schema_max_enum = TIGHT,
                                .schema_max_refs = TIGHT,
                                .grammar_max_bytes = TIGHT * TIGHT,
                                .grammar_max_alternatives = TIGHT,
                                .schema_convert_ms = 1};
    sipp_schema_limits dflt = sipp_schema_limits_default();
    char err[SIPP_ERROR_SIZE] = "";
    if (!sipp_schema_limits_check_body(body, &tight, err, sizeof err) && !*err) abort();
    err[0] = '\0';
    if (!sipp_schema_limits_check_body(body, &dflt, err, sizeof err) && !*err) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_t *schema = NULL;
    if (size > 0 && data[0] == GEN_TAG) {
        schema = generate(data, size);
    } else {
        schema = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
        if (!schema) return 0;
    }
    check_body(schema); /* the input as a request body */
    json_t *body = json_pack("{s:O, s:{s:s, s:{s:O}}, s:[{s:s, s:{s:s, s:O}}]}", "json_schema", schema,
                             "response_format", "type", "json_schema", "json_schema", "schema", schema,
                             "tools", "type", "function", "function", "name", "f", "parameters", schema);
    if (body) check_body(body);
    json_decref(body);

    char *text = json_dumps(schema, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(schema);
    if (!text) return 0;
    char err[SIPP_ERROR_SIZE] = "", *grammar = NULL;
    double t0 = sipp_now_ms();
    sipp_status st = sipp_json_schema_to_grammar(text, &grammar, err);
    double took = sipp_now_ms() - t0;
    if (st != SIPP_OK && !*err) abort();
    if (took > sipp_schema_limits_default().schema_convert_ms + SLACK_MS) {
        fprintf(stderr, "fuzz_schema: %.0f ms for a schema of %zu bytes\n", took, strlen(text));
        abort();
    }
    sipp_free(grammar);
    free(text);
    return 0;
}
