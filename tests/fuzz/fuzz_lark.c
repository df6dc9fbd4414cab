/*
 * fuzz_lark.c: libFuzzer harness for custom-tool grammars to GBNF (src/chat/lark_gbnf.c). The first
 * byte picks the syntax (Lark or regex) and the mode (json or plain); the rest is the grammar.
 * Nothing may crash or leak; a refusal must come with a message; a conversion must be ASCII lines
 * of GBNF rules ("NAME ::= ..."), the first the root named by the prefix.
 *
 *   make fuzz-bins && build/fuzz/fuzz_lark -max_total_time=30 DIR tests/fuzz/corpus/lark
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/lark_gbnf.h"
#include "util/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "invariant broken: %s\n", what);
        abort();
    }
}

static void check_rules(const char *g) {
    check(strncmp(g, "root ::= ", 9) == 0, "the first rule is the root");
    for (const char *line = g; *line; line = strchr(line, '\n') + 1) {
        const char *end = strchr(line, '\n');
        check(end != NULL, "every rule ends with a newline");
        const char *p = line;
        while (p < end && ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                           *p == '-'))
            p++;
        check(p > line && strncmp(p, " ::= ", 5) == 0, "a line is NAME ::= ...");
        for (p = line; p < end; p++)
            check((unsigned char)*p >= 0x20 && (unsigned char)*p < 0x7F, "the rules are printable ASCII");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    char *src = malloc(size);
    if (!src) return 0;
    memcpy(src, data + 1, size - 1);
    src[size - 1] = '\0';
    char err[SIPP_ERROR_SIZE] = "", *gbnf = NULL;
    custom_syntax syn = data[0] & 1 ? CUSTOM_SYNTAX_REGEX : CUSTOM_SYNTAX_LARK;
    sipp_status st = custom_grammar_to_gbnf(syn, src, "root", (data[0] & 2) != 0, &gbnf, err);
    if (st == SIPP_OK)
        check_rules(gbnf);
    else
        check(err[0] != '\0' && gbnf == NULL, "a refusal has a message and no grammar");
    free(gbnf);
    free(src);
    return 0;
}
