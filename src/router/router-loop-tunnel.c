/* The byte tunnel of an upgraded connection (WebSocket and the like) on the event loop: after
 * the upstream's 101, whatever either side sends is copied to the other, with the same flow
 * control as requests (at most OUT_HIGH bytes wait for a side before the other is no longer
 * read). As Go's ReverseProxy does, the tunnel ends when either side ends: what it sent is
 * delivered, then both connections close. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "basic/time-util.h"
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
    size_t before = c->in_start;
    int r = router_loop_send(c, true, c->in, c->in_len, &c->in_start);
    if (r < 0)
        return r;
    int moved = c->in_start > before;
    if (c->in_start < c->in_len)
        return moved; /* the upstream is not taking more: the client is not read (flow control) */
    c->in_start = c->in_len = c->in_parsed = 0;
    if (c->up_ev_out)
        router_loop_want_out(c, true, false);
    if (!c->can_read || c->rd_eof)
        return moved;
    ssize_t n = router_loop_recv(c, false, c->in, IN_CAP);
    if (n == -EAGAIN)
        return moved;
    if (n < 0)
        return (int)n;
    if (n == 0) {
        c->rd_eof = true;
        return 1;
    }
    c->in_len = (size_t)n;
    c->last_io = now_msec(CLOCK_MONOTONIC);
    return 1;
}

/* Upstream -> client, while fewer than OUT_HIGH bytes wait for the client. */
static int upstream_to_client(lconn *c)
{
    lworker *w = c->w;
    if (!c->up_can_read || c->up_eof || c->out.len - c->out_off > OUT_HIGH)
        return 0;
    ssize_t n = router_loop_recv(c, true, w->rd, RD_CAP);
    if (n == -EAGAIN)
        return 0;
    if (n < 0)
        return (int)n;
    if (n == 0) {
        c->up_eof = true;
        return 1;
    }
    if (buf_append(&c->out, w->rd, (size_t)n) < 0)
        return -ENOMEM;
    c->last_io = now_msec(CLOCK_MONOTONIC);
    return 1;
}

int router_loop_tunnel_run(lconn *c)
{
    for (;;) {
        int a = client_to_upstream(c);
        int b = upstream_to_client(c);
        size_t pending = c->out.len - c->out_off;
        if (a < 0 || b < 0 || router_loop_client_flush(c) < 0)
            break;
        if (c->out.len - c->out_off < pending)
            b = 1; /* the client took bytes: the upstream may be read again */
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
