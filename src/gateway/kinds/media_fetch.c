/*
 * media_fetch.c: the images a chat names by http(s) URL, fetched before a local target generates.
 *
 * Off by default ([media] fetch = false): a server that fetches reaches whatever address a caller
 * names, so turning it on is the operator's choice. On, each http(s) image URL of a request for a
 * local target is fetched on the request's own thread (one thread per connection: a slow fetch holds
 * up no other request), before the model is loaded or a slot is taken, and replaced by a data: URL
 * of the bytes. libsipp then takes them exactly as an inline image: the same [limits]
 * image_max_bytes, image_max_pixels and media_max_items, the same placeholder tokens (so the same
 * image fetched or inline prompts the same, and a later turn reuses its cells). A remote target is
 * sent the URL as the client gave it: its server fetches it or not.
 *
 * The bounds, each a 400 naming the URL (its query hidden) and the setting:
 *   - http and https only, redirects too (at most FETCH_MAX_REDIRECTS); a redirect elsewhere
 *     (file:, ftp:, ...) is refused;
 *   - the address: every socket the fetch opens, each redirect's included, is checked against
 *     sipp_address_public after the name was resolved and before connecting (CURLOPT_OPENSOCKET-
 *     FUNCTION), so the rule holds for the address actually connected to: a name that resolves to a
 *     public address for a check and to 127.0.0.1 for the connection (DNS rebinding) gains nothing.
 *     Loopback, private, shared, link-local (cloud metadata), multicast and reserved addresses are
 *     refused unless fetch_allow_private (tests, a lab). No proxy is used, not even one named by
 *     the environment (http_proxy, ...): through a proxy the address checked would be the proxy's;
 *   - bytes: a Content-Length over fetch_max_bytes (default: [limits] image_max_bytes) is refused
 *     before any body is read, and a body that grows past it is cut there;
 *   - time: fetch_timeout_ms for all of a request's images together, and never past the request's
 *     own deadline; a client that goes away stops the fetch;
 *   - what comes back: a 2xx status (a 404 is named as the server's), and bytes that are an image
 *     libsipp reads (PNG, JPEG, GIF or BMP, sniffed from the bytes: a server's Content-Type is named
 *     in the refusal but trusted for nothing);
 *   - no cookies, no credentials besides the URL's own, no compression (what arrives is what is
 *     counted);
 *   - headers: libcurl reads a header line up to CURL_MAX_HTTP_HEADER (100 KB); a longer one stops
 *     the fetch, named as such (libcurl itself calls it "out of memory").
 */
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "gateway/kinds/kinds.h"
#include "gateway/media_parts.h"
#include "util/base64.h"
#include "util/media_sniff.h"
#include "util/net_address.h"

#define FETCH_MAX_REDIRECTS 3
#define FETCH_URL_SHOWN 160 /* bytes of a URL a message shows */
#define FETCH_TYPE_SIZE 64  /* of a Content-Type a message shows */
#define FETCH_PATH_SIZE 64  /* "messages[4095].content[4095].image_url.url" */
#define FETCH_ACCEPT "Accept: image/png, image/jpeg, image/gif, image/bmp, image/*;q=0.8"
#define FETCH_USER_AGENT_SIZE 64
#define FETCH_INLINE_HINT "or send the image inline as a data URL (data:image/png;base64,...)"
#define HTTP_OK_MIN 200
#define HTTP_OK_MAX 299

/* One fetch: its bounds and what it has received. */
typedef struct fetch {
    gw_call *call;
    CURL *curl;
    size_t max_bytes;
    sipp_buf body;
    size_t received;                      /* body bytes the server sent, those past max_bytes counted */
    long long announced;                  /* the last response's Content-Length; -1 = none */
    bool in_headers;                      /* a response's status line came, its end of headers not yet */
    char refused[SIPP_ADDRESS_TEXT_SIZE]; /* the last address refused as not public */
} fetch;

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

/* Opens a socket only to a public address (without fetch_allow_private). */
static curl_socket_t open_public_socket(void *user, curlsocktype purpose, struct curl_sockaddr *a) {
    fetch *f = user;
    if (!sipp_address_public(&a->addr)) {
        sipp_address_text(&a->addr, f->refused, sizeof f->refused);
        return CURL_SOCKET_BAD;
    }
    return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

/* Keeps the body; past max_bytes it stops the transfer (a write error). */
static size_t on_body(char *data, size_t size, size_t n, void *user) {
    fetch *f = user;
    size_t len = size * n;
    f->received += len;
    if (f->received > f->max_bytes) return 0;
    return sipp_buf_append(&f->body, data, len) ? len : 0;
}

/* Notes the Content-Length of each response (a redirect's, then the image's). */
static size_t on_header(char *line, size_t size, size_t n, void *user) {
    fetch *f = user;
    size_t len = size * n;
    static const char name[] = "content-length:";
    if (len >= 5 && strncmp(line, "HTTP/", 5) == 0) {
        f->announced = -1;
        f->in_headers = true;
    }
    if ((len == 2 && line[0] == '\r') || (len == 1 && line[0] == '\n')) f->in_headers = false;
    if (len > sizeof name - 1 && strncasecmp(line, name, sizeof name - 1) == 0) {
        char value[32];
        size_t k = len - (sizeof name - 1) < sizeof value ? len - (sizeof name - 1) : sizeof value - 1;
        memcpy(value, line + sizeof name - 1, k);
        value[k] = '\0';
        char *end;
        long long v = strtoll(value, &end, 10);
        if (end != value && v >= 0) f->announced = v;
    }
    return len;
}

/* Stops the fetch when the client went away (or the server is cancelling everything). */
static int on_progress(void *user, curl_off_t dl_total, curl_off_t dl_now, curl_off_t ul_total,
                       curl_off_t ul_now) {
    fetch *f = user;
    return gw_call_abandoned(f->call) ? 1 : 0;
}

/* The server's Content-Type as a message may show it: printable ASCII, cut to cap bytes; "none". */
static void content_type(fetch *f, char *out, size_t cap) {
    const char *type = NULL;
    curl_easy_getinfo(f->curl, CURLINFO_CONTENT_TYPE, &type);
    snprintf(out, cap, "%s", type && *type ? type : "none");
    for (char *p = out; *p; p++)
        if (*p < ' ' || *p > '~') *p = '?';
}

/* Whether what came back is an image libsipp reads (info: what it looks like). */
static bool is_image(const fetch *f, sipp_media_info *info) {
    long status = 0;
    curl_easy_getinfo(f->curl, CURLINFO_RESPONSE_CODE, &status);
    bool sniffed = sipp_media_sniff((const unsigned char *)f->body.data, f->body.len, info);
    if (!sniffed) info->kind = SIPP_MEDIA_UNKNOWN;
    return status >= HTTP_OK_MIN && status <= HTTP_OK_MAX && sniffed && !sipp_media_is_audio(info->kind);
}

/* Why a fetch that ended with rc gave no image, in msg (msg_size bytes), and the error it is. */
static gw_error_kind why_not(fetch *f, CURLcode rc, const char *url, int ms, const char *curl_err, char *msg,
                             size_t msg_size) {
    const gw_config *cfg = f->call->srv->cfg;
    long status = 0;
    curl_easy_getinfo(f->curl, CURLINFO_RESPONSE_CODE, &status);
    if (rc == CURLE_OK && (status < HTTP_OK_MIN || status > HTTP_OK_MAX)) rc = CURLE_HTTP_RETURNED_ERROR;
    switch (rc) {
    case CURLE_OK: {
        char type[FETCH_TYPE_SIZE];
        sipp_media_info info;
        content_type(f, type, sizeof type);
        is_image(f, &info);
        snprintf(msg, msg_size,
                 "the file at %s is not an image (PNG, JPEG, GIF or BMP): %zu bytes of Content-Type %s%s%s; "
                 "link the image itself, " FETCH_INLINE_HINT,
                 url, f->body.len, type, info.kind ? " that look like " : "",
                 info.kind ? sipp_media_kind_name(info.kind) : "");
        return GW_E_INVALID_FIELD;
    }
    case CURLE_COULDNT_CONNECT:
        if (!f->refused[0]) break;
        snprintf(msg, msg_size,
                 "the image at %s is at %s, which is not a public address (loopback, private, link-local or "
                 "reserved): this server fetches images from the public internet only ([media] "
                 "fetch_allow_private); give a public URL, " FETCH_INLINE_HINT,
                 url, f->refused);
        return GW_E_INVALID_FIELD;
    case CURLE_OPERATION_TIMEDOUT:
        snprintf(msg, msg_size,
                 "the image at %s did not arrive in time: the fetch was stopped after %d ms ([media] "
                 "fetch_timeout_ms is %d, for all of a request's images together); give a faster "
                 "server, " FETCH_INLINE_HINT,
                 url, ms, cfg->media_fetch_timeout_ms);
        return GW_E_INVALID_FIELD;
    case CURLE_FILESIZE_EXCEEDED:
        snprintf(msg, msg_size,
                 "the image at %s is %lld bytes (its Content-Length), over the limit of %zu bytes ([media] "
                 "fetch_max_bytes); nothing was read; send a smaller image",
                 url, f->announced, f->max_bytes);
        return GW_E_INVALID_FIELD;
    case CURLE_WRITE_ERROR:
        if (f->received <= f->max_bytes) {
            snprintf(msg, msg_size, "out of memory fetching the image at %s", url);
            return GW_E_INTERNAL;
        }
        snprintf(msg, msg_size,
                 "the image at %s is over the limit of %zu bytes ([media] fetch_max_bytes): the fetch was "
                 "stopped at %zu bytes; send a smaller image",
                 url, f->max_bytes, f->received);
        return GW_E_INVALID_FIELD;
    case CURLE_HTTP_RETURNED_ERROR:
        snprintf(msg, msg_size,
                 "the image at %s could not be fetched: HTTP status %ld from the server; check the "
                 "URL, " FETCH_INLINE_HINT,
                 url, status);
        return GW_E_INVALID_FIELD;
    case CURLE_TOO_MANY_REDIRECTS:
        snprintf(msg, msg_size,
                 "the image at %s redirects more than %d times; give the image's own URL, " FETCH_INLINE_HINT,
                 url, FETCH_MAX_REDIRECTS);
        return GW_E_INVALID_FIELD;
    case CURLE_UNSUPPORTED_PROTOCOL:
        snprintf(msg, msg_size,
                 "the image at %s redirects to a URL that is not http or https, which this server does not "
                 "follow; give the image's own URL, " FETCH_INLINE_HINT,
                 url);
        return GW_E_INVALID_FIELD;
    case CURLE_OUT_OF_MEMORY:
        /* libcurl keeps a header line in a buffer of CURL_MAX_HTTP_HEADER bytes and reports a longer
         * one as out of memory: in the middle of a response's headers, that is what happened. */
        if (!f->in_headers) break;
        snprintf(msg, msg_size,
                 "the server of the image at %s sent a header line larger than the %d bytes this server "
                 "reads, and the fetch was stopped there; fix that server, " FETCH_INLINE_HINT,
                 url, CURL_MAX_HTTP_HEADER);
        return GW_E_INVALID_FIELD;
    case CURLE_ABORTED_BY_CALLBACK:
        snprintf(msg, msg_size, "the request was cancelled while fetching the image at %s", url);
        return GW_E_NOT_READY;
    default: break;
    }
    snprintf(msg, msg_size, "the image at %s could not be fetched: %s; check the URL, " FETCH_INLINE_HINT,
             url, curl_err[0] ? curl_err : curl_easy_strerror(rc));
    return GW_E_INVALID_FIELD;
}

/* Fetches url within ms milliseconds into a data: URL (malloc'ed; NULL after replying). */
static char *fetch_one(gw_call *call, const char *url, int ms) {
    const gw_config *cfg = call->srv->cfg;
    char shown[FETCH_URL_SHOWN], curl_err[CURL_ERROR_SIZE] = "";
    gw_media_url_redact(url, shown, sizeof shown);
    fetch f = {.call = call,
               .max_bytes =
                   cfg->media_fetch_max_bytes ? cfg->media_fetch_max_bytes : cfg->limits.image_max_bytes,
               .announced = -1};
    pthread_once(&curl_once, curl_init);
    f.curl = curl_easy_init();
    struct curl_slist *headers = curl_slist_append(NULL, FETCH_ACCEPT);
    if (!f.curl || !headers) {
        curl_easy_cleanup(f.curl);
        curl_slist_free_all(headers);
        gw_reply_error(call, GW_E_INTERNAL, "out of memory fetching the image at %s", shown);
        return NULL;
    }
    CURL *c = f.curl;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, (long)FETCH_MAX_REDIRECTS);
    curl_easy_setopt(c, CURLOPT_PROXY, ""); /* none, whatever the environment says */
    if (!cfg->media_fetch_allow_private) {
        curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, open_public_socket);
        curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, &f);
    }
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)ms);
    curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)f.max_bytes);
    curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    char agent[FETCH_USER_AGENT_SIZE];
    snprintf(agent, sizeof agent, "sipp/%s (image fetch)", sipp_version());
    curl_easy_setopt(c, CURLOPT_USERAGENT, agent);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, curl_err);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &f);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &f);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &f);
    CURLcode rc = curl_easy_perform(c);
    char *data_url = NULL;
    sipp_media_info info;
    if (rc == CURLE_OK && is_image(&f, &info)) {
        char *b64 = sipp_base64_encode((const unsigned char *)f.body.data, f.body.len);
        sipp_buf u = {0};
        if (b64 && sipp_buf_appendf(&u, "data:%s;base64,%s", GW_MEDIA_TYPE_UNKNOWN, b64))
            data_url = u.data;
        else
            gw_reply_error(call, GW_E_INTERNAL, "out of memory fetching the image at %s", shown);
        free(b64);
    } else {
        char msg[SIPP_ERROR_SIZE];
        gw_error_kind kind = why_not(&f, rc, shown, ms, curl_err, msg, sizeof msg);
        gw_reply_error(call, kind, "%s", msg);
    }
    curl_slist_free_all(headers);
    curl_easy_cleanup(c);
    sipp_buf_free(&f.body);
    return data_url;
}

/* The chat's image_url objects whose URL is http(s), in order, each with where it is:
 * [{"image_url": {"url": ...}, "message": i, "part": k}] (the objects are g->chat's own). */
static json_t *remote_images(json_t *chat) {
    json_t *found = json_array();
    size_t i, k;
    json_t *m, *part;
    json_array_foreach(json_object_get(chat, "messages"), i, m) {
        json_array_foreach(json_object_get(m, "content"), k, part) {
            json_t *iu = json_object_get(part, "image_url"); /* an object: normalized by gw_decode */
            const char *url = json_string_value(json_object_get(iu, "url"));
            if (url && gw_image_url_remote(url))
                json_array_append_new(found, json_pack("{s:O, s:I, s:I}", "image_url", iu, "message",
                                                       (json_int_t)i, "part", (json_int_t)k));
        }
    }
    return found;
}

bool gw_media_fetch(gw_call *call, gw_gen *g) {
    const gw_config *cfg = call->srv->cfg;
    if (!g->chat || !g->n_images) return true;
    json_t *found = remote_images(g->chat);
    size_t n = json_array_size(found);
    bool ok = true;
    if (n && !cfg->media_fetch) {
        json_t *first = json_array_get(found, 0);
        const char *url = json_string_value(json_object_get(json_object_get(first, "image_url"), "url"));
        char path[FETCH_PATH_SIZE];
        snprintf(path, sizeof path, "messages[%lld].content[%lld].image_url.url",
                 (long long)json_integer_value(json_object_get(first, "message")),
                 (long long)json_integer_value(json_object_get(first, "part")));
        ok = gw_reply_invalid_field(call, "'%s' is %s", path, gw_image_url_refusal(url, false));
    } else if (n && g->n_images > cfg->limits.media_max_items) {
        ok = gw_reply_invalid_field(call,
                                    "the chat has %zu images, over the limit of %zu ([limits] "
                                    "media_max_items); none was fetched",
                                    g->n_images, cfg->limits.media_max_items);
    }
    double start = sipp_now_ms();
    for (size_t i = 0; ok && i < n; i++) {
        json_t *iu = json_object_get(json_array_get(found, i), "image_url");
        int ms = cfg->media_fetch_timeout_ms - (int)(sipp_now_ms() - start); /* what is left of it */
        if (ms < 1) ms = 1;
        if (gw_call_ms_left(call) < ms) ms = gw_call_ms_left(call);
        char *data_url = fetch_one(call, json_string_value(json_object_get(iu, "url")), ms);
        ok = data_url && json_object_set_new(iu, "url", json_string_nocheck(data_url)) == 0;
        if (data_url && !ok) gw_reply_error(call, GW_E_INTERNAL, "out of memory");
        free(data_url);
    }
    json_decref(found);
    return ok;
}
