/*
 * ollama_duration.c: Go's time.ParseDuration, which is how Ollama reads a keep_alive string.
 *
 * A duration is an optional sign and one or more decimal numbers (with an optional fraction), each
 * with a unit: "5m", "1h30m", "1.5h", "300ms", "-1m". "0" alone needs no unit. The value is summed in
 * seconds as a double; anything over Go's limit (int64 nanoseconds, about 292 years) is refused as
 * Go refuses it, so a client's typo is an error rather than "forever".
 */
#include <math.h>
#include <string.h>

#include "gateway/api/api.h"

static const struct {
    const char *name;
    double seconds;
} units[] = {{"ns", 1e-9}, {"us", 1e-6}, {"\xc2\xb5s", 1e-6}, {"\xce\xbcs", 1e-6},
             {"ms", 1e-3}, {"s", 1},     {"m", 60},           {"h", 3600}};

/* The unit at *p (the longest name that matches), advancing past it; 0 when none does. */
static double unit_at(const char **p) {
    size_t best = 0;
    double value = 0;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        size_t n = strlen(units[i].name);
        if (n > best && strncmp(*p, units[i].name, n) == 0) {
            best = n;
            value = units[i].seconds;
        }
    }
    *p += best;
    return value;
}

bool gw_parse_go_duration(const char *s, double *seconds) {
    const char *p = s;
    bool negative = *p == '-';
    if (*p == '-' || *p == '+') p++;
    if (strcmp(p, "0") == 0) {
        *seconds = 0;
        return true;
    }
    if (!*p) return false;
    double total = 0;
    while (*p) {
        double whole = 0, frac = 0, scale = 1;
        bool digits = false;
        for (; *p >= '0' && *p <= '9'; p++, digits = true)
            whole = whole * 10 + (*p - '0');
        if (*p == '.') {
            for (p++; *p >= '0' && *p <= '9'; p++, digits = true) {
                scale /= 10;
                frac += (*p - '0') * scale;
            }
        }
        if (!digits) return false;
        double unit = unit_at(&p);
        if (unit == 0) return false;
        total += (whole + frac) * unit;
        if (!(total <= GW_DURATION_MAX_S)) return false;
    }
    *seconds = negative ? -total : total;
    return true;
}
