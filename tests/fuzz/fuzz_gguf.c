/*
 * libFuzzer harness for GGUF headers as the store reads them (src/store/gguf_info.c): each input is
 * written as a model file, then inspected (`sipp models info`), checked (what `sipp pull` does with a
 * download) and its tokenizer read (what a verify manifest records). gguf's own parser is in
 * llama.cpp's libggml-base, linked as built (not instrumented): a crash there still shows, the
 * sanitizers watch sipp's side. Inputs whose last byte is odd are named as shard 1 of a split set,
 * so the shard paths run too. Invariants, checked beyond what the sanitizers catch:
 *   - a refusal has a message;
 *   - an accepted header has an architecture, at most SIPP_GGUF_MAX_TYPES tensor types sorted by
 *     count, and type counts that add up to the tensors;
 *   - inspect and check agree that the file is usable.
 *
 * Seeds: tests/fuzz/corpus/gguf/ (tiny GGUF files made by tests/fuzz/make_gguf_seeds.py).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/gguf_info.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[] = "/tmp/sipp-fuzz-gguf-XXXXXX";
static char plain[sizeof dir + 32], shard[sizeof dir + 32];

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "invariant broken: %s\n", what);
        abort();
    }
}

static void cleanup(void) {
    unlink(plain);
    unlink(shard);
    rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!plain[0]) {
        check(mkdtemp(dir) != NULL, "a scratch directory");
        snprintf(plain, sizeof plain, "%s/m.gguf", dir);
        snprintf(shard, sizeof shard, "%s/m-00001-of-00002.gguf", dir);
        atexit(cleanup);
    }
    const char *path = size && (data[size - 1] & 1) ? shard : plain;
    FILE *f = fopen(path, "wb");
    check(f && fwrite(data, 1, size, f) == size && fclose(f) == 0, "the model file is written");
    char err[SIPP_ERROR_SIZE] = "";
    sipp_gguf_info *g = malloc(sizeof *g);
    check(g != NULL, "memory");
    sipp_status st = sipp_gguf_inspect(path, g, err);
    if (st == SIPP_OK) {
        check(g->architecture[0] != '\0', "an architecture");
        check(g->n_types >= 0 && g->n_types <= SIPP_GGUF_MAX_TYPES, "type count in range");
        int64_t tensors = 0;
        for (int i = 0; i < g->n_types; i++) {
            tensors += g->types[i].n_tensors;
            if (i) check(g->types[i - 1].n_tensors >= g->types[i].n_tensors, "types sorted by count");
        }
        check(tensors == g->n_tensors || g->n_types == SIPP_GGUF_MAX_TYPES, "type counts add up");
        if (g->n_files == 1) check(sipp_gguf_check(path, err) == SIPP_OK, "inspect and check agree");
    } else {
        check(err[0] != '\0', "a refusal has a message");
    }
    free(g);
    sipp_gguf_tokenizer tok;
    if (sipp_gguf_tokenizer_read(path, &tok, err) == SIPP_OK)
        check(tok.n_tokens == 0 || strlen(tok.tokens_sha256) == 64, "a vocabulary has a hash");
    unlink(path);
    return 0;
}
