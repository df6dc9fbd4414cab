/*
 * toml_decode - a toml-test decoder for src/util/toml.c.
 *
 *   toml_decode < file.toml                  prints the document as toml-test's tagged JSON, exit 0;
 *                                            on invalid TOML prints one error line on stderr, exit 1
 *   toml_decode --expect file.json < f.toml  decodes, then compares with file.json the way toml-test
 *                                            does; exit 0 when they match, 1 (with the first
 *                                            difference on stderr) when they do not
 *
 * The comparison is semantic, following toml-test's README: integers and floats compare by value (so
 * "+1e3" equals "1000.0", and any NaN equals any NaN), offset datetimes compare as instants, local
 * dates and times field by field with fractional seconds as numbers ("56.6" equals "56.600"), and
 * strings byte for byte. Expected datetimes are read by the small parser below, not by the library
 * under test, so that a bug in the library cannot hide itself.
 *
 * jansson cannot load an object key containing "\u0000", which toml-test uses, so in --expect mode NUL
 * is replaced by the noncharacter U+FDD0 on both sides (in the expected text before loading, and in the
 * decoded keys and strings); the corpus never uses U+FDD0 itself.
 */
#include "util/toml.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    EXIT_INVALID = 1,       /* invalid TOML, or output differs from --expect */
    EXIT_USAGE = 2,         /* bad arguments or unreadable files */
    READ_CHUNK = 64 * 1024, /* stdin is read in pieces of this size */
    VALUE_TEXT_MAX = 64,    /* room for a formatted number or datetime */
    PATH_MAX_LEN = 512,     /* room for the JSON path named in a mismatch message */
    FLOAT_MIN_DIGITS = 15,  /* shortest %g precision tried when printing a double... */
    FLOAT_MAX_DIGITS = 17,  /* ...and the precision that always round-trips */
    NANO_DIGITS = 9,
    SECONDS_PER_DAY = 86400,
};

static const char NUL_STANDIN[] = "\xEF\xB7\x90"; /* U+FDD0 in UTF-8 */
static const char NUL_STANDIN_ESCAPE[] = "\\uFDD0";
static const char NUL_ESCAPE[] = "\\u0000";

/* Set in --expect mode: NUL in decoded keys and strings becomes NUL_STANDIN (see the top comment). */
static bool replace_nul;

/* ---- reading input ------------------------------------------------------------------------------- */

static char *read_stream(FILE *f, size_t *len) {
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (cap - n < READ_CHUNK) {
            char *bigger = realloc(buf, cap + READ_CHUNK);
            if (!bigger) {
                free(buf);
                return NULL;
            }
            buf = bigger;
            cap += READ_CHUNK;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    if (ferror(f)) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

/* ---- TOML to tagged JSON ------------------------------------------------------------------------- */

/* The shortest %g form that reads back as the same double, so 0.1 prints as "0.1". */
static void format_float(double d, char *buf, size_t cap) {
    if (isnan(d)) {
        snprintf(buf, cap, "nan");
        return;
    }
    if (isinf(d)) {
        snprintf(buf, cap, d < 0 ? "-inf" : "inf");
        return;
    }
    for (int digits = FLOAT_MIN_DIGITS; digits <= FLOAT_MAX_DIGITS; digits++) {
        snprintf(buf, cap, "%.*g", digits, d);
        if (strtod(buf, NULL) == d) return;
    }
}

/* RFC 3339 with a 'T' separator, whatever the source used; the fraction keeps the digits written. */
static void format_datetime(toml_kind kind, const toml_datetime *dt, char *buf, size_t cap) {
    size_t n = 0;
    if (kind != TOML_TIME_LOCAL)
        n += (size_t)snprintf(buf + n, cap - n, "%04d-%02d-%02d", dt->year, dt->month, dt->day);
    if (kind == TOML_DATETIME || kind == TOML_DATETIME_LOCAL) n += (size_t)snprintf(buf + n, cap - n, "T");
    if (kind != TOML_DATE_LOCAL) {
        n += (size_t)snprintf(buf + n, cap - n, "%02d:%02d:%02d", dt->hour, dt->minute, dt->second);
        if (dt->frac_digits > 0) {
            long frac = dt->nanosecond;
            for (int i = dt->frac_digits; i < NANO_DIGITS; i++)
                frac /= 10;
            n += (size_t)snprintf(buf + n, cap - n, ".%0*ld", dt->frac_digits, frac);
        }
    }
    if (kind == TOML_DATETIME) {
        int off = dt->offset_minutes;
        if (off == 0)
            snprintf(buf + n, cap - n, "Z");
        else
            snprintf(buf + n, cap - n, "%c%02d:%02d", off < 0 ? '-' : '+', abs(off) / 60, abs(off) % 60);
    }
}

/* A JSON string for s[0, len), with NUL replaced by NUL_STANDIN when comparing. */
static json_t *json_text(const char *s, size_t len) {
    if (!replace_nul || !memchr(s, '\0', len)) return json_stringn(s, len);
    size_t standin = strlen(NUL_STANDIN), n = 0;
    char *buf = malloc(len * standin + 1);
    if (!buf) return NULL;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '\0') {
            memcpy(buf + n, NUL_STANDIN, standin);
            n += standin;
        } else {
            buf[n++] = s[i];
        }
    }
    json_t *j = json_stringn(buf, n);
    free(buf);
    return j;
}

static json_t *tagged(const char *type, json_t *value) {
    json_t *o = json_object();
    if (!o || !value || json_object_set_new(o, "type", json_string(type)) ||
        json_object_set_new(o, "value", value)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *to_json(const toml_node *n);

static json_t *table_to_json(const toml_node *n) {
    json_t *o = json_object();
    for (size_t i = 0; o && i < toml_table_len(n); i++) {
        const toml_entry *e = toml_table_at(n, i);
        json_t *key = json_text(e->key, e->key_len);
        bool failed = !key || json_object_setn_new(o, json_string_value(key), json_string_length(key),
                                                   to_json(e->value));
        json_decref(key);
        if (failed) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

static json_t *array_to_json(const toml_node *n) {
    json_t *a = json_array();
    for (size_t i = 0; a && i < toml_array_len(n); i++) {
        if (json_array_append_new(a, to_json(toml_array_at(n, i)))) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *to_json(const toml_node *n) {
    char text[VALUE_TEXT_MAX];
    toml_kind kind = toml_node_kind(n);
    const char *type = toml_kind_name(kind);
    switch (kind) {
    case TOML_TABLE: return table_to_json(n);
    case TOML_ARRAY: return array_to_json(n);
    case TOML_STRING: {
        const char *s;
        size_t len;
        toml_get_string(n, &s, &len, NULL, 0);
        return tagged(type, json_text(s, len));
    }
    case TOML_INTEGER: {
        int64_t v;
        toml_get_int(n, &v, NULL, 0);
        snprintf(text, sizeof text, "%" PRId64, v);
        break;
    }
    case TOML_FLOAT: {
        double v;
        toml_get_float(n, &v, NULL, 0);
        format_float(v, text, sizeof text);
        break;
    }
    case TOML_BOOL: {
        bool v;
        toml_get_bool(n, &v, NULL, 0);
        snprintf(text, sizeof text, "%s", v ? "true" : "false");
        break;
    }
    case TOML_DATETIME:
    case TOML_DATETIME_LOCAL:
    case TOML_DATE_LOCAL:
    case TOML_TIME_LOCAL: {
        const toml_datetime *dt;
        toml_get_datetime(n, &dt, NULL, 0);
        format_datetime(kind, dt, text, sizeof text);
        break;
    }
    }
    return tagged(type, json_string(text));
}

/* ---- comparing with the expected JSON ------------------------------------------------------------ */

typedef struct dtval {
    int year, month, day, hour, minute, second;
    long nanosecond;
    int offset_minutes;
} dtval;

static bool take_int(const char **s, int digits, int *out) {
    int v = 0;
    for (int i = 0; i < digits; i++) {
        if ((*s)[i] < '0' || (*s)[i] > '9') return false;
        v = v * 10 + ((*s)[i] - '0');
    }
    *s += digits;
    *out = v;
    return true;
}

static bool take(const char **s, const char *any_of) {
    if (**s == '\0' || !strchr(any_of, **s)) return false;
    (*s)++;
    return true;
}

static bool parse_time(const char **s, dtval *v) {
    if (!take_int(s, 2, &v->hour) || !take(s, ":") || !take_int(s, 2, &v->minute) || !take(s, ":") ||
        !take_int(s, 2, &v->second))
        return false;
    if (take(s, ".")) {
        int digits = 0;
        for (; **s >= '0' && **s <= '9'; (*s)++)
            if (digits++ < NANO_DIGITS) v->nanosecond = v->nanosecond * 10 + (**s - '0');
        for (; digits < NANO_DIGITS; digits++)
            v->nanosecond *= 10;
    }
    return true;
}

/* Reads an expected value of the given toml-test type; the whole string must be used. */
static bool parse_dt(const char *s, const char *type, dtval *v) {
    memset(v, 0, sizeof *v);
    bool has_date = strcmp(type, "time-local") != 0;
    bool has_time = strcmp(type, "date-local") != 0;
    if (has_date && (!take_int(&s, 4, &v->year) || !take(&s, "-") || !take_int(&s, 2, &v->month) ||
                     !take(&s, "-") || !take_int(&s, 2, &v->day)))
        return false;
    if (has_date && has_time && !take(&s, "Tt ")) return false;
    if (has_time && !parse_time(&s, v)) return false;
    if (strcmp(type, "datetime") == 0) {
        int sign = *s == '-' ? -1 : 1, h, m;
        if (!take(&s, "Zz")) {
            if (!take(&s, "+-") || !take_int(&s, 2, &h) || !take(&s, ":") || !take_int(&s, 2, &m))
                return false;
            v->offset_minutes = sign * (h * 60 + m);
        }
    }
    return *s == '\0';
}

/* Days since 1970-01-01 in the proleptic Gregorian calendar (Howard Hinnant's algorithm). */
static long days_from_civil(int y, int m, int d) {
    y -= m <= 2;
    long era = (y >= 0 ? y : y - 399) / 400;
    long yoe = y - era * 400;
    long doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static bool same_datetime(const char *type, const char *want, const char *have) {
    dtval a, b;
    if (!parse_dt(want, type, &a) || !parse_dt(have, type, &b)) return false;
    if (strcmp(type, "datetime") == 0) {
        long long sa = (long long)days_from_civil(a.year, a.month, a.day) * SECONDS_PER_DAY + a.hour * 3600 +
                       a.minute * 60 + a.second - a.offset_minutes * 60;
        long long sb = (long long)days_from_civil(b.year, b.month, b.day) * SECONDS_PER_DAY + b.hour * 3600 +
                       b.minute * 60 + b.second - b.offset_minutes * 60;
        return sa == sb && a.nanosecond == b.nanosecond;
    }
    return memcmp(&a, &b, sizeof a) == 0;
}

static bool parse_json_float(const char *s, double *out) {
    const char *t = (*s == '+' || *s == '-') ? s + 1 : s;
    if (strcmp(t, "nan") == 0) {
        *out = NAN;
        return true;
    }
    if (strcmp(t, "inf") == 0) {
        *out = *s == '-' ? -INFINITY : INFINITY;
        return true;
    }
    char *end;
    errno = 0;
    *out = strtod(s, &end);
    return *s != '\0' && *end == '\0';
}

static bool same_float(const char *want, const char *have) {
    double a, b;
    if (!parse_json_float(want, &a) || !parse_json_float(have, &b)) return false;
    return (isnan(a) && isnan(b)) || a == b;
}

static bool same_integer(const char *want, const char *have) {
    char *ea, *eb;
    errno = 0;
    long long a = strtoll(want, &ea, 10);
    long long b = strtoll(have, &eb, 10);
    return errno == 0 && *want && *have && !*ea && !*eb && a == b;
}

static bool is_tagged(const json_t *j) {
    return json_is_object(j) && json_object_size(j) == 2 && json_is_string(json_object_get(j, "type")) &&
           json_is_string(json_object_get(j, "value"));
}

static bool same_scalar(const json_t *want, const json_t *have) {
    const char *type = json_string_value(json_object_get(want, "type"));
    const json_t *wv = json_object_get(want, "value"), *hv = json_object_get(have, "value");
    const char *ws = json_string_value(wv), *hs = json_string_value(hv);
    if (strcmp(type, json_string_value(json_object_get(have, "type"))) != 0) return false;
    if (strcmp(type, "integer") == 0) return same_integer(ws, hs);
    if (strcmp(type, "float") == 0) return same_float(ws, hs);
    if (strcmp(type, "datetime") == 0 || strcmp(type, "datetime-local") == 0 ||
        strcmp(type, "date-local") == 0 || strcmp(type, "time-local") == 0)
        return same_datetime(type, ws, hs);
    return json_string_length(wv) == json_string_length(hv) && memcmp(ws, hs, json_string_length(wv)) == 0;
}

static void report(const char *path, const char *problem, const json_t *want, const json_t *have) {
    char *w = want ? json_dumps(want, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    char *h = have ? json_dumps(have, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    fprintf(stderr, "mismatch at %s: %s\n  expected: %s\n  decoded:  %s\n", *path ? path : "(root)", problem,
            w ? w : "(none)", h ? h : "(none)");
    free(w);
    free(h);
}

static bool same_json(const json_t *want, const json_t *have, char *path, size_t plen);

static bool same_object(const json_t *want, const json_t *have, char *path, size_t plen) {
    if (json_object_size(want) != json_object_size(have)) {
        report(path, "different keys", want, have);
        return false;
    }
    for (void *it = json_object_iter((json_t *)want); it; it = json_object_iter_next((json_t *)want, it)) {
        const char *key = json_object_iter_key(it);
        size_t klen = json_object_iter_key_len(it);
        const json_t *h = json_object_getn(have, key, klen);
        snprintf(path + plen, PATH_MAX_LEN - plen, ".%s", key);
        if (!h) {
            report(path, "key missing", json_object_iter_value(it), NULL);
            return false;
        }
        if (!same_json(json_object_iter_value(it), h, path, strlen(path))) return false;
    }
    path[plen] = '\0';
    return true;
}

static bool same_array(const json_t *want, const json_t *have, char *path, size_t plen) {
    if (json_array_size(want) != json_array_size(have)) {
        report(path, "different lengths", want, have);
        return false;
    }
    for (size_t i = 0; i < json_array_size(want); i++) {
        snprintf(path + plen, PATH_MAX_LEN - plen, "[%zu]", i);
        if (!same_json(json_array_get(want, i), json_array_get(have, i), path, strlen(path))) return false;
    }
    path[plen] = '\0';
    return true;
}

static bool same_json(const json_t *want, const json_t *have, char *path, size_t plen) {
    if (is_tagged(want)) {
        if (is_tagged(have) && same_scalar(want, have)) return true;
        report(path, "different values", want, have);
        return false;
    }
    if (json_is_object(want) && json_is_object(have) && !is_tagged(have))
        return same_object(want, have, path, plen);
    if (json_is_array(want) && json_is_array(have)) return same_array(want, have, path, plen);
    report(path, "different kinds of value", want, have);
    return false;
}

/* Loads the expected JSON with every "\u0000" escape turned into NUL_STANDIN_ESCAPE. */
static json_t *load_expected(const char *file) {
    FILE *f = fopen(file, "rb");
    size_t len = 0;
    char *text = f ? read_stream(f, &len) : NULL;
    if (f) fclose(f);
    if (!text) {
        fprintf(stderr, "%s: cannot read\n", file);
        return NULL;
    }
    size_t esc = strlen(NUL_ESCAPE);
    for (size_t i = 0; i + 1 < len; i++) {
        if (text[i] != '\\') continue;
        if (len - i >= esc && memcmp(text + i, NUL_ESCAPE, esc) == 0)
            memcpy(text + i, NUL_STANDIN_ESCAPE, esc);
        i++; /* skip the escaped character: in "\\u0000" the backslash is escaped, not the u */
    }
    json_error_t jerr;
    json_t *j = json_loadb(text, len, JSON_DECODE_ANY, &jerr);
    if (!j) fprintf(stderr, "%s:%d: %s\n", file, jerr.line, jerr.text);
    free(text);
    return j;
}

/* ---- main ---------------------------------------------------------------------------------------- */

int main(int argc, char **argv) {
    const char *expect = NULL;
    if (argc == 3 && strcmp(argv[1], "--expect") == 0) {
        expect = argv[2];
    } else if (argc != 1) {
        fprintf(stderr, "usage: %s [--expect FILE.json] < FILE.toml\n", argv[0]);
        return EXIT_USAGE;
    }
    replace_nul = expect != NULL;
    size_t len = 0;
    char *text = read_stream(stdin, &len);
    if (!text) {
        fprintf(stderr, "toml_decode: cannot read stdin\n");
        return EXIT_USAGE;
    }
    char err[TOML_ERRBUF_SIZE];
    toml_doc *doc = toml_parse(text, len, "<stdin>", err, sizeof err);
    free(text);
    if (!doc) {
        fprintf(stderr, "%s\n", err);
        return EXIT_INVALID;
    }
    json_t *have = to_json(toml_root(doc));
    toml_free(doc);
    if (!have) {
        fprintf(stderr, "toml_decode: out of memory\n");
        return EXIT_USAGE;
    }
    int rc = EXIT_SUCCESS;
    if (expect) {
        json_t *want = load_expected(expect);
        char path[PATH_MAX_LEN] = "";
        if (!want) {
            rc = EXIT_USAGE;
        } else if (!same_json(want, have, path, 0)) {
            rc = EXIT_INVALID;
        }
        json_decref(want);
    } else if (json_dumpf(have, stdout, JSON_INDENT(2)) != 0 || fputc('\n', stdout) == EOF) {
        rc = EXIT_USAGE;
    }
    json_decref(have);
    return rc;
}
