/*
 * libFuzzer harness for src/gateway/http/range.c: the Range header of GET /v1/models/{name}/file.
 * The first 8 bytes are the file's size (little endian, often cut small so that ranges hit it), the
 * rest the header's value. Invariants checked beyond the sanitizers':
 *   - a served range lies inside the file and is not empty;
 *   - every refusal has a message for its 416;
 *   - a range that is served round-trips: "bytes=FIRST-LAST" of its own result parses to itself.
 *
 *   make fuzz-bins && build/fuzz/fuzz_range -max_total_time=60 /tmp/range-corpus tests/fuzz/corpus/range
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/http/http.h"

#define MAX_INPUT 512
#define SIZE_BYTES 8
#define SMALL_SIZES 4096 /* sizes below this are as likely as any: they reach the edges */
#define ROUND_TRIP_SIZE 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "invariant broken: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < SIZE_BYTES || size > MAX_INPUT) return 0;
    uint64_t file = 0;
    for (int i = 0; i < SIZE_BYTES; i++)
        file |= (uint64_t)data[i] << (8 * i);
    if (data[0] & 1) file %= SMALL_SIZES;
    char value[MAX_INPUT + 1];
    memcpy(value, data + SIZE_BYTES, size - SIZE_BYTES);
    value[size - SIZE_BYTES] = '\0';
    uint64_t first = 0, len = 0;
    gw_range_result r = gw_range_parse(value, file, &first, &len);
    if (r == GW_RANGE_OK) {
        check(len > 0, "an empty range was served");
        check(first < file && len <= file - first, "a served range leaves the file");
        char again[ROUND_TRIP_SIZE];
        snprintf(again, sizeof again, "bytes=%" PRIu64 "-%" PRIu64, first, first + len - 1);
        uint64_t f2 = 0, l2 = 0;
        check(gw_range_parse(again, file, &f2, &l2) == GW_RANGE_OK && f2 == first && l2 == len,
              "a served range does not round-trip");
    } else if (r != GW_RANGE_IGNORE) {
        check(*gw_range_problem(r) != '\0', "a refused range has no message");
    }
    return 0;
}
