/*
 * web.c: the web page that `sipp serve` serves at "/" (its files are web/index.html, app.js,
 * style.css and favicon.svg).
 *
 * The files are compiled into the binary (scripts/embed_assets.py writes them as the table
 * sipp_web_assets[]), so there is nothing to install beside sipp and nothing is fetched at run
 * time: the page works on a machine with no network, and it always matches the gateway it came with.
 *
 * These routes are open (no bearer token): the files are public and hold no data. Every call the
 * page then makes to the API carries the token the user typed into it.
 *
 * Every reply carries a strict Content-Security-Policy. The page is self-contained, so everything it
 * needs comes from this origin: scripts and styles from files only (no inline code, no eval), API
 * calls to this origin only, no plugins, no <base>, no form submissions, and no framing by another
 * site (the page may hold a bearer token). Model output is only ever set as text by app.js; the
 * policy is the second line of defence should that ever change: markup injected by a model could
 * neither run script nor send anything elsewhere.
 */
#include <stdlib.h>
#include <string.h>

#include "gateway/routes.h"
#include "gateway/web_assets.h"

#define WEB_INDEX "/index.html"

#define WEB_CSP                                                                                              \
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "          \
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

static const struct {
    const char *name, *value;
} web_headers[] = {
    {"Content-Security-Policy", WEB_CSP},
    {"X-Content-Type-Options", "nosniff"}, /* a file is only ever what its Content-Type says */
    {"X-Frame-Options", "DENY"},           /* frame-ancestors for browsers that predate it */
    {"Referrer-Policy", "no-referrer"},
    /* The files change with the binary, and they have no validator: always ask again (it is local). */
    {"Cache-Control", "no-cache"},
};

static const sipp_web_asset *find_asset(const char *path) {
    for (size_t i = 0; i < sipp_web_n_assets; i++)
        if (strcmp(sipp_web_assets[i].path, path) == 0) return &sipp_web_assets[i];
    return NULL;
}

void gw_route_web(gw_call *call) {
    const char *path = strcmp(call->path, "/") == 0 ? WEB_INDEX : call->path;
    const sipp_web_asset *a = find_asset(path);
    if (!a) {
        /* A route for a file that web/ no longer has, or a build with no web/ files at all. */
        gw_reply_error(call, GW_E_UNKNOWN_ROUTE,
                       "the web page's file %s is not in this build of sipp (see docs/web.md)", path);
        return;
    }
    /* gw_reply_text takes a malloc'd text and frees it; the asset is static, so it is copied (a few
     * tens of KB) rather than adding a second kind of reply for borrowed memory. */
    char *copy = malloc(a->len ? a->len : 1);
    if (!copy) {
        gw_reply_error(call, GW_E_INTERNAL, "out of memory");
        return;
    }
    memcpy(copy, a->data, a->len);
    gw_reply_text(call, 200, a->content_type, copy, a->len);
    for (size_t i = 0; i < sizeof web_headers / sizeof web_headers[0]; i++)
        gw_reply_header(call, web_headers[i].name, web_headers[i].value);
}
