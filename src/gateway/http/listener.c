/*
 * listener.c: the gateway's listen socket: bound to [server] listen, or the one a parent gateway
 * passed a supervised child (kinds/supervise.c), which libmicrohttpd then accepts on (connection.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gateway/http/http.h"

#define GW_LISTEN_BACKLOG 128

/* The port fd is bound to, or fallback when it cannot be read. */
static int bound_port(int fd, int fallback) {
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) return fallback;
    return ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                          : ((struct sockaddr_in *)&ss)->sin_port);
}

/* A supervised child's listen socket, which its parent bound and passed (supervise.c). */
static int inherited_listener(int *port_out, char *err) {
    int fd = GW_SUPERVISED_LISTEN_FD, type = 0;
    socklen_t tl = sizeof type;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 || type != SOCK_STREAM) {
        snprintf(err, SIPP_ERROR_SIZE,
                 "--supervised-target: descriptor %d is not the listen socket a parent gateway passes; this "
                 "flag is for sipp's own use",
                 fd);
        return -1;
    }
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    *port_out = bound_port(fd, 0);
    return fd;
}

int gw_listen(const gw_config *c, int *port_out, char *err) {
    if (c->supervised_child) return inherited_listener(port_out, err);
    char port[16];
    snprintf(port, sizeof port, "%d", c->port);
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(c->host, port, &hints, &res);
    if (rc != 0) {
        snprintf(err, SIPP_ERROR_SIZE, "cannot resolve listen host '%s': %s", c->host, gai_strerror(rc));
        return -1;
    }
    int fd = -1, saved = 0;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            saved = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, GW_LISTEN_BACKLOG) != 0) {
            saved = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0) {
        snprintf(err, SIPP_ERROR_SIZE, "cannot listen on %s:%d: %s%s", c->host, c->port, strerror(saved),
                 saved == EADDRINUSE
                     ? " (another server uses the port: pick another with --port or [server] listen)"
                     : "");
        return -1;
    }
    *port_out = bound_port(fd, c->port);
    return fd;
}
