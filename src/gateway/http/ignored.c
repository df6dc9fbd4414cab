/*
 * ignored.c: the sipp-ignored response header: what the server accepted without acting on it (a
 * field, "include[0]", "tools[4]"), each name once, bounded; connection.c sends it with the reply.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "gateway/http/http.h"

#define NAME_SIZE 128

void gw_ignored_add(gw_call *call, const char *name) {
    size_t n = strlen(name), have = strlen(call->ignored);
    /* Once: a name is already there when it is delimited by ", " or the ends. */
    for (const char *p = call->ignored; (p = strstr(p, name)) != NULL; p += n) {
        bool starts = p == call->ignored || (p >= call->ignored + 2 && p[-2] == ',' && p[-1] == ' ');
        if (starts && (p[n] == '\0' || p[n] == ',')) return;
    }
    /* The header is bounded; a name that does not fit is left out of it whole, never cut. */
    if (have + (have ? 2 : 0) + n + 1 > sizeof call->ignored) return;
    if (have) memcpy(call->ignored + have, ", ", 2), have += 2;
    memcpy(call->ignored + have, name, n + 1);
}

void gw_ignored_addf(gw_call *call, const char *fmt, ...) {
    char name[NAME_SIZE];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    gw_ignored_add(call, name);
}
