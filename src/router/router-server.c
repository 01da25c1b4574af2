/* The listener and its connections: the event-loop workers (router-loop.c) accept and serve the
 * HTTP/1.1 hot path; connections they hand off (HTTP/2, request bodies, legacy emulation, ...)
 * get a thread of their own here. Also the upstream connect helper. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "basic/io-util.h"
#include "basic/macro.h"
#include "basic/time-util.h"
#include "router/router-core.h"
#include "shared/log.h"

/* Open client connections, so router_stop can cut them and wait for their threads. */
typedef struct conn_set {
    pthread_mutex_t lock;
    pthread_cond_t empty;
    int *fds;
    size_t n, cap;
    size_t max; /* the connection cap */
    bool stopping;
} conn_set;

struct router {
    int fd;
    router_loop *loop;
    router_ctx ctx;
    conn_set conns;
};

static bool conn_add(conn_set *s, int fd)
{
    pthread_mutex_lock(&s->lock);
    bool ok = !s->stopping;
    if (ok && s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        int *v = realloc(s->fds, cap * sizeof(int));
        if (v) {
            s->fds = v;
            s->cap = cap;
        } else
            ok = false;
    }
    if (ok)
        s->fds[s->n++] = fd;
    pthread_mutex_unlock(&s->lock);
    return ok;
}

static void conn_remove(conn_set *s, int fd)
{
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->n; i++)
        if (s->fds[i] == fd) {
            s->fds[i] = s->fds[--s->n];
            break;
        }
    if (s->n == 0)
        pthread_cond_broadcast(&s->empty);
    pthread_mutex_unlock(&s->lock);
}

void router_target_done(router_target *t)
{
    if (!t)
        return;
    free(t->rest);
    free(t->grpc);
    free(t->legacy);
    free(t->port);
    t->rest = t->grpc = t->legacy = t->port = NULL;
}

int router_write_all(int fd, const void *data, size_t len)
{
    int r = loop_send(fd, data, len);
    return r == -EAGAIN ? -ETIMEDOUT : r; /* the socket's send timeout ran out */
}

static int connect_unix(const char *path, long timeout_ms)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path))
        return -ENAMETOOLONG;
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int r = -errno;
        close(fd);
        return r;
    }
    return fd;
}

/* Splits "host:port" or "[v6]:port": *ret_host owned by the caller, *ret_port borrowed. */
static int split_hostport(const char *hostport, char **ret_host, const char **ret_port)
{
    const char *colon = strrchr(hostport, ':');
    if (!colon)
        return -EINVAL;
    char *host;
    if (hostport[0] == '[') {
        const char *end = strchr(hostport, ']');
        if (!end || end + 1 != colon)
            return -EINVAL;
        host = strndup(hostport + 1, (size_t)(end - hostport - 1));
    } else
        host = strndup(hostport, (size_t)(colon - hostport));
    if (!host)
        return -ENOMEM;
    *ret_host = host;
    *ret_port = colon + 1;
    return 0;
}

int router_sockaddr(const char *addr, bool lookup, struct sockaddr_storage *ret,
                    socklen_t *ret_len)
{
    memset(ret, 0, sizeof(*ret));
    addr = router_addr_hostport(addr);
    if (strncmp(addr, "unix:", 5) == 0) {
        struct sockaddr_un *sa = (struct sockaddr_un *)ret;
        if (strlen(addr + 5) >= sizeof(sa->sun_path))
            return -ENAMETOOLONG;
        sa->sun_family = AF_UNIX;
        strcpy(sa->sun_path, addr + 5);
        *ret_len = sizeof(*sa);
        return 0;
    }
    _cleanup_free_ char *host = NULL;
    const char *port;
    int r = split_hostport(addr, &host, &port);
    if (r < 0)
        return r;
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = lookup ? 0 : AI_NUMERICHOST | AI_NUMERICSERV},
                    *res = NULL;
    int g = getaddrinfo(host, port, &hints, &res);
    if (g == EAI_NONAME && !lookup)
        return -EADDRNOTAVAIL; /* a name: looking it up would block */
    if (g == EAI_MEMORY)
        return -ENOMEM;
    if (g != 0)
        return -EHOSTUNREACH; /* as router_connect says it (502) */
    memcpy(ret, res->ai_addr, res->ai_addrlen);
    *ret_len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

static int connect_tcp(const char *addr, long timeout_ms)
{
    _cleanup_free_ char *host = NULL;
    const char *port;
    int sr = split_hostport(router_addr_hostport(addr), &host, &port);
    if (sr < 0)
        return sr;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int g = getaddrinfo(host, port, &hints, &res);
    if (g != 0)
        return -EHOSTUNREACH;
    int r = -ECONNREFUSED;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        int fd = router_addr_is_netns(addr)
                     ? router_netns_socket(addr, ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK)
                     : socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
            r = router_addr_is_netns(addr) ? fd : -errno;
            continue;
        }
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS) {
            r = -errno;
            close(fd);
            continue;
        }
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int pr = poll(&p, 1, (int)timeout_ms);
        int soerr = 0;
        socklen_t sl = sizeof(soerr);
        if (pr <= 0) {
            r = pr == 0 ? -ETIMEDOUT : -errno;
            close(fd);
            continue;
        }
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
        if (soerr) {
            r = -soerr;
            close(fd);
            continue;
        }
        int fl = fcntl(fd, F_GETFL);
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        freeaddrinfo(res);
        return fd;
    }
    freeaddrinfo(res);
    return r;
}

int router_connect(const char *addr, long timeout_ms)
{
    if (!addr)
        return -EINVAL;
    if (strncmp(addr, "unix:", 5) == 0)
        return connect_unix(addr + 5, timeout_ms);
    return connect_tcp(addr, timeout_ms > 0 ? timeout_ms : 5000);
}

static bool peer_is_loopback(int fd)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) < 0)
        return false;
    if (ss.ss_family == AF_UNIX)
        return true;
    if (ss.ss_family == AF_INET)
        return (ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr) >> 24) == 127;
    if (ss.ss_family == AF_INET6) {
        const struct in6_addr *a = &((struct sockaddr_in6 *)&ss)->sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK(a))
            return true;
        if (IN6_IS_ADDR_V4MAPPED(a))
            return a->s6_addr[12] == 127;
    }
    return false;
}

typedef struct conn_arg {
    router *r;
    int fd;
    bool loopback, h2;
    size_t nout, npre;
    char *pre;
    char out[];
} conn_arg;

/* A connection handed off by the event loop: served by the blocking code on its own thread. */
static void *conn_thread(void *p)
{
    conn_arg *a = p;
    router_ctx *ctx = &a->r->ctx;
    if (a->nout > 0 && router_write_all(a->fd, a->out, a->nout) < 0)
        goto out;
    if (a->h2)
        router_h2_serve(ctx, a->fd, a->loopback, a->pre, a->npre);
    else if (router_http1_serve(ctx, a->fd, a->loopback, a->pre, a->npre)) {
        free(a); /* back on the event loop, still tracked */
        return NULL;
    }
out:
    conn_remove(&a->r->conns, a->fd);
    close(a->fd);
    free(a);
    return NULL;
}

static int hook_accepted(void *payload, int fd)
{
    router *r = payload;
    if (!conn_add(&r->conns, fd))
        return -ECANCELED;
    pthread_mutex_lock(&r->conns.lock);
    bool over = r->conns.n > r->conns.max;
    pthread_mutex_unlock(&r->conns.lock);
    return over ? 1 : 0;
}

/* Half the fd limit (each client connection may hold an upstream socket), within [64, 4096]. */
static size_t default_max_connections(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
        return 4096;
    size_t n = rl.rlim_cur > 128 ? (size_t)(rl.rlim_cur - 64) / 2 : 64;
    return n < 64 ? 64 : n > 4096 ? 4096 : n;
}

static void hook_closed(void *payload, int fd)
{
    router *r = payload;
    conn_remove(&r->conns, fd);
}

static int ctx_handback(void *payload, int fd, bool loopback, const char *pre, size_t npre)
{
    router *r = payload;
    return router_loop_adopt(r->loop, fd, loopback, pre, npre);
}

static int hook_handoff(void *payload, int fd, bool loopback, bool h2, const char *out, size_t nout,
                        const char *pre, size_t npre)
{
    router *r = payload;
    conn_arg *a = malloc(sizeof(*a) + nout + npre + 1);
    if (!a)
        return -ENOMEM;
    *a = (conn_arg){.r = r, .fd = fd, .loopback = loopback, .h2 = h2, .nout = nout, .npre = npre};
    a->pre = a->out + nout;
    if (nout)
        memcpy(a->out, out, nout);
    if (npre)
        memcpy(a->pre, pre, npre);
    int e = router_thread_spawn(conn_thread, a);
    if (e < 0)
        free(a);
    return e;
}

static int bind_listen(const char *listen_addr, uint16_t *ret_port, api_error *err)
{
    const char *colon = strrchr(listen_addr, ':');
    if (!colon) {
        return api_error_set_errno(err, -EINVAL, "listen address \"%s\" is not HOST:PORT",
                                   listen_addr);
    }
    _cleanup_free_ char *host = NULL;
    if (listen_addr[0] == '[')
        host = strndup(listen_addr + 1, (size_t)(colon - listen_addr - 2));
    else
        host = strndup(listen_addr, (size_t)(colon - listen_addr));
    if (!host)
        return -ENOMEM;
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV},
                    *res = NULL;
    if (getaddrinfo(*host ? host : NULL, colon + 1, &hints, &res) != 0) {
        return api_error_set_errno(err, -EINVAL, "cannot resolve listen address \"%s\"",
                                   listen_addr);
    }
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (fd < 0 || bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, 1024) < 0) {
        int r = api_error_set_errno(err, -errno, "cannot listen on %s: %s", listen_addr,
                                    strerror(errno));
        safe_close(fd);
        freeaddrinfo(res);
        return r;
    }
    freeaddrinfo(res);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    *ret_port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                              : ((struct sockaddr_in6 *)&ss)->sin6_port);
    return fd;
}

int router_start(const router_options *o, router **ret, uint16_t *ret_port, api_error *err)
{
    if (!o->resolver)
        return -EINVAL;
    uint16_t port = 0;
    int fd = bind_listen(o->listen, &port, err);
    if (fd < 0)
        return fd;
    router *r = calloc(1, sizeof(*r));
    if (!r) {
        close(fd);
        return -ENOMEM;
    }
    r->fd = fd;
    pthread_mutex_init(&r->conns.lock, NULL);
    pthread_cond_init(&r->conns.empty, NULL);
    r->ctx.token = o->token ? strdup(o->token) : NULL;
    r->ctx.allow_unauthenticated = o->allow_unauthenticated;
    const char *pd = o->preview_domain ? o->preview_domain : "localhost";
    r->ctx.preview_domain = *pd ? strdup(pd) : NULL;
    r->ctx.resolver = o->resolver;
    r->ctx.proxy_timeout_ms = o->proxy_timeout_ms > 0 ? o->proxy_timeout_ms : 180000;
    r->ctx.connect_timeout_ms = o->connect_timeout_ms > 0 ? o->connect_timeout_ms : 5000;
    r->ctx.header_timeout_ms = o->header_timeout_ms == 0  ? 10000
                               : o->header_timeout_ms < 0 ? 0
                                                          : o->header_timeout_ms;
    r->conns.max = o->max_connections > 0 ? o->max_connections : default_max_connections();
    router_loop_hooks hooks = {.payload = r,
                               .accepted = hook_accepted,
                               .closed = hook_closed,
                               .loopback = peer_is_loopback,
                               .handoff = hook_handoff};
    r->ctx.handback = ctx_handback;
    r->ctx.handback_payload = r;
    int e = router_loop_start(&r->ctx, fd, &hooks, &r->loop);
    if (e < 0) {
        close(fd);
        free(r->ctx.token);
        free(r->ctx.preview_domain);
        free(r);
        return e;
    }
    *ret = r;
    *ret_port = port;
    return 0;
}

void router_stop(router *r)
{
    if (!r)
        return;
    router_loop_stop(r->loop, 1);
    /* Cut every open connection and wait (bounded) for its thread to let go of ctx. */
    pthread_mutex_lock(&r->conns.lock);
    r->conns.stopping = true;
    for (size_t i = 0; i < r->conns.n; i++)
        shutdown(r->conns.fds[i], SHUT_RDWR);
    struct timespec deadline = timespec_realtime_after(10 * USEC_PER_SEC);
    while (r->conns.n > 0)
        if (pthread_cond_timedwait(&r->conns.empty, &r->conns.lock, &deadline) != 0)
            break;
    bool idle = r->conns.n == 0;
    pthread_mutex_unlock(&r->conns.lock);
    if (!idle)
        return; /* a thread is stuck (e.g. resolving): leave its state allocated */
    router_loop_stop(r->loop, 2);
    close(r->fd);
    free(r->conns.fds);
    pthread_mutex_destroy(&r->conns.lock);
    pthread_cond_destroy(&r->conns.empty);
    r->ctx.resolver->free(r->ctx.resolver);
    free(r->ctx.token);
    free(r->ctx.preview_domain);
    free(r);
}
