/*
 * libFuzzer harness for whisper.cpp model files as the store checks them (src/store/whisper_file.c):
 * each input is written as a model file, then its header read (what the transcriber's estimate does)
 * and the whole file checked (what `sipp pull` does with a download). Invariants, checked beyond what
 * the sanitizers catch:
 *   - a refusal has a message that names the file;
 *   - an accepted file has positive hyperparameters and at least one tensor, and its header reads too,
 *     with the file's size.
 *
 * Seeds: tests/fuzz/corpus/whisper_file/ (tiny whisper files made by tests/fuzz/make_whisper_seeds.py).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/whisper_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[] = "/tmp/sipp-fuzz-whisper-XXXXXX";
static char path[sizeof dir + 32];

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "invariant broken: %s\n", what);
        abort();
    }
}

static void cleanup(void) {
    unlink(path);
    rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!path[0]) {
        check(mkdtemp(dir) != NULL, "a scratch directory");
        snprintf(path, sizeof path, "%s/m.bin", dir);
        atexit(cleanup);
    }
    FILE *f = fopen(path, "wb");
    check(f && fwrite(data, 1, size, f) == size && fclose(f) == 0, "the model file is written");
    char err[SIPP_ERROR_SIZE] = "";
    sipp_whisper_hparams h;
    int n_tensors = 0;
    if (sipp_whisper_file_check(path, &h, &n_tensors, err) != SIPP_OK) {
        check(strstr(err, path) != NULL, "a refusal names the file");
        return 0;
    }
    check(n_tensors > 0 && h.n_vocab > 0 && h.n_audio_ctx > 0 && h.n_text_layer > 0,
          "an accepted file's shape");
    uint64_t bytes = 0;
    check(sipp_whisper_header_read(path, &h, &bytes, err) == SIPP_OK && bytes == size, "its header reads");
    return 0;
}
