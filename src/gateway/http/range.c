/*
 * range.c: parsing a Range header for one file (see http_range.h).
 *
 * Only one range is served. A multipart/byteranges reply is what several ranges would need, and no
 * client of a model file asks for one (browsers and download tools ask for one range to resume);
 * RFC 9110 lets a server refuse such a request rather than guess, so it is a 416 that says so.
 * Numbers are read digit by digit with an overflow check: "bytes=99999999999999999999-" is
 * invalid, not wrapped around to a small offset. The optional whitespace the grammar allows around
 * the range (OWS) is accepted.
 */
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>

#include "gateway/http/http.h"

#define RANGE_UNIT "bytes"

static const char *skip_ows(const char *s) {
    while (*s == ' ' || *s == '\t')
        s++;
    return s;
}

/* Reads a non-empty run of digits into *out; NULL when there is none or it overflows. */
static const char *read_number(const char *s, uint64_t *out) {
    uint64_t v = 0;
    const char *start = s;
    for (; *s >= '0' && *s <= '9'; s++) {
        uint64_t d = (uint64_t)(*s - '0');
        if (v > (UINT64_MAX - d) / 10) return NULL;
        v = v * 10 + d;
    }
    if (s == start) return NULL;
    *out = v;
    return s;
}

gw_range_result gw_range_parse(const char *value, uint64_t size, uint64_t *first, uint64_t *len) {
    const char *s = skip_ows(value);
    size_t unit = strlen(RANGE_UNIT);
    const char *eq = strchr(s, '=');
    if (!eq) return GW_RANGE_INVALID;
    if ((size_t)(eq - s) != unit || strncasecmp(s, RANGE_UNIT, unit) != 0) return GW_RANGE_IGNORE;
    s = skip_ows(eq + 1);
    uint64_t a = 0, b = 0;
    bool suffix = *s == '-';
    bool open_ended = false;
    if (suffix) {
        if (!(s = read_number(s + 1, &b))) return GW_RANGE_INVALID;
    } else {
        if (!(s = read_number(s, &a)) || *s != '-') return GW_RANGE_INVALID;
        s++;
        open_ended = !(*s >= '0' && *s <= '9');
        if (!open_ended && !(s = read_number(s, &b))) return GW_RANGE_INVALID;
        if (!open_ended && b < a) return GW_RANGE_INVALID;
    }
    s = skip_ows(s);
    if (*s == ',') return GW_RANGE_MULTIPLE;
    if (*s) return GW_RANGE_INVALID;
    if (suffix) {
        if (b == 0 || size == 0) return GW_RANGE_UNSATISFIABLE;
        *len = b < size ? b : size;
        *first = size - *len;
        return GW_RANGE_OK;
    }
    if (a >= size) return GW_RANGE_UNSATISFIABLE;
    uint64_t last = open_ended || b >= size ? size - 1 : b;
    *first = a;
    *len = last - a + 1;
    return GW_RANGE_OK;
}

const char *gw_range_problem(gw_range_result r) {
    switch (r) {
    case GW_RANGE_INVALID: return "is not a byte range (use bytes=FIRST-LAST, bytes=FIRST- or bytes=-SUFFIX)";
    case GW_RANGE_MULTIPLE: return "asks for several ranges; this route serves one range per request";
    case GW_RANGE_UNSATISFIABLE: return "starts at or past the end of the file";
    default: return "";
    }
}
