/*
 * supervise.c: targets served by a supervised child process.
 *
 * Why. ggml's RPC client cannot survive losing a server it placed layers on: its dispatcher aborts
 * the process, which sipp turns into one line naming the server and exit status SIPP_RPC_LOST_EXIT
 * (src/backend/rpc.c). A gateway that loaded such a target in its own process would end with it,
 * and every other target with it. So a local target on backend "rpc" is served by a child: the same
 * binary (/proc/self/exe) with the parent's own arguments (/proc/self/cmdline) plus
 * `--supervised-target NAME`, which narrows the configuration to that target (gw_config_supervised).
 * To the rest of the gateway the target is then a remote one: its cfg is an owned
 * openai_compatible entry whose one base_url is the child, and upstream.c forwards every API to it
 * (streams pass through piece by piece, as from any upstream).
 *
 * Groups. An rpc-server serves one client process at a time, so targets that share a server must
 * share a process: targets whose server lists overlap (directly or through others) form one group,
 * served by one child (one --supervised-target per target) and one supervisor, and they go
 * not-ready and come back together.
 *
 * The child's address. The parent binds a loopback socket on a free port once, at start, and every
 * child it starts finds that socket on GW_SUPERVISED_LISTEN_FD: the target's address never changes,
 * so nothing in upstream.c is rewritten while requests read it. The child accepts only the internal
 * token the parent made for it (random bytes, passed in GW_SUPERVISED_TOKEN_ENV, its config's one
 * [[tokens]] entry): loopback is shared with every local user, and the token keeps them out.
 *
 * The life of a child, on this target's thread:
 *   1. probe: sipp_rpc_probe every rpc server (the handshake: reachable, same protocol). While one
 *      fails the target is WAITING with the probe's error (it names the host), and the thread tries
 *      again with exponential backoff, GW_SUP_BACKOFF_MIN_MS doubling to GW_SUP_BACKOFF_MAX_MS.
 *   2. start: fork, PR_SET_PDEATHSIG (the child dies with the thread that started it, which lives as
 *      long as the gateway), exec. The target is LOADING.
 *   3. watch: every line of the child's stderr is logged with the target's name and the last one is
 *      kept; GET /ready on the child until it answers 200: the target is READY.
 *   4. exit: whatever the status (75 = an rpc server went away), the target becomes WAITING with the
 *      child's last stderr line and its status as the error; transfers to that child (upstream.c)
 *      end with that error (gw_supervise_lost), new requests get 503 with it (admission.c), and the
 *      thread goes back to 1 after the backoff.
 * At shutdown (gw_supervise_stop) the child is sent SIGTERM (it drains as any gateway does), then
 * SIGKILL after GW_SUP_STOP_GRACE_MS, always by its pid.
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gateway/kinds/kinds.h"
#include "gateway/metrics.h"

#define GW_SUP_BACKOFF_MIN_MS 250
#define GW_SUP_BACKOFF_MAX_MS 4000
#define GW_SUP_POLL_MS 100        /* the thread's wait on the child's stderr between checks */
#define GW_SUP_READY_EVERY_MS 200 /* between GET /ready while the child loads */
#define GW_SUP_GET_TIMEOUT_MS 2000
#define GW_SUP_ANSWER_MAX ((size_t)1 << 20)
#define GW_SUP_PATH_MAX 32
#define GW_SUP_STOP_GRACE_MS 15000 /* SIGTERM, then SIGKILL */
#define GW_SUP_TOKEN_BYTES 24
#define GW_SUP_LINE_MAX 2048
#define GW_SUP_CMDLINE_MAX (1 << 16)
#define GW_SUP_HOST "127.0.0.1"
#define GW_SUP_CALLER "supervisor"
#define GW_SUP_EXEC_FAILED 127
#define GW_SUP_MAX_FD 65536 /* descriptors closed one by one in a child when close_range is missing */
#define GW_SUP_LISTEN_BACKLOG 128
#define GW_SUP_LOG_PREFIX "sipp: "
#define GW_SUP_LISTENING_LOG "listening on "
#define GW_SUP_READY_LOG "\"GET /ready\"" /* how the child's access log shows a readiness poll */
#define GW_HTTP_OK 200
#define GW_SUP_ARG_FLAG "--supervised-target"

typedef struct gw_supervisor {
    gw_server *srv;
    gw_target **targets; /* the group's */
    size_t n_targets;
    const char *name; /* the first target's, for the log */
    char *servers;    /* every server of the group, "host:port,..." */
    char token[2 * GW_SUP_TOKEN_BYTES + 1];
    char auth[2 * GW_SUP_TOKEN_BYTES + sizeof "Authorization: Bearer "];
    char base_url[64]; /* http://127.0.0.1:PORT */
    int listen_fd;
    char **argv, **envp; /* built once, before any fork */
    pthread_t thread;
    bool started;
    pthread_mutex_t mu; /* guards what follows */
    pthread_cond_t cv;  /* stop, and each exit (for gw_supervise_lost) */
    bool stop;
    pid_t pid; /* the running child, 0 when none */
    uint64_t exits;
    int restarts;
    char last_exit[SIPP_ERROR_SIZE]; /* why the last child went away */
} gw_supervisor;

/* ---- in the child: the narrowed configuration ---------------------------------------------------- */

static bool named(const char *name, const char *const *names, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(name, names[i]) == 0) return true;
    return false;
}

bool gw_config_supervised(gw_config *cfg, const char *const *names, size_t n_names, sipp_buf *errs) {
    for (size_t i = 0; i < n_names; i++) {
        bool found = false;
        for (size_t k = 0; k < cfg->n_targets && !found; k++)
            found = strcmp(cfg->targets[k].name, names[i]) == 0;
        if (!found) {
            sipp_buf_appendf(errs, "--supervised-target: no target '%s' in this configuration\n", names[i]);
            return false;
        }
    }
    gw_target_config *keep = calloc(n_names ? n_names : 1, sizeof *keep);
    gw_token_config *token = calloc(1, sizeof *token);
    char *host = strdup(GW_SUP_HOST);
    if (!keep || !token || !host || !(token->env = strdup(GW_SUPERVISED_TOKEN_ENV)) ||
        !(token->caller = strdup(GW_SUP_CALLER))) {
        free(keep);
        if (token) free(token->env);
        free(token);
        free(host);
        sipp_buf_appendf(errs, "out of memory\n");
        return false;
    }
    size_t n_keep = 0;
    for (size_t k = 0; k < cfg->n_targets; k++) {
        if (!named(cfg->targets[k].name, names, n_names)) continue;
        keep[n_keep] = cfg->targets[k];
        keep[n_keep].load = GW_LOAD_STARTUP; /* the child exists to serve them */
        keep[n_keep].keep_alive_s = GW_KEEP_ALIVE_FOREVER;
        keep[n_keep].pin = true;
        n_keep++;
        cfg->targets[k] = (gw_target_config){0};
    }
    /* Everything else goes, freed the way the configuration frees it. */
    gw_config drop = {.tokens = cfg->tokens,
                      .n_tokens = cfg->n_tokens,
                      .targets = cfg->targets,
                      .n_targets = cfg->n_targets,
                      .models_dir = cfg->models_dir,
                      .host = cfg->host};
    gw_config_free(&drop);
    cfg->targets = keep;
    cfg->n_targets = n_keep;
    cfg->tokens = token;
    cfg->n_tokens = 1;
    cfg->host = host;
    cfg->models_dir = NULL;
    cfg->port = 0;
    cfg->rate_requests_per_minute = 0; /* the parent limits its callers */
    cfg->supervised_child = true;
    return true;
}

/* ---- in the parent ----------------------------------------------------------------------------------- */

bool gw_supervise_wanted(const gw_server *srv, const gw_target_config *cfg) {
    return !srv->cfg->supervised_child && cfg->type == GW_TARGET_LOCAL && cfg->backend &&
           strcmp(cfg->backend, "rpc") == 0;
}

static void free_strv(char **v) {
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

/* argv: this process's own arguments, then the flags that make the child serve the group. */
static char **child_argv(gw_supervisor *s, char *err) {
    char *buf = malloc(GW_SUP_CMDLINE_MAX);
    FILE *f = fopen("/proc/self/cmdline", "rb");
    size_t len = f && buf ? fread(buf, 1, GW_SUP_CMDLINE_MAX - 1, f) : 0;
    if (f) fclose(f);
    if (!len || len == GW_SUP_CMDLINE_MAX - 1) {
        free(buf);
        snprintf(err, SIPP_ERROR_SIZE, "cannot read this process's arguments from /proc/self/cmdline");
        return NULL;
    }
    buf[len] = '\0';
    const char *extra[] = {"--host", GW_SUP_HOST, "--port", "0"};
    size_t n_extra = sizeof extra / sizeof extra[0], n = 0;
    for (size_t i = 0; i < len; i++)
        n += buf[i] == '\0';
    char **argv = calloc(n + n_extra + 2 * s->n_targets + 1, sizeof *argv);
    size_t k = 0;
    for (size_t i = 0; argv && i < len; i += strlen(buf + i) + 1)
        argv[k++] = strdup(buf + i);
    for (size_t i = 0; argv && i < n_extra; i++)
        argv[k++] = strdup(extra[i]);
    for (size_t i = 0; argv && i < s->n_targets; i++) {
        argv[k++] = strdup(GW_SUP_ARG_FLAG);
        argv[k++] = strdup(s->targets[i]->cfg->name);
    }
    free(buf);
    for (size_t i = 0; argv && i < k; i++)
        if (!argv[i]) {
            free_strv(argv);
            argv = NULL;
        }
    if (!argv) snprintf(err, SIPP_ERROR_SIZE, "out of memory");
    return argv;
}

/* envp: this process's environment with the child's token set. */
static char **child_envp(const char *token) {
    extern char **environ;
    size_t n = 0, k = 0;
    while (environ[n])
        n++;
    char **envp = calloc(n + 2, sizeof *envp);
    static const char name[] = GW_SUPERVISED_TOKEN_ENV "=";
    for (size_t i = 0; envp && i < n; i++)
        if (strncmp(environ[i], name, sizeof name - 1) != 0) envp[k++] = strdup(environ[i]);
    size_t sz = sizeof name + strlen(token);
    if (envp && (envp[k] = malloc(sz))) snprintf(envp[k++], sz, "%s%s", name, token);
    for (size_t i = 0; envp && i < k; i++)
        if (!envp[i]) {
            free_strv(envp);
            return NULL;
        }
    return envp;
}

/* A loopback socket on a free port, listening, for every child of this target. */
static int open_child_listener(int *port, char *err) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, GW_SUP_LISTEN_BACKLOG) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &al) != 0) {
        snprintf(err, SIPP_ERROR_SIZE, "cannot open a loopback port for a supervised target: %s",
                 strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

/* The target as the rest of the gateway sees it: remote, at the child's address. */
static gw_target_config *remote_config(const gw_target_config *local, int port, int timeout_s) {
    gw_target_config *c = calloc(1, sizeof *c);
    char url[64];
    snprintf(url, sizeof url, "http://%s:%d/v1", GW_SUP_HOST, port);
    if (!c) return NULL;
    c->name = strdup(local->name);
    c->type = GW_TARGET_REMOTE;
    c->line = local->line;
    c->backend = strdup(local->backend);
    c->rpc_servers = local->rpc_servers ? strdup(local->rpc_servers) : NULL;
    c->model_path = local->model_path ? strdup(local->model_path) : NULL;
    c->remote_model = strdup(local->name);
    c->base_urls = calloc(1, sizeof *c->base_urls);
    if (c->base_urls) c->base_urls[0] = strdup(url);
    c->n_base_urls = 1;
    c->timeout_seconds = timeout_s;
    c->load = local->load;
    if (!c->name || !c->backend || !c->remote_model || !c->base_urls || !c->base_urls[0] ||
        (local->rpc_servers && !c->rpc_servers) || (local->model_path && !c->model_path)) {
        gw_target_config_free(c);
        free(c);
        return NULL;
    }
    return c;
}

/* Every target of the group: the error, then the state that makes readers look at it. The caller
 * holds s->mu, under which readers (gw_supervise_state, gw_supervise_serving) copy the error. */
static void set_state_locked(gw_supervisor *s, gw_target_state state, const char *msg) {
    for (size_t i = 0; i < s->n_targets; i++) {
        if (msg) snprintf(s->targets[i]->error, sizeof s->targets[i]->error, "%s", msg);
        atomic_store(&s->targets[i]->state, state);
    }
}

static void set_state(gw_supervisor *s, gw_target_state state, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_state(gw_supervisor *s, gw_target_state state, const char *fmt, ...) {
    char msg[SIPP_ERROR_SIZE];
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_lock(&s->mu);
    set_state_locked(s, state, fmt ? msg : NULL);
    pthread_mutex_unlock(&s->mu);
}

/* Waits up to ms, or until stop; true when stopping. */
static bool sleep_unless_stopped(gw_supervisor *s, int ms) {
    struct timespec ts;
    sipp_deadline_in(&ts, CLOCK_MONOTONIC, ms);
    pthread_mutex_lock(&s->mu);
    while (!s->stop && pthread_cond_timedwait(&s->cv, &s->mu, &ts) != ETIMEDOUT) {
    }
    bool stop = s->stop;
    pthread_mutex_unlock(&s->mu);
    return stop;
}

static bool stopping(gw_supervisor *s) {
    pthread_mutex_lock(&s->mu);
    bool stop = s->stop;
    pthread_mutex_unlock(&s->mu);
    return stop;
}

/* Step 2: fork and exec. Only async-signal-safe calls between the two. */
static pid_t spawn(gw_supervisor *s, int *err_fd, char *err) {
    int pipefd[2];
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull < 0 || pipe2(pipefd, O_CLOEXEC) != 0) {
        snprintf(err, SIPP_ERROR_SIZE, "cannot make a pipe for the child: %s", strerror(errno));
        if (devnull >= 0) close(devnull);
        return -1;
    }
    struct rlimit nofile = {0};
    getrlimit(RLIMIT_NOFILE, &nofile);
    int max_fd = nofile.rlim_cur == RLIM_INFINITY || nofile.rlim_cur > GW_SUP_MAX_FD ? GW_SUP_MAX_FD
                                                                                     : (int)nofile.rlim_cur;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(GW_SUP_EXEC_FAILED); /* the parent is gone already */
        dup2(devnull, STDIN_FILENO);
        dup2(pipefd[1], STDERR_FILENO);
        if (s->listen_fd == GW_SUPERVISED_LISTEN_FD)
            fcntl(s->listen_fd, F_SETFD, 0); /* dup2 onto itself would keep FD_CLOEXEC */
        else
            dup2(s->listen_fd, GW_SUPERVISED_LISTEN_FD);
        /* Nothing else of the gateway's (client connections, upstream sockets, other children's
         * pipes) may live on in the child: a connection it kept open would never see its end. */
        if (close_range(GW_SUPERVISED_LISTEN_FD + 1, ~0U, 0) != 0)
            for (int fd = GW_SUPERVISED_LISTEN_FD + 1; fd < max_fd; fd++)
                close(fd);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL); /* the gateway blocks its stop signals in every thread */
        execve("/proc/self/exe", s->argv, s->envp);
        _exit(GW_SUP_EXEC_FAILED);
    }
    int saved = errno;
    close(pipefd[1]);
    close(devnull);
    if (pid < 0) {
        close(pipefd[0]);
        snprintf(err, SIPP_ERROR_SIZE, "cannot start the child process: %s", strerror(saved));
        return -1;
    }
    *err_fd = pipefd[0];
    return pid;
}

static size_t collect(char *data, size_t size, size_t n, void *arg) {
    sipp_buf *b = arg;
    if (b->len + size * n > GW_SUP_ANSWER_MAX) return 0;
    return sipp_buf_append(b, data, size * n) ? size * n : 0;
}

/* GET path on the child, with its token: true when it answered 200; its body in *body when given. */
static bool child_get(gw_supervisor *s, const char *path, sipp_buf *body) {
    CURL *e = curl_easy_init();
    if (!e) return false;
    char url[sizeof s->base_url + GW_SUP_PATH_MAX];
    snprintf(url, sizeof url, "%s%s", s->base_url, path);
    sipp_buf ignored = {0};
    struct curl_slist *h = curl_slist_append(NULL, s->auth);
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)GW_SUP_GET_TIMEOUT_MS);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, body ? body : &ignored);
    long code = 0;
    bool ok = curl_easy_perform(e) == CURLE_OK &&
              curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code) == CURLE_OK && code == GW_HTTP_OK;
    curl_slist_free_all(h);
    curl_easy_cleanup(e);
    sipp_buf_free(&ignored);
    return ok;
}

/* One line of the child's stderr: logged with the target's name, kept as the last one. Left out:
 * the child's log of this thread's own readiness polls, and its "listening on" line (the parent
 * logged the address at start; a script that reads the parent's "listening on" must find the
 * parent's). */
static void on_line(gw_supervisor *s, pid_t pid, const char *line, char *last, size_t n) {
    if (strncmp(line, GW_SUP_LOG_PREFIX, sizeof GW_SUP_LOG_PREFIX - 1) == 0)
        line += sizeof GW_SUP_LOG_PREFIX - 1;
    if (!*line || strstr(line, GW_SUP_READY_LOG) ||
        strncmp(line, GW_SUP_LISTENING_LOG, sizeof GW_SUP_LISTENING_LOG - 1) == 0)
        return;
    fprintf(stderr, "sipp: target '%s' (pid %d): %s\n", s->name, (int)pid, line);
    snprintf(last, n, "%s", line);
}

/* While the child is not ready: a target it could not load (failed, or waiting for a busy server)
 * shows the child's reason here, from its /ready answer. */
static void mirror_child(gw_supervisor *s, const sipp_buf *ready_answer) {
    json_t *all = json_loadb(ready_answer->data ? ready_answer->data : "", ready_answer->len, 0, NULL);
    json_t *list = json_object_get(all, "targets"), *e;
    size_t k;
    json_array_foreach(list, k, e) {
        const char *name = json_string_value(json_object_get(e, "name"));
        const char *state = json_string_value(json_object_get(e, "state"));
        const char *error = json_string_value(json_object_get(e, "error"));
        int to = !state || !error                ? -1
                 : strcmp(state, "failed") == 0  ? GW_STATE_FAILED
                 : strcmp(state, "waiting") == 0 ? GW_STATE_WAITING
                                                 : -1;
        for (size_t i = 0; name && to >= 0 && i < s->n_targets; i++) {
            gw_target *t = s->targets[i];
            if (strcmp(t->cfg->name, name) != 0) continue;
            pthread_mutex_lock(&s->mu);
            snprintf(t->error, sizeof t->error, "%s", error); /* before the state that shows it */
            atomic_store(&t->state, to);
            pthread_mutex_unlock(&s->mu);
        }
    }
    json_decref(all);
}

/* Step 3: until the child's stderr ends (it exited). Returns its wait status. */
static int watch(gw_supervisor *s, pid_t pid, int fd, char *last, size_t n_last) {
    char buf[GW_SUP_LINE_MAX];
    size_t used = 0;
    bool ready = false, termed = false;
    double next_ready = 0, kill_at = 0;
    for (;;) {
        if (!termed && stopping(s)) {
            kill(pid, SIGTERM);
            termed = true;
            kill_at = sipp_now_ms() + GW_SUP_STOP_GRACE_MS;
        }
        if (termed && kill_at > 0 && sipp_now_ms() > kill_at) {
            kill(pid, SIGKILL);
            kill_at = 0;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, GW_SUP_POLL_MS) > 0) {
            ssize_t r = read(fd, buf + used, sizeof buf - 1 - used);
            if (r <= 0 && !(r < 0 && errno == EINTR)) break; /* EOF: the child is gone */
            if (r > 0) used += (size_t)r;
            buf[used] = '\0';
            char *start = buf, *nl;
            while ((nl = strchr(start, '\n'))) {
                *nl = '\0';
                on_line(s, pid, start, last, n_last);
                start = nl + 1;
            }
            used -= (size_t)(start - buf);
            memmove(buf, start, used);
            if (used == sizeof buf - 1) { /* a line longer than the buffer: log what there is */
                buf[used] = '\0';
                on_line(s, pid, buf, last, n_last);
                used = 0;
            }
        }
        if (!ready && !termed && sipp_now_ms() >= next_ready) {
            sipp_buf body = {0};
            ready = child_get(s, "/ready", &body);
            if (!ready) mirror_child(s, &body);
            sipp_buf_free(&body);
            if (ready) {
                set_state(s, GW_STATE_READY, NULL);
                fprintf(stderr, "sipp: target '%s': ready (served by process %d)\n", s->name, (int)pid);
            }
            next_ready = sipp_now_ms() + GW_SUP_READY_EVERY_MS;
        }
    }
    if (used) {
        buf[used] = '\0';
        on_line(s, pid, buf, last, n_last);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return status;
}

static void describe_status(int status, char *out, size_t n) {
    if (WIFEXITED(status) && WEXITSTATUS(status) == SIPP_RPC_LOST_EXIT)
        snprintf(out, n, "exited with status %d: an rpc server went away", SIPP_RPC_LOST_EXIT);
    else if (WIFEXITED(status))
        snprintf(out, n, "exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(out, n, "was killed by signal %d", WTERMSIG(status));
    else
        snprintf(out, n, "ended (wait status %d)", status);
}

static void *supervise_main(void *arg) {
    gw_supervisor *s = arg;
    const char *name = s->name;
    int backoff = GW_SUP_BACKOFF_MIN_MS;
    char err[SIPP_ERROR_SIZE];
    while (!stopping(s)) {
        if (sipp_rpc_ping(s->servers, err) != SIPP_OK) { /* step 1 */
            set_state(s, GW_STATE_WAITING, "%s", err);
            if (sleep_unless_stopped(s, backoff)) break;
            backoff = backoff * 2 > GW_SUP_BACKOFF_MAX_MS ? GW_SUP_BACKOFF_MAX_MS : backoff * 2;
            continue;
        }
        int fd = -1;
        pid_t pid = spawn(s, &fd, err);
        if (pid < 0) {
            set_state(s, GW_STATE_FAILED, "%s", err);
            if (sleep_unless_stopped(s, GW_SUP_BACKOFF_MAX_MS)) break;
            continue;
        }
        pthread_mutex_lock(&s->mu);
        s->pid = pid;
        pthread_mutex_unlock(&s->mu);
        set_state(s, GW_STATE_LOADING, "loading in process %d", (int)pid);
        char last[SIPP_ERROR_SIZE] = "";
        int status = watch(s, pid, fd, last, sizeof last);
        close(fd);
        bool was_ready = atomic_load(&s->targets[0]->state) == GW_STATE_READY;
        char how[SIPP_ERROR_SIZE / 4];
        describe_status(status, how, sizeof how);
        pthread_mutex_lock(&s->mu);
        s->pid = 0;
        s->exits++;
        snprintf(s->last_exit, sizeof s->last_exit, "%s%s(process %d %s)", last, *last ? " " : "", (int)pid,
                 how);
        bool stop = s->stop;
        if (!stop) s->restarts++;
        set_state_locked(s, stop ? GW_STATE_UNLOADED : GW_STATE_WAITING, s->last_exit);
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        if (stop) break;
        fprintf(stderr, "sipp: target '%s': its process %d %s; restarting it when its rpc servers answer\n",
                name, (int)pid, how);
        if (was_ready) backoff = GW_SUP_BACKOFF_MIN_MS;
        if (sleep_unless_stopped(s, backoff)) break;
        backoff = backoff * 2 > GW_SUP_BACKOFF_MAX_MS ? GW_SUP_BACKOFF_MAX_MS : backoff * 2;
    }
    return NULL;
}

static void supervisor_free(gw_supervisor *s) {
    if (!s) return;
    if (s->listen_fd >= 0) close(s->listen_fd);
    free_strv(s->argv);
    free_strv(s->envp);
    free(s->servers);
    free(s->targets);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

/* The servers of a local rpc target: its rpc key, else $SIPP_RPC_SERVERS. */
static const char *servers_of(const gw_target_config *c) {
    const char *env = getenv("SIPP_RPC_SERVERS");
    return c->rpc_servers ? c->rpc_servers : env ? env : "";
}

/* True when the comma-separated lists a and b name a server in common. */
static bool share_a_server(const char *a, const char *b) {
    for (const char *p = a; *p;) {
        size_t n = strcspn(p, ",");
        for (const char *q = b; *q;) {
            size_t m = strcspn(q, ",");
            if (n == m && strncmp(p, q, n) == 0) return true;
            q += m + (q[m] == ',');
        }
        p += n + (p[n] == ',');
    }
    return false;
}

/* One supervisor for the group of targets whose index has root as its representative. */
static gw_supervisor *group_new(gw_server *srv, const size_t *root, size_t group, char *err) {
    gw_supervisor *s = calloc(1, sizeof *s);
    if (!s) return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory"), NULL;
    s->srv = srv;
    s->listen_fd = -1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cv, &ca);
    pthread_condattr_destroy(&ca);
    sipp_buf servers = {0};
    s->targets = calloc(srv->n_targets, sizeof *s->targets);
    for (size_t i = 0; s->targets && i < srv->n_targets; i++) {
        if (root[i] != group) continue;
        s->targets[s->n_targets++] = &srv->targets[i];
        for (const char *p = servers_of(srv->targets[i].cfg); *p;) { /* each server once */
            size_t n = strcspn(p, ",");
            char one[SIPP_ERROR_SIZE];
            snprintf(one, sizeof one, "%.*s", (int)n, p);
            if (!share_a_server(servers.data ? servers.data : "", one))
                sipp_buf_appendf(&servers, "%s%s", servers.len ? "," : "", one);
            p += n + (p[n] == ',');
        }
    }
    s->servers = servers.data;
    s->name = s->n_targets ? s->targets[0]->cfg->name : "";
    int port = 0;
    bool ok = s->targets && s->servers;
    if (!ok) sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory");
    if (ok && !sipp_random_hex(s->token, GW_SUP_TOKEN_BYTES)) {
        snprintf(err, SIPP_ERROR_SIZE,
                 "cannot read random bytes (getrandom) for a supervised target's token");
        ok = false;
    }
    ok = ok && (s->listen_fd = open_child_listener(&port, err)) >= 0;
    ok = ok && (s->argv = child_argv(s, err)) != NULL;
    if (ok && !(s->envp = child_envp(s->token)))
        ok = sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory") == SIPP_OK;
    /* Each target becomes remote, at the child's address (owned, freed with the table). */
    for (size_t i = 0; ok && i < s->n_targets; i++) {
        gw_target *t = s->targets[i];
        gw_target_config *remote = remote_config(t->cfg, port, srv->cfg->request_timeout_seconds);
        if (!remote) {
            ok = sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory") == SIPP_OK;
            break;
        }
        if (t->owned_cfg) {
            gw_target_config_free(t->owned_cfg);
            free(t->owned_cfg);
        }
        t->owned_cfg = remote;
        t->cfg = remote;
        t->supervisor = s;
    }
    if (!ok) {
        for (size_t i = 0; s->targets && i < s->n_targets; i++)
            s->targets[i]->supervisor = NULL;
        supervisor_free(s);
        return NULL;
    }
    snprintf(s->auth, sizeof s->auth, "Authorization: Bearer %s", s->token);
    snprintf(s->base_url, sizeof s->base_url, "http://%s:%d", GW_SUP_HOST, port);
    set_state(s, GW_STATE_LOADING, "starting its process");
    for (size_t i = 0; i < s->n_targets; i++)
        fprintf(stderr, "sipp: target '%s': backend rpc (%s), served by a supervised process on %s:%d\n",
                s->targets[i]->cfg->name, s->servers, GW_SUP_HOST, port);
    return s;
}

bool gw_supervise_start(gw_server *srv, char *err) {
    size_t n = srv->n_targets;
    size_t *root = calloc(n ? n : 1, sizeof *root);
    if (!root) return sipp_fail(err, SIPP_ERR_NO_MEMORY, "out of memory") == SIPP_OK;
    /* Groups: each wanted target joins the group of the first earlier one it shares a server with;
     * a later target that bridges two groups merges them (relabels the second as the first). */
    for (size_t i = 0; i < n; i++) {
        root[i] = i;
        if (!gw_supervise_wanted(srv, srv->targets[i].cfg)) continue;
        for (size_t k = 0; k < i; k++) {
            if (!gw_supervise_wanted(srv, srv->targets[k].cfg) ||
                !share_a_server(servers_of(srv->targets[i].cfg), servers_of(srv->targets[k].cfg)))
                continue;
            size_t from = root[i], to = root[k];
            for (size_t m = 0; m <= i; m++)
                if (root[m] == from) root[m] = to;
        }
    }
    bool ok = true;
    for (size_t g = 0; ok && g < n; g++) {
        if (root[g] != g || !gw_supervise_wanted(srv, srv->targets[g].cfg)) continue;
        gw_supervisor *s = group_new(srv, root, g, err);
        ok = s && pthread_create(&s->thread, NULL, supervise_main, s) == 0;
        if (s && !ok) {
            for (size_t i = 0; i < s->n_targets; i++)
                s->targets[i]->supervisor = NULL;
            supervisor_free(s);
            snprintf(err, SIPP_ERROR_SIZE, "cannot start a thread to supervise target '%s'",
                     srv->targets[g].cfg->name);
        }
        if (ok) s->started = true;
    }
    free(root);
    return ok;
}

const char *gw_supervise_token(gw_target *t) { return t->supervisor->token; }

void gw_supervise_stop(gw_target *t) {
    gw_supervisor *s = t->supervisor;
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (s->started) pthread_join(s->thread, NULL);
    for (size_t i = 0; i < s->n_targets; i++) /* the group's other targets too */
        s->targets[i]->supervisor = NULL;
    supervisor_free(s);
}

int gw_supervise_state(gw_target *t, char *why, size_t n) {
    gw_supervisor *s = t->supervisor;
    pthread_mutex_lock(&s->mu);
    int state = atomic_load(&t->state);
    snprintf(why, n, "%s", state == GW_STATE_FAILED || state == GW_STATE_WAITING ? t->error : "");
    pthread_mutex_unlock(&s->mu);
    return state;
}

bool gw_supervise_serving(gw_target *t, char *msg, size_t n) {
    gw_supervisor *s = t->supervisor;
    pthread_mutex_lock(&s->mu);
    bool ready = atomic_load(&t->state) == GW_STATE_READY;
    if (!ready) snprintf(msg, n, "%s", t->error);
    pthread_mutex_unlock(&s->mu);
    return ready;
}

uint64_t gw_supervise_epoch(gw_target *t) {
    gw_supervisor *s = t->supervisor;
    pthread_mutex_lock(&s->mu);
    uint64_t e = s->exits;
    pthread_mutex_unlock(&s->mu);
    return e;
}

bool gw_supervise_lost(gw_target *t, uint64_t epoch, int wait_ms, char *msg, size_t n) {
    gw_supervisor *s = t->supervisor;
    struct timespec ts;
    sipp_deadline_in(&ts, CLOCK_MONOTONIC, wait_ms);
    pthread_mutex_lock(&s->mu);
    while (s->exits == epoch && !s->stop && pthread_cond_timedwait(&s->cv, &s->mu, &ts) != ETIMEDOUT) {
    }
    bool gone = s->exits != epoch;
    if (gone) snprintf(msg, n, "%s", s->last_exit);
    pthread_mutex_unlock(&s->mu);
    return gone;
}

void gw_supervise_describe(gw_target *t, json_t *o) {
    gw_supervisor *s = t->supervisor;
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    json_t *d = json_pack("{s:i, s:i}", "pid", (int)s->pid, "restarts", s->restarts);
    if (s->exits) json_object_set_new(d, "last_exit", json_string(s->last_exit));
    pthread_mutex_unlock(&s->mu);
    json_object_set_new(o, "supervised", d);
}

json_t *gw_supervise_backend(gw_target *t) {
    sipp_buf body = {0};
    json_t *o = NULL;
    if (t->supervisor && atomic_load(&t->state) == GW_STATE_READY &&
        child_get(t->supervisor, "/v1/backends", &body)) {
        json_t *all = json_loadb(body.data ? body.data : "", body.len, 0, NULL);
        json_t *list = json_object_get(all, "targets"), *e;
        size_t k;
        json_array_foreach(list, k, e) if (json_is_string(json_object_get(e, "name")) &&
                                           strcmp(json_string_value(json_object_get(e, "name")),
                                                  t->cfg->name) == 0) o = json_incref(e);
        json_decref(all);
    }
    sipp_buf_free(&body);
    return o;
}

void gw_supervise_metrics(gw_server *srv, sipp_buf *out) {
    gw_metrics_header(out, "sipp_supervised_restarts_total", "counter",
                      "Times a supervised target's process exited and was started again.");
    for (size_t i = 0; i < srv->n_targets; i++) {
        gw_supervisor *s = srv->targets[i].supervisor;
        if (!s) continue;
        pthread_mutex_lock(&s->mu);
        int n = s->restarts;
        pthread_mutex_unlock(&s->mu);
        gw_metrics_line(out, "sipp_supervised_restarts_total", srv->targets[i].cfg->name, (uint64_t)n);
    }
}
