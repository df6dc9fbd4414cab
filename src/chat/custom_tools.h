/*
 * custom_tools.h: OpenAI's custom (freeform) tools in a chat's "tools":
 *   {"type": "custom", "custom": {"name", "description",
 *    "format": {"type": "text"} | {"type": "grammar", "grammar": {"syntax": "lark" | "regex",
 * "definition"}}}}
 *
 * The template is shown a function of one string, "input" (its description says the tool is
 * freeform and, with a grammar, gives the grammar); a call comes back as that function's call
 * with arguments {"input": "..."}. A grammar is enforced: it is converted to GBNF (lark_gbnf.c)
 * and put in place of the "input" string of the tool-call grammar the chat library makes. To find
 * that place whatever the template's format, the tools are rendered a second time with each custom
 * tool's input marked (a JSON Schema pattern "^SIPPCUSTOMk$", which the library writes as the
 * GBNF literal "SIPPCUSTOMk" inside the string's quotes); the bridge takes that grammar and puts
 * the rule sipp-custom-k where the literal is (chat_bridge.cpp, splice_custom). The prompt and
 * the parser come from the unmarked tools.
 */
#ifndef SIPP_CHAT_CUSTOM_TOOLS_H
#define SIPP_CHAT_CUSTOM_TOOLS_H

#include <jansson.h>
#include <stddef.h>

#include "sipp.h"

typedef struct chat_custom {
    char **names;     /* the custom tools' names */
    char **gbnf_json; /* the rules sipp-custom-k (the input as inside a JSON string), NULL: no grammar */
    char **gbnf_raw;  /* the rules sipp-custom-raw-k (the input as it is) */
    size_t n;
} chat_custom;

/* tools with each custom tool as a function of "input" (a new reference in *out); the grammars
 * converted into c. Errors name the field ('tools[0].custom.format.grammar.definition'). */
sipp_status chat_custom_tools(json_t *tools, json_t **out, chat_custom *c, char *err);

/* The JSON text of tools with each custom tool that has a grammar marked; NULL when none has. */
char *chat_custom_marked(const chat_custom *c, json_t *tools);

void chat_custom_free(chat_custom *c);

#endif
