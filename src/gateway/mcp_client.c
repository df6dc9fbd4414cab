/*
 * mcp_client.c: the gateway as an MCP client of the [[mcp]] servers (docs/gateway.md, "MCP").
 *
 * Two transports. A `command` server is a child process started with posix_spawn (in the config
 * file's directory, with the gateway's environment plus the entry's env), spoken to in JSON-RPC
 * messages of one line each over its stdin and stdout; its stderr is the gateway's. A `url` server
 * is MCP's streamable HTTP: each message is a POST (libcurl, as upstream.c) whose answer is one
 * JSON message or a text/event-stream of them; the Mcp-Session-Id the server gives at
 * initialize goes with every later request.
 *
 * A server is started on its first use, not with the gateway: initialize, then
 * notifications/initialized, then tools/list (every page), whose tools are kept until the server
 * stops. tools/call runs one call at a time per server (the server's lock, taken within the call's
 * own timeout), each bounded: a deadline (the entry's timeout_seconds, or less when the request has
 * less left), and a message size (GW_MCP_MAX_MESSAGE). A server that misses the deadline, exits,
 * or says something that is not JSON-RPC ends that call with an error and is stopped (its child
 * killed by pid, its HTTP session forgotten), so the next use starts it afresh; a JSON-RPC error
 * reply ends only the call. Nothing a server does can end the gateway: every byte it sends is judged
 * by mcp_rpc.c (fuzzed) before it is read.
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gateway/mcp_client.h"
#include "gateway/mcp_rpc.h"

#define GW_MCP_MAX_MESSAGE ((size_t)4 << 20) /* one message from a server: 4 MiB */
#define GW_MCP_MAX_PAGES 16                  /* of tools/list */
#define GW_MCP_READ_CHUNK 65536
#define GW_MCP_STOP_GRACE_MS 200 /* a child whose stdin closed has this long to exit before SIGKILL */
#define GW_MCP_PROTOCOL "2025-06-18"
#define GW_MCP_CONNECT_TIMEOUT_MS 5000
#define GW_MS_PER_S 1000
#define GW_HTTP_NOT_FOUND 404
#define GW_HTTP_OK_MIN 200
#define GW_HTTP_OK_MAX 299
#define GW_SESSION_SIZE 256

extern char **environ;

struct gw_mcp_server {
    gw_mcp_config cfg; /* copied: the strings are owned here */
    char *dir;         /* where a child starts: the config file's directory */
    pthread_mutex_t mu;
    bool ready; /* initialized, tools listed */
    json_t *tools;
    long long next_id;
    /* stdio */
    pid_t pid;
    int to_child, from_child;
    sipp_buf in; /* bytes read past the last line */
    /* streamable HTTP */
    char session[GW_SESSION_SIZE];
};

struct gw_mcp {
    gw_mcp_server *servers;
    size_t n;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

/* ---- the set ------------------------------------------------------------------------------------ */

static char **copy_strv(char **v, size_t n) {
    char **out = calloc(n + 1, sizeof *out);
    for (size_t i = 0; out && i < n; i++)
        out[i] = strdup(v[i]);
    return out;
}

static void free_strv(char **v, size_t n) {
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

static char *config_dir(const char *path) {
    if (!path) return NULL;
    char *dir = strdup(path);
    char *slash = dir ? strrchr(dir, '/') : NULL;
    if (slash) {
        *slash = 0;
        if (!*dir) slash[0] = '/', slash[1] = 0;
    } else if (dir) {
        free(dir);
        dir = strdup(".");
    }
    return dir;
}

static void server_init(gw_mcp_server *s, const gw_mcp_config *c, const char *path) {
    s->cfg = *c;
    s->cfg.name = strdup(c->name);
    s->cfg.url = c->url ? strdup(c->url) : NULL;
    s->cfg.command = copy_strv(c->command, c->n_command);
    s->cfg.allowed_tools = copy_strv(c->allowed_tools, c->n_allowed_tools);
    s->cfg.env = copy_strv(c->env, c->n_env);
    s->dir = config_dir(path);
    pthread_mutex_init(&s->mu, NULL);
    s->pid = -1;
    s->to_child = s->from_child = -1;
}

gw_mcp *gw_mcp_new(const gw_config *cfg) {
    pthread_once(&curl_once, curl_init);
    gw_mcp *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->servers = calloc(cfg->n_mcp ? cfg->n_mcp : 1, sizeof *m->servers);
    if (!m->servers) {
        free(m);
        return NULL;
    }
    for (size_t i = 0; i < cfg->n_mcp; i++)
        server_init(&m->servers[m->n++], &cfg->mcp[i], cfg->path);
    return m;
}

static void stop(gw_mcp_server *s, bool graceful);

void gw_mcp_free(gw_mcp *m) {
    if (!m) return;
    for (size_t i = 0; i < m->n; i++) {
        gw_mcp_server *s = &m->servers[i];
        pthread_mutex_lock(&s->mu);
        stop(s, true);
        pthread_mutex_unlock(&s->mu);
        pthread_mutex_destroy(&s->mu);
        free(s->cfg.name);
        free(s->cfg.url);
        free_strv(s->cfg.command, s->cfg.n_command);
        free_strv(s->cfg.allowed_tools, s->cfg.n_allowed_tools);
        free_strv(s->cfg.env, s->cfg.n_env);
        free(s->dir);
        sipp_buf_free(&s->in);
    }
    free(m->servers);
    free(m);
}

size_t gw_mcp_count(const gw_mcp *m) { return m ? m->n : 0; }
gw_mcp_server *gw_mcp_at(gw_mcp *m, size_t i) { return m && i < m->n ? &m->servers[i] : NULL; }
const char *gw_mcp_name(const gw_mcp_server *s) { return s->cfg.name; }
const char *gw_mcp_url(const gw_mcp_server *s) { return s->cfg.url; }
int gw_mcp_timeout_ms(const gw_mcp_server *s) { return s->cfg.timeout_seconds * GW_MS_PER_S; }

gw_mcp_server *gw_mcp_find(gw_mcp *m, const char *name) {
    for (size_t i = 0; m && name && i < m->n; i++)
        if (strcmp(m->servers[i].cfg.name, name) == 0) return &m->servers[i];
    return NULL;
}

static json_t *strv_json(char **v, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_string(v[i]));
    return a;
}

json_t *gw_mcp_describe(const gw_mcp_server *s) {
    json_t *d = json_pack("{s:s, s:s, s:i}", "name", s->cfg.name, "transport", s->cfg.url ? "http" : "stdio",
                          "timeout_seconds", s->cfg.timeout_seconds);
    if (s->cfg.url)
        json_object_set_new(d, "url", json_string(s->cfg.url));
    else
        json_object_set_new(d, "command", strv_json(s->cfg.command, s->cfg.n_command));
    json_object_set_new(d, "allowed_tools",
                        s->cfg.n_allowed_tools ? strv_json(s->cfg.allowed_tools, s->cfg.n_allowed_tools)
                                               : json_null());
    return d;
}

/* ---- time --------------------------------------------------------------------------------------- */

static int ms_left(double deadline) {
    double left = deadline - sipp_now_ms();
    return left <= 0 ? 0 : left > INT_MAX ? INT_MAX : (int)left;
}

/* The server's lock, waited for until deadline. */
static bool lock_until(gw_mcp_server *s, double deadline) {
    struct timespec ts;
    sipp_deadline_in(&ts, CLOCK_REALTIME, ms_left(deadline));
    return pthread_mutex_timedlock(&s->mu, &ts) == 0;
}

/* ---- stdio: the child --------------------------------------------------------------------------- */

static void describe_exit(int status, char *out, size_t cap) {
    if (WIFEXITED(status))
        snprintf(out, cap, "exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(out, cap, "was killed by signal %d", WTERMSIG(status));
    else
        snprintf(out, cap, "stopped");
}

/* Waits up to ms for the child to exit; true (with its status) when it did. */
static bool reap(pid_t pid, int ms, int *status) {
    double end = sipp_now_ms() + ms;
    for (;;) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid || (r < 0 && errno != EINTR)) return true;
        if (sipp_now_ms() >= end) return false;
        usleep(GW_MS_PER_S * 5);
    }
}

/* Stops the server: a child is sent EOF on stdin (graceful) or nothing, then killed by its pid (its
 * process group too: a wrapper's own children) and reaped; an HTTP session is forgotten. */
static void stop(gw_mcp_server *s, bool graceful) {
    s->ready = false;
    json_decref(s->tools);
    s->tools = NULL;
    s->session[0] = 0;
    s->in.len = 0;
    if (s->to_child >= 0) close(s->to_child);
    if (s->from_child >= 0) close(s->from_child);
    s->to_child = s->from_child = -1;
    if (s->pid <= 0) return;
    int status;
    if (!graceful || !reap(s->pid, GW_MCP_STOP_GRACE_MS, &status)) {
        kill(-s->pid, SIGKILL);
        kill(s->pid, SIGKILL);
        reap(s->pid, INT_MAX, &status);
    }
    s->pid = -1;
}

/* The environment of the child: the gateway's, with the entry's env over it (malloc'd array). */
static char **child_env(const gw_mcp_server *s) {
    size_t n = 0;
    while (environ && environ[n])
        n++;
    char **env = calloc(n + s->cfg.n_env + 1, sizeof *env);
    size_t k = 0;
    for (size_t i = 0; env && i < n; i++) {
        bool replaced = false;
        for (size_t j = 0; j < s->cfg.n_env && !replaced; j++) {
            size_t key = strcspn(s->cfg.env[j], "=") + 1;
            replaced = strncmp(environ[i], s->cfg.env[j], key) == 0;
        }
        if (!replaced) env[k++] = environ[i];
    }
    for (size_t j = 0; env && j < s->cfg.n_env; j++)
        env[k++] = s->cfg.env[j];
    return env;
}

static int spawn_child(gw_mcp_server *s, int in_fd, int out_fd) {
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&at);
    posix_spawn_file_actions_adddup2(&fa, in_fd, STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&fa, out_fd, STDOUT_FILENO);
    if (s->dir) posix_spawn_file_actions_addchdir_np(&fa, s->dir);
    sigset_t def;
    sigemptyset(&def);
    sigaddset(&def, SIGPIPE); /* the gateway ignores it; the child gets the usual default */
    posix_spawnattr_setsigdefault(&at, &def);
    posix_spawnattr_setpgroup(&at, 0); /* its own group, killed whole by stop() */
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
    char **env = child_env(s);
    int rc = env ? posix_spawnp(&s->pid, s->cfg.command[0], &fa, &at, s->cfg.command, env) : ENOMEM;
    free(env);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    return rc;
}

static bool start_child(gw_mcp_server *s, char *err, size_t cap) {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0) {
        snprintf(err, cap, "cannot make a pipe: %s", strerror(errno));
        return false;
    }
    if (pipe2(out, O_CLOEXEC) != 0) {
        snprintf(err, cap, "cannot make a pipe: %s", strerror(errno));
        close(in[0]), close(in[1]);
        return false;
    }
    int rc = spawn_child(s, in[0], out[1]);
    close(in[0]);
    close(out[1]);
    if (rc != 0) {
        s->pid = -1;
        close(in[1]), close(out[0]);
        snprintf(err, cap, "cannot start '%s': %s (check the [[mcp]] command)", s->cfg.command[0],
                 strerror(rc));
        return false;
    }
    s->to_child = in[1];
    s->from_child = out[0];
    fcntl(s->to_child, F_SETFL, O_NONBLOCK);
    fcntl(s->from_child, F_SETFL, O_NONBLOCK);
    return true;
}

/* Why the child stopped talking: its exit status when it exited, else "closed its stdout". */
static void child_gone(gw_mcp_server *s, char *err, size_t cap) {
    int status = 0;
    char how[64] = "closed its stdout";
    if (s->pid > 0 && reap(s->pid, GW_MCP_STOP_GRACE_MS, &status)) {
        describe_exit(status, how, sizeof how);
        s->pid = -1;
    }
    snprintf(err, cap, "it %s", how);
}

static bool write_all(gw_mcp_server *s, const char *data, size_t len, double deadline, char *err,
                      size_t cap) {
    while (len) {
        ssize_t w = write(s->to_child, data, len);
        if (w > 0) {
            data += w, len -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno != EAGAIN) {
            child_gone(s, err, cap);
            return false;
        }
        struct pollfd p = {.fd = s->to_child, .events = POLLOUT};
        if (poll(&p, 1, ms_left(deadline)) == 0) {
            snprintf(err, cap, "it did not read its stdin in time");
            return false;
        }
    }
    return true;
}

/* The next line the child wrote (without its '\n', NUL-terminated, at the start of s->in), its
 * length in *n; false with err on a timeout, an exit or an oversized message. */
static bool read_line(gw_mcp_server *s, double deadline, size_t *n, char *err, size_t cap) {
    for (;;) {
        char *nl = s->in.len ? memchr(s->in.data, '\n', s->in.len) : NULL;
        if (nl) {
            *nl = 0;
            *n = (size_t)(nl - s->in.data);
            return true;
        }
        if (s->in.len > GW_MCP_MAX_MESSAGE) {
            snprintf(err, cap, "it sent a message over %zu bytes", GW_MCP_MAX_MESSAGE);
            return false;
        }
        struct pollfd p = {.fd = s->from_child, .events = POLLIN};
        int left = ms_left(deadline);
        if (left == 0 || poll(&p, 1, left) == 0) {
            snprintf(err, cap, "it did not answer within %.0f s", (double)s->cfg.timeout_seconds);
            return false;
        }
        char chunk[GW_MCP_READ_CHUNK];
        ssize_t r = read(s->from_child, chunk, sizeof chunk);
        if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) {
            child_gone(s, err, cap);
            return false;
        }
        if (r > 0 && !sipp_buf_append(&s->in, chunk, (size_t)r)) {
            snprintf(err, cap, "out of memory");
            return false;
        }
    }
}

/* Sends msg (one line) and, for a request (id > 0), reads lines until its reply. */
static gw_rpc_kind stdio_exchange(gw_mcp_server *s, const char *msg, long long id, double deadline,
                                  json_t **result, char *err, size_t cap) {
    if (!write_all(s, msg, strlen(msg), deadline, err, cap) || !write_all(s, "\n", 1, deadline, err, cap))
        return GW_RPC_JUNK;
    if (id <= 0) return GW_RPC_RESULT;
    for (;;) {
        size_t n = 0;
        if (!read_line(s, deadline, &n, err, cap)) return GW_RPC_JUNK;
        size_t len = n && s->in.data[n - 1] == '\r' ? n - 1 : n;
        gw_rpc_kind k = len ? gw_mcp_rpc_read(s->in.data, len, id, result, err, cap) : GW_RPC_OTHER;
        sipp_buf_consume(&s->in, n + 1);
        if (k != GW_RPC_OTHER) return k;
    }
}

/* ---- streamable HTTP ---------------------------------------------------------------------------- */

typedef struct http_reply {
    sipp_buf body;
    bool too_big;
    bool sse;
    long long id;  /* the request's; 0 for a notification */
    size_t whole;  /* an event stream: the bytes of the body that are whole events, read */
    bool answered; /* an event stream held the reply: the transfer was ended there */
    char session[GW_SESSION_SIZE];
} http_reply;

/* The end of the last whole event (a blank line) in body from from, or from when there is none. */
static size_t events_end(const sipp_buf *b, size_t from) {
    size_t end = from;
    for (size_t i = from; i + 1 < b->len; i++) {
        if (b->data[i] != '\n') continue;
        if (b->data[i + 1] == '\n')
            end = i + 2;
        else if (b->data[i + 1] == '\r' && i + 2 < b->len && b->data[i + 2] == '\n')
            end = i + 3;
    }
    return end;
}

/* Reads the events that arrived whole: a server may keep its stream open after the reply (MCP says it
 * SHOULD close it), so the reply, once in, ends the transfer rather than the timeout. */
static void read_new_events(http_reply *r) {
    size_t end = events_end(&r->body, r->whole), pos = r->whole;
    sipp_buf data = {0};
    char msg[SIPP_ERROR_SIZE];
    while (!r->answered && gw_mcp_sse_next(r->body.data, end, &pos, &data)) {
        json_t *result = NULL;
        r->answered = gw_mcp_rpc_read(data.data ? data.data : "", data.len, r->id, &result, msg,
                                      sizeof msg) != GW_RPC_OTHER;
        json_decref(result);
    }
    sipp_buf_free(&data);
    r->whole = end;
}

static size_t on_http_body(char *data, size_t size, size_t n, void *arg) {
    http_reply *r = arg;
    if (r->body.len + size * n > GW_MCP_MAX_MESSAGE) {
        r->too_big = true;
        return 0;
    }
    if (!sipp_buf_append(&r->body, data, size * n)) return 0;
    if (r->sse && r->id > 0) read_new_events(r);
    return r->answered ? 0 : size * n; /* 0 ends the transfer */
}

static bool header_is(const char *line, size_t n, const char *name, const char **value, size_t *vn) {
    size_t k = strlen(name);
    if (n <= k || strncasecmp(line, name, k) != 0 || line[k] != ':') return false;
    *value = line + k + 1;
    *vn = n - k - 1;
    while (*vn && (**value == ' ' || **value == '\t'))
        (*value)++, (*vn)--;
    while (*vn && ((*value)[*vn - 1] == '\r' || (*value)[*vn - 1] == '\n' || (*value)[*vn - 1] == ' '))
        (*vn)--;
    return true;
}

static size_t on_http_header(char *line, size_t size, size_t n, void *arg) {
    http_reply *r = arg;
    const char *v;
    size_t vn;
    if (header_is(line, size * n, "content-type", &v, &vn))
        r->sse = vn >= 17 && strncasecmp(v, "text/event-stream", 17) == 0;
    else if (header_is(line, size * n, "mcp-session-id", &v, &vn) && vn < sizeof r->session) {
        memcpy(r->session, v, vn);
        r->session[vn] = 0;
    }
    return size * n;
}

static struct curl_slist *http_headers(const gw_mcp_server *s) {
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    h = curl_slist_append(h, "Accept: application/json, text/event-stream");
    h = curl_slist_append(h, "MCP-Protocol-Version: " GW_MCP_PROTOCOL);
    if (s->session[0]) {
        char line[GW_SESSION_SIZE + 32];
        snprintf(line, sizeof line, "Mcp-Session-Id: %s", s->session);
        h = curl_slist_append(h, line);
    }
    return h;
}

/* The reply to id in an answer's body: the body itself, or one of its events. */
static gw_rpc_kind read_http_reply(const http_reply *r, long long id, json_t **result, char *err,
                                   size_t cap) {
    if (!r->sse) return gw_mcp_rpc_read(r->body.data ? r->body.data : "", r->body.len, id, result, err, cap);
    sipp_buf data = {0};
    size_t pos = 0;
    gw_rpc_kind k = GW_RPC_OTHER;
    while (k == GW_RPC_OTHER && gw_mcp_sse_next(r->body.data, r->body.len, &pos, &data))
        k = gw_mcp_rpc_read(data.data ? data.data : "", data.len, id, result, err, cap);
    sipp_buf_free(&data);
    if (k == GW_RPC_OTHER) snprintf(err, cap, "its event stream ended without the reply");
    return k == GW_RPC_OTHER ? GW_RPC_JUNK : k;
}

static gw_rpc_kind http_exchange(gw_mcp_server *s, const char *msg, long long id, double deadline,
                                 json_t **result, char *err, size_t cap) {
    CURL *e = curl_easy_init();
    if (!e) {
        snprintf(err, cap, "cannot make an HTTP client");
        return GW_RPC_JUNK;
    }
    http_reply r = {.id = id};
    char cerr[CURL_ERROR_SIZE] = "";
    struct curl_slist *h = http_headers(s);
    curl_easy_setopt(e, CURLOPT_URL, s->cfg.url);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, msg);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)GW_MCP_CONNECT_TIMEOUT_MS);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(ms_left(deadline) ? ms_left(deadline) : 1));
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_http_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_http_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, &r);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, cerr);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    CURLcode rc = curl_easy_perform(e);
    if (rc == CURLE_WRITE_ERROR && r.answered) rc = CURLE_OK; /* ended at the reply (read_new_events) */
    long status = 0;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    gw_rpc_kind k = GW_RPC_JUNK;
    if (r.too_big)
        snprintf(err, cap, "it sent a message over %zu bytes", GW_MCP_MAX_MESSAGE);
    else if (rc == CURLE_OPERATION_TIMEDOUT)
        snprintf(err, cap, "it did not answer within %d s", s->cfg.timeout_seconds);
    else if (rc != CURLE_OK)
        snprintf(err, cap, "%s", *cerr ? cerr : curl_easy_strerror(rc));
    else if (status == GW_HTTP_NOT_FOUND && s->session[0])
        snprintf(err, cap, "its session ended (HTTP 404); a new one starts on the next use");
    else if (status < GW_HTTP_OK_MIN || status > GW_HTTP_OK_MAX)
        snprintf(err, cap, "it answered HTTP %ld", status);
    else if (id <= 0)
        k = GW_RPC_RESULT; /* a notification: 202 Accepted, no body */
    else
        k = read_http_reply(&r, id, result, err, cap);
    if (k == GW_RPC_RESULT && r.session[0]) memcpy(s->session, r.session, sizeof s->session);
    sipp_buf_free(&r.body);
    curl_slist_free_all(h);
    curl_easy_cleanup(e);
    return k;
}

/* ---- JSON-RPC ----------------------------------------------------------------------------------- */

/* A request (id > 0) or a notification (id 0) of method with params (borrowed; NULL: none). On
 * RESULT *result is the reply's result; on ERROR err holds the server's error; JUNK means the server
 * is not usable (the caller stops it). */
static gw_rpc_kind exchange(gw_mcp_server *s, const char *method, json_t *params, bool notify,
                            double deadline, json_t **result, char *err, size_t cap) {
    long long id = notify ? 0 : ++s->next_id;
    json_t *m = json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method", method);
    if (!notify) json_object_set_new(m, "id", json_integer(id));
    if (params) json_object_set(m, "params", params);
    char *text = m ? json_dumps(m, JSON_COMPACT) : NULL;
    json_decref(m);
    *result = NULL;
    if (!text) {
        snprintf(err, cap, "out of memory");
        return GW_RPC_JUNK;
    }
    gw_rpc_kind k = s->cfg.url ? http_exchange(s, text, id, deadline, result, err, cap)
                               : stdio_exchange(s, text, id, deadline, result, err, cap);
    free(text);
    return k;
}

static bool allowed(const gw_mcp_server *s, const char *tool) {
    if (s->cfg.n_allowed_tools == 0) return true;
    for (size_t i = 0; i < s->cfg.n_allowed_tools; i++)
        if (strcmp(s->cfg.allowed_tools[i], tool) == 0) return true;
    return false;
}

/* tools/list, every page, keeping the allowed tools. */
static bool list_tools(gw_mcp_server *s, double deadline, char *err, size_t cap) {
    json_t *all = json_array();
    char *cursor = NULL;
    bool ok = true;
    for (int page = 0; ok && page < GW_MCP_MAX_PAGES && (page == 0 || cursor); page++) {
        json_t *params = cursor ? json_pack("{s:s}", "cursor", cursor) : NULL, *result = NULL;
        free(cursor);
        cursor = NULL;
        ok = exchange(s, "tools/list", params, false, deadline, &result, err, cap) == GW_RPC_RESULT;
        json_t *tools = ok ? gw_mcp_tools_from_result(result, &cursor, err, cap) : NULL;
        ok = ok && tools;
        size_t i;
        json_t *t;
        json_array_foreach(tools, i, t) {
            if (allowed(s, json_string_value(json_object_get(t, "name")))) json_array_append(all, t);
        }
        json_decref(tools);
        json_decref(result);
        json_decref(params);
    }
    free(cursor);
    if (ok)
        s->tools = all;
    else
        json_decref(all);
    return ok;
}

/* Started, initialized and listed; called with s->mu held. */
static bool ensure_ready(gw_mcp_server *s, double deadline, char *err, size_t cap) {
    if (s->ready) return true;
    stop(s, false);
    if (!s->cfg.url && !start_child(s, err, cap)) return false;
    json_t *params = json_pack("{s:s, s:{}, s:{s:s, s:s}}", "protocolVersion", GW_MCP_PROTOCOL,
                               "capabilities", "clientInfo", "name", "sipp", "version", sipp_version());
    json_t *result = NULL;
    bool ok = exchange(s, "initialize", params, false, deadline, &result, err, cap) == GW_RPC_RESULT;
    if (ok && !json_is_object(result)) {
        snprintf(err, cap, "its initialize result is not an object");
        ok = false;
    }
    json_decref(params);
    json_decref(result);
    ok = ok &&
         exchange(s, "notifications/initialized", NULL, true, deadline, &result, err, cap) == GW_RPC_RESULT;
    ok = ok && list_tools(s, deadline, err, cap);
    if (!ok) stop(s, false);
    s->ready = ok;
    return ok;
}

/* The deadline of a call: its timeout_ms or the server's timeout, whichever is shorter. */
static double deadline_of(const gw_mcp_server *s, int timeout_ms) {
    int ms = gw_mcp_timeout_ms(s);
    if (timeout_ms >= 0 && timeout_ms < ms) ms = timeout_ms;
    return sipp_now_ms() + ms;
}

/* err as "MCP server 'NAME': WHY". */
static void name_error(const gw_mcp_server *s, char *err, size_t cap) {
    char why[SIPP_ERROR_SIZE];
    sipp_strlcpy(why, err, sizeof why);
    snprintf(err, cap, "MCP server '%s': %s", s->cfg.name, why);
}

json_t *gw_mcp_tools(gw_mcp_server *s, int timeout_ms, char *err, size_t cap) {
    double deadline = deadline_of(s, timeout_ms);
    if (!lock_until(s, deadline)) {
        snprintf(err, cap, "MCP server '%s': busy with other calls past the timeout", s->cfg.name);
        return NULL;
    }
    json_t *tools = ensure_ready(s, deadline, err, cap) ? json_incref(s->tools) : NULL;
    pthread_mutex_unlock(&s->mu);
    if (!tools) name_error(s, err, cap);
    return tools;
}

char *gw_mcp_call(gw_mcp_server *s, const char *tool, json_t *arguments, int timeout_ms, bool *is_error,
                  char *err, size_t cap) {
    double deadline = deadline_of(s, timeout_ms);
    *is_error = false;
    if (!allowed(s, tool)) {
        snprintf(err, cap, "MCP server '%s': tool '%s' is not in its allowed_tools", s->cfg.name, tool);
        return NULL;
    }
    if (!lock_until(s, deadline)) {
        snprintf(err, cap, "MCP server '%s': busy with other calls past the timeout", s->cfg.name);
        return NULL;
    }
    char *out = NULL;
    if (ensure_ready(s, deadline, err, cap)) {
        json_t *params = json_pack("{s:s, s:O}", "name", tool, "arguments", arguments), *result = NULL;
        gw_rpc_kind k = exchange(s, "tools/call", params, false, deadline, &result, err, cap);
        if (k == GW_RPC_RESULT) out = gw_mcp_output_from_result(result, is_error, err, cap);
        if (k == GW_RPC_JUNK || (k == GW_RPC_RESULT && !out)) {
            stop(s, false); /* started afresh on the next use */
            size_t l = strlen(err);
            snprintf(err + l, cap - l, "; it was stopped and starts again on its next use");
        }
        json_decref(result);
        json_decref(params);
    }
    pthread_mutex_unlock(&s->mu);
    if (!out) name_error(s, err, cap);
    return out;
}
