/*
 * libFuzzer harness for src/backend/rpc_parse.c: rpc server lists and tensor_split shares, the two
 * inputs of backend "rpc" that people type. The first byte picks the parser and the share count; the
 * rest is the text. Invariants checked beyond the sanitizers':
 *   - every failure leaves a one-line message in the error buffer;
 *   - a parsed list holds 1..cap endpoints that each parse again on their own, none twice;
 *   - parsed shares are finite, non-negative, and sum to more than 0.
 *
 *   make fuzz-bins && build/fuzz/fuzz_rpc -max_total_time=60 /tmp/rpc-corpus tests/fuzz/corpus/rpc
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/rpc.h"

#define MAX_INPUT 4096
#define MAX_SHARES 20

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "invariant broken: %s\n", what);
        abort();
    }
}

static void check_message(const char *err) {
    check(err[0] != '\0', "a failure has a message");
    check(strchr(err, '\n') == NULL, "the message is one line");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > MAX_INPUT) return 0;
    char *text = malloc(size);
    if (!text) return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    char err[SIPP_ERROR_SIZE] = "";
    if (data[0] & 1) {
        char eps[SIPP_RPC_MAX_SERVERS][SIPP_RPC_ENDPOINT_MAX];
        int n = -1;
        if (sipp_rpc_parse_list(text, eps, SIPP_RPC_MAX_SERVERS, &n, err) == SIPP_OK) {
            check(n >= 1 && n <= SIPP_RPC_MAX_SERVERS, "1..cap endpoints");
            for (int i = 0; i < n; i++) {
                char host[SIPP_RPC_ENDPOINT_MAX];
                int port = 0;
                check(sipp_rpc_parse_endpoint(eps[i], host, sizeof host, &port, err) == SIPP_OK,
                      "entries reparse");
                check(port >= 1 && port <= 65535 && host[0], "a host and a port");
                for (int j = 0; j < i; j++)
                    check(strcmp(eps[i], eps[j]) != 0, "no endpoint twice");
            }
        } else {
            check_message(err);
        }
    } else {
        int want = 1 + (data[0] >> 1) % MAX_SHARES;
        float shares[MAX_SHARES];
        if (sipp_rpc_parse_split(text, shares, want, err) == SIPP_OK) {
            double sum = 0;
            for (int i = 0; i < want; i++) {
                check(isfinite(shares[i]) && shares[i] >= 0, "shares finite and non-negative");
                sum += shares[i];
            }
            check(sum > 0, "shares sum to more than 0");
        } else {
            check_message(err);
        }
    }
    free(text);
    return 0;
}
