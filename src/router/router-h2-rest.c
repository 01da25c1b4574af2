/* HTTP/2 client connections (router-h2.c): a REST stream's HTTP/1.1 upstream (parsed with
 * router_message), and the legacy layer over HTTP/2 (whole response buffered). */
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

/* ---- HTTP/1.1 upstream for REST streams ---- */

static int h1_headers_complete(void *payload)
{
    h2_stream *st = payload;
    const http_parser *p = &st->rm.p;
    const router_headers *hdrs = &st->rm.h;
    nvlist h = {0};
    char sb[8];
    snprintf(sb, sizeof(sb), "%u", p->status_code);
    nv_adds(&h, ":status", sb);
    for (size_t i = 0; i < hdrs->n; i++) {
        const char *name = router_headers_name(hdrs, i);
        size_t nl = strlen(name);
        if (router_response_header_dropped(name, nl))
            continue;
        char *lower = strndup(name, nl);
        if (!lower)
            continue;
        for (char *q = lower; *q; q++)
            *q = (char)tolower((unsigned char)*q);
        const char *v = name + nl + 1;
        nv_add(&h, lower, nl, v, strlen(v));
        free(lower);
    }
    bool body = !(st->is_head || p->status_code == 204 || p->status_code == 304);
    if (!body)
        st->resp_eof = true;
    h2_submit_resp(st, (int)p->status_code, &h, body);
    nv_free(&h);
    return st->is_head ? 1 : 0;
}

static int h1_body(void *payload, const char *at, size_t n)
{
    h2_stream *st = payload;
    if (bb_put(&st->resp, at, n) < 0)
        return 1;
    h2_resume_client(st);
    return 0;
}

static int h1_complete(void *payload)
{
    h2_stream *st = payload;
    st->resp_eof = true;
    h2_resume_client(st);
    return 0;
}

static const router_message_hooks h1_hooks = {
    .headers_complete = h1_headers_complete,
    .body = h1_body,
    .message_complete = h1_complete,
};

void h2_h1_close(h2_stream *st)
{
    st->h1fd = safe_close(st->h1fd);
    bb_free(&st->h1out);
}

void h2_h1_put_body(h2_stream *st, const void *data, size_t n)
{
    if (st->h1_chunked) {
        char pre[32];
        int k = snprintf(pre, sizeof(pre), "%zx\r\n", n);
        bb_put(&st->h1out, pre, (size_t)k);
        bb_put(&st->h1out, data, n);
        bb_put(&st->h1out, "\r\n", 2);
    } else
        bb_put(&st->h1out, data, n);
    st->req_pending_consume += n;
}

/* The HTTP/1.1 request head for a REST stream, by the core's builder. Framing: a request that
 * ended with its headers goes without a body (Content-Length: 0 for POST, PUT and PATCH), else
 * with the client's content-length, else chunked (st->h1_chunked). */
static int h1_request_head(h2_stream *st, buf *out, const char *method, const char *path,
                           const char *host, bool end_stream)
{
    bool bodyless = end_stream && bb_len(&st->req) == 0;
    bool has_cl = false;
    router_headers h = {0};
    int r = 0;
    for (size_t i = 0; i < st->req_hdrs.n && r == 0; i++) {
        nghttp2_nv *v = &st->req_hdrs.v[i];
        bool cl = v->namelen == 14 && strncasecmp((char *)v->name, "content-length", 14) == 0;
        if (cl && bodyless)
            continue;
        has_cl |= cl;
        if ((r = router_headers_field(&h, (char *)v->name, v->namelen)) == 0)
            r = router_headers_value(&h, (char *)v->value, v->valuelen);
    }
    if (r == 0 && bodyless &&
        (!strcmp(method, "POST") || !strcmp(method, "PUT") || !strcmp(method, "PATCH")) &&
        (r = router_headers_field(&h, "Content-Length", 14)) == 0)
        r = router_headers_value(&h, "0", 1);
    if (r == 0)
        r = router_headers_end(&h);
    st->h1_chunked = !bodyless && !has_cl;
    if (r == 0)
        r = router_request_head(out, method, path, host, &h, st->h1_chunked);
    router_headers_done(&h);
    return r;
}

void h2_start_rest(h2_stream *st, const char *addr, bool end_stream)
{
    h2_conn *c = st->c;
    int fd = router_connect(addr, c->ctx->connect_timeout_ms);
    if (fd < 0) {
        c->ctx->resolver->invalidate(c->ctx->resolver, st->route.ns, st->route.id);
        router_error e;
        router_error_upstream(&e, -ECONNREFUSED, st->route.id);
        h2_respond_error(st, &e);
        return;
    }
    set_nonblock(fd);
    st->h1fd = fd;
    const char *method = nv_get(&st->req_hdrs, ":method");
    const char *path = nv_get(&st->req_hdrs, ":path");
    method = method ? method : "GET";
    st->is_head = strcmp(method, "HEAD") == 0;
    _cleanup_buf_ buf head = BUF_INIT;
    if (h1_request_head(st, &head, method, path ? path : "/", router_upstream_host(addr),
                        end_stream) < 0) {
        h2_h1_close(st);
        router_error e;
        router_error_upstream(&e, -ENOMEM, st->route.id);
        h2_respond_error(st, &e);
        return;
    }
    bb_put(&st->h1out, head.data, head.len);
    if (bb_len(&st->req) > 0) {
        size_t n = bb_len(&st->req);
        h2_h1_put_body(st, bb_data(&st->req), n);
        bb_free(&st->req);
    }
    if (st->req_eof && st->h1_chunked)
        bb_put(&st->h1out, "0\r\n\r\n", 5);
    router_message_init(&st->rm, HTTP_RESPONSE, &h1_hooks, st);
    st->deadline_ms = now_msec(CLOCK_MONOTONIC) + c->ctx->proxy_timeout_ms;
}

/* ---- legacy over HTTP/2 (whole response buffered) ---- */

typedef struct dlbuf {
    h2_stream *st;
    int status;
    char *ctype;
    char *extra;
} dlbuf;

static int dlb_head(int status, const char *ctype, const char *extra, long long len, void *p)
{
    dlbuf *d = p;
    d->status = status;
    d->ctype = strdup(ctype);
    d->extra = extra ? strdup(extra) : NULL;
    return 0;
}

static int dlb_data(const char *data, size_t len, void *p)
{
    dlbuf *d = p;
    return bb_put(&d->st->resp, data, len);
}

void h2_run_legacy(h2_stream *st)
{
    const char *method = nv_get(&st->req_hdrs, ":method");
    const char *path = nv_get(&st->req_hdrs, ":path");
    method = method ? method : "GET";
    path = path ? path : "/";
    router_error e;
    if (st->legacy_too_big) {
        router_error_set(&e, 413, "Request body too large for the legacy layer.");
        h2_respond_error(st, &e);
        return;
    }
    if (router_legacy_is_download(method, path)) {
        dlbuf d = {.st = st};
        int r = router_legacy_download(&st->target, path, dlb_head, dlb_data, &d);
        if (r < 0 || !d.ctype) {
            bb_free(&st->resp);
            router_error_upstream(&e, -ECONNREFUSED, st->route.id);
            h2_respond_error(st, &e);
        } else {
            bbuf body = st->resp;
            st->resp = (bbuf){0};
            h2_respond_simple(st, d.status, d.ctype, d.extra, bb_data(&body), bb_len(&body));
            bb_free(&body);
        }
        free(d.ctype);
        free(d.extra);
        return;
    }
    router_legacy_response lr = {0};
    int r =
        router_legacy_handle(&st->target, method, path, nv_get(&st->req_hdrs, "content-type"),
                             bb_len(&st->req) ? bb_data(&st->req) : NULL, bb_len(&st->req), &lr);
    bb_free(&st->req);
    if (r < 0) {
        st->c->ctx->resolver->invalidate(st->c->ctx->resolver, st->route.ns, st->route.id);
        router_error_upstream(&e, -ECONNREFUSED, st->route.id);
        h2_respond_error(st, &e);
    } else
        h2_respond_simple(st, lr.status, lr.content_type, lr.extra_header, lr.body, lr.body_len);
    router_legacy_response_done(&lr);
}
