/* The router's proxy core without sockets: header list, admission, router-made answers, the
 * upstream request head and the response relay state machine. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/un.h>
#include <stdlib.h>
#include <string.h>

#include "basic/time-util.h"
#include "router/router-core.h"
#include "shared/router-stats.h"
#include "shared/status.h"
#include "unit.h"

/* Feeds s to the relay in pieces of `step` bytes; returns the last feed result. */
static ssize_t feed_pieces(router_relay *r, const char *s, size_t step, buf *out)
{
    size_t len = strlen(s), off = 0;
    ssize_t k = 0;
    while (off < len && !r->done) {
        size_t n = len - off < step ? len - off : step;
        k = router_relay_feed(r, s + off, n, out);
        if (k < 0)
            return k;
        off += (size_t)k;
    }
    return k;
}

TEST(headers_split_callbacks)
{
    router_headers h = {0};
    CHECK_INT_EQ(router_headers_field(&h, "X-Sand", 6), 0);
    size_t len;
    CHECK_STR_EQ(router_headers_current(&h, &len), "X-Sand");
    CHECK_INT_EQ(router_headers_field(&h, "box-ID", 6), 0);
    CHECK_INT_EQ(router_headers_value(&h, "bo", 2), 0);
    CHECK_INT_EQ(router_headers_value(&h, "x", 1), 0);
    CHECK_INT_EQ(router_headers_field(&h, "Empty", 5), 0);
    CHECK_INT_EQ(router_headers_end(&h), 0);
    CHECK_INT_EQ(h.n, 2);
    CHECK_STR_EQ(router_headers_name(&h, 0), "X-Sandbox-ID");
    CHECK_STR_EQ(router_headers_get(&h, "x-sandbox-id"), "box");
    CHECK_STR_EQ(router_headers_get(&h, "empty"), "");
    CHECK(router_headers_get(&h, "absent") == NULL);
    _cleanup_free_ http_field *f = NULL;
    CHECK_INT_EQ(router_headers_fields(&h, &f), 0);
    CHECK_INT_EQ(f[0].name_len, 12);
    CHECK_INT_EQ(f[0].value_len, 3);
    router_headers_reset(&h);
    CHECK_INT_EQ(h.n, 0);
    CHECK(router_headers_get(&h, "x-sandbox-id") == NULL);
    /* a head over ROUTER_HEAD_MAX is refused */
    char *big = malloc(ROUTER_HEAD_MAX);
    CHECK(big != NULL);
    memset(big, 'a', ROUTER_HEAD_MAX);
    CHECK_INT_EQ(router_headers_field(&h, "n", 1), 0);
    CHECK_INT_EQ(router_headers_value(&h, big, ROUTER_HEAD_MAX), -E2BIG);
    free(big);
    router_headers_done(&h);
}

static int fake_resolve(router_resolver *r, const char *ns, const char *id, unsigned port,
                        bool nonblock, router_target *out, api_error *err)
{
    if (port && asprintf(&out->port, "10.0.0.9:%u", port) < 0)
        return -ENOMEM;
    if (strcmp(id, "slow") == 0 && nonblock)
        return -EWOULDBLOCK;
    if (strcmp(id, "gone") == 0) {
        api_error_set(err, STATUS_NOT_FOUND, "Sandbox %s not found.", id);
        return -ENOENT;
    }
    out->rest = strdup("unix:/x/rest.sock");
    return out->rest ? 0 : -ENOMEM;
}

static router_admit_result admit(router_ctx *ctx, const char *method, const char *path,
                                 const char *auth, const char *id, bool http2, bool upgrade,
                                 api_error *err)
{
    router_admission a = {
        .info = {.method = method, .path = path, .sandbox_id = id},
        .authorization = auth,
        .http2 = http2,
        .upgrade = upgrade,
    };
    router_route route;
    router_target t = {0};
    router_answer ans;
    router_admit_result r = router_admit(ctx, &a, true, &route, &t, &ans, err);
    if (r == ROUTER_ADMIT_TARGET)
        CHECK_STR_EQ(t.rest, "unix:/x/rest.sock");
    router_target_done(&t);
    return r;
}

TEST(admission_order)
{
    router_resolver res = {.resolve = fake_resolve};
    router_ctx ctx = {.token = (char *)"tok", .resolver = &res};
    _cleanup_(api_error_clear) api_error err = API_ERROR_INIT;
    /* healthz needs no token */
    CHECK_INT_EQ(admit(&ctx, "GET", "/healthz?x=1", NULL, NULL, false, false, &err),
                 ROUTER_ADMIT_HEALTHZ);
    CHECK_INT_EQ(admit(&ctx, "POST", "/healthz", NULL, NULL, false, false, &err),
                 ROUTER_ADMIT_REFUSED);
    CHECK_INT_EQ(router_error_http(&err), 401);
    /* auth before routing: a missing X-Sandbox-ID without a token is 401, with one 400 */
    CHECK_INT_EQ(admit(&ctx, "GET", "/v1/x", "Bearer tok", NULL, false, false, &err),
                 ROUTER_ADMIT_REFUSED);
    CHECK_INT_EQ(router_error_http(&err), 400);
    CHECK_STR_EQ(err.message, "X-Sandbox-ID header is required.");
    CHECK_INT_EQ(admit(&ctx, "GET", "/v1/x", "Bearer tok", "box", false, true, &err),
                 ROUTER_ADMIT_REFUSED);
    CHECK_INT_EQ(router_error_http(&err), 501);
    CHECK_INT_EQ(admit(&ctx, "GET", "/v1/x", "Bearer tok", "box", false, false, &err),
                 ROUTER_ADMIT_TARGET);
    CHECK_INT_EQ(admit(&ctx, "GET", "/v1/x", "Bearer tok", "slow", false, false, &err),
                 ROUTER_ADMIT_PENDING);
    CHECK_INT_EQ(admit(&ctx, "GET", "/v1/x", "Bearer tok", "gone", false, false, &err),
                 ROUTER_ADMIT_REFUSED);
    CHECK_INT_EQ(router_error_http(&err), 404);
    router_admission a = {
        .info = {.method = "POST",
                 .path = "/process.v1.ProcessService/Execute",
                 .sandbox_id = "box",
                 .content_type = "application/grpc"},
        .authorization = "Bearer tok",
    };
    router_route route;
    router_target t = {0};
    router_answer ans;
    CHECK_INT_EQ(router_admit(&ctx, &a, false, &route, &t, &ans, &err), ROUTER_ADMIT_REFUSED);
    CHECK_STR_EQ(err.message, "gRPC requests need HTTP/2 (h2c prior knowledge).");
    a.http2 = true;
    CHECK_INT_EQ(router_admit(&ctx, &a, false, &route, &t, &ans, &err), ROUTER_ADMIT_TARGET);
    CHECK_INT_EQ(route.kind, ROUTER_KIND_GRPC);
    router_target_done(&t);
}

TEST(admission_from_headers_first_wins)
{
    router_headers h = {0};
    const char *kv[][2] = {{"X-Sandbox-Id", "one"}, {"x-sandbox-id", "two"},
                           {"Authorization", "Bearer a"}, {"X-Sandbox-Port", "8888"}};
    for (size_t i = 0; i < 4; i++) {
        CHECK_INT_EQ(router_headers_field(&h, kv[i][0], strlen(kv[i][0])), 0);
        CHECK_INT_EQ(router_headers_value(&h, kv[i][1], strlen(kv[i][1])), 0);
    }
    CHECK_INT_EQ(router_headers_end(&h), 0);
    router_admission a = {0};
    router_admission_from_headers(&a, "GET", "/", &h);
    CHECK_STR_EQ(a.info.sandbox_id, "one");
    CHECK_STR_EQ(a.info.sandbox_port, "8888");
    CHECK_STR_EQ(a.authorization, "Bearer a");
    CHECK(a.info.sandbox_ns == NULL);
    router_headers_done(&h);
}

TEST(replies)
{
    _cleanup_buf_ buf out = BUF_INIT;
    _cleanup_(api_error_clear) api_error err = API_ERROR_INIT;
    router_error_backend(&err, -ETIMEDOUT, "box");
    CHECK_INT_EQ(router_error_http(&err), 504);
    CHECK_STR_EQ(err.message, "Timed out waiting for the backend sandbox: box");
    router_error_backend(&err, -ECONNREFUSED, "box");
    CHECK_INT_EQ(router_error_http(&err), 502);
    CHECK_STR_EQ(err.message, "Could not connect to the backend sandbox: box");
    CHECK_INT_EQ(router_reply_error(&out, &err, false, false), 0);
    CHECK(strncmp(out.data, "HTTP/1.1 502 Bad Gateway\r\n", 26) == 0);
    CHECK(strstr(out.data, "Connection: close\r\n") != NULL);
    CHECK(strstr(out.data, "\r\n\r\n{\"detail\":\"Could not connect") != NULL);
    buf_reset(&out);
    CHECK_INT_EQ(router_reply(&out, 200, "text/plain", "X-A: b", "hi", 2, true, true), 0);
    CHECK_STR_EQ(out.data, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n"
                           "X-A: b\r\n\r\n");
    CHECK_STR_EQ(status_http_reason(401), "Unauthorized");
    CHECK_STR_EQ(status_http_reason(413), "Payload Too Large");
    CHECK_STR_EQ(status_http_reason(799), "Unknown");
}

TEST(request_head)
{
    router_headers h = {0};
    const char *kv[][2] = {{"Host", "x"},          {"Authorization", "Bearer t"},
                           {"X-Sandbox-ID", "box"}, {"Content-Length", "5"},
                           {"Accept", "*/*"},       {"Connection", "keep-alive"}};
    for (size_t i = 0; i < 6; i++) {
        CHECK_INT_EQ(router_headers_field(&h, kv[i][0], strlen(kv[i][0])), 0);
        CHECK_INT_EQ(router_headers_value(&h, kv[i][1], strlen(kv[i][1])), 0);
    }
    CHECK_INT_EQ(router_headers_end(&h), 0);
    _cleanup_buf_ buf out = BUF_INIT;
    CHECK_INT_EQ(router_request_head(&out, "PUT", "/v1/files/a", "sandbox", &h, false), 0);
    CHECK_STR_EQ(out.data, "PUT /v1/files/a HTTP/1.1\r\nHost: sandbox\r\nAccept: */*\r\n"
                           "Content-Length: 5\r\n\r\n");
    buf_reset(&out);
    CHECK_INT_EQ(router_request_head(&out, "POST", "/", router_upstream_host("10.0.0.1:8080"), &h,
                                     true),
                 0);
    CHECK_STR_EQ(out.data, "POST / HTTP/1.1\r\nHost: 10.0.0.1:8080\r\nAccept: */*\r\n"
                           "Transfer-Encoding: chunked\r\n\r\n");
    buf_reset(&out);
    CHECK_INT_EQ(router_chunk(&out, "hello", 5), 0);
    CHECK_STR_EQ(out.data, "5\r\nhello\r\n");
    router_headers_done(&h);
}

TEST(relay_length_in_pieces)
{
    static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive\r\n"
                               "X-Y: z\r\n\r\nhelloHTTP/1.1 200 OK\r\n";
    for (size_t step = 1; step <= sizeof(resp); step += 7) {
        router_relay r = {0};
        router_relay_start(&r, false, false, true);
        _cleanup_buf_ buf out = BUF_INIT;
        ssize_t k = feed_pieces(&r, resp, step, &out);
        CHECK(k >= 0);
        CHECK(r.done);
        CHECK(r.head_done);
        CHECK(router_relay_reusable(&r));
        CHECK_STR_EQ(out.data, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Y: z\r\n\r\nhello");
        /* bytes after the response are not consumed */
        CHECK_INT_EQ(router_relay_feed(&r, "x", 1, &out), 0);
        router_relay_done(&r);
    }
}

TEST(relay_rechunks_eof_body)
{
    router_relay r = {0};
    router_relay_start(&r, false, false, true);
    _cleanup_buf_ buf out = BUF_INIT;
    static const char head[] = "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nabc";
    CHECK_INT_EQ(router_relay_feed(&r, head, strlen(head), &out), (ssize_t)strlen(head));
    CHECK(!r.done);
    CHECK_INT_EQ(router_relay_feed(&r, "", 0, &out), 0); /* upstream EOF ends it */
    CHECK(r.done);
    CHECK(!router_relay_reusable(&r));
    CHECK(r.keep_alive);
    CHECK_STR_EQ(out.data,
                 "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n");
    router_relay_done(&r);
    /* an HTTP/1.0 client: delimited by closing instead */
    router_relay_start(&r, false, true, true);
    buf_reset(&out);
    CHECK(router_relay_feed(&r, head, strlen(head), &out) > 0);
    CHECK(!r.keep_alive);
    CHECK_STR_EQ(out.data, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nabc");
    router_relay_done(&r);
}

TEST(relay_interim_head_and_errors)
{
    router_relay r = {0};
    _cleanup_buf_ buf out = BUF_INIT;
    /* 100 Continue is dropped; HEAD has no body even with a length */
    static const char resp[] = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n";
    router_relay_start(&r, false, false, true);
    CHECK(router_relay_feed(&r, resp, strlen(resp), &out) > 0);
    CHECK(r.done);
    CHECK_STR_EQ(out.data, "HTTP/1.1 204 No Content\r\n\r\n");
    router_relay_start(&r, true, false, false);
    buf_reset(&out);
    static const char head[] = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n";
    CHECK(router_relay_feed(&r, head, strlen(head), &out) > 0);
    CHECK(r.done);
    CHECK_STR_EQ(out.data, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\nConnection: close\r\n\r\n");
    /* malformed, and EOF in the middle of a body */
    router_relay_start(&r, false, false, true);
    CHECK_INT_EQ(router_relay_feed(&r, "NOT HTTP\r\n", 10, &out), -EPROTO);
    router_relay_start(&r, false, false, true);
    buf_reset(&out);
    static const char part[] = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc";
    CHECK(router_relay_feed(&r, part, strlen(part), &out) > 0);
    CHECK(r.head_done);
    CHECK_INT_EQ(router_relay_feed(&r, "", 0, &out), -ECONNRESET);
    CHECK(!r.done);
    router_relay_done(&r);
}

/* Decodes a chunked body (no extensions, no trailers), appending to out. Returns 0 once the
 * last chunk is in, -1 on a framing error. */
static int dechunk(const char *s, buf *out)
{
    for (;;) {
        char *end;
        unsigned long n = strtoul(s, &end, 16);
        if (end == s || strncmp(end, "\r\n", 2) != 0)
            return -1;
        s = end + 2;
        if (n == 0)
            return strcmp(s, "\r\n") == 0 ? 0 : -1;
        if (buf_append(out, s, n) < 0 || strncmp(s + n, "\r\n", 2) != 0)
            return -1;
        s += n + 2;
    }
}

TEST(relay_chunked_upstream_any_split)
{
    static const char resp[] = "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n"
                               "Content-Type: text/plain\r\n\r\n"
                               "4\r\nabcd\r\n10\r\n0123456789abcdef\r\n1\r\nZ\r\n0\r\n\r\n";
    for (size_t step = 1; step < sizeof(resp); step++) {
        router_relay r = {0};
        router_relay_start(&r, false, false, true);
        _cleanup_buf_ buf out = BUF_INIT;
        CHECK(feed_pieces(&r, resp, step, &out) >= 0);
        CHECK(r.done);
        CHECK(router_relay_reusable(&r));
        static const char head[] = "HTTP/1.1 201 Created\r\nContent-Type: text/plain\r\n"
                                   "Transfer-Encoding: chunked\r\n\r\n";
        CHECK(strncmp(out.data, head, strlen(head)) == 0);
        _cleanup_buf_ buf body = BUF_INIT;
        CHECK_INT_EQ(dechunk(out.data + strlen(head), &body), 0);
        CHECK_STR_EQ(body.data, "abcd0123456789abcdefZ");
        router_relay_done(&r);
    }
}

typedef struct seen {
    int heads, bodies, completes;
    buf body;
} seen;

static int seen_head(void *payload)
{
    ((seen *)payload)->heads++;
    return 0;
}
static int seen_body(void *payload, const char *at, size_t n)
{
    return buf_append(&((seen *)payload)->body, at, n) < 0;
}
static int seen_complete(void *payload)
{
    ((seen *)payload)->completes++;
    return 0;
}
static const router_message_hooks seen_hooks = {
    .headers_complete = seen_head, .body = seen_body, .message_complete = seen_complete};

TEST(message_reader_requests)
{
    seen s = {0};
    router_message m = {0};
    router_message_init(&m, HTTP_REQUEST, &seen_hooks, &s);
    /* two pipelined requests: the reader stops after the first */
    static const char two[] = "PUT /a?x=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n"
                              "Content-Length: 3\r\n\r\nxyzGET /b HTTP/1.1\r\nHost: h\r\n\r\n";
    size_t k = router_message_execute(&m, two, strlen(two));
    CHECK_INT_EQ(HTTP_PARSER_ERRNO(&m.p), HPE_PAUSED);
    CHECK_STR_EQ(router_message_url(&m), "/a?x=1");
    CHECK_INT_EQ(m.h.n, 3); /* identical Content-Lengths pass, as in Go */
    CHECK_STR_EQ(s.body.data, "xyz");
    CHECK_INT_EQ(s.completes, 1);
    _cleanup_buf_ buf out = BUF_INIT;
    CHECK_INT_EQ(router_request_refuse_framing(&m, &out), 0);
    CHECK_INT_EQ(out.len, 0);
    http_parser_pause(&m.p, 0);
    router_message_reset(&m);
    size_t k2 = router_message_execute(&m, two + k, strlen(two) - k);
    CHECK_INT_EQ(k + k2, strlen(two));
    CHECK_STR_EQ(router_message_url(&m), "/b");
    CHECK_INT_EQ(s.completes, 2);
    /* two Hosts: refused with Go's 400 text */
    http_parser_pause(&m.p, 0);
    router_message_reset(&m);
    static const char bad[] = "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n";
    router_message_execute(&m, bad, strlen(bad));
    CHECK_INT_EQ(router_request_refuse_framing(&m, &out), 400); /* the status it answered */
    CHECK(strncmp(out.data, "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain", 50) == 0);
    CHECK(strstr(out.data, "Connection: close\r\n") != NULL);
    router_message_done(&m);
    buf_done(&s.body);
}

TEST(relay_upgrade_101_and_refused_upgrade)
{
    router_relay r = {0};
    _cleanup_buf_ buf out = BUF_INIT;
    /* a 101 ends the relay; the bytes after it (the new protocol's) are not consumed */
    static const char sw[] = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
                             "Upgrade: echo\r\nX-Y: z\r\n\r\nTUNNEL";
    for (size_t step = 1; step <= sizeof(sw); step += 5) {
        router_relay_start(&r, false, false, false);
        buf_reset(&out);
        size_t off = 0;
        while (!r.done && off < strlen(sw)) {
            size_t n = strlen(sw) - off < step ? strlen(sw) - off : step;
            ssize_t k = router_relay_feed(&r, sw + off, n, &out);
            CHECK(k >= 0);
            off += (size_t)k;
            if ((size_t)k < n)
                break;
        }
        CHECK(r.done);
        CHECK(r.upgraded);
        CHECK_STR_EQ(sw + off, "TUNNEL");
        CHECK_STR_EQ(out.data, "HTTP/1.1 101 Switching Protocols\r\nX-Y: z\r\n"
                               "Connection: Upgrade\r\nUpgrade: echo\r\n\r\n");
        router_relay_done(&r);
    }
    /* an upstream that does not switch: an ordinary response, closed after */
    static const char no[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 2\r\n\r\nno";
    router_relay_start(&r, false, false, false);
    buf_reset(&out);
    CHECK_INT_EQ(router_relay_feed(&r, no, strlen(no), &out), (ssize_t)strlen(no));
    CHECK(r.done);
    CHECK(!r.upgraded);
    CHECK_STR_EQ(out.data,
                 "HTTP/1.1 400 Bad Request\r\nContent-Length: 2\r\nConnection: close\r\n\r\nno");
    router_relay_done(&r);
}

TEST(request_upgrade_head)
{
    router_headers h = {0};
    static const char *kv[][2] = {{"Connection", "Upgrade"}, {"Upgrade", "websocket"},
                                  {"Sec-WebSocket-Key", "k"}};
    for (size_t i = 0; i < 3; i++) {
        CHECK_INT_EQ(router_headers_field(&h, kv[i][0], strlen(kv[i][0])), 0);
        CHECK_INT_EQ(router_headers_value(&h, kv[i][1], strlen(kv[i][1])), 0);
    }
    CHECK_INT_EQ(router_headers_end(&h), 0);
    _cleanup_buf_ buf out = BUF_INIT;
    CHECK_INT_EQ(router_request_head(&out, "GET", "/ws", "sandbox", &h, false), 0);
    CHECK_INT_EQ(router_request_upgrade(&out, router_headers_get(&h, "upgrade")), 0);
    CHECK_STR_EQ(out.data, "GET /ws HTTP/1.1\r\nHost: sandbox\r\nSec-WebSocket-Key: k\r\n"
                           "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
    router_headers_done(&h);
}

TEST(sockaddr_without_and_with_lookup)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    CHECK_INT_EQ(router_sockaddr("unix:/run/x.sock", false, &ss, &sl), 0);
    CHECK_INT_EQ(ss.ss_family, AF_UNIX);
    CHECK_STR_EQ(((struct sockaddr_un *)&ss)->sun_path, "/run/x.sock");
    CHECK_INT_EQ(router_sockaddr("10.1.2.3:8888", false, &ss, &sl), 0);
    CHECK_INT_EQ(ss.ss_family, AF_INET);
    CHECK_INT_EQ(ntohs(((struct sockaddr_in *)&ss)->sin_port), 8888);
    CHECK_INT_EQ(sl, sizeof(struct sockaddr_in));
    CHECK_INT_EQ(router_sockaddr("[::1]:9090", false, &ss, &sl), 0);
    CHECK_INT_EQ(ss.ss_family, AF_INET6);
    CHECK_INT_EQ(ntohs(((struct sockaddr_in6 *)&ss)->sin6_port), 9090);
    /* a name is never looked up without lookup (it would block the event loop) */
    CHECK_INT_EQ(router_sockaddr("box.ns.svc.cluster.local:8080", false, &ss, &sl), -EADDRNOTAVAIL);
    CHECK_INT_EQ(router_sockaddr("no-port", false, &ss, &sl), -EINVAL);
    CHECK_INT_EQ(router_sockaddr("[::1:80", false, &ss, &sl), -EINVAL);
    /* a lookup: only where this machine resolves localhost itself (a fresh root may have no
     * /etc/hosts); no name that would need a DNS server is asked for */
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    if (getaddrinfo("localhost", "80", &hints, &ai) == 0) {
        freeaddrinfo(ai);
        CHECK_INT_EQ(router_sockaddr("localhost:80", true, &ss, &sl), 0);
        CHECK(ss.ss_family == AF_INET || ss.ss_family == AF_INET6);
    } else {
        CHECK_INT_EQ(router_sockaddr("localhost:80", true, &ss, &sl), -EHOSTUNREACH);
    }
}

/* The router's counters (shared/router-stats.h): a code and a latency bucket per answer (the
 * buckets are per-bucket counts, cumulated by the renderer), codes outside 100..599 not
 * counted, an unknown start not timed. */
TEST(stats_codes_and_latency_buckets)
{
    router_stats a, b;
    router_stats_snapshot(&a);
    int64_t now = (int64_t)now_usec(CLOCK_MONOTONIC);
    router_stats_answered(404, now - 1500);     /* 1.5 ms ago */
    router_stats_answered(200, now - 20000000); /* 20 s ago */
    router_stats_answered(200, 0);              /* no start known: counted, no latency */
    router_stats_answered(700, now);            /* not a status: a latency only */
    router_stats_snapshot(&b);
    CHECK_INT_EQ(b.codes[404] - a.codes[404], 1);
    CHECK_INT_EQ(b.codes[200] - a.codes[200], 2);
    CHECK_INT_EQ(b.count - a.count, 3);
    CHECK(b.sum_us - a.sum_us >= 20001500);
    /* 1.5 ms: the 0.0025 bucket; 20 s: the 60 one; ~0: the first */
    size_t i25 = 0, i60 = 0;
    for (size_t i = 0; i < ROUTER_STATS_NBOUNDS; i++) {
        if (router_stats_bounds[i] == 0.0025)
            i25 = i;
        if (router_stats_bounds[i] == 60)
            i60 = i;
    }
    CHECK_INT_EQ(b.buckets[i25] - a.buckets[i25], 1);
    CHECK_INT_EQ(b.buckets[i60] - a.buckets[i60], 1);
    CHECK_INT_EQ(b.buckets[0] - a.buckets[0], 1);
    CHECK_INT_EQ(b.buckets[ROUTER_STATS_NBOUNDS] - a.buckets[ROUTER_STATS_NBOUNDS], 0);
}
