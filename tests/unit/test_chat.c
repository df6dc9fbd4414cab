/*
 * test_chat.c: sipp's chat layer over llama.cpp's chat library, with the real templates of the
 * pinned tree (build/llama/source/models/templates, laid out by deps/fetch.sh).
 *
 *   - every template renders a conversation with system, user, assistant-with-tool-calls and tool
 *     messages (a table test over the directory; expected failures, if any, listed with the reason);
 *   - canned answers of a dozen model families parse into the exact tool call, content and
 *     reasoning, whole and fed in pieces of every size, and the streamed deltas add up to the whole;
 *   - bad input (a template that does not parse, an answer that does not follow its format) is a
 *     status with a message, never a crash.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat_request.h"
#include "util/util.h"

#define TEMPLATES_DIR "build/llama/source/models/templates"
#define TEMPLATE_MAX (1 << 20)

static char *read_template(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", TEMPLATES_DIR, name);
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s (make deps lays out the pinned tree)", path);
    char *buf = malloc(TEMPLATE_MAX);
    size_t n = fread(buf, 1, TEMPLATE_MAX - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static const char *CONVERSATION =
    "{\"messages\": ["
    "{\"role\": \"system\", \"content\": \"You are a weather bot.\"},"
    "{\"role\": \"user\", \"content\": \"Weather in Paris for 3 days?\"},"
    "{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": \"call00001\", \"type\": "
    "\"function\","
    " \"function\": {\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Paris\\\", \\\"days\\\": "
    "3}\"}}]},"
    "{\"role\": \"tool\", \"tool_call_id\": \"call00001\", \"content\": \"sunny\"},"
    "{\"role\": \"assistant\", \"content\": \"It is sunny in Paris.\"},"
    "{\"role\": \"user\", \"content\": \"Thanks. And Rome?\"}],"
    "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": "
    "\"Weather\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\":"
    " {\"type\": \"integer\"}}, \"required\": [\"city\"]}}}]}";

/* Templates of the pinned tree that cannot render this conversation, with their own reason. None
 * so far; a new pin that adds one lists it here. */
static const char *const EXPECTED_FAILURES[][2] = {
    {"google-gemma-2-2b-it.jinja",
     "Conversation roles must alternate user/assistant/user/assistant/... (it has "
     "no system or tool role)"},
    {NULL, NULL}};

/* Templates that render but leave tool messages out (they have no tool role). */
static const char *const DROP_TOOL_RESULTS[] = {"llama-cpp-rwkv-world.jinja",
                                                "microsoft-Phi-3.5-mini-instruct.jinja"};

static bool drops_tool_results(const char *name) {
    for (size_t i = 0; i < sizeof DROP_TOOL_RESULTS / sizeof *DROP_TOOL_RESULTS; i++)
        if (strcmp(DROP_TOOL_RESULTS[i], name) == 0) return true;
    return false;
}

static bool expected_failure(const char *name) {
    for (size_t i = 0; EXPECTED_FAILURES[i][0]; i++)
        if (strcmp(EXPECTED_FAILURES[i][0], name) == 0) return true;
    return false;
}

Test(chat, every_template_renders_a_tool_conversation) {
    DIR *d = opendir(TEMPLATES_DIR);
    cr_assert(d, "no %s", TEMPLATES_DIR);
    struct dirent *e;
    int rendered = 0, failed = 0;
    sipp_buf failures = {0};
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 6, ".jinja") != 0) continue;
        char path[512], err[SIPP_ERROR_SIZE], *prompt = NULL;
        snprintf(path, sizeof path, "%s/%s", TEMPLATES_DIR, e->d_name);
        sipp_status st = sipp_chat_render_json(path, CONVERSATION, &prompt, err);
        if (st == SIPP_OK) {
            cr_expect(strstr(prompt, "Rome") != NULL, "%s: the last user message is not in the prompt",
                      e->d_name);
            cr_expect(drops_tool_results(e->d_name) || strstr(prompt, "sunny") != NULL,
                      "%s: the tool's result is not in the prompt", e->d_name);
            rendered++;
        } else if (!expected_failure(e->d_name)) {
            sipp_buf_appendf(&failures, "\n  %s: %s", e->d_name, err);
            failed++;
        }
        free(prompt);
    }
    closedir(d);
    cr_expect(rendered >= 60, "only %d templates rendered", rendered);
    cr_expect(failed == 0, "%d templates failed:%s", failed, failures.data ? failures.data : "");
    sipp_buf_free(&failures);
}

/* ---- canned answers --------------------------------------------------------------------------- */

static const char *TOOLS =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": "
    "\"Weather\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": "
    "\"string\"}, \"days\": {\"type\": \"integer\"}}, \"required\": [\"city\", \"days\"]}}}]";
static const char *ARGS = "{\"city\": \"Paris\", \"days\": 3}";

typedef struct canned {
    const char *family;
    const char *tmpl;
    const char *output;    /* what the model wrote after the generation prompt */
    const char *name;      /* the tool called, NULL for none */
    const char *content;   /* expected content */
    const char *reasoning; /* expected reasoning */
} canned;

static const canned CANNED[] = {
    {"Llama 3.1", "meta-llama-Llama-3.1-8B-Instruct.jinja",
     "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"days\": 3}}", "get_weather", "",
     ""},
    {"Llama 3.3", "meta-llama-Llama-3.3-70B-Instruct.jinja",
     "{\"type\": \"function\", \"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"days\": "
     "3}}",
     "get_weather", "", ""},
    {"Qwen 2.5", "Qwen-Qwen2.5-7B-Instruct.jinja",
     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": "
     "3}}\n</tool_call>",
     "get_weather", "", ""},
    {"Qwen 2.5 prose", "Qwen-Qwen2.5-7B-Instruct.jinja", "It is sunny in Paris.", NULL,
     "It is sunny in Paris.", ""},
    {"Qwen3 think", "Qwen-Qwen3-0.6B.jinja",
     "<think>\nThe user wants Paris.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
     "{\"city\": "
     "\"Paris\", \"days\": 3}}\n</tool_call>",
     "get_weather", "", "The user wants Paris.\n"},
    {"Hermes 2 Pro", "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja",
     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": "
     "3}}\n</tool_call>",
     "get_weather", "", ""},
    {"Hermes 3", "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja",
     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": "
     "3}}\n</tool_call>",
     "get_weather", "", ""},
    {"Mistral Nemo", "mistralai-Mistral-Nemo-Instruct-2407.jinja",
     "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}, \"id\": "
     "\"123456789\"}]",
     "get_weather", "", ""},
    {"Command R7B", "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja",
     "<|START_THINKING|>I will look it up.<|END_THINKING|><|START_ACTION|>[\n    {\"tool_call_id\": \"0\", "
     "\"tool_name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"days\": 3}}\n]<|END_ACTION|>",
     "get_weather", "", "I will look it up."},
    /* The template opens the thinking block ("<think>\n" ends the generation prompt). */
    {"DeepSeek R1", "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja",
     "I should answer.\n</think>\n\nIt is sunny.", NULL, "\n\nIt is sunny.", "\nI should answer.\n"},
    {"gpt-oss", "openai-gpt-oss-120b.jinja",
     "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
     "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\", \"days\": 3}<|call|>",
     "get_weather", "", "Need weather."},
    {"Gemma 4", "google-gemma-4-31B-it.jinja",
     "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,days:3}<tool_call|>", "get_weather", "", ""},
    {"Functionary v3.2", "meetkai-functionary-medium-v3.2.jinja",
     "get_weather\n{\"city\": \"Paris\", \"days\": 3}", "get_weather", "", ""},
    {"Granite 4.0", "ibm-granite-granite-4.0.jinja",
     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": "
     "3}}\n</tool_call>",
     "get_weather", "", ""},
};

static chat_plan *plan_for(const canned *c) {
    char *src = read_template(c->tmpl), err[SIPP_ERROR_SIZE];
    chat_templates *t = NULL;
    cr_assert_eq(chat_templates_new(NULL, src, "<s>", "</s>", &t, NULL, err), SIPP_OK, "%s: %s", c->family,
                 err);
    chat_inputs in = {.messages_json =
                          "[{\"role\": \"user\", \"content\": \"Weather in Paris for 3 days?\"}]",
                      .tools_json = TOOLS,
                      .tool_choice = CHAT_TOOLS_AUTO,
                      .reasoning = CHAT_REASONING_AUTO,
                      .enable_thinking = true,
                      .add_generation_prompt = true};
    chat_plan *p = NULL;
    cr_assert_eq(chat_apply(t, NULL, &in, &p, err), SIPP_OK, "%s: %s", c->family, err);
    chat_templates_free(t);
    free(src);
    return p;
}

static void expect_args(const canned *c, const char *args) {
    json_t *want = json_loads(ARGS, 0, NULL), *got = json_loads(args, 0, NULL);
    cr_expect(got && json_equal(want, got), "%s: arguments %s, expected %s", c->family, args, ARGS);
    json_decref(want);
    json_decref(got);
}

static void expect_message(const canned *c, const chat_message *m, const char *how) {
    cr_expect_str_eq(m->content, c->content, "%s (%s): content '%s' (%zu bytes), expected '%s'", c->family,
                     how, m->content, strlen(m->content), c->content);
    cr_expect_str_eq(m->reasoning, c->reasoning, "%s (%s): reasoning '%s'", c->family, how, m->reasoning);
    if (!c->name) {
        cr_expect_eq(m->n_tool_calls, 0, "%s (%s): no tool call expected", c->family, how);
        return;
    }
    cr_assert_eq(m->n_tool_calls, 1, "%s (%s): %zu tool calls", c->family, how, m->n_tool_calls);
    cr_expect_str_eq(m->tool_calls[0].name, c->name, "%s (%s): tool name", c->family, how);
    /* "call_" + 24 characters as OpenAI's, 9 for templates that demand them (Mistral), or the model's own. */
    const char *id = m->tool_calls[0].id;
    cr_expect((strncmp(id, "call_", 5) == 0 && strlen(id) == 29) || strlen(id) == 9 || strcmp(id, "0") == 0,
              "%s: id '%s'", c->family, id);
    expect_args(c, m->tool_calls[0].arguments);
}

Test(chat, canned_answers_parse_whole) {
    for (size_t i = 0; i < sizeof CANNED / sizeof *CANNED; i++) {
        const canned *c = &CANNED[i];
        chat_plan *p = plan_for(c);
        chat_parser *ps = NULL;
        char err[SIPP_ERROR_SIZE];
        cr_assert_eq(chat_parser_new(p, &ps, err), SIPP_OK);
        chat_delta *d = NULL;
        size_t nd = 0;
        sipp_status st = chat_parser_feed(ps, c->output, strlen(c->output), true, &d, &nd, err);
        cr_expect_eq(st, SIPP_OK, "%s (format %s): %s", c->family, p->format, err);
        if (st == SIPP_OK) expect_message(c, chat_parser_message(ps), "whole");
        chat_deltas_free(d, nd);
        chat_parser_free(ps);
        chat_plan_free(p);
    }
}

/* The answer fed in pieces of `size` bytes: the message at the end is the whole's, and the deltas
 * add up to it (content, reasoning, one call's id and name, its arguments in fragments). */
static void feed_in_pieces(const canned *c, const chat_plan *p, size_t size) {
    chat_parser *ps = NULL;
    char err[SIPP_ERROR_SIZE];
    cr_assert_eq(chat_parser_new(p, &ps, err), SIPP_OK);
    sipp_buf content = {0}, reasoning = {0}, args = {0};
    char *name = NULL, *id = NULL;
    size_t len = strlen(c->output);
    for (size_t at = 0; at <= len; at += size) {
        size_t n = at + size <= len ? size : len - at;
        bool final = at + size > len;
        chat_delta *d = NULL;
        size_t nd = 0;
        sipp_status st = chat_parser_feed(ps, c->output + at, n, final, &d, &nd, err);
        cr_assert_eq(st, SIPP_OK, "%s, pieces of %zu at %zu: %s", c->family, size, at, err);
        for (size_t k = 0; k < nd; k++) {
            if (d[k].content) sipp_buf_append(&content, d[k].content, strlen(d[k].content));
            if (d[k].reasoning) sipp_buf_append(&reasoning, d[k].reasoning, strlen(d[k].reasoning));
            if (d[k].tool_index >= 0) {
                cr_expect_eq(d[k].tool_index, 0, "%s: one call expected", c->family);
                if (d[k].tool_name && !name) name = strdup(d[k].tool_name);
                if (d[k].tool_id && !id) id = strdup(d[k].tool_id);
                if (d[k].tool_arguments)
                    sipp_buf_append(&args, d[k].tool_arguments, strlen(d[k].tool_arguments));
            }
        }
        chat_deltas_free(d, nd);
        if (final) break;
    }
    const chat_message *m = chat_parser_message(ps);
    char how[64];
    snprintf(how, sizeof how, "pieces of %zu", size);
    expect_message(c, m, how);
    cr_expect_str_eq(content.data ? content.data : "", m->content, "%s, %s: content deltas", c->family, how);
    cr_expect_str_eq(reasoning.data ? reasoning.data : "", m->reasoning, "%s, %s: reasoning deltas",
                     c->family, how);
    if (c->name) {
        cr_expect(name && strcmp(name, c->name) == 0, "%s, %s: the name delta", c->family, how);
        cr_expect(id && m->n_tool_calls && strcmp(id, m->tool_calls[0].id) == 0, "%s, %s: the id delta",
                  c->family, how);
        cr_expect_str_eq(args.data ? args.data : "", m->n_tool_calls ? m->tool_calls[0].arguments : "",
                         "%s, %s: argument deltas", c->family, how);
    }
    free(name);
    free(id);
    sipp_buf_free(&content);
    sipp_buf_free(&reasoning);
    sipp_buf_free(&args);
    chat_parser_free(ps);
}

Test(chat, canned_answers_parse_in_pieces_of_every_size) {
    for (size_t i = 0; i < sizeof CANNED / sizeof *CANNED; i++) {
        const canned *c = &CANNED[i];
        chat_plan *p = plan_for(c);
        size_t len = strlen(c->output);
        for (size_t size = 1; size <= len; size++)
            feed_in_pieces(c, p, size);
        chat_plan_free(p);
    }
}

/* ---- failures --------------------------------------------------------------------------------- */

Test(chat, a_template_that_does_not_parse_is_an_error) {
    chat_templates *t = NULL;
    char err[SIPP_ERROR_SIZE] = "";
    sipp_status st = chat_templates_new(NULL, "{% if %}", "<s>", "</s>", &t, NULL, err);
    if (st == SIPP_OK) { /* parsed lazily: the render fails instead */
        chat_inputs in = {.messages_json = "[{\"role\": \"user\", \"content\": \"hi\"}]",
                          .add_generation_prompt = true};
        chat_plan *p = NULL;
        st = chat_apply(t, NULL, &in, &p, err);
        chat_plan_free(p);
        chat_templates_free(t);
    }
    cr_expect_eq(st, SIPP_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(err, "chat template") != NULL, "message: %s", err);
}

Test(chat, a_missing_template_file_names_it) {
    char err[SIPP_ERROR_SIZE], *prompt = NULL;
    sipp_status st = sipp_chat_render_json("/nonexistent/x.jinja", CONVERSATION, &prompt, err);
    cr_expect_eq(st, SIPP_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(err, "/nonexistent/x.jinja") != NULL, "message: %s", err);
}

Test(chat, bad_chat_fields_name_the_field) {
    static const char *const cases[][2] = {
        {"{\"messages\": [{\"role\": \"robot\", \"content\": \"x\"}]}", "messages[0].role"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": [{\"type\": \"function\", "
         "\"function\": {\"name\": \"f\", \"parameters\": \"x\"}}]}",
         "tools[0].function.parameters"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": [{\"type\": \"function\", "
         "\"function\": {\"name\": \"f\"}}], \"tool_choice\": {\"type\": \"function\", \"function\": "
         "{\"name\": \"g\"}}}",
         "'tool_choice' names function 'g'"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tool_choice\": \"sometimes\"}",
         "tool_choice"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"response_format\": {\"type\": "
         "\"yaml\"}}",
         "response_format.type"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"reasoning_format\": \"loud\"}",
         "reasoning_format"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char err[SIPP_ERROR_SIZE] = "", *prompt = NULL;
        sipp_status st = sipp_chat_render_json("chatml", cases[i][0], &prompt, err);
        cr_expect_eq(st, SIPP_ERR_INVALID_ARGUMENT, "case %zu passed", i);
        cr_expect(strstr(err, cases[i][1]) != NULL, "case %zu: '%s' does not name %s", i, err, cases[i][1]);
        free(prompt);
    }
}

Test(chat, schema_features_the_converter_cannot_express_are_named) {
    char *grammar = NULL, err[SIPP_ERROR_SIZE] = "";
    cr_expect_eq(
        sipp_json_schema_to_grammar("{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\", "
                                    "\"minimum\": 1, \"maximum\": 7}, \"b\": {\"enum\": [\"x\", \"y\"]}}}",
                                    &grammar, err),
        SIPP_OK, "%s", err);
    free(grammar);
    grammar = NULL;
    sipp_status st = sipp_json_schema_to_grammar("{\"type\": \"string\", \"pattern\": \"[\"}", &grammar, err);
    cr_expect_eq(st, SIPP_ERR_INVALID_ARGUMENT, "an unparsable pattern was accepted: %s",
                 grammar ? grammar : "");
    cr_expect(strlen(err) > 0);
    free(grammar);
}
