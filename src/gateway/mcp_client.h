/*
 * mcp_client.h: the MCP servers of [[mcp]], spoken to as a client (mcp_client.c).
 *
 * Safe from any thread: each server takes one call at a time (a call waits for the one before it,
 * within its own timeout).
 */
#ifndef SIPP_GATEWAY_MCP_CLIENT_H
#define SIPP_GATEWAY_MCP_CLIENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "gateway/config.h"

typedef struct gw_mcp gw_mcp;
typedef struct gw_mcp_server gw_mcp_server;

/* The servers cfg names (copied); none is started until its first use. NULL when out of memory. */
gw_mcp *gw_mcp_new(const gw_config *cfg);
/* Stops every server's child (by its pid) and frees the set. NULL is allowed. */
void gw_mcp_free(gw_mcp *m);

size_t gw_mcp_count(const gw_mcp *m);
gw_mcp_server *gw_mcp_at(gw_mcp *m, size_t i);
/* The server named name, or NULL. */
gw_mcp_server *gw_mcp_find(gw_mcp *m, const char *name);
const char *gw_mcp_name(const gw_mcp_server *s);
/* Its url (NULL for a command server) and its timeout_seconds. */
const char *gw_mcp_url(const gw_mcp_server *s);
int gw_mcp_timeout_ms(const gw_mcp_server *s);
/* Its [[mcp]] entry as GET /v1/mcp/tools shows it: name, transport, url or command, allowed_tools,
 * timeout_seconds (new reference). */
json_t *gw_mcp_describe(const gw_mcp_server *s);

/* The tools the server offers that its allowed_tools lets requests use, as
 * [{"name", "description", "input_schema"}] (new reference). The server is started (and
 * initialized) when it is not running; the list is kept until it stops. NULL with err when it could
 * not be had within timeout_ms (or the server's own timeout, whichever is shorter). */
json_t *gw_mcp_tools(gw_mcp_server *s, int timeout_ms, char *err, size_t cap);

/* Calls tool with arguments (a JSON object, borrowed). Returns its output text (malloc'd) and
 * whether the tool said it failed (isError), or NULL with err when the call failed: the server did
 * not answer in time, exited, or said something that is not JSON-RPC (it is then stopped, and
 * started again on its next use), or refused the call. */
char *gw_mcp_call(gw_mcp_server *s, const char *tool, json_t *arguments, int timeout_ms, bool *is_error,
                  char *err, size_t cap);

#endif
