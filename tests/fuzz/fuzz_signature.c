/*
 * fuzz_signature.c: libFuzzer harness for artifact verification (src/backend/signature.c), which
 * reads two documents an attacker may control: signature.json and sbom.spdx.json.
 *
 * The input is split at its first NUL byte: the part before becomes signature.json, the part after
 * sbom.spdx.json, in a private directory beside a fixed manifest.json and one small library file.
 * Whatever they hold, verification must return an error (or, for a valid pair, success) without a
 * crash, a leak or undefined behaviour, and must never accept a document it could not check.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sipp.h"

static char dir[] = "/tmp/sipp-fuzz-signature-XXXXXX";

static void write_file(const char *name, const uint8_t *data, size_t n) {
    char path[sizeof dir + 64];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (n && fwrite(data, 1, n, f) != n) abort();
    fclose(f);
}

static void cleanup(void) {
    static const char *const names[] = {"manifest.json", "libggml-base.so", "signature.json",
                                        "sbom.spdx.json"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[sizeof dir + 64];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    if (!mkdtemp(dir)) abort();
    atexit(cleanup);
    static const char manifest[] = "{\"name\": \"fuzz\", \"backends\": [\"cpu\"]}\n";
    write_file("manifest.json", (const uint8_t *)manifest, sizeof manifest - 1);
    write_file("libggml-base.so", (const uint8_t *)"lib", 3);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t first = nul ? (size_t)(nul - data) : size;
    write_file("signature.json", data, first);
    write_file("sbom.spdx.json", nul ? nul + 1 : data, nul ? size - first - 1 : 0);
    char err[SIPP_ERROR_SIZE];
    sipp_status s = sipp_artifact_verify(dir, NULL, err);
    if (s != SIPP_OK && !err[0]) abort(); /* every refusal says why */
    return 0;
}
