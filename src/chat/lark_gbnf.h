/*
 * lark_gbnf.h: a custom tool's grammar (a Lark grammar or a regular expression, as OpenAI's
 * custom tools carry them) converted into llama.cpp's GBNF, so that sampling can only produce
 * text of the grammar. Pure C, no llama.cpp: the conversion is text to text.
 *
 * The Lark subset (docs/tools.md, "Custom tools"): rules and terminals (`name: ...`, `NAME: ...`,
 * `?name:` and `!name:` read as plain rules, a priority `.N` ignored), alternatives `|` (also on
 * the next lines), grouping `( )`, optional `[ ]`, the operators `?` `*` `+` and `~ n` / `~ n..m`,
 * string literals with Python's escapes (`"..."i` case-insensitive), ranges `"a".."z"`, regular
 * expression terminals `/.../` (flag `s` only), aliases `-> name` (dropped: they only rename a
 * tree node), and `%import common.NAME` (and `%import common (A, B)`) for common.lark's usual
 * terminals. `%ignore`, `%declare`, `%override`, `%extend`, templates and the other regex flags are
 * refused, naming the construct and the line. The start rule is `start`.
 *
 * The regex subset (Python's re, and the `/.../` terminals): literals, `.` (not a newline unless
 * the flag `s`), classes `[...]` with ranges, negation and the escapes \d \w \s inside, \d \D \w
 * \W \s \S outside, \n \t \r \f \v \xHH \uHHHH, escaped punctuation, groups `( )` and `(?: )`,
 * `|`, the quantifiers `? * + {n} {n,} {n,m}` (lazy forms read as greedy: the language is the
 * same), `^` at the start and `$` at the end. Lookarounds, backreferences, word boundaries and
 * named groups are refused.
 *
 * json: the grammar produces the text as it sits inside a JSON string (a tool call's "input"
 * argument, escaped as JSON escapes it: \" \\ \n \t \r \b \f, \u00XX for the other control
 * characters); otherwise the text itself.
 */
#ifndef SIPP_CHAT_LARK_GBNF_H
#define SIPP_CHAT_LARK_GBNF_H

#include <stdbool.h>

#include "sipp.h"

typedef enum custom_syntax { CUSTOM_SYNTAX_LARK, CUSTOM_SYNTAX_REGEX } custom_syntax;

/* The GBNF rules of src: the first is `prefix ::= ...` (the whole text), the others are named
 * prefix-NAME. prefix is a GBNF name ([a-zA-Z0-9-]). A construct outside the subset, or a
 * mistake, is SIPP_ERR_INVALID_ARGUMENT with a message naming it (and for Lark its line). */
sipp_status custom_grammar_to_gbnf(custom_syntax syntax, const char *src, const char *prefix, bool json,
                                   char **gbnf, char *err);

#endif
