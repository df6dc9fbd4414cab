/*
 * libFuzzer harness for src/gateway/mcp_rpc.c: what an MCP server sends the gateway (a stdio line, an
 * HTTP body, an event stream), read as the client reads it. The first byte is the request id the
 * reply is looked for under; the rest is the server's bytes, read both as one message and as an event
 * stream. Invariants checked beyond the sanitizers':
 *   - a result comes with the reply kind only, and an error or junk always says why, on one line;
 *   - the event reader moves forward, stays inside the body and ends;
 *   - a result, read as tools/list's and as tools/call's, gives a list or output, or a reason.
 *
 *   make fuzz-bins && build/fuzz/fuzz_mcp_rpc -max_total_time=60 /tmp/mcp-corpus tests/fuzz/corpus/mcp_rpc
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/mcp_rpc.h"

#define MAX_INPUT 65536
#define MSG_SIZE 512

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "invariant broken: %s\n", what);
        abort();
    }
}

static void read_result(json_t *result) {
    char msg[MSG_SIZE] = "", *cursor = NULL;
    json_t *tools = gw_mcp_tools_from_result(result, &cursor, msg, sizeof msg);
    check(tools ? json_is_array(tools) : msg[0] != 0, "tools/list: a list or a reason");
    check(!cursor || tools, "a cursor only with a list");
    json_decref(tools);
    free(cursor);
    bool is_error = false;
    msg[0] = 0;
    char *out = gw_mcp_output_from_result(result, &is_error, msg, sizeof msg);
    check(out || msg[0], "tools/call: an output or a reason");
    free(out);
}

static void read_one(const char *text, size_t len, long long id) {
    json_t *result = NULL;
    char msg[MSG_SIZE] = "";
    gw_rpc_kind k = gw_mcp_rpc_read(text, len, id, &result, msg, sizeof msg);
    check((k == GW_RPC_RESULT) == (result != NULL), "a result only with a reply");
    if (k == GW_RPC_ERROR || k == GW_RPC_JUNK) check(msg[0] && !strchr(msg, '\n'), "a reason, on one line");
    if (result) read_result(result);
    json_decref(result);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > MAX_INPUT) return 0;
    long long id = data[0];
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    read_one(body, len, id);
    sipp_buf event = {0};
    size_t pos = 0, last = 0, events = 0;
    while (gw_mcp_sse_next(body, len, &pos, &event)) {
        check(pos > last || events == 0, "the event reader moves forward");
        check(pos <= len && event.len <= len, "events lie inside the body");
        read_one(event.data ? event.data : "", event.len, id);
        last = pos;
        check(++events <= len + 1, "the event reader ends");
    }
    check(pos <= len, "the reader stops inside the body");
    sipp_buf_free(&event);
    return 0;
}
