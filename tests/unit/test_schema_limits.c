/*
 * test_schema_limits.c: the bounds on a request's schemas and grammars (src/util/schema_limits.c)
 * and the bounded conversion behind them (src/chat/schema_convert.c, via sipp_json_schema_to_grammar).
 *
 * Each bound refuses one past it and takes one at it, with a message naming the field, the count,
 * the limit and its [limits] key; counts add up over every schema of a request (tools,
 * response_format, json_schema); "$ref"s must be local pointers that resolve; the walk's depth is
 * bounded before it recurses; a conversion past its budget is refused in time.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <string.h>

#include "sipp.h"
#include "util/schema_limits.h"
#include "util/util.h"

#define ERR_CAP 512
#define SMALL 4
#define BUDGET_SLACK_MS 1500.0
#define SCHEMA_BYTES 200 /* two schemas of DESC_BYTES of description are over it, one is not */
#define DESC_BYTES 100

static sipp_schema_limits small(void) {
    sipp_schema_limits l = sipp_schema_limits_default();
    l.schema_max_depth = SMALL * 2;
    l.schema_max_properties = SMALL;
    l.schema_max_total_properties = SMALL * 2;
    l.schema_max_enum = SMALL;
    l.schema_max_refs = SMALL;
    l.grammar_max_bytes = SMALL * 16;
    l.grammar_max_alternatives = SMALL;
    return l;
}

/* Checks a body given as JSON text; returns the message ("" when it passed). */
static const char *check(const char *body_json, const sipp_schema_limits *l) {
    static char err[ERR_CAP];
    err[0] = '\0';
    json_error_t je;
    json_t *body = json_loads(body_json, 0, &je);
    cr_assert_not_null(body, "bad test JSON: %s: %s", je.text, body_json);
    bool ok = sipp_schema_limits_check_body(body, l, err, sizeof err);
    json_decref(body);
    cr_assert(ok == !*err, "a refusal without a message, or a message without a refusal: %s", err);
    return err;
}

static void refused(const char *body_json, const char *key, const char *field) {
    sipp_schema_limits l = small();
    const char *err = check(body_json, &l);
    cr_assert(strstr(err, key), "expected a refusal naming %s for %s, got: '%s'", key, body_json, err);
    cr_assert(strstr(err, field), "the message does not name %s: %s", field, err);
}

static void passes(const char *body_json) {
    sipp_schema_limits l = small();
    const char *err = check(body_json, &l);
    cr_assert_str_empty(err, "%s was refused: %s", body_json, err);
}

Test(schema_limits, properties_per_object) {
    passes("{\"json_schema\":{\"properties\":{\"a\":{},\"b\":{},\"c\":{},\"d\":{}}}}");
    refused("{\"json_schema\":{\"properties\":{\"a\":{},\"b\":{},\"c\":{},\"d\":{},\"e\":{}}}}",
            "[limits] schema_max_properties", "'json_schema'");
}

Test(schema_limits, properties_add_up_over_the_tools) {
    const char *tool = "{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"properties\":"
                       "{\"a\":{},\"b\":{},\"c\":{}}}}}";
    char body[1024];
    snprintf(body, sizeof body, "{\"tools\":[%s,%s]}", tool, tool);
    passes(body);
    snprintf(body, sizeof body, "{\"tools\":[%s,%s,%s]}", tool, tool, tool);
    refused(body, "[limits] schema_max_total_properties", "'tools[2].function.parameters'");
}

Test(schema_limits, enum_values_per_enum) {
    passes("{\"json_schema\":{\"enum\":[1,2,3,4]}}");
    passes("{\"json_schema\":{\"properties\":{\"a\":{\"enum\":[1,2,3]},\"b\":{\"enum\":[1,2,3]}}}}");
    refused("{\"json_schema\":{\"properties\":{\"a\":{\"enum\":[1,2,3,4,5]}}}}", "[limits] schema_max_enum",
            "an enum of the schema has 5 values");
}

Test(schema_limits, depth_is_bounded_before_recursing) {
    passes("{\"json_schema\":{\"items\":{\"items\":{\"items\":{}}}}}");
    sipp_buf deep = {0};
    sipp_buf_appendf(&deep, "{\"json_schema\":");
    for (int i = 0; i < 1000; i++)
        sipp_buf_appendf(&deep, "{\"items\":");
    sipp_buf_appendf(&deep, "{}");
    for (int i = 0; i < 1001; i++)
        sipp_buf_appendf(&deep, "}");
    refused(deep.data, "[limits] schema_max_depth", "'json_schema'");
    sipp_buf_free(&deep);
}

Test(schema_limits, bytes_add_up) {
    sipp_schema_limits l = small();
    l.schema_max_bytes = SCHEMA_BYTES;
    char body[1024], desc[DESC_BYTES + 1];
    memset(desc, 'x', DESC_BYTES);
    desc[DESC_BYTES] = '\0';
    snprintf(body, sizeof body, "{\"json_schema\":{\"description\":\"%s\"}}", desc);
    cr_assert_str_empty(check(body, &l));
    snprintf(body, sizeof body,
             "{\"json_schema\":{\"description\":\"%s\"},\"response_format\":{\"type\":\"json_schema\","
             "\"json_schema\":{\"schema\":{\"description\":\"%s\"}}}}",
             desc, desc);
    const char *err = check(body, &l);
    cr_assert(strstr(err, "'json_schema': the request's schemas have") &&
                  strstr(err, "[limits] schema_max_bytes"),
              "%s", err);
}

Test(schema_limits, refs_are_local_resolve_and_count) {
    passes("{\"json_schema\":{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/b\"},\"b\":{\"$ref\":\"#/$defs/a\"}},"
           "\"$ref\":\"#/$defs/a\"}}");
    passes("{\"json_schema\":{\"prefixItems\":[{},{\"type\":\"string\"}],\"items\":{\"$ref\":\"#/prefixItems/"
           "1\"}}}");
    const char *bad[] = {"#",         "#/$defs/x",       "https://example.com/s.json",
                         "s.json#/a", "#/prefixItems/7", "#/prefixItems/1x"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char body[256];
        snprintf(body, sizeof body, "{\"json_schema\":{\"prefixItems\":[{},{}],\"$ref\":\"%s\"}}", bad[i]);
        refused(body, "only local references", bad[i]);
    }
    refused(
        "{\"json_schema\":{\"$defs\":{\"s\":{}},\"items\":[{\"$ref\":\"#/$defs/s\"},{\"$ref\":\"#/$defs/s\"},"
        "{\"$ref\":\"#/$defs/s\"},{\"$ref\":\"#/$defs/s\"},{\"$ref\":\"#/$defs/s\"}]}}",
        "[limits] schema_max_refs", "'json_schema'");
}

Test(schema_limits, grammar_bytes_and_alternatives) {
    passes("{\"grammar\":\"root ::= \\\"a\\\"\"}");
    refused("{\"grammar\":\"root ::= \\\"a\\\" "
            "\\\"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\\\"\"}",
            "[limits] grammar_max_bytes", "'grammar'");
    /* '|' inside literals, classes and comments are not alternatives */
    passes("{\"grammar\":\"root ::= \\\"|||\\\" [|] | x # |||\\nx ::= \\\"\\\\\\\"|\\\"\"}");
    refused("{\"grammar\":\"root ::= a | b | c | d | e | f\"}", "[limits] grammar_max_alternatives",
            "5 alternatives");
}

Test(schema_limits, wrong_shapes_are_left_to_the_request_checks) {
    passes("{\"tools\":5,\"json_schema\":[1],\"response_format\":\"x\",\"grammar\":3}");
    passes("{\"tools\":[7,{\"function\":3}]}");
}

Test(schema_limits, conversion_of_what_passes_and_refusal_of_what_does_not) {
    char err[SIPP_ERROR_SIZE] = "", *grammar = NULL;
    cr_assert_eq(sipp_json_schema_to_grammar(
                     "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}}}", &grammar, err),
                 SIPP_OK, "%s", err);
    cr_assert(grammar && strstr(grammar, "root"));
    sipp_free(grammar);
    sipp_buf big = {0};
    sipp_buf_appendf(&big, "{\"type\":\"object\",\"properties\":{");
    for (int i = 0; i < 2000; i++)
        sipp_buf_appendf(&big, "%s\"p%d\":{\"type\":\"string\"}", i ? "," : "", i);
    sipp_buf_appendf(&big, "}}");
    double t0 = sipp_now_ms();
    cr_assert_eq(sipp_json_schema_to_grammar(big.data, &grammar, err), SIPP_ERR_INVALID_ARGUMENT);
    cr_assert_lt(sipp_now_ms() - t0, BUDGET_SLACK_MS, "the refusal was not prompt");
    cr_assert(strstr(err, "[limits] schema_max_properties"), "%s", err);
    cr_assert_null(grammar);
    sipp_buf_free(&big);
}
