/*
 * test_rpc_parse.c: the typed inputs of backend "rpc" (src/backend/rpc_parse.c): server lists and
 * tensor_split shares, what they accept and the message for what they refuse.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "backend/rpc.h"

static char err[SIPP_ERROR_SIZE];

Test(rpc_parse, endpoints) {
    char host[SIPP_RPC_ENDPOINT_MAX];
    int port = 0;
    cr_assert_eq(sipp_rpc_parse_endpoint("10.0.0.2:50052", host, sizeof host, &port, err), SIPP_OK);
    cr_assert_str_eq(host, "10.0.0.2");
    cr_assert_eq(port, 50052);
    cr_assert_eq(sipp_rpc_parse_endpoint("gpu-host:1", host, sizeof host, &port, err), SIPP_OK);
    static const struct {
        const char *in, *want;
    } bad[] = {
        {"10.0.0.2", "is not HOST:PORT"},
        {":50052", "is not HOST:PORT"},
        {"h:", "is not HOST:PORT"},
        {"h:0", "1..65535"},
        {"h:65536", "1..65535"},
        {"h:5x", "1..65535"},
        {"::1:50052", "IPv6"},
        {"[::1]:50052", "IPv6"},
        {"h\n:1", "control character at byte 1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(sipp_rpc_parse_endpoint(bad[i].in, host, sizeof host, &port, err),
                     SIPP_ERR_INVALID_ARGUMENT, "%s", bad[i].in);
        cr_assert(strstr(err, bad[i].want), "%s: %s", bad[i].in, err);
    }
}

Test(rpc_parse, lists) {
    char eps[SIPP_RPC_MAX_SERVERS][SIPP_RPC_ENDPOINT_MAX];
    int n = 0;
    cr_assert_eq(sipp_rpc_parse_list("a:1, b:2 ,c:3", eps, SIPP_RPC_MAX_SERVERS, &n, err), SIPP_OK, "%s",
                 err);
    cr_assert_eq(n, 3);
    cr_assert_str_eq(eps[1], "b:2");
    cr_assert_eq(sipp_rpc_parse_list("a:1,a:1", eps, SIPP_RPC_MAX_SERVERS, &n, err),
                 SIPP_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(err, "given twice"), "%s", err);
    cr_assert_eq(sipp_rpc_parse_list("a:1,,b:2", eps, SIPP_RPC_MAX_SERVERS, &n, err),
                 SIPP_ERR_INVALID_ARGUMENT);
    cr_assert_eq(sipp_rpc_parse_list(NULL, eps, SIPP_RPC_MAX_SERVERS, &n, err), SIPP_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(err, "SIPP_RPC_SERVERS"), "%s", err);
    cr_assert_eq(sipp_rpc_parse_list("a:1,b:2,c:3", eps, 2, &n, err), SIPP_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(err, "at most 2"), "%s", err);
}

Test(rpc_parse, shares) {
    float s[4];
    cr_assert_eq(sipp_rpc_parse_split("1, 2.5,0", s, 3, err), SIPP_OK, "%s", err);
    cr_assert_float_eq(s[1], 2.5f, 1e-6);
    static const struct {
        const char *in, *want;
    } bad[] = {
        {"1,2", "too few"},    {"1,2,3,4", "too many"},   {"0,0,0", "share of 0"},   {"1,-1,1", "0..1e+09"},
        {"1,x,1", "0..1e+09"}, {"1;2;3", "expected ','"}, {"1,1e300,1", "0..1e+09"}, {"1,nan,1", "0..1e+09"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(sipp_rpc_parse_split(bad[i].in, s, 3, err), SIPP_ERR_INVALID_ARGUMENT, "%s", bad[i].in);
        cr_assert(strstr(err, bad[i].want), "%s: %s", bad[i].in, err);
    }
}
