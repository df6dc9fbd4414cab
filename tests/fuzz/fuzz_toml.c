/*
 * libFuzzer harness for src/util/toml.c: parses arbitrary bytes, walks whatever tree comes back
 * through the public API, and frees it. Sanitizers catch memory errors and leaks; the walk also checks
 * invariants the API promises and aborts when one breaks:
 *   - a failed parse leaves a non-empty "FILE:LINE:COL: ..." message;
 *   - every table entry is found again by toml_table_getn under its own key (the hash index);
 *   - nodes never nest deeper than TOML_MAX_DEPTH, and positions are 1-based.
 *
 * Build and run (seeds in tests/fuzz/corpus/toml/, TOML tokens in tests/fuzz/toml.dict; new inputs go to
 * the first corpus directory, so keep it outside the repository):
 *   clang -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -Isrc \
 *       -o fuzz_toml tests/fuzz/fuzz_toml.c src/util/toml.c
 *   mkdir -p /tmp/toml-corpus
 *   ./fuzz_toml -max_total_time=120 -dict=tests/fuzz/toml.dict /tmp/toml-corpus tests/fuzz/corpus/toml
 */
#include "util/toml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_FILE "fuzz.toml"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "invariant broken: %s\n", what);
        abort();
    }
}

static void walk(const toml_node *n, int depth) {
    char err[TOML_ERRBUF_SIZE];
    check(depth <= TOML_MAX_DEPTH, "depth within TOML_MAX_DEPTH");
    check(toml_node_line(n) >= 1 && toml_node_col(n) >= 1, "1-based position");
    check(strcmp(toml_node_file(n), FUZZ_FILE) == 0, "file name kept");
    switch (toml_node_kind(n)) {
    case TOML_TABLE:
        for (size_t i = 0; i < toml_table_len(n); i++) {
            const toml_entry *e = toml_table_at(n, i);
            check(e->key[e->key_len] == '\0', "key is NUL-terminated");
            check(toml_table_getn(n, e->key, e->key_len) == e->value, "entry found by its key");
            check(toml_node_key(e->value) == e->key, "value knows its key");
            walk(e->value, depth + 1);
        }
        check(toml_table_at(n, toml_table_len(n)) == NULL, "no entry past the end");
        break;
    case TOML_ARRAY:
        for (size_t i = 0; i < toml_array_len(n); i++)
            walk(toml_array_at(n, i), depth + 1);
        check(toml_array_at(n, toml_array_len(n)) == NULL, "no element past the end");
        break;
    case TOML_STRING: {
        const char *s;
        size_t len;
        check(toml_get_string(n, &s, &len, err, sizeof err), "string accessor");
        check(s[len] == '\0', "string is NUL-terminated");
        break;
    }
    case TOML_DATETIME:
    case TOML_DATETIME_LOCAL:
    case TOML_DATE_LOCAL:
    case TOML_TIME_LOCAL: {
        const toml_datetime *dt;
        check(toml_get_datetime(n, &dt, err, sizeof err), "datetime accessor");
        check(dt->text && dt->text[0] != '\0', "datetime keeps its text");
        break;
    }
    default: {
        int64_t i;
        /* exercise the type-error path on every scalar that is not an integer */
        if (toml_node_kind(n) != TOML_INTEGER)
            check(!toml_get_int(n, &i, err, sizeof err) && err[0] != '\0', "type error reported");
        break;
    }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[TOML_ERRBUF_SIZE];
    toml_doc *doc = toml_parse((const char *)data, size, FUZZ_FILE, err, sizeof err);
    if (!doc) {
        check(strncmp(err, FUZZ_FILE ":", strlen(FUZZ_FILE) + 1) == 0, "error message names the file");
        return 0;
    }
    walk(toml_root(doc), 0);
    toml_free(doc);
    return 0;
}
