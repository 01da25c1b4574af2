/* A small gRPC client over HTTP/2 (nghttp2, h2c with prior knowledge) on a unix socket: one
 * connection per call (plus at most one follow-up request on it), non-blocking socket driven by
 * poll(2) so that a deadline and a cancel flag are honoured within ~100 ms. What the session
 * produces is gathered and written with one send(2) per turn of the loop (the preface, SETTINGS,
 * HEADERS and DATA of a call leave in one segment: one wakeup of sandboxd, not four). Calls on
 * different threads share nothing. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "basic/time-util.h"
#include "libasb/libasb-internal.h"
#include "libasb/libasb-sandbox-internal.h"

#define POLL_SLICE_MS 100
#define DEADLINE_GRACE_MS 2000
#define SEND_BATCH (64 * 1024)

typedef struct req_body {
    uint8_t *data; /* framed request, owned */
    size_t len, off;
} req_body;

typedef struct call {
    int fd;
    int32_t stream_id;
    req_body body;
    req_body follow_body; /* the follow-up's, once submitted */
    buf out;              /* produced by the session, not yet written */
    asbi_grpc_reader reader;
    asbi_grpc_msg_cb cb;
    void *payload;
    int cb_ret;
    int closed;
    uint32_t close_error;
    int http_status;
    int grpc_status; /* -1: none yet */
    char *grpc_message;
} call;

/* Writes what the session has to send, gathered into one buffer first. 0, or an nghttp2 error
 * code (NGHTTP2_ERR_CALLBACK_FAILURE when the socket failed). */
static int flush_out(nghttp2_session *s, call *c)
{
    while (c->out.len < SEND_BATCH) {
        const uint8_t *p;
        ssize_t n = nghttp2_session_mem_send(s, &p);
        if (n < 0)
            return (int)n;
        if (n == 0)
            break;
        if (buf_append(&c->out, p, (size_t)n) < 0)
            return NGHTTP2_ERR_NOMEM;
    }
    if (c->out.len == 0)
        return 0;
    ssize_t w = send(c->fd, c->out.data, c->out.len, MSG_NOSIGNAL);
    if (w < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR
                   ? 0
                   : NGHTTP2_ERR_CALLBACK_FAILURE;
    buf_consume(&c->out, (size_t)w);
    return 0;
}

static int want_write(nghttp2_session *s, const call *c)
{
    return c->out.len > 0 || nghttp2_session_want_write(s);
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *user_data)
{
    call *c = user_data;
    if (frame->hd.stream_id != c->stream_id)
        return 0;
    if (namelen == 7 && memcmp(name, ":status", 7) == 0) {
        c->http_status = atoi((const char *)value);
    } else if (namelen == 11 && memcmp(name, "grpc-status", 11) == 0) {
        char tmp[16];
        size_t n = valuelen < sizeof(tmp) - 1 ? valuelen : sizeof(tmp) - 1;
        memcpy(tmp, value, n);
        tmp[n] = '\0';
        c->grpc_status = atoi(tmp);
    } else if (namelen == 12 && memcmp(name, "grpc-message", 12) == 0) {
        free(c->grpc_message);
        c->grpc_message = asbi_grpc_message_decode((const char *)value, valuelen);
    }
    return 0;
}

static int on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t stream_id,
                         const uint8_t *data, size_t len, void *user_data)
{
    call *c = user_data;
    if (stream_id != c->stream_id || c->cb_ret)
        return 0;
    int r = asbi_grpc_reader_feed(&c->reader, data, len, c->cb, c->payload);
    if (r) {
        c->cb_ret = r;
        nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, stream_id, NGHTTP2_CANCEL);
    }
    return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code,
                           void *user_data)
{
    call *c = user_data;
    if (stream_id == c->stream_id) {
        c->closed = 1;
        c->close_error = error_code;
    }
    return 0;
}

static ssize_t on_body(nghttp2_session *session, int32_t stream_id, uint8_t *out, size_t length,
                       uint32_t *data_flags, nghttp2_data_source *source, void *user_data)
{
    req_body *b = source->ptr;
    size_t n = b->len - b->off;
    if (n > length)
        n = length;
    memcpy(out, b->data + b->off, n);
    b->off += n;
    if (b->off == b->len)
        *data_flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

/* The 5-byte gRPC prefix (uncompressed, big-endian length) + the message. ASB_OK or ASB_ENOMEM. */
static int frame_request(req_body *ret, const uint8_t *req, size_t req_len)
{
    *ret = (req_body){.len = req_len + 5};
    if (!(ret->data = malloc(ret->len)))
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    ret->data[0] = 0;
    ret->data[1] = (uint8_t)(req_len >> 24);
    ret->data[2] = (uint8_t)(req_len >> 16);
    ret->data[3] = (uint8_t)(req_len >> 8);
    ret->data[4] = (uint8_t)req_len;
    if (req_len)
        memcpy(ret->data + 5, req, req_len);
    return ASB_OK;
}

static int connect_unix(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path))
        return asbi_error_set(ASB_EINVAL, 0, NULL, "socket path too long: %s", path);
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return asbi_error_set(ASB_ECONNECT, 0, NULL, "socket: %s", strerror(errno));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int e = errno;
        close(fd);
        return asbi_error_set(ASB_ECONNECT, 0, NULL, "the connection to sandboxd at %s failed: %s",
                              path, strerror(e));
    }
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) {
        int e = errno;
        close(fd);
        return asbi_error_set(ASB_ECONNECT, 0, NULL, "fcntl: %s", strerror(e));
    }
    return fd;
}

int asbi_router_connect(const char *host, const char *port)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int e = getaddrinfo(host, port, &hints, &res);
    if (e != 0)
        return asbi_error_set(ASB_ECONNECT, 0, NULL, "cannot resolve router host %s: %s", host,
                              gai_strerror(e));
    int fd = -1, err = 0;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
            break;
        err = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0)
        return asbi_error_set(ASB_ECONNECT, 0, NULL, "the connection to the router at %s:%s failed: %s",
                              host, port, strerror(err));
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) {
        e = errno;
        close(fd);
        return asbi_error_set(ASB_ECONNECT, 0, NULL, "fcntl: %s", strerror(e));
    }
    return fd;
}

#define NV(n, v)                                                                                   \
    {(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE}

/* Submits a request stream for `method` with body b (router headers in router mode). Returns the
 * stream id, or a negative nghttp2 error. */
static int32_t submit(nghttp2_session *s, const asb_sandbox *sbx, const char *method, req_body *b,
                      long timeout_ms)
{
    char tmo[32], authority[300], auth[4096];
    snprintf(tmo, sizeof(tmo), "%ldm", timeout_ms > 0 ? timeout_ms : 0);
    nghttp2_nv hdrs[16] = {
        NV(":method", "POST"),
        NV(":scheme", "http"),
        NV(":path", method),
        NV(":authority", "localhost"),
        NV("content-type", "application/grpc"),
        NV("te", "trailers"),
        NV("user-agent", "libasb/" ASB_VERSION),
    };
    size_t nh = 7;
    if (timeout_ms > 0)
        hdrs[nh++] = (nghttp2_nv)NV("grpc-timeout", tmo);
    if (sbx->router_url) {
        snprintf(authority, sizeof(authority), "%s:%s", sbx->router_host, sbx->router_port);
        hdrs[3] = (nghttp2_nv)NV(":authority", authority);
        hdrs[nh++] = (nghttp2_nv)NV("x-sandbox-id", sbx->sandbox_id);
        hdrs[nh++] = (nghttp2_nv)NV("x-sandbox-namespace", sbx->sandbox_ns);
        hdrs[nh++] = (nghttp2_nv)NV("x-sandbox-port", "9090");
        if (sbx->token && *sbx->token) {
            snprintf(auth, sizeof(auth), "Bearer %s", sbx->token);
            hdrs[nh++] = (nghttp2_nv)NV("authorization", auth);
        }
    }
    nghttp2_data_provider prd = {.source.ptr = b, .read_callback = on_body};
    return nghttp2_submit_request(s, NULL, hdrs, nh, &prd, NULL);
}

/* Puts the follow-up on the connection once the message callback made it ready. */
static int submit_followup(nghttp2_session *s, const asb_sandbox *sbx, call *c,
                           asbi_grpc_followup *f)
{
    if (!f || !f->ready || f->sent || c->closed)
        return ASB_OK;
    f->sent = 1;
    int r = frame_request(&c->follow_body, f->req, f->req_len);
    if (r != ASB_OK)
        return r;
    int32_t id = submit(s, sbx, f->method, &c->follow_body, 0);
    if (id < 0)
        return asbi_error_set(ASB_ERROR, 0, NULL, "nghttp2_submit_request: %s",
                              nghttp2_strerror(id));
    return ASB_OK;
}

/* Drives the session until the stream closes. Returns ASB_OK or an error (set). */
static int run(nghttp2_session *s, const asb_sandbox *sbx, call *c, long deadline,
               const volatile int *cancel, const char *path, asbi_grpc_followup *follow)
{
    uint8_t frame[16384];
    for (;;) {
        if (c->cb_ret) {
            (void)flush_out(s, c); /* best effort: the RST_STREAM */
            if (c->cb_ret > 0)
                asbi_error_set(ASB_ECANCELLED, 0, NULL, "stopped by the callback (%d)", c->cb_ret);
            return c->cb_ret;
        }
        if (c->closed)
            return ASB_OK;
        if (cancel && *cancel) {
            nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, c->stream_id, NGHTTP2_CANCEL);
            (void)flush_out(s, c);
            return asbi_error_set(ASB_ECANCELLED, 0, NULL, "cancelled");
        }
        long left = deadline ? deadline - now_msec(CLOCK_MONOTONIC) : POLL_SLICE_MS;
        if (deadline && left <= 0) {
            nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, c->stream_id, NGHTTP2_CANCEL);
            (void)flush_out(s, c);
            return asbi_error_set(ASB_ETIMEOUT, 0, NULL, "gRPC call to %s timed out", path);
        }
        int r = submit_followup(s, sbx, c, follow);
        if (r != ASB_OK)
            return r;
        int rv = flush_out(s, c);
        if (rv != 0)
            return asbi_error_set(ASB_ECONNECT, 0, NULL, "sending to sandboxd at %s failed: %s",
                                  path, nghttp2_strerror(rv));
        if (!nghttp2_session_want_read(s) && !want_write(s, c))
            break;
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        if (want_write(s, c))
            p.events |= POLLOUT;
        int pr = poll(&p, 1, (int)(left < POLL_SLICE_MS ? left : POLL_SLICE_MS));
        if (pr < 0 && errno != EINTR)
            return asbi_error_set(ASB_ECONNECT, 0, NULL, "poll: %s", strerror(errno));
        if (pr <= 0 || !(p.revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        ssize_t n = read(c->fd, frame, sizeof(frame));
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (n <= 0)
            break;
        ssize_t used = nghttp2_session_mem_recv(s, frame, (size_t)n);
        if (used < 0)
            return asbi_error_set(ASB_EPROTOCOL, 0, NULL, "HTTP/2 error from sandboxd: %s",
                                  nghttp2_strerror((int)used));
    }
    if (c->cb_ret)
        return c->cb_ret;
    if (!c->closed)
        return asbi_error_set(ASB_ECONNECT, 0, NULL,
                              "sandboxd at %s closed the connection during the call", path);
    return ASB_OK;
}

int asbi_grpc_call(const asb_sandbox *sbx, const char *method, const uint8_t *req, size_t req_len,
                   long timeout_ms, const volatile int *cancel, asbi_grpc_msg_cb cb, void *payload,
                   asbi_grpc_followup *follow)
{
    call c = {.fd = -1, .grpc_status = -1, .cb = cb, .payload = payload};
    nghttp2_session_callbacks *cbs = NULL;
    nghttp2_session *s = NULL;
    int ret;
    if (req_len > UINT32_MAX)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "request too large");
    ret = frame_request(&c.body, req, req_len);
    if (ret != ASB_OK)
        return ret;
    long deadline = timeout_ms > 0 ? now_msec(CLOCK_MONOTONIC) + timeout_ms + DEADLINE_GRACE_MS : 0;
    const char *socket_path = sbx->router_url ? sbx->router_url : sbx->grpc_socket;
    c.fd = sbx->router_url ? asbi_router_connect(sbx->router_host, sbx->router_port)
                           : connect_unix(sbx->grpc_socket);
    if (c.fd < 0) {
        ret = c.fd;
        goto out;
    }
    if (nghttp2_session_callbacks_new(&cbs) != 0) {
        ret = asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
        goto out;
    }
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
    if (nghttp2_session_client_new(&s, cbs, &c) != 0) {
        ret = asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
        goto out;
    }
    nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                         {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20}};
    nghttp2_submit_settings(s, NGHTTP2_FLAG_NONE, settings, 2);
    nghttp2_session_set_local_window_size(s, NGHTTP2_FLAG_NONE, 0, 4 << 20);
    c.stream_id = submit(s, sbx, method, &c.body, timeout_ms);
    if (c.stream_id < 0) {
        ret = asbi_error_set(ASB_ERROR, 0, NULL, "nghttp2_submit_request: %s",
                             nghttp2_strerror(c.stream_id));
        goto out;
    }
    ret = run(s, sbx, &c, deadline, cancel, socket_path, follow);
    if (ret != ASB_OK)
        goto out;
    if (c.grpc_status >= 0) {
        ret = asbi_sandbox_error_from_grpc(c.grpc_status, c.grpc_message);
        if (ret == ASB_OK && c.reader.pending.len > 0)
            ret = asbi_error_set(ASB_EPROTOCOL, 0, NULL, "truncated gRPC message");
    } else if (c.http_status && c.http_status != 200) {
        ret = asbi_sandbox_error_from_rest(c.http_status, NULL, 0);
    } else {
        ret = asbi_error_set(ASB_EPROTOCOL, 0, NULL, "gRPC stream ended without a status%s",
                             c.close_error ? " (reset by sandboxd)" : "");
    }
out:
    nghttp2_session_del(s);
    nghttp2_session_callbacks_del(cbs);
    if (c.fd >= 0)
        close(c.fd);
    free(c.body.data);
    free(c.follow_body.data);
    buf_done(&c.out);
    free(c.grpc_message);
    asbi_grpc_reader_done(&c.reader);
    return ret;
}
