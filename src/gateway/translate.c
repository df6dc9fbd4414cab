/*
 * translate.c: what the Responses, Messages and Ollama routes share.
 *
 * Each of those APIs is a translation layer over the chat-completions route, not a second request
 * parser: a route rebuilds its request as a chat-completions body (a JSON tree), and that body goes
 * through gw_decode(GW_API_CHAT) like any request to /v1/chat/completions. So every field the chat
 * layer supports is supported in every API, and every refusal comes from one place. A refusal
 * names the field in chat-completions terms ('max_tokens'); the route gives a table of renames so
 * that the client reads its own API's name ('max_output_tokens', 'options.num_predict').
 *
 * What a route renders is its own (a gw_format plus state in gw_gen.route); the generation itself
 * (admission, the engine, streaming, cancelling on disconnect) is generate.c's, the same as for
 * chat completions.
 *
 * Remote targets: these routes refuse them with a 501 naming the target for now; a remote target
 * is reachable through /v1/chat/completions, which forwards the body as it came.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway/gateway.h"
#include "gateway/translate.h"

#define GW_QUOTE '\''
#define GW_INDEX_DIGITS 24

/* True when c may follow a field name inside a quoted path: the closing quote, a member, an index. */
static bool ends_name(char c) { return c == GW_QUOTE || c == '.' || c == '['; }

/* Matches pattern (where '*' stands for a run of digits) at the start of s. On a match returns the
 * length of s it covers and copies the digits '*' stood for to digits. */
static size_t match(const char *pattern, const char *s, char *digits, size_t cap) {
    size_t n = 0;
    digits[0] = 0;
    for (const char *q = pattern; *q; q++) {
        if (*q != GW_RENAME_INDEX) {
            if (s[n] != *q) return 0;
            n++;
            continue;
        }
        size_t start = n;
        while (s[n] >= '0' && s[n] <= '9')
            n++;
        if (n == start || n - start >= cap) return 0;
        memcpy(digits, s + start, n - start);
        digits[n - start] = 0;
    }
    return ends_name(s[n]) ? n : 0;
}

void gw_rename_fields(char *msg, size_t cap, const gw_rename *renames) {
    if (!renames) return;
    sipp_buf out = {0};
    const char *p = msg;
    char digits[GW_INDEX_DIGITS];
    while (*p) {
        size_t used = 0;
        const gw_rename *r = renames;
        if (*p == GW_QUOTE)
            for (; r->chat && !used; r++)
                used = match(r->chat, p + 1, digits, sizeof digits);
        if (!used) {
            sipp_buf_append(&out, p++, 1);
            continue;
        }
        sipp_buf_append(&out, p, 1);
        for (const char *q = r[-1].api; *q; q++) {
            if (*q == GW_RENAME_INDEX)
                sipp_buf_append(&out, digits, strlen(digits));
            else
                sipp_buf_append(&out, q, 1);
        }
        p += 1 + used;
    }
    if (out.data) sipp_strlcpy(msg, out.data, cap);
    sipp_buf_free(&out);
}

bool gw_decode_tree(gw_call *call, gw_api api, json_t *chat, const gw_rename *renames, gw_gen *g) {
    char *body = json_dumps(chat, JSON_COMPACT);
    json_decref(chat);
    if (!body) {
        gw_reply_error(call, GW_E_INTERNAL, "out of memory");
        return false;
    }
    gw_error_kind kind;
    char err[SIPP_ERROR_SIZE];
    bool ok = gw_decode(api, body, strlen(body), g, &kind, err, sizeof err);
    free(body);
    if (!ok) {
        gw_rename_fields(err, sizeof err, renames);
        gw_reply_error(call, kind, "%s", err);
    }
    return ok;
}

gw_target *gw_translated_target(gw_call *call, const char *name, const char *api_name) {
    gw_target *t = gw_call_target(call, name);
    if (t && t->cfg->type == GW_TARGET_REMOTE) {
        gw_reply_error(call, GW_E_NOT_IMPLEMENTED,
                       "model '%s' is a remote (openai_compatible) target, which %s does not reach yet; "
                       "use /v1/chat/completions for it",
                       t->cfg->name, api_name);
        return NULL;
    }
    return t;
}

void gw_run_translated(gw_call *call, gw_api api, json_t *chat, const gw_rename *renames,
                       const char *api_name, const gw_format *fmt, void *route, void (*route_free)(void *)) {
    gw_gen g;
    if (!gw_decode_tree(call, api, chat, renames, &g)) {
        if (route_free) route_free(route);
        return;
    }
    g.route = route;
    g.route_free = route_free;
    gw_target *t = gw_translated_target(call, g.model, api_name);
    if (!t) {
        gw_gen_free(&g);
        return;
    }
    gw_generate(call, t, &g, fmt);
}

json_t *gw_body_object(gw_call *call) {
    json_error_t je;
    json_t *root = json_loadb(call->body, call->body_len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        gw_reply_error(call, GW_E_INVALID_JSON, "the body is not valid JSON: %s (line %d, column %d)",
                       je.text, je.line, je.column);
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        gw_reply_error(call, GW_E_INVALID_FIELD, "the body must be a JSON object");
        return NULL;
    }
    return root;
}

bool gw_copy_field(json_t *from, const char *key, json_t *to, const char *as) {
    json_t *v = json_object_get(from, key);
    if (!v) return false;
    json_object_set(to, as ? as : key, v);
    return true;
}

bool gw_check_fields(gw_call *call, json_t *root, const char *const *known, const char *api) {
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        bool found = false;
        for (const char *const *k = known; *k && !found; k++)
            found = strcmp(*k, key) == 0;
        if (!found) {
            gw_reply_error(call, GW_E_INVALID_FIELD,
                           "'%s' is not supported by %s on this server; leave it out", key, api);
            return false;
        }
    }
    return true;
}

void gw_iso_time(double unix_s, char *out, size_t cap) {
    time_t secs = (time_t)unix_s;
    struct tm tm;
    gmtime_r(&secs, &tm);
    char base[GW_TIME_SIZE];
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    long nanos = (long)((unix_s - (double)secs) * 1e9);
    if (nanos < 0) nanos = 0;
    snprintf(out, cap, "%s.%09ldZ", base, nanos);
}

double gw_unix_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}
