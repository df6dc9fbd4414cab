/*
 * catalog.c: GET /v1/catalog, the models sipp can pull by name (sipp_catalog_load: the
 * catalog shipped with sipp and the user's own beside the store), for the web page's Models view and
 * any client that offers a list to pull from (POST /api/pull takes the name).
 *
 * Each entry as the catalog gives it: name, description, url, size (0: unknown), sha256 known or
 * not, labels, suggested backends and context, licence, its draft, whether a projector comes with it,
 * and its recipe (llamacpp, or whispercpp for a whisper.cpp model).
 */
#include "gateway/api/api.h"

static json_t *strings(char *const *v, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        json_array_append_new(a, json_string(v[i]));
    return a;
}

static json_t *entry_json(const sipp_catalog_entry *e) {
    return json_pack("{s:s, s:s, s:s, s:I, s:b, s:o, s:o, s:i, s:s, s:s, s:b, s:s}", "name", e->name,
                     "description", e->description, "url", e->url, "size", (json_int_t)e->size, "verified",
                     e->n_sha256 > 0, "labels", strings(e->labels, e->n_labels), "backends",
                     strings(e->backends, e->n_backends), "ctx_size", e->ctx_size, "license", e->license,
                     "draft", e->draft, "mmproj", *e->mmproj != 0, "recipe",
                     e->recipe && *e->recipe ? e->recipe : SIPP_RECIPE_LLAMACPP);
}

void gw_route_catalog(gw_call *call) {
    sipp_catalog *cat = NULL;
    char err[SIPP_ERROR_SIZE];
    /* A catalog file that is not valid: the message names it. */
    if (sipp_catalog_load(&cat, err) != SIPP_OK) {
        gw_reply_error(call, GW_E_NOT_READY, "the catalog cannot be read: %s", err);
        return;
    }
    json_t *data = json_array();
    for (size_t i = 0; i < cat->n; i++)
        json_array_append_new(data, entry_json(&cat->entries[i]));
    gw_reply_json(call, 200, json_pack("{s:s, s:o}", "object", "list", "data", data));
    sipp_catalog_free(cat);
}
