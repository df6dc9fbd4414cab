/*
 * rpc.h: ggml's RPC backend as libsipp uses it (internal; rpc.c explains the design).
 */
#ifndef SIPP_BACKEND_RPC_H
#define SIPP_BACKEND_RPC_H

#include <stdbool.h>
#include <stddef.h>

#include "ggml-backend.h"
#include "sipp.h"

#define SIPP_RPC_ENDPOINT_MAX 128
#define SIPP_RPC_MAX_SERVERS 16

/* Splits "HOST:PORT". */
sipp_status sipp_rpc_parse_endpoint(const char *endpoint, char *host, size_t host_cap, int *port,
                                    char *errbuf);
/* Splits "HOST:PORT[,HOST:PORT...]" into out (up to cap); at least one, none twice. */
sipp_status sipp_rpc_parse_list(const char *list, char (*out)[SIPP_RPC_ENDPOINT_MAX], int cap, int *n_out,
                                char *errbuf);
/* Parses "a,b,c" into exactly want non-negative shares with a positive sum. */
sipp_status sipp_rpc_parse_split(const char *text, float *out, int want, char *errbuf);
/* The protocol's HELLO with timeouts: the server's version in version[3]; errors name the endpoint. */
sipp_status sipp_rpc_handshake(const char *endpoint, int version[3], char *errbuf);
/* Handshake, then ggml's connection: the server's devices (as this process names them). */
sipp_status sipp_rpc_connect(const char *endpoint, ggml_backend_dev_t *devices, int cap, int *n_out,
                             char *errbuf);
bool sipp_rpc_compiled(void);
/* The endpoint of a connected rpc device ("RPC0"), NULL if it is not one. */
const char *sipp_rpc_endpoint_of(const char *device_name);
/* The device name ("RPC1") that holds an rpc buffer named "RPC0[host:port]", NULL if none. */
const char *sipp_rpc_device_of_buffer(const char *buffer_name);

#endif
