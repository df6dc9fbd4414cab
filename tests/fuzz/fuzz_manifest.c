/*
 * libFuzzer harness for verify manifests (src/verify/manifest.c and the readers of their figures in
 * src/verify/distance.c): each input is written as a manifest file and read back as `sipp verify
 * --against` reads it, then its thresholds and every backend's figures are read as a check reads
 * them. Invariants, checked beyond what the sanitizers catch:
 *   - a refused manifest gives a message naming the file, and a status of I/O or invalid argument;
 *   - an accepted one has the kind, format and fields the reader promises;
 *   - reading thresholds leaves the defaults where the manifest has no number.
 *
 * Seeds: tests/fuzz/corpus/manifest/ (a real manifest of a tiny model, trimmed, and variants).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "verify/distance.h"
#include "verify/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[] = "/tmp/sipp-fuzz-manifest-XXXXXX";

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "invariant broken: %s\n", what);
        abort();
    }
}

static void cleanup(void) { unlink(path); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int fd = -1;
    if (fd < 0) {
        check((fd = mkstemp(path)) >= 0, "a scratch file");
        close(fd);
        atexit(cleanup);
    }
    FILE *f = fopen(path, "wb");
    check(f && fwrite(data, 1, size, f) == size && fclose(f) == 0, "the manifest file is written");
    char err[SIPP_ERROR_SIZE] = "";
    json_t *m = NULL;
    sipp_status st = manifest_load(path, &m, err);
    if (st != SIPP_OK) {
        check(!m, "no manifest on failure");
        check(strstr(err, path) != NULL, "the message names the file");
        check(st == SIPP_ERR_IO || st == SIPP_ERR_INVALID_ARGUMENT, "status");
        return 0;
    }
    check(json_is_object(json_object_get(m, "model")) && json_is_object(json_object_get(m, "backends")) &&
              json_is_array(json_object_get(m, "prompts")) && json_is_string(json_object_get(m, "reference")),
          "an accepted manifest has its fields");
    sipp_verify_thresholds t = sipp_verify_default_thresholds(), d = t;
    json_t *jt = json_object_get(m, "thresholds");
    verify_thresholds_from_json(jt, &t);
    if (!json_is_number(json_object_get(jt, "max_kl"))) check(t.max_kl == d.max_kl, "a default stays");
    const char *name;
    json_t *b;
    json_object_foreach(json_object_get(m, "backends"), name, b) {
        verify_metrics vm;
        verify_metrics_from_json(json_object_get(b, "vs_ref"), &vm);
        verify_metrics_from_json(json_object_get(b, "cached"), &vm);
    }
    char *text = NULL;
    check(sipp_verify_manifest_read(path, &text, err) == SIPP_OK && text, "the public reader agrees");
    free(text);
    json_decref(m);
    return 0;
}
