/*
 * config_table.c: the reader and the printer of the configuration's key tables (config_table.h).
 *
 * One reader per kind of value: each takes the key's node, checks its TOML type and its range or
 * values, and stores it at the row's offset, or reports "FILE:LINE: WHERE KEY: problem" and leaves
 * the field as it was (its default), so that one run lists every problem of the file. The printer
 * walks the same rows, so the reference says what the reader accepts.
 */
#include <libgen.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/config_table.h"
#include "gateway/errors.h"

#define SUGGEST_MAX_KEY 64 /* longer unknown keys get no suggestion */
#define SUGGEST_FRACTION 3 /* a suggestion differs in at most a third of the letters */
#define MB_SHIFT 20        /* GW_CFG_MB: MiB to bytes */
#define ENUM_LIST_SIZE 256 /* "none, ngram, draft" */

void gw_cfg_err(gw_cfg_ctx *x, int line, const char *fmt, ...) {
    char msg[SIPP_ERROR_SIZE];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sipp_buf clean = {0};
    gw_echo_escape(msg, &clean);
    if (line > 0)
        sipp_buf_appendf(x->errs, "%s:%d: %s\n", x->file, line, clean.data ? clean.data : "");
    else
        sipp_buf_appendf(x->errs, "%s: %s\n", x->file, clean.data ? clean.data : "");
    sipp_buf_free(&clean);
    x->ok = false;
}

int gw_cfg_line(const toml_node *tbl, const toml_node *n) {
    return n ? toml_node_line(n) : toml_node_line(tbl);
}

bool gw_cfg_expect(gw_cfg_ctx *x, const toml_node *n, toml_kind kind, const char *key, const char *what) {
    if (toml_node_kind(n) == kind) return true;
    gw_cfg_err(x, toml_node_line(n), "%s%s%s: expected %s, found %s", x->where, *x->where ? " " : "", key,
               what, toml_kind_name(toml_node_kind(n)));
    return false;
}

void gw_cfg_free_strv(char **v, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

char *gw_cfg_resolve_path(const char *config_path, const char *p) {
    if (p[0] == '/' || !config_path) return strdup(p);
    char *copy = strdup(config_path);
    if (!copy) return NULL;
    const char *dir = dirname(copy);
    size_t n = strlen(dir) + strlen(p) + 2;
    char *out = malloc(n);
    if (out) snprintf(out, n, "%s/%s", dir, p);
    free(copy);
    return out;
}

/* ---- one reader per kind ------------------------------------------------------------------------- */

static void *field(void *obj, const gw_cfg_key *k) { return (char *)obj + k->offset; }

/* A whole number within the row's range; false after reporting one that is not. */
static bool whole(gw_cfg_ctx *x, const toml_node *n, const gw_cfg_key *k, int64_t *out) {
    if (!gw_cfg_expect(x, n, TOML_INTEGER, k->key, "an integer")) return false;
    int64_t v = 0;
    toml_get_int(n, &v, NULL, 0);
    if ((double)v < k->lo || (double)v > k->hi) {
        gw_cfg_err(x, toml_node_line(n), "%s %s: %lld is out of range [%lld, %lld]", x->where, k->key,
                   (long long)v, (long long)k->lo, (long long)k->hi);
        return false;
    }
    *out = v;
    return true;
}

/* A number (a float or an integer) within [lo, hi). */
static bool fraction(gw_cfg_ctx *x, const toml_node *n, const gw_cfg_key *k, float *out) {
    double v = NAN;
    int64_t iv = 0;
    if (toml_node_kind(n) == TOML_FLOAT)
        toml_get_float(n, &v, NULL, 0);
    else if (toml_node_kind(n) == TOML_INTEGER && toml_get_int(n, &iv, NULL, 0))
        v = (double)iv;
    else if (!gw_cfg_expect(x, n, TOML_FLOAT, k->key, "a number"))
        return false;
    if (!(v >= k->lo && v < k->hi)) {
        gw_cfg_err(x, toml_node_line(n), "%s %s: %g is out of range [%g, %g)", x->where, k->key, v, k->lo,
                   k->hi);
        return false;
    }
    *out = (float)v;
    return true;
}

/* A non-empty string without NUL characters, borrowed from the document. */
static const char *string_value(gw_cfg_ctx *x, const toml_node *n, const gw_cfg_key *k) {
    if (!gw_cfg_expect(x, n, TOML_STRING, k->key, "a string")) return NULL;
    const char *s = NULL;
    size_t len = 0;
    toml_get_string(n, &s, &len, NULL, 0);
    if (len != 0 && strlen(s) == len) return s;
    gw_cfg_err(x, toml_node_line(n), "%s %s: must be a non-empty string without NUL characters", x->where,
               k->key);
    return NULL;
}

static bool replace(char **slot, char *value) {
    free(*slot);
    *slot = value;
    return value != NULL;
}

/* The index of s among the '|'-separated words of values, or -1. */
static int word_index(const char *values, const char *s) {
    int i = 0;
    for (const char *w = values;; i++) {
        size_t len = strcspn(w, "|");
        if (len == strlen(s) && strncmp(w, s, len) == 0) return i;
        w += len;
        if (!*w++) return -1;
    }
}

/* values as "a, b, c" into out. */
static void word_list(const char *values, char *out, size_t cap) {
    size_t k = 0;
    for (const char *c = values; *c && k + 3 < cap; c++) {
        if (*c == '|')
            out[k++] = ',', out[k++] = ' ';
        else
            out[k++] = *c;
    }
    out[k] = '\0';
}

static bool enum_value(gw_cfg_ctx *x, const toml_node *n, const gw_cfg_key *k, void *obj, int *index) {
    const char *s = string_value(x, n, k);
    if (!s) return false;
    char err[SIPP_ERROR_SIZE];
    if (k->check) {
        if (k->kind == GW_CFG_ENUM) replace(field(obj, k), strdup(s)); /* the check reads it as given */
        if (k->check(obj, s, err)) return true;
        gw_cfg_err(x, toml_node_line(n), "%s: %s", x->where, err);
        return false;
    }
    *index = word_index(k->values, s);
    char words[ENUM_LIST_SIZE];
    if (*index < 0 && k->refusal) {
        gw_cfg_err(x, toml_node_line(n), "%s %s: '%s' %s", x->where, k->key, s, k->refusal);
    } else if (*index < 0) {
        word_list(k->values, words, sizeof words);
        gw_cfg_err(x, toml_node_line(n), "%s %s: '%s' is not one of %s", x->where, k->key, s, words);
    }
    if (k->kind == GW_CFG_ENUM) replace(field(obj, k), strdup(s)); /* kept: later checks name it */
    return *index >= 0;
}

static bool list_value(gw_cfg_ctx *x, const toml_node *n, const gw_cfg_key *k, void *obj) {
    if (!gw_cfg_expect(x, n, TOML_ARRAY, k->key, "an array of strings")) return false;
    size_t count = toml_array_len(n), kept = 0;
    char **v = calloc(count ? count : 1, sizeof *v);
    bool ok = v != NULL;
    for (size_t i = 0; v && i < count; i++) {
        const toml_node *e = toml_array_at(n, i);
        const char *s = NULL;
        size_t len = 0;
        if (toml_node_kind(e) == TOML_STRING && toml_get_string(e, &s, &len, NULL, 0) && len &&
            strlen(s) == len) {
            v[kept++] = strdup(s);
            continue;
        }
        gw_cfg_err(x, gw_cfg_line(n, e), "%s %s: element %zu must be a non-empty string", x->where, k->key,
                   i);
        ok = false;
    }
    size_t *n_out = (size_t *)((char *)obj + k->count_offset);
    gw_cfg_free_strv(*(char ***)field(obj, k), *n_out);
    *(char ***)field(obj, k) = v;
    *n_out = kept;
    return ok;
}

static bool table_value(gw_cfg_ctx *x, const toml_node *n, const gw_cfg_key *k, void *obj) {
    if (!gw_cfg_expect(x, n, TOML_TABLE, *x->where ? k->key : k->sub->name, "a table")) return false;
    const char *where = x->where;
    x->where = k->sub->name;
    gw_cfg_read_section(x, n, k->sub, obj);
    x->where = where;
    return true;
}

/* The numbers: stored in the field's own type. */
static bool number_value(gw_cfg_ctx *x, const toml_node *n, const gw_cfg_key *k, void *obj) {
    int64_t v = 0;
    if (k->kind == GW_CFG_FRACTION) return fraction(x, n, k, field(obj, k));
    if (!whole(x, n, k, &v)) return false;
    switch (k->kind) {
    case GW_CFG_INT: *(int *)field(obj, k) = (int)v; break;
    case GW_CFG_INT64: *(int64_t *)field(obj, k) = v; break;
    case GW_CFG_SIZE: *(size_t *)field(obj, k) = (size_t)v; break;
    case GW_CFG_MB: *(size_t *)field(obj, k) = (size_t)v << MB_SHIFT; break;
    case GW_CFG_SECONDS: *(double *)field(obj, k) = (double)v; break;
    default: break;
    }
    return true;
}

bool gw_cfg_read_key(gw_cfg_ctx *x, const toml_node *tbl, const gw_cfg_key *k, void *obj) {
    if (k->kind == GW_CFG_CUSTOM) {
        bool was_ok = x->ok;
        x->ok = true;
        k->read(x, tbl, k, obj);
        bool ok = x->ok;
        x->ok = was_ok && ok;
        return ok;
    }
    const toml_node *n = toml_table_get(tbl, k->key);
    const char *s;
    int index = 0;
    if (!n) return true;
    switch (k->kind) {
    case GW_CFG_STRING: return (s = string_value(x, n, k)) && replace(field(obj, k), strdup(s));
    case GW_CFG_PATH:
        return (s = string_value(x, n, k)) && replace(field(obj, k), gw_cfg_resolve_path(x->path, s));
    case GW_CFG_BOOL:
        return gw_cfg_expect(x, n, TOML_BOOL, k->key, "true or false") &&
               toml_get_bool(n, field(obj, k), NULL, 0);
    case GW_CFG_ENUM: return enum_value(x, n, k, obj, &index);
    case GW_CFG_CHOICE:
        if (!enum_value(x, n, k, obj, &index)) return false;
        *(int *)field(obj, k) = index;
        return true;
    case GW_CFG_LIST: return list_value(x, n, k, obj);
    case GW_CFG_TABLE: return table_value(x, n, k, obj);
    default: return number_value(x, n, k, obj);
    }
}

/* ---- keys ---------------------------------------------------------------------------------------- */

static const gw_cfg_key *find_row(const gw_cfg_section *s, const char *key, size_t len) {
    for (; s; s = s->also)
        for (size_t i = 0; i < s->n_keys; i++)
            if (strlen(s->keys[i].key) == len && memcmp(s->keys[i].key, key, len) == 0) return &s->keys[i];
    return NULL;
}

static size_t min3(size_t a, size_t b, size_t c) { return a < b ? (a < c ? a : c) : (b < c ? b : c); }

/* The edits that turn a into b (both shorter than SUGGEST_MAX_KEY): a letter inserted, deleted,
 * changed, or two neighbours swapped ("cuont" is one from "count"). */
static size_t distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    size_t rows[3][SUGGEST_MAX_KEY + 1], *two = rows[0], *one = rows[1], *cur = rows[2];
    for (size_t j = 0; j <= lb; j++)
        one[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            cur[j] = min3(one[j] + 1, cur[j - 1] + 1, one[j - 1] + (a[i - 1] != b[j - 1]));
            bool swapped = i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1];
            if (swapped && two[j - 2] + 1 < cur[j]) cur[j] = two[j - 2] + 1;
        }
        size_t *t = two;
        two = one, one = cur, cur = t;
    }
    return one[lb];
}

const char *gw_cfg_suggest(const gw_cfg_section *s, const char *key) {
    size_t len = strlen(key), best = len / SUGGEST_FRACTION;
    if (best < 1) best = 1;
    if (len >= SUGGEST_MAX_KEY) return NULL;
    const char *found = NULL;
    for (; s; s = s->also)
        for (size_t i = 0; i < s->n_keys; i++) {
            if (strlen(s->keys[i].key) >= SUGGEST_MAX_KEY) continue;
            size_t d = distance(key, s->keys[i].key);
            if (d <= best && (!found || d < best)) found = s->keys[i].key, best = d;
        }
    return found;
}

void gw_cfg_check_keys(gw_cfg_ctx *x, const toml_node *tbl, const gw_cfg_section *s) {
    for (size_t i = 0; i < toml_table_len(tbl); i++) {
        const toml_entry *e = toml_table_at(tbl, i);
        if (find_row(s, e->key, e->key_len)) continue;
        sipp_buf known = {0};
        for (const gw_cfg_section *p = s; p; p = p->also)
            for (size_t k = 0; k < p->n_keys; k++)
                sipp_buf_appendf(&known, "%s%s", known.len ? ", " : "", p->keys[k].key);
        const char *near = strlen(e->key) == e->key_len ? gw_cfg_suggest(s, e->key) : NULL;
        if (near)
            gw_cfg_err(x, e->line, "unknown key '%s' in %s (did you mean '%s'? known keys: %s)", e->key,
                       x->where, near, known.data ? known.data : "none");
        else
            gw_cfg_err(x, e->line, "unknown key '%s' in %s (known keys: %s)", e->key, x->where,
                       known.data ? known.data : "none");
        sipp_buf_free(&known);
    }
}

void gw_cfg_read_section(gw_cfg_ctx *x, const toml_node *tbl, const gw_cfg_section *s, void *obj) {
    gw_cfg_check_keys(x, tbl, s);
    for (size_t i = 0; i < s->n_keys; i++)
        gw_cfg_read_key(x, tbl, &s->keys[i], obj);
    if (s->check) s->check(x, tbl, obj);
}

/* ---- the reference ------------------------------------------------------------------------------- */

/* The value column: what the key takes. */
static void value_doc(const gw_cfg_key *k, sipp_buf *out) {
    char words[ENUM_LIST_SIZE];
    if (k->value_doc) {
        sipp_buf_appendf(out, "%s", k->value_doc);
        return;
    }
    switch (k->kind) {
    case GW_CFG_STRING: sipp_buf_appendf(out, "string"); break;
    case GW_CFG_PATH: sipp_buf_appendf(out, "path (relative to the file)"); break;
    case GW_CFG_INT:
    case GW_CFG_INT64:
    case GW_CFG_SIZE: sipp_buf_appendf(out, "integer, %.0f to %.0f", k->lo, k->hi); break;
    case GW_CFG_MB: sipp_buf_appendf(out, "MiB, %.0f to %.0f", k->lo, k->hi); break;
    case GW_CFG_SECONDS: sipp_buf_appendf(out, "seconds, %.0f to %.0f", k->lo, k->hi); break;
    case GW_CFG_FRACTION: sipp_buf_appendf(out, "number in [%g, %g)", k->lo, k->hi); break;
    case GW_CFG_BOOL: sipp_buf_appendf(out, "true or false"); break;
    case GW_CFG_ENUM:
    case GW_CFG_CHOICE:
        word_list(k->values, words, sizeof words);
        sipp_buf_appendf(out, "one of %s", words);
        break;
    case GW_CFG_LIST: sipp_buf_appendf(out, "array of strings"); break;
    case GW_CFG_TABLE: sipp_buf_appendf(out, "table: %s", k->sub->name); break;
    case GW_CFG_CUSTOM: break;
    }
}

/* The word of values at index, into out. */
static void word_at(const char *values, int index, char *out, size_t cap) {
    const char *w = values;
    for (int i = 0; i < index && strchr(w, '|'); i++)
        w = strchr(w, '|') + 1;
    snprintf(out, cap, "%.*s", (int)strcspn(w, "|"), w);
}

/* The default column: the row's own words, else the value obj (a section's defaults) holds. */
static void default_doc(const gw_cfg_key *k, const void *obj, sipp_buf *out) {
    const char *f = (const char *)obj + k->offset;
    char word[ENUM_LIST_SIZE];
    if (k->default_doc) {
        sipp_buf_appendf(out, "%s", k->default_doc);
        return;
    }
    switch (k->kind) {
    case GW_CFG_INT: sipp_buf_appendf(out, "`%d`", *(const int *)f); break;
    case GW_CFG_INT64: sipp_buf_appendf(out, "`%lld`", (long long)*(const int64_t *)f); break;
    case GW_CFG_SIZE: sipp_buf_appendf(out, "`%zu`", *(const size_t *)f); break;
    case GW_CFG_MB: sipp_buf_appendf(out, "`%zu`", *(const size_t *)f >> MB_SHIFT); break;
    case GW_CFG_SECONDS: sipp_buf_appendf(out, "`%.0f`", *(const double *)f); break;
    case GW_CFG_FRACTION: sipp_buf_appendf(out, "`%g`", (double)*(const float *)f); break;
    case GW_CFG_BOOL: sipp_buf_appendf(out, "`%s`", *(const bool *)f ? "true" : "false"); break;
    case GW_CFG_CHOICE:
        word_at(k->values, *(const int *)f, word, sizeof word);
        sipp_buf_appendf(out, "`\"%s\"`", word);
        break;
    case GW_CFG_STRING:
    case GW_CFG_PATH:
    case GW_CFG_ENUM:
        if (*(char *const *)f)
            sipp_buf_appendf(out, "`\"%s\"`", *(char *const *)f);
        else
            sipp_buf_appendf(out, "none");
        break;
    case GW_CFG_LIST: sipp_buf_appendf(out, "none"); break;
    default: break;
    }
}

static void section_doc(const gw_cfg_section *s, sipp_buf *out) {
    void *obj = calloc(1, s->obj_size ? s->obj_size : 1);
    if (obj && s->init) s->init(obj);
    sipp_buf_appendf(out, "#### `%s`\n\n", s->name);
    if (s->help) sipp_buf_appendf(out, "%s\n\n", s->help);
    sipp_buf_appendf(out, "| key | value | default | meaning |\n|---|---|---|---|\n");
    for (size_t i = 0; obj && i < s->n_keys; i++) {
        const gw_cfg_key *k = &s->keys[i];
        sipp_buf_appendf(out, "| `%s` | ", k->key);
        value_doc(k, out);
        sipp_buf_appendf(out, " | ");
        default_doc(k, obj, out);
        sipp_buf_appendf(out, " | %s |\n", k->help ? k->help : "");
    }
    sipp_buf_appendf(out, "\n");
    if (obj && s->fini) s->fini(obj);
    free(obj);
}

bool gw_cfg_markdown(const gw_cfg_section *const *sections, sipp_buf *out) {
    for (const gw_cfg_section *const *s = sections; *s; s++)
        section_doc(*s, out);
    return sipp_buf_append(out, "", 0);
}
