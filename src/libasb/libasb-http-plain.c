/* The plain transport of libasb-http.h: one HTTP/1.1 exchange with a loopback server, on a
 * kept-alive connection of an earlier exchange (libasb-http-pool.h) or a new one. The URL and
 * the reply are parsed by http_parser (status line, headers, Content-Length, chunked coding, end
 * of message, keep-alive); this file only moves bytes and keeps time. */
#include <errno.h>
#include <fcntl.h>
#include <http_parser.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "basic/buf.h"
#include "basic/macro.h"
#include "basic/time-util.h"
#include "libasb/libasb-http-pool.h"
#include "libasb/libasb-http.h"
#include "libasb/libasb-internal.h"

/* How often a wait looks at the cancel flag. */
#define CANCEL_POLL_MS 100

typedef struct url_parts {
    char *host; /* without brackets */
    char *port; /* decimal */
    char *host_header;
    char *target; /* path and query */
} url_parts;

static void url_parts_done(url_parts *u)
{
    free(u->host);
    free(u->port);
    free(u->host_header);
    free(u->target);
}

static char *field_dup(const char *url, const struct http_parser_url *pu, int field)
{
    return strndup(url + pu->field_data[field].off, pu->field_data[field].len);
}

/* 0, -EINVAL (not an http:// URL with a host) or -ENOMEM. */
static int url_split(const char *url, url_parts *ret)
{
    struct http_parser_url pu;
    http_parser_url_init(&pu);
    if (http_parser_parse_url(url, strlen(url), 0, &pu) != 0 || !(pu.field_set & (1 << UF_HOST)) ||
        !(pu.field_set & (1 << UF_SCHEMA)) || pu.field_data[UF_SCHEMA].len != 4 ||
        strncasecmp(url + pu.field_data[UF_SCHEMA].off, "http", 4) != 0)
        return -EINVAL;
    ret->host = field_dup(url, &pu, UF_HOST);
    if (pu.field_set & (1 << UF_PORT))
        ret->port = field_dup(url, &pu, UF_PORT);
    else
        ret->port = strdup("80");
    /* The target runs from the path to the end, fragment excepted. */
    const char *path = pu.field_set & (1 << UF_PATH) ? url + pu.field_data[UF_PATH].off : "/";
    size_t end = pu.field_set & (1 << UF_FRAGMENT) ? (size_t)pu.field_data[UF_FRAGMENT].off - 1
                                                   : strlen(url);
    ret->target =
        pu.field_set & (1 << UF_PATH) ? strndup(path, end - (size_t)(path - url)) : strdup("/");
    bool v6 = ret->host && strchr(ret->host, ':');
    if (!ret->host || !ret->port || !ret->target ||
        asprintf(&ret->host_header, "%s%s%s:%s", v6 ? "[" : "", ret->host, v6 ? "]" : "",
                 ret->port) < 0) {
        ret->host_header = NULL;
        return -ENOMEM;
    }
    return 0;
}

bool asbi_http_plain_applies(const char *url)
{
    url_parts u = {0};
    bool yes = false;
    if (url_split(url, &u) == 0) {
        struct in_addr a4;
        yes = strcasecmp(u.host, "localhost") == 0 || strcmp(u.host, "::1") == 0 ||
              (inet_pton(AF_INET, u.host, &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127);
    }
    url_parts_done(&u);
    return yes;
}

typedef struct exchange_state {
    const asbi_http_exchange *x;
    const char *server;
    long deadline; /* CLOCK_MONOTONIC ms; 0: none */
    http_parser parser;
    buf field, value; /* the header being read (either may arrive in pieces) */
    bool in_value;
    bool complete, stopped;
    bool head;       /* a HEAD request: the reply has no body whatever its length says */
    size_t received; /* reply bytes read */
    int error;       /* ASB_ENOMEM from a callback */
} exchange_state;

/* Waits for fd to be ready for events, up to the deadline (or limit_at, when sooner and > 0),
 * looking at the cancel flag. Returns ASB_OK or an error (set). */
static int wait_fd(exchange_state *s, int fd, short events, long limit_at, const char *what)
{
    for (;;) {
        if (s->x->cancel && *s->x->cancel)
            return asbi_error_set(ASB_ECANCELLED, 0, NULL, "cancelled");
        long until = s->deadline;
        if (limit_at > 0 && (until == 0 || limit_at < until))
            until = limit_at;
        int slice = CANCEL_POLL_MS;
        if (until > 0) {
            long left = until - now_msec(CLOCK_MONOTONIC);
            if (left <= 0)
                return asbi_error_set(ASB_ETIMEOUT, 0, NULL, "request to %s timed out: %s",
                                      s->server, what);
            if (left < slice)
                slice = (int)left;
        }
        struct pollfd p = {.fd = fd, .events = events};
        int r = poll(&p, 1, slice);
        if (r < 0 && errno != EINTR)
            return asbi_error_set(ASB_ECONNECT, 0, NULL,
                                  "the connection to the server %s failed: poll: %s", s->server,
                                  strerror(errno));
        if (r > 0)
            return ASB_OK;
    }
}

/* One address. Returns ASB_OK with *ret_fd; ASB_ECONNECT with *ret_errno (no error set yet: the
 * next address may work); or the wait's ASB_ETIMEOUT / ASB_ECANCELLED (set). */
static int connect_one(exchange_state *s, const struct addrinfo *ai, int *ret_fd, int *ret_errno)
{
    _cleanup_close_ int fd =
        socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    int c = fd < 0 ? -1 : connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (c < 0 && (fd < 0 || errno != EINPROGRESS)) {
        *ret_errno = errno;
        return ASB_ECONNECT;
    }
    if (c < 0) { /* in progress */
        long limit =
            s->x->connect_timeout_ms > 0 ? now_msec(CLOCK_MONOTONIC) + s->x->connect_timeout_ms : 0;
        int r = wait_fd(s, fd, POLLOUT, limit, "connect");
        if (r != ASB_OK)
            return r;
        int err = 0;
        socklen_t len = sizeof(err);
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
            err = errno;
        if (err != 0) {
            *ret_errno = err;
            return ASB_ECONNECT;
        }
    }
    *ret_fd = TAKE_FD(fd);
    return ASB_OK;
}

/* Connects to the URL's host, trying its addresses in turn. Returns ASB_OK with *ret_fd, or an
 * error (set). */
static int connect_server(exchange_state *s, const url_parts *u, int *ret_fd)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ais = NULL;
    int g = getaddrinfo(u->host, u->port, &hints, &ais);
    if (g != 0)
        return asbi_error_set(ASB_ECONNECT, 0, NULL,
                              "the connection to the server %s failed: %s: %s", s->server, u->host,
                              gai_strerror(g));
    int r = ASB_ECONNECT, err = ECONNREFUSED;
    for (struct addrinfo *ai = ais; ai && r == ASB_ECONNECT; ai = ai->ai_next)
        r = connect_one(s, ai, ret_fd, &err);
    freeaddrinfo(ais);
    if (r != ASB_ECONNECT)
        return r;
    return asbi_error_set(ASB_ECONNECT, 0, NULL,
                          "the connection to the server %s failed: connect to %s port %s: %s",
                          s->server, u->host, u->port, strerror(err));
}

/* The request head and body, in one buffer. */
static int format_request(const asbi_http_exchange *x, const url_parts *u, buf *out)
{
    int r = buf_appendf(out,
                        "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: libasb/" ASB_VERSION "\r\n",
                        x->method, u->target, u->host_header);
    for (size_t i = 0; r >= 0 && i < x->n_headers; i++)
        r = buf_appendf(out, "%s\r\n", x->headers[i]);
    if (r >= 0 && (x->body || strcmp(x->method, "POST") == 0 || strcmp(x->method, "PUT") == 0 ||
                   strcmp(x->method, "PATCH") == 0))
        r = buf_appendf(out, "Content-Length: %zu\r\n", x->body ? x->body_len : 0);
    if (r >= 0)
        r = buf_append(out, "\r\n", 2);
    if (r >= 0 && x->body)
        r = buf_append(out, x->body, x->body_len);
    return r < 0 ? asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory") : ASB_OK;
}

static int send_all(exchange_state *s, int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN) {
            int r = wait_fd(s, fd, POLLOUT, 0, "send");
            if (r != ASB_OK)
                return r;
            continue;
        }
        if (w < 0)
            return asbi_error_set(ASB_ECONNECT, 0, NULL,
                                  "the connection to the server %s failed: send: %s", s->server,
                                  strerror(errno));
        p += w;
        n -= (size_t)w;
    }
    return ASB_OK;
}

/* http_parser callbacks: a header is complete when the next field (or the end of the head)
 * begins. */
static int emit_header(exchange_state *s)
{
    if (s->field.len > 0 && s->x->on_header) {
        const char *v = s->value.data ? s->value.data : "";
        size_t vn = s->value.len;
        while (vn > 0 && (*v == ' ' || *v == '\t'))
            v++, vn--;
        while (vn > 0 && (v[vn - 1] == ' ' || v[vn - 1] == '\t'))
            vn--;
        s->x->on_header(s->field.data, s->field.len, v, vn, s->x->payload);
    }
    s->field.len = s->value.len = 0;
    s->in_value = false;
    return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t len)
{
    exchange_state *s = p->data;
    if (s->in_value)
        emit_header(s);
    if (buf_append(&s->field, at, len) < 0) {
        s->error = ASB_ENOMEM;
        return -1;
    }
    return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len)
{
    exchange_state *s = p->data;
    s->in_value = true;
    if (buf_append(&s->value, at, len) < 0) {
        s->error = ASB_ENOMEM;
        return -1;
    }
    return 0;
}

static int on_headers_complete(http_parser *p)
{
    exchange_state *s = p->data;
    emit_header(s);
    return s->head ? 1 : 0; /* 1: no body follows */
}

static int on_body(http_parser *p, const char *at, size_t len)
{
    exchange_state *s = p->data;
    if (!s->x->on_body(at, len, (long)p->status_code, s->x->payload)) {
        s->stopped = true;
        return -1;
    }
    return 0;
}

static int on_message_complete(http_parser *p)
{
    exchange_state *s = p->data;
    s->complete = true;
    http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings reply_settings = {
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* Feeds n bytes (0: the end of the connection) to the parser. Returns ASB_OK, ASBI_HTTP_STOPPED
 * or an error (set). */
static int feed(exchange_state *s, const char *data, size_t n)
{
    size_t used = http_parser_execute(&s->parser, &reply_settings, data, n);
    if (s->error)
        return asbi_error_set(s->error, 0, NULL, "out of memory");
    if (s->stopped)
        return ASBI_HTTP_STOPPED;
    if (s->complete)
        return ASB_OK;
    if (n == 0) /* the parser calls an early end "invalid EOF state": it is a cut connection */
        return asbi_error_set(ASB_ECONNECT, 0, NULL,
                              "the connection to the server %s failed: closed before the end of "
                              "the reply",
                              s->server);
    if (used != n || HTTP_PARSER_ERRNO(&s->parser) != HPE_OK)
        return asbi_error_set(ASB_EPROTOCOL, (int)s->parser.status_code, NULL,
                              "malformed reply from %s: %s", s->server,
                              http_errno_description(HTTP_PARSER_ERRNO(&s->parser)));
    return ASB_OK;
}

static int receive_reply(exchange_state *s, int fd)
{
    char chunk[16384];
    while (!s->complete) {
        ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN) {
            int r = wait_fd(s, fd, POLLIN, 0, "waiting for the reply");
            if (r != ASB_OK)
                return r;
            continue;
        }
        if (n < 0)
            return asbi_error_set(ASB_ECONNECT, 0, NULL,
                                  "the connection to the server %s failed: recv: %s", s->server,
                                  strerror(errno));
        s->received += (size_t)n;
        int r = feed(s, chunk, (size_t)n);
        if (r != ASB_OK || n == 0)
            return r;
    }
    return ASB_OK;
}

/* One attempt on fd: the request, then the reply. */
static int exchange_on(exchange_state *s, int fd, const buf *req)
{
    http_parser_init(&s->parser, HTTP_RESPONSE);
    s->parser.data = s;
    s->field.len = s->value.len = 0;
    s->in_value = s->complete = s->stopped = false;
    s->received = 0;
    int r = send_all(s, fd, req->data, req->len);
    return r == ASB_OK ? receive_reply(s, fd) : r;
}

int asbi_http_plain(const asbi_http_exchange *x, const char *server, long *ret_status)
{
    *ret_status = 0;
    url_parts u = {0};
    int r = url_split(x->url, &u);
    if (r < 0) {
        url_parts_done(&u);
        return r == -ENOMEM ? asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory")
                            : asbi_error_set(ASB_EINVAL, 0, NULL, "bad server URL %s", server);
    }
    exchange_state s = {.x = x, .server = server, .head = strcmp(x->method, "HEAD") == 0};
    if (x->timeout_ms > 0)
        s.deadline = now_msec(CLOCK_MONOTONIC) + x->timeout_ms;
    _cleanup_buf_ buf req = BUF_INIT;
    _cleanup_close_ int fd = -1;
    r = format_request(x, &u, &req);
    if (r == ASB_OK && (fd = asbi_http_pool_take(u.host_header)) >= 0) {
        r = exchange_on(&s, fd, &req);
        /* The server closed the idle connection as the request went out: nothing of it was
         * read (a server answers every request it reads), so it is sent again, once, on a new
         * connection. */
        if (r == ASB_ECONNECT && s.received == 0) {
            fd = safe_close(fd);
            r = ASB_OK;
        }
    }
    if (r == ASB_OK && fd < 0) {
        r = connect_server(&s, &u, &fd);
        if (r == ASB_OK)
            r = exchange_on(&s, fd, &req);
    }
    if (s.parser.status_code > 0)
        *ret_status = (long)s.parser.status_code;
    if (r == ASB_OK && s.complete && http_should_keep_alive(&s.parser))
        asbi_http_pool_put(u.host_header, TAKE_FD(fd));
    buf_done(&s.field);
    buf_done(&s.value);
    url_parts_done(&u);
    return r;
}
