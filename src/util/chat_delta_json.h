/*
 * chat_delta_json.h: a parsed chat delta (sipp_chat_delta) in OpenAI's chunk shape, written once for
 * the bindings' JSON deltas (src/chat) and the gateway's chat-completions stream.
 */
#ifndef SIPP_UTIL_CHAT_DELTA_JSON_H
#define SIPP_UTIL_CHAT_DELTA_JSON_H

#include <jansson.h>

#include "sipp.h"

/* {"reasoning_content"}, {"content"}, or {"tool_calls": [{"index", "id", "type", "function": {"name",
 * "arguments"}}]} for a call's start (its "arguments" "" as OpenAI's first delta has them) and
 * {"tool_calls": [{"index", "function": {"arguments"}}]} for a fragment. A new reference. */
json_t *sipp_openai_delta_json(const sipp_chat_delta *d);

#endif
