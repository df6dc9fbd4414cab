/*
 * model_file.c: GET /v1/models/{name}/file, a local target's GGUF file for the web page's "run in
 * this browser" mode (web/app.js, bindings/web), and the browser_file entry /v1/models gives it.
 *
 * Off by default: [web] serve_model_files = true turns it on. Serving the file hands out the
 * weights, so the route is authenticated like every API route (a token limited to some targets
 * sees only their files), and when it is off the 404 names the setting rather than the model.
 *
 * The reply is the file itself (sendfile, no copy through memory) with what a download needs:
 *   - Range: one byte range, 206 with Content-Range; a range that cannot be served is a 416 with
 *     "Content-Range: bytes * / SIZE" (http/range.c says which ranges are served); Accept-Ranges.
 *   - The model's SHA-256 as a strong ETag and in X-Sipp-Model-Sha256, so the page can check the
 *     bytes and key its cache by them; If-None-Match answers 304, and If-Range with another
 *     validator gets the whole file. The hash comes from sipp_store_file_sha256: the store's record
 *     for a pulled model, else the store's hash cache (keyed by path, size and mtime), so each file
 *     is hashed once, not once per request or per gateway start.
 *   - HEAD: the same headers without the bytes (the connection layer leaves the body out).
 * One GGUF file only: a split set's shards would have to be joined, which the browser runtime
 * does not do, so it is refused by name.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gateway/api/api.h"
#include "gateway/http/http.h"

#define FILE_SUFFIX "/file"
#define MODEL_FILE_TYPE "application/octet-stream"
#define SHA256_HEADER "X-Sipp-Model-Sha256"
#define ETAG_SIZE (SIPP_SHA256_HEX + 2)
#define RANGE_HEADER_SIZE 96
#define URL_UNRESERVED "-._~/"

#define OFF_MESSAGE                                                                                          \
    "this gateway does not serve model files: set serve_model_files = true under [web] in its config "       \
    "(docs/web.md) to offer its local models to the page's \"run in this browser\" mode"

/* The path of the file of /v1/models/{name}/file: name percent-encoded, '/' kept (store names). */
static void file_url(const char *name, sipp_buf *out) {
    sipp_buf_appendf(out, "/v1/models/");
    for (const unsigned char *c = (const unsigned char *)name; *c; c++) {
        bool plain = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                     strchr(URL_UNRESERVED, *c);
        if (plain)
            sipp_buf_appendf(out, "%c", *c);
        else
            sipp_buf_appendf(out, "%%%02X", *c);
    }
    sipp_buf_appendf(out, FILE_SUFFIX);
}

/* Why a local target's file is not served, or NULL when it is. */
static const char *not_servable(const gw_target *t) {
    char first[PATH_MAX];
    if (!gw_kind_of(t)->resident) return "it is an openai_compatible target: its model is on the upstream";
    if (!t->cfg->model_path) return "it has no model file";
    if (sipp_split_sibling(t->cfg->model_path, 1, first, sizeof first))
        return "its model is a split GGUF set, and the browser runtime loads a single file";
    return NULL;
}

json_t *gw_model_file_json(gw_call *call, const gw_target *t) {
    if (!call->srv->cfg->web_serve_model_files || not_servable(t)) return NULL;
    char hex[SIPP_SHA256_HEX], err[SIPP_ERROR_SIZE];
    struct stat st;
    if (stat(t->cfg->model_path, &st) != 0 ||
        sipp_store_file_sha256(t->cfg->model_path, hex, NULL, err) != SIPP_OK)
        return NULL; /* the file route says why, to whoever asks for it */
    sipp_buf url = {0};
    file_url(t->cfg->name, &url);
    json_t *o =
        json_pack("{s:s?, s:s, s:I}", "url", url.data, "sha256", hex, "bytes", (json_int_t)st.st_size);
    if (o && t->cfg->ctx_size > 0) json_object_set_new(o, "ctx_size", json_integer(t->cfg->ctx_size));
    sipp_buf_free(&url);
    return o;
}

bool gw_model_file_path(const char *rest) {
    size_t n = strlen(rest), sn = strlen(FILE_SUFFIX);
    return n > sn && strcmp(rest + n - sn, FILE_SUFFIX) == 0;
}

/* Whether an If-None-Match or If-Range value names this ETag (a list, or "*" for If-None-Match). */
static bool names_etag(const char *value, const char *etag, bool star) {
    return (star && strcmp(value, "*") == 0) || strstr(value, etag) != NULL;
}

static void reply_range_error(gw_call *call, gw_range_result r, uint64_t size, const char *range) {
    char cr[RANGE_HEADER_SIZE];
    gw_reply_error(call, GW_E_RANGE, "Range '%.64s' %s (the file has %" PRIu64 " bytes)", range,
                   gw_range_problem(r), size);
    snprintf(cr, sizeof cr, "bytes */%" PRIu64, size);
    gw_reply_header(call, "Content-Range", cr);
}

void gw_route_model_file(gw_call *call, const char *name, size_t name_len) {
    if (!call->srv->cfg->web_serve_model_files) {
        gw_reply_error(call, GW_E_NOT_FOUND, OFF_MESSAGE);
        return;
    }
    char *copy = strndup(name, name_len);
    if (!copy) {
        gw_reply_error(call, GW_E_INTERNAL, "out of memory");
        return;
    }
    gw_target *t = gw_call_lookup(call, copy);
    free(copy);
    if (!t) return;
    const char *why = not_servable(t);
    if (why) {
        gw_reply_error(call, GW_E_NOT_FOUND, "the model '%s' has no file to serve: %s", t->cfg->name, why);
        return;
    }
    const char *path = t->cfg->model_path;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        int e = fd < 0 ? errno : EINVAL;
        if (fd >= 0) close(fd);
        gw_reply_error(call, GW_E_INTERNAL, "the model file of '%s' cannot be read: %s", t->cfg->name,
                       e == EINVAL ? "not a regular file" : strerror(e));
        return;
    }
    char hex[SIPP_SHA256_HEX], err[SIPP_ERROR_SIZE], etag[ETAG_SIZE + 1];
    if (sipp_store_file_sha256(path, hex, NULL, err) != SIPP_OK) {
        close(fd);
        gw_reply_error(call, GW_E_INTERNAL, "cannot hash the model file of '%s': %s", t->cfg->name, err);
        return;
    }
    snprintf(etag, sizeof etag, "\"%s\"", hex);
    uint64_t size = (uint64_t)st.st_size, first = 0, len = size;
    int status = 200;
    const char *inm = gw_call_header(call, "If-None-Match");
    const char *range = gw_call_header(call, "Range");
    const char *if_range = gw_call_header(call, "If-Range");
    if (inm && names_etag(inm, etag, true)) {
        close(fd);
        gw_reply_text(call, 304, NULL, NULL, 0);
    } else {
        if (range && (!if_range || names_etag(if_range, etag, false))) {
            gw_range_result r = gw_range_parse(range, size, &first, &len);
            if (r != GW_RANGE_OK && r != GW_RANGE_IGNORE) {
                close(fd);
                reply_range_error(call, r, size, range);
                return;
            }
            if (r == GW_RANGE_OK) status = 206;
        }
        gw_reply_file(call, status, MODEL_FILE_TYPE, fd, first, len);
        if (status == 206) {
            char cr[RANGE_HEADER_SIZE];
            snprintf(cr, sizeof cr, "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, first, first + len - 1, size);
            gw_reply_header(call, "Content-Range", cr);
        }
    }
    gw_reply_header(call, "ETag", etag);
    gw_reply_header(call, SHA256_HEADER, hex);
    gw_reply_header(call, "Accept-Ranges", "bytes");
    /* The page keeps the model in its own cache (OPFS, by this sha256); the HTTP cache would hold a
     * second copy of a large file, so it may keep one only to revalidate it. */
    gw_reply_header(call, "Cache-Control", "private, no-cache");
    gw_reply_header(call, "Cross-Origin-Resource-Policy", "same-origin");
}
