/*
 * common.c: argument parsing and error printing shared by the subcommands.
 */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

void cli_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("sipp: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

bool cli_wants_help(int argc, char **argv) {
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return true;
    return false;
}

bool cli_flag(cli_args *a, const char *name) {
    if (a->i < a->argc && strcmp(a->argv[a->i], name) == 0) {
        a->i++;
        return true;
    }
    return false;
}

bool cli_flag_value(cli_args *a, const char *name) {
    if (a->i >= a->argc) return false;
    const char *arg = a->argv[a->i];
    size_t n = strlen(name);
    if (strncmp(arg, name, n) != 0) return false;
    if (arg[n] == '=') {
        a->value = arg + n + 1;
        a->i++;
        return true;
    }
    if (arg[n] != '\0') return false;
    if (a->i + 1 >= a->argc) {
        cli_error("%s needs a value", name);
        a->bad = true;
        a->i++;
        a->value = NULL;
        return true;
    }
    a->value = a->argv[a->i + 1];
    a->i += 2;
    return true;
}

bool cli_int(cli_args *a, const char *flag, long lo, long hi, int *out) {
    if (!a->value) return false;
    char *end;
    errno = 0;
    long v = strtol(a->value, &end, 10);
    if (errno || end == a->value || *end || v < lo || v > hi) {
        cli_error("%s '%s' is not a whole number in [%ld, %ld]", flag, a->value, lo, hi);
        a->bad = true;
        return false;
    }
    *out = (int)v;
    return true;
}

bool cli_flash_attn(cli_args *a, const char **out) {
    if (!a->value) return false;
    char err[SIPP_ERROR_SIZE];
    if (sipp_flash_attn_check(a->value, err) != SIPP_OK) {
        cli_error("--flash-attn: %s", err);
        a->bad = true;
        return false;
    }
    *out = a->value;
    return true;
}

bool cli_cache_type(cli_args *a, const char *flag, const char **out) {
    if (!a->value) return false;
    char err[SIPP_ERROR_SIZE];
    if (sipp_kv_cache_check(NULL, a->value, NULL, err) != SIPP_OK) {
        cli_error("%s '%s' is not one of f16, q8_0, q4_0", flag, a->value);
        a->bad = true;
        return false;
    }
    *out = a->value;
    return true;
}

bool cli_cache_types_fit(const char *backend, const char *flash_attn, const char *type_k,
                         const char *type_v) {
    sipp_model_params mp = sipp_model_default_params();
    mp.backend = backend;
    mp.flash_attn = flash_attn;
    char err[SIPP_ERROR_SIZE];
    if (sipp_kv_cache_check(&mp, type_k, type_v, err) == SIPP_OK) return true;
    cli_error("%s", err);
    return false;
}

bool cli_draft_model(const char *model, const char *flag, const char **out, char *buf, size_t cap) {
    *out = flag && strcmp(flag, "auto") != 0 ? flag : NULL;
    if (*out) return true;
    char path[PATH_MAX], err[SIPP_ERROR_SIZE];
    if (sipp_store_resolve(model, path, sizeof path, err) != SIPP_OK) return true; /* the load says why */
    sipp_draft_sidecar sc;
    bool found = sipp_store_find_draft(path, strcmp(path, model) != 0 ? model : NULL, &sc, err) == SIPP_OK;
    if (flag) { /* auto */
        if (!found || !*sc.path) {
            if (found)
                cli_error("--draft auto: the catalog names '%s' as the draft of '%s', but it is not pulled; "
                          "sipp pull %s",
                          sc.catalog, model, sc.catalog);
            else
                cli_error("--draft auto: %s; give --draft PATH", err);
            return false;
        }
        fprintf(stderr, "sipp: note: --draft auto uses '%s' (for development; give the path in production)\n",
                sc.path);
        snprintf(buf, cap, "%s", sc.path);
        *out = buf;
    } else if (found && *sc.path) {
        fprintf(stderr,
                "sipp: note: a draft model is published beside this one: --draft %s speculates with it\n",
                sc.path);
    } else if (found) {
        fprintf(stderr,
                "sipp: note: the catalog names '%s' as this model's draft: sipp pull %s, then --draft %s\n",
                sc.catalog, sc.catalog, sc.catalog);
    }
    return true;
}

void cli_stats_speculation(json_t *stats, const sipp_request_stats *s) {
    json_object_set_new(stats, "draft_tokens", json_integer(s->draft_tokens));
    json_object_set_new(stats, "accepted_tokens", json_integer(s->accepted_tokens));
    json_object_set_new(stats, "draft_steps", json_integer(s->draft_steps));
    json_object_set_new(stats, "cutoff_steps", json_integer(s->cutoff_steps));
    json_object_set_new(stats, "speculation", json_string(*s->speculation ? s->speculation : "none"));
    json_object_set_new(stats, "acceptance_rate",
                        s->draft_tokens ? json_real((double)s->accepted_tokens / s->draft_tokens)
                                        : json_null());
}

bool cli_uint32(cli_args *a, const char *flag, uint32_t *out) {
    if (!a->value) return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(a->value, &end, 10);
    if (errno || end == a->value || *end || a->value[0] == '-' || v > UINT32_MAX) {
        cli_error("%s '%s' is not a whole number in [0, %u]", flag, a->value, UINT32_MAX);
        a->bad = true;
        return false;
    }
    *out = (uint32_t)v;
    return true;
}

/* a->value as a number in [lo, hi], or [lo, hi) when below. */
static bool parse_float(cli_args *a, const char *flag, double lo, double hi, bool below, float *out) {
    if (!a->value) return false;
    char *end;
    errno = 0;
    double v = strtod(a->value, &end);
    if (errno || end == a->value || *end || !isfinite(v) || v < lo || v > hi || (below && v >= hi)) {
        cli_error("%s '%s' is not a number in [%g, %g%c", flag, a->value, lo, hi, below ? ')' : ']');
        a->bad = true;
        return false;
    }
    *out = (float)v;
    return true;
}

bool cli_float(cli_args *a, const char *flag, double lo, double hi, float *out) {
    return parse_float(a, flag, lo, hi, false, out);
}

bool cli_float_below(cli_args *a, const char *flag, double lo, double hi, float *out) {
    return parse_float(a, flag, lo, hi, true, out);
}

bool cli_interactive_output(void) { return isatty(STDOUT_FILENO) && isatty(STDERR_FILENO); }

bool cli_runtime_init(const char *artifact) {
    sipp_runtime_params rp = sipp_runtime_default_params();
    rp.artifact_dir = artifact;
    const char *lvl = getenv("SIPP_LOG");
    if (lvl) {
        static const char *const names[] = {"quiet", "error", "warn", "info", "debug"};
        for (int i = 0; i < 5; i++)
            if (strcmp(lvl, names[i]) == 0) rp.log_level = (sipp_log_level)i;
    }
    char err[SIPP_ERROR_SIZE];
    if (sipp_runtime_init(&rp, err) != SIPP_OK) {
        cli_error("%s", err);
        return false;
    }
    return true;
}
