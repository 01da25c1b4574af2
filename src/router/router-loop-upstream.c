/* The event loop's upstream side (router-loop-conn.c drives it): the non-blocking connect
 * (unix sockets, TCP with the connect in the background, host names looked up on a helper
 * thread), the request head, writing the request, and the response relay's start. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "basic/macro.h"
#include "router/router-loop-internal.h"

void router_loop_upstream_drop(lconn *c)
{
    c->up_fd = safe_close(c->up_fd);
    free(c->up_addr);
    c->up_addr = NULL;
    c->up_can_read = c->up_can_write = c->up_eof = c->up_ev_out = c->up_rdhup = false;
}

/* A non-blocking connect to "unix:/path" or "host:port" / "[v6]:port". A host name is looked
 * up once per client connection (router_loop_upstream_lookup; until then -EADDRNOTAVAIL). A TCP
 * connect in progress finishes in the background: the request waits in up_req until EPOLLOUT,
 * and a refusal shows as the first send's error (502). */
static int upstream_socket(lconn *c, const char *addr)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    int r;
    if (c->sa_addr && strcmp(c->sa_addr, addr) == 0) {
        ss = c->sa;
        sl = c->sa_len;
    } else if ((r = router_sockaddr(addr, false, &ss, &sl)) < 0)
        return r;
    int fd = router_addr_is_netns(addr)
                 ? router_netns_socket(addr, ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK)
                 : socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return router_addr_is_netns(addr) ? fd : -errno;
    if (ss.ss_family != AF_UNIX) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    if (connect(fd, (struct sockaddr *)&ss, sl) < 0 && errno != EINPROGRESS) {
        r = -errno;
        close(fd);
        return r; /* -EAGAIN: a unix socket's backlog is full (502, as in Go) */
    }
    return fd;
}

static int upstream_connect(lconn *c, const char *addr)
{
    int fd = upstream_socket(c, addr);
    if (fd < 0)
        return fd;
    /* EPOLLOUT from the start: it tells when a TCP connect in progress is done */
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET | EPOLLOUT,
                             .data.ptr = (void *)((uintptr_t)c | TAG_UP)};
    if (epoll_ctl(c->w->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
        int r = -errno;
        close(fd);
        return r;
    }
    c->up_fd = fd;
    c->up_addr = strdup(addr);
    c->up_can_read = false;
    c->up_can_write = true; /* a connect in progress: the first send says EAGAIN */
    c->up_eof = false;
    c->up_ev_out = true;
    c->up_rdhup = false;
    return c->up_addr ? 0 : -ENOMEM;
}

static int upstream_get(lconn *c, const char *addr)
{
    c->up_reused = false;
    if (c->up_fd >= 0 && c->up_addr && strcmp(c->up_addr, addr) == 0 && !c->up_eof) {
        c->up_reused = true;
        return 0;
    }
    router_loop_upstream_drop(c);
    int r = upstream_connect(c, addr);
    if (r < 0)
        router_loop_upstream_drop(c);
    return r;
}

int router_loop_upstream_request(lconn *c, const char *addr)
{
    buf_reset(&c->up_req);
    c->up_req_off = 0;
    c->req_chunked = (c->rq.p.flags & F_CHUNKED) != 0;
    int r = router_request_head(&c->up_req, http_method_str(c->rq.p.method),
                                router_message_url(&c->rq), router_upstream_host(addr), &c->rq.h,
                                c->req_chunked);
    if (r == 0 && c->rq.p.upgrade)
        r = router_request_upgrade(&c->up_req, router_headers_get(&c->rq.h, "upgrade"));
    return r;
}

/* Writes the pending request bytes (head, then body). Returns 0 (sent or waiting for EPOLLOUT)
 * or -errno. A body-less request's head stays in up_req for a retry on a fresh connection. */
int router_loop_upstream_flush(lconn *c)
{
    int r = router_loop_send(c, true, c->up_req.data, c->up_req.len, &c->up_req_off);
    if (r < 0)
        return r;
    if (c->has_body && c->up_req_off == c->up_req.len) {
        buf_reset(&c->up_req);
        c->up_req_off = 0;
    }
    if (c->up_req_off == c->up_req.len && c->up_ev_out)
        router_loop_want_out(c, true, false);
    return 0;
}

void router_loop_relay_start(lconn *c)
{
    router_relay_start(&c->relay, c->rq.p.method == HTTP_HEAD,
                       c->rq.p.http_major == 1 && c->rq.p.http_minor == 0, c->keep_alive);
    c->r_got = false;
    c->counted = false;
}

/* (Re)sends the built request on a (new) upstream connection. */
int router_loop_upstream_send(lconn *c, const char *addr)
{
    int r = upstream_get(c, addr);
    if (r < 0)
        return r;
    c->up_req_off = 0;
    router_loop_relay_start(c);
    r = router_loop_upstream_flush(c);
    if (r < 0 && c->up_reused) {
        router_loop_upstream_drop(c);
        if ((r = upstream_get(c, addr)) < 0)
            return r;
        c->up_req_off = 0;
        r = router_loop_upstream_flush(c);
    }
    if (r < 0)
        router_loop_upstream_drop(c);
    return r;
}


/* ---- host names ---- */

static void *lookup_thread(void *p)
{
    router_loop_job *j = p;
    j->r = router_sockaddr(j->addr, true, &j->sa, &j->sa_len);
    router_loop_job_post(j);
    return NULL;
}

int router_loop_upstream_lookup(lconn *c, const char *addr)
{
    router_loop_job *j = calloc(1, sizeof(*j));
    if (!j)
        return -ENOMEM;
    j->c = c;
    j->lookup = true;
    j->addr = strdup(addr);
    int r = j->addr ? router_thread_spawn(lookup_thread, j) : -ENOMEM;
    if (r < 0) {
        free(j->addr);
        free(j);
        return r;
    }
    c->st = ST_RESOLVING;
    return 0;
}

int router_loop_upstream_looked_up(lconn *c, router_loop_job *j)
{
    if (j->r < 0)
        return j->r;
    free(c->sa_addr);
    c->sa_addr = TAKE_PTR(j->addr);
    c->sa = j->sa;
    c->sa_len = j->sa_len;
    return 0;
}
