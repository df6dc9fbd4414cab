/*
 * responses.c: OpenAI's Responses API, what Codex speaks: POST /v1/responses,
 * GET /v1/responses/{id}, DELETE /v1/responses/{id}, GET /v1/responses/{id}/input_items.
 *
 * A request becomes a chat-completions body (translate.c): instructions are the system message,
 * input the turns after it (message items, whose input_image parts with a data: URL become chat
 * image parts, and input_audio parts and input_file parts holding an audio data: URL chat's
 * input_audio parts; a file_id, a remote URL or a file that is not audio is refused; function_call items join
 * the assistant turn before them as chat tool_calls; function_call_output items are tool messages),
 * max_output_tokens is max_tokens, text.format is response_format, function tools become chat's function
 * tools and reasoning.effort the template's thinking switch. What the chat layer refuses is refused under the
 * Responses names. Fields that cannot change the output (metadata, client_metadata, user, prompt_cache_key,
 * include entries, reasoning.summary, ...) are accepted and named in sipp-ignored, as built-in tools are,
 * which the model is not shown (api/fields.c, docs/api-fields.md); namespace tools are flattened into
 * "<namespace>__<name>" functions whose calls come back with their namespace; custom (freeform) tools become
 * chat's custom tools, functions of one string, "input", whose Lark or regex grammar constrains the
 * sampling (src/chat/custom_tools.h), and whose calls come back as custom_tool_call items; anything else is
 * refused.
 *
 * The answer, parsed by the chat layer into content, reasoning and tool calls, becomes output
 * items: a reasoning item, a message item with one output_text part, one function_call item per
 * call (custom_tool_call for a custom tool, its input streamed whole as
 * custom_tool_call_input .delta and .done). status is "completed", or "incomplete" with
 * incomplete_details.reason "max_output_tokens" when the token limit ended it. A stream renders the parsed
 * deltas as the documented events, each with its sequence_number: response.created, response.in_progress,
 * then per item response.output_item.added, its part and text events (output_text / reasoning_text /
 * function_call_arguments .delta and .done), response.output_item.done, and last
 * response.completed | response.incomplete (or response.failed on an error). An item opens when
 * the first delta of its kind arrives and closes when another kind begins; the final response's
 * output is the items as streamed.
 *
 * store (default true) keeps the response (responses_store.c). previous_response_id continues the
 * stored conversation: its messages are put before this input (its instructions are not carried
 * over, as OpenAI documents), and the request runs under the conversation's context key, so the
 * engine finds the previous turn's KV in its slot and evaluates only the new tokens; usage reports
 * them as input_tokens_details.cached_tokens.
 *
 * Stored responses belong to the caller that made them (docs/gateway.md, "Who may see and change
 * what"). The id is random and made here, never the client's x-request-id: an id a client could
 * choose is an id a client could aim at another's conversation. GET, DELETE, input_items and
 * previous_response_id find only the caller's own responses (an admin's: all), and only while the
 * caller may still use the target the response was made on; anything else is the same 404 as an
 * unknown id. A response not kept (over max_stored_bytes) says store: false.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/api/api.h"
#include "gateway/kinds/kinds.h"

#define API_NAME "/v1/responses"
#define RESPONSES_PREFIX "/v1/responses/"
#define INPUT_ITEMS_SUFFIX "/input_items"
#define INPUT_ITEMS_LIMIT_DEFAULT 20 /* OpenAI's page size for input_items */
#define INPUT_ITEMS_LIMIT_MAX 100
#define ID_SIZE 96
#define NAMESPACE_JOIN "__" /* a namespace tool's function is "<namespace>__<name>" to the model */
#define RID_BYTES 16        /* random bytes of a response id: 128 bits, never guessed, never repeated */
#define RID_SIZE (2 * RID_BYTES + 1)
#define KEY_PREFIX "resp-conversation:"
#define OPENAI_DEFAULT_TEMPERATURE 1.0 /* what the chat layer uses when a request gives none */
#define OPENAI_DEFAULT_TOP_P 1.0
/* OpenAI's bounds on metadata: pairs, and characters (not bytes) of a key and of a value. */
#define METADATA_MAX_PAIRS 16
#define METADATA_MAX_KEY_CHARS 64
#define METADATA_MAX_VALUE_CHARS 512

static const gw_rename renames[] = {
    {"max_tokens", "max_output_tokens"},
    {"response_format", "text.format"},
    {"messages", "input"},
    {"reasoning_effort", "reasoning.effort"},
    {"tools[*].function", "tools[*]"},
    {"tools[*].custom.format.grammar", "tools[*].format"},
    {"tools[*].custom", "tools[*]"},
    {"tool_choice.function", "tool_choice"},
    {NULL, NULL},
};

/* What rendering needs beyond the generation: the request's own fields echoed in the response,
 * and what the store keeps. */
typedef enum item_kind { ITEM_NONE, ITEM_REASONING, ITEM_MESSAGE, ITEM_CALL } item_kind;

typedef struct resp_state {
    char id[ID_SIZE];   /* resp_... */
    char rid[RID_SIZE]; /* the id's random part, which item ids carry too */
    char *key;          /* the conversation's context key */
    json_t *echo;       /* request fields the response object repeats */
    json_t *history;    /* chat messages of the conversation before this turn's output */
    json_t *input_items;
    bool store;
    int seq; /* the next sequence_number */
    double created_at;
    /* streaming: the items sent so far, and the one open */
    json_t *items;
    item_kind open;
    size_t open_index;
    char open_id[ID_SIZE];
    char *open_call_id, *open_name;
    sipp_buf open_text; /* its text or arguments so far */
    size_t n_calls;
    json_t *namespaced; /* a flattened function's name -> {"namespace", "name"} (namespace tools) */
    json_t *custom;     /* the names of custom (freeform) tools -> true */
    /* MCP tools (responses_mcp.c), run between the model's turns (rs_next_turn) */
    gw_rs_mcp *mcp;
    int turn;         /* the model's turn, 0 first: ids of later turns' items carry it */
    size_t call_base; /* tool calls of the turns before this one (not streamed: item ids) */
    int prior_in, prior_cached, prior_out; /* the usage of the turns before this one */
    bool spent;        /* max_output_tokens ran out between turns: the response is incomplete */
    json_t *pending;   /* this turn's mcp_call items to run: [{"index", "call_id"}] */
    bool turn_open;    /* rs_next_turn has begun this turn's calls */
    bool consumed;     /* not streamed: the last turn's items are in items already */
    int mcp_calls;     /* MCP calls run in this response */
    int max_mcp_calls; /* max_tool_calls, at most GW_RS_MCP_MAX_CALLS */
    json_t *approvals; /* mcp_approval_response items of the input, run before the model */
} resp_state;

static void state_free(void *p) {
    resp_state *s = p;
    if (!s) return;
    free(s->key);
    json_decref(s->echo);
    json_decref(s->history);
    json_decref(s->input_items);
    json_decref(s->items);
    json_decref(s->namespaced);
    json_decref(s->custom);
    gw_rs_mcp_free(s->mcp);
    json_decref(s->pending);
    json_decref(s->approvals);
    free(s->open_call_id);
    free(s->open_name);
    sipp_buf_free(&s->open_text);
    free(s);
}

static resp_state *state_of(const gw_gen_view *v) { return v->gen->route; }

/* ---- output items ------------------------------------------------------------------------------- */

static json_t *usage_json(const gw_gen_view *v) {
    sipp_request_stats s;
    gw_view_stats(v, &s);
    const resp_state *r = state_of(v); /* the turns before this one, when MCP calls ran between them */
    int in = s.prompt_tokens + r->prior_in, out = s.generated_tokens + r->prior_out;
    return json_pack("{s:i, s:{s:i}, s:i, s:{s:i}, s:i}", "input_tokens", in, "input_tokens_details",
                     "cached_tokens", s.cached_tokens + r->prior_cached, "output_tokens", out,
                     "output_tokens_details", "reasoning_tokens", 0, "total_tokens", in + out);
}

static json_t *text_part(const char *text) {
    return json_pack("{s:s, s:s, s:[], s:[]}", "type", "output_text", "text", text, "annotations",
                     "logprobs");
}

static json_t *reasoning_part(const char *text) {
    return json_pack("{s:s, s:s}", "type", "reasoning_text", "text", text);
}

/* An item of kind k; text is the message's or the reasoning's text (NULL: no part yet), or the
 * call's arguments. */
static json_t *make_item(item_kind k, const char *id, const char *status, const char *text,
                         const char *call_id, const char *name) {
    switch (k) {
    case ITEM_REASONING:
        return json_pack("{s:s, s:s, s:s, s:[], s:o}", "id", id, "type", "reasoning", "status", status,
                         "summary", "content", text ? json_pack("[o]", reasoning_part(text)) : json_array());
    case ITEM_CALL:
        return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "id", id, "type", "function_call", "status",
                         status, "call_id", call_id ? call_id : "", "name", name ? name : "", "arguments",
                         text ? text : "");
    case ITEM_MESSAGE:
    default:
        return json_pack("{s:s, s:s, s:s, s:s, s:o}", "id", id, "type", "message", "status", status, "role",
                         "assistant", "content", text ? json_pack("[o]", text_part(text)) : json_array());
    }
}

static bool is_custom(const resp_state *s, const char *name) {
    return name && json_object_get(s->custom, name) != NULL;
}

/* A custom tool's input from the arguments the model wrote for it ({"input": "..."}, see
 * custom_tool); arguments of another shape are passed on as they are. */
static json_t *custom_input(const char *arguments) {
    json_t *args = json_loads(arguments ? arguments : "", JSON_DECODE_ANY, NULL);
    json_t *input = json_object_get(args, "input");
    json_t *out = json_is_string(input) ? json_copy(input) : json_string(arguments ? arguments : "");
    json_decref(args);
    return out;
}

/* A function_call item as the API names it: a function a namespace tool holds has its own name and
 * its namespace (the model saw the two joined, see flatten_namespace); a custom tool's call is a
 * custom_tool_call whose input is the text the model wrote (see custom_tool). */
/* What an MCP tool's call is: 0 not one, MCP_RUN an mcp_call, MCP_ASK an mcp_approval_request. */
enum { MCP_NONE, MCP_RUN, MCP_ASK };
static int mcp_kind(const resp_state *s, const char *name) {
    bool ask = false;
    if (!gw_rs_mcp_find(s->mcp, name, NULL, &ask)) return MCP_NONE;
    return ask ? MCP_ASK : MCP_RUN;
}

/* A function_call item of an MCP tool as the item OpenAI's hosted MCP makes: an mcp_call (id
 * mcp_RID_N) or an mcp_approval_request (id mcpr_CALLID: the approval names the call it allows). */
static json_t *mcp_item(const resp_state *s, json_t *item, const char *name) {
    const char *label = NULL, *id = json_string_value(json_object_get(item, "id"));
    const char *call_id = json_string_value(json_object_get(item, "call_id"));
    const char *args = json_string_value(json_object_get(item, "arguments"));
    bool ask = false;
    gw_rs_mcp_find(s->mcp, name, &label, &ask);
    char mid[ID_SIZE];
    const char *rest = id && strchr(id, '_') ? strchr(id, '_') + 1 : "";
    if (ask)
        snprintf(mid, sizeof mid, "mcpr_%s", call_id && *call_id ? call_id : rest);
    else
        snprintf(mid, sizeof mid, "mcp_%s", rest);
    json_t *out =
        ask ? gw_rs_mcp_approval_item(mid, label, name, args) : gw_rs_mcp_call_item(mid, label, name, args);
    json_decref(item);
    return out;
}

static json_t *named_call(const resp_state *s, json_t *item) {
    const char *name = json_string_value(json_object_get(item, "name"));
    json_t *orig = name ? json_object_get(s->namespaced, name) : NULL;
    if (mcp_kind(s, name) != MCP_NONE) return mcp_item(s, item, name);
    if (orig) {
        json_object_set(item, "name", json_object_get(orig, "name"));
        json_object_set(item, "namespace", json_object_get(orig, "namespace"));
    } else if (is_custom(s, name)) {
        json_object_set_new(item, "type", json_string("custom_tool_call"));
        json_object_set_new(item, "input",
                            custom_input(json_string_value(json_object_get(item, "arguments"))));
        json_object_del(item, "arguments");
    }
    return item;
}

/* name: a call's function name (a custom tool's call is a ctc_ item). */
static void item_id(const resp_state *s, item_kind k, size_t call, const char *name, char *out, size_t cap) {
    if (k == ITEM_CALL)
        snprintf(out, cap, "%s_%s_%zu", is_custom(s, name) ? "ctc" : "fc", s->rid, call);
    else if (s->turn == 0)
        snprintf(out, cap, "%s_%s", k == ITEM_REASONING ? "rs" : "msg", s->rid);
    else /* a turn after MCP calls: its own message */
        snprintf(out, cap, "%s_%s_%d", k == ITEM_REASONING ? "rs" : "msg", s->rid, s->turn);
}

static bool incomplete(const gw_gen_view *v) {
    return state_of(v)->spent || strcmp(v->choices[0].finish, "length") == 0;
}

/* The output of a finished answer: its reasoning, its message (when it has text, or calls nothing),
 * then one function_call item per tool call. */
static json_t *output_items(const gw_gen_view *v) {
    const resp_state *s = state_of(v);
    json_t *out = json_array();
    const char *status = incomplete(v) ? "incomplete" : "completed";
    gw_answer a;
    gw_view_answer(v, &a);
    char id[ID_SIZE];
    if (a.reasoning && *a.reasoning) {
        item_id(s, ITEM_REASONING, 0, NULL, id, sizeof id);
        json_array_append_new(out, make_item(ITEM_REASONING, id, status, a.reasoning, NULL, NULL));
    }
    if (*a.text || a.n_calls == 0) {
        item_id(s, ITEM_MESSAGE, 0, NULL, id, sizeof id);
        json_array_append_new(out, make_item(ITEM_MESSAGE, id, status, a.text, NULL, NULL));
    }
    for (size_t k = 0; k < a.n_calls; k++) {
        gw_tool_call c;
        gw_view_call(v, k, &c);
        item_id(s, ITEM_CALL, s->call_base + k, c.name, id, sizeof id);
        json_array_append_new(
            out, named_call(s, make_item(ITEM_CALL, id, "completed", c.arguments, c.id, c.name)));
    }
    return out;
}

/* status: in_progress | completed | incomplete | failed. output and usage are stolen (NULL: none). */
static json_t *response_object(const gw_gen_view *v, const char *status, json_t *output, json_t *usage) {
    const resp_state *s = state_of(v);
    json_t *r =
        json_pack("{s:s, s:s, s:I, s:s, s:n, s:n, s:s, s:o, s:b}", "id", s->id, "object", "response",
                  "created_at", (json_int_t)s->created_at, "status", status, "error", "incomplete_details",
                  "model", v->target->cfg->name, "output", output ? output : json_array(), "store", s->store);
    json_object_update(r, s->echo);
    json_object_set_new(r, "usage", usage ? usage : json_null());
    if (strcmp(status, "incomplete") == 0)
        json_object_set_new(r, "incomplete_details", json_pack("{s:s}", "reason", "max_output_tokens"));
    return r;
}

/* Keeps the finished response (a copy of r) with what a follow-up turn needs: the conversation,
 * ending with this answer as a chat assistant message (its tool calls included). */
static void store_response(const gw_gen_view *v, json_t *r) {
    resp_state *s = state_of(v);
    if (!s->store) return;
    json_t *history = json_deep_copy(s->history);
    json_array_append_new(history, gw_message_json(&v->choices[0].message));
    /* A copy: r itself goes on to the client on this thread, the store's entry to others. */
    json_t *entry =
        json_pack("{s:o, s:O, s:o, s:s, s:s}", "response", json_deep_copy(r), "input_items", s->input_items,
                  "history", history, "key", s->key ? s->key : "", "target", v->target->cfg->name);
    if (!gw_responses_put(v->call->srv->responses, s->id, gw_auth_caller(v->call), entry)) {
        s->store = false;
        json_object_set_new(r, "store", json_false());
        fprintf(stderr,
                "sipp: response %s was not stored (the response says store: false): over [responses] "
                "max_stored_bytes (%zu) or max_stored = 0\n",
                s->id, v->call->srv->cfg->responses_max_bytes);
    }
}

/* The finished response with output (stolen), stored. */
static json_t *final_response(const gw_gen_view *v, json_t *output) {
    json_t *r = response_object(v, incomplete(v) ? "incomplete" : "completed", output, usage_json(v));
    store_response(v, r);
    return r;
}

/* The output: the items before the last turn (MCP's, and the turns between them), then its own. */
static json_t *rs_whole(const gw_gen_view *v) {
    resp_state *s = state_of(v);
    json_t *out = json_deep_copy(s->items);
    if (!s->consumed) {
        json_t *last = output_items(v);
        json_array_extend(out, last);
        json_decref(last);
    }
    return final_response(v, out);
}

/* ---- stream ------------------------------------------------------------------------------------- */

/* One event: "event: TYPE" and data holding type and sequence_number beside fields (stolen). */
static void event(const gw_gen_view *v, const char *type, json_t *fields, sipp_buf *out) {
    resp_state *s = state_of(v);
    json_object_set_new(fields, "type", json_string(type));
    json_object_set_new(fields, "sequence_number", json_integer(s->seq++));
    gw_sse_json(out, type, fields);
}

/* {"item_id", "output_index"} of the open item (and "content_index": 0 for a part's events). */
static json_t *position(const resp_state *s, bool part) {
    json_t *f = json_pack("{s:s, s:I}", "item_id", s->open_id, "output_index", (json_int_t)s->open_index);
    if (part) json_object_set_new(f, "content_index", json_integer(0));
    return f;
}

static void open_item(const gw_gen_view *v, item_kind k, size_t call, const char *call_id, const char *name,
                      sipp_buf *out) {
    resp_state *s = state_of(v);
    s->open = k;
    s->open_index = json_array_size(s->items);
    s->open_text.len = 0;
    item_id(s, k, call, name, s->open_id, sizeof s->open_id);
    free(s->open_call_id);
    free(s->open_name);
    s->open_call_id = call_id ? strdup(call_id) : NULL;
    s->open_name = name ? strdup(name) : NULL;
    json_t *item = named_call(s, make_item(k, s->open_id, "in_progress", NULL, call_id, name));
    sipp_strlcpy(s->open_id, json_string_value(json_object_get(item, "id")), sizeof s->open_id);
    json_array_append(s->items, item);
    event(v, "response.output_item.added",
          json_pack("{s:I, s:o}", "output_index", (json_int_t)s->open_index, "item", item), out);
    if (k == ITEM_MESSAGE) {
        json_t *f = position(s, true);
        json_object_set_new(f, "part", text_part(""));
        event(v, "response.content_part.added", f, out);
    }
}

static const char *open_text(const resp_state *s) { return s->open_text.data ? s->open_text.data : ""; }

static void close_item(const gw_gen_view *v, const char *status, sipp_buf *out) {
    resp_state *s = state_of(v);
    if (s->open == ITEM_NONE) return;
    const char *text = open_text(s);
    json_t *f = position(s, s->open != ITEM_CALL);
    if (s->open == ITEM_MESSAGE) {
        json_object_set_new(f, "text", json_string(text));
        json_object_set_new(f, "logprobs", json_array());
        event(v, "response.output_text.done", f, out);
        f = position(s, true);
        json_object_set_new(f, "part", text_part(text));
        event(v, "response.content_part.done", f, out);
    } else if (s->open == ITEM_REASONING) {
        json_object_set_new(f, "text", json_string(text));
        event(v, "response.reasoning_text.done", f, out);
    } else if (is_custom(s, s->open_name)) { /* the input whole: the model wrote it as JSON */
        json_t *input = custom_input(text);
        json_t *d = position(s, false);
        json_object_set(d, "delta", input);
        event(v, "response.custom_tool_call_input.delta", d, out);
        json_object_set_new(f, "input", input);
        event(v, "response.custom_tool_call_input.done", f, out);
    } else if (mcp_kind(s, s->open_name) == MCP_ASK) {
        json_decref(f); /* an approval request's arguments come whole, with the item */
    } else {
        json_object_set_new(f, "arguments", json_string(text));
        event(v,
              mcp_kind(s, s->open_name) == MCP_RUN ? "response.mcp_call_arguments.done"
                                                   : "response.function_call_arguments.done",
              f, out);
    }
    json_t *item = named_call(s, make_item(s->open, s->open_id, s->open == ITEM_CALL ? "completed" : status,
                                           text, s->open_call_id, s->open_name));
    json_array_set(s->items, s->open_index, item);
    if (s->open == ITEM_CALL && mcp_kind(s, s->open_name) == MCP_RUN) { /* done once it has run */
        json_array_append_new(s->pending, json_pack("{s:I, s:s}", "index", (json_int_t)s->open_index,
                                                    "call_id", s->open_call_id ? s->open_call_id : ""));
        json_decref(item); /* items holds it */
    } else
        event(v, "response.output_item.done",
              json_pack("{s:I, s:o}", "output_index", (json_int_t)s->open_index, "item", item), out);
    s->open = ITEM_NONE;
}

/* Text for an item of kind k (opened when another kind is open), with its delta event. */
static void text_delta(const gw_gen_view *v, item_kind k, const char *text, size_t len, sipp_buf *out) {
    resp_state *s = state_of(v);
    if (s->open != k) {
        close_item(v, "completed", out);
        open_item(v, k, 0, NULL, NULL, out);
    }
    sipp_buf_append(&s->open_text, text, len);
    int mcp = k == ITEM_CALL ? mcp_kind(s, s->open_name) : MCP_NONE;
    /* a custom tool's input and an approval request's arguments go out whole (close_item) */
    if (k == ITEM_CALL && (is_custom(s, s->open_name) || mcp == MCP_ASK)) return;
    json_t *f = position(s, k != ITEM_CALL);
    json_object_set_new(f, "delta", json_stringn(text, len));
    if (k == ITEM_MESSAGE) json_object_set_new(f, "logprobs", json_array());
    event(v,
          k == ITEM_MESSAGE     ? "response.output_text.delta"
          : k == ITEM_REASONING ? "response.reasoning_text.delta"
          : mcp == MCP_RUN      ? "response.mcp_call_arguments.delta"
                                : "response.function_call_arguments.delta",
          f, out);
}

/* The events of an MCP item (mcp_list_tools, mcp_call) whose work is done: "response.TYPE.in_progress"
 * and then .completed or .failed, each with the item's position. */
static void mcp_events(const gw_gen_view *v, json_t *item, size_t index, bool done, sipp_buf *out) {
    const char *type = json_string_value(json_object_get(item, "type"));
    bool failed = !json_is_null(json_object_get(item, "error")) && json_object_get(item, "error");
    char name[ID_SIZE];
    snprintf(name, sizeof name, "response.%s.%s", type,
             !done    ? "in_progress"
             : failed ? "failed"
                      : "completed");
    event(v, name,
          json_pack("{s:O, s:I}", "item_id", json_object_get(item, "id"), "output_index", (json_int_t)index),
          out);
}

/* An item whose work is done before the model's turn (mcp_list_tools, an approved mcp_call), whole. */
static void done_item(const gw_gen_view *v, json_t *item, size_t index, sipp_buf *out) {
    json_t *added = json_deep_copy(item);
    if (json_object_get(added, "status")) json_object_set_new(added, "status", json_string("in_progress"));
    event(v, "response.output_item.added",
          json_pack("{s:I, s:o}", "output_index", (json_int_t)index, "item", added), out);
    mcp_events(v, item, index, false, out);
    mcp_events(v, item, index, true, out);
    event(v, "response.output_item.done",
          json_pack("{s:I, s:O}", "output_index", (json_int_t)index, "item", item), out);
}

static void rs_begin(const gw_gen_view *v, sipp_buf *out) {
    event(v, "response.created",
          json_pack("{s:o}", "response", response_object(v, "in_progress", NULL, NULL)), out);
    event(v, "response.in_progress",
          json_pack("{s:o}", "response", response_object(v, "in_progress", NULL, NULL)), out);
    resp_state *s = state_of(v);
    for (size_t i = 0; i < json_array_size(s->items); i++)
        done_item(v, json_array_get(s->items, i), i, out);
}

static void rs_reasoning(const gw_gen_view *v, const char *text, size_t len, sipp_buf *out) {
    text_delta(v, ITEM_REASONING, text, len, out);
}

static void rs_text(const gw_gen_view *v, const char *text, size_t len, sipp_buf *out) {
    text_delta(v, ITEM_MESSAGE, text, len, out);
}

static void rs_tool_start(const gw_gen_view *v, const char *id, const char *name, sipp_buf *out) {
    close_item(v, "completed", out);
    open_item(v, ITEM_CALL, state_of(v)->n_calls++, id, name, out);
}

/* Arguments before any call started (a malformed upstream) have no item to go in. */
static void rs_tool_args(const gw_gen_view *v, const char *args, size_t len, sipp_buf *out) {
    if (state_of(v)->open == ITEM_CALL) text_delta(v, ITEM_CALL, args, len, out);
}

static void rs_end(const gw_gen_view *v, sipp_buf *out) {
    resp_state *s = state_of(v);
    const char *status = incomplete(v) ? "incomplete" : "completed";
    if (json_array_size(s->items) == 0 && s->open == ITEM_NONE)
        open_item(v, ITEM_MESSAGE, 0, NULL, NULL, out);
    close_item(v, status, out);
    json_t *r = final_response(v, json_deep_copy(s->items));
    event(v, incomplete(v) ? "response.incomplete" : "response.completed", json_pack("{s:o}", "response", r),
          out);
}

static void rs_fail(const gw_gen_view *v, gw_error_kind kind, const char *message, sipp_buf *out) {
    json_t *r = response_object(v, "failed", json_deep_copy(state_of(v)->items), usage_json(v));
    json_object_set_new(r, "error", json_pack("{s:s, s:s}", "code", gw_error_code(kind), "message", message));
    event(v, "response.failed", json_pack("{s:o}", "response", r), out);
}

/* ---- MCP calls between the model's turns ------------------------------------------------------- */

static void add_pending(resp_state *s, size_t index, const char *call_id) {
    json_array_append_new(
        s->pending, json_pack("{s:I, s:s}", "index", (json_int_t)index, "call_id", call_id ? call_id : ""));
}

/* Not streamed: this turn's items join the output, its mcp_call items to be run. */
static void take_turn(const gw_gen_view *v) {
    resp_state *s = state_of(v);
    json_t *items = output_items(v);
    gw_answer a;
    gw_view_answer(v, &a);
    size_t base = json_array_size(s->items), first_call = json_array_size(items) - a.n_calls;
    size_t i;
    json_t *item;
    json_array_foreach(items, i, item) {
        json_array_append(s->items, item);
        const char *type = json_string_value(json_object_get(item, "type"));
        if (i < first_call || strcmp(type, "mcp_call") != 0) continue;
        gw_tool_call c;
        gw_view_call(v, i - first_call, &c);
        add_pending(s, base + i, c.id);
    }
    json_decref(items);
    s->consumed = true;
}

/* Whether the answer called MCP tools to run; with only (ok_only) whether it called nothing else (no
 * approval to ask, no client tool): then the model's next turn follows. */
static bool calls_mcp(const gw_gen_view *v, bool only) {
    gw_answer a;
    gw_view_answer(v, &a);
    size_t run = 0;
    for (size_t k = 0; k < a.n_calls; k++) {
        gw_tool_call c;
        gw_view_call(v, k, &c);
        run += mcp_kind(state_of(v), c.name) == MCP_RUN;
    }
    return run > 0 && (!only || run == a.n_calls);
}

/* Runs the call of an mcp_call item, unless the response has run its max_tool_calls: then the item
 * fails unrun, and false says so. */
static bool run_call(resp_state *s, gw_call *call, json_t *item) {
    if (s->mcp_calls >= s->max_mcp_calls) {
        char err[SIPP_ERROR_SIZE];
        snprintf(err, sizeof err,
                 "not run: this response ran its %d MCP calls (max_tool_calls, at most %d: docs/gateway.md, "
                 "\"MCP\")",
                 s->max_mcp_calls, GW_RS_MCP_MAX_CALLS);
        json_object_set_new(item, "error", json_string(err));
        json_object_set_new(item, "status", json_string("failed"));
        return false;
    }
    s->mcp_calls++;
    gw_rs_mcp_run(call, item);
    return true;
}

/* Runs this turn's MCP calls (those past max_tool_calls fail unrun); true when all ran. */
static bool run_pending(const gw_gen_view *v, sipp_buf *out) {
    resp_state *s = state_of(v);
    bool all = true;
    size_t i;
    json_t *p;
    json_array_foreach(s->pending, i, p) {
        size_t index = (size_t)json_integer_value(json_object_get(p, "index"));
        json_t *item = json_array_get(s->items, index);
        all = run_call(s, v->call, item) && all;
        if (!v->gen->stream) continue;
        mcp_events(v, item, index, true, out);
        event(v, "response.output_item.done",
              json_pack("{s:I, s:O}", "output_index", (json_int_t)index, "item", item), out);
    }
    return all;
}

/* The next turn's chat: this turn's, then the answer and each call's result. A forced tool_choice
 * is "auto" from here on: the call it forced has been made. */
static json_t *next_chat(const gw_gen_view *v) {
    resp_state *s = state_of(v);
    json_t *chat = json_deep_copy(v->gen->chat);
    json_t *messages = json_object_get(chat, "messages");
    json_t *answer = gw_message_json(&v->choices[0].message);
    json_array_append(messages, answer);
    json_array_append_new(s->history, answer);
    size_t i;
    json_t *p;
    json_array_foreach(s->pending, i, p) {
        json_t *item = json_array_get(s->items, (size_t)json_integer_value(json_object_get(p, "index")));
        json_t *m = json_pack("{s:s, s:O, s:s}", "role", "tool", "tool_call_id",
                              json_object_get(p, "call_id"), "content", gw_rs_mcp_result_text(item));
        json_array_append(messages, m);
        json_array_append_new(s->history, m);
    }
    const char *tc = json_string_value(json_object_get(chat, "tool_choice"));
    if (json_object_get(chat, "tool_choice") && !(tc && strcmp(tc, "none") == 0))
        json_object_set_new(chat, "tool_choice", json_string("auto"));
    return chat;
}

/* max_output_tokens bounds the whole response, all its turns (OpenAI's meaning): the next turn may
 * make what this turn left of its max_tokens (*left, given to generate.c as the next chat's
 * max_tokens; -1 without a bound). False when nothing is left. */
static bool spend_turn(const gw_gen_view *v, int generated, json_int_t *left) {
    int max = v->gen->max_tokens; /* this turn's; -1: until the context is full */
    *left = max > 0 ? (json_int_t)max - generated : -1;
    state_of(v)->spent = max > 0 && *left <= 0;
    return !state_of(v)->spent;
}

/* The token limit ended the turn: its MCP calls may be cut off, so none runs. */
static gw_turn cut_short(const gw_gen_view *v, sipp_buf *out) {
    resp_state *s = state_of(v);
    size_t i;
    json_t *p;
    json_array_foreach(s->pending, i, p) {
        size_t index = (size_t)json_integer_value(json_object_get(p, "index"));
        json_t *item = json_array_get(s->items, index);
        json_object_set_new(item, "error",
                            json_string("not run: max_output_tokens ended the model's turn, and "
                                        "the call's arguments may be cut off"));
        json_object_set_new(item, "status", json_string("incomplete"));
        if (v->gen->stream)
            event(v, "response.output_item.done",
                  json_pack("{s:I, s:O}", "output_index", (json_int_t)index, "item", item), out);
    }
    json_array_clear(s->pending);
    return GW_TURN_FINAL;
}

/* Between turns (gw_format.next_turn): an answer that called MCP tools has them run (a stream first
 * says they are in progress, then their results), and unless it also asked for approval or called
 * a client's tool, the model's next turn is its conversation with the results. */
static gw_turn rs_next_turn(const gw_gen_view *v, sipp_buf *out, json_t **chat) {
    resp_state *s = state_of(v);
    if (!s->turn_open) {
        if (!s->mcp || !calls_mcp(v, false)) return GW_TURN_FINAL;
        if (v->gen->stream)
            close_item(v, "completed", out);
        else
            take_turn(v);
        if (incomplete(v)) return cut_short(v, out);
        s->turn_open = true;
        if (v->gen->stream) {
            size_t i;
            json_t *p;
            json_array_foreach(s->pending, i, p) {
                size_t index = (size_t)json_integer_value(json_object_get(p, "index"));
                mcp_events(v, json_array_get(s->items, index), index, false, out);
            }
            return GW_TURN_AGAIN;
        }
    }
    s->turn_open = false;
    bool all = run_pending(v, out);
    if (!all || !calls_mcp(v, true)) {
        json_array_clear(s->pending);
        return GW_TURN_FINAL;
    }
    sipp_request_stats st;
    gw_view_stats(v, &st);
    json_int_t left;
    if (!spend_turn(v, st.generated_tokens, &left)) {
        json_array_clear(s->pending);
        return GW_TURN_FINAL;
    }
    *chat = next_chat(v);
    if (left >= 0) json_object_set_new(*chat, "max_tokens", json_integer(left));
    json_array_clear(s->pending);
    s->prior_in += st.prompt_tokens;
    s->prior_cached += st.cached_tokens;
    s->prior_out += st.generated_tokens;
    gw_answer a;
    gw_view_answer(v, &a);
    s->call_base += a.n_calls;
    s->turn++;
    s->consumed = false;
    return GW_TURN_NEXT;
}

static const gw_format responses_format = {.id_prefix = "resp_",
                                           .renames = renames,
                                           .begin = rs_begin,
                                           .text = rs_text,
                                           .reasoning = rs_reasoning,
                                           .tool_start = rs_tool_start,
                                           .tool_args = rs_tool_args,
                                           .end = rs_end,
                                           .fail = rs_fail,
                                           .whole = rs_whole,
                                           .next_turn = rs_next_turn};

/* ---- request translation ------------------------------------------------------------------------ */

static char *flat_name(const char *ns, const char *name);

typedef struct xlate {
    gw_call *call;
    resp_state *s;
    const char *rid;     /* the response id's random part, which input item ids carry */
    json_t *messages;    /* chat messages sent to the model (instructions first) */
    json_t *history;     /* the same without the instructions: what the store keeps */
    json_t *input_items; /* this request's input, as message items with ids */
} xlate;

static void add_turn(xlate *x, const char *role, const char *text) {
    json_array_append_new(x->messages, json_pack("{s:s, s:s}", "role", role, "content", text));
    json_array_append_new(x->history, json_pack("{s:s, s:s}", "role", role, "content", text));
}

static void add_input_item(xlate *x, const char *role, const char *text) {
    char id[ID_SIZE];
    snprintf(id, sizeof id, "msg_%s_%zu", x->rid, json_array_size(x->input_items));
    json_array_append_new(x->input_items,
                          json_pack("{s:s, s:s, s:s, s:s, s:[{s:s, s:s}]}", "id", id, "type", "message",
                                    "status", "completed", "role", role, "content", "type",
                                    strcmp(role, "assistant") == 0 ? "output_text" : "input_text", "text",
                                    text));
}

/* An input_image part: image_url a data: URL, or an http(s) one with [media] fetch (media_parts.c),
 * becomes a chat image part after the text before it (flushed from text into parts); detail is a
 * hint, named in sipp-ignored. */
static bool image_part(xlate *x, json_t *part, size_t i, size_t k, sipp_buf *text, json_t *parts) {
    json_t *file = json_object_get(part, "file_id"), *url = json_object_get(part, "image_url");
    if (file && !json_is_null(file))
        return gw_reply_invalid_field(
            x->call,
            "'input[%zu].content[%zu].file_id' is not supported: this server keeps no "
            "uploaded files; send the image inline as image_url "
            "\"data:image/png;base64,...\"",
            i, k);
    if (!json_is_string(url))
        return gw_reply_invalid_field(
            x->call, "'input[%zu].content[%zu].image_url' must be a string (data:image/png;base64,...)", i,
            k);
    const char *why = gw_image_url_refusal(json_string_value(url), x->call->srv->cfg->media_fetch);
    if (why) return gw_reply_invalid_field(x->call, "'input[%zu].content[%zu].image_url' is %s", i, k, why);
    if (json_object_get(part, "detail")) gw_ignored_addf(x->call, "input[%zu].content[%zu].detail", i, k);
    gw_parts_add_text(parts, text->data, text->len);
    sipp_buf_free(text);
    json_array_append_new(parts, gw_image_part(json_string_value(url)));
    return true;
}

/* An audio clip as chat's input_audio part after the text before it (flushed from text). */
static void add_audio(sipp_buf *text, json_t *parts, const char *data, const char *format) {
    gw_parts_add_text(parts, text->data, text->len);
    sipp_buf_free(text);
    json_array_append_new(parts, gw_audio_part(data, format));
}

/* An input_audio part, as chat's: {"data": base64, "format": "wav" | "mp3" | "flac"}. */
static bool audio_part(xlate *x, json_t *part, size_t i, size_t k, sipp_buf *text, json_t *parts) {
    json_t *a = json_object_get(part, "input_audio");
    json_t *data = json_object_get(a, "data"), *format = json_object_get(a, "format");
    if (!json_is_string(data) || !json_is_string(format))
        return gw_reply_invalid_field(
            x->call,
            "'input[%zu].content[%zu].input_audio' must be {\"data\": \"BASE64\", \"format\": \"wav\"}", i,
            k);
    if (!gw_audio_format_known(json_string_value(format)))
        return gw_reply_invalid_field(
            x->call, "'input[%zu].content[%zu].input_audio.format' is '%s'; use wav, mp3 or flac", i, k,
            json_string_value(format));
    add_audio(text, parts, json_string_value(data), json_string_value(format));
    return true;
}

#define DATA_URL_PREFIX "data:"
#define BASE64_MARK ";base64,"

/* An input_file part: an audio file inline as file_data, a data: URL of an audio type, becomes
 * chat's input_audio part; any other file, a file_id (no uploads are kept here) or a file_url (no
 * fetching) is refused, naming the part. filename is bookkeeping, named in sipp-ignored. */
static bool file_part(xlate *x, json_t *part, size_t i, size_t k, sipp_buf *text, json_t *parts) {
    json_t *id = json_object_get(part, "file_id"), *url = json_object_get(part, "file_url");
    json_t *data = json_object_get(part, "file_data");
    if (id && !json_is_null(id))
        return gw_reply_invalid_field(
            x->call,
            "'input[%zu].content[%zu].file_id' is not supported: this server keeps no "
            "uploaded files; send the audio inline as file_data "
            "\"data:audio/wav;base64,...\"",
            i, k);
    if (url && !json_is_null(url))
        return gw_reply_invalid_field(
            x->call,
            "'input[%zu].content[%zu].file_url' is not supported: this server fetches "
            "nothing; send the audio inline as file_data \"data:audio/wav;base64,...\"",
            i, k);
    const char *d = json_string_value(data), *mark = d ? strstr(d, BASE64_MARK) : NULL;
    if (!d || strncmp(d, DATA_URL_PREFIX, strlen(DATA_URL_PREFIX)) != 0 || !mark)
        return gw_reply_invalid_field(
            x->call,
            "'input[%zu].content[%zu].file_data' must be a data: URL with base64 data "
            "(\"data:audio/wav;base64,...\")",
            i, k);
    const char *type = d + strlen(DATA_URL_PREFIX);
    const char *format = gw_audio_format_of_type(type, (size_t)(mark - type));
    if (!format)
        return gw_reply_invalid_field(
            x->call,
            "'input[%zu].content[%zu]' is an input_file of type '%.*s': only audio "
            "files (audio/wav, audio/mpeg or audio/flac) are taken here; send images "
            "as input_image parts",
            i, k, (int)(mark - type), type);
    if (json_object_get(part, "filename")) gw_ignored_addf(x->call, "input[%zu].content[%zu].filename", i, k);
    add_audio(text, parts, mark + strlen(BASE64_MARK), format);
    return true;
}

/* A message item's content: a string, or input_text / output_text parts joined into text, and with
 * *parts (NULL: media is not taken here) input_image, input_audio and input_file parts as chat parts
 * in *parts (made at the first one; the caller appends what is left in text). */
static bool item_text(xlate *x, json_t *content, size_t i, sipp_buf *text, json_t **parts) {
    if (json_is_string(content))
        return sipp_buf_append(text, json_string_value(content), json_string_length(content));
    if (!json_is_array(content))
        return gw_reply_invalid_field(
            x->call, "'input[%zu].content' must be a string or an array of input_text parts", i);
    size_t k;
    json_t *part;
    json_array_foreach(content, k, part) {
        const char *type = json_string_value(json_object_get(part, "type"));
        json_t *t = json_object_get(part, "text");
        if (!type) return gw_reply_invalid_field(x->call, "'input[%zu].content[%zu].type' is missing", i, k);
        bool (*media)(xlate *, json_t *, size_t, size_t, sipp_buf *, json_t *) =
            strcmp(type, "input_image") == 0   ? image_part
            : strcmp(type, "input_audio") == 0 ? audio_part
            : strcmp(type, "input_file") == 0  ? file_part
                                               : NULL;
        if (parts && media) {
            if (!*parts) *parts = json_array();
            if (!media(x, part, i, k, text, *parts)) return false;
            continue;
        }
        if (strcmp(type, "input_text") != 0 && strcmp(type, "output_text") != 0)
            return gw_reply_invalid_field(x->call,
                                          "'input[%zu].content[%zu].type' '%s' is not supported; only "
                                          "input_text, output_text%s parts are",
                                          i, k, type,
                                          parts ? ", input_image, input_audio and input_file (audio)" : "");
        if (!json_is_string(t))
            return gw_reply_invalid_field(x->call, "'input[%zu].content[%zu].text' must be a string", i, k);
        sipp_buf_append(text, json_string_value(t), json_string_length(t));
    }
    return true;
}

/* Keeps an input item (with an id) for GET /v1/responses/{id}/input_items. */
static void keep_item(xlate *x, json_t *item) {
    json_t *copy = json_deep_copy(item);
    if (!json_object_get(copy, "id")) {
        char id[ID_SIZE];
        snprintf(id, sizeof id, "item_%s_%zu", x->rid, json_array_size(x->input_items));
        json_object_set_new(copy, "id", json_string(id));
    }
    json_array_append_new(x->input_items, copy);
}

/* A function_call item joins the assistant turn before it (a model's text and its calls are one
 * chat message), or starts one. */
static void add_tool_call(json_t *messages, json_t *call) {
    json_t *last = json_array_get(messages, json_array_size(messages) - 1);
    const char *role = json_string_value(json_object_get(last, "role"));
    if (!role || strcmp(role, "assistant") != 0) {
        last = json_pack("{s:s, s:s}", "role", "assistant", "content", "");
        json_array_append_new(messages, last);
    }
    json_t *calls = json_object_get(last, "tool_calls");
    if (!calls) json_object_set_new(last, "tool_calls", calls = json_array());
    json_array_append(calls, call);
}

/* A past call (function_call or custom_tool_call item): its call_id and name, checked. */
static bool call_names(xlate *x, json_t *item, size_t i, json_t **id, json_t **name) {
    *id = json_object_get(item, "call_id");
    *name = json_object_get(item, "name");
    if (!json_is_string(*id))
        return gw_reply_invalid_field(x->call, "'input[%zu].call_id' must be a string", i);
    if (!json_is_string(*name))
        return gw_reply_invalid_field(x->call, "'input[%zu].name' must be a string", i);
    return true;
}

/* The call joins the assistant turn before it, as chat's tool call of function name. */
static void add_call(xlate *x, json_t *item, json_t *id, const char *name, json_t *args) {
    json_t *call = json_pack("{s:O, s:s, s:{s:s, s:O}}", "id", id, "type", "function", "function", "name",
                             name, "arguments", args);
    add_tool_call(x->messages, call);
    add_tool_call(x->history, call);
    json_decref(call);
    keep_item(x, item);
}

static bool function_call_item(xlate *x, json_t *item, size_t i) {
    json_t *id, *name, *args = json_object_get(item, "arguments");
    if (!call_names(x, item, i, &id, &name)) return false;
    if (!json_is_string(args))
        return gw_reply_invalid_field(
            x->call, "'input[%zu].arguments' must be a string (the arguments as JSON text)", i);
    json_t *ns = json_object_get(item, "namespace");
    if (ns && !json_is_null(ns) && !json_is_string(ns))
        return gw_reply_invalid_field(x->call, "'input[%zu].namespace' must be a string", i);
    char *flat = json_is_string(ns) ? flat_name(json_string_value(ns), json_string_value(name)) : NULL;
    add_call(x, item, id, flat ? flat : json_string_value(name), args);
    free(flat);
    return true;
}

/* A custom tool's past call: the model saw the tool as a function of one string, "input" (see
 * custom_tool), so its call is given back in that shape. */
static bool custom_call_item(xlate *x, json_t *item, size_t i) {
    json_t *id, *name, *input = json_object_get(item, "input");
    if (!call_names(x, item, i, &id, &name)) return false;
    if (!json_is_string(input))
        return gw_reply_invalid_field(x->call, "'input[%zu].input' must be a string (the tool's input)", i);
    json_t *obj = json_pack("{s:O}", "input", input);
    char *text = json_dumps(obj, JSON_COMPACT);
    json_decref(obj);
    json_t *args = json_string(text ? text : "{}");
    add_call(x, item, id, json_string_value(name), args);
    json_decref(args);
    free(text);
    return true;
}

static bool function_output_item(xlate *x, json_t *item, size_t i) {
    json_t *id = json_object_get(item, "call_id"), *output = json_object_get(item, "output");
    if (!json_is_string(id))
        return gw_reply_invalid_field(x->call, "'input[%zu].call_id' must be a string", i);
    sipp_buf text = {0};
    char where[64];
    snprintf(where, sizeof where, "input[%zu].output", i);
    if (!json_is_string(output) && !json_is_array(output))
        return gw_reply_invalid_field(x->call, "'%s' must be a string or input_text parts", where);
    bool ok = item_text(x, output, i, &text, NULL);
    if (ok) {
        json_t *m = json_pack("{s:s, s:O, s:s}", "role", "tool", "tool_call_id", id, "content",
                              text.data ? text.data : "");
        json_array_append(x->messages, m);
        json_array_append_new(x->history, m);
        keep_item(x, item);
    }
    sipp_buf_free(&text);
    return ok;
}

/* ---- MCP items of the input ---- */

/* A string field of input[i]; NULL after replying when it is not one. */
static const char *item_string(xlate *x, json_t *item, size_t i, const char *key) {
    const char *v = json_string_value(json_object_get(item, key));
    if (!v) gw_reply_invalid_field(x->call, "'input[%zu].%s' must be a string", i, key);
    return v;
}

/* A past mcp_call (a client that sends the conversation back whole): the call and its result, as
 * the model saw them. */
static bool mcp_call_item(xlate *x, json_t *item, size_t i) {
    const char *id = item_string(x, item, i, "id"), *name = id ? item_string(x, item, i, "name") : NULL;
    json_t *args = json_object_get(item, "arguments");
    if (!name) return false;
    if (!json_is_string(args))
        return gw_reply_invalid_field(x->call, "'input[%zu].arguments' must be a string", i);
    json_t *jid = json_string(id);
    add_call(x, item, jid, name, args);
    json_t *m = json_pack("{s:s, s:O, s:s}", "role", "tool", "tool_call_id", jid, "content",
                          gw_rs_mcp_result_text(item));
    json_decref(jid);
    json_array_append(x->messages, m);
    json_array_append_new(x->history, m);
    return true;
}

#define APPROVAL_PREFIX "mcpr_"

/* A past mcp_approval_request: the model's call, made under the call id its approval names. */
static bool mcp_request_item(xlate *x, json_t *item, size_t i) {
    const char *id = item_string(x, item, i, "id"), *name = id ? item_string(x, item, i, "name") : NULL;
    json_t *args = json_object_get(item, "arguments");
    if (!name) return false;
    if (!json_is_string(args))
        return gw_reply_invalid_field(x->call, "'input[%zu].arguments' must be a string", i);
    size_t n = strlen(APPROVAL_PREFIX);
    json_t *jid = json_string(strncmp(id, APPROVAL_PREFIX, n) == 0 ? id + n : id);
    add_call(x, item, jid, name, args);
    json_decref(jid);
    return true;
}

/* The model's call that approval request id asks about, in the conversation so far; NULL if none. */
static json_t *approved_call(json_t *messages, const char *id) {
    size_t n = strlen(APPROVAL_PREFIX);
    const char *call = strncmp(id, APPROVAL_PREFIX, n) == 0 ? id + n : id;
    for (size_t i = json_array_size(messages); i-- > 0;) {
        size_t k;
        json_t *c;
        json_array_foreach(json_object_get(json_array_get(messages, i), "tool_calls"), k, c) {
            const char *cid = json_string_value(json_object_get(c, "id"));
            if (cid && (strcmp(cid, call) == 0 || strcmp(cid, id) == 0)) return c;
        }
    }
    return NULL;
}

/* An mcp_approval_response: the call's result takes its place in the conversation (a tool message,
 * filled in by run_approvals once the request's mcp tools are known). */
static bool mcp_response_item(xlate *x, json_t *item, size_t i) {
    const char *id = item_string(x, item, i, "approval_request_id");
    json_t *approve = json_object_get(item, "approve");
    if (!id) return false;
    if (!json_is_boolean(approve))
        return gw_reply_invalid_field(x->call, "'input[%zu].approve' must be true or false", i);
    json_t *call = approved_call(x->messages, id);
    if (!call)
        return gw_reply_invalid_field(
            x->call,
            "'input[%zu].approval_request_id' is '%s', which is no mcp_approval_request of "
            "this conversation; give previous_response_id, or the request item in input",
            i, id);
    json_t *m = json_pack("{s:s, s:O, s:s}", "role", "tool", "tool_call_id", json_object_get(call, "id"),
                          "content", "");
    json_array_append(x->messages, m);
    json_array_append(x->history, m);
    if (!x->s->approvals) x->s->approvals = json_array();
    json_array_append_new(x->s->approvals, json_pack("{s:o, s:O, s:I, s:s, s:O}", "message", m, "function",
                                                     json_object_get(call, "function"), "input",
                                                     (json_int_t)i, "id", id, "approve", approve));
    keep_item(x, item);
    return true;
}

/* The calls the input approves run now, before the model's turn, each an mcp_call item of the
 * output; a denied one tells the model it was not run. */
static bool run_approvals(xlate *x) {
    resp_state *s = x->s;
    size_t k;
    json_t *a;
    json_array_foreach(s->approvals, k, a) {
        json_t *fn = json_object_get(a, "function"), *msg = json_object_get(a, "message");
        const char *name = json_string_value(json_object_get(fn, "name")), *label = NULL;
        if (!gw_rs_mcp_find(s->mcp, name, &label, NULL))
            return gw_reply_invalid_field(
                x->call,
                "'input[%lld]' answers a call of '%s', which no mcp tool of this request "
                "offers; send the mcp tool in tools again",
                (long long)json_integer_value(json_object_get(a, "input")), name ? name : "");
        if (!json_is_true(json_object_get(a, "approve"))) {
            json_object_set_new(msg, "content", json_string("The user declined this call; it was not run."));
            continue;
        }
        char id[ID_SIZE];
        snprintf(id, sizeof id, "mcp_%s_a%zu", s->rid, k);
        json_t *item =
            gw_rs_mcp_call_item(id, label, name, json_string_value(json_object_get(fn, "arguments")));
        json_object_set(item, "approval_request_id", json_object_get(a, "id"));
        run_call(s, x->call, item);
        json_object_set_new(msg, "content", json_string(gw_rs_mcp_result_text(item)));
        json_array_append_new(s->items, item);
    }
    return true;
}

/* MCP tools run between the model's turns, which only a local target's generation has (generate.c's
 * next_turn): a remote or supervised target's answer is relayed whole, so such a request is refused
 * before any call is made. */
static bool local_target(xlate *x, json_t *root) {
    if (!x->s->mcp) return true;
    const char *model = json_string_value(json_object_get(root, "model"));
    gw_target *t = model ? gw_target_find(x->call->srv, model) : gw_targets_only(x->call->srv);
    if (!t || gw_kind_of(t) == &gw_kind_llama) return true;
    return gw_reply_invalid_field(
        x->call,
        "'tools' has mcp tools, which run on local targets only; target '%s' is served by "
        "another process (give a local model, or run the tools yourself as function tools)",
        t->cfg->name);
}

static bool input_item(xlate *x, json_t *item, size_t i) {
    if (!json_is_object(item))
        return gw_reply_invalid_field(x->call, "'input[%zu]' must be an object (a message item)", i);
    const char *type = json_string_value(json_object_get(item, "type"));
    if (type && strcmp(type, "mcp_list_tools") == 0) {
        keep_item(x, item); /* the model is shown the tools of this request's mcp tools */
        return true;
    }
    if (type && strcmp(type, "mcp_call") == 0) return mcp_call_item(x, item, i);
    if (type && strcmp(type, "mcp_approval_request") == 0) return mcp_request_item(x, item, i);
    if (type && strcmp(type, "mcp_approval_response") == 0) return mcp_response_item(x, item, i);
    if (type && strcmp(type, "function_call") == 0) return function_call_item(x, item, i);
    if (type && strcmp(type, "custom_tool_call") == 0) return custom_call_item(x, item, i);
    if (type && (strcmp(type, "function_call_output") == 0 || strcmp(type, "custom_tool_call_output") == 0))
        return function_output_item(x, item, i);
    if (type && strcmp(type, "reasoning") == 0)
        return true; /* templates drop past reasoning; see docs/gateway.md */
    if (type && strcmp(type, "message") != 0)
        return gw_reply_invalid_field(
            x->call,
            "'input[%zu].type' '%s' is not supported; use message, function_call, "
            "function_call_output, custom_tool_call, custom_tool_call_output or mcp items",
            i, type);
    const char *role = json_string_value(json_object_get(item, "role"));
    if (!role)
        return gw_reply_invalid_field(
            x->call, "'input[%zu].role' must be a string (user, system, developer or assistant)", i);
    if (strcmp(role, "user") != 0 && strcmp(role, "system") != 0 && strcmp(role, "developer") != 0 &&
        strcmp(role, "assistant") != 0)
        return gw_reply_invalid_field(
            x->call, "'input[%zu].role' is '%s'; use user, system, developer or assistant", i, role);
    sipp_buf text = {0};
    json_t *parts = NULL;
    bool ok = item_text(x, json_object_get(item, "content"), i, &text, &parts);
    if (ok && parts) { /* with images: the turn's content is its parts; the item is kept as it came */
        gw_parts_add_text(parts, text.data, text.len);
        const char *r = strcmp(role, "developer") == 0 ? "system" : role;
        json_array_append_new(x->messages, json_pack("{s:s, s:O}", "role", r, "content", parts));
        json_array_append_new(x->history, json_pack("{s:s, s:O}", "role", r, "content", parts));
        keep_item(x, item);
    } else if (ok) {
        const char *t = text.data ? text.data : "";
        add_turn(x, strcmp(role, "developer") == 0 ? "system" : role, t);
        add_input_item(x, role, t);
    }
    json_decref(parts);
    sipp_buf_free(&text);
    return ok;
}

static bool translate_input(xlate *x, json_t *input) {
    if (!input || json_is_null(input))
        return gw_reply_invalid_field(x->call,
                                      "'input' is missing: give a string or an array of message items");
    if (json_is_string(input)) {
        add_turn(x, "user", json_string_value(input));
        add_input_item(x, "user", json_string_value(input));
        return true;
    }
    if (!json_is_array(input))
        return gw_reply_invalid_field(x->call, "'input' must be a string or an array of message items");
    size_t i;
    json_t *item;
    json_array_foreach(input, i, item) if (!input_item(x, item, i)) return false;
    return true;
}

/* text.format -> response_format; {"format": {"type": "json_schema", "name", "schema", "strict"}}
 * becomes chat's {"type": "json_schema", "json_schema": {...}}. */
static bool translate_text(xlate *x, json_t *text, json_t *chat) {
    if (!text || json_is_null(text)) return true;
    if (!json_is_object(text))
        return gw_reply_invalid_field(x->call,
                                      "'text' must be an object such as {\"format\": {\"type\": \"text\"}}");
    const char *key;
    json_t *v;
    json_object_foreach(text, key, v) {
        if (strcmp(key, "verbosity") == 0) {
            if (!json_is_string(v) && !json_is_null(v))
                return gw_reply_invalid_field(x->call,
                                              "'text.verbosity' must be \"low\", \"medium\" or \"high\"");
            gw_ignored_add(x->call, "text.verbosity");
        } else if (strcmp(key, "format") != 0) {
            return gw_reply_invalid_field(
                x->call, "'text.%s' is not supported; only text.format and text.verbosity are", key);
        }
    }
    json_t *format = json_object_get(text, "format");
    if (!format) return true;
    const char *type = json_string_value(json_object_get(format, "type"));
    if (!json_is_object(format) || !type)
        return gw_reply_invalid_field(x->call, "'text.format' must be an object with a \"type\"");
    if (strcmp(type, "json_schema") == 0) {
        json_t *schema = json_object();
        gw_copy_field(format, "name", schema, NULL);
        gw_copy_field(format, "schema", schema, NULL);
        gw_copy_field(format, "strict", schema, NULL);
        gw_copy_field(format, "description", schema, NULL);
        json_object_set_new(chat, "response_format",
                            json_pack("{s:s, s:o}", "type", "json_schema", "json_schema", schema));
    } else {
        json_object_set(chat, "response_format", format);
    }
    return true;
}

/* The name the model sees for function name of namespace ns (malloc'd). */
static char *flat_name(const char *ns, const char *name) {
    size_t n = strlen(ns) + strlen(NAMESPACE_JOIN) + strlen(name) + 1;
    char *out = malloc(n);
    if (out) snprintf(out, n, "%s%s%s", ns, NAMESPACE_JOIN, name);
    return out;
}

/* Built-in tools: the provider runs them, sipp does not, so the model is not shown them. */
static bool is_builtin_tool(const char *type) {
    static const char *const builtin[] = {
        "web_search",  "web_search_preview", "web_search_2025_08_26", "web_search_preview_2025_03_11",
        "file_search", "code_interpreter",   "computer_use",          "computer_use_preview",
        "computer",    "image_generation",   "tool_search",           NULL};
    for (const char *const *b = builtin; *b; b++)
        if (strcmp(type, *b) == 0) return true;
    return false;
}

static json_t *function_tool(json_t *t, const char *name) {
    json_t *n = json_string(name);
    json_t *tool = gw_function_tool(t, n, "parameters", true);
    json_decref(n);
    return tool;
}

/* A namespace tool's functions, flattened into out as "<namespace>__<name>" (the model sees one
 * list of functions; named_call gives a call back its namespace). */
static bool flatten_namespace(xlate *x, json_t *t, size_t i, json_t *out) {
    const char *ns = json_string_value(json_object_get(t, "name"));
    json_t *inner = json_object_get(t, "tools");
    if (!ns || !json_is_array(inner))
        return gw_reply_invalid_field(x->call,
                                      "'tools[%zu]' (a namespace) must have a \"name\" and \"tools\"", i);
    if (!x->s->namespaced) x->s->namespaced = json_object();
    size_t k;
    json_t *f;
    json_array_foreach(inner, k, f) {
        const char *type = json_string_value(json_object_get(f, "type"));
        const char *name = json_string_value(json_object_get(f, "name"));
        if (!type || strcmp(type, "function") != 0 || !name)
            return gw_reply_invalid_field(
                x->call,
                "'tools[%zu].tools[%zu]' must be a function tool with a \"name\" (type \"function\")", i, k);
        char *flat = flat_name(ns, name);
        if (!flat) return gw_reply_invalid_field(x->call, "out of memory");
        json_array_append_new(out, function_tool(f, flat));
        json_object_set_new(x->s->namespaced, flat, json_pack("{s:s, s:s}", "namespace", ns, "name", name));
        free(flat);
    }
    return true;
}

/* A custom (freeform) tool takes text, not JSON: it becomes chat's custom tool ({"type": "custom",
 * "custom": {...}}, its format's grammar under "grammar"), which the chat layer shows the model as a
 * function of one string, "input", whose sampling the grammar constrains (src/chat/custom_tools.h);
 * its calls go back as custom_tool_call items holding that string (named_call). */
static bool custom_tool(xlate *x, json_t *t, size_t i, json_t *out) {
    const char *name = json_string_value(json_object_get(t, "name"));
    if (!name || !*name)
        return gw_reply_invalid_field(x->call, "'tools[%zu].name' must be a non-empty string", i);
    json_t *format = json_object_get(t, "format");
    const char *ftype = json_string_value(json_object_get(format, "type"));
    const char *grammar = json_string_value(json_object_get(format, "definition"));
    if (format && !json_is_null(format) &&
        (!ftype || (strcmp(ftype, "text") != 0 && strcmp(ftype, "grammar") != 0)))
        return gw_reply_invalid_field(x->call, "'tools[%zu].format.type' must be \"text\" or \"grammar\"", i);
    if (ftype && strcmp(ftype, "grammar") == 0 && !grammar)
        return gw_reply_invalid_field(x->call, "'tools[%zu].format.definition' must be the grammar's text",
                                      i);
    json_t *custom = json_pack("{s:s}", "name", name);
    gw_copy_field(t, "description", custom, NULL);
    if (grammar) {
        json_t *syntax = json_object_get(format, "syntax");
        json_object_set_new(custom, "format",
                            json_pack("{s:s, s:{s:O?, s:s}}", "type", "grammar", "grammar", "syntax", syntax,
                                      "definition", grammar));
    }
    json_array_append_new(out, json_pack("{s:s, s:o}", "type", "custom", "custom", custom));
    if (!x->s->custom) x->s->custom = json_object();
    json_object_set_new(x->s->custom, name, json_true());
    return true;
}

/* A function tool as it is, a namespace tool flattened, a custom tool as a function of its input, a
 * built-in tool left out; others refused. */
static gw_tool_fate function_or_namespace(gw_call *call, json_t *t, size_t i, json_t *out, void *ctx) {
    const char *type = json_string_value(json_object_get(t, "type"));
    if (type && strcmp(type, "namespace") == 0)
        return flatten_namespace(ctx, t, i, out) ? GW_TOOL_ADDED : GW_TOOL_REFUSED;
    if (type && strcmp(type, "custom") == 0)
        return custom_tool(ctx, t, i, out) ? GW_TOOL_ADDED : GW_TOOL_REFUSED;
    if (type && strcmp(type, "mcp") == 0) { /* a configured MCP server's tools (responses_mcp.c) */
        xlate *x = ctx;
        return gw_rs_mcp_tool(call, &x->s->mcp, t, i, out, x->rid) ? GW_TOOL_ADDED : GW_TOOL_REFUSED;
    }
    if (type && is_builtin_tool(type)) return GW_TOOL_LEFT_OUT;
    if (!type || strcmp(type, "function") != 0) {
        gw_reply_invalid_field(
            call,
            "'tools[%zu].type' must be \"function\", \"custom\", \"namespace\" or \"mcp\" (built-in tools "
            "such as web_search are left out; other tools are not available here)",
            i);
        return GW_TOOL_REFUSED;
    }
    const char *name = json_string_value(json_object_get(t, "name"));
    json_array_append_new(out, function_tool(t, name ? name : ""));
    return GW_TOOL_ADDED;
}

/* tool_choice {"type": "mcp", "server_label", "name"}: that MCP tool is forced (for the first turn:
 * see next_chat); without a name, one of the server's tools. */
static bool mcp_choice(xlate *x, json_t *tc, json_t *chat) {
    const char *label = json_string_value(json_object_get(tc, "server_label"));
    const char *name = json_string_value(json_object_get(tc, "name")), *has = NULL;
    if (!label)
        return gw_reply_invalid_field(x->call, "'tool_choice.server_label' must name the mcp tool's server");
    if (!name) {
        json_object_set_new(chat, "tool_choice", json_string("required"));
        return true;
    }
    if (!gw_rs_mcp_find(x->s->mcp, name, &has, NULL) || strcmp(has, label) != 0)
        return gw_reply_invalid_field(
            x->call,
            "'tool_choice' forces '%s' of the MCP server '%s', which no mcp tool of this "
            "request offers (see its tools with GET /v1/mcp/tools)",
            name, label);
    json_object_set_new(chat, "tool_choice",
                        json_pack("{s:s, s:{s:s}}", "type", "function", "function", "name", name));
    return true;
}

/* Function tools -> chat's {"type": "function", "function": {...}}; namespace tools flattened,
 * built-in tools left out and named in sipp-ignored (forcing one with tool_choice is a 400). */
static bool translate_tools(xlate *x, json_t *root, json_t *chat) {
    json_t *tc = json_object_get(root, "tool_choice");
    const char *tc_type = json_string_value(json_object_get(tc, "type"));
    if (tc_type && is_builtin_tool(tc_type))
        return gw_reply_invalid_field(
            x->call,
            "'tool_choice' forces the built-in tool '%s', which this server does not "
            "run; force a function tool or use \"auto\"",
            tc_type);
    if (!gw_translate_tools(x->call, json_object_get(root, "tools"), chat,
                            "'tools' must be an array of function tools", function_or_namespace, x))
        return false;
    if (tc_type && strcmp(tc_type, "mcp") == 0) return mcp_choice(x, tc, chat);
    if (json_is_object(tc) && json_is_string(json_object_get(tc, "name"))) {
        const char *ns = json_string_value(json_object_get(tc, "namespace"));
        char *flat = ns ? flat_name(ns, json_string_value(json_object_get(tc, "name"))) : NULL;
        const char *name = flat ? flat : json_string_value(json_object_get(tc, "name"));
        bool listed = gw_forced_tool_listed(
            x->call, chat, name, tc_type && strcmp(tc_type, "custom") == 0 ? "custom tool" : "function");
        json_object_set_new(chat, "tool_choice",
                            json_pack("{s:s, s:{s:s}}", "type", "function", "function", "name", name));
        free(flat);
        if (!listed) return false;
    } else if (tc) {
        json_object_set(chat, "tool_choice", tc);
    }
    /* The Responses API's default is true (chat completions' is false). */
    if (!gw_copy_field(root, "parallel_tool_calls", chat, NULL) &&
        json_array_size(json_object_get(chat, "tools")))
        json_object_set_new(chat, "parallel_tool_calls", json_true());
    return true;
}

/* Characters of UTF-8 text (jansson has checked that it is UTF-8): the bytes that begin one. */
static size_t utf8_chars(const char *text, size_t len) {
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += ((unsigned char)text[i] & 0xC0) != 0x80;
    return n;
}

/* metadata within OpenAI's bounds: it is stored with the response, so an unbounded one would let a
 * caller fill the store with a single request. */
static bool check_metadata(gw_call *call, json_t *md) {
    if (!md || json_is_null(md)) return true;
    if (!json_is_object(md)) return gw_reply_invalid_field(call, "'metadata' must be an object of strings");
    if (json_object_size(md) > METADATA_MAX_PAIRS)
        return gw_reply_invalid_field(call, "'metadata' has %zu pairs; at most %d are allowed",
                                      json_object_size(md), METADATA_MAX_PAIRS);
    const char *key;
    json_t *v;
    json_object_foreach(md, key, v) {
        size_t chars = utf8_chars(key, strlen(key));
        if (chars > METADATA_MAX_KEY_CHARS)
            return gw_reply_invalid_field(
                call, "'metadata' has a key of %zu characters; keys are at most %d characters", chars,
                METADATA_MAX_KEY_CHARS);
        if (!json_is_string(v)) return gw_reply_invalid_field(call, "'metadata.%s' must be a string", key);
        if (utf8_chars(json_string_value(v), json_string_length(v)) > METADATA_MAX_VALUE_CHARS)
            return gw_reply_invalid_field(call, "'metadata.%s' is over %d characters; shorten it", key,
                                          METADATA_MAX_VALUE_CHARS);
    }
    return true;
}

/* Fields accepted because they cannot change the output, and those only some values of which can
 * be honoured. */
static bool check_options(xlate *x, json_t *root) {
    json_t *r = json_object_get(root, "reasoning");
    if (r && !json_is_null(r)) {
        json_t *effort = json_object_get(r, "effort"), *summary = json_object_get(r, "summary");
        if (!json_is_object(r))
            return gw_reply_invalid_field(x->call,
                                          "'reasoning' must be an object such as {\"effort\": \"low\"}");
        if (effort && !json_is_null(effort) && !json_is_string(effort))
            return gw_reply_invalid_field(
                x->call, "'reasoning.effort' must be a string (none, minimal, low, medium, high)");
        if (summary && !json_is_null(summary) && !json_is_string(summary))
            return gw_reply_invalid_field(x->call,
                                          "'reasoning.summary' must be a string (auto, concise, detailed)");
        /* The reasoning comes back whole as reasoning items; no summary is made of it. */
        if (json_is_string(summary)) gw_ignored_add(x->call, "reasoning.summary");
        const char *key;
        json_t *v;
        json_object_foreach(r, key, v) {
            if (strcmp(key, "effort") != 0 && strcmp(key, "summary") != 0)
                return gw_reply_invalid_field(
                    x->call, "'reasoning.%s' is not supported; only effort and summary are", key);
        }
    }
    json_t *inc = json_object_get(root, "include");
    if (inc && !json_is_null(inc)) {
        if (!json_is_array(inc))
            return gw_reply_invalid_field(x->call, "'include' must be an array of strings");
        size_t i;
        json_t *e;
        json_array_foreach(inc, i, e) {
            /* Extra output sipp cannot produce (encrypted reasoning: reasoning is never hidden here;
             * results of built-in tools it does not run; logprobs the route does not render). */
            if (!json_is_string(e))
                return gw_reply_invalid_field(x->call, "'include[%zu]' must be a string", i);
            gw_ignored_addf(x->call, "include[%zu]", i);
        }
    }
    const char *trunc = json_string_value(json_object_get(root, "truncation"));
    if (json_object_get(root, "truncation") && !json_is_null(json_object_get(root, "truncation")) &&
        (!trunc || strcmp(trunc, "disabled") != 0))
        return gw_reply_invalid_field(
            x->call, "'truncation' must be \"disabled\": a prompt over the context is an error, never cut");
    if (!check_metadata(x->call, json_object_get(root, "metadata"))) return false;
    json_t *mtc = json_object_get(root, "max_tool_calls");
    x->s->max_mcp_calls = GW_RS_MCP_MAX_CALLS;
    if (mtc && !json_is_null(mtc) && (!json_is_integer(mtc) || json_integer_value(mtc) < 1))
        return gw_reply_invalid_field(x->call, "'max_tool_calls' must be a whole number of at least 1");
    if (json_is_integer(mtc) && json_integer_value(mtc) < GW_RS_MCP_MAX_CALLS)
        x->s->max_mcp_calls = (int)json_integer_value(mtc);
    json_t *st = json_object_get(root, "store");
    if (st && !json_is_boolean(st)) return gw_reply_invalid_field(x->call, "'store' must be true or false");
    return true;
}

static json_t *echo_fields(json_t *root) {
    json_t *e =
        json_pack("{s:n, s:n, s:n, s:f, s:f, s:{s:n, s:n}, s:{s:{s:s}}, s:s, s:[], s:b, s:s, s:n, s:{}}",
                  "instructions", "max_output_tokens", "previous_response_id", "temperature",
                  OPENAI_DEFAULT_TEMPERATURE, "top_p", OPENAI_DEFAULT_TOP_P, "reasoning", "effort", "summary",
                  "text", "format", "type", "text", "tool_choice", "auto", "tools", "parallel_tool_calls", 1,
                  "truncation", "disabled", "user", "metadata");
    static const char *const echoed[] = {"instructions",
                                         "max_output_tokens",
                                         "previous_response_id",
                                         "temperature",
                                         "top_p",
                                         "tool_choice",
                                         "tools",
                                         "parallel_tool_calls",
                                         "user",
                                         "metadata",
                                         "text",
                                         NULL};
    for (const char *const *k = echoed; *k; k++) {
        json_t *v = json_object_get(root, *k);
        if (v && !json_is_null(v)) json_object_set(e, *k, v);
    }
    if (json_is_object(json_object_get(root, "text")) &&
        !json_object_get(json_object_get(root, "text"), "format"))
        json_object_set_new(e, "text", json_pack("{s:{s:s}}", "format", "type", "text"));
    return e;
}

/* Whose stored responses the call may see: all (NULL) for an admin, else its own. */
static const char *viewer(const gw_call *call) { return gw_auth_admin(call) ? NULL : gw_auth_caller(call); }

/* The stored entry under id as the call may see it (see the top), or NULL. */
static json_t *stored(gw_call *call, const char *id) {
    json_t *e = gw_responses_get(call->srv->responses, id, viewer(call));
    const char *name = json_string_value(json_object_get(e, "target"));
    gw_target *t = name ? gw_target_find(call->srv, name) : NULL;
    if (e && (!t || !gw_auth_allows(call, t->cfg))) {
        json_decref(e);
        return NULL;
    }
    return e;
}

/* A Responses request translated into a chat, then generated, or (local set) answered by local on
 * a local target instead: /v1/responses/input_tokens. */
static void responses_route(gw_call *call, void (*local)(gw_call *, gw_target *, gw_gen *)) {
    json_t *root = gw_body_object(call);
    if (!root) return;
    resp_state *s = calloc(1, sizeof *s);
    json_t *chat = json_object();
    xlate x = {
        .call = call, .s = s, .messages = json_array(), .history = json_array(), .input_items = json_array()};
    bool ok =
        s && chat && gw_fields_check(call, root, gw_fields_responses, API_NAME) && check_options(&x, root);
    json_t *prev = NULL;
    if (ok && !sipp_random_hex(s->rid, RID_BYTES)) { /* made here, never from the request */
        gw_reply_error(call, GW_E_INTERNAL, "cannot make a response id: getrandom failed (%s)",
                       strerror(errno));
        ok = false;
    }
    if (ok) {
        snprintf(s->id, sizeof s->id, "resp_%s", s->rid);
        x.rid = s->rid;
        s->items = json_array();
        s->pending = json_array();
        s->created_at = sipp_unix_now();
        s->store = !json_is_false(json_object_get(root, "store"));
        const char *instructions = json_string_value(json_object_get(root, "instructions"));
        json_t *ins = json_object_get(root, "instructions");
        if (ins && !json_is_null(ins) && !instructions)
            ok = gw_reply_invalid_field(x.call, "'instructions' must be a string");
        if (instructions)
            json_array_append_new(x.messages,
                                  json_pack("{s:s, s:s}", "role", "system", "content", instructions));
        json_t *pid = json_object_get(root, "previous_response_id");
        if (ok && pid && !json_is_null(pid)) {
            if (!json_is_string(pid)) {
                ok = gw_reply_invalid_field(x.call, "'previous_response_id' must be a string");
            } else if (!(prev = stored(call, json_string_value(pid)))) {
                gw_reply_error(
                    call, GW_E_NOT_FOUND,
                    "'previous_response_id': no stored response '%s' (unknown, deleted, expired after "
                    "[responses] ttl_seconds, or made with store: false)",
                    json_string_value(pid));
                ok = false;
            } else {
                json_array_extend(x.messages, json_object_get(prev, "history"));
                json_array_extend(x.history, json_object_get(prev, "history"));
                const char *key = json_string_value(json_object_get(prev, "key"));
                if (key && *key) s->key = strdup(key);
            }
        }
    }
    ok = ok && translate_input(&x, json_object_get(root, "input")) &&
         translate_text(&x, json_object_get(root, "text"), chat) && translate_tools(&x, root, chat);
    if (ok && s->mcp) { /* the output starts with what each MCP server offers, then approved calls */
        json_t *lists = gw_rs_mcp_list_items(s->mcp);
        json_array_extend(s->items, lists);
        json_decref(lists);
    }
    ok = ok && local_target(&x, root) && run_approvals(&x);
    if (!ok) {
        json_decref(prev);
        json_decref(root);
        json_decref(chat);
        json_decref(x.messages);
        json_decref(x.history);
        json_decref(x.input_items);
        state_free(s);
        if (!call->replied) gw_reply_error(call, GW_E_INTERNAL, "out of memory");
        return;
    }
    json_decref(prev);
    if (!s->key && s->store) {
        char key[ID_SIZE + sizeof KEY_PREFIX];
        snprintf(key, sizeof key, "%s%s", KEY_PREFIX, s->id);
        s->key = strdup(key);
    }
    gw_copy_field(root, "model", chat, NULL);
    gw_copy_field(root, "stream", chat, NULL);
    gw_copy_field(root, "temperature", chat, NULL);
    gw_copy_field(root, "top_p", chat, NULL);
    gw_copy_field(root, "max_output_tokens", chat, "max_tokens");
    /* reasoning.effort is the chat layer's reasoning_effort (the template's thinking switch);
     * reasoning comes back as reasoning items, in full: summary has nothing to choose. */
    json_t *effort = json_object_get(json_object_get(root, "reasoning"), "effort");
    if (json_is_string(effort)) {
        const char *e = json_string_value(effort);
        json_object_set_new(chat, "reasoning_effort", json_string(strcmp(e, "minimal") == 0 ? "low" : e));
    }
    json_object_set_new(chat, "messages", x.messages);
    if (s->key) json_object_set_new(chat, "context_key", json_string(s->key));
    s->echo = echo_fields(root);
    s->history = x.history;
    s->input_items = x.input_items;
    json_decref(root);
    gw_dispatch_run(call, chat,
                    &(gw_dispatch){.api = GW_API_CHAT,
                                   .fmt = &responses_format,
                                   .local = local,
                                   .route_name = "/v1/responses/input_tokens",
                                   .route = s,
                                   .route_free = state_free});
}

void gw_route_responses(gw_call *call) { responses_route(call, NULL); }

void gw_route_responses_input_tokens(gw_call *call) { responses_route(call, gw_input_tokens); }

/* ---- stored responses --------------------------------------------------------------------------- */

/* The id in /v1/responses/{id}[/input_items], copied to out; *items says which. False when the
 * path has no id. */
static bool path_id(const char *path, char *out, size_t cap, bool *items) {
    const char *id = path + strlen(RESPONSES_PREFIX);
    size_t n = strlen(id), sn = strlen(INPUT_ITEMS_SUFFIX);
    *items = n > sn && strcmp(id + n - sn, INPUT_ITEMS_SUFFIX) == 0;
    if (*items) n -= sn;
    if (n == 0 || n >= cap || memchr(id, '/', n)) return false;
    memcpy(out, id, n);
    out[n] = 0;
    return true;
}

static json_t *lookup(gw_call *call, bool *items) {
    char id[ID_SIZE];
    if (!path_id(call->path, id, sizeof id, items)) {
        gw_reply_error(call, GW_E_UNKNOWN_ROUTE,
                       "no route %s %s; use /v1/responses/{id} or /v1/responses/{id}/input_items",
                       call->method, call->path);
        return NULL;
    }
    json_t *e = stored(call, id);
    if (!e)
        gw_reply_error(call, GW_E_NOT_FOUND, "no stored response '%s' (unknown, deleted, or expired)", id);
    return e;
}

/* Where the cursor parameter name points in items: the index of the item it names, or absent
 * without it. False (with the reply) when it names no item. */
static bool item_cursor(gw_call *call, json_t *items, const char *name, long absent, long *at) {
    const char *id = gw_call_query(call, name);
    *at = absent;
    if (!id) return true;
    for (size_t i = 0; i < json_array_size(items); i++) {
        const char *item = json_string_value(json_object_get(json_array_get(items, i), "id"));
        if (item && strcmp(id, item) == 0) {
            *at = (long)i;
            return true;
        }
    }
    return gw_reply_invalid_field(call, "'%s' is '%s', which is not an input item of this response", name,
                                  id);
}

/* GET /v1/responses/{id}/input_items, paginated as OpenAI's: order (desc, newest first, by
 * default, or asc), limit (1..100, default 20), and the cursors after and before (item ids: the
 * page holds the items that follow after, up to before, in that order; with before alone, the
 * `limit` items just before it). first_id and last_id name the page's ends, has_more says whether
 * more items lie beyond the page in the direction it was read. */
static void list_input_items(gw_call *call, json_t *in) {
    static const char *const known[] = {"limit", "order", "after", "before", "include", "include[]", NULL};
    const char *unknown = gw_call_query_unknown(call, known);
    if (unknown) {
        gw_reply_invalid_field(
            call, "'%s' is not a parameter of input_items; use limit, order, after or before", unknown);
        return;
    }
    const char *inc = gw_call_query(call, "include");
    if (inc && strcmp(inc, "reasoning.encrypted_content") != 0) {
        gw_reply_invalid_field(call, "'include' is '%s'; only reasoning.encrypted_content is accepted", inc);
        return;
    }
    const char *order = gw_call_query(call, "order");
    if (order && strcmp(order, "asc") != 0 && strcmp(order, "desc") != 0) {
        gw_reply_invalid_field(call, "'order' is '%s'; use asc or desc", order);
        return;
    }
    long limit = INPUT_ITEMS_LIMIT_DEFAULT;
    const char *ls = gw_call_query(call, "limit");
    if (ls) {
        char *end;
        errno = 0;
        limit = strtol(ls, &end, 10);
        if (errno || end == ls || *end || limit < 1 || limit > INPUT_ITEMS_LIMIT_MAX) {
            gw_reply_invalid_field(call, "'limit' is '%s'; it must be an integer from 1 to %d", ls,
                                   INPUT_ITEMS_LIMIT_MAX);
            return;
        }
    }
    bool asc = order && strcmp(order, "asc") == 0;
    json_t *items = json_array(), *data = json_array();
    size_t n = json_array_size(in);
    for (size_t i = 0; i < n; i++)
        json_array_append(items, json_array_get(in, asc ? i : n - 1 - i));
    long after, before;
    if (item_cursor(call, items, "after", -1, &after) &&
        item_cursor(call, items, "before", (long)n, &before)) {
        long from = after + 1, to = before > from ? before : from, lo = from, hi = to;
        bool back =
            !gw_call_query(call, "after") && gw_call_query(call, "before"); /* the items just before it */
        if (hi - lo > limit) {
            if (back)
                lo = hi - limit;
            else
                hi = lo + limit;
        }
        for (long i = lo; i < hi; i++)
            json_array_append(data, json_array_get(items, (size_t)i));
        size_t k = json_array_size(data);
        json_t *first = k ? json_object_get(json_array_get(data, 0), "id") : json_null();
        json_t *last = k ? json_object_get(json_array_get(data, k - 1), "id") : json_null();
        bool more = back ? lo > from : hi < to;
        gw_reply_json(call, 200,
                      json_pack("{s:s, s:O, s:O, s:O, s:b}", "object", "list", "data", data, "first_id",
                                first, "last_id", last, "has_more", more));
    }
    json_decref(data);
    json_decref(items);
}

void gw_route_response_get(gw_call *call) {
    bool items = false;
    json_t *e = lookup(call, &items);
    if (!e) return;
    if (!items) {
        gw_reply_json(call, 200, json_incref(json_object_get(e, "response")));
        json_decref(e);
        return;
    }
    list_input_items(call, json_object_get(e, "input_items"));
    json_decref(e);
}

void gw_route_response_delete(gw_call *call) {
    char id[ID_SIZE];
    bool items = false;
    if (!path_id(call->path, id, sizeof id, &items) || items) {
        gw_reply_error(call, GW_E_UNKNOWN_ROUTE, "no route %s %s; use DELETE /v1/responses/{id}",
                       call->method, call->path);
        return;
    }
    json_t *e = stored(call, id);
    bool gone = e && gw_responses_delete(call->srv->responses, id, viewer(call));
    json_decref(e);
    if (!gone) {
        gw_reply_error(call, GW_E_NOT_FOUND, "no stored response '%s' (unknown, deleted, or expired)", id);
        return;
    }
    gw_reply_json(call, 200, json_pack("{s:s, s:s, s:b}", "id", id, "object", "response", "deleted", 1));
}
