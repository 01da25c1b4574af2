/* The byte tunnel of an upgraded connection (WebSocket and the like) on the event loop: after
 * the upstream's 101, whatever either side sends is copied to the other, with the same flow
 * control as requests (at most OUT_HIGH bytes wait for a side before the other is no longer
 * read). As Go's ReverseProxy does, the tunnel ends when either side ends: what it sent is
 * delivered, then both connections close. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "router/router-loop-internal.h"

int router_loop_tunnel_begin(lconn *c, const char *early, size_t n)
{
    c->st = ST_TUNNEL;
    c->in_start = c->in_parsed; /* the bytes after the request head belong to the tunnel */
    return buf_append(&c->out, early, n);
}

/* Client -> upstream: c->in [in_start, in_len) is what the upstream has not taken yet.
 * Returns 1 when something moved, 0 when blocked, a negative errno on a failure. */
static int client_to_upstream(lconn *c)
{
    int moved = 0;
    while (c->in_start < c->in_len && c->up_can_write) {
        ssize_t n = send(c->up_fd, c->in + c->in_start, c->in_len - c->in_start, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            c->up_can_write = false;
            router_loop_want_out(c, true, true);
            break;
        }
        if (n < 0)
            return -errno;
        c->in_start += (size_t)n;
        moved = 1;
    }
    if (c->in_start < c->in_len)
        return moved; /* the upstream is not taking more: the client is not read (flow control) */
    c->in_start = c->in_len = c->in_parsed = 0;
    if (c->up_ev_out)
        router_loop_want_out(c, true, false);
    while (c->can_read && !c->rd_eof) {
        ssize_t n = recv(c->fd, c->in, IN_CAP, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            c->can_read = false;
            break;
        }
        if (n < 0)
            return -errno;
        if (n == 0) {
            c->rd_eof = true;
            break;
        }
        if ((size_t)n < IN_CAP && !c->rdhup)
            c->can_read = false; /* a short read: edge-triggered, more bytes make an event */
        c->in_len = (size_t)n;
        c->last_io = now_ms();
        return 1;
    }
    return moved;
}

/* Upstream -> client, while fewer than OUT_HIGH bytes wait for the client. */
static int upstream_to_client(lconn *c)
{
    lworker *w = c->w;
    while (c->up_can_read && !c->up_eof && c->out.len - c->out_off <= OUT_HIGH) {
        ssize_t n = recv(c->up_fd, w->rd, RD_CAP, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            c->up_can_read = false;
            return 0;
        }
        if (n < 0)
            return -errno;
        if (n == 0) {
            c->up_eof = true;
            return 1;
        }
        if ((size_t)n < RD_CAP && !c->up_rdhup)
            c->up_can_read = false;
        if (buf_append(&c->out, w->rd, (size_t)n) < 0)
            return -ENOMEM;
        c->last_io = now_ms();
        return 1;
    }
    return 0;
}

int router_loop_tunnel_run(lconn *c)
{
    for (;;) {
        int a = client_to_upstream(c);
        int b = upstream_to_client(c);
        if (a < 0 || b < 0 || router_loop_client_flush(c) < 0)
            break;
        bool client_done = c->rd_eof && c->in_start == c->in_len;
        bool upstream_done = c->up_eof && c->out.len == 0;
        if (client_done || upstream_done)
            break; /* one side ended and what it sent was delivered */
        if (a == 0 && b == 0)
            return 0;
    }
    router_loop_conn_close(c);
    return 1;
}
