/* The gRPC server object: listeners (TCP, unix socket path, inherited fd), accepting
 * connections, and the lifecycle API used by sandboxd-main.c. */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "basic/macro.h"
#include "sandboxd/sandboxd-grpc-server.h"
#include "shared/log.h"

#define LISTEN_BACKLOG 511

static void free_cb(uv_handle_t *h)
{
    free(h);
}


static void on_connection(uv_stream_t *listener, int status)
{
    grpc_server *s = listener->data;
    if (status < 0 || s->stopping || s->closed)
        return;
    grpc_conn *conn = calloc(1, sizeof(*conn));
    if (!conn)
        return;
    conn->server = s;
    int r;
    if (listener->type == UV_TCP)
        r = uv_tcp_init(s->loop, &conn->h.tcp);
    else
        r = uv_pipe_init(s->loop, &conn->h.pipe, 0);
    if (r < 0) {
        free(conn);
        return;
    }
    conn->h.handle.data = conn;
    conn->closing = true; /* not yet on the server's list */
    r = uv_accept(listener, &conn->h.stream);
    if (r < 0) {
        uv_close(&conn->h.handle, free_cb);
        return;
    }
    if (listener->type == UV_TCP)
        uv_tcp_nodelay(&conn->h.tcp, 1);
    conn->closing = false;
    r = grpc_conn_start(conn);
    if (r < 0) {
        log_warn("grpc: cannot start connection", "error", uv_strerror(r));
        grpc_conn_close(conn);
    }
}

static int add_listener(grpc_server *s, uv_stream_t *l)
{
    l->data = s;
    int r = uv_listen(l, LISTEN_BACKLOG, on_connection);
    if (r < 0) {
        uv_close((uv_handle_t *)l, free_cb);
        return r;
    }
    s->listeners[s->nlisteners++] = l;
    return 0;
}

static int resolve_host(const char *host, int port, struct sockaddr_storage *ss)
{
    if (uv_ip4_addr(host, port, (struct sockaddr_in *)ss) == 0)
        return 0;
    if (uv_ip6_addr(host, port, (struct sockaddr_in6 *)ss) == 0)
        return 0;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE}, *res;
    if (getaddrinfo(host, NULL, &hints, &res) != 0 || !res)
        return -EADDRNOTAVAIL;
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    if (ss->ss_family == AF_INET)
        ((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
    else
        ((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
    freeaddrinfo(res);
    return 0;
}

static int listen_tcp(grpc_server *s, const char *host, int port)
{
    struct sockaddr_storage ss;
    int r = resolve_host(host, port, &ss);
    if (r < 0)
        return r;
    uv_tcp_t *t = malloc(sizeof(*t));
    if (!t)
        return -ENOMEM;
    uv_tcp_init(s->loop, t);
    r = uv_tcp_bind(t, (const struct sockaddr *)&ss, 0);
    if (r < 0) {
        uv_close((uv_handle_t *)t, free_cb);
        return r;
    }
    return add_listener(s, (uv_stream_t *)t);
}

static int listen_unix(grpc_server *s, const char *path)
{
    uv_pipe_t *p = malloc(sizeof(*p));
    if (!p)
        return -ENOMEM;
    uv_pipe_init(s->loop, p, 0);
    (void)unlink(path); /* a stale socket from a previous run */
    int r = uv_pipe_bind(p, path);
    if (r < 0) {
        uv_close((uv_handle_t *)p, free_cb);
        return r;
    }
    return add_listener(s, (uv_stream_t *)p);
}

static int listen_fd(grpc_server *s, int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
        return -errno;
    /* Inherited without FD_CLOEXEC: children must not get our listening socket. */
    if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
        return -errno;
    int r;
    uv_stream_t *l;
    if (ss.ss_family == AF_UNIX) {
        uv_pipe_t *p = malloc(sizeof(*p));
        if (!p)
            return -ENOMEM;
        uv_pipe_init(s->loop, p, 0);
        r = uv_pipe_open(p, fd);
        l = (uv_stream_t *)p;
    } else {
        uv_tcp_t *t = malloc(sizeof(*t));
        if (!t)
            return -ENOMEM;
        uv_tcp_init(s->loop, t);
        r = uv_tcp_open(t, fd);
        l = (uv_stream_t *)t;
    }
    if (r < 0) {
        uv_close((uv_handle_t *)l, free_cb);
        return r;
    }
    return add_listener(s, l);
}

static int server_listen(grpc_server *s)
{
    const sandboxd_config *cfg = s->sd->config;
    int r;
    if (cfg->grpc_port > 0) {
        r = listen_tcp(s, cfg->listen_host, cfg->grpc_port);
        if (r < 0) {
            char port[16];
            snprintf(port, sizeof(port), "%d", cfg->grpc_port);
            log_error("grpc: cannot listen", "host", cfg->listen_host, "port", port, "error",
                      uv_strerror(r));
            return r;
        }
    }
    if (cfg->grpc_socket && cfg->grpc_socket[0]) {
        r = listen_unix(s, cfg->grpc_socket);
        if (r < 0) {
            log_error("grpc: cannot listen", "socket", cfg->grpc_socket, "error", uv_strerror(r));
            return r;
        }
    }
    if (cfg->grpc_fd >= 0) {
        r = listen_fd(s, cfg->grpc_fd);
        if (r < 0) {
            log_error("grpc: cannot listen on inherited fd", "error", uv_strerror(r));
            return r;
        }
    }
    return 0;
}

/* The server embeds three handles (flusher, trimmer, SIGCHLD): freed after all closed. */
static void server_unref(grpc_server *s)
{
    if (--s->close_refs == 0)
        free(s);
}

static void embedded_closed_cb(uv_handle_t *h)
{
    server_unref(h->data);
}

static void procs_closed_cb(uv_handle_t *h)
{
    server_unref((grpc_server *)((char *)h - offsetof(grpc_server, procs.sigchld)));
}

#define TRIM_AFTER_IDLE_MS 1000

static void on_trim(uv_timer_t *t)
{
    grpc_server *s = t->data;
    if (s->ncalls == 0)
        malloc_trim(0);
}

void grpc_server_went_idle(grpc_server *s)
{
    if (!s->closed)
        uv_timer_start(&s->trimmer, on_trim, TRIM_AFTER_IDLE_MS, 0);
}

int grpc_server_new(grpc_server **ret, uv_loop_t *loop, sandboxd *sd)
{
    *ret = NULL;
    grpc_server *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->loop = loop;
    s->sd = sd;
    uv_idle_init(loop, &s->flusher);
    s->flusher.data = s;
    uv_timer_init(loop, &s->trimmer);
    s->trimmer.data = s;
    uv_unref((uv_handle_t *)&s->trimmer);
    int r = process_table_init(&s->procs, loop);
    s->procs.sigchld.data = &s->procs;
    if (r >= 0)
        r = server_listen(s);
    if (r < 0) {
        grpc_server_close(s);
        return r;
    }
    *ret = s;
    return 0;
}

process_table *grpc_server_procs(grpc_server *s)
{
    return &s->procs;
}

void grpc_server_signal_processes(grpc_server *s, int sig)
{
    if (s)
        process_table_signal_all(&s->procs, sig);
}

unsigned grpc_server_live_processes(grpc_server *s)
{
    return s ? s->procs.live : 0;
}

static void close_listeners(grpc_server *s)
{
    for (unsigned i = 0; i < s->nlisteners; i++)
        uv_close((uv_handle_t *)s->listeners[i], free_cb);
    s->nlisteners = 0;
    const char *path = s->sd->config->grpc_socket;
    if (path && path[0])
        (void)unlink(path);
}

void grpc_server_stop_accepting(grpc_server *s)
{
    if (!s || s->stopping)
        return;
    s->stopping = true;
    close_listeners(s);
    for (grpc_conn *c = s->conns; c; c = c->next)
        grpc_conn_goaway(c);
}

unsigned grpc_server_active_calls(grpc_server *s)
{
    if (!s)
        return 0;
    unsigned n = s->ncalls;
    for (grpc_conn *c = s->conns; c; c = c->next)
        if (c->writes_pending > 0 || c->wbuf.len > 0)
            n++;
    return n;
}

void grpc_server_close(grpc_server *s)
{
    if (!s || s->closed)
        return;
    s->closed = true;
    s->stopping = true;
    while (s->conns)
        grpc_conn_close(s->conns);
    close_listeners(s);
    s->close_refs = 3;
    process_table_close(&s->procs, procs_closed_cb);
    uv_close((uv_handle_t *)&s->flusher, embedded_closed_cb);
    uv_close((uv_handle_t *)&s->trimmer, embedded_closed_cb);
}
