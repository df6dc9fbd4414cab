/*
 * pull.c: `sipp pull`, downloading a model into the store with libcurl.
 *
 * Safety comes from where bytes go. A download is written to partial/FILE.part inside the store
 * directory (so the final rename stays on one file system and is atomic), hashed as it arrives, and
 * checked when complete: the SHA-256 against the value known in advance (from --sha256 or the
 * catalog), then the GGUF magic and header. Only a file that passes is renamed to its name in the
 * store, and the model's NAME.json is written last, so the store never holds half a model. A
 * failure deletes what cannot be trusted (a hash mismatch, a file that is not GGUF) and keeps what
 * can be resumed (a transfer that broke off, a full disk).
 *
 * Resuming. partial/FILE.part.json records the URL and the server's ETag. The next pull of the same
 * URL sends "Range: bytes=N-" (and "If-Range: ETAG", so a file that changed on the server comes back
 * whole), first hashing the N bytes already there. Every decision is taken when a response's headers
 * are complete, before any body byte is written:
 *   206 with Content-Range starting at N   append
 *   200                                     the server ignored the range (or the file changed):
 *                                           truncate the .part and take the body from byte 0
 *   416 with Content-Range "* /N"           the .part was already complete
 *   3xx                                     redirects are followed (Hugging Face sends one to its CDN)
 *   anything else                           an error naming the status and the URL
 * A transfer that breaks off mid-body (reset, timeout, short body) is retried from where it stopped,
 * a bounded number of times with a growing pause; connection failures and HTTP errors are not.
 *
 * The first four bytes of a body starting at 0 must be "GGUF" (or, for a whisper.cpp model, its ggml
 * magic): an HTML error page served with 200, or a GGUF file where a whisper model belongs, is stopped
 * at once instead of being downloaded and then rejected.
 *
 * A whisper.cpp model (a catalog entry with "recipe": "whispercpp", or a URL of a .bin file) is one
 * file, stored as NAME.bin with "recipe" in NAME.json; its check walks the whole file
 * (sipp_whisper_file_check) instead of reading a GGUF header.
 *
 * Network settings follow libcurl's usual environment: http_proxy, https_proxy, no_proxy, and, as
 * the curl tool does, CURL_CA_BUNDLE, SSL_CERT_FILE and SSL_CERT_DIR for certificate authorities.
 * HF_TOKEN is sent as a bearer token for hf:// sources (libcurl sends it only to the original host,
 * never to the CDN a redirect leads to).
 *
 * A pull for someone else (public_only, the gateway's /api/pull) must not become a way to reach
 * what only this machine can: https only (redirects too), and every socket libcurl opens is
 * checked in its open-socket callback, after the name is resolved and before connecting, so a
 * redirect or a DNS answer that changes between a check and the connection cannot lead to a
 * loopback, private or link-local address. keep_existing (the gateway too) never replaces a model
 * the store has: a served file keeps its bytes; the install renames with RENAME_NOREPLACE, so not
 * even a pull racing this one is overwritten.
 */
#include "store/pull.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "store/catalog.h"
#include "store/gguf_info.h"
#include "store/store.h"
#include "store/whisper_file.h"
#include "util/net_address.h"
#include "util/util.h"

#define CONNECT_TIMEOUT_S 30L
#define LOW_SPEED_BYTES 1L   /* a transfer slower than this ... */
#define LOW_SPEED_TIME_S 60L /* ... for this long is broken off (and retried) */
#define MAX_REDIRECTS 10L
#define RETRY_DELAY_MS 500 /* pause before retry k is k times this */
#define RETRIES_MAX 100
#define RESTARTS_MAX 3            /* times one file may start over from byte 0 */
#define PROGRESS_BYTES (1u << 20) /* a broken transfer that got this far does not use up a retry ... */
#define ATTEMPTS_MAX 1000         /* ... but no file gets more requests than this */
#define GGUF_MAGIC "GGUF"
#define GGUF_MAGIC_LEN 4
#define ETAG_MAX 256
#define PART_META_EXT ".json"
#define USER_AGENT "sipp/" SIPP_VERSION
#define FILE_MODE 0644

sipp_pull_params sipp_pull_default_params(void) {
    sipp_pull_params p = {.retries = SIPP_PULL_DEFAULT_RETRIES};
    return p;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;
static void curl_init(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

/* What ended a transfer, when it was not libcurl's own doing. */
typedef enum {
    END_NONE = 0,
    END_COMPLETE,  /* 416 for a .part that already holds the whole file */
    END_RESTART,   /* the response cannot continue the .part: start over from byte 0 */
    END_HTTP,      /* an HTTP error status */
    END_WRITE,     /* writing the .part failed (errno in write_errno) */
    END_NO_SPACE,  /* the file system has less room than the file needs */
    END_BAD_MAGIC, /* the body does not start with "GGUF" (a whisper model's: its ggml magic) */
    END_CANCELLED, /* the progress callback said stop */
} transfer_end;

/* One pull: what the progress callback needs across files. */
typedef struct pull_state {
    const sipp_pull_params *params;
    int n_files;
    uint64_t received;
    double start_ms;
    sipp_pull_fault fault;                /* of the failure, once there is one */
    char refused[SIPP_ADDRESS_TEXT_SIZE]; /* public_only: the address a connection was refused to */
    bool whisper;                         /* the files are whisper.cpp models, not GGUF */
} pull_state;

/* The first bytes every file of the pull must start with. */
static const char *magic_of(const pull_state *ps) {
    return ps->whisper ? SIPP_WHISPER_MAGIC_BYTES : GGUF_MAGIC;
}

/* One file's download, across its attempts. */
typedef struct transfer {
    pull_state *pull;
    int index;        /* 1-based */
    const char *file; /* store file name */
    const char *url;
    const char *part_path;
    const char *part_dir;
    int fd;
    sipp_sha256 *hash;
    uint64_t offset;     /* bytes in the .part: where the next body byte goes */
    uint64_t total;      /* the whole file's size; 0 while unknown */
    char etag[ETAG_MAX]; /* of the .part's content, as the server named it */
    bool resumed;
    const char *note; /* handed to the next progress call */
    /* the current response */
    long status;
    bool has_length, has_range;
    uint64_t length, range_start, range_total;
    char resp_etag[ETAG_MAX];
    transfer_end end;
    int write_errno;
    char head[GGUF_MAGIC_LEN];
} transfer;

static void reset_response(transfer *t) {
    t->status = 0;
    t->has_length = t->has_range = false;
    t->length = t->range_start = t->range_total = 0;
    t->resp_etag[0] = '\0';
}

/* Writes partial/FILE.part.json: the URL and ETag the .part's bytes came from. */
static void part_meta_write(const transfer *t) {
    char path[PATH_MAX];
    sipp_pathf(path, sizeof path, "%s%s", t->part_path, PART_META_EXT);
    json_t *j = json_pack("{s:s, s:s}", "url", t->url, "etag", t->etag);
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    char ignored[SIPP_ERROR_SIZE];
    if (text) sipp_store_write_atomic(path, text, strlen(text), ignored); /* only resuming depends on it */
    free(text);
    json_decref(j);
}

static void part_delete(const char *part_path) {
    char path[PATH_MAX];
    sipp_pathf(path, sizeof path, "%s%s", part_path, PART_META_EXT);
    unlink(part_path);
    unlink(path);
}

static bool truncate_part(transfer *t) {
    if (ftruncate(t->fd, 0) != 0) {
        t->write_errno = errno;
        return false;
    }
    t->offset = 0;
    sipp_sha256_reset(t->hash);
    return true;
}

/* "bytes A-B/T" or "bytes * /T" */
static void parse_content_range(transfer *t, const char *v) {
    while (*v == ' ')
        v++;
    if (strncasecmp(v, "bytes", 5) != 0) return;
    v += 5;
    while (*v == ' ')
        v++;
    unsigned long long a = 0, total = 0;
    const char *slash = strchr(v, '/');
    if (!slash) return;
    if (*v != '*') {
        char *end;
        a = strtoull(v, &end, 10);
        if (end == v || *end != '-') return;
    }
    char *end;
    total = strtoull(slash + 1, &end, 10);
    if (end == slash + 1) return;
    t->has_range = true;
    t->range_start = a;
    t->range_total = total;
}

static bool strong_etag(const char *etag) { return etag[0] && strncmp(etag, "W/", 2) != 0; }

/* The decision at the end of a response's headers; false aborts the transfer (t->end says why). */
static bool headers_done(transfer *t) {
    if (t->status < 200 || (t->status >= 300 && t->status < 400)) return true; /* interim or redirect */
    if (t->status == 416 && t->offset > 0) {
        t->end =
            t->has_range && t->range_start == 0 && t->range_total == t->offset ? END_COMPLETE : END_RESTART;
        if (t->end == END_COMPLETE) t->total = t->offset;
        return false;
    }
    if (t->status == 206) {
        if (!t->has_range || t->range_start != t->offset) {
            t->end = END_RESTART;
            return false;
        }
        t->total = t->range_total;
    } else if (t->status == 200) {
        if (t->offset > 0) {
            t->note = "the server did not resume the download (it ignored the range request, or the file "
                      "changed); starting over";
            t->resumed = false;
            if (!truncate_part(t)) {
                t->end = END_WRITE;
                return false;
            }
        }
        t->total = t->has_length ? t->length : 0;
    } else {
        t->end = END_HTTP;
        return false;
    }
    if (strcmp(t->etag, t->resp_etag) != 0 || t->offset == 0) {
        sipp_strlcpy(t->etag, t->resp_etag, sizeof t->etag);
        part_meta_write(t);
    }
    struct statvfs vfs;
    if (t->total > t->offset && statvfs(t->part_dir, &vfs) == 0 &&
        (uint64_t)vfs.f_bavail * vfs.f_frsize < t->total - t->offset) {
        t->end = END_NO_SPACE;
        return false;
    }
    return true;
}

static size_t on_header(char *buf, size_t size, size_t n, void *user) {
    transfer *t = user;
    size_t len = size * n;
    if (len >= 5 && strncmp(buf, "HTTP/", 5) == 0) {
        reset_response(t);
        const char *sp = memchr(buf, ' ', len);
        if (sp) t->status = strtol(sp + 1, NULL, 10);
        return len;
    }
    if (len <= 2 && (buf[0] == '\r' || buf[0] == '\n')) return headers_done(t) ? len : 0;
    char line[ETAG_MAX + 64];
    size_t m = len < sizeof line - 1 ? len : sizeof line - 1;
    memcpy(line, buf, m);
    while (m && (line[m - 1] == '\r' || line[m - 1] == '\n'))
        m--;
    line[m] = '\0';
    char *colon = strchr(line, ':');
    if (!colon) return len;
    *colon = '\0';
    char *value = colon + 1;
    while (*value == ' ' || *value == '\t')
        value++;
    if (strcasecmp(line, "content-length") == 0) {
        char *end;
        unsigned long long v = strtoull(value, &end, 10);
        if (end != value) t->has_length = true, t->length = v;
    } else if (strcasecmp(line, "content-range") == 0) {
        parse_content_range(t, value);
    } else if (strcasecmp(line, "etag") == 0) {
        sipp_strlcpy(t->resp_etag, value, sizeof t->resp_etag);
    }
    return len;
}

static size_t on_write(char *data, size_t size, size_t n, void *user) {
    transfer *t = user;
    size_t len = size * n;
    if (t->end != END_NONE) return 0;
    if (t->offset < GGUF_MAGIC_LEN) {
        size_t take = GGUF_MAGIC_LEN - (size_t)t->offset;
        if (take > len) take = len;
        memcpy(t->head + t->offset, data, take);
        if (t->offset + take == GGUF_MAGIC_LEN && memcmp(t->head, magic_of(t->pull), GGUF_MAGIC_LEN) != 0) {
            t->end = END_BAD_MAGIC;
            return 0;
        }
    }
    size_t off = 0;
    while (off < len) {
        ssize_t w = pwrite(t->fd, data + off, len - off, (off_t)(t->offset + off));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            t->write_errno = w < 0 ? errno : EIO;
            t->end = END_WRITE;
            return 0;
        }
        off += (size_t)w;
    }
    sipp_sha256_update(t->hash, data, len);
    t->offset += len;
    t->pull->received += len;
    return len;
}

static bool report(transfer *t, bool file_done) {
    const sipp_pull_params *p = t->pull->params;
    if (!p->progress) {
        t->note = NULL;
        return true;
    }
    double secs = (sipp_now_ms() - t->pull->start_ms) / 1e3;
    sipp_pull_progress pr = {
        .file_index = t->index,
        .n_files = t->pull->n_files,
        .file = t->file,
        .done = t->offset,
        .total = t->total,
        .received = t->pull->received,
        .bytes_per_s = secs > 0 ? (double)t->pull->received / secs : 0,
        .eta_s = -1,
        .file_done = file_done,
        .note = t->note,
    };
    if (pr.total >= pr.done && pr.total && pr.bytes_per_s > 0)
        pr.eta_s = (double)(pr.total - pr.done) / pr.bytes_per_s;
    t->note = NULL;
    return p->progress(&pr, p->user);
}

static int on_progress(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow) {
    transfer *t = user;
    if (report(t, false)) return 0;
    t->end = END_CANCELLED;
    return 1;
}

/* Transfers that broke off after connecting: worth another try from where they stopped. */
static bool transient(CURLcode rc) {
    switch (rc) {
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM: return true;
    default: return false;
    }
}

static void sleep_ms(int ms) {
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static void set_network_env(CURL *c, const char *source) {
    /* The curl tool's CA variables; libcurl itself reads only the proxy ones. */
    const char *ca = getenv("CURL_CA_BUNDLE");
    if (!ca || !*ca) ca = getenv("SSL_CERT_FILE");
    if (ca && *ca) curl_easy_setopt(c, CURLOPT_CAINFO, ca);
    const char *ca_dir = getenv("SSL_CERT_DIR");
    if (ca_dir && *ca_dir) curl_easy_setopt(c, CURLOPT_CAPATH, ca_dir);
    const char *token = getenv("HF_TOKEN");
    if (token && *token && strncasecmp(source, SIPP_HF_SCHEME, strlen(SIPP_HF_SCHEME)) == 0) {
        curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BEARER);
        curl_easy_setopt(c, CURLOPT_XOAUTH2_BEARER, token);
    }
}

/* public_only: opens a socket only to a public address (see the top). */
static curl_socket_t open_public_socket(void *user, curlsocktype purpose, struct curl_sockaddr *a) {
    (void)purpose;
    pull_state *ps = user;
    if (!sipp_address_public(&a->addr)) {
        sipp_address_text(&a->addr, ps->refused, sizeof ps->refused);
        return CURL_SOCKET_BAD;
    }
    return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

/* One HTTP request continuing t from t->offset. */
static CURLcode attempt(transfer *t, const char *source, char *curl_err) {
    CURL *c = curl_easy_init();
    if (!c) return CURLE_OUT_OF_MEMORY;
    struct curl_slist *headers = NULL;
    char range[32], if_range[ETAG_MAX + 16];
    curl_easy_setopt(c, CURLOPT_URL, t->url);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, MAX_REDIRECTS);
    bool public_only = t->pull->params->public_only;
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, public_only ? "https" : "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, public_only ? "https" : "http,https");
    if (public_only) {
        t->pull->refused[0] = '\0'; /* an address refused before, then another connected, is no error */
        curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, open_public_socket);
        curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, t->pull);
    }
    curl_easy_setopt(c, CURLOPT_USERAGENT, USER_AGENT);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, CONNECT_TIMEOUT_S);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, LOW_SPEED_BYTES);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, LOW_SPEED_TIME_S);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, curl_err);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, t);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, t);
    /* CURLOPT_RANGE rather than CURLOPT_RESUME_FROM: libcurl fails a resume that gets a 200, and
     * sipp wants to take that 200 as a fresh start. */
    if (t->offset > 0) {
        snprintf(range, sizeof range, "%llu-", (unsigned long long)t->offset);
        curl_easy_setopt(c, CURLOPT_RANGE, range);
        if (strong_etag(t->etag)) {
            snprintf(if_range, sizeof if_range, "If-Range: %s", t->etag);
            headers = curl_slist_append(headers, if_range);
            curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
        }
    }
    set_network_env(c, source);
    curl_err[0] = '\0';
    reset_response(t);
    t->end = END_NONE;
    CURLcode rc = curl_easy_perform(c);
    curl_easy_cleanup(c);
    curl_slist_free_all(headers);
    return rc;
}

/* The message for a transfer that ended in error. */
static sipp_status transfer_error(const transfer *t, CURLcode rc, const char *curl_err, char *errbuf) {
    const char *why = curl_err[0] ? curl_err : curl_easy_strerror(rc);
    bool local = t->end == END_WRITE || t->end == END_NO_SPACE || t->end == END_CANCELLED;
    t->pull->fault = local ? SIPP_PULL_FAULT_NONE : SIPP_PULL_FAULT_SOURCE;
    if (t->end == END_NONE && rc == CURLE_COULDNT_CONNECT && t->pull->refused[0]) {
        t->pull->fault = SIPP_PULL_FAULT_REFUSED;
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                         "%s: refused to connect to %s, which is not a public address (loopback, private, "
                         "link-local or reserved); this pull takes public sources only",
                         t->url, t->pull->refused);
    }
    if (t->end == END_NONE && rc == CURLE_UNSUPPORTED_PROTOCOL && t->pull->params->public_only) {
        t->pull->fault = SIPP_PULL_FAULT_REFUSED;
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                         "%s: %s; this pull takes https only, redirects included", t->url, why);
    }
    switch (t->end) {
    case END_HTTP:
        if (t->status == 404)
            return sipp_fail(errbuf, SIPP_ERR_NOT_FOUND, "%s: not found (HTTP 404); check the URL", t->url);
        if (t->status == 401 || t->status == 403)
            return sipp_fail(
                errbuf, SIPP_ERR_IO,
                "%s: access denied (HTTP %ld); a gated Hugging Face model needs HF_TOKEN set to a token "
                "that has accepted its license",
                t->url, t->status);
        return sipp_fail(errbuf, SIPP_ERR_IO, "%s: the server answered HTTP %ld", t->url, t->status);
    case END_WRITE:
        return sipp_fail(
            errbuf, SIPP_ERR_IO,
            "cannot write '%s': %s; free some space (or fix the error), then run the same pull again to "
            "resume",
            t->part_path, strerror(t->write_errno));
    case END_NO_SPACE:
        return sipp_fail(
            errbuf, SIPP_ERR_IO,
            "not enough space in '%s' for %s: it needs %llu more bytes; free some space, then run the "
            "same pull again",
            t->part_dir, t->file, (unsigned long long)(t->total - t->offset));
    case END_BAD_MAGIC:
        if (t->pull->whisper)
            return sipp_fail(
                errbuf, SIPP_ERR_MODEL,
                "%s is not a whisper.cpp model (it does not start with whisper.cpp's ggml magic%s); "
                "nothing was kept. Check the URL: it must point at the ggml-*.bin file itself",
                t->url, memcmp(t->head, GGUF_MAGIC, GGUF_MAGIC_LEN) == 0 ? ", it is a GGUF file" : "");
        return sipp_fail(
            errbuf, SIPP_ERR_MODEL,
            "%s is not a GGUF file (it does not start with 'GGUF'); nothing was kept. Check the URL: "
            "it must point at the .gguf file itself",
            t->url);
    case END_CANCELLED:
        return sipp_fail(
            errbuf, SIPP_ERR_CANCELLED,
            "the pull was interrupted; %llu bytes of %s are kept in %s, run the same pull again to resume",
            (unsigned long long)t->offset, t->file, t->part_dir);
    default: break;
    }
    switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
        return sipp_fail(errbuf, SIPP_ERR_IO,
                         "cannot reach %s: %s; check the URL and the network (or the proxy)", t->url, why);
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CONNECT_ERROR:
        return sipp_fail(
            errbuf, SIPP_ERR_IO,
            "TLS with %s failed: %s; set CURL_CA_BUNDLE or SSL_CERT_FILE if a proxy re-signs traffic", t->url,
            why);
    case CURLE_TOO_MANY_REDIRECTS: return sipp_fail(errbuf, SIPP_ERR_IO, "%s: too many redirects", t->url);
    default:
        if (transient(rc))
            return sipp_fail(
                errbuf, SIPP_ERR_IO,
                "downloading %s broke off: %s; %llu bytes are kept, run the same pull again to resume",
                t->url, why, (unsigned long long)t->offset);
        return sipp_fail(errbuf, SIPP_ERR_IO, "downloading %s failed: %s", t->url, why);
    }
}

/* Reads the URL and ETag a .part belongs to; false when there is no record. */
static bool part_meta_read(const char *part_path, char *url, size_t url_cap, char *etag, size_t etag_cap) {
    char path[PATH_MAX];
    sipp_pathf(path, sizeof path, "%s%s", part_path, PART_META_EXT);
    json_t *j = json_load_file(path, 0, NULL);
    const char *u = json_string_value(json_object_get(j, "url"));
    const char *e = json_string_value(json_object_get(j, "etag"));
    bool ok = u != NULL;
    if (ok) {
        sipp_strlcpy(url, u, url_cap);
        sipp_strlcpy(etag, e ? e : "", etag_cap);
    }
    json_decref(j);
    return ok;
}

/* Open: the .part, locked against another pull of the same file, and the hash it feeds. A failure
 * here leaves the .part alone: another pull may be writing it. */
static sipp_status part_open(transfer *t, char *errbuf) {
    t->fd = open(t->part_path, O_RDWR | O_CREAT | O_CLOEXEC, FILE_MODE);
    if (t->fd < 0)
        return sipp_fail(errbuf, SIPP_ERR_IO, "cannot write '%s': %s", t->part_path, strerror(errno));
    /* One pull per file at a time: the lock dies with the process, so a killed pull never blocks. */
    if (flock(t->fd, LOCK_EX | LOCK_NB) != 0) {
        close(t->fd);
        t->fd = -1;
        return sipp_fail(errbuf, SIPP_ERR_BUSY,
                         "another sipp pull is downloading %s (%s is locked); wait for it", t->file,
                         t->part_path);
    }
    t->hash = sipp_sha256_new();
    if (!t->hash) {
        close(t->fd);
        t->fd = -1;
        return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory");
    }
    return SIPP_OK;
}

/* Resume: a .part a pull of the same URL left is kept and hashed (the next request asks for the rest);
 * any other is emptied, and so is one that does not start as a GGUF file does. */
static sipp_status part_resume(transfer *t, char *errbuf) {
    struct stat sb;
    char part_url[SIPP_URL_MAX];
    if (fstat(t->fd, &sb) == 0 && sb.st_size > 0) {
        if (part_meta_read(t->part_path, part_url, sizeof part_url, t->etag, sizeof t->etag) &&
            strcmp(part_url, t->url) == 0) {
            t->offset = (uint64_t)sb.st_size;
            t->resumed = true;
            sipp_status st = sipp_sha256_add_file(t->hash, t->fd, t->offset, t->part_path, errbuf);
            if (st != SIPP_OK) return st;
        } else if (ftruncate(t->fd, 0) != 0) {
            return sipp_fail(errbuf, SIPP_ERR_IO, "cannot truncate '%s': %s", t->part_path, strerror(errno));
        }
    }
    if (t->offset == 0) return SIPP_OK;
    /* the magic check of on_write needs the first bytes; a .part that is not GGUF is worthless */
    size_t n = t->offset < GGUF_MAGIC_LEN ? (size_t)t->offset : GGUF_MAGIC_LEN;
    if (pread(t->fd, t->head, n, 0) == (ssize_t)n && memcmp(t->head, magic_of(t->pull), n) == 0)
        return SIPP_OK;
    t->resumed = false;
    if (!truncate_part(t))
        return sipp_fail(errbuf, SIPP_ERR_IO, "cannot truncate '%s': %s", t->part_path,
                         strerror(t->write_errno));
    return SIPP_OK;
}

/* A .part that cannot be trusted (not GGUF, the wrong digest) is closed and deleted. */
static void part_discard(transfer *t) {
    close(t->fd);
    t->fd = -1;
    part_delete(t->part_path);
}

/* Transfer: attempts until the body is complete. A response that cannot continue the .part starts
 * the file over (RESTARTS_MAX times); a transfer that broke off is retried from where it stopped (the
 * pull's retries, growing pauses); anything else fails. */
static sipp_status transfer_file(transfer *t, char *errbuf) {
    const sipp_pull_params *p = t->pull->params;
    int retries = p->retries < 0 ? 0 : p->retries > RETRIES_MAX ? RETRIES_MAX : p->retries;
    int tries = 0, restarts = 0, attempts = 0;
    char curl_err[CURL_ERROR_SIZE];
    for (;;) {
        uint64_t before = t->offset;
        CURLcode rc = attempt(t, p->source, curl_err);
        if (t->end == END_COMPLETE || (rc == CURLE_OK && t->end == END_NONE)) return SIPP_OK;
        if (t->end == END_RESTART && restarts < RESTARTS_MAX) {
            restarts++;
            t->note = "the server did not resume the download; starting over";
            t->resumed = false;
            if (truncate_part(t)) continue;
            t->end = END_WRITE;
            return transfer_error(t, rc, curl_err, errbuf);
        }
        if (t->end == END_BAD_MAGIC) {
            sipp_status st = transfer_error(t, rc, curl_err, errbuf);
            part_discard(t);
            return st;
        }
        if (t->end == END_NONE && transient(rc) && tries < retries && ++attempts < ATTEMPTS_MAX) {
            /* a transfer that made progress earns its retries back: only a stuck one runs out */
            tries = t->offset >= before + PROGRESS_BYTES ? 1 : tries + 1;
            t->note = "the connection broke off; resuming";
            if (!report(t, false)) {
                t->end = END_CANCELLED;
                return transfer_error(t, rc, curl_err, errbuf);
            }
            sleep_ms(RETRY_DELAY_MS * tries);
            continue;
        }
        return transfer_error(t, rc, curl_err, errbuf);
    }
}

/* Check: the whole file arrived and is on disk, its SHA-256 is the expected one (when one is known),
 * and it reads as GGUF; a file that fails the last two is deleted. On success *size and sha hold the
 * file's. */
static sipp_status part_check(transfer *t, const char *expected, char sha[SIPP_SHA256_HEX], uint64_t *size,
                              bool *resumed, char *errbuf) {
    pull_state *ps = t->pull;
    if (t->total && t->offset != t->total) {
        ps->fault = SIPP_PULL_FAULT_SOURCE;
        return sipp_fail(errbuf, SIPP_ERR_IO,
                         "%s: got %llu bytes, the server announced %llu; run the same pull again", t->url,
                         (unsigned long long)t->offset, (unsigned long long)t->total);
    }
    if (fsync(t->fd) != 0)
        return sipp_fail(errbuf, SIPP_ERR_IO, "cannot write '%s': %s", t->part_path, strerror(errno));
    sipp_sha256_final(t->hash, sha);
    *size = t->offset;
    *resumed = t->resumed;
    report(t, true);
    if (expected && strcmp(expected, sha) != 0) {
        part_discard(t);
        ps->fault = SIPP_PULL_FAULT_SOURCE;
        return sipp_fail(
            errbuf, SIPP_ERR_MODEL,
            "sha256 mismatch for %s: expected %s, got %s; the download was deleted. Check the URL and the "
            "expected hash",
            t->file, expected, sha);
    }
    char check_err[SIPP_ERROR_SIZE];
    sipp_whisper_hparams h;
    sipp_status checked = ps->whisper ? sipp_whisper_file_check(t->part_path, &h, NULL, check_err)
                                      : sipp_gguf_check(t->part_path, check_err);
    if (checked != SIPP_OK) {
        part_discard(t);
        ps->fault = SIPP_PULL_FAULT_SOURCE;
        return sipp_fail(errbuf, SIPP_ERR_MODEL,
                         "the download from %s is not a usable %s file, so it was deleted: %s", t->url,
                         ps->whisper ? "whisper.cpp model" : "GGUF", check_err);
    }
    return SIPP_OK;
}

/* Downloads one file into its .part and checks it: open, resume, transfer, check. On success *size
 * and sha hold the file's. */
static sipp_status fetch(pull_state *ps, int index, const char *file, const char *url, const char *part_dir,
                         const char *expected, char sha[SIPP_SHA256_HEX], uint64_t *size, bool *resumed,
                         char *errbuf) {
    char part_path[PATH_MAX];
    sipp_pathf(part_path, sizeof part_path, "%s/%s%s", part_dir, file, SIPP_STORE_PART_EXT);
    transfer t = {
        .pull = ps, .index = index, .file = file, .url = url, .part_path = part_path, .part_dir = part_dir};
    sipp_status st = part_open(&t, errbuf);
    if (st != SIPP_OK) return st;
    if ((st = part_resume(&t, errbuf)) == SIPP_OK && (st = transfer_file(&t, errbuf)) == SIPP_OK)
        st = part_check(&t, expected, sha, size, resumed, errbuf);
    if (t.fd >= 0) close(t.fd);
    /* a failure before the first byte leaves nothing worth resuming */
    if (st != SIPP_OK && t.offset == 0) part_delete(part_path);
    sipp_sha256_free(t.hash);
    return st;
}

/* Splits "a,b,c" into n digests; false with a message when the list does not fit n files. */
static bool parse_expected(const char *list, int n, char (*out)[SIPP_SHA256_HEX], char *errbuf) {
    const char *p = list;
    for (int i = 0; i < n; i++) {
        size_t len = strcspn(p, ",");
        char one[SIPP_SHA256_HEX + 1];
        if (len >= sizeof one) len = sizeof one - 1;
        memcpy(one, p, len);
        one[len] = '\0';
        if (!sipp_sha256_valid(one)) {
            sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "--sha256: '%s' is not 64 hex digits", one);
            return false;
        }
        sipp_sha256_normalize(one, out[i]);
        p += strcspn(p, ",");
        if (*p == ',')
            p++;
        else if (i + 1 < n) {
            sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                      "--sha256: the split set has %d files; give %d digests separated by commas", n, n);
            return false;
        }
    }
    if (*p) {
        sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "--sha256: %d digest%s expected, more given", n,
                  n == 1 ? "" : "s");
        return false;
    }
    return true;
}

static void fsync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* Moves one checked .part into the store (keep_existing: never over a file that is there). */
static sipp_status install_file(const char *dir, const char *part_dir, sipp_store_file *f, bool keep_existing,
                                sipp_pull_result *r, char *errbuf) {
    char path[PATH_MAX], part[PATH_MAX];
    sipp_pathf(part, sizeof part, "%s/%s%s", part_dir, f->file, SIPP_STORE_PART_EXT);
    sipp_pathf(path, sizeof path, "%s/%s", dir, f->file);
    int moved =
        keep_existing ? renameat2(AT_FDCWD, part, AT_FDCWD, path, RENAME_NOREPLACE) : rename(part, path);
    if (moved != 0 && keep_existing && errno == EEXIST) {
        r->fault = SIPP_PULL_FAULT_EXISTS;
        sipp_strlcpy(r->path, path, sizeof r->path);
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                         "'%s' appeared in the store during the pull; it was not replaced", path);
    }
    if (moved != 0)
        return sipp_fail(errbuf, SIPP_ERR_IO, "cannot move '%s' to '%s': %s", part, path, strerror(errno));
    sipp_pathf(part, sizeof part, "%s/%s%s%s", part_dir, f->file, SIPP_STORE_PART_EXT, PART_META_EXT);
    unlink(part);
    struct stat sb;
    if (stat(path, &sb) == 0) f->mtime_ns = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
    return SIPP_OK;
}

/* Moves the checked .part files into the store and writes the metadata; replaces an older model of
 * the same name, unless keep_existing (then a file in the way fails the install with fault EXISTS). */
static sipp_status install(const char *dir, const char *part_dir, sipp_store_model *m, bool keep_existing,
                           sipp_pull_result *r, char *errbuf) {
    sipp_store_model old;
    char ignored[SIPP_ERROR_SIZE];
    bool had_old = sipp_store_lookup(dir, m->name, &old, ignored) == SIPP_OK;
    char path[PATH_MAX];
    sipp_status st = SIPP_OK;
    if (had_old && old.managed) {
        /* the old metadata goes first, so that no listing shows it with new files */
        sipp_pathf(path, sizeof path, "%s/%s%s", dir, m->name, SIPP_STORE_META_EXT);
        unlink(path);
    }
    for (int i = 0; i < m->n_files; i++)
        if ((st = install_file(dir, part_dir, &m->files[i], keep_existing, r, errbuf)) != SIPP_OK) goto out;
    if (m->mmproj && (st = install_file(dir, part_dir, m->mmproj, keep_existing, r, errbuf)) != SIPP_OK)
        goto out;
    if (had_old && old.mmproj && !m->mmproj) { /* the new model has none: the old one's goes */
        sipp_pathf(path, sizeof path, "%s/%s", dir, old.mmproj->file);
        unlink(path);
    }
    for (int i = 0; had_old && i < old.n_files; i++) {
        bool kept = false;
        for (int j = 0; j < m->n_files; j++)
            kept |= strcmp(old.files[i].file, m->files[j].file) == 0;
        if (kept) continue;
        sipp_pathf(path, sizeof path, "%s/%s", dir, old.files[i].file);
        unlink(path);
    }
    fsync_dir(dir);
    st = sipp_store_meta_write(dir, m, errbuf);
    fsync_dir(dir);
    r->replaced = had_old && (!old.managed || strcmp(old.files[0].url, m->files[0].url) != 0);
out:
    if (had_old) sipp_store_model_clear(&old);
    return st;
}

/* The store already has this model from this URL, complete. */
static bool already_there(const char *dir, const char *name, const char *url, int n_files,
                          sipp_store_model *out) {
    char ignored[SIPP_ERROR_SIZE];
    if (sipp_store_lookup(dir, name, out, ignored) != SIPP_OK) return false;
    bool same = out->managed && out->n_files == n_files && strcmp(out->files[0].url, url) == 0;
    for (int i = 0; same && i < out->n_files; i++) {
        char path[PATH_MAX];
        struct stat sb;
        sipp_pathf(path, sizeof path, "%s/%s", dir, out->files[i].file);
        same = stat(path, &sb) == 0 && (uint64_t)sb.st_size == out->files[i].size;
    }
    if (!same) sipp_store_model_clear(out);
    return same;
}

/* keep_existing: SIPP_OK when the store has no model called name and no file the pull would write;
 * otherwise fault EXISTS with r->path naming what is there. */
static sipp_status check_not_there(const char *dir, const char *name, int n_files, bool whisper,
                                   sipp_pull_result *r, char *errbuf) {
    sipp_store_model old;
    char ignored[SIPP_ERROR_SIZE], file[PATH_MAX], path[PATH_MAX];
    path[0] = '\0';
    if (sipp_store_lookup(dir, name, &old, ignored) == SIPP_OK) {
        sipp_strlcpy(path, old.path, sizeof path);
        sipp_store_model_clear(&old);
    }
    for (int i = 0; !path[0] && i <= n_files; i++) { /* the files, then the projector's */
        struct stat sb;
        if (i < n_files && whisper)
            sipp_store_whisper_file_name(name, file, sizeof file);
        else if (i < n_files)
            sipp_store_file_name(name, i + 1, n_files, file, sizeof file);
        else
            sipp_store_mmproj_file_name(name, file, sizeof file);
        sipp_pathf(path, sizeof path, "%s/%s", dir, file);
        if (lstat(path, &sb) != 0) path[0] = '\0';
    }
    if (!path[0]) return SIPP_OK;
    r->fault = SIPP_PULL_FAULT_EXISTS;
    sipp_strlcpy(r->path, path, sizeof r->path);
    return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                     "model '%s' is already in the store (%s) from another source; this pull does not "
                     "replace it",
                     name, path);
}

/* What a pull settles before it downloads anything. */
typedef struct {
    const sipp_catalog_entry *entry; /* the catalog's, when the source is in it */
    char url[SIPP_URL_MAX];          /* shard 1's, whatever shard the source names */
    int n_files;
    bool have_expected;
    char expected[SIPP_SPLIT_MAX][SIPP_SHA256_HEX]; /* one per file, when have_expected */
    char mmproj_url[SIPP_URL_MAX];                  /* the catalog entry's projector; "" when none */
    const char *mmproj_expected;                    /* its digest; NULL when unknown */
    bool whisper; /* a whisper.cpp model: the entry's recipe, or without one a URL of a .bin */
} pull_plan;

/* The source: a URL (hf:// made https://) or a catalog name, refused unless https for public_only,
 * and the split set it belongs to. */
static sipp_status resolve_source(const sipp_pull_params *p, const sipp_catalog *cat, pull_plan *pl,
                                  sipp_pull_result *r, char *errbuf) {
    sipp_status st;
    if (sipp_source_is_url(p->source)) {
        if ((st = sipp_source_to_url(p->source, pl->url, sizeof pl->url, errbuf)) != SIPP_OK) return st;
        pl->entry = sipp_catalog_find_url(cat, pl->url);
    } else {
        pl->entry = sipp_catalog_find(cat, p->source);
        if (!pl->entry)
            return sipp_fail(errbuf, SIPP_ERR_NOT_FOUND,
                             "'%s' is neither a URL nor a model in the catalog%s%s; give an http(s):// or "
                             "hf://ORG/REPO/FILE.gguf URL, or see sipp models list --all",
                             p->source,
                             cat->shipped_path[0] ? "" : " (no shipped catalog was found; set SIPP_CATALOG)",
                             "");
        if ((st = sipp_source_to_url(pl->entry->url, pl->url, sizeof pl->url, errbuf)) != SIPP_OK) return st;
    }
    if (p->public_only && strncasecmp(pl->url, "https://", strlen("https://")) != 0) {
        r->fault = SIPP_PULL_FAULT_REFUSED;
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                         "'%s' is not an https:// URL; this pull takes https:// and hf:// sources only",
                         pl->url);
    }
    if (pl->entry && *pl->entry->mmproj) { /* the projector published with it */
        if ((st = sipp_catalog_mmproj_url(pl->entry, pl->entry->mmproj, pl->mmproj_url, sizeof pl->mmproj_url,
                                          errbuf)) != SIPP_OK)
            return st;
        if (p->public_only && strncasecmp(pl->mmproj_url, "https://", strlen("https://")) != 0) {
            r->fault = SIPP_PULL_FAULT_REFUSED;
            return sipp_fail(
                errbuf, SIPP_ERR_INVALID_ARGUMENT,
                "the projector's '%s' is not an https:// URL; this pull takes https:// and hf:// "
                "sources only",
                pl->mmproj_url);
        }
        pl->mmproj_expected = *pl->entry->mmproj_sha256 ? pl->entry->mmproj_sha256 : NULL;
    }
    pl->whisper = pl->entry ? pl->entry->recipe && strcmp(pl->entry->recipe, SIPP_RECIPE_WHISPERCPP) == 0
                            : sipp_source_is_whisper_file(pl->url);
    /* the set: shard 1 first, whatever shard the URL names */
    char file[SIPP_URL_MAX];
    sipp_url_file_name(pl->url, file, sizeof file);
    sipp_split sp;
    pl->n_files = 1;
    if (!pl->whisper && sipp_split_parse(file, &sp)) {
        pl->n_files = sp.count;
        if (sp.index != 1) sipp_split_sibling(pl->url, 1, pl->url, sizeof pl->url);
    }
    return SIPP_OK;
}

/* The model's name in the store: --name, else the catalog's, else one made from the URL's file. */
static sipp_status resolve_name(const sipp_pull_params *p, const pull_plan *pl, sipp_store_model *m,
                                char *errbuf) {
    if (p->name) {
        if (!sipp_name_valid(p->name))
            return sipp_fail(
                errbuf, SIPP_ERR_INVALID_ARGUMENT,
                "--name '%s' is not a model name (letters, digits, '.', '_', '-'; at most %d bytes; not "
                "ending in .gguf)",
                p->name, SIPP_NAME_MAX);
        sipp_strlcpy(m->name, p->name, sizeof m->name);
        return SIPP_OK;
    }
    if (pl->entry && !sipp_source_is_url(p->source)) { /* a URL is named by its file, even when cataloged */
        sipp_strlcpy(m->name, pl->entry->name, sizeof m->name);
        return SIPP_OK;
    }
    return sipp_source_default_name(pl->url, m->name, sizeof m->name, errbuf);
}

/* The digests the files must have: --sha256's, else the catalog's when it has one per file. */
static sipp_status resolve_expected(const sipp_pull_params *p, pull_plan *pl, char *errbuf) {
    if (p->sha256) {
        if (!parse_expected(p->sha256, pl->n_files, pl->expected, errbuf)) return SIPP_ERR_INVALID_ARGUMENT;
        pl->have_expected = true;
    } else if (pl->entry && pl->entry->n_sha256 == (size_t)pl->n_files) {
        for (int i = 0; i < pl->n_files; i++)
            sipp_strlcpy(pl->expected[i], pl->entry->sha256[i], SIPP_SHA256_HEX);
        pl->have_expected = true;
    }
    return SIPP_OK;
}

/* The store has the model from this URL already: the result describes it, and a digest given now
 * must still hold for what is there. */
static sipp_status report_already(const sipp_store_model *have, const char *name, const pull_plan *pl,
                                  sipp_pull_result *r, char *errbuf) {
    sipp_status st = SIPP_OK;
    r->already = true;
    r->size = have->size;
    r->verified = have->verified;
    sipp_strlcpy(r->path, have->path, sizeof r->path);
    sipp_strlcpy(r->sha256, have->files[0].sha256, sizeof r->sha256);
    for (int i = 0; pl->have_expected && i < pl->n_files; i++)
        if (strcmp(have->files[i].sha256, pl->expected[i]) != 0)
            st =
                sipp_fail(errbuf, SIPP_ERR_MODEL,
                          "model '%s' is in the store with sha256 %s for %s, not the expected %s; pull again "
                          "with --force",
                          name, have->files[i].sha256[0] ? have->files[i].sha256 : "(unknown)",
                          have->files[i].file, pl->expected[i]);
    return st;
}

/* Downloads every file of the set into partial/, checked, and fills m's files with them. */
static sipp_status fetch_all(pull_state *ps, const pull_plan *pl, const char *part_dir, sipp_store_model *m,
                             sipp_pull_result *r, char *errbuf) {
    m->source = strdup(ps->params->source);
    m->files = calloc((size_t)pl->n_files, sizeof *m->files);
    if (!m->source || !m->files) return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory");
    m->n_files = pl->n_files;
    m->managed = true;
    m->verified = pl->have_expected;
    sipp_strlcpy(m->recipe, pl->whisper ? SIPP_RECIPE_WHISPERCPP : SIPP_RECIPE_LLAMACPP, sizeof m->recipe);
    for (int i = 0; i < pl->n_files; i++) {
        sipp_store_file *f = &m->files[i];
        if (pl->whisper)
            sipp_store_whisper_file_name(m->name, f->file, sizeof f->file);
        else
            sipp_store_file_name(m->name, i + 1, pl->n_files, f->file, sizeof f->file);
        char shard_url[SIPP_URL_MAX];
        if (pl->n_files > 1)
            sipp_split_sibling(pl->url, i + 1, shard_url, sizeof shard_url);
        else
            sipp_strlcpy(shard_url, pl->url, sizeof shard_url);
        f->url = strdup(shard_url);
        if (!f->url) return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory");
        bool resumed = false;
        sipp_status st =
            fetch(ps, i + 1, f->file, f->url, part_dir, pl->have_expected ? pl->expected[i] : NULL, f->sha256,
                  &f->size, &resumed, errbuf);
        if (st != SIPP_OK) {
            r->fault = ps->fault;
            return st;
        }
        r->resumed |= resumed;
        m->size += f->size;
    }
    return SIPP_OK;
}

/* Downloads the catalog entry's projector into partial/ as file `index` of the pull, checked (its
 * digest when known, GGUF, a projector: general.architecture "clip"), and sets m->mmproj. */
static sipp_status fetch_mmproj(pull_state *ps, const pull_plan *pl, const char *part_dir, int index,
                                sipp_store_model *m, sipp_pull_result *r, char *errbuf) {
    sipp_store_file *f = m->mmproj = calloc(1, sizeof *m->mmproj);
    if (!f || !(f->url = strdup(pl->mmproj_url)))
        return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory");
    sipp_store_mmproj_file_name(m->name, f->file, sizeof f->file);
    bool resumed = false;
    sipp_status st = fetch(ps, index, f->file, f->url, part_dir, pl->mmproj_expected, f->sha256, &f->size,
                           &resumed, errbuf);
    if (st != SIPP_OK) {
        r->fault = ps->fault;
        char why[SIPP_ERROR_SIZE];
        sipp_strlcpy(why, errbuf ? errbuf : "", sizeof why);
        return sipp_fail(errbuf, st, "the model's projector: %s", why);
    }
    r->resumed |= resumed;
    char part[PATH_MAX];
    sipp_pathf(part, sizeof part, "%s/%s%s", part_dir, f->file, SIPP_STORE_PART_EXT);
    sipp_gguf_info *g = calloc(1, sizeof *g);
    if (!g) return sipp_fail(errbuf, SIPP_ERR_NO_MEMORY, "out of memory");
    if ((st = sipp_gguf_inspect(part, g, errbuf)) == SIPP_OK && !g->projector) {
        r->fault = SIPP_PULL_FAULT_SOURCE;
        st =
            sipp_fail(errbuf, SIPP_ERR_MODEL,
                      "%s is not a multimodal projector (its architecture is '%s', a projector's is 'clip'); "
                      "nothing was kept. Check the catalog's \"mmproj\"",
                      f->url, g->architecture);
        part_delete(part);
    }
    free(g);
    return st;
}

/* The store has the projector the plan wants (or the plan wants none). */
static bool mmproj_there(const char *dir, const sipp_store_model *have, const pull_plan *pl) {
    if (!*pl->mmproj_url) return true;
    if (!have->mmproj || strcmp(have->mmproj->url, pl->mmproj_url) != 0) return false;
    char path[PATH_MAX];
    struct stat sb;
    sipp_pathf(path, sizeof path, "%s/%s", dir, have->mmproj->file);
    return stat(path, &sb) == 0 && (uint64_t)sb.st_size == have->mmproj->size;
}

/* The store has the model but not its projector: only the projector is pulled, and added to the
 * model's metadata. */
static sipp_status pull_mmproj_only(const sipp_pull_params *p, const pull_plan *pl, const char *dir,
                                    sipp_store_model *have, sipp_pull_result *r, char *errbuf) {
    char part_dir[PATH_MAX];
    sipp_status st = sipp_store_ensure(dir, errbuf);
    if (st != SIPP_OK) return st;
    sipp_pathf(part_dir, sizeof part_dir, "%s/%s", dir, SIPP_STORE_PARTIAL_DIR);
    if (have->mmproj) free(have->mmproj->url);
    free(have->mmproj);
    have->mmproj = NULL;
    pull_state ps = {.params = p, .n_files = 1, .start_ms = sipp_now_ms()};
    if ((st = fetch_mmproj(&ps, pl, part_dir, 1, have, r, errbuf)) != SIPP_OK) return st;
    if ((st = install_file(dir, part_dir, have->mmproj, p->keep_existing, r, errbuf)) != SIPP_OK) return st;
    fsync_dir(dir);
    if ((st = sipp_store_meta_write(dir, have, errbuf)) != SIPP_OK) return st;
    sipp_strlcpy(r->path, have->path, sizeof r->path);
    sipp_strlcpy(r->sha256, have->files[0].sha256, sizeof r->sha256);
    r->size = have->size;
    r->verified = have->verified;
    r->received = ps.received;
    r->seconds = (sipp_now_ms() - ps.start_ms) / 1e3;
    return SIPP_OK;
}

/* A pull: resolve the source, the name and the digests; stop if the store has it already; fetch
 * every file; install them. */
sipp_status sipp_store_pull(const sipp_pull_params *p, sipp_pull_result *r, char *errbuf) {
    memset(r, 0, sizeof *r);
    if (!p || !p->source || !*p->source)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "nothing to pull");
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK)
        return sipp_fail(errbuf, SIPP_ERR_INTERNAL, "libcurl failed to start: %s",
                         curl_easy_strerror(curl_init_rc));

    sipp_catalog *cat = NULL;
    sipp_status st = sipp_catalog_load(&cat, errbuf);
    if (st != SIPP_OK) return st;
    pull_plan pl = {0};
    sipp_store_model m = {0};
    char dir[PATH_MAX], part_dir[PATH_MAX];
    if ((st = resolve_source(p, cat, &pl, r, errbuf)) != SIPP_OK) goto out;
    if ((st = resolve_name(p, &pl, &m, errbuf)) != SIPP_OK) goto out;
    if ((st = resolve_expected(p, &pl, errbuf)) != SIPP_OK) goto out;

    if ((st = sipp_store_dir(dir, sizeof dir, errbuf)) != SIPP_OK) goto out;
    sipp_strlcpy(r->name, m.name, sizeof r->name);
    sipp_strlcpy(r->url, pl.url, sizeof r->url);
    r->n_files = pl.n_files;
    sipp_store_model have;
    if (!p->force && already_there(dir, m.name, pl.url, pl.n_files, &have)) {
        st = report_already(&have, m.name, &pl, r, errbuf);
        if (st == SIPP_OK && !mmproj_there(dir, &have, &pl)) {
            r->already = false;
            st = pull_mmproj_only(p, &pl, dir, &have, r, errbuf);
        }
        sipp_store_model_clear(&have);
        goto out;
    }
    if (p->keep_existing && (st = check_not_there(dir, m.name, pl.n_files, pl.whisper, r, errbuf)) != SIPP_OK)
        goto out;
    if ((st = sipp_store_ensure(dir, errbuf)) != SIPP_OK) goto out;
    sipp_pathf(part_dir, sizeof part_dir, "%s/%s", dir, SIPP_STORE_PARTIAL_DIR);

    pull_state ps = {.params = p,
                     .n_files = pl.n_files + (*pl.mmproj_url ? 1 : 0),
                     .start_ms = sipp_now_ms(),
                     .whisper = pl.whisper};
    if ((st = fetch_all(&ps, &pl, part_dir, &m, r, errbuf)) != SIPP_OK) goto out;
    if (*pl.mmproj_url && (st = fetch_mmproj(&ps, &pl, part_dir, pl.n_files + 1, &m, r, errbuf)) != SIPP_OK)
        goto out;
    sipp_store_now(m.pulled_at);
    if ((st = install(dir, part_dir, &m, p->keep_existing, r, errbuf)) != SIPP_OK) goto out;
    sipp_pathf(r->path, sizeof r->path, "%s/%s", dir, m.files[0].file);
    r->size = m.size;
    r->received = ps.received;
    r->verified = m.verified;
    sipp_strlcpy(r->sha256, m.files[0].sha256, sizeof r->sha256);
    r->seconds = (sipp_now_ms() - ps.start_ms) / 1e3;
out:
    sipp_store_model_clear(&m);
    sipp_catalog_free(cat);
    return st;
}
