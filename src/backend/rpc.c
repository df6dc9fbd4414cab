/*
 * rpc.c: ggml's RPC backend, for a model split across hosts. sipp uses llama.cpp's own engine for
 * this (ggml-rpc: an rpc-server exposes its device over TCP, the client sees it as a GPU named
 * "RPC<n>") and adds what it lacks to be safe to use: errors that name the host.
 *
 * ggml's RPC client treats every failure as fatal: a server that cannot be reached, that speaks
 * another protocol version, or that goes away mid-generation ends the process with GGML_ABORT and a
 * backtrace. Two things make that honest here:
 *
 *   - Before ggml ever connects, sipp_rpc_handshake() does the protocol's HELLO itself (one command:
 *     cmd 14, a 24-byte capability block; the answer carries major.minor.patch) with timeouts, so an
 *     unreachable host, a peer that is not an rpc-server, a busy server (it serves one client at a
 *     time) and a version mismatch are ordinary errors naming the endpoint.
 *   - A server that dies after that cannot be survived: ggml's dispatcher thread aborts, and the
 *     thread that waits on it cannot be unblocked. sipp installs ggml's abort callback, finds which
 *     connected server stopped answering, prints one line naming it and exits with
 *     SIPP_RPC_LOST_EXIT (EX_TEMPFAIL) instead of a core dump, so a supervisor or load balancer
 *     (docs/scale-out.md) can restart or route around the instance.
 *
 * The servers this process connected to are kept in one table: ggml itself caches one registry per
 * endpoint for the life of the process, so the table mirrors state that exists anyway.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/rpc.h"
#include "ggml-backend.h"
#include "ggml-rpc.h"
#include "ggml.h"
#include "util/util.h"

#define RPC_CMD_HELLO 14      /* fixed across protocol versions (ggml-rpc.cpp asserts it) */
#define RPC_CONN_CAPS_SIZE 24 /* the capability block of protocol 6's HELLO */
#define RPC_HELLO_RSP_MIN 3   /* major, minor, patch: every version's answer starts so */
#define RPC_HELLO_RSP_MAX 64
#define RPC_CONNECT_TIMEOUT_MS 3000
#define RPC_ANSWER_TIMEOUT_MS 5000
#define RPC_DEATH_PROBE_MS 1000 /* how long the abort path waits on each server's connect */
#define RPC_DEATH_ROUNDS 10     /* ... and how often it looks, RPC_DEATH_PAUSE_US apart */
#define RPC_DEATH_PAUSE_US 100000
#define RPC_DEFAULT_HOST "127.0.0.1"

typedef struct rpc_server {
    char endpoint[SIPP_RPC_ENDPOINT_MAX];
    ggml_backend_dev_t devices[SIPP_MAX_DEVICES];
    int n_devices;
} rpc_server;

static pthread_mutex_t rpc_lock = PTHREAD_MUTEX_INITIALIZER;
static rpc_server servers[GGML_RPC_MAX_SERVERS];
static int n_servers;

/* Waits for fd to become readable (POLLIN) or writable (POLLOUT); false on timeout or error. */
static bool wait_fd(int fd, short events, int timeout_ms) {
    struct pollfd pfd = {.fd = fd, .events = events};
    int r;
    do
        r = poll(&pfd, 1, timeout_ms);
    while (r < 0 && errno == EINTR);
    return r == 1 && (pfd.revents & events);
}

/* A TCP connection to endpoint within timeout_ms; -1 with errbuf set otherwise. */
static int connect_endpoint(const char *endpoint, int timeout_ms, char *errbuf) {
    char host[SIPP_RPC_ENDPOINT_MAX], port_s[8];
    int port;
    if (sipp_rpc_parse_endpoint(endpoint, host, sizeof host, &port, errbuf) != SIPP_OK) return -1;
    snprintf(port_s, sizeof port_s, "%d", port);
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    int gai = getaddrinfo(host, port_s, &hints, &ai);
    if (gai != 0) {
        sipp_fail(errbuf, SIPP_ERR_NOT_FOUND, "rpc server %s: cannot resolve host '%s': %s", endpoint, host,
                  gai_strerror(gai));
        return -1;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int err = fd < 0 ? errno : 0;
    if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        err = errno;
        if (err == EINPROGRESS) {
            err = ETIMEDOUT;
            if (wait_fd(fd, POLLOUT, timeout_ms)) {
                socklen_t len = sizeof err;
                if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
            }
        }
    }
    freeaddrinfo(ai);
    if (err != 0) {
        if (fd >= 0) close(fd);
        sipp_fail(
            errbuf, SIPP_ERR_BACKEND,
            "rpc server %s is unreachable: %s; start it there with: sipp rpc-server --host ADDRESS --port %d",
            endpoint, strerror(err), port);
        return -1;
    }
    return fd;
}

static bool send_all(int fd, const void *data, size_t n, int timeout_ms) {
    const char *p = data;
    while (n) {
        if (!wait_fd(fd, POLLOUT, timeout_ms)) return false;
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (w <= 0) return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

/* Reads exactly n bytes; 0 on success, else EOF (-1) or a timeout (-2). */
static int recv_all(int fd, void *data, size_t n, int timeout_ms) {
    char *p = data;
    while (n) {
        if (!wait_fd(fd, POLLIN, timeout_ms)) return -2;
        ssize_t r = recv(fd, p, n, 0);
        if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (r <= 0) return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

sipp_status sipp_rpc_handshake(const char *endpoint, int version[3], char *errbuf) {
    int fd = connect_endpoint(endpoint, RPC_CONNECT_TIMEOUT_MS, errbuf);
    if (fd < 0) return SIPP_ERR_BACKEND;
    uint8_t req[1 + sizeof(uint64_t) + RPC_CONN_CAPS_SIZE] = {RPC_CMD_HELLO};
    uint64_t req_size = RPC_CONN_CAPS_SIZE; /* little-endian on every host ggml-rpc runs on */
    memcpy(req + 1, &req_size, sizeof req_size);
    uint64_t rsp_size = 0;
    uint8_t rsp[RPC_HELLO_RSP_MAX] = {0};
    sipp_status st = SIPP_OK;
    int r = send_all(fd, req, sizeof req, RPC_ANSWER_TIMEOUT_MS)
                ? recv_all(fd, &rsp_size, sizeof rsp_size, RPC_ANSWER_TIMEOUT_MS)
                : -1;
    if (r == 0 && (rsp_size < RPC_HELLO_RSP_MIN || rsp_size > RPC_HELLO_RSP_MAX)) r = -3;
    if (r == 0) r = recv_all(fd, rsp, (size_t)rsp_size, RPC_ANSWER_TIMEOUT_MS);
    close(fd);
    if (r == -2)
        st = sipp_fail(
            errbuf, SIPP_ERR_BACKEND,
            "rpc server %s accepted the connection but did not answer the handshake within %d ms: it serves "
            "one client at a time, so another client may be using it (or it is not an rpc-server)",
            endpoint, RPC_ANSWER_TIMEOUT_MS);
    else if (r != 0)
        st = sipp_fail(
            errbuf, SIPP_ERR_BACKEND,
            "rpc server %s closed the connection or answered the handshake with something that is not ggml's "
            "RPC protocol: it is not an rpc-server, or one too old to speak protocol %d; run sipp "
            "rpc-server (llama.cpp %s) there",
            endpoint, RPC_PROTO_MAJOR_VERSION, sipp_llama_release());
    if (st != SIPP_OK) return st;
    for (int i = 0; i < 3; i++)
        version[i] = rsp[i];
    if (rsp[0] != RPC_PROTO_MAJOR_VERSION || rsp[1] > RPC_PROTO_MINOR_VERSION)
        return sipp_fail(
            errbuf, SIPP_ERR_BACKEND,
            "rpc server %s speaks RPC protocol %d.%d.%d, this sipp speaks %d.%d.%d (llama.cpp %s); run "
            "the rpc-server of the same llama.cpp release there (sipp rpc-server from this build)",
            endpoint, rsp[0], rsp[1], rsp[2], RPC_PROTO_MAJOR_VERSION, RPC_PROTO_MINOR_VERSION,
            RPC_PROTO_PATCH_VERSION, sipp_llama_release());
    return SIPP_OK;
}

sipp_status sipp_rpc_ping(const char *list, char *errbuf) {
    char endpoints[SIPP_RPC_MAX_SERVERS][SIPP_RPC_ENDPOINT_MAX];
    int n = 0, version[3];
    sipp_status st = sipp_rpc_parse_list(list, endpoints, SIPP_RPC_MAX_SERVERS, &n, errbuf);
    for (int i = 0; st == SIPP_OK && i < n; i++)
        st = sipp_rpc_handshake(endpoints[i], version, errbuf);
    return st;
}

static ggml_backend_reg_t rpc_reg(char *errbuf) {
    ggml_backend_reg_t reg = ggml_backend_reg_by_name("RPC");
    if (!reg)
        sipp_fail(
            errbuf, SIPP_ERR_BACKEND,
            "backend 'rpc' is not compiled into this build (no libggml-rpc.so in the artifact '%s'); rebuild "
            "with: make BACKENDS=\"cpu vulkan rpc\", or sipp build --backend rpc",
            sipp_runtime_artifact_dir() ? sipp_runtime_artifact_dir() : "?");
    return reg;
}

bool sipp_rpc_compiled(void) { return ggml_backend_reg_by_name("RPC") != NULL; }

/* ggml aborts when an RPC connection fails. Only RPC failures are turned into a clean exit; any
 * other abort keeps ggml's own message and backtrace. */
static void rpc_abort_callback(const char *message) {
    if (!message || !strstr(message, "RPC")) {
        fprintf(stderr, "%s\n", message ? message : "ggml abort");
        abort();
    }
    char lost[1024] = "";
    size_t used = 0;
    /* A server that died refuses connections, but its listening socket may close a moment after
     * the connection that broke: look a few times. Not locking rpc_lock: the abort may come from
     * inside a call that holds it, and the table only grows. */
    for (int round = 0; round < RPC_DEATH_ROUNDS && !used; round++) {
        if (round) usleep(RPC_DEATH_PAUSE_US);
        for (int i = 0; i < n_servers && used < sizeof lost - SIPP_RPC_ENDPOINT_MAX - 4; i++) {
            char ignored[SIPP_ERROR_SIZE];
            int fd = connect_endpoint(servers[i].endpoint, RPC_DEATH_PROBE_MS, ignored);
            if (fd >= 0) {
                close(fd);
                continue;
            }
            used += (size_t)snprintf(lost + used, sizeof lost - used, "%s%s", used ? ", " : "",
                                     servers[i].endpoint);
        }
    }
    /* ggml's message is "FILE:LINE: what happened"; keep what happened. */
    const char *what = strrchr(message, ':') ? strrchr(message, ':') + 1 : message;
    while (*what == ' ')
        what++;
    if (*lost)
        fprintf(
            stderr,
            "sipp: rpc server %s went away (%s); the model has layers there and cannot continue. Restart the "
            "server and run again\n",
            lost, what);
    else
        fprintf(stderr,
                "sipp: the connection to an rpc server broke (%s), though all %d answer again; run again\n",
                what, n_servers);
    fflush(stderr);
    _exit(SIPP_RPC_LOST_EXIT);
}

/* ggml's RPC client writes to its sockets with send() and no MSG_NOSIGNAL, so a server that dies
 * while a command is being written would end this process with SIGPIPE before the abort callback
 * could name it (seen: exit by signal 13 where 75 and the server's name were due). A process that
 * uses RPC ignores SIGPIPE, unless it has a handler of its own: the write then fails with EPIPE and
 * ggml aborts through rpc_abort_callback. (The gateway ignores SIGPIPE anyway; the CLI stops on a
 * failed write to its output.) */
static void ignore_sigpipe(void) {
    struct sigaction old;
    if (sigaction(SIGPIPE, NULL, &old) == 0 && old.sa_handler == SIG_DFL) {
        struct sigaction ign;
        memset(&ign, 0, sizeof ign);
        ign.sa_handler = SIG_IGN;
        sigaction(SIGPIPE, &ign, NULL);
    }
}

sipp_status sipp_rpc_connect(const char *endpoint, ggml_backend_dev_t *devices, int cap, int *n_out,
                             char *errbuf) {
    *n_out = 0;
    ignore_sigpipe();
    ggml_backend_reg_t reg = rpc_reg(errbuf);
    if (!reg) return SIPP_ERR_BACKEND;
    /* A server this process already uses is not asked again: it serves one client at a time, and
     * that client may be this process's own open connection (another model on the same server). */
    pthread_mutex_lock(&rpc_lock);
    const rpc_server *known = NULL;
    for (int i = 0; i < n_servers && !known; i++)
        if (strcmp(servers[i].endpoint, endpoint) == 0) known = &servers[i];
    pthread_mutex_unlock(&rpc_lock);
    if (!known) {
        int version[3];
        sipp_status st = sipp_rpc_handshake(endpoint, version, errbuf);
        if (st != SIPP_OK) return st;
    }
    typedef ggml_backend_reg_t (*add_server_fn)(const char *);
    add_server_fn add = (add_server_fn)ggml_backend_reg_get_proc_address(reg, "ggml_backend_rpc_add_server");
    if (!add) return sipp_fail(errbuf, SIPP_ERR_BACKEND, "the rpc module has no ggml_backend_rpc_add_server");

    pthread_mutex_lock(&rpc_lock);
    ggml_set_abort_callback(rpc_abort_callback);
    rpc_server *s = NULL;
    for (int i = 0; i < n_servers && !s; i++)
        if (strcmp(servers[i].endpoint, endpoint) == 0) s = &servers[i];
    if (!s && n_servers == GGML_RPC_MAX_SERVERS) {
        pthread_mutex_unlock(&rpc_lock);
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                         "rpc server %s: at most %d rpc servers per process", endpoint, GGML_RPC_MAX_SERVERS);
    }
    if (!s) {
        /* The entry is visible to the abort callback before ggml connects. */
        s = &servers[n_servers++];
        sipp_strlcpy(s->endpoint, endpoint, sizeof s->endpoint);
        ggml_backend_reg_t server = add(endpoint);
        /* Registered like llama.cpp's own tools do, so that its devices are listed with the others
         * (sipp backends, ops); loads name their devices explicitly, so no load takes one unasked. */
        if (server) ggml_backend_register(server);
        size_t n = server ? ggml_backend_reg_dev_count(server) : 0;
        for (size_t i = 0; i < n && s->n_devices < SIPP_MAX_DEVICES; i++)
            s->devices[s->n_devices++] = ggml_backend_reg_dev_get(server, i);
    }
    for (int i = 0; i < s->n_devices && i < cap; i++)
        devices[i] = s->devices[i];
    *n_out = s->n_devices < cap ? s->n_devices : cap;
    pthread_mutex_unlock(&rpc_lock);
    if (*n_out == 0) return sipp_fail(errbuf, SIPP_ERR_BACKEND, "rpc server %s exposes no device", endpoint);
    return SIPP_OK;
}

const char *sipp_rpc_endpoint_of(const char *device_name) {
    const char *found = NULL;
    pthread_mutex_lock(&rpc_lock);
    for (int i = 0; i < n_servers && !found; i++)
        for (int d = 0; d < servers[i].n_devices && !found; d++)
            if (strcmp(ggml_backend_dev_name(servers[i].devices[d]), device_name) == 0)
                found = servers[i].endpoint;
    pthread_mutex_unlock(&rpc_lock);
    return found;
}

const char *sipp_rpc_device_of_buffer(const char *buffer_name) {
    /* ggml names an rpc buffer "RPC<server's device index>[host:port]". */
    const char *open = strchr(buffer_name, '[');
    const char *close_b = open ? strchr(open, ']') : NULL;
    if (strncmp(buffer_name, "RPC", 3) != 0 || !open || !close_b) return NULL;
    int index = atoi(buffer_name + 3);
    const char *found = NULL;
    pthread_mutex_lock(&rpc_lock);
    for (int i = 0; i < n_servers && !found; i++)
        if (strlen(servers[i].endpoint) == (size_t)(close_b - open - 1) &&
            strncmp(servers[i].endpoint, open + 1, (size_t)(close_b - open - 1)) == 0 &&
            index < servers[i].n_devices)
            found = ggml_backend_dev_name(servers[i].devices[index]);
    pthread_mutex_unlock(&rpc_lock);
    return found;
}

sipp_status sipp_rpc_probe(const char *endpoint, sipp_rpc_server_info *info, char *errbuf) {
    memset(info, 0, sizeof *info);
    sipp_status st = sipp_runtime_init(NULL, errbuf);
    if (st != SIPP_OK) return st;
    char host[SIPP_RPC_ENDPOINT_MAX];
    int port;
    if ((st = sipp_rpc_parse_endpoint(endpoint, host, sizeof host, &port, errbuf)) != SIPP_OK) return st;
    sipp_strlcpy(info->endpoint, endpoint, sizeof info->endpoint);
    int version[3] = {0};
    if (!rpc_reg(errbuf)) return SIPP_ERR_BACKEND;
    st = sipp_rpc_handshake(endpoint, version, errbuf);
    info->proto_major = version[0];
    info->proto_minor = version[1];
    info->proto_patch = version[2];
    if (st != SIPP_OK) return st;
    ggml_backend_dev_t devs[SIPP_MAX_DEVICES];
    int n = 0;
    if ((st = sipp_rpc_connect(endpoint, devs, SIPP_MAX_DEVICES, &n, errbuf)) != SIPP_OK) return st;
    info->n_devices = n;
    sipp_strlcpy(info->device, ggml_backend_dev_name(devs[0]), sizeof info->device);
    sipp_strlcpy(info->description, ggml_backend_dev_description(devs[0]), sizeof info->description);
    size_t free_b = 0, total_b = 0;
    ggml_backend_dev_memory(devs[0], &free_b, &total_b);
    info->memory_free = free_b;
    info->memory_total = total_b;
    return SIPP_OK;
}

/* ---- the server ---------------------------------------------------------------------------------- */

sipp_rpc_server_params sipp_rpc_server_default_params(void) {
    sipp_rpc_server_params p = {.host = RPC_DEFAULT_HOST, .port = SIPP_RPC_DEFAULT_PORT, .backend = "cpu"};
    return p;
}

/* Binds once ourselves, so that a port in use or a foreign address is a clear error: ggml's server
 * only prints "Failed to create server socket". */
static sipp_status check_bind(const char *host, int port, char *errbuf) {
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE},
                    *ai = NULL;
    char port_s[8];
    snprintf(port_s, sizeof port_s, "%d", port);
    int gai = getaddrinfo(host, port_s, &hints, &ai);
    if (gai != 0)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "rpc-server: --host '%s' does not resolve: %s",
                         host, gai_strerror(gai));
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int err = fd < 0 ? errno : bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 ? errno : 0;
    if (fd >= 0) close(fd);
    freeaddrinfo(ai);
    if (err == EADDRINUSE)
        return sipp_fail(errbuf, SIPP_ERR_IO,
                         "rpc-server: port %d on %s is in use; choose another with --port", port, host);
    if (err != 0)
        return sipp_fail(errbuf, SIPP_ERR_IO, "rpc-server: cannot listen on %s:%d: %s", host, port,
                         strerror(err));
    return SIPP_OK;
}

sipp_status sipp_rpc_server_run(const sipp_rpc_server_params *params, char *errbuf) {
    sipp_rpc_server_params def = sipp_rpc_server_default_params();
    if (!params) params = &def;
    const char *host = params->host && *params->host ? params->host : RPC_DEFAULT_HOST;
    if (params->port < 1 || params->port > 65535)
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT, "rpc-server: port %d is not in 1..65535",
                         params->port);
    if (strchr(host, ':'))
        return sipp_fail(errbuf, SIPP_ERR_INVALID_ARGUMENT,
                         "rpc-server: --host '%s': IPv6 addresses are not supported by ggml's RPC server",
                         host);
    sipp_status st = sipp_runtime_init(NULL, errbuf);
    if (st != SIPP_OK) return st;
    ggml_backend_reg_t reg = rpc_reg(errbuf);
    if (!reg) return SIPP_ERR_BACKEND;

    sipp_host_view view;
    sipp_host_discover(&view);
    sipp_policy_result pick;
    const char *backend = params->backend && *params->backend ? params->backend : "cpu";
    if (strcmp(backend, "rpc") == 0)
        return sipp_fail(
            errbuf, SIPP_ERR_INVALID_ARGUMENT,
            "rpc-server: --backend rpc would serve a remote device; serve a local one (cpu, vulkan, ...)");
    if ((st = sipp_policy_decide(&view, backend, NULL, &pick, errbuf)) != SIPP_OK) return st;
    ggml_backend_dev_t dev = pick.backend == SIPP_BACKEND_CPU
                                 ? ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU)
                                 : ggml_backend_dev_get((size_t)view.devices[pick.device].index);
    if ((st = check_bind(host, params->port, errbuf)) != SIPP_OK) return st;

    typedef void (*start_server_fn)(const char *, const char *, size_t, size_t, ggml_backend_dev_t *);
    start_server_fn start =
        (start_server_fn)ggml_backend_reg_get_proc_address(reg, "ggml_backend_rpc_start_server");
    if (!start)
        return sipp_fail(errbuf, SIPP_ERR_BACKEND, "the rpc module has no ggml_backend_rpc_start_server");
    char endpoint[SIPP_RPC_ENDPOINT_MAX];
    snprintf(endpoint, sizeof endpoint, "%s:%d", host, params->port);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    size_t threads = params->threads > 0 ? (size_t)params->threads : (size_t)(cores > 0 ? cores : 1);
    start(endpoint, params->cache_dir && *params->cache_dir ? params->cache_dir : NULL, threads, 1, &dev);
    return sipp_fail(errbuf, SIPP_ERR_IO,
                     "rpc-server on %s stopped: ggml's server could not start or accept (see above)",
                     endpoint);
}
