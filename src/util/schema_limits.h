/*
 * schema_limits.h: bounds on the JSON schemas and GBNF grammars of one request, checked before
 * llama.cpp's converter or grammar parser sees them (schema_limits.c).
 */
#ifndef SIPP_UTIL_SCHEMA_LIMITS_H
#define SIPP_UTIL_SCHEMA_LIMITS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Each field is named after the gateway's [limits] key that sets it (docs/gateway.md). The counts
 * are over the whole request: every tool's parameters, response_format, json_schema and grammar. */
typedef struct sipp_schema_limits {
    size_t schema_max_bytes;            /* compact JSON text of the request's schemas together */
    size_t schema_max_depth;            /* nesting of objects and arrays within one schema */
    size_t schema_max_properties;       /* "properties" of one object */
    size_t schema_max_total_properties; /* "properties" of every object together */
    size_t schema_max_enum;             /* "enum" values together */
    size_t schema_max_refs;             /* "$ref"s together; each must be a local "#/..." that resolves */
    size_t grammar_max_bytes;           /* a GBNF 'grammar' text */
} sipp_schema_limits;

/* The defaults: far above what real clients send (an agent's ~20 tools with nested schemas are
 * about 60 KB and 200 properties), far below what makes llama.cpp's converter or grammar stall. */
sipp_schema_limits sipp_schema_limits_default(void);

/* Checks the constraints a request body carries (an OpenAI chat or completion body: "tools",
 * "response_format", "json_schema", "grammar") against lim. Pure C, no recursion deeper than
 * schema_max_depth + 1. False with a message in err (errlen bytes) that names the field, the limit
 * and its [limits] key. Fields of the wrong shape are left to the request's own checks. */
bool sipp_schema_limits_check_body(const json_t *body, const sipp_schema_limits *lim, char *err,
                                   size_t errlen);

#endif
