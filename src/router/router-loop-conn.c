/* One client connection of the event loop (router-loop.c): reading and parsing requests with
 * the core's message reader, admission, the upstream connection, request bodies streamed up
 * and responses relayed down with flow control, hand-off to the blocking code, and the
 * deadlines. Everything runs on the connection's worker thread. */
#include <errno.h>
#include <fcntl.h>
#include <http_parser.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "basic/macro.h"
#include "basic/time-util.h"
#include "router/router-loop-internal.h"

/* EPOLLOUT is asked for only while a write is blocked: registered all the time, every byte the
 * peer consumes would be an extra event (a wake-up) per request. */
static void want_out(lconn *c, bool up, bool on);
void router_loop_want_out(lconn *c, bool up, bool on)
{
    want_out(c, up, on);
}

static void conn_release(lconn *c)
{
    free(c->up_addr);
    free(c->sa_addr);
    free(c->in);
    router_message_done(&c->rq);
    buf_done(&c->out);
    buf_done(&c->up_req);
    router_relay_done(&c->relay);
    free(c);
}

/* Unlinks c; its memory lives until the end of the current batch of events. */
static void conn_free(lconn *c)
{
    lworker *w = c->w;
    if (c->prev)
        c->prev->next = c->next;
    else
        w->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    /* Out of the epoll set before c's memory goes: a handed-off client fd stays open (the
     * legacy thread owns it) and would otherwise still report events that point at c. */
    if (c->fd >= 0)
        (void)epoll_ctl(w->ep, EPOLL_CTL_DEL, c->fd, NULL);
    if (c->up_fd >= 0)
        (void)epoll_ctl(w->ep, EPOLL_CTL_DEL, c->up_fd, NULL);
    c->up_fd = safe_close(c->up_fd);
    c->dead = true;
    c->next = w->dead;
    c->prev = NULL;
    w->dead = c;
}

void router_loop_reap(lworker *w)
{
    while (w->dead) {
        lconn *c = w->dead;
        w->dead = c->next;
        conn_release(c);
    }
}

void router_loop_conn_close(lconn *c)
{
    int fd = c->fd;
    router_loop *L = c->w->L;
    conn_free(c);
    L->hooks.closed(L->hooks.payload, fd);
    close(fd);
}

static void want_out(lconn *c, bool up, bool on)
{
    bool *cur = up ? &c->up_ev_out : &c->ev_out;
    int fd = up ? c->up_fd : c->fd;
    if (*cur == on || fd < 0)
        return;
    void *ptr = up ? (void *)((uintptr_t)c | TAG_UP) : (void *)c;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET | (on ? EPOLLOUT : 0),
                             .data.ptr = ptr};
    if (epoll_ctl(c->w->ep, EPOLL_CTL_MOD, fd, &ev) == 0)
        *cur = on;
}

/* Gives the connection to a thread running the blocking code: it gets every byte the loop has
 * not answered yet (pending response bytes first, then the unconsumed request bytes). */
static void conn_handoff(lconn *c, bool h2)
{
    router_loop *L = c->w->L;
    int fd = c->fd;
    epoll_ctl(c->w->ep, EPOLL_CTL_DEL, fd, NULL);
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    size_t nout = c->out.len - c->out_off;
    if (L->hooks.handoff(L->hooks.payload, fd, c->loopback, h2, nout ? c->out.data + c->out_off : "",
                         nout, c->in + c->in_start, c->in_len - c->in_start) < 0) {
        router_loop_conn_close(c);
        return;
    }
    conn_free(c);
}

/* ---- writing to the client ---- */

/* Counts the answer to the current request (router-stats.h). */
static void count_answer(lconn *c, int status)
{
    router_stats_answered(status, c->started_us);
}

/* An answer of the router's own: with a request body still unread, the connection closes after
 * it (the body is not read). */
static int out_detail(lconn *c, const api_error *err)
{
    if (c->has_body && !c->msg_done)
        c->keep_alive = false;
    count_answer(c, router_error_http(err));
    return router_reply_error(&c->out, err, c->keep_alive, c->rq.p.method == HTTP_HEAD);
}

int router_loop_send(lconn *c, bool up, const char *data, size_t len, size_t *off)
{
    bool *can_write = up ? &c->up_can_write : &c->can_write;
    while (*off < len && *can_write) {
        ssize_t n = send(up ? c->up_fd : c->fd, data + *off, len - *off, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                *can_write = false;
                want_out(c, up, true);
                break;
            }
            return -errno;
        }
        *off += (size_t)n;
    }
    return 0;
}

ssize_t router_loop_recv(lconn *c, bool up, char *dst, size_t cap)
{
    bool *can_read = up ? &c->up_can_read : &c->can_read;
    for (;;) {
        ssize_t n = recv(up ? c->up_fd : c->fd, dst, cap, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            *can_read = false;
            return -EAGAIN;
        }
        if (n < 0)
            return -errno;
        if (n > 0 && (size_t)n < cap && !(up ? c->up_rdhup : c->rdhup))
            *can_read = false; /* a short read: edge-triggered, more bytes make an event */
        return n;
    }
}

int router_loop_client_flush(lconn *c)
{
    int r = router_loop_send(c, false, c->out.data, c->out.len, &c->out_off);
    if (r < 0)
        return r;
    if (c->out_off == c->out.len) {
        c->out.len = c->out_off = 0;
        if (c->ev_out)
            want_out(c, false, false);
    }
    return 0;
}

/* ---- request parsing ---- */

static int rq_headers_complete(void *payload)
{
    lconn *c = payload;
    http_parser *p = &c->rq.p;
    c->head_done = true;
    c->started_us = (int64_t)now_usec(CLOCK_MONOTONIC);
    c->has_body = (p->flags & F_CHUNKED) || ((p->flags & F_CONTENTLENGTH) && p->content_length > 0);
    int refused = router_request_refuse_framing(&c->rq, &c->out);
    if (refused != 0) {
        if (refused > 0)
            count_answer(c, refused);
        c->refused = true; /* answered (or out of memory): the connection closes */
        return refused < 0 ? refused : -EPROTO;
    }
    if (c->has_body)
        http_parser_pause(p, 1); /* dispatched at the head; the body streams after */
    return 0;
}

/* A piece of the request body: framed for the upstream, or dropped once it stopped reading. */
static int rq_body(void *payload, const char *at, size_t n)
{
    lconn *c = payload;
    if (c->body_err < 0 || c->up_fd < 0)
        return 0;
    int r = c->req_chunked ? router_chunk(&c->up_req, at, n) : buf_append(&c->up_req, at, n);
    if (r < 0)
        c->body_err = r;
    return 0;
}
static int rq_complete(void *payload)
{
    lconn *c = payload;
    c->msg_done = true;
    if (c->body_streaming && c->req_chunked && c->body_err == 0 && c->up_fd >= 0 &&
        buf_append(&c->up_req, "0\r\n\r\n", 5) < 0)
        c->body_err = -ENOMEM;
    return 0;
}

static const router_message_hooks request_hooks = {
    .headers_complete = rq_headers_complete,
    .body = rq_body,
    .message_complete = rq_complete,
};

static void request_reset(lconn *c)
{
    router_message_reset(&c->rq);
    c->head_done = c->msg_done = c->has_body = false;
    c->body_streaming = c->req_chunked = c->resp_done = false;
    c->body_err = 0;
    /* a pipelined next request is already under way */
    c->head_start = c->in_len > c->in_start ? now_msec(CLOCK_MONOTONIC) : 0;
}

/* The upstream failed (r) before a byte of the response was sent: 502/504, then close. */
static void answer_upstream_error(lconn *c, int r)
{
    _cleanup_(api_error_clear) api_error err = API_ERROR_INIT;
    router_error_backend(&err, r, c->route.id);
    c->keep_alive = false;
    out_detail(c, &err); /* on ENOMEM the connection is just closed */
    c->st = ST_CLOSING;
}

static int dispatch_target(lconn *c, int r, router_target *t, api_error *err);
static int dispatch_sent(lconn *c, int r, api_error *err);
static int resolve_async(lconn *c);

/* A request head (and, without a body, the whole request) is in c->rq. Returns 1 when the connection was handed
 * off (c is gone), else 0. */
static int request_dispatch(lconn *c)
{
    router_loop *L = c->w->L;
    router_ctx *ctx = L->ctx;
    _cleanup_(api_error_clear) api_error err = API_ERROR_INIT;
    http_parser *p = &c->rq.p;
    c->keep_alive = http_should_keep_alive(p);
    if (p->upgrade)
        c->keep_alive = false; /* http_parser stops at the head: only a tunnel can follow */
    /* an upgrade is proxied (a tunnel after the 101); CONNECT to a sandbox port is a tunnel */
    router_admission a = {.loopback = c->loopback,
                          .upgrade = p->method == HTTP_CONNECT,
                          .connect = p->method == HTTP_CONNECT};
    router_admission_from_headers(&a, http_method_str(p->method), router_message_url(&c->rq),
                                  &c->rq.h);
    router_target t = {0};
    router_answer ans;
    switch (router_admit(ctx, &a, true, &c->route, &t, &ans, &err)) {
    case ROUTER_ADMIT_HEALTHZ:
        if (c->has_body)
            c->keep_alive = false;
        count_answer(c, 200);
        return router_reply(&c->out, 200, "application/json", NULL, router_healthz_body,
                            strlen(router_healthz_body), c->keep_alive, false) < 0
                   ? -1
                   : 0;
    case ROUTER_ADMIT_ANSWER:
        if (c->has_body && !c->msg_done)
            c->keep_alive = false;
        count_answer(c, ans.status);
        return router_reply_answer(&c->out, &ans, c->keep_alive, c->rq.p.method == HTTP_HEAD) < 0
                   ? -1
                   : 0;
    case ROUTER_ADMIT_REFUSED:
        return out_detail(c, &err);
    case ROUTER_ADMIT_PENDING:
        return resolve_async(c);
    case ROUTER_ADMIT_TARGET:
        break;
    }
    return dispatch_target(c, 0, &t, &err);
}

/* CONNECT to a sandbox port: the upstream connection, then "200 Connection established" and a
 * byte tunnel (router-loop-tunnel.c). A connect that is refused at once (a loopback port nothing
 * listens on) is the caller's 502; one still in progress is answered 200 and a later failure
 * closes the tunnel. A host name (the template resolver's DNS form) is not tunnelled: 502. 0 or a
 * negative errno. */
static int connect_tunnel(lconn *c, const char *addr)
{
    buf_reset(&c->up_req);
    c->up_req_off = 0;
    int r = router_loop_upstream_send(c, addr); /* connects; nothing to send */
    if (r == -EADDRNOTAVAIL)
        r = -EHOSTUNREACH;
    if (r == 0) {
        struct pollfd pf = {.fd = c->up_fd, .events = POLLOUT};
        int soerr = 0;
        socklen_t sl = sizeof(soerr);
        if (poll(&pf, 1, 0) > 0 && getsockopt(c->up_fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 &&
            soerr)
            r = -soerr;
    }
    if (r < 0) {
        router_loop_upstream_drop(c);
        c->keep_alive = false;
        return r;
    }
    c->keep_alive = false;
    count_answer(c, 200);
    if (buf_append_str(&c->out, "HTTP/1.1 200 Connection established\r\n\r\n") < 0 ||
        router_loop_tunnel_begin(c, "", 0) < 0)
        return -ENOMEM;
    return 0;
}

/* The request's target is resolved (r < 0: err says why). Returns like request_dispatch. */
static int dispatch_target(lconn *c, int r, router_target *t, api_error *err)
{
    if (r < 0)
        return out_detail(c, err);
    const char *addr = c->route.kind == ROUTER_KIND_LEGACY ? t->legacy
                       : c->route.kind == ROUTER_KIND_PORT ? t->port
                                                           : t->rest;
    if (!addr && c->rq.p.upgrade) {
        /* the legacy emulation answers requests itself: nothing to switch protocols with */
        router_target_done(t);
        router_error_upgrade(err);
        return out_detail(c, err);
    }
    if (!addr) {
        router_target_done(t);
        goto handoff; /* the legacy emulation: blocking calls to sandboxd (docs/router.md) */
    }
    if (c->rq.p.method == HTTP_CONNECT) {
        r = connect_tunnel(c, addr);
        router_target_done(t);
        if (r == 0)
            return 0;
        if (r == -ENOMEM)
            return r;
        c->w->L->ctx->resolver->invalidate(c->w->L->ctx->resolver, c->route.ns, c->route.id);
        router_error_backend(err, r, c->route.id);
        return out_detail(c, err);
    }
    r = router_loop_upstream_request(c, addr);
    if (r == 0) {
        c->up_retried = false;
        r = router_loop_upstream_send(c, addr);
    }
    if (r == -EADDRNOTAVAIL) {
        /* a host name: looked up on a helper thread, then dispatch_send goes on */
        r = router_loop_upstream_lookup(c, addr);
        router_target_done(t);
        return r < 0 ? dispatch_sent(c, -ECONNREFUSED, err) : 0; /* no thread: 502 */
    }
    router_target_done(t);
    return dispatch_sent(c, r, err);
handoff:
    router_loop_upstream_drop(c);
    conn_handoff(c, false);
    return 1;
}

/* The request went upstream (r == 0) or could not (r < 0). Returns like request_dispatch. */
static int dispatch_sent(lconn *c, int r, api_error *err)
{
    router_ctx *ctx = c->w->L->ctx;
    /* -EAGAIN, a unix socket's full backlog, is a failure too: Go's dialer says so at once */
    if (r < 0) {
        ctx->resolver->invalidate(ctx->resolver, c->route.ns, c->route.id);
        router_error_backend(err, r, c->route.id);
        return out_detail(c, err);
    }
    c->st = ST_UPSTREAM;
    c->deadline = now_msec(CLOCK_MONOTONIC) + ctx->proxy_timeout_ms;
    const char *expect = router_headers_get(&c->rq.h, "expect");
    if (expect && strcasecmp(expect, "100-continue") == 0 &&
        buf_append_str(&c->out, "HTTP/1.1 100 Continue\r\n\r\n") < 0)
        return -ENOMEM;
    if (c->has_body) {
        /* the head is upstream: from here the body streams (body_step), its bytes consumed as
         * they are forwarded */
        c->body_streaming = true;
        c->in_start = c->in_parsed;
        c->req_len = 0;
        http_parser_pause(&c->rq.p, 0);
    }
    return 0;
}

void router_loop_job_post(router_loop_job *j)
{
    lworker *w = j->c->w;
    pthread_mutex_lock(&w->lock);
    j->next = w->done;
    w->done = j;
    pthread_mutex_unlock(&w->lock);
    uint64_t one = 1;
    (void)!write(w->ev, &one, sizeof(one));
}

static void resolved(router_resolution *res)
{
    router_loop_job_post((router_loop_job *)res);
}

static int resolve_async(lconn *c)
{
    router_loop_job *j = calloc(1, sizeof(*j));
    if (!j)
        return -ENOMEM;
    j->c = c;
    j->res = (router_resolution){
        .resolver = c->w->L->ctx->resolver, .route = c->route, .done = resolved};
    if (router_resolve_async(&j->res) < 0) {
        free(j);
        router_loop_upstream_drop(c);
        conn_handoff(c, false); /* the thread path resolves (blocking) on its own thread */
        return 1;
    }
    c->st = ST_RESOLVING;
    return 0;
}

void router_loop_resolve_done(lworker *w)
{
    pthread_mutex_lock(&w->lock);
    router_loop_job *list = w->done;
    w->done = NULL;
    pthread_mutex_unlock(&w->lock);
    while (list) {
        router_loop_job *j = list;
        list = j->next;
        lconn *c = j->c;
        c->st = ST_READ;
        c->last_io = now_msec(CLOCK_MONOTONIC);
        int r;
        if (j->lookup) {
            _cleanup_(api_error_clear) api_error err = API_ERROR_INIT;
            r = router_loop_upstream_looked_up(c, j);
            if (r == 0)
                r = router_loop_upstream_send(c, j->addr ? j->addr : c->sa_addr);
            r = dispatch_sent(c, r, &err);
            free(j->addr);
        } else {
            r = dispatch_target(c, j->res.r, &j->res.target, &j->res.err);
            router_target_done(&j->res.target);
            api_error_clear(&j->res.err);
        }
        free(j);
        if (r == 1)
            continue;
        if (r < 0) {
            c->keep_alive = false;
            c->st = ST_CLOSING;
        } else if (c->st == ST_READ) { /* answered by the router */
            c->in_start += c->req_len;
            request_reset(c);
            if (!c->keep_alive)
                c->st = ST_CLOSING;
        }
        router_loop_conn_run(c);
    }
}

/* The upstream response is complete or failed: go on with the next request or close. */
static void relay_end(lconn *c, int err)
{
    if (err == 0 && c->body_streaming) {
        /* an early answer (e.g. 400 before the body was read): the rest of the body is read and
         * dropped, then the connection goes on as the response said. What was queued for the
         * upstream goes too: nothing sends it now, and body_step reads no more while it waits. */
        router_loop_upstream_drop(c);
        buf_reset(&c->up_req);
        c->up_req_off = 0;
        c->resp_done = true;
        return;
    }
    if (err == 0) {
        if (c->up_req_off < c->up_req.len || c->body_err < 0)
            router_loop_upstream_drop(c); /* it answered before taking the whole body */
        c->in_start += c->req_len;
        request_reset(c);
        c->st = c->keep_alive ? ST_READ : ST_CLOSING;
        c->last_io = now_msec(CLOCK_MONOTONIC); /* the client's idle time starts now */
        return;
    }
    router_loop_upstream_drop(c);
    if (c->relay.head_done) {
        /* the response started: cut the connection (whatever was relayed is flushed) */
        c->keep_alive = false;
        c->st = ST_CLOSING;
        return;
    }
    /* nothing of this response is in c->out (earlier pipelined responses may be) */
    answer_upstream_error(c, err);
}

/* Reads and relays upstream bytes while the client keeps up. */
static void relay_step(lconn *c)
{
    lworker *w = c->w;
    while (c->st == ST_UPSTREAM && c->up_fd >= 0) {
        if (c->up_req_off < c->up_req.len && c->up_can_write) {
            int r = router_loop_upstream_flush(c);
            if (r < 0 && c->has_body) {
                /* the upstream stopped reading the body; its answer may be there to read */
                c->body_err = r;
                buf_reset(&c->up_req);
                c->up_req_off = 0;
                r = 0;
            }
            if (r < 0) {
                if (!c->r_got && c->up_reused && !c->up_retried) {
                    c->up_retried = true;
                    _cleanup_free_ char *addr = strdup(c->up_addr);
                    router_loop_upstream_drop(c);
                    if (addr && router_loop_upstream_send(c, addr) == 0)
                        continue;
                }
                relay_end(c, -ECONNRESET);
                return;
            }
        }
        if (c->out.len - c->out_off > OUT_HIGH)
            return; /* back-pressure: wait for the client */
        if (!c->up_can_read)
            return;
        ssize_t n = router_loop_recv(c, true, w->rd, RD_CAP);
        if (n == -EAGAIN)
            return;
        int rerr = n < 0 ? (int)n : 0;
        if (n > 0) {
            c->r_got = true;
            c->deadline = now_msec(CLOCK_MONOTONIC) + w->L->ctx->proxy_timeout_ms;
        }
        size_t len = n > 0 ? (size_t)n : 0;
        if (rerr == 0) {
            ssize_t k = router_relay_feed(&c->relay, w->rd, len, &c->out);
            c->keep_alive = c->relay.keep_alive;
            if (c->relay.head_done && !c->counted) {
                c->counted = true;
                count_answer(c, c->relay.m.p.status_code);
            }
            if (c->relay.done && c->relay.upgraded && c->rq.p.upgrade && k >= 0) {
                if (router_loop_tunnel_begin(c, w->rd + k, len - (size_t)k) < 0) {
                    c->st = ST_CLOSING;
                    router_loop_upstream_drop(c);
                }
                return;
            }
            if (c->relay.done && c->relay.upgraded)
                k = -EPROTO; /* a 101 to a request that asked for no upgrade */
            else if (c->relay.done) {
                if ((size_t)k != len || !router_relay_reusable(&c->relay))
                    router_loop_upstream_drop(c);
                relay_end(c, 0);
                return;
            }
            if (k < 0)
                rerr = (int)k;
        }
        if (rerr < 0) {
            if (!c->r_got && c->up_reused && !c->up_retried && !c->has_body &&
                (rerr == -ECONNRESET || rerr == -EPIPE)) {
                /* a stale kept-alive connection: once more on a fresh one */
                c->up_retried = true;
                _cleanup_free_ char *addr = strdup(c->up_addr);
                router_loop_upstream_drop(c);
                if (addr && router_loop_upstream_send(c, addr) == 0)
                    continue;
            }
            relay_end(c, rerr);
            return;
        }
    }
}

/* Reads the client's bytes into c->in (after compacting it). Returns 1 when bytes came in, 0 when
 * none can now (EAGAIN or EOF: rd_eof), -1 on a socket error. */
static int client_read(lconn *c)
{
    if (c->in_start > 0) {
        memmove(c->in, c->in + c->in_start, c->in_len - c->in_start);
        c->in_len -= c->in_start;
        c->in_parsed -= c->in_start;
        c->in_start = 0;
    }
    if (c->rd_eof || !c->can_read || c->in_len == IN_CAP)
        return 0;
    ssize_t n = router_loop_recv(c, false, c->in + c->in_len, IN_CAP - c->in_len);
    if (n == -EAGAIN)
        return 0;
    if (n < 0)
        return (int)n;
    if (n == 0) {
        c->rd_eof = true;
        return 0;
    }
    c->last_io = now_msec(CLOCK_MONOTONIC);
    c->in_len += (size_t)n;
    return 1;
}

/* Forwards the request body while the upstream takes it (flow control: the client is not read
 * while more than OUT_HIGH bytes wait for the upstream), then finishes the request once both
 * it and the response are complete. */
static void body_step(lconn *c)
{
    while (c->st == ST_UPSTREAM && c->body_streaming) {
        if (c->up_req.len - c->up_req_off > OUT_HIGH)
            return; /* relay_step writes it out as the upstream reads */
        if (c->in_parsed < c->in_len) {
            size_t k = router_message_execute(&c->rq, c->in + c->in_parsed,
                                           c->in_len - c->in_parsed);
            c->in_parsed += k;
            c->in_start = c->in_parsed; /* forwarded (or dropped) */
            /* the upload goes on */
            c->deadline = now_msec(CLOCK_MONOTONIC) + c->w->L->ctx->proxy_timeout_ms;
            if (c->msg_done) {
                http_parser_pause(&c->rq.p, 0);
                c->body_streaming = false;
                if (c->resp_done)
                    relay_end(c, 0);
                else if (c->up_fd >= 0 && c->up_can_write && router_loop_upstream_flush(c) < 0)
                    c->body_err = -EPIPE; /* relay_step reads whatever answer there is */
                return;
            }
            if (HTTP_PARSER_ERRNO(&c->rq.p) != HPE_OK) {
                /* a malformed body: nothing sensible can follow on either connection */
                router_loop_upstream_drop(c);
                c->keep_alive = false;
                c->st = ST_CLOSING;
                return;
            }
            if (c->up_fd >= 0 && c->up_can_write && router_loop_upstream_flush(c) < 0) {
                c->body_err = -EPIPE;
                buf_reset(&c->up_req);
                c->up_req_off = 0;
            }
            continue;
        }
        int r = client_read(c);
        if (r < 0 || (r == 0 && c->rd_eof)) {
            /* the client went away in the middle of its body */
            router_loop_upstream_drop(c);
            c->keep_alive = false;
            c->st = ST_CLOSING;
            return;
        }
        if (r == 0)
            return;
    }
}

/* Parses buffered client bytes and dispatches finished requests. Returns 1 when c is gone. */
static int parse_step(lconn *c)
{
    while (c->st == ST_READ) {
        if (c->out.len - c->out_off > OUT_HIGH)
            return 0;
        if (c->in_parsed < c->in_len) {
            size_t k = router_message_execute(&c->rq, c->in + c->in_parsed,
                                           c->in_len - c->in_parsed);
            c->in_parsed += k;
            enum http_errno e = HTTP_PARSER_ERRNO(&c->rq.p);
            if (e != HPE_OK && e != HPE_PAUSED) {
                /* refused framing (answered), a malformed request (400) or a callback out of
                 * memory: the connection closes after what is already queued */
                if (!c->refused && e > HPE_CB_chunk_complete) {
                    router_stats_answered(400, c->head_start * 1000);
                    router_request_refuse_malformed(&c->rq, &c->out);
                }
                c->keep_alive = false;
                c->st = ST_CLOSING;
                return 0;
            }
            if (c->msg_done || (c->head_done && c->has_body)) {
                if (c->msg_done)
                    http_parser_pause(&c->rq.p, 0); /* a body stays paused: dispatch unpauses */
                c->req_len = c->in_parsed - c->in_start;
                int r = request_dispatch(c);
                if (r == 1)
                    return 1;
                if (r < 0) {
                    c->keep_alive = false;
                    c->st = ST_CLOSING;
                    return 0;
                }
                if (c->st == ST_READ) { /* answered by the router */
                    c->in_start += c->req_len;
                    request_reset(c);
                    if (!c->keep_alive)
                        c->st = ST_CLOSING;
                }
                continue;
            }
        }
        /* need more bytes */
        int r = client_read(c);
        if (r > 0) {
            if (!c->head_start)
                c->head_start = c->last_io;
            continue;
        }
        if (r < 0) {
            c->st = ST_CLOSING;
            c->out.len = c->out_off = 0;
            return 0;
        }
        if (c->in_len == IN_CAP) {
            /* a head larger than ROUTER_HEAD_MAX: Go's answer to one over MaxHeaderBytes */
            static const char msg[] = "431 Request Header Fields Too Large";
            c->keep_alive = false;
            router_stats_answered(431, c->head_start * 1000);
            router_reply(&c->out, 431, "text/plain; charset=utf-8", NULL, msg, sizeof(msg) - 1,
                         false, false);
            c->st = ST_CLOSING;
            return 0;
        }
        if (c->rd_eof)
            c->st = ST_CLOSING;
        return 0;
    }
    return 0;
}

static const char H2_PREFACE[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/* Runs the connection's state machine as far as it goes. */
void router_loop_conn_run(lconn *c)
{
    if (c->st == ST_RESOLVING)
        return; /* router_loop_resolve_done picks it up */
    if (c->st == ST_TUNNEL) {
        router_loop_tunnel_run(c);
        return;
    }
    for (;;) {
        if (c->st == ST_SNIFF) {
            while (c->in_len < 24 && c->can_read) {
                ssize_t n = recv(c->fd, c->in + c->in_len, 24 - c->in_len, 0);
                if (n < 0 && errno == EINTR)
                    continue;
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                    c->can_read = false;
                    break;
                }
                if (n <= 0) {
                    router_loop_conn_close(c);
                    return;
                }
                c->last_io = now_msec(CLOCK_MONOTONIC);
                c->in_len += (size_t)n;
                if (memcmp(c->in, H2_PREFACE, c->in_len) != 0)
                    break;
            }
            if (memcmp(c->in, H2_PREFACE, c->in_len) == 0) {
                if (c->in_len < 24)
                    return;
                conn_handoff(c, true);
                return;
            }
            c->st = ST_READ;
        }
        if (c->st == ST_READ && parse_step(c) == 1)
            return;
        if (c->st == ST_UPSTREAM)
            body_step(c);
        if (c->st == ST_UPSTREAM)
            relay_step(c);
        if (c->st == ST_TUNNEL) {
            router_loop_tunnel_run(c);
            return;
        }
        if (router_loop_client_flush(c) < 0) {
            router_loop_conn_close(c);
            return;
        }
        if (c->st == ST_CLOSING) {
            if (c->out.len == 0) {
                router_loop_conn_close(c);
                return;
            }
            return; /* waiting for EPOLLOUT */
        }
        /* progress possible? */
        bool more = false;
        if (c->st == ST_READ && c->out.len - c->out_off <= OUT_HIGH &&
            (c->in_parsed < c->in_len || c->can_read || c->rd_eof))
            more = true;
        if (c->st == ST_UPSTREAM && c->out.len - c->out_off <= OUT_HIGH &&
            (c->up_can_read || (c->up_req_off < c->up_req.len && c->up_can_write)))
            more = true;
        if (c->st == ST_UPSTREAM && c->body_streaming &&
            c->up_req.len - c->up_req_off <= OUT_HIGH &&
            (c->in_parsed < c->in_len || c->can_read || c->rd_eof))
            more = true;
        if (!more)
            return;
    }
}

void router_loop_conn_new(lworker *w, int fd)
{
    router_loop_conn_adopt(w, fd, w->L->hooks.loopback(fd), NULL, 0);
}

void router_loop_conn_adopt(lworker *w, int fd, bool loopback, const char *pre, size_t npre)
{
    lconn *c = calloc(1, sizeof(*c));
    if (c)
        c->in = malloc(IN_CAP);
    if (!c || !c->in) {
        free(c);
        w->L->hooks.closed(w->L->hooks.payload, fd);
        close(fd);
        return;
    }
    c->w = w;
    c->fd = fd;
    c->up_fd = -1;
    c->loopback = loopback;
    c->can_write = true;
    c->last_io = now_msec(CLOCK_MONOTONIC);
    c->head_start = c->last_io; /* the header deadline runs from accept */
    if (pre) {
        c->st = ST_READ; /* given back between requests: HTTP/1.1 already */
        memcpy(c->in, pre, npre);
        c->in_len = npre;
        c->head_start = npre ? c->last_io : 0;
    }
    router_message_init(&c->rq, HTTP_REQUEST, &request_hooks, c);
    c->next = w->conns;
    if (w->conns)
        w->conns->prev = c;
    w->conns = c;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.ptr = c};
    if (epoll_ctl(w->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
        router_loop_conn_close(c);
        return;
    }
    c->can_read = true; /* try at once: the request is often there already */
    router_loop_conn_run(c);
}

/* Still sending a request head (or its HTTP/2 preface), with nothing of ours to send. */
static bool in_head(const lconn *c)
{
    return (c->st == ST_READ || c->st == ST_SNIFF) && !c->head_done && c->head_start &&
           c->out.len == 0;
}

static bool idle(const lconn *c)
{
    return (c->st == ST_READ || c->st == ST_SNIFF) && !c->head_done && c->out.len == 0;
}

void router_loop_sweep(lworker *w, long long now)
{
    long header_ms = w->L->ctx->header_timeout_ms;
    for (lconn *c = w->conns, *next; c; c = next) {
        next = c->next;
        if (c->st == ST_UPSTREAM && now >= c->deadline) {
            relay_end(c, -ETIMEDOUT);
            router_loop_conn_run(c);
        } else if (header_ms > 0 && in_head(c) && now - c->head_start >= header_ms) {
            router_loop_conn_close(c); /* Go's ReadHeaderTimeout: the connection just closes */
        } else if (idle(c) && now - c->last_io >= CLIENT_IDLE_MS)
            router_loop_conn_close(c);
    }
}

/* Over the connection cap: closes this worker's connection that has been sending its head or
 * idle the longest. Returns false when there is none (every one carries a request). */
bool router_loop_make_room(lworker *w)
{
    lconn *victim = NULL;
    long long victim_since = 0;
    for (lconn *c = w->conns; c; c = c->next) {
        if (!idle(c))
            continue;
        long long since = c->head_start ? c->head_start : c->last_io;
        if (!victim || since < victim_since) {
            victim = c;
            victim_since = since;
        }
    }
    if (!victim)
        return false;
    router_loop_conn_close(victim);
    return true;
}
