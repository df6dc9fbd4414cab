/*
 * libFuzzer harness for the catalog's JSON (src/store/catalog.c): parses arbitrary bytes as a catalog
 * (the shipped one and the user's have one format), then looks every entry up again by name and by
 * URL, and frees. Invariants, checked beyond what the sanitizers catch:
 *   - a refused text leaves a message that names the origin;
 *   - every entry has a name, a URL and strings where strings are promised, and is found by its name;
 *   - a second parse of the same text into the same catalog replaces entries instead of adding them.
 *
 * Seeds: tests/fuzz/corpus/catalog/ (the shipped catalog/catalog.json and small variants).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/catalog.h"

#define ORIGIN "fuzz-catalog.json"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "invariant broken: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sipp_catalog *cat = sipp_catalog_new();
    if (!cat) return 0;
    char err[SIPP_ERROR_SIZE] = "";
    if (sipp_catalog_parse(cat, (const char *)data, size, ORIGIN, err) != SIPP_OK) {
        check(strstr(err, ORIGIN) != NULL, "a refused catalog's message names its origin");
        sipp_catalog_free(cat);
        return 0;
    }
    size_t n = cat->n;
    for (size_t i = 0; i < n; i++) {
        const sipp_catalog_entry *e = &cat->entries[i];
        check(e->name && e->url && e->description && e->license, "entry strings are set");
        check(e->recipe &&
                  (strcmp(e->recipe, SIPP_RECIPE_LLAMACPP) == 0 ||
                   (strcmp(e->recipe, SIPP_RECIPE_WHISPERCPP) == 0 && e->n_sha256 <= 1 && !*e->mmproj)),
              "a recipe is set, and a whisper model is one file without a projector");
        check(sipp_catalog_find(cat, e->name) == e, "an entry is found by its name");
        for (size_t k = 0; k < e->n_sha256; k++)
            check(e->sha256[k] && strlen(e->sha256[k]) == 64, "digest length");
        for (size_t k = 0; k < e->n_labels; k++)
            check(sipp_catalog_label_valid(e->labels[k]), "labels are known");
        sipp_catalog_find_url(cat, e->url);
    }
    check(sipp_catalog_parse(cat, (const char *)data, size, ORIGIN, err) == SIPP_OK, "a text parses twice");
    check(cat->n == n, "parsing again replaces entries of the same name");
    sipp_catalog_free(cat);
    return 0;
}
