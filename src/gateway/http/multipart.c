/*
 * multipart.c: multipart/form-data bodies (RFC 7578 over RFC 2046's multipart syntax).
 *
 * The body is already whole in memory and bounded by max_request_bytes (connection.c), so this is
 * a single pass over it that copies nothing but names: each part's bytes point into the body. The
 * syntax read:
 *
 *   preamble  "--" boundary  padding CRLF  headers CRLF  bytes
 *             CRLF "--" boundary  padding CRLF  headers CRLF  bytes ...
 *             CRLF "--" boundary "--"  epilogue
 *
 * where padding is spaces and tabs. Lines end in CRLF, as RFC 2046 says and every client writes;
 * a bare LF is not a line end here. A part's headers are Content-Disposition (form-data, with its
 * name and, for a file, its filename; parameter values bare tokens or quoted strings with
 * backslash escapes) and optionally Content-Type; Content-Transfer-Encoding other than 7bit, 8bit
 * or binary (RFC 7578 deprecates it, and no client sends it) is refused rather than misread, and
 * any other header is skipped. Everything wrong is a message naming the problem and, where there
 * is one, the part: an opening boundary that is not there, a part that is not closed (a truncated
 * body), a body that ends without the closing boundary, a header line or a name over its bound,
 * more than GW_FORM_MAX_PARTS parts.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "gateway/http/http.h"
#include "util/util.h"

#define FORM_TYPE "multipart/form-data"
#define DISPOSITION_FORM "form-data"
#define CRLF "\r\n"
#define CRLF_LEN 2
#define DASHES "--"
#define DASHES_LEN 2
#define ECHO_MAX 40          /* bytes of a bad header echoed in its message */
#define HEADER_LINE_MAX 1024 /* one header line of a part, without its CRLF */
#define PART_LABEL_SIZE (GW_FORM_NAME_SIZE + 16)
#define ASCII_SPACE 0x20
#define ASCII_DEL 0x7f

typedef struct span {
    const char *p, *end;
} span;

static bool fail(char *err, size_t errlen, const char *fmt, ...) SIPP_PRINTF(3, 4);

static bool fail(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return false;
}

static bool is_space(char c) { return c == ' ' || c == '\t'; }

static void skip_space(span *s) {
    while (s->p < s->end && is_space(*s->p))
        s->p++;
}

/* A token character (RFC 9110): what a bare parameter value or name may hold. */
static bool is_tchar(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

typedef enum { PARAM_OK, PARAM_END, PARAM_BAD, PARAM_LONG } param_result;

/* Copies a bare token or a quoted string (escapes undone) at s into val (cap bytes with its NUL). */
static param_result read_value(span *s, char *val, size_t cap) {
    size_t n = 0;
    if (s->p < s->end && *s->p == '"') {
        for (s->p++;; s->p++) {
            if (s->p >= s->end) return PARAM_BAD; /* no closing quote */
            char c = *s->p;
            if (c == '"') break;
            if (c == '\\' && s->p + 1 < s->end) c = *++s->p;
            if ((unsigned char)c < ASCII_SPACE && c != '\t') return PARAM_BAD;
            if (n + 1 >= cap) return PARAM_LONG;
            val[n++] = c;
        }
        s->p++;
    } else {
        for (; s->p < s->end && is_tchar(*s->p); s->p++) {
            if (n + 1 >= cap) return PARAM_LONG;
            val[n++] = *s->p;
        }
        if (n == 0) return PARAM_BAD;
    }
    val[n] = '\0';
    return PARAM_OK;
}

/* The next parameter "; key=value" at s. PARAM_END when none is left. */
static param_result next_param(span *s, char *key, size_t key_cap, char *val, size_t val_cap) {
    skip_space(s);
    if (s->p >= s->end) return PARAM_END;
    if (*s->p != ';') return PARAM_BAD;
    s->p++;
    skip_space(s);
    if (s->p >= s->end) return PARAM_END; /* a trailing ';' */
    size_t n = 0;
    for (; s->p < s->end && is_tchar(*s->p); s->p++) {
        if (n + 1 >= key_cap) return PARAM_LONG;
        key[n++] = *s->p;
    }
    key[n] = '\0';
    skip_space(s);
    if (n == 0 || s->p >= s->end || *s->p != '=') return PARAM_BAD;
    s->p++;
    skip_space(s);
    param_result r = read_value(s, val, val_cap);
    skip_space(s);
    return r;
}

/* Whether s starts with the word w (case-insensitive) ending at a ';', a space or its end; moves
 * past it when it does. */
static bool take_word(span *s, const char *w) {
    size_t n = strlen(w);
    if ((size_t)(s->end - s->p) < n || strncasecmp(s->p, w, n) != 0) return false;
    const char *after = s->p + n;
    if (after < s->end && *after != ';' && !is_space(*after)) return false;
    s->p = after;
    return true;
}

static bool boundary_ok(const char *b) {
    size_t n = strlen(b);
    if (n == 0 || b[n - 1] == ' ') return false;
    for (; *b; b++)
        if ((unsigned char)*b < ASCII_SPACE || (unsigned char)*b >= ASCII_DEL) return false;
    return true;
}

bool gw_multipart_boundary(const char *content_type, char out[GW_FORM_BOUNDARY_SIZE], bool *not_form,
                           char *err, size_t errlen) {
    *not_form = false;
    const char *type = content_type ? content_type : "";
    span s = {type, type + strlen(type)};
    skip_space(&s);
    if (!take_word(&s, FORM_TYPE)) {
        *not_form = true;
        return fail(err, errlen, "the body's Content-Type is '%s'; send the form as multipart/form-data",
                    content_type ? content_type : "(none)");
    }
    char key[GW_FORM_NAME_SIZE], val[GW_FORM_BOUNDARY_SIZE + 1];
    bool found = false;
    for (;;) {
        param_result r = next_param(&s, key, sizeof key, val, sizeof val);
        if (r == PARAM_END) break;
        bool is_boundary = r != PARAM_BAD && strcasecmp(key, "boundary") == 0;
        if (r == PARAM_LONG || (is_boundary && strlen(val) >= GW_FORM_BOUNDARY_SIZE))
            return fail(err, errlen, "the Content-Type's boundary is over %d characters (RFC 2046)",
                        GW_FORM_BOUNDARY_SIZE - 1);
        if (r == PARAM_BAD)
            return fail(err, errlen,
                        "the Content-Type '%s' has a malformed parameter; write it as "
                        "multipart/form-data; boundary=VALUE",
                        content_type);
        if (is_boundary) {
            if (!boundary_ok(val))
                return fail(err, errlen,
                            "the Content-Type's boundary \"%s\" is not a valid boundary (1 to 70 printable "
                            "characters, not ending in a space)",
                            val);
            memcpy(out, val, strlen(val) + 1);
            found = true;
        }
    }
    if (!found)
        return fail(err, errlen,
                    "the Content-Type multipart/form-data has no boundary parameter; send "
                    "multipart/form-data; boundary=VALUE, the boundary the body's parts are separated by");
    return true;
}

/* How a part is named in messages: "part 2" before its name is known, then "part 'file'". */
static void label(const gw_form_part *part, size_t index, char out[PART_LABEL_SIZE]) {
    if (part->name[0])
        snprintf(out, PART_LABEL_SIZE, "part '%s'", part->name);
    else
        snprintf(out, PART_LABEL_SIZE, "part %zu", index + 1);
}

/* Content-Disposition: form-data; name="..."; filename="..." into part. */
static bool disposition(gw_form_part *part, size_t index, span v, bool *named, char *err, size_t errlen) {
    char where[PART_LABEL_SIZE];
    label(part, index, where);
    skip_space(&v);
    if (!take_word(&v, DISPOSITION_FORM))
        return fail(err, errlen, "%s has a Content-Disposition that is not form-data; name=\"...\"", where);
    char key[GW_FORM_NAME_SIZE], val[GW_FORM_NAME_SIZE];
    for (;;) {
        param_result r = next_param(&v, key, sizeof key, val, sizeof val);
        if (r == PARAM_END) break;
        if (r == PARAM_LONG)
            return fail(err, errlen, "%s has a Content-Disposition parameter over %d bytes", where,
                        GW_FORM_NAME_SIZE - 1);
        if (r == PARAM_BAD) return fail(err, errlen, "%s has a malformed Content-Disposition", where);
        if (strcasecmp(key, "name") == 0) {
            memcpy(part->name, val, strlen(val) + 1);
            *named = true;
        } else if (strcasecmp(key, "filename") == 0) {
            memcpy(part->filename, val, strlen(val) + 1);
            part->has_filename = true;
        } /* filename* and others: nothing here depends on them */
    }
    return true;
}

/* One header line of a part (without its CRLF). */
static bool header(gw_form_part *part, size_t index, span line, bool *named, char *err, size_t errlen) {
    char where[PART_LABEL_SIZE];
    label(part, index, where);
    const char *colon = memchr(line.p, ':', (size_t)(line.end - line.p));
    size_t shown = (size_t)(line.end - line.p) < ECHO_MAX ? (size_t)(line.end - line.p) : ECHO_MAX;
    for (const char *c = line.p; c < line.end; c++)
        if (((unsigned char)*c < ASCII_SPACE && *c != '\t') || (unsigned char)*c == ASCII_DEL)
            return fail(err, errlen, "%s has a control character (0x%02x) in a header line", where,
                        (unsigned char)*c);
    if (!colon || colon == line.p)
        return fail(err, errlen, "%s has a header line without a name and ':' (%.*s)", where, (int)shown,
                    line.p);
    span name = {line.p, colon}, value = {colon + 1, line.end};
    skip_space(&value);
    while (value.end > value.p && is_space(value.end[-1]))
        value.end--;
    size_t name_len = (size_t)(name.end - name.p), value_len = (size_t)(value.end - value.p);
    if (name_len == strlen("Content-Disposition") &&
        strncasecmp(name.p, "Content-Disposition", name_len) == 0)
        return disposition(part, index, value, named, err, errlen);
    if (name_len == strlen("Content-Type") && strncasecmp(name.p, "Content-Type", name_len) == 0) {
        if (value_len >= sizeof part->content_type)
            return fail(err, errlen, "%s has a Content-Type over %zu bytes", where,
                        sizeof part->content_type - 1);
        memcpy(part->content_type, value.p, value_len);
        part->content_type[value_len] = '\0';
        return true;
    }
    if (name_len == strlen("Content-Transfer-Encoding") &&
        strncasecmp(name.p, "Content-Transfer-Encoding", name_len) == 0) {
        static const char *const plain[] = {"7bit", "8bit", "binary"};
        for (size_t k = 0; k < sizeof plain / sizeof plain[0]; k++)
            if (value_len == strlen(plain[k]) && strncasecmp(value.p, plain[k], value_len) == 0) return true;
        return fail(err, errlen,
                    "%s has Content-Transfer-Encoding '%.*s'; send the part's bytes as they are (binary)",
                    where, (int)(value_len < ECHO_MAX ? value_len : ECHO_MAX), value.p);
    }
    return true;
}

/* The headers of a part at *p up to and past their blank line. */
static bool headers(const char *end, const char **p, gw_form_part *part, size_t index, char *err,
                    size_t errlen) {
    bool named = false;
    char where[PART_LABEL_SIZE];
    for (;;) {
        const char *eol = memmem(*p, (size_t)(end - *p), CRLF, CRLF_LEN);
        if (!eol) {
            label(part, index, where);
            return fail(err, errlen,
                        "%s's headers end without the blank line before its bytes: the body is cut short",
                        where);
        }
        span line = {*p, eol};
        *p = eol + CRLF_LEN;
        if (line.p == line.end) break;
        if ((size_t)(line.end - line.p) > HEADER_LINE_MAX) {
            label(part, index, where);
            return fail(err, errlen, "%s has a header line over %d bytes", where, HEADER_LINE_MAX);
        }
        if (!header(part, index, line, &named, err, errlen)) return false;
    }
    if (!named) {
        label(part, index, where);
        return fail(err, errlen, "%s has no Content-Disposition: form-data; name=\"...\" header", where);
    }
    return true;
}

bool gw_multipart_parse(const char *body, size_t len, const char *boundary, gw_form *out, char *err,
                        size_t errlen) {
    memset(out, 0, sizeof *out);
    /* delim is CRLF "--" boundary; the first one may stand at the very start, without its CRLF */
    char delim[CRLF_LEN + DASHES_LEN + GW_FORM_BOUNDARY_SIZE];
    int dn = snprintf(delim, sizeof delim, CRLF DASHES "%s", boundary);
    if (dn <= CRLF_LEN + DASHES_LEN || (size_t)dn >= sizeof delim)
        return fail(err, errlen, "the boundary is empty or over %d characters", GW_FORM_BOUNDARY_SIZE - 1);
    size_t dlen = (size_t)dn;
    const char *end = body + len, *p;
    if (len >= dlen - CRLF_LEN && memcmp(body, delim + CRLF_LEN, dlen - CRLF_LEN) == 0)
        p = body + dlen - CRLF_LEN;
    else if ((p = memmem(body, len, delim, dlen)) != NULL)
        p += dlen;
    else
        return fail(err, errlen,
                    "the body has no boundary line '--%s' (the boundary of its Content-Type): it is not "
                    "the form that header announces",
                    boundary);
    for (;;) { /* p is just past a boundary */
        if (end - p >= DASHES_LEN && memcmp(p, DASHES, DASHES_LEN) == 0) return true; /* the closing one */
        while (p < end && is_space(*p))
            p++;
        if (p >= end)
            return fail(err, errlen,
                        "the body ends after a boundary line, without the closing boundary '--%s--': "
                        "the body is cut short",
                        boundary);
        if (end - p < CRLF_LEN || memcmp(p, CRLF, CRLF_LEN) != 0)
            return fail(err, errlen,
                        "a boundary line '--%s' is followed by something other than CRLF or '--' (lines of "
                        "a multipart body end in CRLF)",
                        boundary);
        p += CRLF_LEN;
        if (out->n == GW_FORM_MAX_PARTS)
            return fail(err, errlen, "the form has more than %d parts", GW_FORM_MAX_PARTS);
        gw_form_part *part = &out->parts[out->n];
        if (!headers(end, &p, part, out->n, err, errlen)) return false;
        const char *next = memmem(p, (size_t)(end - p), delim, dlen);
        if (!next)
            return fail(err, errlen,
                        "part '%s' is not closed: the body ends without a boundary line '--%s' after it "
                        "(the closing one is '--%s--'); the body is cut short",
                        part->name, boundary, boundary);
        part->data = p;
        part->len = (size_t)(next - p);
        out->n++;
        p = next + dlen;
    }
}

const gw_form_part *gw_form_get(const gw_form *form, const char *name) {
    for (size_t i = 0; i < form->n; i++)
        if (strcmp(form->parts[i].name, name) == 0) return &form->parts[i];
    return NULL;
}
