/*
 * lark_gbnf.c: a custom tool's Lark grammar or regular expression as llama.cpp GBNF (lark_gbnf.h
 * says which subset). One pass, recursive descent, writing GBNF as it reads: every construct of the
 * subset has a GBNF form of one symbol (a literal, a class, a group or a rule name), so an
 * operator that follows it applies to it as written. Characters are written as escapes
 * (\xHH, \uHHHH, \UHHHHHHHH) except letters, digits and a few safe ASCII marks, so the output is
 * ASCII and no character of the source can end a GBNF literal or class early.
 *
 * In json mode a character c of the language becomes its JSON-escaped spelling, and a class
 * becomes the class without the characters JSON escapes, or'ed with those characters' escapes:
 * [^\n] is ( [^\x00-\x1F"\\] | "\\\"" | "\\\\" | "\\t" | ... ).
 *
 * Bounds: nesting at most MAX_NESTING deep, repetition counts at most MAX_REPEAT (GBNF expands
 * x{n,m} into copies), the source at most MAX_SOURCE bytes; the output grows linearly with it.
 */
#include "chat/lark_gbnf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

#define MAX_NESTING 64
#define MAX_REPEAT 256
#define MAX_SOURCE (256 * 1024)
#define MAX_CP 0x10FFFFu

typedef struct conv {
    const char *prefix;
    bool json;
    sipp_buf out;
    char *err;
    sipp_status st;
    int depth;
    int line; /* Lark: the line being read, for messages; 0 for a regex */
} conv;

static bool fail(conv *c, const char *fmt, ...) SIPP_PRINTF(2, 3);
static bool fail(conv *c, const char *fmt, ...) {
    if (c->st != SIPP_OK) return false;
    c->st = SIPP_ERR_INVALID_ARGUMENT;
    int n = c->line > 0 ? snprintf(c->err, SIPP_ERROR_SIZE, "line %d: ", c->line) : 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err + n, (size_t)(SIPP_ERROR_SIZE - n), fmt, ap);
    va_end(ap);
    return false;
}

static bool put(conv *c, const char *s) {
    if (sipp_buf_append(&c->out, s, strlen(s))) return true;
    c->st = SIPP_ERR_NO_MEMORY;
    snprintf(c->err, SIPP_ERROR_SIZE, "out of memory");
    return false;
}

/* One code point as GBNF writes it inside a literal or a class. */
static void put_cp(conv *c, uint32_t cp) {
    char s[16];
    bool plain = (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9') ||
                 (cp && strchr(" _,;:!#%&'<>=@`~*+.?/|(){}$", (int)cp) && cp < 0x80);
    if (plain)
        snprintf(s, sizeof s, "%c", (char)cp);
    else if (cp < 0x100)
        snprintf(s, sizeof s, "\\x%02X", (unsigned)cp);
    else if (cp < 0x10000)
        snprintf(s, sizeof s, "\\u%04X", (unsigned)cp);
    else
        snprintf(s, sizeof s, "\\U%08X", (unsigned)cp);
    put(c, s);
}

/* The JSON spelling of a character that JSON escapes, or NULL. */
static const char *json_escape(uint32_t cp, char buf[8]) {
    switch (cp) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\n': return "\\n";
    case '\t': return "\\t";
    case '\r': return "\\r";
    case '\b': return "\\b";
    case '\f': return "\\f";
    default: break;
    }
    if (cp >= 0x20) return NULL;
    snprintf(buf, 8, "\\u%04x", (unsigned)cp);
    return buf;
}

/* One character of the language inside a GBNF literal: itself, or in json mode its JSON spelling. */
static void put_text_cp(conv *c, uint32_t cp) {
    char buf[8];
    const char *e = c->json ? json_escape(cp, buf) : NULL;
    if (!e) {
        put_cp(c, cp);
        return;
    }
    for (; *e; e++)
        put_cp(c, (unsigned char)*e);
}

static void put_literal(conv *c, const uint32_t *cps, size_t n) {
    put(c, "\"");
    for (size_t i = 0; i < n; i++)
        put_text_cp(c, cps[i]);
    put(c, "\"");
}

/* ---- character sets: sorted, merged ranges ---------------------------------------------------- */

typedef struct cset {
    uint32_t (*r)[2];
    size_t n, cap;
    bool oom;
} cset;

static void cset_add(cset *s, uint32_t lo, uint32_t hi) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        void *p = realloc(s->r, cap * sizeof *s->r);
        if (!p) {
            s->oom = true;
            return;
        }
        s->r = p;
        s->cap = cap;
    }
    s->r[s->n][0] = lo;
    s->r[s->n][1] = hi;
    s->n++;
}

static int range_cmp(const void *a, const void *b) {
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

static void cset_normalize(cset *s) {
    if (s->n < 2) return;
    qsort(s->r, s->n, sizeof *s->r, range_cmp);
    size_t k = 0;
    for (size_t i = 1; i < s->n; i++) {
        if (s->r[i][0] <= s->r[k][1] + 1) {
            if (s->r[i][1] > s->r[k][1]) s->r[k][1] = s->r[i][1];
        } else {
            k++;
            s->r[k][0] = s->r[i][0];
            s->r[k][1] = s->r[i][1];
        }
    }
    s->n = k + 1;
}

static void cset_negate(cset *s) {
    cset_normalize(s);
    cset t = {0};
    uint32_t lo = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (s->r[i][0] > lo) cset_add(&t, lo, s->r[i][0] - 1);
        lo = s->r[i][1] + 1;
    }
    if (lo <= MAX_CP) cset_add(&t, lo, MAX_CP);
    t.oom |= s->oom;
    free(s->r);
    *s = t;
}

static bool cset_has(const cset *s, uint32_t cp) {
    for (size_t i = 0; i < s->n; i++)
        if (cp >= s->r[i][0] && cp <= s->r[i][1]) return true;
    return false;
}

/* lo..hi without the characters JSON escapes (controls, '"', '\\'). */
static void add_unescaped(cset *dst, uint32_t lo, uint32_t hi) {
    static const uint32_t cuts[] = {'"', '\\'};
    if (lo < 0x20) lo = 0x20;
    for (size_t k = 0; k < 2 && lo <= hi; k++) {
        if (cuts[k] < lo || cuts[k] > hi) continue;
        if (cuts[k] > lo) cset_add(dst, lo, cuts[k] - 1);
        lo = cuts[k] + 1;
    }
    if (lo <= hi) cset_add(dst, lo, hi);
}

static void put_class(conv *c, const cset *s) {
    put(c, "[");
    for (size_t i = 0; i < s->n; i++) {
        put_cp(c, s->r[i][0]);
        if (s->r[i][1] == s->r[i][0]) continue;
        put(c, "-");
        put_cp(c, s->r[i][1]);
    }
    put(c, "]");
}

/* A set as one GBNF symbol: a class, or in json mode a group of the unescaped class and the escapes. */
static bool put_set(conv *c, cset *s) {
    cset_normalize(s);
    if (s->oom) return fail(c, "out of memory");
    if (s->n == 0) return fail(c, "a character class matches no character");
    if (!c->json) {
        put_class(c, s);
        return true;
    }
    cset safe = {0};
    for (size_t i = 0; i < s->n; i++)
        add_unescaped(&safe, s->r[i][0], s->r[i][1]);
    if (safe.oom) {
        free(safe.r);
        return fail(c, "out of memory");
    }
    const char *sep = "";
    put(c, "(");
    if (safe.n) put_class(c, &safe), sep = " | ";
    free(safe.r);
    /* All the controls: those without a short escape as one \u00XX. */
    bool all_ctl = s->r[0][0] == 0 && s->r[0][1] >= 0x1F;
    if (all_ctl) put(c, sep), put(c, "\"\\x5Cu00\" [01] [0-9a-f]"), sep = " | ";
    for (uint32_t cp = 0; cp < 0x80; cp++) {
        char buf[8];
        const char *e = json_escape(cp, buf);
        if (!e || !cset_has(s, cp) || (all_ctl && e[1] == 'u')) continue;
        put(c, sep);
        put_literal(c, &cp, 1);
        sep = " | ";
    }
    put(c, ")");
    return true;
}

/* ---- UTF-8 (the source is checked valid first) ------------------------------------------------ */

static uint32_t next_cp(const char **p) {
    const unsigned char *s = (const unsigned char *)*p;
    int n = s[0] < 0x80 ? 1 : s[0] < 0xE0 ? 2 : s[0] < 0xF0 ? 3 : 4;
    uint32_t cp = n == 1 ? s[0] : n == 2 ? s[0] & 0x1F : n == 3 ? s[0] & 0x0F : s[0] & 0x07;
    for (int i = 1; i < n; i++)
        cp = (cp << 6) | (s[i] & 0x3F);
    *p += n;
    return cp;
}

/* ---- regular expressions ---------------------------------------------------------------------- */

typedef struct rx {
    const char *start, *p, *end;
    bool dotall;
} rx;

static bool rx_alt(conv *c, rx *r);

static bool hex_value(const char **p, const char *end, int digits, uint32_t *out) {
    uint32_t v = 0;
    for (int i = 0; i < digits; i++) {
        if (*p >= end) return false;
        char h = **p;
        int d = h >= '0' && h <= '9'   ? h - '0'
                : h >= 'a' && h <= 'f' ? h - 'a' + 10
                : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                       : -1;
        if (d < 0) return false;
        v = v * 16 + (uint32_t)d;
        (*p)++;
    }
    if (v > MAX_CP) return false;
    *out = v;
    return true;
}

/* The classes \d \w \s (upper case: negated). True when e names one. */
static bool class_escape(char e, cset *s, bool *negated) {
    char lower = (char)(e | 0x20);
    *negated = e >= 'A' && e <= 'Z';
    if (lower == 'd') {
        cset_add(s, '0', '9');
    } else if (lower == 'w') {
        cset_add(s, '0', '9');
        cset_add(s, 'A', 'Z');
        cset_add(s, 'a', 'z');
        cset_add(s, '_', '_');
    } else if (lower == 's') {
        cset_add(s, '\t', '\r');
        cset_add(s, ' ', ' ');
    } else {
        return false;
    }
    return true;
}

/* A one-character escape (after the backslash): the character, or false with the error set. */
static bool char_escape(conv *c, rx *r, uint32_t *cp) {
    static const char keys[] = "ntrfva", vals[] = "\n\t\r\f\v\a";
    char e = *r->p++;
    const char *k = e ? strchr(keys, e) : NULL;
    if (k || e == '0') {
        *cp = k ? (uint32_t)(unsigned char)vals[k - keys] : 0;
        return true;
    }
    if (e == 'x' || e == 'u' || e == 'U') {
        if (hex_value(&r->p, r->end, e == 'x' ? 2 : e == 'u' ? 4 : 8, cp)) return true;
        return fail(c, "'\\%c' must be followed by %d hex digits", e, e == 'x' ? 2 : e == 'u' ? 4 : 8);
    }
    if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '1' && e <= '9'))
        return fail(c,
                    "the escape '\\%c' is not supported (word boundaries, backreferences and other "
                    "special escapes have no GBNF form)",
                    e);
    r->p--;
    *cp = next_cp(&r->p);
    return true;
}

/* One member of a class: a character (returned in *cp, *is_set false) or a class escape. */
static bool class_member(conv *c, rx *r, cset *s, uint32_t *cp, bool *is_set) {
    *is_set = false;
    if (*r->p != '\\') {
        *cp = next_cp(&r->p);
        return true;
    }
    r->p++;
    if (r->p >= r->end) return fail(c, "a regular expression ends with a backslash");
    bool negated;
    if (class_escape(*r->p, s, &negated)) {
        if (negated) return fail(c, "'\\%c' inside a character class is not supported", *r->p);
        r->p++;
        *is_set = true;
        return true;
    }
    if (*r->p == 'b') {
        r->p++;
        *cp = '\b';
        return true;
    }
    return char_escape(c, r, cp);
}

static bool rx_class(conv *c, rx *r) {
    cset s = {0};
    bool negate = r->p < r->end && *r->p == '^', ok = true;
    if (negate) r->p++;
    for (bool first = true; ok && (first || *r->p != ']'); first = false) {
        if (r->p >= r->end) {
            ok = fail(c, "a character class '[' is not closed");
            break;
        }
        uint32_t lo, hi;
        bool is_set;
        if (!(ok = class_member(c, r, &s, &lo, &is_set)) || is_set) continue;
        hi = lo;
        if (r->p + 1 < r->end && r->p[0] == '-' && r->p[1] != ']') {
            r->p++;
            ok = class_member(c, r, &s, &hi, &is_set) &&
                 (!is_set || fail(c, "a range ends in a class escape"));
            if (ok && hi < lo) ok = fail(c, "the range in a character class runs backwards");
        }
        if (ok) cset_add(&s, lo, hi);
    }
    if (ok) r->p++;
    if (ok && negate) cset_negate(&s);
    ok = ok && put_set(c, &s);
    free(s.r);
    return ok;
}

static bool rx_escape(conv *c, rx *r) {
    if (++r->p >= r->end) return fail(c, "a regular expression ends with a backslash");
    cset s = {0};
    bool negated;
    if (class_escape(*r->p, &s, &negated)) {
        r->p++;
        if (negated) cset_negate(&s);
        bool ok = put_set(c, &s);
        free(s.r);
        return ok;
    }
    uint32_t cp;
    if (!char_escape(c, r, &cp)) return false;
    put_literal(c, &cp, 1);
    return true;
}

static bool rx_group(conv *c, rx *r) {
    if (r->p < r->end && *r->p == '?') {
        if (r->p + 1 >= r->end || r->p[1] != ':')
            return fail(c,
                        "'(?%.1s' is not supported (lookarounds, named groups and inline flags have no "
                        "GBNF form); use '(' or '(?:'",
                        r->p + 1 < r->end ? r->p + 1 : "");
        r->p += 2;
    }
    if (++c->depth > MAX_NESTING) return fail(c, "groups nest deeper than %d", MAX_NESTING);
    put(c, "(");
    bool ok = rx_alt(c, r);
    c->depth--;
    if (ok && (r->p >= r->end || *r->p != ')')) return fail(c, "a group '(' is not closed");
    r->p++;
    put(c, ")");
    return ok;
}

static bool rx_atom(conv *c, rx *r) {
    char ch = *r->p;
    if (ch == '(') return r->p++, rx_group(c, r);
    if (ch == '[') return r->p++, rx_class(c, r);
    if (ch == '\\') return rx_escape(c, r);
    if (ch == '*' || ch == '+' || ch == '?') return fail(c, "'%c' has nothing to repeat", ch);
    if (ch == '.') {
        r->p++;
        cset s = {0};
        cset_add(&s, '\n', '\n');
        if (!r->dotall) cset_negate(&s);
        if (r->dotall) cset_add(&s, 0, MAX_CP);
        bool ok = put_set(c, &s);
        free(s.r);
        return ok;
    }
    uint32_t cp = next_cp(&r->p);
    put_literal(c, &cp, 1);
    return true;
}

/* {n}, {n,}, {n,m} or {,m} at r->p; false (r->p unmoved) when it is not one, as Python reads it then. */
static bool braces(rx *r, long *lo, long *hi) {
    const char *p = r->p + 1;
    char *e;
    *lo = 0;
    *hi = -1;
    if (p < r->end && *p >= '0' && *p <= '9') *lo = strtol(p, &e, 10), p = e;
    bool comma = p < r->end && *p == ',';
    if (comma) p++;
    if (comma && p < r->end && *p >= '0' && *p <= '9') *hi = strtol(p, &e, 10), p = e;
    if (!comma) *hi = *lo;
    if (p >= r->end || *p != '}' || p == r->p + 1 || (p == r->p + 2 && comma)) return false;
    r->p = p + 1;
    return true;
}

static bool rx_quantifier(conv *c, rx *r) {
    char q = *r->p;
    long lo, hi;
    if (q == '?' || q == '*' || q == '+') {
        char s[2] = {q, 0};
        r->p++;
        put(c, s);
    } else if (q == '{' && braces(r, &lo, &hi)) {
        if (lo > MAX_REPEAT || hi > MAX_REPEAT || (hi >= 0 && hi < lo))
            return fail(c,
                        "the repetition {%ld,%ld} is out of range (counts up to %d, the first not above "
                        "the second)",
                        lo, hi, MAX_REPEAT);
        char s[48];
        if (hi < 0)
            snprintf(s, sizeof s, "{%ld,}", lo);
        else
            snprintf(s, sizeof s, "{%ld,%ld}", lo, hi);
        put(c, s);
    } else {
        return true;
    }
    if (r->p < r->end && *r->p == '?') r->p++; /* lazy: the same language */
    if (r->p < r->end && *r->p == '+')
        return fail(c, "possessive quantifiers ('*+', '++') are not supported");
    if (r->p < r->end && strchr("*+?", *r->p)) return fail(c, "'%c' follows a quantifier", *r->p);
    return true;
}

static bool rx_seq(conv *c, rx *r) {
    const char *sep = "";
    bool any = false;
    while (r->p < r->end && *r->p != '|' && *r->p != ')') {
        /* Anchors at the ends of the expression (or of one of its top-level alternatives). */
        if (*r->p == '^' && !any && c->depth == 0) {
            r->p++;
            continue;
        }
        if (*r->p == '$' && c->depth == 0 && (r->p + 1 == r->end || r->p[1] == '|')) {
            r->p++;
            continue;
        }
        if (*r->p == '^' || *r->p == '$')
            return fail(c, "'%c' is supported only at the start ('^') or the end ('$') of the expression",
                        *r->p);
        put(c, sep);
        if (!rx_atom(c, r) || !rx_quantifier(c, r)) return false;
        sep = " ";
        any = true;
    }
    if (!any) put(c, "\"\"");
    return c->st == SIPP_OK;
}

static bool rx_alt(conv *c, rx *r) {
    if (!rx_seq(c, r)) return false;
    while (r->p < r->end && *r->p == '|') {
        r->p++;
        put(c, " | ");
        if (!rx_seq(c, r)) return false;
    }
    return true;
}

/* A whole expression s[0..n) as one GBNF group. */
static bool rx_convert(conv *c, const char *s, size_t n, bool dotall) {
    rx r = {s, s, s + n, dotall};
    put(c, "(");
    if (!rx_alt(c, &r)) return false;
    if (r.p < r.end) return fail(c, "')' closes no group");
    put(c, ")");
    return c->st == SIPP_OK;
}

/* ---- Lark ------------------------------------------------------------------------------------- */

typedef struct name_list {
    char **names;
    int *lines;
    size_t n, cap;
} name_list;

typedef struct lark {
    const char *p, *end;
    name_list defined, used;
} lark;

static bool list_add(name_list *l, const char *s, size_t n, int line) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        char **names = realloc(l->names, cap * sizeof *names);
        if (names) l->names = names;
        int *lines = names ? realloc(l->lines, cap * sizeof *lines) : NULL;
        if (!lines) return false;
        l->lines = lines;
        l->cap = cap;
    }
    if (!(l->names[l->n] = strndup(s, n))) return false;
    l->lines[l->n++] = line;
    return true;
}

static bool list_has(const name_list *l, const char *s, size_t n) {
    for (size_t i = 0; i < l->n; i++)
        if (strlen(l->names[i]) == n && memcmp(l->names[i], s, n) == 0) return true;
    return false;
}

static void list_free(name_list *l) {
    for (size_t i = 0; i < l->n; i++)
        free(l->names[i]);
    free(l->names);
    free(l->lines);
}

static bool name_char(char ch, bool first) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' ||
           (!first && ch >= '0' && ch <= '9');
}

/* Spaces and comments up to the end of the line. */
static void skip_blank(lark *l) {
    while (l->p < l->end) {
        if (*l->p == ' ' || *l->p == '\t' || *l->p == '\r') {
            l->p++;
        } else if (*l->p == '/' && l->p + 1 < l->end && l->p[1] == '/') {
            while (l->p < l->end && *l->p != '\n')
                l->p++;
        } else {
            break;
        }
    }
}

static size_t read_name(lark *l) {
    const char *s = l->p;
    if (l->p < l->end && name_char(*l->p, true))
        for (l->p++; l->p < l->end && name_char(*l->p, false); l->p++) {
        }
    return (size_t)(l->p - s);
}

/* A rule's GBNF name: prefix-NAME, with '_' as '-'. */
static void put_rule_name(conv *c, const char *s, size_t n) {
    put(c, c->prefix);
    put(c, "-");
    for (size_t i = 0; i < n; i++) {
        char ch[2] = {s[i] == '_' ? '-' : s[i], 0};
        put(c, ch);
    }
}

/* After a line break inside a definition: true (and past the break) when the next line that is not
 * blank begins with '|', which continues the definition. */
static bool continues(conv *c, lark *l) {
    const char *save = l->p;
    int line = c->line;
    while (l->p < l->end && *l->p == '\n') {
        l->p++, c->line++;
        skip_blank(l);
    }
    if (l->p < l->end && *l->p == '|') return true;
    l->p = save;
    c->line = line;
    return false;
}

static bool lark_alts(conv *c, lark *l);

/* A string literal's characters, with Python's escapes. */
static bool lark_string(conv *c, lark *l, uint32_t **cps, size_t *n) {
    size_t cap = (size_t)(l->end - l->p) + 1;
    *cps = malloc(cap * sizeof **cps);
    *n = 0;
    if (!*cps) return fail(c, "out of memory");
    for (l->p++; l->p < l->end && *l->p != '"' && *l->p != '\n';) {
        uint32_t cp;
        if (*l->p != '\\') {
            cp = next_cp(&l->p);
        } else if (l->p + 1 < l->end && (l->p[1] == '"' || l->p[1] == '\\')) {
            cp = (unsigned char)l->p[1];
            l->p += 2;
        } else {
            rx r = {l->p, l->p + 1, l->end, false};
            if (l->p + 1 >= l->end || !char_escape(c, &r, &cp))
                return c->st != SIPP_OK ? false : fail(c, "a string ends with a backslash");
            l->p = r.p;
        }
        (*cps)[(*n)++] = cp;
    }
    if (l->p >= l->end || *l->p != '"') return fail(c, "a string literal is not closed on its line");
    l->p++;
    return true;
}

static void put_folded(conv *c, const uint32_t *cps, size_t n) {
    put(c, "(");
    for (size_t i = 0; i < n; i++) {
        uint32_t lo = cps[i] | 0x20;
        if (i) put(c, " ");
        if (lo >= 'a' && lo <= 'z') {
            cset s = {0};
            cset_add(&s, lo, lo);
            cset_add(&s, lo - 0x20, lo - 0x20);
            put_set(c, &s);
            free(s.r);
        } else {
            put_literal(c, &cps[i], 1);
        }
    }
    put(c, n ? ")" : "\"\")");
}

/* "..." , "..."i , or the range "a".."z". */
static bool lark_literal(conv *c, lark *l) {
    uint32_t *a = NULL, *b = NULL;
    size_t na, nb;
    bool ok = lark_string(c, l, &a, &na);
    bool folded = ok && l->p < l->end && *l->p == 'i' && !(l->p + 1 < l->end && name_char(l->p[1], false));
    if (folded) l->p++;
    if (ok && l->end - l->p >= 3 && memcmp(l->p, "..\"", 3) == 0) {
        l->p += 2;
        ok = lark_string(c, l, &b, &nb);
        if (ok && (na != 1 || nb != 1 || b[0] < a[0]))
            ok = fail(c, "a range \"a\"..\"z\" takes two single characters, the first not above the second");
        cset s = {0};
        if (ok) cset_add(&s, a[0], b[0]);
        ok = ok && put_set(c, &s);
        free(s.r);
    } else if (ok) {
        folded ? put_folded(c, a, na) : put_literal(c, a, na);
    }
    free(a);
    free(b);
    return ok;
}

/* /regex/flags */
static bool lark_regex(conv *c, lark *l) {
    sipp_buf pat = {0};
    for (l->p++; l->p < l->end && *l->p != '/' && *l->p != '\n'; l->p++) {
        if (*l->p == '\\' && l->p + 1 < l->end && l->p[1] == '/')
            l->p++;
        else if (*l->p == '\\' && l->p + 1 < l->end)
            sipp_buf_append(&pat, l->p++, 1);
        sipp_buf_append(&pat, l->p, 1);
    }
    bool dotall = false, ok = l->p < l->end && *l->p == '/';
    if (!ok) fail(c, "a regular expression '/' is not closed on its line");
    for (l->p += ok; ok && l->p < l->end && name_char(*l->p, false); l->p++) {
        if (*l->p == 's')
            dotall = true;
        else
            ok = fail(c, "the regular expression flag '%c' is not supported (only 's')", *l->p);
    }
    ok = ok && rx_convert(c, pat.data ? pat.data : "", pat.len, dotall);
    sipp_buf_free(&pat);
    return ok;
}

static bool lark_atom(conv *c, lark *l) {
    char ch = l->p < l->end ? *l->p : '\n';
    if (ch == '(' || ch == '[') {
        if (++c->depth > MAX_NESTING) return fail(c, "groups nest deeper than %d", MAX_NESTING);
        l->p++;
        put(c, "(");
        bool ok = lark_alts(c, l);
        char close = ch == '(' ? ')' : ']';
        if (ok && (l->p >= l->end || *l->p != close)) return fail(c, "'%c' is not closed", ch);
        l->p++;
        c->depth--;
        return put(c, ch == '(' ? ")" : ")?");
    }
    if (ch == '"') return lark_literal(c, l);
    if (ch == '/') return lark_regex(c, l);
    const char *s = l->p;
    size_t n = read_name(l);
    if (!n) return fail(c, "unexpected '%c' in a rule", ch == '\n' ? ' ' : ch);
    if (l->p < l->end && *l->p == '{') return fail(c, "templates ('%.*s{...}') are not supported", (int)n, s);
    if (!list_add(&l->used, s, n, c->line)) return fail(c, "out of memory");
    put_rule_name(c, s, n);
    return true;
}

/* An atom and its operator: ? * + or ~ n / ~ n..m. */
static bool lark_item(conv *c, lark *l) {
    if (!lark_atom(c, l)) return false;
    skip_blank(l);
    if (l->p >= l->end || !strchr("?*+~", *l->p)) return true;
    char op = *l->p++;
    if (op != '~') {
        char s[2] = {op, 0};
        return put(c, s);
    }
    skip_blank(l);
    char *e;
    long lo = strtol(l->p, &e, 10), hi = lo;
    if (e == l->p) return fail(c, "'~' must be followed by a count");
    l->p = e;
    if (l->end - l->p >= 2 && memcmp(l->p, "..", 2) == 0) {
        hi = strtol(l->p + 2, &e, 10);
        if (e == l->p + 2) return fail(c, "'~ n..' must be followed by a second count");
        l->p = e;
    }
    if (lo < 0 || hi < lo || hi > MAX_REPEAT)
        return fail(c, "the repetition '~ %ld..%ld' is out of range (counts up to %d)", lo, hi, MAX_REPEAT);
    char s[48];
    snprintf(s, sizeof s, "{%ld,%ld}", lo, hi);
    return put(c, s);
}

/* Items up to '|', a closing bracket, the end of the line, or an alias "-> name" (dropped). */
static bool lark_seq(conv *c, lark *l) {
    bool any = false;
    for (skip_blank(l); l->p < l->end && !strchr("|)]\n", *l->p); skip_blank(l)) {
        if (l->end - l->p >= 2 && memcmp(l->p, "->", 2) == 0) {
            l->p += 2;
            skip_blank(l);
            if (!read_name(l)) return fail(c, "'->' must be followed by a name");
            continue;
        }
        if (any) put(c, " ");
        if (!lark_item(c, l)) return false;
        any = true;
    }
    if (!any) put(c, "\"\"");
    return c->st == SIPP_OK;
}

static bool lark_alts(conv *c, lark *l) {
    if (!lark_seq(c, l)) return false;
    for (;;) {
        if (l->p < l->end && *l->p == '\n' && !continues(c, l)) return true;
        if (l->p >= l->end || *l->p != '|') return true;
        l->p++;
        put(c, " | ");
        if (!lark_seq(c, l)) return false;
    }
}

/* common.lark's terminals that grammars import, as regular expressions. */
static const char *const COMMON[][2] = {
    {"LF", "\\n"},
    {"CR", "\\r"},
    {"NEWLINE", "(\\r?\\n)+"},
    {"WS", "[ \\t\\f\\r\\n]+"},
    {"WS_INLINE", "[ \\t]+"},
    {"DIGIT", "[0-9]"},
    {"HEXDIGIT", "[a-fA-F0-9]"},
    {"INT", "[0-9]+"},
    {"SIGNED_INT", "[+-]?[0-9]+"},
    {"DECIMAL", "[0-9]+\\.[0-9]*|\\.[0-9]+"},
    {"FLOAT", "([0-9]+\\.[0-9]*|\\.[0-9]+)([eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+"},
    {"SIGNED_FLOAT", "[+-]?(([0-9]+\\.[0-9]*|\\.[0-9]+)([eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)"},
    {"NUMBER", "([0-9]+\\.[0-9]*|\\.[0-9]+)([eE][+-]?[0-9]+)?|[0-9]+([eE][+-]?[0-9]+)?"},
    {"SIGNED_NUMBER", "[+-]?(([0-9]+\\.[0-9]*|\\.[0-9]+)([eE][+-]?[0-9]+)?|[0-9]+([eE][+-]?[0-9]+)?)"},
    {"LCASE_LETTER", "[a-z]"},
    {"UCASE_LETTER", "[A-Z]"},
    {"LETTER", "[a-zA-Z]"},
    {"WORD", "[a-zA-Z]+"},
    {"CNAME", "[_a-zA-Z][_a-zA-Z0-9]*"},
    {"ESCAPED_STRING", "\"([^\"\\\\\\n]|\\\\[^\\n])*\""},
};

/* One imported terminal, under its own name or an alias. */
static bool import_one(conv *c, lark *l, const char *s, size_t n, const char *as, size_t an) {
    for (size_t i = 0; i < sizeof COMMON / sizeof COMMON[0]; i++) {
        if (strlen(COMMON[i][0]) != n || memcmp(COMMON[i][0], s, n) != 0) continue;
        if (list_has(&l->defined, as, an)) return fail(c, "'%.*s' is defined twice", (int)an, as);
        if (!list_add(&l->defined, as, an, c->line)) return fail(c, "out of memory");
        put_rule_name(c, as, an);
        put(c, " ::= ");
        if (!rx_convert(c, COMMON[i][1], strlen(COMMON[i][1]), false)) return false;
        return put(c, "\n");
    }
    return fail(c,
                "'%%import common.%.*s' is not one of the common terminals sipp knows (LF, WS, INT, "
                "NUMBER, CNAME, ESCAPED_STRING, ...)",
                (int)n, s);
}

/* %import common.NAME [-> ALIAS]  or  %import common (A, B) */
static bool lark_import(conv *c, lark *l) {
    skip_blank(l);
    if (l->end - l->p < 6 || memcmp(l->p, "common", 6) != 0 ||
        (l->p[6] != '.' && l->p[6] != ' ' && l->p[6] != '('))
        return fail(c, "'%%import' takes only the module 'common'");
    l->p += 6;
    skip_blank(l);
    if (*l->p == '.') {
        l->p++;
        const char *s = l->p, *as;
        size_t n = read_name(l), an = n;
        as = s;
        skip_blank(l);
        if (l->end - l->p >= 2 && memcmp(l->p, "->", 2) == 0) {
            l->p += 2;
            skip_blank(l);
            as = l->p;
            an = read_name(l);
        }
        return n && an ? import_one(c, l, s, n, as, an) : fail(c, "'%%import common.' must name a terminal");
    }
    if (*l->p != '(') return fail(c, "'%%import common' must be followed by '.NAME' or '(NAMES)'");
    for (l->p++; skip_blank(l), l->p < l->end && *l->p != ')';) {
        const char *s = l->p;
        size_t n = read_name(l);
        if (!n || !import_one(c, l, s, n, s, n))
            return c->st == SIPP_OK ? fail(c, "bad '%%import' list") : false;
        skip_blank(l);
        if (l->p < l->end && *l->p == ',') l->p++;
    }
    if (l->p >= l->end) return fail(c, "'%%import common (' is not closed");
    l->p++;
    return true;
}

static bool lark_directive(conv *c, lark *l) {
    const char *s = ++l->p;
    size_t n = read_name(l);
    if (n == 6 && memcmp(s, "import", 6) == 0) return lark_import(c, l);
    if (n == 6 && memcmp(s, "ignore", 6) == 0)
        return fail(c, "'%%ignore' is not supported: it lets the ignored text appear between any two tokens, "
                       "which a GBNF grammar cannot say; write the whitespace into the rules");
    return fail(c, "the directive '%%%.*s' is not supported (only '%%import common...')", (int)n, s);
}

/* [?!]name[.priority]: alternatives */
static bool lark_definition(conv *c, lark *l) {
    if (*l->p == '?' || *l->p == '!') l->p++;
    const char *s = l->p;
    size_t n = read_name(l);
    if (!n) return fail(c, "expected a rule or terminal definition ('name: ...'), found '%c'", *l->p);
    if (l->p < l->end && *l->p == '.') {
        l->p++;
        if (l->p < l->end && *l->p == '-') l->p++;
        while (l->p < l->end && *l->p >= '0' && *l->p <= '9')
            l->p++;
    }
    if (l->p < l->end && *l->p == '{') return fail(c, "templates ('%.*s{...}') are not supported", (int)n, s);
    skip_blank(l);
    if (l->p >= l->end || *l->p != ':') return fail(c, "expected ':' after '%.*s'", (int)n, s);
    l->p++;
    if (list_has(&l->defined, s, n)) return fail(c, "'%.*s' is defined twice", (int)n, s);
    if (!list_add(&l->defined, s, n, c->line)) return fail(c, "out of memory");
    put_rule_name(c, s, n);
    put(c, " ::= ");
    skip_blank(l);
    if (l->p < l->end && *l->p == '\n' && continues(c, l)) l->p++; /* "name:" then "| a" lines */
    if (!lark_alts(c, l)) return false;
    return put(c, "\n");
}

static bool lark_check_names(conv *c, lark *l) {
    c->line = 0;
    if (!list_has(&l->defined, "start", 5)) return fail(c, "the grammar has no 'start' rule");
    for (size_t i = 0; i < l->used.n; i++) {
        const char *u = l->used.names[i];
        if (list_has(&l->defined, u, strlen(u))) continue;
        c->line = l->used.lines[i];
        return fail(c, "'%s' is used but not defined (or imported with '%%import common.%s')", u, u);
    }
    return true;
}

static bool lark_convert(conv *c, const char *src) {
    lark l = {src, src + strlen(src), {0}, {0}};
    put(c, c->prefix);
    put(c, " ::= ");
    put_rule_name(c, "start", 5);
    put(c, "\n");
    bool ok = true;
    for (c->line = 1; ok && l.p < l.end;) {
        skip_blank(&l);
        if (l.p >= l.end) break;
        if (*l.p == '\n') {
            l.p++, c->line++;
            continue;
        }
        ok = *l.p == '%' ? lark_directive(c, &l) : lark_definition(c, &l);
        skip_blank(&l);
        if (ok && l.p < l.end && *l.p != '\n') ok = fail(c, "unexpected '%c' after a definition", *l.p);
    }
    ok = ok && lark_check_names(c, &l);
    list_free(&l.defined);
    list_free(&l.used);
    return ok;
}

sipp_status custom_grammar_to_gbnf(custom_syntax syntax, const char *src, const char *prefix, bool json,
                                   char **gbnf, char *err) {
    *gbnf = NULL;
    conv c = {.prefix = prefix, .json = json, .err = err, .st = SIPP_OK};
    size_t n = strlen(src);
    if (n > MAX_SOURCE)
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "the grammar is over %d bytes", MAX_SOURCE);
    if (!sipp_utf8_valid(src, n))
        return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "the grammar is not UTF-8");
    if (memchr(src, 0, n)) return sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "the grammar holds a NUL");
    bool ok;
    if (syntax == CUSTOM_SYNTAX_LARK) {
        ok = lark_convert(&c, src);
    } else {
        put(&c, prefix);
        put(&c, " ::= ");
        ok = rx_convert(&c, src, n, false) && put(&c, "\n");
    }
    if (!ok || c.st != SIPP_OK) {
        sipp_buf_free(&c.out);
        return c.st != SIPP_OK ? c.st : sipp_fail(err, SIPP_ERR_INVALID_ARGUMENT, "the grammar is not valid");
    }
    *gbnf = c.out.data;
    return SIPP_OK;
}
