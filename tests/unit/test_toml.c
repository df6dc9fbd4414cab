/*
 * Unit tests for src/util/toml.c: the public API (lookups, iteration, typed accessors, source
 * positions), the exact error messages, and the limits. Conformance with the TOML 1.0 grammar as a
 * whole is covered by tests/toml-test.sh; the cases here are the ones that corpus cannot see.
 */
#include "util/toml.h"

#include <criterion/criterion.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BIG_TABLE_KEYS = 5000 };

static toml_doc *parse_ok(const char *text) {
    char err[TOML_ERRBUF_SIZE];
    toml_doc *doc = toml_parse(text, strlen(text), "test.toml", err, sizeof err);
    cr_assert_not_null(doc, "unexpected parse error: %s", err);
    return doc;
}

/* Parses text as config.toml and checks the whole error message. */
static void expect_error(const char *text, const char *message) {
    char err[TOML_ERRBUF_SIZE];
    toml_doc *doc = toml_parse(text, strlen(text), "config.toml", err, sizeof err);
    cr_assert_null(doc, "accepted invalid TOML:\n%s", text);
    cr_assert_str_eq(err, message);
}

/* prefix, then open repeated depth times, inner, and close repeated depth times: "a = [[[1]]]". */
static char *nested(const char *prefix, const char *open, const char *inner, const char *close, int depth) {
    size_t lp = strlen(prefix), lo = strlen(open), li = strlen(inner), lc = strlen(close);
    char *s = malloc(lp + (size_t)depth * (lo + lc) + li + 1), *w = s;
    cr_assert_not_null(s);
    memcpy(w, prefix, lp);
    w += lp;
    for (int i = 0; i < depth; i++, w += lo)
        memcpy(w, open, lo);
    memcpy(w, inner, li);
    w += li;
    for (int i = 0; i < depth; i++, w += lc)
        memcpy(w, close, lc);
    *w = '\0';
    return s;
}

/* ---- values and lookups -------------------------------------------------------------------------- */

Test(toml, scalar_values) {
    toml_doc *doc = parse_ok("name = \"sipp\"\n"
                             "port = 8080\n"
                             "ratio = 0.5\n"
                             "debug = true\n"
                             "hex = 0xDEAD_beef\n"
                             "oct = 0o755\n"
                             "bin = 0b1010\n"
                             "big = 9_223_372_036_854_775_807\n"
                             "small = -9223372036854775808\n"
                             "exp = -1.5e-3\n"
                             "pinf = +inf\n"
                             "nnan = -nan\n"
                             "negzero = -0.0\n");
    const toml_node *root = toml_root(doc);
    const char *s;
    size_t len;
    int64_t i;
    double f;
    bool b;

    cr_assert(toml_get_string(toml_table_get(root, "name"), &s, &len, NULL, 0));
    cr_assert_str_eq(s, "sipp");
    cr_assert_eq(len, 4);
    cr_assert(toml_get_int(toml_table_get(root, "port"), &i, NULL, 0));
    cr_assert_eq(i, 8080);
    cr_assert(toml_get_float(toml_table_get(root, "ratio"), &f, NULL, 0));
    cr_assert_eq(f, 0.5);
    cr_assert(toml_get_bool(toml_table_get(root, "debug"), &b, NULL, 0));
    cr_assert(b);
    cr_assert(toml_get_int(toml_table_get(root, "hex"), &i, NULL, 0));
    cr_assert_eq(i, 0xDEADBEEF);
    cr_assert(toml_get_int(toml_table_get(root, "oct"), &i, NULL, 0));
    cr_assert_eq(i, 0755);
    cr_assert(toml_get_int(toml_table_get(root, "bin"), &i, NULL, 0));
    cr_assert_eq(i, 10);
    cr_assert(toml_get_int(toml_table_get(root, "big"), &i, NULL, 0));
    cr_assert_eq(i, INT64_MAX);
    cr_assert(toml_get_int(toml_table_get(root, "small"), &i, NULL, 0));
    cr_assert_eq(i, INT64_MIN);
    cr_assert(toml_get_float(toml_table_get(root, "exp"), &f, NULL, 0));
    cr_assert_eq(f, -1.5e-3);
    cr_assert(toml_get_float(toml_table_get(root, "pinf"), &f, NULL, 0));
    cr_assert(isinf(f) && f > 0);
    cr_assert(toml_get_float(toml_table_get(root, "nnan"), &f, NULL, 0));
    cr_assert(isnan(f));
    cr_assert(toml_get_float(toml_table_get(root, "negzero"), &f, NULL, 0));
    cr_assert(f == 0.0 && signbit(f));
    toml_free(doc);
}

Test(toml, kinds_and_names) {
    toml_doc *doc = parse_ok("s = 'x'\ni = 1\nf = 1.0\nb = false\na = []\nt = {}\n"
                             "odt = 1979-05-27T07:32:00Z\nldt = 1979-05-27T07:32:00\n"
                             "ld = 1979-05-27\nlt = 07:32:00\n");
    const toml_node *root = toml_root(doc);
    static const struct {
        const char *key;
        toml_kind kind;
        const char *name;
    } want[] = {
        {"s", TOML_STRING, "string"},
        {"i", TOML_INTEGER, "integer"},
        {"f", TOML_FLOAT, "float"},
        {"b", TOML_BOOL, "bool"},
        {"a", TOML_ARRAY, "array"},
        {"t", TOML_TABLE, "table"},
        {"odt", TOML_DATETIME, "datetime"},
        {"ldt", TOML_DATETIME_LOCAL, "datetime-local"},
        {"ld", TOML_DATE_LOCAL, "date-local"},
        {"lt", TOML_TIME_LOCAL, "time-local"},
    };
    cr_assert_eq(toml_node_kind(root), TOML_TABLE);
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        const toml_node *n = toml_table_get(root, want[k].key);
        cr_assert_not_null(n, "missing %s", want[k].key);
        cr_assert_eq(toml_node_kind(n), want[k].kind, "kind of %s", want[k].key);
        cr_assert_str_eq(toml_kind_name(want[k].kind), want[k].name);
    }
    toml_free(doc);
}

Test(toml, nested_tables_and_arrays) {
    toml_doc *doc = parse_ok("[server]\n"
                             "host = \"0.0.0.0\"\n"
                             "limits.max_tokens = 4096\n"
                             "[[model]]\n"
                             "name = \"a\"\n"
                             "[[model]]\n"
                             "name = \"b\"\n"
                             "[model.sampling]\n"
                             "temperature = 0.7\n"
                             "[misc]\n"
                             "list = [1, [2, 3], {x = 'y'}]\n");
    const toml_node *root = toml_root(doc);
    const toml_node *server = toml_table_get(root, "server");
    int64_t i;
    const char *s;
    double f;

    cr_assert(toml_get_int(toml_table_get(toml_table_get(server, "limits"), "max_tokens"), &i, NULL, 0));
    cr_assert_eq(i, 4096);
    const toml_node *models = toml_table_get(root, "model");
    cr_assert_eq(toml_node_kind(models), TOML_ARRAY);
    cr_assert_eq(toml_array_len(models), 2);
    cr_assert(toml_get_string(toml_table_get(toml_array_at(models, 1), "name"), &s, NULL, NULL, 0));
    cr_assert_str_eq(s, "b");
    /* [model.sampling] belongs to the most recent [[model]] */
    cr_assert_null(toml_table_get(toml_array_at(models, 0), "sampling"));
    const toml_node *sampling = toml_table_get(toml_array_at(models, 1), "sampling");
    cr_assert(toml_get_float(toml_table_get(sampling, "temperature"), &f, NULL, 0));
    cr_assert_eq(f, 0.7);

    const toml_node *list = toml_table_get(toml_table_get(root, "misc"), "list");
    cr_assert_eq(toml_array_len(list), 3);
    cr_assert_eq(toml_array_len(toml_array_at(list, 1)), 2);
    cr_assert(toml_get_string(toml_table_get(toml_array_at(list, 2), "x"), &s, NULL, NULL, 0));
    cr_assert_str_eq(s, "y");
    cr_assert_null(toml_array_at(list, 3));
    toml_free(doc);
}

Test(toml, lookups_on_wrong_kinds_and_missing_keys) {
    toml_doc *doc = parse_ok("a = 1\nt = {}\nl = [1]\n");
    const toml_node *root = toml_root(doc);
    const toml_node *a = toml_table_get(root, "a");
    cr_assert_null(toml_table_get(root, "missing"));
    cr_assert_null(toml_table_get(a, "x"));
    cr_assert_null(toml_table_get(NULL, "x"));
    cr_assert_null(toml_table_get(root, NULL));
    cr_assert_eq(toml_table_len(a), 0);
    cr_assert_null(toml_table_at(a, 0));
    cr_assert_eq(toml_array_len(a), 0);
    cr_assert_null(toml_array_at(a, 0));
    cr_assert_eq(toml_array_len(NULL), 0);
    cr_assert_eq(toml_table_len(toml_table_get(root, "t")), 0);
    cr_assert_null(toml_array_at(toml_table_get(root, "l"), 1));
    toml_free(doc);
}

Test(toml, iteration_follows_document_order) {
    toml_doc *doc = parse_ok("zeta = 1\nalpha = 2\nmid.x = 3\n\"quoted key\" = 4\n[later]\n[alpha2]\n");
    const toml_node *root = toml_root(doc);
    static const char *const order[] = {"zeta", "alpha", "mid", "quoted key", "later", "alpha2"};
    cr_assert_eq(toml_table_len(root), 6);
    for (size_t i = 0; i < 6; i++) {
        const toml_entry *e = toml_table_at(root, i);
        cr_assert_str_eq(e->key, order[i]);
        cr_assert_eq(e->key_len, strlen(order[i]));
        cr_assert_eq(e->value, toml_table_get(root, order[i]));
    }
    cr_assert_null(toml_table_at(root, 6));
    toml_free(doc);
}

Test(toml, large_table_lookup) {
    size_t cap = (size_t)BIG_TABLE_KEYS * 32;
    char *text = malloc(cap), key[32];
    size_t n = 0;
    for (int i = 0; i < BIG_TABLE_KEYS; i++)
        n += (size_t)snprintf(text + n, cap - n, "key%d = %d\n", i, i);
    toml_doc *doc = parse_ok(text);
    const toml_node *root = toml_root(doc);
    cr_assert_eq(toml_table_len(root), BIG_TABLE_KEYS);
    for (int i = 0; i < BIG_TABLE_KEYS; i++) {
        int64_t v;
        snprintf(key, sizeof key, "key%d", i);
        cr_assert(toml_get_int(toml_table_get(root, key), &v, NULL, 0), "%s", key);
        cr_assert_eq(v, i);
    }
    cr_assert_null(toml_table_get(root, "key-1"));
    toml_free(doc);

    /* a duplicate far down a big table is still caught through the hash index */
    strcpy(text + n, "key4321 = 0\n");
    expect_error(text, "config.toml:5001:1: duplicate key 'key4321'");
    free(text);
}

Test(toml, strings_unescape_and_embedded_nul) {
    toml_doc *doc = parse_ok("basic = \"tab\\there \\u00e9 \\U0001F600 \\\"q\\\" \\\\\"\n"
                             "literal = 'C:\\path\\no escapes'\n"
                             "nul = \"a\\u0000b\"\n"
                             "\"k\\u0000ey\" = 1\n"
                             "ml = \"\"\"\nline1\nline2 \\\n     joined\"\"\"\n"
                             "mll = '''\n'quoted' ''here'''''\n");
    const toml_node *root = toml_root(doc);
    const char *s;
    size_t len;
    cr_assert(toml_get_string(toml_table_get(root, "basic"), &s, NULL, NULL, 0));
    cr_assert_str_eq(s, "tab\there \xC3\xA9 \xF0\x9F\x98\x80 \"q\" \\");
    cr_assert(toml_get_string(toml_table_get(root, "literal"), &s, NULL, NULL, 0));
    cr_assert_str_eq(s, "C:\\path\\no escapes");
    cr_assert(toml_get_string(toml_table_get(root, "nul"), &s, &len, NULL, 0));
    cr_assert_eq(len, 3);
    cr_assert(memcmp(s, "a\0b", 4) == 0);
    cr_assert_null(toml_table_get(root, "k"), "a key with NUL must not match its prefix");
    const toml_node *k = toml_table_getn(root, "k\0ey", 4);
    cr_assert_not_null(k);
    cr_assert_eq(toml_table_entry(root, "k\0ey", 4)->key_len, 4);
    cr_assert(toml_get_string(toml_table_get(root, "ml"), &s, NULL, NULL, 0));
    cr_assert_str_eq(s, "line1\nline2 joined");
    cr_assert(toml_get_string(toml_table_get(root, "mll"), &s, NULL, NULL, 0));
    cr_assert_str_eq(s, "'quoted' ''here''");
    toml_free(doc);
}

Test(toml, crlf_is_a_newline_and_normalised_in_strings) {
    toml_doc *doc = parse_ok("a = 1\r\nml = \"\"\"\r\nx\r\ny\"\"\"\r\n# comment\r\nb = 2\r\n");
    const toml_node *root = toml_root(doc);
    const char *s;
    cr_assert(toml_get_string(toml_table_get(root, "ml"), &s, NULL, NULL, 0));
    cr_assert_str_eq(s, "x\ny");
    cr_assert_eq(toml_node_line(toml_table_get(root, "b")), 6);
    toml_free(doc);
}

Test(toml, datetimes_keep_text_and_fields) {
    toml_doc *doc = parse_ok("odt = 1979-05-27 07:32:00.999999999999-07:30\n"
                             "utc = 1979-05-27t07:32:00z\n"
                             "ldt = 2000-02-29T23:59:60.5\n"
                             "ld = 2024-12-31\n"
                             "lt = 00:00:00.001\n");
    const toml_node *root = toml_root(doc);
    const toml_datetime *dt;

    cr_assert(toml_get_datetime(toml_table_get(root, "odt"), &dt, NULL, 0));
    cr_assert_str_eq(dt->text, "1979-05-27 07:32:00.999999999999-07:30");
    cr_assert_eq(dt->year, 1979);
    cr_assert_eq(dt->month, 5);
    cr_assert_eq(dt->day, 27);
    cr_assert_eq(dt->hour, 7);
    cr_assert_eq(dt->minute, 32);
    cr_assert_eq(dt->second, 0);
    cr_assert_eq(dt->nanosecond, 999999999, "fractions are truncated, not rounded");
    cr_assert_eq(dt->frac_digits, 9);
    cr_assert_eq(dt->offset_minutes, -(7 * 60 + 30));

    cr_assert(toml_get_datetime(toml_table_get(root, "utc"), &dt, NULL, 0));
    cr_assert_eq(toml_node_kind(toml_table_get(root, "utc")), TOML_DATETIME);
    cr_assert_eq(dt->offset_minutes, 0);
    cr_assert_str_eq(dt->text, "1979-05-27t07:32:00z");

    cr_assert(toml_get_datetime(toml_table_get(root, "ldt"), &dt, NULL, 0));
    cr_assert_eq(dt->second, 60);
    cr_assert_eq(dt->nanosecond, 500000000);
    cr_assert_eq(dt->frac_digits, 1);

    cr_assert(toml_get_datetime(toml_table_get(root, "ld"), &dt, NULL, 0));
    cr_assert_eq(dt->day, 31);
    cr_assert_eq(dt->hour, 0);

    cr_assert(toml_get_datetime(toml_table_get(root, "lt"), &dt, NULL, 0));
    cr_assert_eq(dt->year, 0);
    cr_assert_eq(dt->nanosecond, 1000000);
    toml_free(doc);
}

/* ---- source positions ---------------------------------------------------------------------------- */

Test(toml, keys_and_values_remember_their_position) {
    toml_doc *doc = parse_ok("# header comment\n"
                             "title = \"x\"\n"
                             "\n"
                             "[gateway]\n"
                             "  port =   8080\n"
                             "  \"é\" = 1\n"
                             "list = [\n"
                             "  1,\n"
                             "  2,\n"
                             "]\n");
    const toml_node *root = toml_root(doc);
    const toml_entry *title = toml_table_entry(root, "title", 5);
    cr_assert_eq(title->line, 2);
    cr_assert_eq(title->col, 1);
    cr_assert_eq(toml_node_line(title->value), 2);
    cr_assert_eq(toml_node_col(title->value), 9);
    cr_assert_str_eq(toml_node_file(title->value), "test.toml");

    const toml_node *gw = toml_table_get(root, "gateway");
    cr_assert_eq(toml_node_line(gw), 4);
    const toml_entry *port = toml_table_at(gw, 0);
    cr_assert_eq(port->line, 5);
    cr_assert_eq(port->col, 3);
    cr_assert_eq(toml_node_col(port->value), 12);
    cr_assert_str_eq(toml_node_key(port->value), "port");

    /* columns count characters, not bytes: the key after "é" is still at column 3 of its line */
    const toml_entry *e = toml_table_at(gw, 1);
    cr_assert_eq(e->col, 3);
    cr_assert_eq(toml_node_col(e->value), 9);

    const toml_node *list = toml_table_get(gw, "list");
    cr_assert_eq(toml_node_line(toml_array_at(list, 1)), 9);
    cr_assert_null(toml_node_key(toml_array_at(list, 1)));
    cr_assert_null(toml_node_key(root));
    toml_free(doc);
}

Test(toml, null_filename_and_positions_of_null) {
    char err[TOML_ERRBUF_SIZE];
    cr_assert_null(toml_parse("a = ", 4, NULL, err, sizeof err));
    cr_assert_str_eq(err, "<input>:1:5: expected a value, found end of file");
    cr_assert_eq(toml_node_line(NULL), 0);
    cr_assert_null(toml_node_file(NULL));
    cr_assert_null(toml_root(NULL));
}

/* ---- typed accessors ----------------------------------------------------------------------------- */

Test(toml, typed_accessors_report_type_errors) {
    toml_doc *doc = parse_ok("[gateway]\nport = \"8080\"\nlist = [1, 'two']\n");
    const toml_node *gw = toml_table_get(toml_root(doc), "gateway");
    char err[TOML_ERRBUF_SIZE];
    int64_t i = 42;

    cr_assert_not(toml_get_int(toml_table_get(gw, "port"), &i, err, sizeof err));
    cr_assert_str_eq(err, "test.toml:2:8: expected integer for 'port', found string");
    cr_assert_eq(i, 42, "the output is left alone on error");

    cr_assert_not(toml_get_int(toml_table_get(gw, "missing"), &i, err, sizeof err));
    cr_assert_str_eq(err, "expected integer, found no value");

    const toml_node *two = toml_array_at(toml_table_get(gw, "list"), 1);
    cr_assert_not(toml_get_bool(two, &(bool){false}, err, sizeof err));
    cr_assert_str_eq(err, "test.toml:3:12: expected bool, found string");

    cr_assert_not(toml_expect(gw, TOML_ARRAY, err, sizeof err));
    cr_assert_str_eq(err, "test.toml:1:1: expected array for 'gateway', found table");
    cr_assert(toml_expect(gw, TOML_TABLE, err, sizeof err));

    const toml_datetime *dt;
    cr_assert_not(toml_get_datetime(two, &dt, err, sizeof err));
    cr_assert_str_eq(err, "test.toml:3:12: expected date/time, found string");
    cr_assert_not(toml_get_float(two, &(double){0}, NULL, 0), "a NULL errbuf is allowed");
    const char *s;
    cr_assert_not(toml_get_string(toml_array_at(toml_table_get(gw, "list"), 0), &s, NULL, err, sizeof err));
    cr_assert_str_eq(err, "test.toml:3:9: expected string, found integer");
    toml_free(doc);
}

Test(toml, float_accessor_accepts_integers) {
    toml_doc *doc = parse_ok("t = 1\nbig = 9007199254740993\n");
    double f;
    cr_assert(toml_get_float(toml_table_get(toml_root(doc), "t"), &f, NULL, 0));
    cr_assert_eq(f, 1.0);
    cr_assert(toml_get_float(toml_table_get(toml_root(doc), "big"), &f, NULL, 0));
    cr_assert_eq(f, 9007199254740992.0);
    toml_free(doc);
}

/* ---- errors -------------------------------------------------------------------------------------- */

Test(toml, error_duplicate_key) {
    expect_error("[model]\nname = \"a\"\n\nname = \"b\"\n", "config.toml:4:1: duplicate key 'name'");
    expect_error("a = { b = 1, b = 2 }", "config.toml:1:14: duplicate key 'b'");
    expect_error("x.y = 1\nx.y = 2\n", "config.toml:2:3: duplicate key 'x.y'");
    expect_error("'a b' = 1\n\"a b\" = 2\n", "config.toml:2:1: duplicate key '\"a b\"'");
}

Test(toml, error_table_redefinition) {
    expect_error("[a]\nx = 1\n[b]\n[a]\n", "config.toml:4:1: table 'a' is already defined at line 1");
    expect_error(
        "[a]\nb.c = 1\n[a.b]\n",
        "config.toml:3:1: cannot define table 'a.b': it is already a table defined by dotted keys (line 2)");
    expect_error("[a.b]\n[a]\nb.c = 1\n", "config.toml:3:1: cannot add keys to 'b' with dotted keys: it is "
                                          "already a table defined by a [header] (line 1)");
    expect_error("a = 1\n[a.b]\n",
                 "config.toml:2:2: cannot define a table inside 'a': it is already an integer (line 1)");
    expect_error("[[a]]\n[a]\n",
                 "config.toml:2:1: cannot define table 'a': it is already an array of tables (line 1)");
    expect_error("a = []\n[[a]]\n",
                 "config.toml:2:1: cannot append to 'a' with [[...]]: it is already an array (line 1)");
}

Test(toml, error_inline_table_extension) {
    expect_error("t = { a = 1 }\n[t.b]\n",
                 "config.toml:2:2: cannot define a table inside 't': it is already an inline table (line 1)");
    expect_error(
        "t = { a = 1 }\nt.b = 2\n",
        "config.toml:2:1: cannot add keys to 't' with dotted keys: it is already an inline table (line 1)");
    expect_error("t = {a = 1,}\n", "config.toml:1:12: trailing comma is not allowed in an inline table");
    expect_error("t = {a = 1,\nb = 2}\n", "config.toml:1:12: expected a key, found end of line");
}

Test(toml, error_strings) {
    expect_error("s = \"bad \\q\"\n", "config.toml:1:10: invalid escape sequence: backslash followed by 'q'");
    expect_error("s = \"\\uD800\"\n", "config.toml:1:6: \\uD800 is not a Unicode scalar value");
    expect_error("s = \"\\u12\"\n", "config.toml:1:6: \\u escape needs 4 hexadecimal digits");
    expect_error("\ns = \"open\n",
                 "config.toml:2:5: unterminated string (use \"\"\" for strings spanning lines)");
    expect_error("s = '''open\n\n", "config.toml:1:5: unterminated multi-line string");
    expect_error("s = \"tab\tok but \x01 not\"\n",
                 "config.toml:1:17: control character U+0001 is not allowed");
    expect_error("s = \"caf\xC3\"\n", "config.toml:1:9: invalid UTF-8 (byte 0xC3)");
    expect_error("s = \"\xC0\xAF\"\n", "config.toml:1:6: invalid UTF-8 (byte 0xC0)");
    expect_error("s = \"\xED\xA0\x80\"\n", "config.toml:1:6: invalid UTF-8 (byte 0xED)");
    expect_error("a = 1\rb = 2\n", "config.toml:1:6: carriage return is not followed by a line feed");
    expect_error("# comment \x7F\n", "config.toml:1:11: control character U+007F is not allowed");
}

Test(toml, error_numbers) {
    expect_error("n = 0123\n", "config.toml:1:5: leading zeros are not allowed in '0123'");
    expect_error("n = 9223372036854775808\n",
                 "config.toml:1:5: integer '9223372036854775808' is out of range");
    expect_error("n = -9223372036854775809\n",
                 "config.toml:1:5: integer '-9223372036854775809' is out of range");
    expect_error("n = 0x8000000000000000\n", "config.toml:1:5: integer '0x8000000000000000' is out of range");
    expect_error("n = 1__0\n", "config.toml:1:5: invalid number '1__0'");
    expect_error("n = -0x1\n",
                 "config.toml:1:5: hexadecimal, octal and binary integers cannot have a sign: '-0x1'");
    expect_error("f = 1e400\n", "config.toml:1:5: float '1e400' is out of range");
    expect_error("f = .5\n", "config.toml:1:5: expected a value, found '.'");
    expect_error("f = 1.\n", "config.toml:1:5: invalid float '1.'");
    expect_error("v = yes\n", "config.toml:1:5: invalid value 'yes' (strings must be quoted)");
}

Test(toml, error_dates) {
    expect_error("d = 2023-02-30\n", "config.toml:1:5: invalid date: 2023-02 has no day 30");
    expect_error("d = 2023-02-29\n", "config.toml:1:5: invalid date: 2023-02 has no day 29");
    expect_error("d = 2023-13-01\n", "config.toml:1:5: invalid date: month 13 does not exist");
    expect_error("t = 24:00:00\n", "config.toml:1:5: invalid time 24:00:00");
    expect_error("t = 12:30\n", "config.toml:1:5: malformed time (expected HH:MM:SS)");
    expect_error("d = 1979-05-27T07:32:00+24:00\n", "config.toml:1:5: invalid UTC offset 24:00");
}

Test(toml, error_structure) {
    expect_error("[a]b = 1\n", "config.toml:1:4: expected end of line after table header, found 'b'");
    expect_error("a = 1 b = 2\n", "config.toml:1:7: expected end of line after value, found 'b'");
    expect_error("a\n", "config.toml:1:2: expected '=' after key 'a', found end of line");
    expect_error("a = [1 2]\n", "config.toml:1:8: expected ',' or ']' after array element, found '2'");
    expect_error(
        "[[a]\n",
        "config.toml:1:5: expected ']]' at the end of the array-of-tables header, found end of line");
    expect_error("\"\"\"k\"\"\" = 1\n", "config.toml:1:1: a multi-line string cannot be a key");
    expect_error("= 1\n", "config.toml:1:1: expected a key, found '='");
    expect_error("a = \xEF\xBB\xBF"
                 "1\n",
                 "config.toml:1:5: expected a value, found '\xEF\xBB\xBF'");
}

Test(toml, error_message_truncation_and_null_errbuf) {
    char err[12];
    cr_assert_null(toml_parse("a = ", 4, "config.toml", err, sizeof err));
    cr_assert_str_eq(err, "config.toml");
    cr_assert_null(toml_parse("a = ", 4, "config.toml", NULL, 0));
    char one[1] = {'x'};
    cr_assert_null(toml_parse("a = ", 4, "config.toml", one, sizeof one));
    cr_assert_eq(one[0], '\0');
}

Test(toml, long_keys_are_shortened_in_messages) {
    char text[512];
    char key[200];
    memset(key, 'k', sizeof key - 1);
    key[sizeof key - 1] = '\0';
    snprintf(text, sizeof text, "%s = 1\n%s = 2\n", key, key);
    char err[TOML_ERRBUF_SIZE];
    cr_assert_null(toml_parse(text, strlen(text), "c.toml", err, sizeof err));
    cr_assert(strstr(err, "duplicate key 'kkkk") != NULL);
    cr_assert(strstr(err, "...'") != NULL, "%s", err);
    cr_assert_lt(strlen(err), 120);
}

Test(toml, control_characters_in_keys_are_escaped_in_messages) {
    expect_error("\"a\\nb\" = 1\n\"a\\nb\" = 2\n", "config.toml:2:1: duplicate key '\"a\\u000Ab\"'");
}

/* ---- input handling ------------------------------------------------------------------------------ */

Test(toml, input_need_not_be_nul_terminated) {
    static const char text[] = "a = 12";
    toml_doc *doc = toml_parse(text, 5, "t.toml", NULL, 0); /* sees only "a = 1" */
    int64_t i;
    cr_assert_not_null(doc);
    cr_assert(toml_get_int(toml_table_get(toml_root(doc), "a"), &i, NULL, 0));
    cr_assert_eq(i, 1);
    toml_free(doc);

    char err[TOML_ERRBUF_SIZE];
    cr_assert_null(toml_parse("s = \"abc\"", 8, "t.toml", err, sizeof err));
    cr_assert_str_eq(err, "t.toml:1:5: unterminated string (use \"\"\" for strings spanning lines)");
}

Test(toml, empty_documents) {
    toml_doc *doc = toml_parse(NULL, 0, NULL, NULL, 0);
    cr_assert_not_null(doc);
    cr_assert_eq(toml_table_len(toml_root(doc)), 0);
    toml_free(doc);
    doc = parse_ok("\xEF\xBB\xBF# only a BOM and a comment\n\n   \t\n");
    cr_assert_eq(toml_table_len(toml_root(doc)), 0);
    toml_free(doc);
    toml_free(NULL);
}

Test(toml, nul_byte_in_input_is_rejected) {
    char err[TOML_ERRBUF_SIZE];
    cr_assert_null(toml_parse("a = 1\n\0b = 2\n", 13, "t.toml", err, sizeof err));
    cr_assert_str_eq(err, "t.toml:2:1: control character U+0000 is not allowed");
}

Test(toml, float_parsing_ignores_the_locale) {
    if (!setlocale(LC_NUMERIC, "de_DE.UTF-8") && !setlocale(LC_NUMERIC, "fr_FR.UTF-8"))
        cr_skip_test("no locale with a decimal comma is installed");
    toml_doc *doc = parse_ok("f = 3.25\n");
    double f;
    cr_assert(toml_get_float(toml_table_get(toml_root(doc), "f"), &f, NULL, 0));
    cr_assert_eq(f, 3.25);
    toml_free(doc);
    setlocale(LC_NUMERIC, "C");
}

/* ---- limits -------------------------------------------------------------------------------------- */

Test(toml, nesting_limit_arrays) {
    /* the key's value is depth 1, so TOML_MAX_DEPTH nested arrays fit exactly */
    char *ok = nested("a = ", "[", "", "]", TOML_MAX_DEPTH);
    toml_doc *doc = parse_ok(ok);
    toml_free(doc);
    free(ok);
    char *deep = nested("a = ", "[", "", "]", TOML_MAX_DEPTH + 1);
    char err[TOML_ERRBUF_SIZE];
    cr_assert_null(toml_parse(deep, strlen(deep), "deep.toml", err, sizeof err));
    cr_assert_str_eq(err, "deep.toml:1:133: nesting is deeper than 128 levels");
    free(deep);
}

Test(toml, nesting_limit_inline_tables_and_keys) {
    char err[TOML_ERRBUF_SIZE];
    char *deep = nested("a = ", "{b = ", "1", "}", TOML_MAX_DEPTH);
    cr_assert_null(toml_parse(deep, strlen(deep), "deep.toml", err, sizeof err));
    cr_assert(strstr(err, "nesting is deeper than 128 levels") != NULL, "%s", err);
    free(deep);

    char *dotted = nested("", "a.", "b = 1", "", TOML_MAX_DEPTH);
    cr_assert_null(toml_parse(dotted, strlen(dotted), "deep.toml", err, sizeof err));
    cr_assert(strstr(err, "nesting is deeper than 128 levels") != NULL, "%s", err);
    free(dotted);

    char *header = nested("[", "a.", "b]", "", TOML_MAX_DEPTH);
    cr_assert_null(toml_parse(header, strlen(header), "deep.toml", err, sizeof err));
    cr_assert(strstr(err, "nesting is deeper than 128 levels") != NULL, "%s", err);
    free(header);

    char *fits = nested("[", "a.", "b]", "", TOML_MAX_DEPTH - 1);
    toml_free(parse_ok(fits));
    free(fits);
}

Test(toml, very_deep_input_does_not_overflow_the_stack) {
    /* far past the limit: the parser must stop at TOML_MAX_DEPTH rather than recurse on */
    int depth = 1000000;
    char *deep = nested("a = ", "[", "", "", depth);
    char err[TOML_ERRBUF_SIZE];
    cr_assert_null(toml_parse(deep, strlen(deep), "deep.toml", err, sizeof err));
    cr_assert(strstr(err, "nesting is deeper than 128 levels") != NULL, "%s", err);
    free(deep);
}
