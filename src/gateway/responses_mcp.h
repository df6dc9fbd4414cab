/*
 * responses_mcp.h: the Responses API's {"type": "mcp"} tools, run by the gateway on the model's
 * behalf through the [[mcp]] servers (responses_mcp.c). routes_responses.c renders the items.
 */
#ifndef SIPP_GATEWAY_RESPONSES_MCP_H
#define SIPP_GATEWAY_RESPONSES_MCP_H

#include <jansson.h>
#include <stdbool.h>

#include "gateway/connection.h"

/* At most this many MCP calls run in one response; a call past it fails with an error item and
 * the response ends (docs/gateway.md). */
#define GW_RS_MCP_MAX_CALLS 8

/* The MCP tools of one request. */
typedef struct gw_rs_mcp gw_rs_mcp;

/* Tool t (tools[i], {"type": "mcp", "server_label", ...}) of the request: its server's tools (those
 * both allowed_tools let through) are appended to out as chat function tools under their own names
 * and descriptions, and an mcp_list_tools item (id "mcpl_RID_N") is kept for the output. *m is
 * made on the first one. False after replying 400 naming the field (an unknown label, a server_url
 * that is not the configured one, a tool name another tool has). */
bool gw_rs_mcp_tool(gw_call *call, gw_rs_mcp **m, json_t *t, size_t i, json_t *out, const char *rid);

/* Whether name is one of the request's MCP tools; its server's label and whether a call needs the
 * client's approval first (require_approval). */
bool gw_rs_mcp_find(const gw_rs_mcp *m, const char *name, const char **label, bool *approval);

/* The mcp_list_tools items, in the order of the tools (a new reference). */
json_t *gw_rs_mcp_list_items(const gw_rs_mcp *m);

/* An mcp_call item of a call not yet run ("status": "in_progress"), or an mcp_approval_request
 * item, for tool name with arguments (a JSON text). */
json_t *gw_rs_mcp_call_item(const char *id, const char *label, const char *name, const char *arguments);
json_t *gw_rs_mcp_approval_item(const char *id, const char *label, const char *name, const char *arguments);

/* Runs the call an mcp_call item holds and sets its "output", or its "error" (the server failed,
 * hung past its timeout, or the tool said it failed), and "status" completed | failed. Returns the
 * text the model is given as the call's result. Borrowed from item. */
const char *gw_rs_mcp_run(gw_call *call, json_t *item);

/* The result of a call as the model is told it: the item's output, or its error. */
const char *gw_rs_mcp_result_text(json_t *item);

void gw_rs_mcp_free(gw_rs_mcp *m);

#endif
