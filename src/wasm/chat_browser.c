/*
 * chat_browser.c: what the browser runtime has of llama.cpp's chat library and jansson, that is
 * the built-in templates and nothing more.
 *
 * Natively, src/chat (the chat library through chat_bridge.cpp, jansson) plans a request's chat
 * and src/engine/request_json.c gives its logprobs and chat parser as JSON. Neither library has a
 * WebAssembly build here, so `make web` leaves those files out and links this one, which answers
 * the same internal and public calls:
 *
 *   - messages are rendered with the model's tokenizer.chat_template (or the request's
 *     chat_template) by llama_chat_apply_template, llama.cpp's built-in templates, as the browser
 *     runtime did before the chat library came; the plan holds the prompt and nothing else;
 *   - everything the chat library or jansson would do (chat_json with tools, JSON schemas,
 *     grammars, reasoning budgets, chat parsers, logprobs) is refused with an error naming the
 *     parameter, never a fake result.
 *
 * This file is compiled by `make web` only.
 */
#include <stdlib.h>
#include <string.h>

#include "chat/chat_request.h"
#include "engine/request.h"
#include "util/util.h"

#define UNAVAILABLE                                                                                          \
    "not available in the browser runtime: built without llama.cpp's chat library (tools, JSON schema, "     \
    "grammars, "                                                                                             \
    "logprobs)"

static sipp_status unavailable(char *err, const char *what) {
    return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "'%s' is " UNAVAILABLE, what);
}

/* ---- planning a request ----------------------------------------------------------------------- */

sipp_status chat_request_prepare(sipp_model *m, const sipp_request_params *p,
                                 const sipp_schema_limits *limits, chat_request *out, char *err) {
    (void)limits; /* the browser runtime takes no schemas or grammars (refused below) */
    memset(out, 0, sizeof *out);
    out->thinking_budget = -1;
    if (p->chat_json) return unavailable(err, "chat_json");
    if (p->grammar) return unavailable(err, "grammar");
    if (p->json_schema) return unavailable(err, "json_schema");
    if (!p->messages) return SIPP_OK;
    char *prompt = NULL;
    sipp_status st = sipp_chat_render(m, p->chat_template, p->messages, p->n_messages, true, &prompt);
    if (st != SIPP_OK) return sipp_fail(err, st, "%s", sipp_model_last_error(m));
    if (!(out->plan = calloc(1, sizeof *out->plan))) {
        sipp_free(prompt);
        return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    }
    out->plan->prompt = prompt;
    return SIPP_OK;
}

void chat_request_clear(chat_request *c) {
    if (c->plan) sipp_free(c->plan->prompt);
    free(c->plan);
    free(c->grammar);
    memset(c, 0, sizeof *c);
    c->thinking_budget = -1;
}

/* ---- samplers: the browser makes no grammar or budget sampler ---------------------------------- */

/* Only grammar samplers throw, and grammars are refused above: a plain accept. */
bool chat_sampler_accept(struct llama_sampler *smpl, int32_t token, char *err) {
    (void)err;
    llama_sampler_accept(smpl, token);
    return true;
}

struct llama_sampler *chat_budget_sampler_new(const struct llama_vocab *vocab, const char *start_tag,
                                              const char *const *end_tags, size_t n_end, int budget,
                                              bool in_thinking, char *err) {
    unavailable(err, "thinking_budget_tokens");
    return NULL;
}

/* ---- logprobs ---------------------------------------------------------------------------------- */

sipp_status sipp_request_check_logprobs(int logprobs, char *err) {
    return logprobs == -1 ? SIPP_OK : unavailable(err, "logprobs");
}

/* Never any: a request asking for them is refused at submit. */
size_t sipp_request_logprobs_json(const sipp_request *r, size_t from, char **out) {
    *out = NULL;
    return 0;
}

/* ---- the public chat functions ------------------------------------------------------------------ */

sipp_status sipp_chat_parser_new_from_plan(const chat_plan *plan, sipp_chat_parser **out, char *errbuf) {
    *out = NULL;
    return unavailable(errbuf, "sipp_chat_parser_new");
}

sipp_status sipp_chat_parser_new(const sipp_request *r, sipp_chat_parser **out, char *errbuf) {
    return sipp_chat_parser_new_from_plan(NULL, out, errbuf);
}

/* No parser is ever made, so these see NULL. */
void sipp_chat_parser_free(sipp_chat_parser *p) { (void)p; }

sipp_status sipp_chat_parser_feed(sipp_chat_parser *p, const char *text, size_t len, bool is_final,
                                  char **deltas_json) {
    if (deltas_json) *deltas_json = NULL;
    return SIPP_ERR_INVALID_ARGUMENT;
}

sipp_status sipp_chat_parser_feed_deltas(sipp_chat_parser *p, const char *text, size_t len, bool is_final,
                                         sipp_chat_delta_cb cb, void *user) {
    return SIPP_ERR_INVALID_ARGUMENT;
}

const char *sipp_chat_parser_message(const sipp_chat_parser *p) { return "{}"; }
const char *sipp_chat_parser_content(const sipp_chat_parser *p) { return ""; }
const char *sipp_chat_parser_reasoning(const sipp_chat_parser *p) { return NULL; }
bool sipp_chat_parser_tool_call(const sipp_chat_parser *p, size_t i, const char **id, const char **name,
                                const char **arguments) {
    return false;
}
size_t sipp_chat_parser_n_tool_calls(const sipp_chat_parser *p) { return 0; }
const char *sipp_chat_parser_error(const sipp_chat_parser *p) { return "'sipp_chat_parser' is " UNAVAILABLE; }

sipp_status sipp_json_schema_to_grammar(const char *schema_json, char **grammar, char *errbuf) {
    if (grammar) *grammar = NULL;
    return unavailable(errbuf, "json_schema");
}

sipp_status sipp_chat_render_json(const char *tmpl, const char *chat_json, char **prompt, char *errbuf) {
    if (prompt) *prompt = NULL;
    return unavailable(errbuf, "chat_json");
}
