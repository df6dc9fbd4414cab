/*
 * libFuzzer harness for the store's metadata (NAME.json, src/store/store.c), read as the store reads
 * it: each input is written as a model's metadata file in a scratch store, then looked up by name and
 * listed. Invariants, checked beyond what the sanitizers catch:
 *   - a model that is found has 1..SIPP_SPLIT_MAX files named as the store names them, a path to its
 *     first file inside the store, and a size that is the sum of its files'; a projector it names is
 *     mmproj-NAME.gguf;
 *   - metadata that is refused gives a message naming the file and the way out (sipp models rm);
 *   - listing never fails on bad metadata of one model.
 *
 * Seeds: tests/fuzz/corpus/store_meta/.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/store.h"

#define NAME "fuzzmodel"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[] = "/tmp/sipp-fuzz-store-XXXXXX";
static char meta[sizeof dir + sizeof NAME + 8];

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "invariant broken: %s\n", what);
        abort();
    }
}

static void cleanup(void) {
    unlink(meta);
    rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!meta[0]) {
        check(mkdtemp(dir) != NULL, "a scratch store");
        snprintf(meta, sizeof meta, "%s/%s.json", dir, NAME);
        atexit(cleanup);
    }
    FILE *f = fopen(meta, "wb");
    check(f && fwrite(data, 1, size, f) == size && fclose(f) == 0, "the metadata file is written");
    char err[SIPP_ERROR_SIZE] = "";
    sipp_store_model m;
    sipp_status st = sipp_store_lookup(dir, NAME, &m, err);
    if (st == SIPP_OK) {
        check(m.n_files >= 1 && m.n_files <= SIPP_SPLIT_MAX, "file count in range");
        uint64_t total = 0;
        for (int i = 0; i < m.n_files; i++) {
            char want[sizeof m.files[i].file];
            sipp_store_file_name(NAME, i + 1, m.n_files, want, sizeof want);
            check(strcmp(m.files[i].file, want) == 0, "files named as the store names them");
            check(m.files[i].url != NULL, "url set");
            total += m.files[i].size;
        }
        check(total == m.size, "size is the sum of the files'");
        char own[sizeof m.files[0].file];
        sipp_store_mmproj_file_name(NAME, own, sizeof own);
        check(!m.mmproj || (strcmp(m.mmproj->file, own) == 0 && m.mmproj->url),
              "the projector is mmproj-NAME.gguf");
        check(strncmp(m.path, dir, strlen(dir)) == 0, "the path is inside the store");
        sipp_store_model_clear(&m);
    } else {
        check(err[0] != '\0', "a refusal has a message");
    }
    sipp_store_model *all = NULL;
    size_t n = 0;
    if (sipp_store_list(dir, &all, &n, err) == SIPP_OK) sipp_store_list_free(all, n);
    return 0;
}
