/*
 * rpc_parse.c: the inputs of backend "rpc" that people type: server lists ("HOST:PORT,HOST:PORT")
 * and layer shares ("1,2,2"). Pure functions, apart from libsipp's error buffers, so that the fuzzer
 * (tests/fuzz/fuzz_rpc.c) can run them without ggml.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/rpc.h"
#include "util/util.h"

#define MAX_SHARE 1e9 /* a share is a weight: anything larger is a typo, and floats end near 3e38 */

/* Inputs are echoed in messages, which must stay one line: control characters are refused first. */
static sipp_status refuse_control(const char *what, const char *text, char *errbuf) {
    for (const char *p = text; p && *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "%s has a control character at byte %td",
                             what, p - text);
    return SIPP_OK;
}

sipp_status sipp_rpc_parse_endpoint(const char *endpoint, char *host, size_t host_cap, int *port,
                                    char *errbuf) {
    if (refuse_control("rpc server", endpoint, errbuf) != SIPP_OK) return SIPP_ERR_INVALID_ARGUMENT;
    const char *colon = endpoint ? strrchr(endpoint, ':') : NULL;
    if (!endpoint || !*endpoint || !colon || colon == endpoint || !colon[1])
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                         "rpc server '%s' is not HOST:PORT (e.g. 10.0.0.2:%d)", endpoint ? endpoint : "",
                         SIPP_RPC_DEFAULT_PORT);
    if (memchr(endpoint, ':', (size_t)(colon - endpoint)) || *endpoint == '[')
        return sipp_fail(
            errbuf, SIPP_ERR_INVALID_ARGUMENT,
            "rpc server '%s': IPv6 addresses are not supported by ggml's RPC client; use an IPv4 address "
            "or a host name",
            endpoint);
    char *end = NULL;
    long p = strtol(colon + 1, &end, 10);
    if (*end || p < 1 || p > 65535)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                         "rpc server '%s': port '%s' is not a number in 1..65535", endpoint, colon + 1);
    if ((size_t)(colon - endpoint) >= host_cap || strlen(endpoint) >= SIPP_RPC_ENDPOINT_MAX)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "rpc server '%.64s...' is too long", endpoint);
    memcpy(host, endpoint, (size_t)(colon - endpoint));
    host[colon - endpoint] = '\0';
    *port = (int)p;
    return SIPP_OK;
}

sipp_status sipp_rpc_parse_list(const char *list, char (*out)[SIPP_RPC_ENDPOINT_MAX], int cap, int *n_out,
                                char *errbuf) {
    *n_out = 0;
    if (refuse_control("rpc server list", list, errbuf) != SIPP_OK) return SIPP_ERR_INVALID_ARGUMENT;
    const char *p = list ? list : "";
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        while (len && (*p == ' '))
            p++, len--;
        while (len && p[len - 1] == ' ')
            len--;
        if (*n_out == cap)
            return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "at most %d rpc servers can be given", cap);
        if (len == 0 || len >= SIPP_RPC_ENDPOINT_MAX)
            return sipp_fail(
                errbuf, SIPP_ERR_INVALID_ARGUMENT,
                "rpc server list '%.128s' has an empty or too long entry; give HOST:PORT[,HOST:PORT...]",
                list);
        memcpy(out[*n_out], p, len);
        out[*n_out][len] = '\0';
        char host[SIPP_RPC_ENDPOINT_MAX];
        int port;
        sipp_status st = sipp_rpc_parse_endpoint(out[*n_out], host, sizeof host, &port, errbuf);
        if (st != SIPP_OK) return st;
        for (int i = 0; i < *n_out; i++)
            if (strcmp(out[i], out[*n_out]) == 0)
                return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "rpc server '%s' is given twice", out[i]);
        (*n_out)++;
        p += len;
        while (*p == ' ')
            p++;
        if (*p == ',') p++;
    }
    if (*n_out == 0)
        return sipp_fail(
            errbuf, SIPP_ERR_INVALID_ARGUMENT,
            "backend 'rpc' needs at least one server: --rpc HOST:PORT[,...], rpc = [\"HOST:PORT\"] in a "
            "target, or SIPP_RPC_SERVERS");
    return SIPP_OK;
}

sipp_status sipp_rpc_check_servers(const char *list, char *errbuf) {
    char endpoints[SIPP_RPC_MAX_SERVERS][SIPP_RPC_ENDPOINT_MAX];
    int n = 0;
    return sipp_rpc_parse_list(list, endpoints, SIPP_RPC_MAX_SERVERS, &n, errbuf);
}

/* Parses "a,b,c" into exactly want non-negative shares with a positive sum. */
sipp_status sipp_rpc_parse_split(const char *text, float *out, int want, char *errbuf) {
    if (refuse_control("tensor_split", text, errbuf) != SIPP_OK) return SIPP_ERR_INVALID_ARGUMENT;
    int n = 0;
    double sum = 0;
    const char *p = text;
    while (*p) {
        char *end = NULL;
        double v = strtod(p, &end);
        if (end == p || !isfinite(v) || v < 0 || v > MAX_SHARE)
            return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                             "tensor_split '%s': '%.16s' is not a number in 0..%g", text, p, MAX_SHARE);
        if (n == want) break;
        /* Sum what llama.cpp will see: a share like 5e-56 is a float 0. */
        out[n] = (float)v;
        sum += out[n++];
        p = end;
        while (*p == ' ')
            p++;
        if (*p == ',')
            p++;
        else if (*p)
            return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "tensor_split '%s': expected ',' at '%.16s'",
                             text, p);
    }
    if (n != want || *p)
        return sipp_fail(
            errbuf, SIPP_ERR_INVALID_ARGUMENT,
            "tensor_split '%s' has %s shares; it needs %d: the local device's first, then one per rpc "
            "device in the order of the servers",
            text, *p ? "too many" : "too few", want);
    if (sum <= 0)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                         "tensor_split '%s' gives every device a share of 0", text);
    return SIPP_OK;
}
