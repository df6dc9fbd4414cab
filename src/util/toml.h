/*
 * toml.h - a strict TOML 1.0 parser.
 *
 * Design
 * ------
 * toml_parse() reads a whole document into an immutable tree owned by a toml_doc; toml_free() releases
 * everything at once. The tree is made of opaque toml_node values; each has a kind (toml_kind), the
 * file/line/column where it was written, and, when it is the value of a table entry, the key that names
 * it. That source position is what lets a consumer such as the gateway configuration report
 * "config.toml:12: unknown key 'x'" or "config.toml:3:8: expected integer for 'port', found string"
 * without keeping its own bookkeeping.
 *
 * Tables keep their entries in document order (toml_table_at iterates them) and are indexed by hash once
 * they grow, so toml_table_get is cheap on large tables. Arrays of tables ([[x]]) are plain arrays whose
 * elements are tables. Datetimes keep the source text as written alongside the parsed fields.
 *
 * The parser is strict: anything TOML 1.0 forbids is rejected with a single message of the form
 * "FILE:LINE:COL: problem" (LINE and COL are 1-based; COL counts Unicode code points). That includes
 * duplicate keys, redefined or extended tables, invalid escapes, control characters, malformed UTF-8,
 * leading zeros, integers outside int64, impossible dates and times, and the 1.1-only syntax (newlines
 * in inline tables, \e and \x escapes, datetimes without seconds). Input is never trusted: the parser
 * reads only within [text, text + len), needs no terminating NUL, and bounds both its recursion and the
 * tree's nesting by TOML_MAX_DEPTH.
 *
 * Strings are stored unescaped, as UTF-8, with a terminating NUL; because TOML allows "\u0000", use the
 * length-reporting accessors when embedded NULs matter. Newlines inside multi-line strings are stored as
 * "\n" whatever the file's line endings were.
 *
 * A toml_doc is not modified after toml_parse returns, so it may be read from several threads at once.
 *
 * Typical use:
 *
 *     char err[TOML_ERRBUF_SIZE];
 *     toml_doc *doc = toml_parse(text, len, "config.toml", err, sizeof err);
 *     if (!doc)
 *         return report(err);                      // "config.toml:4:1: duplicate key 'port'"
 *     const toml_node *gw = toml_table_get(toml_root(doc), "gateway");
 *     int64_t port = 8080;                          // the default when the key is absent
 *     const toml_node *n = toml_table_get(gw, "port");
 *     if (n && !toml_get_int(n, &port, err, sizeof err))
 *         return report(err);                      // "config.toml:5:8: expected integer for 'port', ..."
 *     for (size_t i = 0; i < toml_table_len(gw); i++) {
 *         const toml_entry *e = toml_table_at(gw, i);
 *         if (!is_known_key(e->key))              // "config.toml:6: unknown key 'prot'"
 *             return report_unknown(toml_node_file(gw), e->line, e->key);
 *     }
 *     toml_free(doc);
 */
#ifndef SIPP_UTIL_TOML_H
#define SIPP_UTIL_TOML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Deepest nesting of tables, arrays and inline tables below the root (the root is depth 0). It bounds
 * the parser's recursion and the cost of walking the tree; real configuration files need a handful. */
#define TOML_MAX_DEPTH 128

/* Largest accepted input, in bytes. Keeps line and column numbers well inside int. */
#define TOML_MAX_INPUT_LEN ((size_t)1 << 30)

/* A buffer of this size always holds a complete error message (longer ones are truncated). */
#define TOML_ERRBUF_SIZE 256

typedef enum toml_kind {
    TOML_TABLE,
    TOML_ARRAY,
    TOML_STRING,
    TOML_INTEGER,
    TOML_FLOAT,
    TOML_BOOL,
    TOML_DATETIME,       /* offset date-time: 1979-05-27T07:32:00Z */
    TOML_DATETIME_LOCAL, /* local date-time: 1979-05-27T07:32:00 */
    TOML_DATE_LOCAL,     /* local date: 1979-05-27 */
    TOML_TIME_LOCAL,     /* local time: 07:32:00 */
} toml_kind;

typedef struct toml_doc toml_doc;
typedef struct toml_node toml_node;

/* A parsed date and/or time. Which fields are meaningful depends on the node's kind: the date fields for
 * every kind but TOML_TIME_LOCAL, the time fields for every kind but TOML_DATE_LOCAL, and offset_minutes
 * only for TOML_DATETIME. Unused fields are 0. */
typedef struct toml_datetime {
    int year, month, day;     /* month 1-12, day 1-31 (checked against the month and leap years) */
    int hour, minute, second; /* second may be 60 (a leap second) */
    int nanosecond;           /* fractional seconds, truncated to nanoseconds */
    int frac_digits;          /* digits written after the '.', at most 9 (0: no fraction) */
    int offset_minutes;       /* offset from UTC: +05:30 is 330, Z is 0 */
    const char *text;         /* the value exactly as written in the source, NUL-terminated */
} toml_datetime;

/* One key/value pair of a table. Read-only; valid until toml_free. */
typedef struct toml_entry {
    const char *key; /* unescaped and NUL-terminated, but may contain NULs: see key_len */
    size_t key_len;
    int line, col; /* where the key was first written */
    const toml_node *value;
} toml_entry;

/* Parses len bytes of TOML (text need not be NUL-terminated). filename is used only in messages (NULL
 * reads as "<input>"). Returns NULL on failure and, if errbuf is not NULL, writes a NUL-terminated
 * "FILE:LINE:COL: problem" message into it (at most errlen bytes). */
toml_doc *toml_parse(const char *text, size_t len, const char *filename, char *errbuf, size_t errlen);

/* Releases the document and every node, string and entry in it. NULL is allowed. */
void toml_free(toml_doc *doc);

/* The document's top-level table. */
const toml_node *toml_root(const toml_doc *doc);

/* Node introspection. toml_node_kind needs a node; the others accept NULL and return NULL or 0.
 * A node's position is where its value starts; for a table defined by a [header] it is the header's
 * '[', and for a table created by a dotted key or as the parent in a header, that part of the key. */
toml_kind toml_node_kind(const toml_node *n);
const char *toml_kind_name(toml_kind kind); /* toml-test's names: "table", "datetime-local", ... */
const char *toml_node_file(const toml_node *n);
int toml_node_line(const toml_node *n);
int toml_node_col(const toml_node *n);
/* The key this node is the value of, or NULL for the root and for array elements. */
const char *toml_node_key(const toml_node *n);

/* Tables. These accept any node and behave as if a non-table were an empty table. */
size_t toml_table_len(const toml_node *tbl);
const toml_entry *toml_table_at(const toml_node *tbl, size_t i); /* document order; NULL past the end */
const toml_node *toml_table_get(const toml_node *tbl, const char *key);
const toml_node *toml_table_getn(const toml_node *tbl, const char *key, size_t key_len);
const toml_entry *toml_table_entry(const toml_node *tbl, const char *key, size_t key_len);

/* Arrays (including arrays of tables). Non-arrays behave as empty arrays. */
size_t toml_array_len(const toml_node *arr);
const toml_node *toml_array_at(const toml_node *arr, size_t i); /* NULL past the end */

/* Typed accessors. Each returns true and stores the value when n has the expected kind. Otherwise it
 * returns false, leaves *out alone and, if errbuf is not NULL, writes a message such as
 * "config.toml:3:8: expected integer for 'port', found string" (or "expected integer, found no value"
 * when n is NULL, so a missing key can be passed straight from toml_table_get).
 *
 * toml_get_float also accepts integers, converted to the nearest double, since a person writing
 * "temperature = 1" means 1.0. toml_get_datetime accepts all four date/time kinds; check the node kind
 * to tell them apart. out_len may be NULL when the caller does not need the string's length. */
bool toml_get_string(const toml_node *n, const char **out, size_t *out_len, char *errbuf, size_t errlen);
bool toml_get_int(const toml_node *n, int64_t *out, char *errbuf, size_t errlen);
bool toml_get_float(const toml_node *n, double *out, char *errbuf, size_t errlen);
bool toml_get_bool(const toml_node *n, bool *out, char *errbuf, size_t errlen);
bool toml_get_datetime(const toml_node *n, const toml_datetime **out, char *errbuf, size_t errlen);
/* Checks the kind of a node, typically a table or an array, with the same messages as above. */
bool toml_expect(const toml_node *n, toml_kind kind, char *errbuf, size_t errlen);

#endif
