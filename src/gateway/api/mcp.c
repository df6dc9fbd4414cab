/*
 * mcp.c: GET /v1/mcp/tools, the [[mcp]] servers and the tools each offers to the Responses
 * API's {"type": "mcp"} tools (docs/gateway.md, "MCP").
 *
 * Listing a server starts it when it is not running (mcp_client.c), so this route is also how an
 * operator sees that a configured server starts and answers: a server that cannot be listed is
 * shown with its error and no tools, and the others are listed all the same.
 */
#include "gateway/api/api.h"
#include "gateway/mcp_client.h"

static json_t *server_json(gw_call *call, gw_mcp_server *s) {
    json_t *d = gw_mcp_describe(s);
    char err[SIPP_ERROR_SIZE] = "";
    json_t *tools = gw_mcp_tools(s, gw_call_ms_left(call), err, sizeof err);
    json_object_set_new(d, "tools", tools ? tools : json_array());
    json_object_set_new(d, "error", tools ? json_null() : json_string(err));
    return d;
}

void gw_route_mcp_tools(gw_call *call) {
    json_t *data = json_array();
    for (size_t i = 0; i < gw_mcp_count(call->srv->mcp); i++)
        json_array_append_new(data, server_json(call, gw_mcp_at(call->srv->mcp, i)));
    gw_reply_json(call, 200, json_pack("{s:s, s:o}", "object", "list", "data", data));
}
