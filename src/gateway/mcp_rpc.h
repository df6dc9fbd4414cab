/*
 * mcp_rpc.h: reading what an MCP server says (mcp_rpc.c): JSON-RPC 2.0 messages, the events of a
 * streamable HTTP answer, and the results of tools/list and tools/call. No I/O: the client
 * (mcp_client.c) reads the bytes, these functions judge them, and tests/fuzz/fuzz_mcp_rpc.c
 * feeds them whatever bytes a broken or hostile server could send.
 */
#ifndef SIPP_GATEWAY_MCP_RPC_H
#define SIPP_GATEWAY_MCP_RPC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "util/util.h"

typedef enum gw_rpc_kind {
    GW_RPC_RESULT, /* the reply to the request: *result is its "result" (new reference) */
    GW_RPC_ERROR,  /* the reply to the request, an error: msg says which */
    GW_RPC_OTHER,  /* a notification, a request of the server's, or a reply to another id: skipped */
    GW_RPC_JUNK    /* not a JSON-RPC 2.0 message: msg says why, quoting the start of it */
} gw_rpc_kind;

/* One message (a stdio server's line, an HTTP body, an SSE event's data) read for the reply to the
 * request numbered id. */
gw_rpc_kind gw_mcp_rpc_read(const char *text, size_t len, long long id, json_t **result, char *msg,
                            size_t cap);

/* The data of the next event of a text/event-stream body from *pos (its data lines joined with
 * '\n'), into data (emptied first); false when no event is left. */
bool gw_mcp_sse_next(const char *body, size_t len, size_t *pos, sipp_buf *data);

/* tools/list's result as [{"name", "description", "input_schema"}] (new reference), and its
 * nextCursor in *cursor (malloc'd; NULL when none), or NULL with msg when it is not one. */
json_t *gw_mcp_tools_from_result(json_t *result, char **cursor, char *msg, size_t cap);

/* tools/call's result as the text the model is given (malloc'd): its text parts joined by '\n',
 * any other part as its JSON; *is_error is the result's isError. NULL with msg when the result is
 * not a CallToolResult. */
char *gw_mcp_output_from_result(json_t *result, bool *is_error, char *msg, size_t cap);

#endif
