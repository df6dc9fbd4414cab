/*
 * chat_delta_json.c: a chat delta as OpenAI's chunk delta (see chat_delta_json.h).
 */
#include "util/chat_delta_json.h"

json_t *sipp_openai_delta_json(const sipp_chat_delta *d) {
    json_t *o = json_object();
    if (d->reasoning) json_object_set_new(o, "reasoning_content", json_string(d->reasoning));
    if (d->content) json_object_set_new(o, "content", json_string(d->content));
    if (d->tool_index < 0) return o;
    json_t *tc = json_pack("{s:I}", "index", (json_int_t)d->tool_index);
    if (d->tool_id) {
        json_object_set_new(tc, "id", json_string(d->tool_id));
        json_object_set_new(tc, "type", json_string("function"));
    }
    if (d->tool_name || d->tool_arguments) {
        json_t *fn = json_object();
        if (d->tool_name) json_object_set_new(fn, "name", json_string(d->tool_name));
        json_object_set_new(fn, "arguments", json_string(d->tool_arguments ? d->tool_arguments : ""));
        json_object_set_new(tc, "function", fn);
    }
    json_object_set_new(o, "tool_calls", json_pack("[o]", tc));
    return o;
}
