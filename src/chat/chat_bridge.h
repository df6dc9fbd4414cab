/*
 * chat_bridge.h: the extern "C" face of chat_bridge.cpp, sipp's one C++ file (internal).
 *
 * llama.cpp's `common` library (libllama-common.so, shipped by the pinned CPU package) owns chat
 * templates (its Jinja engine), the per-family tool-call and reasoning parsers, the diffs between
 * two parses of a growing output, JSON-schema-to-GBNF conversion and the reasoning-budget sampler.
 * sipp uses it through this header only, so the rest of sipp stays C:
 *
 *   - what goes in is plain C: strings (JSON texts for messages, tools and schemas), flags, ids;
 *   - what comes out is plain C structs that the caller frees with the matching *_free;
 *   - no C++ exception crosses: every call catches them into a sipp_status and a one-line message
 *     in err (SIPP_ERROR_SIZE bytes), with the library's own words (a template's error, a parser's).
 *
 * The library logs INFO lines to stdout from a thread of its own; the first call silences it.
 */
#ifndef SIPP_CHAT_BRIDGE_H
#define SIPP_CHAT_BRIDGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "llama.h"
#include "sipp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Parsed templates of a model (common_chat_templates): the default one and its tool_use variant. */
typedef struct chat_templates chat_templates;

/* model may be NULL when source is given (tests render templates without a model). source NULL or
 * "": the model's tokenizer.chat_template; "chatml" or a Jinja text: that template. A model with no
 * template gets ChatML, as llama-server does; *fallback (optional) says so. */
sipp_status chat_templates_new(const struct llama_model *model, const char *source, const char *bos,
                               const char *eos, chat_templates **out, bool *fallback, char *err);
void chat_templates_free(chat_templates *t);

typedef enum chat_tool_choice { CHAT_TOOLS_AUTO, CHAT_TOOLS_REQUIRED, CHAT_TOOLS_NONE } chat_tool_choice;
typedef enum chat_reasoning {
    CHAT_REASONING_AUTO,
    CHAT_REASONING_NONE,
    CHAT_REASONING_DEEPSEEK
} chat_reasoning;

/* What a chat request asks of the template. JSON texts are OpenAI-shaped. */
/* The mark of a custom tool's input in the marked tools (custom_tools.h). */
#define CHAT_CUSTOM_MARK "SIPPCUSTOM"

typedef struct chat_inputs {
    const char
        *messages_json; /* [{"role", "content", "tool_calls", "tool_call_id", "reasoning_content"}...] */
    const char
        *tools_json; /* [{"type":"function","function":{"name","description","parameters"}}...] or NULL */
    chat_tool_choice tool_choice;
    bool parallel_tool_calls;
    const char *json_schema; /* a JSON Schema text constraining the answer, or NULL */
    const char *grammar;     /* a GBNF text constraining the answer, or NULL */
    chat_reasoning reasoning;
    bool enable_thinking;
    bool add_generation_prompt;
    const char *const *kwarg_keys; /* chat_template_kwargs: names and their values as JSON texts */
    const char *const *kwarg_values;
    size_t n_kwargs;
    /* Custom tools (custom_tools.h): the tools with their inputs marked, NULL when no custom tool
     * has a grammar; the grammars of custom tool k, for an input inside a JSON string and as is. */
    const char *marked_tools_json;
    const char *const *custom_gbnf_json;
    const char *const *custom_gbnf_raw;
    size_t n_custom;
} chat_inputs;

/* How to generate and parse the answer to one rendered chat (from common_chat_params). */
typedef struct chat_plan {
    char *prompt;
    char *grammar;           /* NULL: unconstrained */
    bool grammar_lazy;       /* the grammar applies from a trigger on (tool_choice auto) */
    bool grammar_prefill;    /* the generation prompt's tokens are fed to the grammar first */
    char **trigger_patterns; /* regexes over the output that start the lazy grammar */
    size_t n_trigger_patterns;
    int32_t *trigger_tokens; /* tokens that start it */
    size_t n_trigger_tokens;
    int32_t *preserved_tokens; /* special tokens that are part of the answer's syntax: rendered */
    size_t n_preserved_tokens;
    char **stops; /* stop strings the format adds */
    size_t n_stops;
    char *generation_prompt; /* what the template put after the last message (e.g. "<think>") */
    char *thinking_start;    /* the reasoning tags, "" when the format has none */
    char **thinking_end;
    size_t n_thinking_end;
    char *format; /* the parser's format name, for stats */
    void *parser; /* opaque: common_chat_parser_params */
} chat_plan;

/* Renders the chat and plans its generation. With a vocab, preserved tokens and token triggers are
 * resolved to ids (a model is needed for that; without one they stay empty). */
sipp_status chat_apply(const chat_templates *t, const struct llama_vocab *vocab, const chat_inputs *in,
                       chat_plan **out, char *err);
void chat_plan_free(chat_plan *p);

/* One tool call of a parsed answer. */
typedef struct chat_tool_call {
    char *id, *name, *arguments; /* arguments: a JSON text (possibly partial while streaming) */
} chat_tool_call;

/* The answer as parsed so far. */
typedef struct chat_message {
    char *content;
    char *reasoning;
    chat_tool_call *tool_calls;
    size_t n_tool_calls;
} chat_message;

/* What one more piece of output added (common_chat_msg_diff): text appended to content or
 * reasoning, or a tool call's id and name (first delta) or a fragment of its arguments. */
typedef struct chat_delta {
    char *content, *reasoning;                  /* NULL: none */
    long tool_index;                            /* -1: none */
    char *tool_id, *tool_name, *tool_arguments; /* NULL: not in this delta */
} chat_delta;

typedef struct chat_parser chat_parser;

/* A parser for the answer of a plan; it owns a copy of what it needs. */
sipp_status chat_parser_new(const chat_plan *p, chat_parser **out, char *err);
void chat_parser_free(chat_parser *ps);

/* Appends output and parses it all again (is_final: the output is complete). The new deltas are in
 * *deltas (an array of *n_deltas; free with chat_deltas_free). A final parse that fails is an
 * error; a partial one that fails waits for more text. */
sipp_status chat_parser_feed(chat_parser *ps, const char *text, size_t len, bool is_final,
                             chat_delta **deltas, size_t *n_deltas, char *err);
/* The answer as parsed so far (borrowed, valid until the next feed). */
const chat_message *chat_parser_message(const chat_parser *ps);
void chat_deltas_free(chat_delta *d, size_t n);

/* GBNF for a JSON Schema text. SIPP_ERR_INVALID_ARGUMENT naming what the converter cannot express. */
sipp_status chat_schema_to_grammar(const char *schema_json, char **grammar, char *err);

/* The reasoning-budget sampler: after `budget` tokens inside the reasoning tags it forces the end
 * tag. in_thinking: the generation prompt already opened the block (counting starts at once).
 * NULL (with err) when the tags do not tokenize. */
struct llama_sampler *chat_budget_sampler_new(const struct llama_vocab *vocab, const char *start_tag,
                                              const char *const *end_tags, size_t n_end, int budget,
                                              bool in_thinking, char *err);

/* llama_sampler_accept, whose grammar sampler throws (C++) when the token does not fit: false with
 * the reason in err instead. For any sampler that may throw. */
bool chat_sampler_accept(struct llama_sampler *smpl, int32_t token, char *err);

#ifdef __cplusplus
}
#endif
#endif
