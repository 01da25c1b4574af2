#define _GNU_SOURCE
/* An HTTP/2 (h2c, prior knowledge) client for test_router_standalone.py: on ONE connection it
 * uploads N bodies of SIZE bytes with PUT, one after the other (each waits for its stream to
 * close), then sends one GET. Every request's status is printed on its own line ("PUT 400",
 * "GET 200"), or "PUT timeout" when no whole answer came within 10 s, which is what a
 * connection whose flow-control window ran out looks like. An upload answered before its body
 * is all sent is cancelled (RST_STREAM), as curl does, and the next request follows.
 *
 * Usage: h2_early_client PORT TOKEN PUT_SANDBOX_ID GET_SANDBOX_ID N SIZE */
#include <arpa/inet.h>
#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct client {
    int fd;
    int32_t stream;
    int status;
    int closed;
    int resp_done;
    size_t body_left;
} client;

static ssize_t on_send(nghttp2_session *s, const uint8_t *data, size_t len, int flags, void *u)
{
    (void)s, (void)flags;
    client *c = u;
    ssize_t n = send(c->fd, data, len, MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return NGHTTP2_ERR_WOULDBLOCK;
    return n < 0 ? NGHTTP2_ERR_CALLBACK_FAILURE : n;
}

static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nlen,
                     const uint8_t *value, size_t vlen, uint8_t flags, void *u)
{
    (void)s, (void)flags, (void)vlen;
    client *c = u;
    if (f->hd.stream_id == c->stream && nlen == 7 && memcmp(name, ":status", 7) == 0)
        c->status = atoi((const char *)value);
    return 0;
}

static int on_close(nghttp2_session *s, int32_t id, uint32_t code, void *u)
{
    (void)s, (void)code;
    client *c = u;
    if (id == c->stream)
        c->closed = 1;
    return 0;
}

static int on_frame(nghttp2_session *s, const nghttp2_frame *f, void *u)
{
    (void)s;
    client *c = u;
    if (f->hd.stream_id == c->stream && (f->hd.flags & NGHTTP2_FLAG_END_STREAM) &&
        (f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA))
        c->resp_done = 1;
    return 0;
}

static int on_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                   void *u)
{
    (void)s, (void)flags, (void)id, (void)data, (void)len, (void)u;
    return 0;
}

static ssize_t body_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len,
                         uint32_t *flags, nghttp2_data_source *src, void *u)
{
    (void)s, (void)id, (void)src;
    client *c = u;
    size_t n = len < c->body_left ? len : c->body_left;
    memset(buf, 'z', n);
    c->body_left -= n;
    if (c->body_left == 0)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Drives the session until the current stream closed or its whole response came (0), or 10 s
 * passed (-1). */
static int run_stream(nghttp2_session *s, client *c)
{
    double deadline = now() + 10;
    while (!c->closed && !c->resp_done) {
        if (nghttp2_session_send(s) != 0 || now() > deadline)
            return -1;
        struct pollfd p = {c->fd, POLLIN, 0};
        if (nghttp2_session_want_write(s))
            p.events |= POLLOUT;
        if (poll(&p, 1, 100) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR))) {
            uint8_t buf[65536];
            ssize_t n = recv(c->fd, buf, sizeof(buf), 0);
            if (n <= 0 && !(n < 0 && (errno == EAGAIN || errno == EINTR)))
                return -1;
            if (n > 0 && nghttp2_session_mem_recv(s, buf, (size_t)n) < 0)
                return -1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 7)
        return 2;
    client c = {.fd = socket(AF_INET, SOCK_STREAM, 0)};
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(c.fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        return 1;
    nghttp2_session_callbacks *cb;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_send_callback(cb, on_send);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame);
    nghttp2_session *s;
    nghttp2_session_client_new(&s, cb, &c);
    nghttp2_submit_settings(s, NGHTTP2_FLAG_NONE, NULL, 0);
    char auth[256];
    snprintf(auth, sizeof(auth), "Bearer %s", argv[2]);
    int n = atoi(argv[5]);
    size_t size = strtoul(argv[6], NULL, 10);
    for (int i = 0; i <= n; i++) {
        bool get = i == n;
        const char *sid = get ? argv[4] : argv[3];
        char path[64], len[32];
        snprintf(path, sizeof(path), get ? "/v1/after" : "/v1/files/big%d", i);
        snprintf(len, sizeof(len), "%zu", size);
#define HDR(k, v) {(uint8_t *)(k), (uint8_t *)(v), strlen(k), strlen(v), NGHTTP2_NV_FLAG_NONE}
        nghttp2_nv h[] = {HDR(":method", get ? "GET" : "PUT"), HDR(":scheme", "http"),
                          HDR(":authority", "127.0.0.1"), HDR(":path", path),
                          HDR("authorization", auth), HDR("x-sandbox-id", sid),
                          HDR("content-length", len)};
        c.body_left = size;
        c.status = 0;
        c.closed = 0;
        c.resp_done = 0;
        nghttp2_data_provider body = {.read_callback = body_read};
        c.stream = nghttp2_submit_request(s, NULL, h, get ? 6 : 7, get ? NULL : &body, NULL);
        if (c.stream < 0)
            return 1;
        int r = run_stream(s, &c);
        if (r < 0 || c.status == 0)
            printf("%s timeout\n", get ? "GET" : "PUT");
        else
            printf("%s %d\n", get ? "GET" : "PUT", c.status);
        fflush(stdout);
        if (r < 0)
            return 1;
        /* A whole answer while the body is still going out: the upload stops, as curl's does
         * ("HTTP error before end of send"), and the connection goes on. */
        if (!c.closed)
            nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, c.stream, NGHTTP2_CANCEL);
    }
    nghttp2_session_del(s);
    nghttp2_session_callbacks_del(cb);
    close(c.fd);
    return 0;
}
