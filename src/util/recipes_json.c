/*
 * recipes_json.c: the recipe matrix as JSON (recipes_json.h). A backend's note is left out when it
 * is empty (an installed backend has nothing to add).
 */
#include "util/recipes_json.h"

static const char *state_name(sipp_recipe_state state) {
    switch (state) {
    case SIPP_RECIPE_INSTALLED: return "installed";
    case SIPP_RECIPE_INSTALLABLE: return "installable";
    default: return "unsupported";
    }
}

static json_t *backend_json(const sipp_recipe_backend *b) {
    json_t *o = json_pack("{s:s, s:b, s:b, s:s}", "name", b->name, "compiled", b->compiled, "available",
                          b->available, "state", state_name(b->state));
    if (o && *b->note) json_object_set_new(o, "note", json_string(b->note));
    return o;
}

json_t *sipp_recipes_json(const sipp_recipe_info *recipes, int n) {
    json_t *list = json_array();
    for (int i = 0; list && i < n; i++) {
        const sipp_recipe_info *r = &recipes[i];
        json_t *backends = json_array();
        for (int k = 0; backends && k < r->n_backends; k++)
            json_array_append_new(backends, backend_json(&r->backends[k]));
        json_array_append_new(list, json_pack("{s:s, s:s, s:s, s:o*, s:{s:s, s:s}}", "name", r->name,
                                              "serves", r->serves, "kind", r->kind, "backends", backends,
                                              "auto", "backend", r->auto_backend, "reason", r->auto_reason));
    }
    return list;
}
