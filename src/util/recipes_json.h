/*
 * recipes_json.h: the recipe x backend matrix (sipp_recipes_list) as JSON, written once for
 * `sipp backends --json`, `sipp doctor --json` and the gateway's /v1/backends.
 */
#ifndef SIPP_UTIL_RECIPES_JSON_H
#define SIPP_UTIL_RECIPES_JSON_H

#include <jansson.h>

#include "sipp.h"

/* [{"name", "serves", "kind", "backends": [{"name", "compiled", "available", "state", "note"?}],
 *   "auto": {"backend", "reason"}}]: a new reference (NULL when out of memory). */
json_t *sipp_recipes_json(const sipp_recipe_info *recipes, int n);

#endif
