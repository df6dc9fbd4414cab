/*
 * web.c: the web page that `sipp serve` serves at "/" (its files are web/index.html, app.js,
 * style.css and favicon.svg; app.js and style.css are the bundles scripts/bundle_web.py makes of
 * web/src/ and the pinned libraries of deps/web.lock).
 *
 * The files are compiled into the binary (scripts/embed_assets.py writes them as the table
 * sipp_web_assets[]), so there is nothing to install beside sipp and nothing is fetched at run
 * time: the page works on a machine with no network, and it always matches the gateway it came with.
 *
 * These routes are open (no bearer token): the files are public and hold no data. Every call the
 * page then makes to the API carries the token the user typed into it.
 *
 * The "run in this browser" mode (docs/web.md) loads the browser runtime from /browser/: the browser
 * package (the .js files of bindings/web, embedded like the page) and the WebAssembly builds `make web` wrote
 * (sipp-mt.* and sipp-st.*, read from [web] runtime_dir, by default the web/ directory beside the
 * binary's bin/, that is build/web; only those five names, so no other file can be asked for). The
 * page and these files are cross-origin isolated (Cross-Origin-Opener-Policy and -Embedder-Policy):
 * only then does the browser give SharedArrayBuffer, which the pthread build needs. The runtime's
 * own files may compile WebAssembly ('wasm-unsafe-eval'), which the page itself may not.
 *
 * Every reply carries a strict Content-Security-Policy. The page is self-contained, so everything it
 * needs comes from this origin: scripts and styles from files only (no inline code, no eval), API
 * calls to this origin only, no plugins, no <base>, no form submissions, and no framing by another
 * site (the page may hold a bearer token). Images and audio may also come from blob: URLs: the page
 * shows an image or plays a recording the user attached from the file itself (which never leaves the
 * browser but in the request), and plays speech /v1/audio/speech returned.
 * Model output is only ever set as text by app.js; the
 * policy is the second line of defence should that ever change: markup injected by a model could
 * neither run script nor send anything elsewhere.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gateway/api/api.h"
#include "gateway/api/web_assets.h"

#define WEB_INDEX "/index.html"

#define WEB_CSP                                                                                              \
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; "                        \
    "media-src 'self' blob:; connect-src 'self'; base-uri 'none'; form-action 'none'; "                      \
    "frame-ancestors 'none'"

/* The browser runtime's scripts: the worker fetches and compiles the .wasm, and starts its threads. */
#define BROWSER_CSP                                                                                          \
    "default-src 'none'; script-src 'self' 'wasm-unsafe-eval'; worker-src 'self'; connect-src 'self'; "      \
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

#define BROWSER_PREFIX "/browser/"
#define RUNTIME_PREFIX BROWSER_PREFIX "runtime/"
#define RUNTIME_BESIDE_BIN "/../web" /* build/bin/sipp -> build/web */
#define SELF_EXE "/proc/self/exe"

typedef struct web_header {
    const char *name, *value;
} web_header;

/* Every file's headers, besides its Content-Security-Policy. */
static const web_header common_headers[] = {
    {"X-Content-Type-Options", "nosniff"}, /* a file is only ever what its Content-Type says */
    {"X-Frame-Options", "DENY"},           /* frame-ancestors for browsers that predate it */
    {"Referrer-Policy", "no-referrer"},
    {"Cross-Origin-Opener-Policy", "same-origin"},
    {"Cross-Origin-Embedder-Policy", "require-corp"},
    {"Cross-Origin-Resource-Policy", "same-origin"},
    /* The files change with the binary (or make web), and they have no validator: always ask again
     * (it is local). */
    {"Cache-Control", "no-cache"},
};

#define N_HEADERS(h) (sizeof h / sizeof h[0])

/* The files of make web, and their types (the .wasm's lets the browser compile it as it streams in). */
static const struct {
    const char *name, *content_type;
} runtime_files[] = {
    {"sipp-mt.js", "text/javascript; charset=utf-8"},
    {"sipp-mt.worker.js", "text/javascript; charset=utf-8"},
    {"sipp-mt.wasm", "application/wasm"},
    {"sipp-st.js", "text/javascript; charset=utf-8"},
    {"sipp-st.wasm", "application/wasm"},
};

static void add_headers(gw_call *call, const char *csp) {
    gw_reply_header(call, "Content-Security-Policy", csp);
    for (size_t i = 0; i < N_HEADERS(common_headers); i++)
        gw_reply_header(call, common_headers[i].name, common_headers[i].value);
}

static const sipp_web_asset *find_asset(const char *path) {
    for (size_t i = 0; i < sipp_web_n_assets; i++)
        if (strcmp(sipp_web_assets[i].path, path) == 0) return &sipp_web_assets[i];
    return NULL;
}

/* Replies with an embedded file. gw_reply_text takes a malloc'd text and frees it; the asset is
 * static, so it is copied (a few tens of KB) rather than adding a second kind of reply for borrowed
 * memory. */
static void reply_asset(gw_call *call, const sipp_web_asset *a) {
    char *copy = malloc(a->len ? a->len : 1);
    if (!copy) {
        gw_reply_error(call, GW_E_INTERNAL, "out of memory");
        return;
    }
    memcpy(copy, a->data, a->len);
    gw_reply_text(call, 200, a->content_type, copy, a->len);
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
    reply_asset(call, a);
    add_headers(call, WEB_CSP);
}

/* [web] runtime_dir, or build/web beside the running binary's bin/ (what make web writes). */
static bool runtime_dir(const gw_call *call, char out[PATH_MAX]) {
    if (call->srv->cfg->web_runtime_dir)
        return snprintf(out, PATH_MAX, "%s", call->srv->cfg->web_runtime_dir) < PATH_MAX;
    char exe[PATH_MAX];
    ssize_t n = readlink(SELF_EXE, exe, sizeof exe - 1);
    if (n <= 0) return false;
    exe[n] = '\0';
    return snprintf(out, PATH_MAX, "%s" RUNTIME_BESIDE_BIN, dirname(exe)) < PATH_MAX;
}

static void reply_runtime_file(gw_call *call, const char *name) {
    size_t i = 0;
    while (i < N_HEADERS(runtime_files) && strcmp(runtime_files[i].name, name) != 0)
        i++;
    if (i == N_HEADERS(runtime_files)) {
        gw_reply_error(call, GW_E_UNKNOWN_ROUTE,
                       "the browser runtime has no file '%s' (its files are sipp-mt.* and sipp-st.*)", name);
        return;
    }
    char dir[PATH_MAX], path[PATH_MAX];
    if (!runtime_dir(call, dir) || snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) {
        gw_reply_error(call, GW_E_INTERNAL,
                       "cannot tell where the browser runtime is; set [web] runtime_dir");
        return;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        int e = fd < 0 ? errno : EINVAL;
        if (fd >= 0) close(fd);
        gw_reply_error(
            call, GW_E_NOT_FOUND,
            "the browser runtime is not built: %s: %s (run make web, or set [web] runtime_dir to where "
            "its sipp-mt.* and sipp-st.* files are)",
            path, e == EINVAL ? "not a regular file" : strerror(e));
        return;
    }
    gw_reply_file(call, 200, runtime_files[i].content_type, fd, 0, (uint64_t)st.st_size);
}

void gw_route_browser(gw_call *call) {
    const sipp_web_asset *a = find_asset(call->path);
    if (a)
        reply_asset(call, a);
    else if (strncmp(call->path, RUNTIME_PREFIX, strlen(RUNTIME_PREFIX)) == 0)
        reply_runtime_file(call, call->path + strlen(RUNTIME_PREFIX));
    else
        gw_reply_error(
            call, GW_E_UNKNOWN_ROUTE,
            "no file %s: /browser/ holds the browser package (bindings/web) and runtime/ its builds",
            call->path);
    if (call->status == 200) add_headers(call, BROWSER_CSP);
}
