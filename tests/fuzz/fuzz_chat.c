/*
 * fuzz_chat.c: libFuzzer harness for a chat's fields (src/chat/chat_request.c: messages, tools,
 * tool_choice, response_format, json_schema, grammar, reasoning options, and the JSON-schema
 * keyword check) and what they reach of llama.cpp's chat library through the bridge (the ChatML
 * template, the tools' grammar and parser, json_schema_to_grammar).
 *
 * Each input is a chat_json rendered with ChatML and, when it parses as JSON, also taken as a JSON
 * schema. Neither may crash, leak or let a C++ exception escape; a refusal must come with a message.
 * chat_request.c is compiled into the harness (instrumented); the bridge comes from libsipp.so.
 *
 *   make fuzz-bins && build/fuzz/fuzz_chat -max_total_time=60 -max_len=4096 DIR tests/fuzz/corpus/chat
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sipp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    char err[SIPP_ERROR_SIZE] = "", *prompt = NULL;
    if (sipp_chat_render_json("chatml", text, &prompt, err) != SIPP_OK && !*err) abort();
    sipp_free(prompt);
    char *grammar = NULL;
    err[0] = '\0';
    if (sipp_json_schema_to_grammar(text, &grammar, err) != SIPP_OK && !*err) abort();
    sipp_free(grammar);
    free(text);
    return 0;
}
