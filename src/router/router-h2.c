/* HTTP/2 (h2c prior knowledge) client connections. One poll loop per connection drives the
 * client's nghttp2 server session, one nghttp2 client session per upstream gRPC socket, and one
 * HTTP/1.1 upstream socket per REST stream (parsed with http_parser). The upstream sides are
 * router-h2-grpc.c and router-h2-rest.c; what they share is router-h2-internal.h.
 *
 * Back-pressure: automatic WINDOW_UPDATEs are off on every session; bytes received from one side
 * are "consumed" (window released) only when the other side has taken them, and an HTTP/1.1
 * upstream is not read while its stream already holds RESP_HIGH bytes for the client. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <http_parser.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "basic/macro.h"
#include "basic/time-util.h"
#include "router/router-core.h"
#include "shared/router-stats.h"
#include "router/router-h2-internal.h"

/* ---- client-side data provider ---- */

static ssize_t resp_read(nghttp2_session *session, int32_t id, uint8_t *out, size_t length,
                         uint32_t *flags, nghttp2_data_source *src, void *user)
{
    h2_stream *st = src->ptr;
    size_t k = bb_take(&st->resp, out, length);
    if (k > 0 && st->up && st->up_id > 0 && !st->up->dead)
        nghttp2_session_consume(st->up->s, st->up_id, k);
    if (bb_len(&st->resp) == 0 && st->resp_eof) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        if (st->trailers.n > 0) {
            *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
            nghttp2_submit_trailer(session, id, st->trailers.v, st->trailers.n);
        }
        return (ssize_t)k;
    }
    return k > 0 ? (ssize_t)k : NGHTTP2_ERR_DEFERRED;
}

void h2_resume_client(h2_stream *st)
{
    if (st->resp_submitted)
        nghttp2_session_resume_data(st->c->s, st->id);
}

/* Submits the response head (status: its :status, counted in router_stats). */
int h2_submit_resp(h2_stream *st, int status, nvlist *hdrs, bool body)
{
    nghttp2_data_provider prd = {.source.ptr = st, .read_callback = resp_read};
    st->resp_submitted = true;
    router_stats_answered(status, st->started_us);
    return nghttp2_submit_response(st->c->s, st->id, hdrs->v, hdrs->n, body ? &prd : NULL);
}

/* grpc-message keeps printable ASCII but '%' (gRPC over HTTP/2 spec); the rest is encoded. */
static bool grpc_message_plain(unsigned char ch)
{
    return ch >= 0x20 && ch <= 0x7e && ch != '%';
}

/* Answers a stream from the router: JSON {"detail"} or, to gRPC clients, a trailers-only
 * response with the matching grpc-status. */
void h2_respond_error(h2_stream *st, const api_error *err)
{
    st->local = true;
    nvlist h = {0};
    char status[8];
    if (st->grpc_ct) {
        char gs[8];
        snprintf(gs, sizeof(gs), "%u", status_grpc(err->code));
        _cleanup_free_ char *msg = router_percent_encode(err->message, grpc_message_plain);
        nv_adds(&h, ":status", "200");
        nv_adds(&h, "content-type", "application/grpc");
        nv_adds(&h, "grpc-status", gs);
        if (msg)
            nv_adds(&h, "grpc-message", msg);
        h2_submit_resp(st, 200, &h, false);
    } else {
        _cleanup_free_ char *body = router_error_body(err);
        snprintf(status, sizeof(status), "%u", router_error_http(err));
        nv_adds(&h, ":status", status);
        nv_adds(&h, "content-type", "application/json");
        if (body)
            bb_put(&st->resp, body, strlen(body));
        st->resp_eof = true;
        h2_submit_resp(st, (int)router_error_http(err), &h, true);
    }
    nv_free(&h);
    /* Whatever request body already arrived will never be forwarded. */
    if (st->req_pending_consume + bb_len(&st->req) > 0)
        nghttp2_session_consume(st->c->s, st->id, bb_len(&st->req));
    bb_free(&st->req);
}

void h2_respond_simple(h2_stream *st, int status, const char *ctype, const char *extra,
                       const char *body, size_t len)
{
    st->local = true;
    nvlist h = {0};
    char sb[8];
    snprintf(sb, sizeof(sb), "%d", status);
    nv_adds(&h, ":status", sb);
    nv_adds(&h, "content-type", ctype);
    for (const char *line = extra; line && *line;) {
        const char *eol = strstr(line, "\r\n"), *colon = strchr(line, ':');
        size_t ll = eol ? (size_t)(eol - line) : strlen(line);
        if (colon && colon < line + ll) {
            _cleanup_free_ char *name = strndup(line, (size_t)(colon - line));
            _cleanup_free_ char *value = strndup(colon + 2, ll - (size_t)(colon - line) - 2);
            if (name && value) {
                for (char *q = name; *q; q++)
                    *q = (char)tolower((unsigned char)*q);
                nv_adds(&h, name, value);
            }
        }
        line = eol ? eol + 2 : NULL;
    }
    bb_put(&st->resp, body, len);
    st->resp_eof = true;
    h2_submit_resp(st, status, &h, len > 0);
    nv_free(&h);
}

/* ---- client session ---- */

static h2_stream *stream_get(h2_conn *c, int32_t id)
{
    return nghttp2_session_get_stream_user_data(c->s, id);
}

/* Second half of routing, once the target is known. */
static void dispatch_stream(h2_stream *st)
{
    bool end_stream = st->req_eof;
    switch (st->route.kind) {
    case ROUTER_KIND_GRPC:
        h2_start_grpc(st, st->target.grpc);
        return;
    case ROUTER_KIND_PORT: /* gRPC over HTTP/2 (h2c), anything else over HTTP/1.1 */
        if (st->grpc_ct)
            h2_start_grpc(st, st->target.port);
        else
            h2_start_rest(st, st->target.port, end_stream);
        return;
    case ROUTER_KIND_REST:
        h2_start_rest(st, st->target.rest, end_stream);
        return;
    case ROUTER_KIND_LEGACY:
        if (st->target.legacy) {
            h2_start_rest(st, st->target.legacy, end_stream);
            return;
        }
        st->legacy = true;
        nghttp2_session_consume(st->c->s, st->id, bb_len(&st->req));
        if (end_stream)
            h2_run_legacy(st);
        return;
    }
}

/* A resolution that has to wait (control-plane lookup, resume) runs on its own thread so the
 * connection's other streams go on; the result comes back through the connection's pipe. */
typedef struct resolve_job {
    router_resolution res; /* first: the helper thread hands back &res */
    int notify_fd;
    int32_t stream_id;
} resolve_job;

static void resolved(router_resolution *res)
{
    resolve_job *j = (resolve_job *)res;
    /* Once written, j belongs to the connection: nothing of it may be touched after. */
    int fd = j->notify_fd;
    ssize_t n;
    do
        n = write(fd, &j, sizeof(j));
    while (n < 0 && errno == EINTR);
    close(fd);
    if (n != (ssize_t)sizeof(j)) {
        router_target_done(&j->res.target);
        api_error_clear(&j->res.err);
        free(j);
    }
}

static void resolve_done(h2_conn *c, resolve_job *j)
{
    h2_stream *st = nghttp2_session_get_stream_user_data(c->s, j->stream_id);
    if (st && st->resolving) {
        st->resolving = false;
        if (j->res.r < 0)
            h2_respond_error(st, &j->res.err);
        else {
            st->target = j->res.target;
            j->res.target = (router_target){0};
            dispatch_stream(st);
        }
    }
    router_target_done(&j->res.target);
    api_error_clear(&j->res.err);
    free(j);
}

static int resolve_async(h2_stream *st)
{
    h2_conn *c = st->c;
    resolve_job *j = calloc(1, sizeof(*j));
    if (!j)
        return -ENOMEM;
    *j = (resolve_job){
        .res = {.resolver = c->ctx->resolver, .route = st->route, .done = resolved},
        .stream_id = st->id,
    };
    j->notify_fd = fcntl(c->notify[1], F_DUPFD_CLOEXEC, 0);
    int r = j->notify_fd < 0 ? -errno : router_resolve_async(&j->res);
    if (r < 0) {
        safe_close(j->notify_fd);
        free(j);
        return r;
    }
    st->resolving = true;
    return 0;
}

static void route_stream(h2_stream *st)
{
    h2_conn *c = st->c;
    _cleanup_(api_error_clear) api_error err = API_ERROR_INIT;
    st->started = true;
    const char *path = nv_get(&st->req_hdrs, ":path");
    router_admission a = {
        .info =
            {
                .method = nv_get(&st->req_hdrs, ":method"),
                .path = path ? path : "/",
                .sandbox_id = nv_get(&st->req_hdrs, "x-sandbox-id"),
                .sandbox_ns = nv_get(&st->req_hdrs, "x-sandbox-namespace"),
                .sandbox_port = nv_get(&st->req_hdrs, "x-sandbox-port"),
                .pod_ip = nv_get(&st->req_hdrs, "x-sandbox-pod-ip"),
                .content_type = nv_get(&st->req_hdrs, "content-type"),
                .host = nv_get(&st->req_hdrs, ":authority") ? nv_get(&st->req_hdrs, ":authority")
                                                            : nv_get(&st->req_hdrs, "host"),
            },
        .authorization = nv_get(&st->req_hdrs, "authorization"),
        .cookie = nv_get(&st->req_hdrs, "cookie"),
        .loopback = c->loopback,
        .http2 = true,
    };
    st->grpc_ct = router_is_grpc_content_type(a.info.content_type);
    router_answer ans;
    switch (router_admit(c->ctx, &a, true, &st->route, &st->target, &ans, &err)) {
    case ROUTER_ADMIT_ANSWER:
        h2_respond_simple(st, ans.status, ans.ctype, ans.headers[0] ? ans.headers : NULL, ans.body,
                          strlen(ans.body));
        return;
    case ROUTER_ADMIT_HEALTHZ:
        h2_respond_simple(st, 200, "application/json", NULL, router_healthz_body,
                          strlen(router_healthz_body));
        return;
    case ROUTER_ADMIT_REFUSED:
        h2_respond_error(st, &err);
        return;
    case ROUTER_ADMIT_PENDING:
        if (resolve_async(st) == 0)
            return;
        if (router_admit_resolve(c->ctx, &st->route, &st->target, &err) != ROUTER_ADMIT_TARGET) {
            h2_respond_error(st, &err);
            return;
        }
        break;
    case ROUTER_ADMIT_TARGET:
        break;
    }
    dispatch_stream(st);
}

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *user)
{
    h2_conn *c = user;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    h2_stream *st = calloc(1, sizeof(*st));
    if (!st)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    st->c = c;
    st->id = frame->hd.stream_id;
    st->started_us = (int64_t)now_usec(CLOCK_MONOTONIC);
    st->h1fd = -1;
    st->next = c->streams;
    c->streams = st;
    nghttp2_session_set_stream_user_data(session, st->id, st);
    return 0;
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *user)
{
    h2_stream *st = stream_get(user, frame->hd.stream_id);
    if (!st || st->started)
        return 0;
    if (st->req_hdrs.bytes + namelen + valuelen > ROUTER_HEAD_MAX)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    return nv_add(&st->req_hdrs, (const char *)name, namelen, (const char *)value, valuelen) < 0
               ? NGHTTP2_ERR_CALLBACK_FAILURE
               : 0;
}

static void req_eof(h2_stream *st)
{
    st->req_eof = true;
    if (st->up && st->up_id > 0)
        nghttp2_session_resume_data(st->up->s, st->up_id);
    else if (st->h1fd >= 0 && st->h1_chunked)
        bb_put(&st->h1out, "0\r\n\r\n", 5);
    else if (st->legacy && !st->local)
        h2_run_legacy(st);
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *user)
{
    h2_stream *st = stream_get(user, frame->hd.stream_id);
    if (!st)
        return 0;
    bool end = frame->hd.flags & NGHTTP2_FLAG_END_STREAM;
    if (frame->hd.type == NGHTTP2_HEADERS && !st->started) {
        if (end)
            st->req_eof = true;
        route_stream(st);
        return 0;
    }
    if ((frame->hd.type == NGHTTP2_DATA || frame->hd.type == NGHTTP2_HEADERS) && end &&
        !st->req_eof)
        req_eof(st);
    return 0;
}

static int on_data(nghttp2_session *session, uint8_t flags, int32_t id, const uint8_t *data,
                   size_t len, void *user)
{
    h2_stream *st = stream_get(user, id);
    if (!st || st->local) {
        nghttp2_session_consume(session, id, len);
        return 0;
    }
    if (st->legacy) {
        /* buffered whole (capped): the window is released at once */
        nghttp2_session_consume(session, id, len);
        if (bb_len(&st->req) + len > MAX_LEGACY_BODY) {
            st->legacy_too_big = true;
            return 0;
        }
        return bb_put(&st->req, data, len) < 0 ? NGHTTP2_ERR_CALLBACK_FAILURE : 0;
    }
    if (st->h1fd >= 0) {
        if (st->h1_wdead)
            nghttp2_session_consume(session, id, len);
        else
            h2_h1_put_body(st, data, len);
        return 0;
    }
    if (bb_put(&st->req, data, len) < 0)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    if (st->up && st->up_id > 0)
        nghttp2_session_resume_data(st->up->s, st->up_id);
    return 0;
}

static void stream_free(h2_conn *c, h2_stream *st)
{
    for (h2_stream **p = &c->streams; *p; p = &(*p)->next)
        if (*p == st) {
            *p = st->next;
            break;
        }
    if (st->up && st->up_id > 0 && !st->up->dead) {
        nghttp2_session_set_stream_user_data(st->up->s, st->up_id, NULL);
        nghttp2_submit_rst_stream(st->up->s, NGHTTP2_FLAG_NONE, st->up_id, NGHTTP2_CANCEL);
    }
    h2_h1_close(st);
    nv_free(&st->req_hdrs);
    nv_free(&st->resp_hdrs);
    nv_free(&st->trailers);
    router_message_done(&st->rm);
    bb_free(&st->req);
    bb_free(&st->resp);
    router_target_done(&st->target);
    free(st);
}

static int on_stream_close(nghttp2_session *session, int32_t id, uint32_t code, void *user)
{
    h2_conn *c = user;
    h2_stream *st = stream_get(c, id);
    if (st) {
        nghttp2_session_set_stream_user_data(session, id, NULL);
        stream_free(c, st);
    }
    return 0;
}

/* ---- I/O ---- */

/* Moves session output into out (bounded) and writes as much as the socket takes. */
static int flush_session(nghttp2_session *s, int fd, bbuf *out)
{
    while (bb_len(out) < OUT_HIGH && nghttp2_session_want_write(s)) {
        const uint8_t *data;
        ssize_t n = nghttp2_session_mem_send(s, &data);
        if (n < 0)
            return -EPROTO;
        if (n == 0)
            break;
        if (bb_put(out, data, (size_t)n) < 0)
            return -ENOMEM;
    }
    while (bb_len(out) > 0) {
        ssize_t n = send(fd, bb_data(out), bb_len(out), MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            return -errno;
        }
        bb_drop(out, (size_t)n);
    }
    return 0;
}

static int read_session(nghttp2_session *s, int fd)
{
    char rd[65536];
    for (int i = 0; i < 4; i++) {
        ssize_t n = recv(fd, rd, sizeof(rd), 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            return -errno;
        }
        if (n == 0)
            return -ECONNRESET;
        if (nghttp2_session_mem_recv(s, (const uint8_t *)rd, (size_t)n) < 0)
            return -EPROTO;
        if ((size_t)n < sizeof(rd))
            return 0;
    }
    return 0;
}

/* One REST stream's upstream I/O. */
static void h1_io(h2_conn *c, h2_stream *st, short revents)
{
    if (revents & POLLOUT || bb_len(&st->h1out) > 0) {
        while (bb_len(&st->h1out) > 0) {
            ssize_t n =
                send(st->h1fd, bb_data(&st->h1out), bb_len(&st->h1out), MSG_NOSIGNAL);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0) {
                if (errno != EAGAIN && errno != EWOULDBLOCK) {
                    /* The upstream stopped reading; it may have answered early (e.g. 400
                     * before the body): keep reading, drop the rest of the body. */
                    st->h1_wdead = true;
                    bb_drop(&st->h1out, bb_len(&st->h1out));
                    break;
                }
                break;
            }
            bb_drop(&st->h1out, (size_t)n);
        }
        if ((bb_len(&st->h1out) == 0 || st->h1_wdead) && st->req_pending_consume > 0) {
            nghttp2_session_consume(c->s, st->id, st->req_pending_consume);
            st->req_pending_consume = 0;
        }
    }
    if (revents & (POLLIN | POLLHUP | POLLERR)) {
        char rd[65536];
        ssize_t n = recv(st->h1fd, rd, sizeof(rd), 0);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return;
        if (n <= 0) {
            if (n == 0)
                router_message_execute(&st->rm, NULL, 0);
            if (!st->resp_eof) {
                h2_h1_close(st);
                h2_stream_upstream_failed(st, NGHTTP2_INTERNAL_ERROR);
            } else
                h2_h1_close(st);
            return;
        }
        st->deadline_ms = 0;
        size_t k = router_message_execute(&st->rm, rd, (size_t)n);
        if (st->resp_eof) {
            h2_h1_close(st);
            return;
        }
        if (k != (size_t)n || HTTP_PARSER_ERRNO(&st->rm.p) != HPE_OK) {
            h2_h1_close(st);
            h2_stream_upstream_failed(st, NGHTTP2_INTERNAL_ERROR);
        }
    }
}

static void check_deadlines(h2_conn *c)
{
    long long now = now_msec(CLOCK_MONOTONIC);
    for (h2_stream *st = c->streams; st; st = st->next)
        if (st->h1fd >= 0 && st->deadline_ms > 0 && !st->resp_submitted && now > st->deadline_ms) {
            h2_h1_close(st);
            _cleanup_(api_error_clear) api_error e = API_ERROR_INIT;
            router_error_backend(&e, -ETIMEDOUT, st->route.id);
            h2_respond_error(st, &e);
        }
}

/* The fds one round of the connection's loop polls: the client, the resolution pipe, each
 * HTTP/2 upstream, each stream's HTTP/1.1 upstream (who[i]: the h2_up or h2_stream of pfd[i]). */
typedef struct pollset {
    struct pollfd *pfd;
    void **who;
    size_t cap, n, first_stream;
} pollset;

static void pollset_done(pollset *ps)
{
    free(ps->pfd);
    free(ps->who);
}

/* Fills ps for this round. -ENOMEM. */
static int pollset_build(h2_conn *c, pollset *ps)
{
    size_t need = 2;
    for (h2_up *u = c->ups; u; u = u->next)
        need++;
    for (h2_stream *st = c->streams; st; st = st->next)
        need++;
    if (need > ps->cap) {
        ps->cap = need * 2;
        pollset_done(ps);
        ps->pfd = calloc(ps->cap, sizeof(*ps->pfd));
        ps->who = calloc(ps->cap, sizeof(*ps->who));
        if (!ps->pfd || !ps->who)
            return -ENOMEM;
    }
    size_t n = 0;
    ps->pfd[n] = (struct pollfd){c->fd, POLLIN | (bb_len(&c->out) ? POLLOUT : 0), 0};
    ps->who[n++] = NULL;
    ps->pfd[n] = (struct pollfd){c->notify[0], POLLIN, 0};
    ps->who[n++] = NULL;
    for (h2_up *u = c->ups; u; u = u->next) {
        if (u->dead)
            continue;
        ps->pfd[n] = (struct pollfd){u->fd, POLLIN | (bb_len(&u->out) ? POLLOUT : 0), 0};
        ps->who[n++] = u;
    }
    ps->first_stream = n;
    for (h2_stream *st = c->streams; st; st = st->next) {
        if (st->h1fd < 0)
            continue;
        short ev = 0;
        if (bb_len(&st->resp) < RESP_HIGH)
            ev |= POLLIN;
        if (bb_len(&st->h1out) && !st->h1_wdead)
            ev |= POLLOUT;
        ps->pfd[n] = (struct pollfd){st->h1fd, ev, 0};
        ps->who[n++] = st;
    }
    ps->n = n;
    return 0;
}

/* Handles what poll found. A negative errno when the client's session failed (the connection
 * ends); an upstream's failure fails its streams only. */
static int pollset_dispatch(h2_conn *c, const pollset *ps)
{
    if (ps->pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) {
        if (read_session(c->s, c->fd) < 0)
            return -EIO;
    }
    if (ps->pfd[1].revents & POLLIN) {
        resolve_job *j;
        while (read(c->notify[0], &j, sizeof(j)) == (ssize_t)sizeof(j))
            resolve_done(c, j);
    }
    for (size_t i = 2; i < ps->first_stream; i++) {
        h2_up *u = ps->who[i];
        if (ps->pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) {
            if (read_session(u->s, u->fd) < 0)
                h2_up_fail(c, u);
        }
    }
    for (size_t i = ps->first_stream; i < ps->n; i++) {
        h2_stream *st = ps->who[i];
        /* The stream may have been closed by earlier processing in this round. */
        bool alive = false;
        for (h2_stream *q = c->streams; q; q = q->next)
            if (q == st)
                alive = true;
        if (alive && st->h1fd == ps->pfd[i].fd)
            h1_io(c, st, ps->pfd[i].revents);
    }
    return 0;
}

/* Frees the upstreams that failed or have nothing left to do. */
static void reap_upstreams(h2_conn *c)
{
    for (h2_up **p = &c->ups; *p;) {
        h2_up *u = *p;
        bool idle = !nghttp2_session_want_read(u->s) && !nghttp2_session_want_write(u->s);
        if (u->dead || idle) {
            if (!u->dead)
                h2_up_fail(c, u);
            *p = u->next;
            h2_up_free(u);
        } else
            p = &u->next;
    }
}

/* The server session on c->fd, its settings sent and the bytes already read (pre) fed. 0, or a
 * negative errno. */
static int session_open(h2_conn *c, nghttp2_session_callbacks **cb, nghttp2_option **opt,
                        const char *pre, size_t npre)
{
    if (pipe2(c->notify, O_CLOEXEC | O_NONBLOCK) < 0)
        return -errno;
    if (nghttp2_session_callbacks_new(cb) != 0 || nghttp2_option_new(opt) != 0)
        return -ENOMEM;
    nghttp2_session_callbacks_set_on_begin_headers_callback(*cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(*cb, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(*cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(*cb, on_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(*cb, on_stream_close);
    nghttp2_option_set_no_auto_window_update(*opt, 1);
    if (nghttp2_session_server_new2(&c->s, *cb, c, *opt) != 0)
        return -ENOMEM;
    nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 256},
                                   {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, WINDOW}};
    nghttp2_submit_settings(c->s, NGHTTP2_FLAG_NONE, iv, 2);
    nghttp2_session_set_local_window_size(c->s, NGHTTP2_FLAG_NONE, 0, 4 * WINDOW);
    if (nghttp2_session_mem_recv(c->s, (const uint8_t *)pre, npre) < 0)
        return -EPROTO;
    return 0;
}

/* Everything the connection holds, and the resolutions still out. */
static void conn_teardown(h2_conn *c, nghttp2_session_callbacks *cb, nghttp2_option *opt)
{
    while (c->streams)
        stream_free(c, c->streams);
    while (c->ups) {
        h2_up *u = c->ups;
        c->ups = u->next;
        h2_up_free(u);
    }
    nghttp2_session_del(c->s);
    nghttp2_session_callbacks_del(cb);
    nghttp2_option_del(opt);
    bb_free(&c->out);
    /* Jobs still out find the pipe closed and free themselves. */
    if (c->notify[0] >= 0) {
        resolve_job *j;
        while (read(c->notify[0], &j, sizeof(j)) == (ssize_t)sizeof(j)) {
            router_target_done(&j->res.target);
            api_error_clear(&j->res.err);
            free(j);
        }
    }
    safe_close(c->notify[0]);
    safe_close(c->notify[1]);
}

void router_h2_serve(router_ctx *ctx, int fd, bool peer_loopback, const char *pre, size_t npre)
{
    h2_conn c = {.ctx = ctx, .fd = fd, .loopback = peer_loopback, .notify = {-1, -1}};
    nghttp2_session_callbacks *cb = NULL;
    nghttp2_option *opt = NULL;
    _cleanup_(pollset_done) pollset ps = {0};
    if (session_open(&c, &cb, &opt, pre, npre) < 0) {
        conn_teardown(&c, cb, opt);
        return;
    }
    set_nonblock(fd);
    for (;;) {
        /* Writes first: they free buffers and windows. */
        if (flush_session(c.s, fd, &c.out) < 0)
            break;
        for (h2_up *u = c.ups; u; u = u->next)
            if (!u->dead && flush_session(u->s, u->fd, &u->out) < 0)
                h2_up_fail(&c, u);
        if (!nghttp2_session_want_read(c.s) && !nghttp2_session_want_write(c.s) &&
            bb_len(&c.out) == 0)
            break;
        if (pollset_build(&c, &ps) < 0)
            break;
        int pr = poll(ps.pfd, ps.n, 1000);
        if (pr < 0 && errno != EINTR)
            break;
        if (pollset_dispatch(&c, &ps) < 0)
            break;
        check_deadlines(&c);
        reap_upstreams(&c);
    }
    conn_teardown(&c, cb, opt);
}
