/*
 * fuzz_gguf_header.c: libFuzzer harness for the GGUF header module (src/store/gguf_header.c) and the
 * pre-load hyperparameter check (src/model/model_check.c), the code that stands between an untrusted
 * model file and llama.cpp's asserting loader.
 *
 * Each input is a whole GGUF file, written to a memory file and opened by path as a model load opens
 * it. When the header opens, the check runs and every typed getter is asked for the keys the check
 * and `models info` read. Nothing may crash, leak or read out of bounds; a refusal must carry a
 * message. The seeds are a skeleton llama model of about 3 KiB and corrupted copies of it, written by
 * `python3 tests/integration/gguf_corrupt.py --fuzz-seeds DIR` (tests/run.sh does this).
 *
 * gguf.h itself is the prebuilt libggml-base: it runs uninstrumented, so the fuzzer steers by
 * sipp's code and by the values the check sees.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "model/model_check.h"
#include "store/gguf_header.h"

static const char *const keys[] = {
    "general.architecture",       "general.name",         "general.alignment",     "llama.block_count",
    "llama.attention.head_count", "llama.rope.freq_base", "tokenizer.ggml.tokens", "split.count"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int fd = memfd_create("fuzz.gguf", 0);
    if (fd < 0) return 0;
    if (size && write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return 0;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    char err[SIPP_ERROR_SIZE] = "";
    sipp_gguf_header *h;
    if (sipp_gguf_header_open(path, &h, err) != SIPP_OK) {
        if (!err[0]) abort(); /* a refusal must say why */
        close(fd);
        return 0;
    }
    if (sipp_model_check_hparams(h, err) != SIPP_OK && !err[0]) abort();
    err[0] = '\0';
    if (sipp_model_check_vocab(h, err) != SIPP_OK && !err[0]) abort();
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        uint64_t u;
        size_t n;
        double f;
        const char *s;
        char out[64];
        (void)sipp_gguf_get_uint(h, keys[i], &u, &n, err);
        (void)sipp_gguf_get_float(h, keys[i], &f, err);
        if (sipp_gguf_get_str(h, keys[i], &s, err) == SIPP_OK && !s) abort();
        (void)sipp_gguf_get_array_len(h, keys[i], &n, err);
        (void)sipp_gguf_int_or(h, keys[i], -1);
        sipp_gguf_str_or(h, keys[i], out, sizeof out, "");
    }
    sipp_gguf_header_close(h);
    close(fd);
    return 0;
}
