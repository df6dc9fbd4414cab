/*
 * schema_limits.h: bounds on the JSON schemas and GBNF grammars of one request, checked before
 * llama.cpp's converter or grammar parser sees them (schema_limits.c). The limits themselves,
 * sipp_schema_limits and their defaults, are public (sipp.h): the gateway sets them from [limits].
 */
#ifndef SIPP_UTIL_SCHEMA_LIMITS_H
#define SIPP_UTIL_SCHEMA_LIMITS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "sipp.h"

/* Checks the constraints a request body carries (an OpenAI chat or completion body: "tools",
 * "response_format", "json_schema", "grammar") against lim. Pure C, no recursion deeper than
 * schema_max_depth + 1. False with a message in err (errlen bytes) that names the field, the limit
 * and its [limits] key. Fields of the wrong shape are left to the request's own checks. */
bool sipp_schema_limits_check_body(const json_t *body, const sipp_schema_limits *lim, char *err,
                                   size_t errlen);

#endif
