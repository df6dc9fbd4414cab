/*
 * test_lark_gbnf.c: custom-tool grammars (Lark, regex) converted to GBNF (src/chat/lark_gbnf.c),
 * judged by llama.cpp's own grammar sampler: a text is in the language when each of its tokens
 * (a real vocabulary, llama-bpe) survives the sampler in turn and the end of generation is allowed
 * after the last. Each grammar is checked on texts it must accept and texts it must refuse, plain
 * and in json mode (the text escaped as inside a JSON string); Codex's apply_patch grammar (the
 * captured request, tests/fixtures/agents) converts and takes a patch; constructs outside the
 * subset are refused naming the construct and the line.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/lark_gbnf.h"
#include "llama.h"
#include "util/util.h"

#define VOCAB_FILE "build/llama/vocab/ggml-vocab-llama-bpe.gguf"
#define CODEX_REQUEST "tests/fixtures/agents/codex-0.169.0-gpt55-turn1.json"

static struct llama_model *model;

static void setup(void) {
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    model = llama_model_load_from_file(VOCAB_FILE, mp);
    cr_assert(model, "cannot load %s (make deps lays out the pinned vocabularies)", VOCAB_FILE);
}

static void teardown(void) { llama_model_free(model); }

TestSuite(lark_gbnf, .init = setup, .fini = teardown);

/* Does the token survive the grammar sampler now? */
static bool allowed(struct llama_sampler *s, llama_token t) {
    llama_token_data d = {t, 0.0f, 0.0f};
    llama_token_data_array a = {&d, 1, -1, false};
    llama_sampler_apply(s, &a);
    return isfinite(d.logit);
}

/* True when text is in the grammar's language (json: as the inside of a JSON string). */
static bool matches(const char *gbnf, const char *text, bool json) {
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    char *escaped = NULL;
    if (json) {
        json_t *s = json_string(text);
        char *dumped = json_dumps(s, JSON_ENCODE_ANY);
        json_decref(s);
        escaped = strndup(dumped + 1, strlen(dumped) - 2);
        free(dumped);
        text = escaped;
    }
    struct llama_sampler *s = llama_sampler_init_grammar(vocab, gbnf, "root");
    cr_assert(s, "llama.cpp refused the grammar:\n%s", gbnf);
    llama_token toks[4096];
    int n = llama_tokenize(vocab, text, (int)strlen(text), toks, 4096, false, false);
    cr_assert(n >= 0);
    bool ok = true;
    for (int i = 0; ok && i < n; i++) {
        ok = allowed(s, toks[i]);
        if (ok) llama_sampler_accept(s, toks[i]);
    }
    ok = ok && allowed(s, llama_vocab_eos(vocab));
    llama_sampler_free(s);
    free(escaped);
    return ok;
}

static char *convert(custom_syntax syn, const char *src, bool json) {
    char err[SIPP_ERROR_SIZE] = "", *gbnf = NULL;
    sipp_status st = custom_grammar_to_gbnf(syn, src, "root", json, &gbnf, err);
    cr_assert_eq(st, SIPP_OK, "%s: %s", src, err);
    return gbnf;
}

/* Each grammar: texts it takes, then NULL, then texts it refuses, then NULL; in both modes. */
static void check(custom_syntax syn, const char *src, const char *const *texts) {
    for (int json = 0; json < 2; json++) {
        char *gbnf = convert(syn, src, json);
        const char *const *t = texts;
        for (; *t; t++)
            cr_expect(matches(gbnf, *t, json), "%s must take %s (json %d)\n%s", src, *t, json, gbnf);
        for (t++; *t; t++)
            cr_expect(!matches(gbnf, *t, json), "%s must refuse %s (json %d)\n%s", src, *t, json, gbnf);
        free(gbnf);
    }
}

Test(lark_gbnf, alternatives_of_literals) {
    check(CUSTOM_SYNTAX_LARK, "start: \"yes\" | \"no\" | \"maybe\"\n",
          (const char *[]){"yes", "no", "maybe", NULL, "yesno", "Yes", "", "maybe ", NULL});
}

Test(lark_gbnf, rules_operators_and_continuations) {
    const char *g = "// a list\n?start: item (\",\" item)*\n"
                    "item: NAME \"=\" value\n"
                    "     | \"[\" [NAME] \"]\"\n"
                    "value: DIGIT+ | \"x\"~2..3 -> xs\n"
                    "NAME: /[a-z_][a-z0-9_]*/\n"
                    "%import common.DIGIT\n";
    check(CUSTOM_SYNTAX_LARK, g,
          (const char *[]){"a=1", "a=12,b_c=xx", "[]", "[q],z=xxx", NULL, "a=", "a=x", "a=xxxx", "A=1", "[q",
                           NULL});
}

Test(lark_gbnf, strings_escapes_and_case) {
    check(CUSTOM_SYNTAX_LARK, "start: \"say \\\"hi\\\"\\n\" \"ok\"i \"a\"..\"c\"\n",
          (const char *[]){"say \"hi\"\nokb", "say \"hi\"\nOKa", "say \"hi\"\noKc", NULL, "say \"hi\"okb",
                           "say \"hi\"\nokd", NULL});
}

Test(lark_gbnf, regex_terminals_and_classes) {
    check(CUSTOM_SYNTAX_LARK, "start: /(.+)/ LF /[^\\n\"]*/ /\\d{2,3}/\n%import common.LF\n",
          (const char *[]){"a b\\c\"\n12", "x\nyz123", "\t\n99", NULL, "\n12", "a\nb\"12", "a\nb1",
                           "a\nb\n12", NULL});
}

Test(lark_gbnf, regex_syntax) {
    check(CUSTOM_SYNTAX_REGEX, "^(?:[A-Z][a-z]+ ?){1,3}\\.$|^\\w+@\\w+\\.com$",
          (const char *[]){"Hello World.", "Abc.", "joe@example.com", NULL, "hello.", "Hello World",
                           "a@b.org", NULL});
    check(CUSTOM_SYNTAX_REGEX, "[\\s\\-]+\\x41\\u00e9.*?",
          (const char *[]){" -A\xc3\xa9", "\t\nA\xc3\xa9 tail", NULL, "A\xc3\xa9", NULL});
}

static char *codex_grammar(void) {
    json_error_t e;
    json_t *root = json_load_file(CODEX_REQUEST, 0, &e);
    cr_assert(root, "%s: %s", CODEX_REQUEST, e.text);
    json_t *tools = json_object_get(json_object_get(root, "body"), "tools"), *t;
    size_t i;
    char *grammar = NULL;
    json_array_foreach(tools, i, t) {
        const char *name = json_string_value(json_object_get(t, "name"));
        if (name && strcmp(name, "apply_patch") == 0)
            grammar = strdup(json_string_value(json_object_get(json_object_get(t, "format"), "definition")));
    }
    json_decref(root);
    cr_assert(grammar, "no apply_patch grammar in %s", CODEX_REQUEST);
    return grammar;
}

Test(lark_gbnf, codex_apply_patch) {
    char *g = codex_grammar();
    check(CUSTOM_SYNTAX_LARK, g,
          (const char *[]){
              "*** Begin Patch\n*** Add File: hello.txt\n+hello\n+\n*** End Patch\n",
              "*** Begin Patch\n*** Update File: src/a.c\n@@ int main\n-  return 1;\n+  return 0;\n"
              " }\n*** End Patch",
              "*** Begin Patch\n*** Delete File: x\n*** Update File: y\n*** Move to: z\n*** End Patch\n",
              NULL, "*** Begin Patch\n*** End Patch\n", "hello", "*** Begin Patch\n*** Add File: a\n",
              "*** Begin Patch\n*** Add File: a\nhello\n*** End Patch\n", NULL});
    free(g);
}

static void refused(custom_syntax syn, const char *src, const char *words) {
    char err[SIPP_ERROR_SIZE] = "", *gbnf = NULL;
    cr_expect_eq(custom_grammar_to_gbnf(syn, src, "root", true, &gbnf, err), SIPP_ERR_INVALID_ARGUMENT,
                 "%s was taken: %s", src, gbnf ? gbnf : "");
    cr_expect(strstr(err, words), "%s: the message '%s' lacks '%s'", src, err, words);
    free(gbnf);
}

Test(lark_gbnf, outside_the_subset_is_named) {
    refused(CUSTOM_SYNTAX_LARK, "start: WS \"a\"\n%import common.WS\n%ignore WS\n", "line 3: '%ignore'");
    refused(CUSTOM_SYNTAX_LARK, "start: a\n", "line 1: 'a' is used but not defined");
    refused(CUSTOM_SYNTAX_LARK, "begin: \"a\"\n", "no 'start' rule");
    refused(CUSTOM_SYNTAX_LARK, "start: \"a\"\nstart: \"b\"\n", "line 2: 'start' is defined twice");
    refused(CUSTOM_SYNTAX_LARK, "start: /a/i\n", "flag 'i'");
    refused(CUSTOM_SYNTAX_LARK, "start: \"a\n", "not closed");
    refused(CUSTOM_SYNTAX_LARK, "start: (\"a\"\n", "'(' is not closed");
    refused(CUSTOM_SYNTAX_LARK, "%import foo.BAR\nstart: \"a\"\n", "only the module 'common'");
    refused(CUSTOM_SYNTAX_LARK, "%import common.FOO\nstart: \"a\"\n", "common.FOO");
    refused(CUSTOM_SYNTAX_LARK, "%declare X\nstart: \"a\"\n", "'%declare'");
    refused(CUSTOM_SYNTAX_LARK, "start: _sep{x, \",\"}\n", "templates");
    refused(CUSTOM_SYNTAX_LARK, "start: \"a\"~999\n", "out of range");
    refused(CUSTOM_SYNTAX_REGEX, "a(?=b)", "'(?='");
    refused(CUSTOM_SYNTAX_REGEX, "(a)\\1", "'\\1'");
    refused(CUSTOM_SYNTAX_REGEX, "\\bword", "'\\b'");
    refused(CUSTOM_SYNTAX_REGEX, "a{1,5000}", "out of range");
    refused(CUSTOM_SYNTAX_REGEX, "(a", "not closed");
    refused(CUSTOM_SYNTAX_REGEX, "a)", "')' closes no group");
    refused(CUSTOM_SYNTAX_REGEX, "*a", "nothing to repeat");
    refused(CUSTOM_SYNTAX_REGEX, "[z-a]", "backwards");
    refused(CUSTOM_SYNTAX_REGEX, "a^b", "'^'");
    refused(CUSTOM_SYNTAX_REGEX, "\xff", "not UTF-8");
}
