/* The blocking HTTP/1.1 path: the one request the event loop hands off because the legacy
 * emulation (router-legacy*.c, blocking calls to sandboxd) answers it, parsed with the core's
 * message reader and admitted by the core; then the connection goes back to the loop
 * (ctx->handback). A legacy /upload streams on to sandboxd as a PUT (a full socket buffer
 * blocks the writer: back-pressure); everything else the loop proxies itself. */
#include <errno.h>
#include <http_parser.h>
#include <jansson.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "basic/macro.h"
#include "basic/time-util.h"
#include "router/router-core.h"
#include "router/router-legacy-parse.h"
#include "shared/router-stats.h"
#include "shared/status.h"

#define MAX_LEGACY_BODY (64 * 1024 * 1024)
#define CLIENT_IDLE_MS 120000

/* MODE_UPLOAD: a legacy /upload whose "file" part headers are not in yet (body buffered);
 * MODE_UPLOAD_PROXY: the multipart body streams on to sandboxd as PUT /v1/files/<filename>. */
enum { MODE_LOCAL, MODE_LEGACY, MODE_UPLOAD, MODE_UPLOAD_PROXY };
#define MAX_UPLOAD_PREAMBLE (1024 * 1024)

typedef struct h1_conn {
    router_ctx *ctx;
    int fd;
    bool loopback;
    router_message rq;
    bool message_done;
    bool keep_alive;
    bool close_after;
    int mode;
    bool req_chunked;
    int body_err;
    /* the upstream connection of an /upload */
    int up_fd;
    char *up_addr;
    buf body;
    char *upload_name;
    router_target target;
    router_route route;
    long long head_deadline; /* CLOCK_MONOTONIC ms by which the request head must be in; 0 */
    long rcv_timeout_ms;     /* SO_RCVTIMEO currently set on fd */
    int64_t started_us;      /* CLOCK_MONOTONIC us when the request head was in (0: not yet) */
} h1_conn;

/* ---- writing to the client ---- */

static int send_simple(h1_conn *c, int status, const char *ctype, const char *extra,
                       const char *body, size_t len)
{
    _cleanup_buf_ buf out = BUF_INIT;
    router_stats_answered(status, c->started_us);
    int r = router_reply(&out, status, ctype, extra, body, len, c->keep_alive,
                         c->rq.p.method == HTTP_HEAD);
    return r < 0 ? r : router_write_all(c->fd, out.data, out.len);
}

static int send_detail(h1_conn *c, const api_error *err)
{
    _cleanup_buf_ buf out = BUF_INIT;
    router_stats_answered(router_error_http(err), c->started_us);
    int r = router_reply_error(&out, err, c->keep_alive, c->rq.p.method == HTTP_HEAD);
    return r < 0 ? r : router_write_all(c->fd, out.data, out.len);
}

/* ---- upstream ---- */

static void upstream_drop(h1_conn *c)
{
    c->up_fd = safe_close(c->up_fd);
    free(c->up_addr);
    c->up_addr = NULL;
}

static void set_timeout(int fd, int opt, long ms)
{
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, opt, &tv, sizeof(tv));
}

static int upstream_get(h1_conn *c, const char *addr)
{
    if (c->up_fd >= 0 && c->up_addr && strcmp(c->up_addr, addr) == 0)
        return c->up_fd;
    upstream_drop(c);
    int fd = router_connect(addr, c->ctx->connect_timeout_ms);
    if (fd < 0)
        return fd;
    c->up_fd = fd;
    set_timeout(fd, SO_RCVTIMEO, c->ctx->proxy_timeout_ms);
    set_timeout(fd, SO_SNDTIMEO, c->ctx->proxy_timeout_ms);
    c->up_addr = strdup(addr);
    if (!c->up_addr) {
        upstream_drop(c);
        return -ENOMEM;
    }
    return fd;
}

/* ---- request callbacks ---- */

static int rq_begin(void *payload)
{
    h1_conn *c = payload;
    if (c->ctx->header_timeout_ms > 0)
        c->head_deadline = now_msec(CLOCK_MONOTONIC) + c->ctx->header_timeout_ms;
    return 0;
}

static bool has_body(const h1_conn *c)
{
    return (c->rq.p.flags & F_CHUNKED) || ((c->rq.p.flags & F_CONTENTLENGTH) && c->rq.p.content_length > 0);
}

/* Answers the request at once; a pending request body makes the connection close after. */
static int respond_local(h1_conn *c, const api_error *err)
{
    c->mode = MODE_LOCAL;
    if (has_body(c))
        c->keep_alive = false, c->close_after = true;
    return send_detail(c, err);
}

static bool path_is(const char *url, const char *want)
{
    size_t n = strlen(want);
    return strncmp(url, want, n) == 0 && (url[n] == '\0' || url[n] == '?');
}

/* Refuses the request-smuggling shapes as Go does (400/501, connection closed). Returns 0 when
 * the request may proceed, -EPROTO when it was answered, -ENOMEM when it could not be. */
static int refuse_bad_framing(h1_conn *c)
{
    _cleanup_buf_ buf out = BUF_INIT;
    int r = router_request_refuse_framing(&c->rq, &out);
    if (r == 0)
        return 0;
    if (r > 0)
        router_stats_answered(r, c->started_us);
    c->keep_alive = false;
    c->mode = MODE_LOCAL;
    if (out.len > 0)
        router_write_all(c->fd, out.data, out.len);
    return r < 0 ? r : -EPROTO;
}

static int rq_headers_complete(void *payload)
{
    h1_conn *c = payload;
    http_parser *p = &c->rq.p;
    _cleanup_(api_error_clear) api_error err = API_ERROR_INIT;
    c->head_deadline = 0;
    c->started_us = (int64_t)now_usec(CLOCK_MONOTONIC);
    int r = refuse_bad_framing(c);
    if (r < 0)
        return r;
    c->keep_alive = http_should_keep_alive(p);
    const char *url = router_message_url(&c->rq);
    router_admission a = {.loopback = c->loopback, .upgrade = p->upgrade};
    router_admission_from_headers(&a, http_method_str(p->method), url, &c->rq.h);
    router_target_done(&c->target);
    router_answer ans;
    switch (router_admit(c->ctx, &a, false, &c->route, &c->target, &ans, &err)) {
    case ROUTER_ADMIT_ANSWER:
        c->mode = MODE_LOCAL;
        if (has_body(c))
            c->keep_alive = false, c->close_after = true;
        return send_simple(c, ans.status, ans.ctype, ans.headers[0] ? ans.headers : NULL, ans.body,
                           strlen(ans.body)) < 0
                   ? -1
                   : 0;
    case ROUTER_ADMIT_HEALTHZ:
        c->mode = MODE_LOCAL;
        if (has_body(c))
            c->keep_alive = false, c->close_after = true;
        return send_simple(c, 200, "application/json", NULL, router_healthz_body,
                           strlen(router_healthz_body)) < 0
                   ? -1
                   : 0;
    case ROUTER_ADMIT_REFUSED:
        if (a.upgrade && router_error_http(&err) == 501)
            c->keep_alive = false; /* the connection is not switched: nothing more is read */
        return respond_local(c, &err);
    case ROUTER_ADMIT_PENDING: /* not with nonblock false */
    case ROUTER_ADMIT_TARGET:
        break;
    }
    if (c->route.kind != ROUTER_KIND_LEGACY || c->target.legacy) {
        /* proxied: the event loop's (it hands off only the emulation's requests) */
        router_error_internal(&err, -EPROTO);
        c->keep_alive = false;
        return respond_local(c, &err);
    }
    const char *ct = router_headers_get(&c->rq.h, "content-type");
    c->mode = p->method == HTTP_POST && path_is(url, "/upload") && ct &&
                      strncasecmp(ct, "multipart/form-data", 19) == 0
                  ? MODE_UPLOAD
                  : MODE_LEGACY;
    const char *expect = router_headers_get(&c->rq.h, "expect");
    if (expect && strcasecmp(expect, "100-continue") == 0 &&
        (r = router_write_all(c->fd, "HTTP/1.1 100 Continue\r\n\r\n", 25)) < 0)
        return r;
    return 0;
}

static int upload_start(h1_conn *c);

static int rq_body(void *payload, const char *at, size_t n)
{
    h1_conn *c = payload;
    if (c->mode == MODE_UPLOAD) {
        if (buf_append(&c->body, at, n) < 0)
            return 1;
        _cleanup_free_ char *name = NULL;
        int r = router_multipart_peek_filename(router_headers_get(&c->rq.h, "content-type"),
                                               c->body.data, c->body.len, &name);
        if (r == 0 && c->body.len <= MAX_UPLOAD_PREAMBLE)
            return 0;
        if (r <= 0) {
            c->mode = MODE_LEGACY; /* answered from the buffered body (422) */
            return 0;
        }
        c->upload_name = TAKE_PTR(name);
        r = upload_start(c);
        if (r < 0)
            c->body_err = r;
        return 0;
    }
    if (c->mode == MODE_LEGACY) {
        if (c->body.len + n > MAX_LEGACY_BODY) {
            c->body_err = -E2BIG;
            return 0;
        }
        return buf_append(&c->body, at, n) < 0;
    }
    if (c->mode != MODE_UPLOAD_PROXY || c->body_err < 0)
        return 0;
    int r = 0;
    if (c->req_chunked) {
        char pre[32];
        int k = snprintf(pre, sizeof(pre), "%zx\r\n", n);
        if ((r = router_write_all(c->up_fd, pre, (size_t)k)) == 0 &&
            (r = router_write_all(c->up_fd, at, n)) == 0)
            r = router_write_all(c->up_fd, "\r\n", 2);
    } else
        r = router_write_all(c->up_fd, at, n);
    if (r < 0)
        c->body_err = r;
    return 0;
}

static int rq_complete(void *payload)
{
    h1_conn *c = payload;
    if (c->mode == MODE_UPLOAD_PROXY && c->req_chunked && c->body_err == 0) {
        int r = router_write_all(c->up_fd, "0\r\n\r\n", 5);
        if (r < 0)
            c->body_err = r;
    }
    c->message_done = true;
    return 0;
}

static const router_message_hooks request_hooks = {
    .message_begin = rq_begin,
    .headers_complete = rq_headers_complete,
    .body = rq_body,
    .message_complete = rq_complete,
};

/* ---- legacy over HTTP/1.1 ---- */

typedef struct dl_state {
    h1_conn *c;
    bool chunked;
    int err;
} dl_state;

static int dl_head(int status, const char *ctype, const char *extra, long long len, void *payload)
{
    dl_state *d = payload;
    h1_conn *c = d->c;
    _cleanup_free_ char *head = NULL;
    char lenbuf[64];
    d->chunked = len < 0;
    router_stats_answered(status, c->started_us);
    if (len >= 0)
        snprintf(lenbuf, sizeof(lenbuf), "Content-Length: %lld\r\n", len);
    else
        snprintf(lenbuf, sizeof(lenbuf), "Transfer-Encoding: chunked\r\n");
    int n = asprintf(&head, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n%s%s%s%s\r\n", status,
                     status_http_reason(status), ctype, lenbuf, extra ? extra : "",
                     extra ? "\r\n" : "", c->keep_alive ? "" : "Connection: close\r\n");
    if (n < 0)
        return d->err = -ENOMEM;
    return d->err = router_write_all(c->fd, head, (size_t)n);
}

static int dl_data(const char *data, size_t len, void *payload)
{
    dl_state *d = payload;
    if (len == 0)
        return 0;
    if (d->chunked) {
        char pre[32];
        int k = snprintf(pre, sizeof(pre), "%zx\r\n", len);
        if ((d->err = router_write_all(d->c->fd, pre, (size_t)k)) < 0 ||
            (d->err = router_write_all(d->c->fd, data, len)) < 0 ||
            (d->err = router_write_all(d->c->fd, "\r\n", 2)) < 0)
            return d->err;
        return 0;
    }
    return d->err = router_write_all(d->c->fd, data, len);
}

static int serve_legacy(h1_conn *c)
{
    const char *method = http_method_str(c->rq.p.method);
    const char *url = router_message_url(&c->rq);
    if (c->body_err == -E2BIG) {
        _cleanup_(api_error_clear) api_error e = API_ERROR_INIT;
        router_error_legacy_too_large(&e);
        c->keep_alive = false;
        return send_detail(c, &e);
    }
    if (router_legacy_is_download(method, url)) {
        dl_state d = {.c = c};
        int r = router_legacy_download(&c->target, url, dl_head, dl_data, &d);
        if (r < 0 && d.err == 0) {
            c->ctx->resolver->invalidate(c->ctx->resolver, c->route.ns, c->route.id);
            _cleanup_(api_error_clear) api_error e = API_ERROR_INIT;
            router_error_backend(&e, -ECONNREFUSED, c->route.id);
            return send_detail(c, &e);
        }
        if (d.chunked && d.err == 0)
            d.err = router_write_all(c->fd, "0\r\n\r\n", 5);
        return d.err;
    }
    router_legacy_response lr = {0};
    int r =
        router_legacy_handle(&c->target, method, url, router_headers_get(&c->rq.h, "content-type"),
                             c->body.data, c->body.len, &lr);
    if (r < 0) {
        router_legacy_response_done(&lr);
        c->ctx->resolver->invalidate(c->ctx->resolver, c->route.ns, c->route.id);
        _cleanup_(api_error_clear) api_error e = API_ERROR_INIT;
        router_error_backend(&e, -ECONNREFUSED, c->route.id);
        return send_detail(c, &e);
    }
    r = send_simple(c, lr.status, lr.content_type, lr.extra_header, lr.body, lr.body_len);
    router_legacy_response_done(&lr);
    return r;
}

/* RFC 3986 unreserved bytes: everything else is percent-encoded (sandboxd decodes %2F into a
 * directory). */
static bool unreserved(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '-' || ch == '.' || ch == '_' || ch == '~';
}

/* The "file" part's name is known: PUT the multipart body as it is to sandboxd (which stores
 * the part named "file"), starting with what was buffered. */
static int upload_start(h1_conn *c)
{
    const char *name = c->upload_name;
    while (*name == '/')
        name++;
    _cleanup_free_ char *enc = router_percent_encode(name, unreserved), *head = NULL;
    if (!enc)
        return -ENOMEM;
    int r = upstream_get(c, c->target.rest);
    if (r < 0)
        return r;
    c->req_chunked = !(c->rq.p.flags & F_CONTENTLENGTH) || (c->rq.p.flags & F_CHUNKED);
    const char *cl = router_headers_get(&c->rq.h, "content-length");
    int n = asprintf(&head,
                     "PUT /v1/files/%s HTTP/1.1\r\nHost: sandbox\r\nContent-Type: %s\r\n%s%s%s\r\n",
                     enc, router_headers_get(&c->rq.h, "content-type"),
                     c->req_chunked ? "Transfer-Encoding: chunked\r\n" : "Content-Length: ",
                     c->req_chunked ? "" : cl, c->req_chunked ? "" : "\r\n");
    if (n < 0)
        return -ENOMEM;
    if ((r = router_write_all(c->up_fd, head, (size_t)n)) < 0) {
        upstream_drop(c);
        return r;
    }
    c->mode = MODE_UPLOAD_PROXY;
    size_t len = 0;
    _cleanup_free_ char *pre = buf_steal(&c->body, &len);
    return rq_body(c, pre, len);
}

typedef struct small_resp {
    int status;
    buf body;
    bool done;
} small_resp;

static int sr_body(http_parser *p, const char *at, size_t n)
{
    small_resp *r = p->data;
    if (r->body.len + n > 65536)
        return 0;
    return buf_append(&r->body, at, n) < 0;
}

static int sr_complete(http_parser *p)
{
    small_resp *r = p->data;
    r->status = (int)p->status_code;
    r->done = true;
    http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings small_settings = {.on_body = sr_body,
                                                    .on_message_complete = sr_complete};

/* sandboxd's answer to the upload PUT, in the legacy shapes. */
static int upload_finish(h1_conn *c)
{
    _cleanup_(api_error_clear) api_error err = API_ERROR_INIT;
    /* A failed body write usually means sandboxd answered early (403 for a path outside the
     * root, before reading the body) and closed: its answer is still there to read. */
    if (c->body_err < 0)
        c->keep_alive = false;
    small_resp sr = {0};
    http_parser p;
    http_parser_init(&p, HTTP_RESPONSE);
    p.data = &sr;
    char rd[16384];
    while (!sr.done && c->up_fd >= 0) {
        ssize_t n = recv(c->up_fd, rd, sizeof(rd), 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        http_parser_execute(&p, &small_settings, rd, (size_t)n);
        if (HTTP_PARSER_ERRNO(&p) != HPE_OK && !sr.done)
            break;
    }
    upstream_drop(c);
    int r;
    if (!sr.done) {
        router_error_backend(&err, -ECONNREFUSED, c->route.id);
        r = send_detail(c, &err);
    } else {
        json_t *o;
        int status = 200;
        if (sr.status / 100 == 2)
            o = json_pack("{s:s++}", "message", "File '", c->upload_name,
                          "' uploaded successfully.");
        else if (sr.status == 403) {
            status = 403;
            o = json_pack("{s:s}", "message", "Access denied");
        } else {
            json_t *e = sr.body.data ? json_loadb(sr.body.data, sr.body.len, 0, NULL) : NULL;
            const char *m = json_string_value(json_object_get(e, "message"));
            status = 500;
            o = json_pack("{s:s+}", "message", "File upload failed: ", m ? m : "error");
            json_decref(e);
        }
        _cleanup_free_ char *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        r = body ? send_simple(c, status, "application/json", NULL, body, strlen(body)) : -ENOMEM;
    }
    buf_done(&sr.body);
    return r < 0 || !c->keep_alive ? -1 : 0;
}

/* Finishes a parsed request. Returns 0 to go on with the connection, <0 to close it. */
static int finish_request(h1_conn *c)
{
    if (c->mode == MODE_UPLOAD_PROXY)
        return upload_finish(c);
    if (c->mode == MODE_LEGACY || c->mode == MODE_UPLOAD)
        return serve_legacy(c) < 0 || !c->keep_alive ? -1 : 0;
    return c->keep_alive && !c->close_after ? 0 : -1;
}

static void request_reset(h1_conn *c)
{
    router_message_reset(&c->rq);
    c->started_us = 0;
    buf_done(&c->body);
    free(c->upload_name);
    c->upload_name = NULL;
    c->body_err = 0;
    c->message_done = false;
    c->mode = MODE_LOCAL;
    c->close_after = false;
    router_target_done(&c->target);
}

bool router_http1_serve(router_ctx *ctx, int fd, bool peer_loopback, const char *pre, size_t npre)
{
    bool handed_back = false;
    h1_conn c = {.ctx = ctx, .fd = fd, .loopback = peer_loopback, .up_fd = -1};
    router_message_init(&c.rq, HTTP_REQUEST, &request_hooks, &c);
    set_timeout(fd, SO_RCVTIMEO, CLIENT_IDLE_MS);
    c.rcv_timeout_ms = CLIENT_IDLE_MS;
    char *in = malloc(ROUTER_HEAD_MAX);
    if (!in)
        goto out;
    memcpy(in, pre, npre);
    size_t have = npre, off = 0;
    for (;;) {
        if (off == have) {
            /* Reading a request head: Go's ReadHeaderTimeout bounds it as a whole. */
            long want = CLIENT_IDLE_MS;
            if (c.head_deadline) {
                long long left = c.head_deadline - now_msec(CLOCK_MONOTONIC);
                if (left <= 0)
                    break;
                want = left < want ? (long)left : want;
            }
            if (want != c.rcv_timeout_ms) {
                set_timeout(fd, SO_RCVTIMEO, want);
                c.rcv_timeout_ms = want;
            }
            ssize_t n = recv(fd, in, ROUTER_HEAD_MAX, 0);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                break;
            have = (size_t)n;
            off = 0;
        }
        size_t k = router_message_execute(&c.rq, in + off, have - off);
        off += k;
        enum http_errno e = HTTP_PARSER_ERRNO(&c.rq.p);
        if (c.message_done) {
            http_parser_pause(&c.rq.p, 0);
            if (finish_request(&c) < 0)
                break;
            request_reset(&c);
            /* The loop handed this connection off for one request (the legacy emulation's);
             * the next ones go back to it with whatever was read after this one. */
            if (ctx->handback && ctx->handback(ctx->handback_payload, fd, c.loopback, in + off,
                                               have - off) == 0) {
                handed_back = true;
                break;
            }
            continue; /* not taken (stopping): the next request is refused (500) */
        }
        if (e != HPE_OK) {
            /* A callback's failure already answered or lost the client; a parse error gets 400. */
            if (e > HPE_CB_chunk_complete && c.mode == MODE_LOCAL) {
                _cleanup_buf_ buf out = BUF_INIT;
                c.keep_alive = false;
                router_stats_answered(400, c.started_us);
                if (router_request_refuse_malformed(&c.rq, &out) == 0)
                    router_write_all(fd, out.data, out.len);
            }
            break;
        }
        if (c.close_after)
            break;
    }
out:
    free(in);
    request_reset(&c);
    router_message_done(&c.rq);
    upstream_drop(&c);
    return handed_back;
}
