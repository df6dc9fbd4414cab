/*
 * field_names.h: field names of chat completions renamed into another API's, in error messages
 * (rename.c).
 */
#ifndef SIPP_GATEWAY_FIELD_NAMES_H
#define SIPP_GATEWAY_FIELD_NAMES_H

#include <stddef.h>

#include "util/util.h"

/* A field's name in chat-completions terms and in the route's API; a table ends with {NULL}, and
 * the first entry that matches wins. GW_RENAME_INDEX stands for an array index in both names:
 * {"tools[*].function", "tools[*]"} renames 'tools[2].function.name' to 'tools[2].name'. */
#define GW_RENAME_INDEX '*'
typedef struct gw_rename {
    const char *chat;
    const char *api;
} gw_rename;

/* Rewrites every quoted field name of msg ('max_tokens', 'max_tokens[0]', 'messages.x') that the
 * table names, in place (at most cap bytes). */
void gw_rename_fields(char *msg, size_t cap, const gw_rename *renames);

#endif
