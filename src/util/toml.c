/*
 * toml.c - a strict TOML 1.0 parser; see toml.h for the interface and its design.
 *
 * The input is read in two passes. check_encoding() first validates the whole text as UTF-8 and rejects
 * the characters TOML bans everywhere (control characters other than tab, and CR not followed by LF).
 * Everything after that is a recursive-descent parser that may copy string bytes without checking them
 * again and only has to treat "\r\n" as a newline.
 *
 * The subtle part of TOML is deciding when a table may still receive keys. Every table and array
 * remembers how it came to exist (its origin) and the rules become lookups on that origin:
 *   - [a.b.c] walks through any table that is not inline, and through the last element of an array of
 *     tables; missing parents are created as IMPLICIT tables, which a later [a.b] may still define once.
 *   - a dotted key walks only through tables that dotted keys created or that are still IMPLICIT, and
 *     claims the latter; so a table defined by a header, an inline table or an array never grows through
 *     dotted keys written elsewhere.
 *   - inline tables and [ ... ] arrays are complete once their closing bracket is read.
 */
#include "toml.h"

#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__)
#define TOML_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define TOML_PRINTF(fmt, args)
#endif

enum {
    END_OF_INPUT = -1,      /* what peek() returns past the end of the input */
    TABLE_INDEX_MIN = 8,    /* tables with more entries than this get a hash index */
    TABLE_INDEX_START = 32, /* first size of that index (a power of two) */
    QUOTE_MAX = 64,         /* most bytes of one key or token shown in an error message */
    MSG_TEXT_MAX = 160,     /* room for a quoted key path in an error message */
    CHAR_DESC_MAX = 16,     /* room for describing one character: 'x', 'é', end of line */
    NANO_DIGITS = 9,        /* fractional-second digits kept (nanoseconds) */
    MAX_HOUR = 23,
    MAX_MINUTE = 59,
    MAX_SECOND = 60, /* RFC 3339 allows a leap second */
    MAX_MONTH = 12,
    MAX_CODE_POINT = 0x10FFFF,
    SURROGATE_FIRST = 0xD800,
    SURROGATE_LAST = 0xDFFF,
};

static const char UTF8_BOM[] = "\xEF\xBB\xBF";
#define UTF8_BOM_LEN (sizeof UTF8_BOM - 1)

/* How a table or array came to exist; it decides what may later add to it (see the top comment). */
typedef enum origin {
    ORIGIN_VALUE,    /* scalars, and arrays written as [ ... ]: complete once written */
    ORIGIN_ROOT,     /* the document's top-level table */
    ORIGIN_IMPLICIT, /* a parent created by a header: [a.b] creates a */
    ORIGIN_HEADER,   /* defined by its own [header], or an element of an array of tables */
    ORIGIN_DOTTED,   /* created by a dotted key: a.b = 1 creates a */
    ORIGIN_INLINE,   /* written as { ... } */
    ORIGIN_AOT,      /* array created by [[header]]; later [[header]]s append to it */
} origin;

struct toml_node {
    toml_kind kind;
    origin origin;
    int depth; /* 0 for the root; bounded by TOML_MAX_DEPTH */
    int line, col;
    const char *file; /* the document's file name, shared */
    const char *key;  /* the entry key naming this node, owned by that entry; NULL if none */
    union {
        struct {
            char *ptr;
            size_t len;
        } str;
        int64_t i;
        double f;
        bool b;
        toml_datetime dt;
        struct {
            toml_entry *items;
            size_t len, cap;
            uint32_t *slots; /* hash index: entry index + 1, 0 = empty; NULL while the table is small */
            size_t nslots;   /* a power of two */
        } tbl;
        struct {
            toml_node **items;
            size_t len, cap;
        } arr;
    } u;
};

struct toml_doc {
    toml_node *root;
    char *file;
};

typedef struct srcpos {
    int line, col;
} srcpos;

typedef struct parser {
    const char *s;
    size_t len, pos;
    srcpos at; /* position of s[pos] */
    const char *file;
    char *err;
    size_t errlen;
    bool failed;
    toml_node *root;
} parser;

/* One part of a (possibly dotted) key, unescaped, with where it was written. */
typedef struct keypart {
    char *name;
    size_t len;
    srcpos at;
} keypart;

typedef struct keypath {
    keypart *parts;
    size_t n, cap;
} keypath;

/* A growable byte string, always NUL-terminated once allocated. */
typedef struct strbuf {
    char *data;
    size_t len, cap;
} strbuf;

/* A bounded message builder: appends silently stop when it is full. */
typedef struct msgbuf {
    char *buf;
    size_t cap, len;
} msgbuf;

/* ---- characters ---------------------------------------------------------------------------------- */

static bool is_digit(int c) { return c >= '0' && c <= '9'; }

static bool is_alpha(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

static bool is_bare_key_char(int c) { return is_alpha(c) || is_digit(c) || c == '_' || c == '-'; }

static int digit_value(int c, int base) {
    int v;
    if (is_digit(c))
        v = c - '0';
    else if (c >= 'a' && c <= 'f')
        v = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
        v = c - 'A' + 10;
    else
        return -1;
    return v < base ? v : -1;
}

/* Length of the well-formed UTF-8 sequence at s (overlong forms, surrogates and code points past
 * U+10FFFF are not well-formed), or 0. */
static size_t utf8_seq_len(const unsigned char *s, size_t avail) {
    unsigned char b = s[0], lo = 0x80, hi = 0xBF;
    size_t n;
    if (b < 0x80) return 1;
    if (b >= 0xC2 && b <= 0xDF) {
        n = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
        n = 3;
        if (b == 0xE0) lo = 0xA0;
        if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        n = 4;
        if (b == 0xF0) lo = 0x90;
        if (b == 0xF4) hi = 0x8F;
    } else {
        return 0;
    }
    if (avail < n || s[1] < lo || s[1] > hi) return 0;
    for (size_t k = 2; k < n; k++)
        if ((s[k] & 0xC0) != 0x80) return 0;
    return n;
}

static size_t utf8_encode(uint32_t cp, char out[4]) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---- message text -------------------------------------------------------------------------------- */

static void mb_putc(msgbuf *m, char c) {
    if (m->len + 1 < m->cap) {
        m->buf[m->len++] = c;
        m->buf[m->len] = '\0';
    }
}

static void mb_puts(msgbuf *m, const char *s) {
    while (*s)
        mb_putc(m, *s++);
}

/* Appends user text so that it reads unambiguously inside quotes: control characters become \uXXXX,
 * and text longer than QUOTE_MAX is cut (at a character boundary) and marked with "...". */
static void mb_put_text(msgbuf *m, const char *s, size_t n) {
    size_t shown = n;
    if (shown > QUOTE_MAX) {
        shown = QUOTE_MAX;
        while (shown > 0 && ((unsigned char)s[shown] & 0xC0) == 0x80)
            shown--;
    }
    for (size_t i = 0; i < shown; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7F) {
            char esc[8];
            snprintf(esc, sizeof esc, "\\u%04X", c);
            mb_puts(m, esc);
        } else {
            mb_putc(m, (char)c);
        }
    }
    if (shown < n) mb_puts(m, "...");
}

static bool is_bare_key(const char *s, size_t n) {
    if (n == 0) return false;
    for (size_t i = 0; i < n; i++)
        if (!is_bare_key_char((unsigned char)s[i])) return false;
    return true;
}

/* Writes parts [0, count) of a key as the user would type it, in single quotes: 'a."b c".d'. */
static const char *describe_path(const keypath *kp, size_t count, char *buf, size_t cap) {
    msgbuf m = {buf, cap, 0};
    buf[0] = '\0';
    mb_putc(&m, '\'');
    for (size_t i = 0; i < count; i++) {
        const keypart *k = &kp->parts[i];
        if (i > 0) mb_putc(&m, '.');
        if (is_bare_key(k->name, k->len)) {
            mb_put_text(&m, k->name, k->len);
        } else {
            mb_putc(&m, '"');
            mb_put_text(&m, k->name, k->len);
            mb_putc(&m, '"');
        }
    }
    mb_putc(&m, '\'');
    return buf;
}

static const char *describe_text(const char *s, size_t n, char *buf, size_t cap) {
    msgbuf m = {buf, cap, 0};
    buf[0] = '\0';
    mb_putc(&m, '\'');
    mb_put_text(&m, s, n);
    mb_putc(&m, '\'');
    return buf;
}

/* What an existing node is, for "already defined as ..." messages. */
static const char *describe_node(const toml_node *v) {
    switch (v->kind) {
    case TOML_TABLE:
        switch (v->origin) {
        case ORIGIN_INLINE: return "an inline table";
        case ORIGIN_DOTTED: return "a table defined by dotted keys";
        case ORIGIN_HEADER: return "a table defined by a [header]";
        default: return "a table";
        }
    case TOML_ARRAY: return v->origin == ORIGIN_AOT ? "an array of tables" : "an array";
    case TOML_INTEGER: return "an integer";
    case TOML_DATETIME:
    case TOML_DATETIME_LOCAL:
    case TOML_DATE_LOCAL:
    case TOML_TIME_LOCAL: return "a date/time";
    case TOML_STRING: return "a string";
    case TOML_FLOAT: return "a float";
    case TOML_BOOL: return "a boolean";
    }
    return "a value";
}

/* ---- errors -------------------------------------------------------------------------------------- */

/* Records the first error as "FILE:LINE:COL: message"; later ones are consequences and are dropped. */
TOML_PRINTF(3, 4) static bool fail_at(parser *p, srcpos at, const char *fmt, ...) {
    if (p->failed) return false;
    p->failed = true;
    if (p->err && p->errlen > 0) {
        int n = snprintf(p->err, p->errlen, "%s:%d:%d: ", p->file, at.line, at.col);
        if (n >= 0 && (size_t)n < p->errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return false;
}

static bool fail_oom(parser *p) { return fail_at(p, p->at, "out of memory"); }

/* ---- cursor -------------------------------------------------------------------------------------- */

static int peek(const parser *p) { return p->pos < p->len ? (unsigned char)p->s[p->pos] : END_OF_INPUT; }

static int peek_at(const parser *p, size_t k) {
    return k < p->len - p->pos ? (unsigned char)p->s[p->pos + k] : END_OF_INPUT;
}

/* Moves past one byte, keeping line and column; columns count code points, so continuation bytes of a
 * UTF-8 sequence do not advance it. */
static void advance(parser *p) {
    if (p->pos >= p->len) return;
    unsigned char b = (unsigned char)p->s[p->pos++];
    if (b == '\n') {
        p->at.line++;
        p->at.col = 1;
    } else if ((b & 0xC0) != 0x80) {
        p->at.col++;
    }
}

static void advance_n(parser *p, size_t n) {
    while (n-- > 0)
        advance(p);
}

/* check_encoding() guarantees that a CR is followed by LF, so a CR always starts a newline. */
static bool at_newline(const parser *p) { return peek(p) == '\n' || peek(p) == '\r'; }

static bool eat_newline(parser *p) {
    if (peek(p) == '\r' && peek_at(p, 1) == '\n') advance(p);
    if (peek(p) != '\n') return false;
    advance(p);
    return true;
}

static void skip_ws(parser *p) {
    while (peek(p) == ' ' || peek(p) == '\t')
        advance(p);
}

static void skip_comment(parser *p) {
    if (peek(p) != '#') return;
    while (peek(p) != END_OF_INPUT && !at_newline(p))
        advance(p);
}

/* Whitespace, comments and newlines, as allowed between array elements. */
static void skip_trivia(parser *p) {
    for (;;) {
        skip_ws(p);
        skip_comment(p);
        if (!eat_newline(p)) return;
    }
}

/* Describes the character at the cursor for "expected X, found Y" messages. */
static const char *describe_here(const parser *p, char buf[CHAR_DESC_MAX]) {
    int c = peek(p);
    if (c == END_OF_INPUT) return "end of file";
    if (at_newline(p)) return "end of line";
    if (c >= 0x20 && c < 0x7F) {
        snprintf(buf, CHAR_DESC_MAX, "'%c'", c);
        return buf;
    }
    size_t n = utf8_seq_len((const unsigned char *)p->s + p->pos, p->len - p->pos);
    if (n == 0 || n + 3 > CHAR_DESC_MAX) n = 1;
    buf[0] = '\'';
    memcpy(buf + 1, p->s + p->pos, n);
    buf[n + 1] = '\'';
    buf[n + 2] = '\0';
    return buf;
}

/* ---- whole-input checks -------------------------------------------------------------------------- */

/* Rejects what TOML forbids anywhere in a document, so that later stages can trust every byte:
 * malformed UTF-8, control characters other than tab, and a CR that does not start a CRLF. */
static bool check_encoding(parser *p) {
    const unsigned char *s = (const unsigned char *)p->s;
    srcpos at = {1, 1};
    for (size_t i = 0; i < p->len;) {
        unsigned char b = s[i];
        if (b == '\n') {
            at.line++;
            at.col = 1;
            i++;
            continue;
        }
        if (b == '\r' && !(i + 1 < p->len && s[i + 1] == '\n'))
            return fail_at(p, at, "carriage return is not followed by a line feed");
        if ((b < 0x20 && b != '\t' && b != '\r') || b == 0x7F)
            return fail_at(p, at, "control character U+%04X is not allowed", b);
        size_t n = utf8_seq_len(s + i, p->len - i);
        if (n == 0) return fail_at(p, at, "invalid UTF-8 (byte 0x%02X)", b);
        i += n;
        at.col++;
    }
    return true;
}

/* ---- memory -------------------------------------------------------------------------------------- */

static char *memdup_z(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

static bool sb_reserve(strbuf *b, size_t extra) {
    if (extra > SIZE_MAX / 2 - b->len) return false;
    size_t need = b->len + extra + 1;
    if (need <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 32;
    while (cap < need)
        cap *= 2;
    char *d = realloc(b->data, cap);
    if (!d) return false;
    b->data = d;
    b->cap = cap;
    return true;
}

static bool sb_append(strbuf *b, const char *s, size_t n) {
    if (!sb_reserve(b, n)) return false;
    if (n > 0) memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return true;
}

/* Hands over the buffer's string (an empty one if nothing was appended). */
static char *sb_take(strbuf *b) {
    if (!b->data && !sb_reserve(b, 0)) return NULL;
    char *s = b->data;
    *b = (strbuf){0};
    return s;
}

static void keypath_free(keypath *kp) {
    for (size_t i = 0; i < kp->n; i++)
        free(kp->parts[i].name);
    free(kp->parts);
    *kp = (keypath){0};
}

static bool keypath_push(keypath *kp, char *name, size_t len, srcpos at) {
    if (kp->n == kp->cap) {
        size_t cap = kp->cap ? kp->cap * 2 : 4;
        keypart *parts = realloc(kp->parts, cap * sizeof *parts);
        if (!parts) return false;
        kp->parts = parts;
        kp->cap = cap;
    }
    kp->parts[kp->n++] = (keypart){name, len, at};
    return true;
}

/* ---- nodes --------------------------------------------------------------------------------------- */

static void node_free(toml_node *n) {
    if (!n) return;
    switch (n->kind) {
    case TOML_TABLE:
        for (size_t i = 0; i < n->u.tbl.len; i++) {
            free((char *)n->u.tbl.items[i].key);
            node_free((toml_node *)n->u.tbl.items[i].value);
        }
        free(n->u.tbl.items);
        free(n->u.tbl.slots);
        break;
    case TOML_ARRAY:
        for (size_t i = 0; i < n->u.arr.len; i++)
            node_free(n->u.arr.items[i]);
        free(n->u.arr.items);
        break;
    case TOML_STRING: free(n->u.str.ptr); break;
    case TOML_DATETIME:
    case TOML_DATETIME_LOCAL:
    case TOML_DATE_LOCAL:
    case TOML_TIME_LOCAL: free((char *)n->u.dt.text); break;
    case TOML_INTEGER:
    case TOML_FLOAT:
    case TOML_BOOL: break;
    }
    free(n);
}

/* Every node is created here, which is what makes TOML_MAX_DEPTH a bound on the whole tree. */
static toml_node *new_node(parser *p, toml_kind kind, origin org, int depth, srcpos at) {
    if (depth > TOML_MAX_DEPTH) {
        fail_at(p, at, "nesting is deeper than %d levels", TOML_MAX_DEPTH);
        return NULL;
    }
    toml_node *n = calloc(1, sizeof *n);
    if (!n) {
        fail_oom(p);
        return NULL;
    }
    n->kind = kind;
    n->origin = org;
    n->depth = depth;
    n->line = at.line;
    n->col = at.col;
    n->file = p->file;
    return n;
}

/* Entries are stored in the table, so a pointer into them is only good until the next insert. The
 * parser changes nodes it reached through such entries, hence this one deliberate cast. */
static toml_node *entry_node(const toml_entry *e) { return (toml_node *)e->value; }

static uint64_t hash_key(const char *s, size_t n) {
    uint64_t h = 14695981039346656037u; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211u;
    }
    return h;
}

static void index_put(toml_node *t, size_t entry) {
    const toml_entry *e = &t->u.tbl.items[entry];
    size_t mask = t->u.tbl.nslots - 1;
    size_t i = (size_t)hash_key(e->key, e->key_len) & mask;
    while (t->u.tbl.slots[i] != 0)
        i = (i + 1) & mask;
    t->u.tbl.slots[i] = (uint32_t)(entry + 1);
}

/* Keeps the index at most half full so that probe sequences stay short. */
static bool index_grow(toml_node *t, size_t entries) {
    size_t n = t->u.tbl.nslots ? t->u.tbl.nslots : TABLE_INDEX_START;
    while (n < entries * 2)
        n *= 2;
    if (n == t->u.tbl.nslots) return true;
    uint32_t *slots = calloc(n, sizeof *slots);
    if (!slots) return false;
    free(t->u.tbl.slots);
    t->u.tbl.slots = slots;
    t->u.tbl.nslots = n;
    for (size_t i = 0; i < t->u.tbl.len; i++)
        index_put(t, i);
    return true;
}

static const toml_entry *table_find(const toml_node *t, const char *key, size_t len) {
    if (!t || t->kind != TOML_TABLE) return NULL;
    const toml_entry *items = t->u.tbl.items;
    if (t->u.tbl.slots) {
        size_t mask = t->u.tbl.nslots - 1;
        for (size_t i = (size_t)hash_key(key, len) & mask; t->u.tbl.slots[i] != 0; i = (i + 1) & mask) {
            const toml_entry *e = &items[t->u.tbl.slots[i] - 1];
            if (e->key_len == len && memcmp(e->key, key, len) == 0) return e;
        }
        return NULL;
    }
    for (size_t i = 0; i < t->u.tbl.len; i++)
        if (items[i].key_len == len && memcmp(items[i].key, key, len) == 0) return &items[i];
    return NULL;
}

/* Adds key = value to t; takes ownership of both, freeing them on failure. The caller has checked that
 * the key is new. */
static bool table_insert(parser *p, toml_node *t, char *key, size_t len, srcpos at, toml_node *value) {
    if (!key || (t->u.tbl.len == t->u.tbl.cap && t->u.tbl.cap >= UINT32_MAX / 2)) goto oom;
    if (t->u.tbl.len == t->u.tbl.cap) {
        size_t cap = t->u.tbl.cap ? t->u.tbl.cap * 2 : 4;
        toml_entry *items = realloc(t->u.tbl.items, cap * sizeof *items);
        if (!items) goto oom;
        t->u.tbl.items = items;
        t->u.tbl.cap = cap;
    }
    if (t->u.tbl.len + 1 > TABLE_INDEX_MIN && !index_grow(t, t->u.tbl.len + 1)) goto oom;
    t->u.tbl.items[t->u.tbl.len] = (toml_entry){key, len, at.line, at.col, value};
    value->key = key;
    if (t->u.tbl.slots) index_put(t, t->u.tbl.len);
    t->u.tbl.len++;
    return true;
oom:
    free(key);
    node_free(value);
    return fail_oom(p);
}

/* Appends v to arr, taking ownership of v (freed on failure). */
static bool array_push(parser *p, toml_node *arr, toml_node *v) {
    if (arr->u.arr.len == arr->u.arr.cap) {
        size_t cap = arr->u.arr.cap ? arr->u.arr.cap * 2 : 4;
        toml_node **items =
            cap < SIZE_MAX / sizeof *items ? realloc(arr->u.arr.items, cap * sizeof *items) : NULL;
        if (!items) {
            node_free(v);
            return fail_oom(p);
        }
        arr->u.arr.items = items;
        arr->u.arr.cap = cap;
    }
    arr->u.arr.items[arr->u.arr.len++] = v;
    return true;
}

/* ---- strings ------------------------------------------------------------------------------------- */

/* Copies bytes up to the next one in stops (or the end of input) into out. */
static bool copy_plain(parser *p, strbuf *out, const char *stops) {
    size_t start = p->pos, nstops = strlen(stops);
    while (p->pos < p->len && !memchr(stops, p->s[p->pos], nstops))
        advance(p);
    return sb_append(out, p->s + start, p->pos - start) || fail_oom(p);
}

static bool parse_unicode_escape(parser *p, strbuf *out, srcpos at) {
    char letter = (char)peek(p);
    int ndigits = letter == 'u' ? 4 : 8;
    uint32_t cp = 0;
    advance(p);
    for (int i = 0; i < ndigits; i++) {
        int d = digit_value(peek(p), 16);
        if (d < 0) return fail_at(p, at, "\\%c escape needs %d hexadecimal digits", letter, ndigits);
        cp = cp * 16 + (uint32_t)d;
        advance(p);
    }
    if (cp > MAX_CODE_POINT || (cp >= SURROGATE_FIRST && cp <= SURROGATE_LAST))
        return fail_at(p, at, "\\%c%0*X is not a Unicode scalar value", letter, ndigits, (unsigned)cp);
    char utf8[4];
    return sb_append(out, utf8, utf8_encode(cp, utf8)) || fail_oom(p);
}

/* An escape sequence in a basic string, at its backslash. */
static bool parse_escape(parser *p, strbuf *out) {
    srcpos at = p->at;
    char c;
    advance(p);
    switch (peek(p)) {
    case 'b': c = '\b'; break;
    case 't': c = '\t'; break;
    case 'n': c = '\n'; break;
    case 'f': c = '\f'; break;
    case 'r': c = '\r'; break;
    case '"': c = '"'; break;
    case '\\': c = '\\'; break;
    case 'u':
    case 'U': return parse_unicode_escape(p, out, at);
    default: {
        char what[CHAR_DESC_MAX];
        return fail_at(p, at, "invalid escape sequence: backslash followed by %s", describe_here(p, what));
    }
    }
    advance(p);
    return sb_append(out, &c, 1) || fail_oom(p);
}

static bool parse_basic_string(parser *p, strbuf *out) {
    srcpos start = p->at;
    advance(p);
    for (;;) {
        if (!copy_plain(p, out, "\"\\\r\n")) return false;
        int c = peek(p);
        if (c == '"') {
            advance(p);
            return true;
        }
        if (c != '\\')
            return fail_at(p, start, "unterminated string (use \"\"\" for strings spanning lines)");
        if (!parse_escape(p, out)) return false;
    }
}

static bool parse_literal_string(parser *p, strbuf *out) {
    srcpos start = p->at;
    advance(p);
    if (!copy_plain(p, out, "'\r\n")) return false;
    if (peek(p) != '\'')
        return fail_at(p, start, "unterminated literal string (use ''' for strings spanning lines)");
    advance(p);
    return true;
}

/* In a multi-line string, a run of quote characters either stays content (fewer than three) or closes
 * the string, in which case up to two quotes before the closing three belong to the content. Returns
 * whether the string was closed. */
static bool take_quote_run(parser *p, strbuf *out, char quote, bool *closed) {
    size_t n = 0;
    while (peek_at(p, n) == (unsigned char)quote)
        n++;
    size_t content = n < 3 ? n : n - 3;
    if (content > 2) return fail_at(p, p->at, "too many quotes at the end of a multi-line string");
    for (size_t i = 0; i < content; i++)
        if (!sb_append(out, &quote, 1)) return fail_oom(p);
    advance_n(p, n);
    *closed = n >= 3;
    return true;
}

/* A backslash that ends a line in a multi-line basic string swallows all whitespace after it. */
static bool at_line_ending_backslash(const parser *p) {
    size_t k = 1;
    while (peek_at(p, k) == ' ' || peek_at(p, k) == '\t')
        k++;
    return peek_at(p, k) == '\n' || peek_at(p, k) == '\r';
}

static bool parse_multiline_string(parser *p, strbuf *out, char quote) {
    srcpos start = p->at;
    const char *stops = quote == '"' ? "\"\\\r" : "'\r";
    advance_n(p, 3);
    eat_newline(p); /* a newline right after the opening quotes is not part of the string */
    for (;;) {
        bool closed = false;
        if (!copy_plain(p, out, stops)) return false;
        int c = peek(p);
        if (c == END_OF_INPUT) return fail_at(p, start, "unterminated multi-line string");
        if (c == '\r') { /* CRLF is stored as "\n", as on every other platform */
            eat_newline(p);
            if (!sb_append(out, "\n", 1)) return fail_oom(p);
        } else if (c == quote) {
            if (!take_quote_run(p, out, quote, &closed)) return false;
            if (closed) return true;
        } else if (at_line_ending_backslash(p)) {
            advance(p);
            while (peek(p) == ' ' || peek(p) == '\t' || at_newline(p))
                advance(p);
        } else if (!parse_escape(p, out)) {
            return false;
        }
    }
}

static bool at_triple_quote(const parser *p) {
    int c = peek(p);
    return (c == '"' || c == '\'') && peek_at(p, 1) == c && peek_at(p, 2) == c;
}

/* Any of the four string forms, at its opening quote. */
static bool parse_string(parser *p, strbuf *out) {
    int c = peek(p);
    if (at_triple_quote(p)) return parse_multiline_string(p, out, (char)c);
    return c == '"' ? parse_basic_string(p, out) : parse_literal_string(p, out);
}

/* ---- keys ---------------------------------------------------------------------------------------- */

static bool parse_simple_key(parser *p, keypath *kp) {
    srcpos at = p->at;
    strbuf sb = {0};
    int c = peek(p);
    if (c == '"' || c == '\'') {
        if (at_triple_quote(p)) return fail_at(p, at, "a multi-line string cannot be a key");
        if (!parse_string(p, &sb)) {
            free(sb.data);
            return false;
        }
    } else if (is_bare_key_char(c)) {
        size_t start = p->pos;
        while (is_bare_key_char(peek(p)))
            advance(p);
        if (!sb_append(&sb, p->s + start, p->pos - start)) return fail_oom(p);
    } else {
        char what[CHAR_DESC_MAX];
        return fail_at(p, at, "expected a key, found %s", describe_here(p, what));
    }
    size_t len = sb.len;
    char *name = sb_take(&sb);
    if (!name || !keypath_push(kp, name, len, at)) {
        free(name);
        return fail_oom(p);
    }
    return true;
}

/* A simple or dotted key; leaves the cursor after any whitespace that follows it. */
static bool parse_key(parser *p, keypath *kp) {
    if (!parse_simple_key(p, kp)) return false;
    for (;;) {
        skip_ws(p);
        if (peek(p) != '.') return true;
        advance(p);
        skip_ws(p);
        if (!parse_simple_key(p, kp)) return false;
    }
}

/* ---- numbers ------------------------------------------------------------------------------------- */

typedef enum numerr {
    NUM_OK,
    NUM_SYNTAX,
    NUM_LEADING_ZERO,
    NUM_SIGNED_PREFIX,
    NUM_RANGE,
    NUM_NOMEM,
} numerr;

/* Checks DIGIT *( ["_"] DIGIT ) in the given base and accumulates its value; *overflow is set when the
 * value does not fit in 64 bits. */
static bool scan_digits(const char *s, size_t n, int base, uint64_t *value, bool *overflow) {
    uint64_t v = 0;
    bool prev_digit = false;
    if (n == 0) return false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '_') {
            if (!prev_digit || i + 1 == n) return false;
            prev_digit = false;
            continue;
        }
        int d = digit_value((unsigned char)s[i], base);
        if (d < 0) return false;
        if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base)
            *overflow = true;
        else
            v = v * (uint64_t)base + (uint64_t)d;
        prev_digit = true;
    }
    *value = v;
    return true;
}

static int radix_prefix(const char *t, size_t n) {
    if (n < 2 || t[0] != '0') return 0;
    return t[1] == 'x' ? 16 : t[1] == 'o' ? 8 : t[1] == 'b' ? 2 : 0;
}

static numerr parse_integer(const char *t, size_t n, int64_t *out) {
    size_t i = 0;
    bool neg = false, overflow = false;
    uint64_t mag = 0;
    if (n > 0 && (t[0] == '+' || t[0] == '-')) {
        neg = t[0] == '-';
        i = 1;
    }
    int base = radix_prefix(t + i, n - i);
    if (base != 0) {
        if (i > 0) return NUM_SIGNED_PREFIX;
        i += 2;
    } else {
        base = 10;
        if (n - i >= 2 && t[i] == '0')
            return (is_digit((unsigned char)t[i + 1]) || t[i + 1] == '_') ? NUM_LEADING_ZERO : NUM_SYNTAX;
    }
    if (!scan_digits(t + i, n - i, base, &mag, &overflow)) return NUM_SYNTAX;
    if (overflow || mag > (uint64_t)INT64_MAX + (neg ? 1u : 0u)) return NUM_RANGE;
    /* -(INT64_MAX + 1) cannot be negated in int64_t, so subtract from -1 instead */
    *out = neg ? (mag == 0 ? 0 : -1 - (int64_t)(mag - 1)) : (int64_t)mag;
    return NUM_OK;
}

/* Length of the run of digits and underscores starting at t[i]. */
static size_t digit_run(const char *t, size_t n, size_t i) {
    size_t j = i;
    while (j < n && (is_digit((unsigned char)t[j]) || t[j] == '_'))
        j++;
    return j - i;
}

/* Checks float syntax: dec-int ( exp / frac [exp] ), with the sign already removed. */
static numerr check_float_syntax(const char *t, size_t n) {
    uint64_t ignored;
    bool overflow = false, fraction = false, exponent = false;
    size_t i = 0, run = digit_run(t, n, 0);
    if (!scan_digits(t, run, 10, &ignored, &overflow)) return NUM_SYNTAX;
    if (t[0] == '0' && run > 1) return NUM_LEADING_ZERO;
    i = run;
    if (i < n && t[i] == '.') {
        run = digit_run(t, n, ++i);
        if (!scan_digits(t + i, run, 10, &ignored, &overflow)) return NUM_SYNTAX;
        i += run;
        fraction = true;
    }
    if (i < n && (t[i] == 'e' || t[i] == 'E')) {
        i++;
        if (i < n && (t[i] == '+' || t[i] == '-')) i++;
        run = digit_run(t, n, i);
        if (!scan_digits(t + i, run, 10, &ignored, &overflow)) return NUM_SYNTAX;
        i += run;
        exponent = true;
    }
    return i == n && (fraction || exponent) ? NUM_OK : NUM_SYNTAX;
}

/* Converts checked float text with strtod. strtod honours LC_NUMERIC, so the '.' is swapped for the
 * current locale's decimal point rather than assuming the program runs in the "C" locale. */
static numerr convert_float(const char *t, size_t n, double *out) {
    const char *point = localeconv()->decimal_point;
    size_t point_len = point && *point ? strlen(point) : 1;
    char *buf = malloc(n + point_len + 1), *w = buf, *end = NULL;
    if (!buf) return NUM_NOMEM;
    for (size_t i = 0; i < n; i++) {
        if (t[i] == '_') continue;
        if (t[i] == '.' && point && *point) {
            memcpy(w, point, point_len);
            w += point_len;
        } else {
            *w++ = t[i];
        }
    }
    *w = '\0';
    double d = strtod(buf, &end);
    bool complete = end == w;
    free(buf);
    if (!complete) return NUM_SYNTAX;
    if (isinf(d)) return NUM_RANGE;
    *out = d;
    return NUM_OK;
}

static numerr parse_float(const char *t, size_t n, double *out) {
    size_t i = (n > 0 && (t[0] == '+' || t[0] == '-')) ? 1 : 0;
    bool neg = i == 1 && t[0] == '-';
    if (n - i == 3 && memcmp(t + i, "inf", 3) == 0) {
        *out = neg ? -INFINITY : INFINITY;
        return NUM_OK;
    }
    if (n - i == 3 && memcmp(t + i, "nan", 3) == 0) {
        *out = neg ? -NAN : NAN;
        return NUM_OK;
    }
    if (i == n) return NUM_SYNTAX;
    numerr e = check_float_syntax(t + i, n - i);
    return e != NUM_OK ? e : convert_float(t, n, out);
}

static bool is_float_text(const char *t, size_t n) {
    size_t i = (n > 0 && (t[0] == '+' || t[0] == '-')) ? 1 : 0;
    if (radix_prefix(t + i, n - i) != 0) return false;
    if (n - i == 3 && (memcmp(t + i, "inf", 3) == 0 || memcmp(t + i, "nan", 3) == 0)) return true;
    return memchr(t, '.', n) || memchr(t, 'e', n) || memchr(t, 'E', n);
}

static bool is_number_char(int c) { return is_bare_key_char(c) || c == '.' || c == '+'; }

static toml_node *parse_number(parser *p, int depth) {
    srcpos at = p->at;
    size_t start = p->pos;
    while (is_number_char(peek(p)))
        advance(p);
    const char *t = p->s + start;
    size_t n = p->pos - start;
    bool is_float = is_float_text(t, n);
    toml_node *node = new_node(p, is_float ? TOML_FLOAT : TOML_INTEGER, ORIGIN_VALUE, depth, at);
    if (!node) return NULL;
    numerr e = is_float ? parse_float(t, n, &node->u.f) : parse_integer(t, n, &node->u.i);
    if (e == NUM_OK) return node;
    node_free(node);
    char text[MSG_TEXT_MAX];
    describe_text(t, n, text, sizeof text);
    switch (e) {
    case NUM_LEADING_ZERO: fail_at(p, at, "leading zeros are not allowed in %s", text); break;
    case NUM_SIGNED_PREFIX:
        fail_at(p, at, "hexadecimal, octal and binary integers cannot have a sign: %s", text);
        break;
    case NUM_RANGE: fail_at(p, at, "%s %s is out of range", is_float ? "float" : "integer", text); break;
    case NUM_NOMEM: fail_oom(p); break;
    default: fail_at(p, at, "invalid %s %s", is_float ? "float" : "number", text); break;
    }
    return NULL;
}

/* ---- dates and times ----------------------------------------------------------------------------- */

static bool take_digits(parser *p, int count, int *out) {
    int v = 0;
    for (int i = 0; i < count; i++) {
        if (!is_digit(peek(p))) return false;
        v = v * 10 + (peek(p) - '0');
        advance(p);
    }
    *out = v;
    return true;
}

static bool take_char(parser *p, char c) {
    if (peek(p) != (unsigned char)c) return false;
    advance(p);
    return true;
}

static bool looks_like_date(const parser *p) {
    return is_digit(peek_at(p, 0)) && is_digit(peek_at(p, 1)) && is_digit(peek_at(p, 2)) &&
           is_digit(peek_at(p, 3)) && peek_at(p, 4) == '-';
}

static bool looks_like_time(const parser *p) {
    return is_digit(peek_at(p, 0)) && is_digit(peek_at(p, 1)) && peek_at(p, 2) == ':';
}

static int days_in_month(int year, int month) {
    static const int days[MAX_MONTH] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    return month == 2 && leap ? 29 : days[month - 1];
}

static bool parse_date_part(parser *p, toml_datetime *dt, srcpos at) {
    if (!take_digits(p, 4, &dt->year) || !take_char(p, '-') || !take_digits(p, 2, &dt->month) ||
        !take_char(p, '-') || !take_digits(p, 2, &dt->day))
        return fail_at(p, at, "malformed date (expected YYYY-MM-DD)");
    if (dt->month < 1 || dt->month > MAX_MONTH)
        return fail_at(p, at, "invalid date: month %02d does not exist", dt->month);
    if (dt->day < 1 || dt->day > days_in_month(dt->year, dt->month))
        return fail_at(p, at, "invalid date: %04d-%02d has no day %02d", dt->year, dt->month, dt->day);
    return true;
}

/* Fractional seconds: any number of digits, of which the first NANO_DIGITS are kept (truncated, as
 * toml-test and the spec ask). */
static bool parse_fraction(parser *p, toml_datetime *dt, srcpos at) {
    if (!is_digit(peek(p))) return fail_at(p, at, "malformed time: '.' must be followed by digits");
    int ns = 0, digits = 0;
    while (is_digit(peek(p))) {
        if (digits < NANO_DIGITS) {
            ns = ns * 10 + (peek(p) - '0');
            digits++;
        }
        advance(p);
    }
    dt->frac_digits = digits;
    for (int i = digits; i < NANO_DIGITS; i++)
        ns *= 10;
    dt->nanosecond = ns;
    return true;
}

static bool parse_time_part(parser *p, toml_datetime *dt, srcpos at) {
    if (!take_digits(p, 2, &dt->hour) || !take_char(p, ':') || !take_digits(p, 2, &dt->minute) ||
        !take_char(p, ':') || !take_digits(p, 2, &dt->second))
        return fail_at(p, at, "malformed time (expected HH:MM:SS)");
    if (take_char(p, '.') && !parse_fraction(p, dt, at)) return false;
    if (dt->hour > MAX_HOUR || dt->minute > MAX_MINUTE || dt->second > MAX_SECOND)
        return fail_at(p, at, "invalid time %02d:%02d:%02d", dt->hour, dt->minute, dt->second);
    return true;
}

static bool parse_offset(parser *p, toml_datetime *dt, srcpos at) {
    int sign = peek(p) == '-' ? -1 : 1, hours, minutes;
    advance(p);
    if (!take_digits(p, 2, &hours) || !take_char(p, ':') || !take_digits(p, 2, &minutes))
        return fail_at(p, at, "malformed UTC offset (expected Z or +HH:MM / -HH:MM)");
    if (hours > MAX_HOUR || minutes > MAX_MINUTE)
        return fail_at(p, at, "invalid UTC offset %02d:%02d", hours, minutes);
    dt->offset_minutes = sign * (hours * 60 + minutes);
    return true;
}

/* Offset date-time, local date-time, local date or local time, at its first digit. */
static toml_node *parse_datetime(parser *p, int depth) {
    srcpos at = p->at;
    size_t start = p->pos;
    toml_datetime dt = {0};
    toml_kind kind = TOML_TIME_LOCAL;
    if (looks_like_date(p)) {
        if (!parse_date_part(p, &dt, at)) return NULL;
        kind = TOML_DATE_LOCAL;
        /* the date/time separator may be a space, so only a digit after it makes this a date-time */
        if (peek(p) == 'T' || peek(p) == 't' || (peek(p) == ' ' && is_digit(peek_at(p, 1)))) {
            advance(p);
            if (!parse_time_part(p, &dt, at)) return NULL;
            kind = TOML_DATETIME_LOCAL;
            if (peek(p) == 'Z' || peek(p) == 'z') {
                advance(p);
                kind = TOML_DATETIME;
            } else if (peek(p) == '+' || peek(p) == '-') {
                if (!parse_offset(p, &dt, at)) return NULL;
                kind = TOML_DATETIME;
            }
        }
    } else if (!parse_time_part(p, &dt, at)) {
        return NULL;
    }
    dt.text = memdup_z(p->s + start, p->pos - start);
    if (!dt.text) {
        fail_oom(p);
        return NULL;
    }
    toml_node *n = new_node(p, kind, ORIGIN_VALUE, depth, at);
    if (!n) {
        free((char *)dt.text);
        return NULL;
    }
    n->u.dt = dt;
    return n;
}

/* ---- values -------------------------------------------------------------------------------------- */

static toml_node *parse_value(parser *p, int depth);
static bool parse_keyval(parser *p, toml_node *base);

static toml_node *parse_string_value(parser *p, int depth) {
    toml_node *n = new_node(p, TOML_STRING, ORIGIN_VALUE, depth, p->at);
    strbuf sb = {0};
    if (!n) return NULL;
    if (!parse_string(p, &sb)) {
        free(sb.data);
        node_free(n);
        return NULL;
    }
    n->u.str.len = sb.len;
    n->u.str.ptr = sb_take(&sb);
    if (!n->u.str.ptr) {
        node_free(n);
        fail_oom(p);
        return NULL;
    }
    return n;
}

/* A word starting with a letter: true, false, inf or nan, or a mistake such as an unquoted string. */
static toml_node *parse_word(parser *p, int depth) {
    srcpos at = p->at;
    size_t start = p->pos;
    while (is_bare_key_char(peek(p)))
        advance(p);
    const char *w = p->s + start;
    size_t n = p->pos - start;
    if ((n == 4 && memcmp(w, "true", 4) == 0) || (n == 5 && memcmp(w, "false", 5) == 0)) {
        toml_node *b = new_node(p, TOML_BOOL, ORIGIN_VALUE, depth, at);
        if (b) b->u.b = n == 4;
        return b;
    }
    if (n == 3 && (memcmp(w, "inf", 3) == 0 || memcmp(w, "nan", 3) == 0)) {
        toml_node *f = new_node(p, TOML_FLOAT, ORIGIN_VALUE, depth, at);
        if (f) f->u.f = w[0] == 'i' ? INFINITY : NAN;
        return f;
    }
    char text[MSG_TEXT_MAX];
    fail_at(p, at, "invalid value %s (strings must be quoted)", describe_text(w, n, text, sizeof text));
    return NULL;
}

static toml_node *parse_array(parser *p, int depth) {
    toml_node *arr = new_node(p, TOML_ARRAY, ORIGIN_VALUE, depth, p->at);
    if (!arr) return NULL;
    advance(p);
    for (;;) {
        skip_trivia(p);
        if (take_char(p, ']')) return arr;
        toml_node *v = parse_value(p, depth + 1);
        if (!v || !array_push(p, arr, v)) break;
        skip_trivia(p);
        if (take_char(p, ']')) return arr;
        if (!take_char(p, ',')) {
            char what[CHAR_DESC_MAX];
            fail_at(p, p->at, "expected ',' or ']' after array element, found %s", describe_here(p, what));
            break;
        }
    }
    node_free(arr);
    return NULL;
}

static toml_node *parse_inline_table(parser *p, int depth) {
    toml_node *t = new_node(p, TOML_TABLE, ORIGIN_INLINE, depth, p->at);
    char what[CHAR_DESC_MAX];
    if (!t) return NULL;
    advance(p);
    skip_ws(p);
    if (take_char(p, '}')) return t;
    for (;;) {
        if (!parse_keyval(p, t)) break;
        skip_ws(p);
        if (take_char(p, '}')) return t;
        if (take_char(p, ',')) {
            skip_ws(p);
            if (peek(p) == '}') {
                fail_at(p, p->at, "trailing comma is not allowed in an inline table");
                break;
            }
            continue;
        }
        if (at_newline(p))
            fail_at(p, p->at, "expected ',' or '}': an inline table must be on one line");
        else
            fail_at(p, p->at, "expected ',' or '}' in inline table, found %s", describe_here(p, what));
        break;
    }
    node_free(t);
    return NULL;
}

static toml_node *parse_value(parser *p, int depth) {
    int c = peek(p);
    if (c == '"' || c == '\'') return parse_string_value(p, depth);
    if (c == '[') return parse_array(p, depth);
    if (c == '{') return parse_inline_table(p, depth);
    if (is_alpha(c)) return parse_word(p, depth);
    if (is_digit(c) && (looks_like_date(p) || looks_like_time(p))) return parse_datetime(p, depth);
    if (is_digit(c) || c == '+' || c == '-') return parse_number(p, depth);
    char what[CHAR_DESC_MAX];
    fail_at(p, p->at, "expected a value, found %s", describe_here(p, what));
    return NULL;
}

/* ---- key/value pairs ----------------------------------------------------------------------------- */

/* Walks the dotted part of a key (all but its last part) from base, creating missing tables. Only
 * tables that dotted keys created, or implicit ones that they now claim, may be walked through. */
static toml_node *dotted_parent(parser *p, toml_node *base, const keypath *kp) {
    toml_node *t = base;
    for (size_t i = 0; i + 1 < kp->n; i++) {
        const keypart *k = &kp->parts[i];
        const toml_entry *e = table_find(t, k->name, k->len);
        if (!e) {
            toml_node *child = new_node(p, TOML_TABLE, ORIGIN_DOTTED, t->depth + 1, k->at);
            if (!child || !table_insert(p, t, memdup_z(k->name, k->len), k->len, k->at, child)) return NULL;
            t = child;
            continue;
        }
        toml_node *v = entry_node(e);
        if (v->kind == TOML_TABLE && (v->origin == ORIGIN_DOTTED || v->origin == ORIGIN_IMPLICIT)) {
            v->origin = ORIGIN_DOTTED;
            t = v;
            continue;
        }
        char path[MSG_TEXT_MAX];
        fail_at(p, k->at, "cannot add keys to %s with dotted keys: it is already %s (line %d)",
                describe_path(kp, i + 1, path, sizeof path), describe_node(v), v->line);
        return NULL;
    }
    return t;
}

/* key = value, added to base (the current table section, or an inline table being read). */
static bool parse_keyval(parser *p, toml_node *base) {
    keypath kp = {0};
    char path[MSG_TEXT_MAX], what[CHAR_DESC_MAX];
    bool ok = false;
    if (!parse_key(p, &kp)) goto out;
    if (!take_char(p, '=')) {
        fail_at(p, p->at, "expected '=' after key %s, found %s", describe_path(&kp, kp.n, path, sizeof path),
                describe_here(p, what));
        goto out;
    }
    skip_ws(p);
    toml_node *parent = dotted_parent(p, base, &kp);
    if (!parent) goto out;
    keypart *last = &kp.parts[kp.n - 1];
    if (table_find(parent, last->name, last->len)) {
        fail_at(p, last->at, "duplicate key %s", describe_path(&kp, kp.n, path, sizeof path));
        goto out;
    }
    toml_node *v = parse_value(p, parent->depth + 1);
    if (!v) goto out;
    char *name = last->name;
    last->name = NULL; /* table_insert owns it from here, even when it fails */
    ok = table_insert(p, parent, name, last->len, last->at, v);
out:
    keypath_free(&kp);
    return ok;
}

/* ---- table headers ------------------------------------------------------------------------------- */

/* Walks all but the last part of a header's key from the root, creating implicit tables. */
static toml_node *header_parent(parser *p, const keypath *kp) {
    toml_node *t = p->root;
    for (size_t i = 0; i + 1 < kp->n; i++) {
        const keypart *k = &kp->parts[i];
        const toml_entry *e = table_find(t, k->name, k->len);
        if (!e) {
            toml_node *child = new_node(p, TOML_TABLE, ORIGIN_IMPLICIT, t->depth + 1, k->at);
            if (!child || !table_insert(p, t, memdup_z(k->name, k->len), k->len, k->at, child)) return NULL;
            t = child;
            continue;
        }
        toml_node *v = entry_node(e);
        if (v->kind == TOML_TABLE && v->origin != ORIGIN_INLINE) {
            t = v;
        } else if (v->kind == TOML_ARRAY && v->origin == ORIGIN_AOT) {
            t = v->u.arr.items[v->u.arr.len - 1]; /* [[x]] always creates its first element */
        } else {
            char path[MSG_TEXT_MAX];
            fail_at(p, k->at, "cannot define a table inside %s: it is already %s (line %d)",
                    describe_path(kp, i + 1, path, sizeof path), describe_node(v), v->line);
            return NULL;
        }
    }
    return t;
}

/* [a.b]: defines a table, or gives a header to one that an earlier [a.b.c] created implicitly. */
static toml_node *define_table(parser *p, toml_node *parent, keypart *last, const keypath *kp, srcpos at) {
    const toml_entry *e = table_find(parent, last->name, last->len);
    if (!e) {
        toml_node *t = new_node(p, TOML_TABLE, ORIGIN_HEADER, parent->depth + 1, at);
        if (!t) return NULL;
        char *name = last->name;
        last->name = NULL; /* table_insert owns it from here, even when it fails */
        return table_insert(p, parent, name, last->len, last->at, t) ? t : NULL;
    }
    toml_node *v = entry_node(e);
    if (v->kind == TOML_TABLE && v->origin == ORIGIN_IMPLICIT) {
        v->origin = ORIGIN_HEADER;
        v->line = at.line;
        v->col = at.col;
        return v;
    }
    char path[MSG_TEXT_MAX];
    describe_path(kp, kp->n, path, sizeof path);
    if (v->kind == TOML_TABLE && v->origin == ORIGIN_HEADER)
        fail_at(p, at, "table %s is already defined at line %d", path, v->line);
    else
        fail_at(p, at, "cannot define table %s: it is already %s (line %d)", path, describe_node(v), v->line);
    return NULL;
}

/* [[a.b]]: appends a new table to the array of tables a.b, creating the array the first time. */
static toml_node *append_table(parser *p, toml_node *parent, keypart *last, const keypath *kp, srcpos at) {
    const toml_entry *e = table_find(parent, last->name, last->len);
    toml_node *arr;
    if (!e) {
        arr = new_node(p, TOML_ARRAY, ORIGIN_AOT, parent->depth + 1, at);
        if (!arr) return NULL;
        char *name = last->name;
        last->name = NULL; /* table_insert owns it from here, even when it fails */
        if (!table_insert(p, parent, name, last->len, last->at, arr)) return NULL;
    } else {
        arr = entry_node(e);
        if (arr->kind != TOML_ARRAY || arr->origin != ORIGIN_AOT) {
            char path[MSG_TEXT_MAX];
            fail_at(p, at, "cannot append to %s with [[...]]: it is already %s (line %d)",
                    describe_path(kp, kp->n, path, sizeof path), describe_node(arr), arr->line);
            return NULL;
        }
    }
    toml_node *t = new_node(p, TOML_TABLE, ORIGIN_HEADER, arr->depth + 1, at);
    if (!t || !array_push(p, arr, t)) return NULL;
    return t;
}

/* A [table] or [[array of tables]] header; on success *section is the table that following key/value
 * pairs go into. */
static bool parse_header(parser *p, toml_node **section) {
    srcpos at = p->at;
    keypath kp = {0};
    char what[CHAR_DESC_MAX];
    toml_node *t = NULL;
    advance(p);
    bool aot = take_char(p, '[');
    skip_ws(p);
    if (!parse_key(p, &kp)) goto out;
    if (!take_char(p, ']')) {
        fail_at(p, p->at, "expected ']' at the end of the table header, found %s", describe_here(p, what));
        goto out;
    }
    if (aot && !take_char(p, ']')) {
        fail_at(p, p->at, "expected ']]' at the end of the array-of-tables header, found %s",
                describe_here(p, what));
        goto out;
    }
    toml_node *parent = header_parent(p, &kp);
    if (!parent) goto out;
    keypart *last = &kp.parts[kp.n - 1];
    t = aot ? append_table(p, parent, last, &kp, at) : define_table(p, parent, last, &kp, at);
    if (t) *section = t;
out:
    keypath_free(&kp);
    return t != NULL;
}

/* ---- documents ----------------------------------------------------------------------------------- */

/* After a key/value pair or a header only a comment may follow on the same line. */
static bool expect_line_end(parser *p, const char *after) {
    char what[CHAR_DESC_MAX];
    skip_ws(p);
    skip_comment(p);
    if (peek(p) == END_OF_INPUT || eat_newline(p)) return true;
    return fail_at(p, p->at, "expected end of line after %s, found %s", after, describe_here(p, what));
}

static bool parse_document(parser *p) {
    toml_node *section = p->root;
    for (;;) {
        skip_ws(p);
        skip_comment(p);
        int c = peek(p);
        if (c == END_OF_INPUT) return true;
        if (eat_newline(p)) continue;
        bool header = c == '[';
        if (header ? !parse_header(p, &section) : !parse_keyval(p, section)) return false;
        if (!expect_line_end(p, header ? "table header" : "value")) return false;
    }
}

static toml_doc *parse_fail(toml_doc *doc, char *errbuf, size_t errlen, bool have_message) {
    if (!have_message && errbuf && errlen > 0) snprintf(errbuf, errlen, "out of memory");
    toml_free(doc);
    return NULL;
}

toml_doc *toml_parse(const char *text, size_t len, const char *filename, char *errbuf, size_t errlen) {
    const char *file = filename ? filename : "<input>";
    parser p = {.s = text, .len = len, .at = {1, 1}, .file = file, .err = errbuf, .errlen = errlen};
    if (errbuf && errlen > 0) errbuf[0] = '\0';
    if (!text && len > 0) {
        fail_at(&p, p.at, "no input text");
        return NULL;
    }
    if (len > TOML_MAX_INPUT_LEN) {
        fail_at(&p, p.at, "input is larger than %zu bytes", TOML_MAX_INPUT_LEN);
        return NULL;
    }
    if (!text) p.s = "";
    toml_doc *doc = calloc(1, sizeof *doc);
    if (!doc || !(doc->file = memdup_z(file, strlen(file)))) return parse_fail(doc, errbuf, errlen, false);
    p.file = doc->file;
    if (!check_encoding(&p)) return parse_fail(doc, errbuf, errlen, true);
    /* a byte order mark is allowed at the very start and is not part of the document */
    if (len >= UTF8_BOM_LEN && memcmp(p.s, UTF8_BOM, UTF8_BOM_LEN) == 0) p.pos = UTF8_BOM_LEN;
    doc->root = p.root = new_node(&p, TOML_TABLE, ORIGIN_ROOT, 0, p.at);
    if (!doc->root || !parse_document(&p)) return parse_fail(doc, errbuf, errlen, true);
    return doc;
}

void toml_free(toml_doc *doc) {
    if (!doc) return;
    node_free(doc->root);
    free(doc->file);
    free(doc);
}

/* ---- reading the tree ---------------------------------------------------------------------------- */

const toml_node *toml_root(const toml_doc *doc) { return doc ? doc->root : NULL; }

toml_kind toml_node_kind(const toml_node *n) { return n->kind; }

const char *toml_kind_name(toml_kind kind) {
    switch (kind) {
    case TOML_TABLE: return "table";
    case TOML_ARRAY: return "array";
    case TOML_STRING: return "string";
    case TOML_INTEGER: return "integer";
    case TOML_FLOAT: return "float";
    case TOML_BOOL: return "bool";
    case TOML_DATETIME: return "datetime";
    case TOML_DATETIME_LOCAL: return "datetime-local";
    case TOML_DATE_LOCAL: return "date-local";
    case TOML_TIME_LOCAL: return "time-local";
    }
    return "unknown";
}

const char *toml_node_file(const toml_node *n) { return n ? n->file : NULL; }

int toml_node_line(const toml_node *n) { return n ? n->line : 0; }

int toml_node_col(const toml_node *n) { return n ? n->col : 0; }

const char *toml_node_key(const toml_node *n) { return n ? n->key : NULL; }

size_t toml_table_len(const toml_node *tbl) { return tbl && tbl->kind == TOML_TABLE ? tbl->u.tbl.len : 0; }

const toml_entry *toml_table_at(const toml_node *tbl, size_t i) {
    return i < toml_table_len(tbl) ? &tbl->u.tbl.items[i] : NULL;
}

const toml_entry *toml_table_entry(const toml_node *tbl, const char *key, size_t key_len) {
    return key ? table_find(tbl, key, key_len) : NULL;
}

const toml_node *toml_table_getn(const toml_node *tbl, const char *key, size_t key_len) {
    const toml_entry *e = toml_table_entry(tbl, key, key_len);
    return e ? e->value : NULL;
}

const toml_node *toml_table_get(const toml_node *tbl, const char *key) {
    return key ? toml_table_getn(tbl, key, strlen(key)) : NULL;
}

size_t toml_array_len(const toml_node *arr) { return arr && arr->kind == TOML_ARRAY ? arr->u.arr.len : 0; }

const toml_node *toml_array_at(const toml_node *arr, size_t i) {
    return i < toml_array_len(arr) ? arr->u.arr.items[i] : NULL;
}

/* "FILE:LINE:COL: expected integer for 'port', found string". Always returns false. */
static bool type_error(const toml_node *n, const char *expected, char *errbuf, size_t errlen) {
    if (!errbuf || errlen == 0) return false;
    if (!n) {
        snprintf(errbuf, errlen, "expected %s, found no value", expected);
        return false;
    }
    const char *found = toml_kind_name(n->kind);
    if (n->key) {
        char key[MSG_TEXT_MAX];
        describe_text(n->key, strlen(n->key), key, sizeof key);
        snprintf(errbuf, errlen, "%s:%d:%d: expected %s for %s, found %s", n->file, n->line, n->col, expected,
                 key, found);
    } else {
        snprintf(errbuf, errlen, "%s:%d:%d: expected %s, found %s", n->file, n->line, n->col, expected,
                 found);
    }
    return false;
}

bool toml_expect(const toml_node *n, toml_kind kind, char *errbuf, size_t errlen) {
    return (n && n->kind == kind) || type_error(n, toml_kind_name(kind), errbuf, errlen);
}

bool toml_get_string(const toml_node *n, const char **out, size_t *out_len, char *errbuf, size_t errlen) {
    if (!toml_expect(n, TOML_STRING, errbuf, errlen)) return false;
    *out = n->u.str.ptr;
    if (out_len) *out_len = n->u.str.len;
    return true;
}

bool toml_get_int(const toml_node *n, int64_t *out, char *errbuf, size_t errlen) {
    if (!toml_expect(n, TOML_INTEGER, errbuf, errlen)) return false;
    *out = n->u.i;
    return true;
}

bool toml_get_float(const toml_node *n, double *out, char *errbuf, size_t errlen) {
    if (n && n->kind == TOML_INTEGER) {
        *out = (double)n->u.i;
        return true;
    }
    if (!toml_expect(n, TOML_FLOAT, errbuf, errlen)) return false;
    *out = n->u.f;
    return true;
}

bool toml_get_bool(const toml_node *n, bool *out, char *errbuf, size_t errlen) {
    if (!toml_expect(n, TOML_BOOL, errbuf, errlen)) return false;
    *out = n->u.b;
    return true;
}

bool toml_get_datetime(const toml_node *n, const toml_datetime **out, char *errbuf, size_t errlen) {
    if (!n || (n->kind != TOML_DATETIME && n->kind != TOML_DATETIME_LOCAL && n->kind != TOML_DATE_LOCAL &&
               n->kind != TOML_TIME_LOCAL))
        return type_error(n, "date/time", errbuf, errlen);
    *out = &n->u.dt;
    return true;
}
