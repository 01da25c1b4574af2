/* libasb's plain HTTP transport (src/libasb/libasb-http-plain.c) against a one-shot server on a
 * loopback socket that answers canned bytes: which URLs take it, the request it writes, replies
 * in pieces (chunked, split headers), and how it fails (cut replies, timeouts, cancel, stop);
 * and against a keep-alive server: connections reused, and a request sent again when the server
 * closed a kept connection without reading it. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "basic/buf.h"
#include "libasb/libasb-http.h"
#include "libasb/libasb-internal.h"
#include "unit.h"

typedef struct fake_server {
    int listen_fd;
    const char *const *reply; /* pieces sent one write each, a short pause between them */
    size_t n_reply;
    int hold_ms; /* after the reply, before closing */
    buf request; /* what arrived */
    pthread_t thread;
} fake_server;

static void *fake_serve(void *arg)
{
    fake_server *f = arg;
    int fd = accept(f->listen_fd, NULL, NULL);
    if (fd < 0)
        return NULL;
    /* The head, then as much body as its Content-Length says. */
    char chunk[4096];
    for (;;) {
        const char *end = f->request.data ? strstr(f->request.data, "\r\n\r\n") : NULL;
        if (end) {
            const char *cl = strcasestr(f->request.data, "Content-Length: ");
            size_t want = cl ? (size_t)atol(cl + 16) : 0;
            if (f->request.len >= (size_t)(end + 4 - f->request.data) + want)
                break;
        }
        ssize_t n = read(fd, chunk, sizeof(chunk));
        if (n <= 0 || buf_append(&f->request, chunk, (size_t)n) < 0)
            break;
    }
    for (size_t i = 0; i < f->n_reply; i++) {
        if (write(fd, f->reply[i], strlen(f->reply[i])) < 0)
            break;
        usleep(2000);
    }
    if (f->hold_ms)
        usleep((useconds_t)f->hold_ms * 1000);
    close(fd);
    return NULL;
}

/* Starts the server; *url gets "http://127.0.0.1:PORT/path?q=1". */
static int fake_start(fake_server *f, char url[128])
{
    f->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    if (f->listen_fd < 0 || bind(f->listen_fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        listen(f->listen_fd, 1) < 0 || getsockname(f->listen_fd, (struct sockaddr *)&a, &len) < 0)
        return -1;
    snprintf(url, 128, "http://127.0.0.1:%u/path?q=1", ntohs(a.sin_port));
    return pthread_create(&f->thread, NULL, fake_serve, f) == 0 ? 0 : -1;
}

static void fake_stop(fake_server *f)
{
    pthread_join(f->thread, NULL);
    close(f->listen_fd);
    buf_done(&f->request);
}

typedef struct collected {
    buf body, headers;
    long status;
    size_t stop_after; /* 0: never stop */
} collected;

static void collected_done(collected *c)
{
    buf_done(&c->body);
    buf_done(&c->headers);
}

static void collect_header(const char *name, size_t nlen, const char *value, size_t vlen,
                           void *payload)
{
    collected *c = payload;
    buf_appendf(&c->headers, "%.*s=%.*s;", (int)nlen, name, (int)vlen, value);
}

static bool collect_body(const char *data, size_t len, long status, void *payload)
{
    collected *c = payload;
    c->status = status;
    buf_append(&c->body, data, len);
    return c->stop_after == 0 || c->body.len < c->stop_after;
}

static int exchange(fake_server *f, collected *c, const char *method, const char *body,
                    long timeout_ms, const volatile int *cancel, long *status)
{
    char url[128];
    if (fake_start(f, url) < 0)
        return -999;
    const char *headers[] = {"Accept: application/json"};
    asbi_http_exchange x = {
        .method = method,
        .url = url,
        .headers = headers,
        .n_headers = 1,
        .body = body,
        .body_len = body ? strlen(body) : 0,
        .timeout_ms = timeout_ms,
        .connect_timeout_ms = 1000,
        .cancel = cancel,
        .on_header = collect_header,
        .on_body = collect_body,
        .payload = c,
    };
    int r = asbi_http_plain(&x, "http://test", status);
    fake_stop(f);
    return r;
}

TEST(plain_applies_to_loopback_http_only)
{
    CHECK(asbi_http_plain_applies("http://127.0.0.1:7443"));
    CHECK(asbi_http_plain_applies("http://127.9.8.7:1/apis"));
    CHECK(asbi_http_plain_applies("http://localhost:7443/"));
    CHECK(asbi_http_plain_applies("http://[::1]:7443/x"));
    CHECK(!asbi_http_plain_applies("https://127.0.0.1:7443"));
    CHECK(!asbi_http_plain_applies("http://10.0.0.1:7443"));
    CHECK(!asbi_http_plain_applies("http://128.0.0.1"));
    CHECK(!asbi_http_plain_applies("http://example.com"));
    CHECK(!asbi_http_plain_applies("not a url"));
}

TEST(url_escape)
{
    char *e = asbi_url_escape("a b/c~d-e.f_g=h&i%");
    CHECK_STR_EQ(e, "a%20b%2Fc~d-e.f_g%3Dh%26i%25");
    free(e);
}

TEST(url_add_query)
{
    char *url = strdup("/apis/x/v1/things");
    CHECK_INT_EQ(asbi_url_add_query(&url, "watch", "true"), ASB_OK);
    CHECK_STR_EQ(url, "/apis/x/v1/things?watch=true");
    CHECK_INT_EQ(asbi_url_add_query(&url, "labelSelector", "app=a b,tier!=x"), ASB_OK);
    CHECK_STR_EQ(url, "/apis/x/v1/things?watch=true&labelSelector=app%3Da%20b%2Ctier%21%3Dx");
    free(url);
}

TEST(request_and_chunked_reply_in_pieces)
{
    static const char *const reply[] = {
        "HTTP/1.1 201 Created\r\nContent-Type: applic",
        "ation/json\r\nWarning: 299 - \"x\"\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"a\"",
        "\r\n3\r\n:1}\r\n0\r\n\r\n",
    };
    fake_server f = {.reply = reply, .n_reply = 3, .hold_ms = 300};
    collected c = {0};
    long status = 0;
    /* The server holds the connection open after the last chunk: the end of the message, not
     * of the connection, ends the exchange. */
    CHECK_INT_EQ(exchange(&f, &c, "POST", "{\"k\":1}", 5000, NULL, &status), ASB_OK);
    CHECK_INT_EQ(status, 201);
    CHECK_STR_EQ(c.body.data, "{\"a\":1}");
    CHECK_STR_EQ(c.headers.data,
                 "Content-Type=application/json;Warning=299 - \"x\";Transfer-Encoding=chunked;");
    collected_done(&c);
}

TEST(request_bytes)
{
    static const char *const reply[] = {"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"};
    fake_server f = {.reply = reply, .n_reply = 1};
    char url[128];
    CHECK_INT_EQ(fake_start(&f, url), 0);
    const char *headers[] = {"Accept: application/json", "Content-Type: application/json"};
    collected c = {0};
    asbi_http_exchange x = {.method = "PUT",
                            .url = url,
                            .headers = headers,
                            .n_headers = 2,
                            .body = "{\"k\":1}",
                            .body_len = 7,
                            .timeout_ms = 5000,
                            .on_body = collect_body,
                            .payload = &c};
    long status = 0;
    CHECK_INT_EQ(asbi_http_plain(&x, url, &status), ASB_OK);
    pthread_join(f.thread, NULL);
    const char *port = strchr(url + 7, ':');
    char want[512];
    snprintf(want, sizeof(want),
             "PUT /path?q=1 HTTP/1.1\r\nHost: 127.0.0.1%.*s\r\nUser-Agent: libasb/" ASB_VERSION
             "\r\nAccept: application/json\r\nContent-Type: "
             "application/json\r\nContent-Length: 7\r\n\r\n{\"k\":1}",
             (int)strcspn(port, "/"), port);
    CHECK_STR_EQ(f.request.data, want);
    CHECK_INT_EQ(status, 200);
    CHECK_STR_EQ(c.body.data, "{}");
    close(f.listen_fd);
    buf_done(&f.request);
    collected_done(&c);
}

TEST(reply_cut_short_is_a_connection_error)
{
    static const char *const reply[] = {"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}"};
    fake_server f = {.reply = reply, .n_reply = 1};
    collected c = {0};
    long status = 0;
    CHECK_INT_EQ(exchange(&f, &c, "GET", NULL, 5000, NULL, &status), ASB_ECONNECT);
    CHECK(strstr(asb_error_last()->message, "closed before the end of the reply") != NULL);
    collected_done(&c);
}

TEST(reply_until_close_without_length)
{
    static const char *const reply[] = {"HTTP/1.0 500 Oops\r\n\r\nplain", " text"};
    fake_server f = {.reply = reply, .n_reply = 2};
    collected c = {0};
    long status = 0;
    CHECK_INT_EQ(exchange(&f, &c, "GET", NULL, 5000, NULL, &status), ASB_OK);
    CHECK_INT_EQ(status, 500);
    CHECK_STR_EQ(c.body.data, "plain text");
    collected_done(&c);
}

TEST(garbage_is_a_protocol_error)
{
    static const char *const reply[] = {"SMTP ready\r\n\r\n"};
    fake_server f = {.reply = reply, .n_reply = 1};
    collected c = {0};
    long status = 0;
    CHECK_INT_EQ(exchange(&f, &c, "GET", NULL, 5000, NULL, &status), ASB_EPROTOCOL);
    collected_done(&c);
}

TEST(timeout_cancel_and_stop)
{
    /* Headers, then silence: the deadline covers the whole exchange. */
    static const char *const head[] = {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                       "2\r\nab\r\n"};
    fake_server f = {.reply = head, .n_reply = 1, .hold_ms = 700};
    collected c = {0};
    long status = 0;
    CHECK_INT_EQ(exchange(&f, &c, "GET", NULL, 200, NULL, &status), ASB_ETIMEOUT);
    CHECK_STR_EQ(c.body.data, "ab");
    CHECK_INT_EQ(status, 200);
    collected_done(&c);

    volatile int cancel = 1;
    fake_server g = {.reply = head, .n_reply = 1, .hold_ms = 300};
    collected d = {0};
    CHECK_INT_EQ(exchange(&g, &d, "GET", NULL, 0, &cancel, &status), ASB_ECANCELLED);
    collected_done(&d);

    fake_server h = {.reply = head, .n_reply = 1, .hold_ms = 300};
    collected e = {.stop_after = 1};
    CHECK_INT_EQ(exchange(&h, &e, "GET", NULL, 5000, NULL, &status), ASBI_HTTP_STOPPED);
    collected_done(&e);
}

TEST(connection_refused)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    CHECK(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
    CHECK(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/", ntohs(a.sin_port));
    collected c = {0};
    asbi_http_exchange x = {
        .method = "GET", .url = url, .timeout_ms = 5000, .on_body = collect_body, .payload = &c};
    long status = 0;
    CHECK_INT_EQ(asbi_http_plain(&x, url, &status), ASB_ECONNECT); /* bound, not listening */
    CHECK(strstr(asb_error_last()->message, "Connection refused") != NULL);
    close(fd);
    collected_done(&c);
}

/* A keep-alive server: serves the requests of each connection it accepts by `script`, one
 * character per request over all connections: 'R' replies (keep-alive), 'C' closes the connection
 * without replying (a server dropping an idle connection just as a request arrives). */
typedef struct keepalive_server {
    int listen_fd;
    const char *script;
    int accepts, served;
    pthread_t thread;
} keepalive_server;

static void *keepalive_serve(void *arg)
{
    keepalive_server *k = arg;
    size_t step = 0;
    while (k->script[step]) {
        int fd = accept(k->listen_fd, NULL, NULL);
        if (fd < 0)
            return NULL;
        k->accepts++;
        char req[4096];
        size_t have = 0;
        while (k->script[step]) {
            ssize_t n = read(fd, req + have, sizeof(req) - 1 - have);
            if (n <= 0)
                break;
            have += (size_t)n;
            req[have] = '\0';
            if (!strstr(req, "\r\n\r\n"))
                continue;
            have = 0;
            if (k->script[step++] == 'C')
                break;
            static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
            if (write(fd, ok, sizeof(ok) - 1) < 0)
                break;
            k->served++;
        }
        close(fd);
    }
    return NULL;
}

static int keepalive_get(const char *url)
{
    collected c = {0};
    asbi_http_exchange x = {
        .method = "GET", .url = url, .timeout_ms = 5000, .on_body = collect_body, .payload = &c};
    long status = 0;
    int r = asbi_http_plain(&x, url, &status);
    if (r == ASB_OK && (status != 200 || !c.body.data || strcmp(c.body.data, "ok") != 0))
        r = -1;
    collected_done(&c);
    return r;
}

TEST(keepalive_reuses_and_resends_once)
{
    keepalive_server k = {.script = "RRRCR"};
    k.listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    CHECK(bind(k.listen_fd, (struct sockaddr *)&a, sizeof(a)) == 0);
    CHECK(listen(k.listen_fd, 4) == 0);
    CHECK(getsockname(k.listen_fd, (struct sockaddr *)&a, &len) == 0);
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/x", ntohs(a.sin_port));
    CHECK(pthread_create(&k.thread, NULL, keepalive_serve, &k) == 0);
    for (int i = 0; i < 3; i++)
        CHECK_INT_EQ(keepalive_get(url), ASB_OK);
    /* The fourth request goes out on the kept connection, which the server closes unread: it is
     * sent again on a new one and answered there. */
    CHECK_INT_EQ(keepalive_get(url), ASB_OK);
    pthread_join(k.thread, NULL);
    CHECK_INT_EQ(k.accepts, 2);
    CHECK_INT_EQ(k.served, 4);
    close(k.listen_fd);
}
