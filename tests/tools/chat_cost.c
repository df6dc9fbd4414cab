/*
 * chat_cost: what a chat request costs sipp before and after the model runs: rendering the template
 * with its tools (common_chat_templates_apply, which also builds the tools' grammar and parser)
 * and parsing an answer with one tool call, at 1 and at 32 tools. Prints one JSON object.
 *
 *   build/tests/chat_cost TEMPLATE.jinja [REPEATS]
 *
 * The template is parsed once (sipp caches it per model); each repetition renders and parses
 * again, as each request does. For bench/chat.py and BENCHMARKS.md.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat/chat_request.h"
#include "util/util.h"

#define DEFAULT_REPEATS 200
#define TOOLS_FEW 1
#define TOOLS_MANY 32
#define TEMPLATE_MAX (1 << 20)

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static char *tools_json(int n) {
    sipp_buf b = {0};
    sipp_buf_append(&b, "[", 1);
    for (int i = 0; i < n; i++)
        sipp_buf_appendf(
            &b,
            "%s{\"type\": \"function\", \"function\": {\"name\": \"tool_%d\", \"description\": \"Tool "
            "number %d\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": "
            "\"string\"}, \"days\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 7}}, "
            "\"required\": [\"city\"]}}}",
            i ? ", " : "", i, i);
    sipp_buf_append(&b, "]", 1);
    return b.data;
}

static int measure(const chat_templates *t, int n_tools, int repeats) {
    char *tools = tools_json(n_tools), err[SIPP_ERROR_SIZE];
    const char *answer = "<tool_call>\n{\"name\": \"tool_0\", \"arguments\": {\"city\": \"Paris\", \"days\": "
                         "3}}\n</tool_call>";
    chat_inputs in = {.messages_json =
                          "[{\"role\": \"system\", \"content\": \"You call tools.\"}, {\"role\": \"user\", "
                          "\"content\": \"Weather in Paris for 3 days?\"}]",
                      .tools_json = tools,
                      .tool_choice = CHAT_TOOLS_AUTO,
                      .reasoning = CHAT_REASONING_AUTO,
                      .enable_thinking = true,
                      .add_generation_prompt = true};
    double apply_us = 0, parse_us = 0;
    size_t calls = 0;
    for (int i = 0; i < repeats; i++) {
        double t0 = now_us();
        chat_plan *p = NULL;
        if (chat_apply(t, NULL, &in, &p, err) != SIPP_OK) {
            fprintf(stderr, "chat_cost: %s\n", err);
            return 1;
        }
        double t1 = now_us();
        chat_parser *ps = NULL;
        chat_delta *d = NULL;
        size_t nd = 0;
        if (chat_parser_new(p, &ps, err) != SIPP_OK ||
            chat_parser_feed(ps, answer, strlen(answer), true, &d, &nd, err) != SIPP_OK) {
            fprintf(stderr, "chat_cost: %s\n", err);
            return 1;
        }
        calls += chat_parser_message(ps)->n_tool_calls;
        double t2 = now_us();
        apply_us += t1 - t0;
        parse_us += t2 - t1;
        chat_deltas_free(d, nd);
        chat_parser_free(ps);
        chat_plan_free(p);
    }
    printf("{\"tools\": %d, \"repeats\": %d, \"apply_us\": %.1f, \"parse_us\": %.1f, \"total_us\": %.1f, "
           "\"calls_parsed\": %zu}\n",
           n_tools, repeats, apply_us / repeats, parse_us / repeats, (apply_us + parse_us) / repeats, calls);
    free(tools);
    return calls == (size_t)repeats ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: chat_cost TEMPLATE.jinja [REPEATS]\n");
        return 2;
    }
    int repeats = argc > 2 ? atoi(argv[2]) : DEFAULT_REPEATS;
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        fprintf(stderr, "chat_cost: cannot open %s\n", argv[1]);
        return 2;
    }
    char *src = malloc(TEMPLATE_MAX), err[SIPP_ERROR_SIZE];
    size_t n = fread(src, 1, TEMPLATE_MAX - 1, f);
    fclose(f);
    src[n] = '\0';
    chat_templates *t = NULL;
    if (chat_templates_new(NULL, src, "<s>", "</s>", &t, NULL, err) != SIPP_OK) {
        fprintf(stderr, "chat_cost: %s\n", err);
        return 1;
    }
    int rc = measure(t, TOOLS_FEW, repeats) || measure(t, TOOLS_MANY, repeats);
    chat_templates_free(t);
    free(src);
    return rc;
}
