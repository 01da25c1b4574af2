/* The response relay (router-core.h): the message reader over the upstream's bytes, with hooks
 * that emit the client's bytes into a buffer. No I/O: the epoll loop and the blocking path both
 * drive it. */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "router/router-core.h"

/* Records err (negative errno) for the relay's caller and stops the parser with it. */
static int fail(router_relay *r, int err)
{
    r->err = err;
    return err;
}

/* Copies without a bounds check: the caller reserved room. */
static void put(buf *o, const void *s, size_t n)
{
    memcpy(o->data + o->len, s, n);
    o->len += n;
}

static int rs_headers_complete(void *payload)
{
    router_relay *r = payload;
    const http_parser *p = &r->m.p;
    const router_headers *h = &r->m.h;
    const buf *reason = &r->m.first;
    bool has_len = (p->flags & F_CONTENTLENGTH) && !(p->flags & F_CHUNKED);
    const char *proto = p->upgrade ? router_headers_get(h, "upgrade") : NULL;
    r->upgraded = p->status_code == 101 && proto;
    r->no_body = r->head_request || r->upgraded || p->status_code == 204 || p->status_code == 304;
    r->chunked_out = !r->no_body && !has_len;
    if (r->chunked_out && r->client_http10)
        r->keep_alive = false, r->chunked_out = false; /* delimited by closing */
    buf *o = r->out;
    if (buf_reserve(o, 128 + reason->len + h->a.len + 4 * h->n + (proto ? strlen(proto) : 0)) < 0)
        return fail(r, -ENOMEM);
    unsigned sc = p->status_code % 1000;
    char line[13] = "HTTP/1.1 000 ";
    line[9] = (char)('0' + sc / 100);
    line[10] = (char)('0' + sc / 10 % 10);
    line[11] = (char)('0' + sc % 10);
    put(o, line, sizeof(line));
    put(o, reason->data ? reason->data : "", reason->len);
    put(o, "\r\n", 2);
    for (size_t i = 0; i < h->n; i++) {
        const char *name = router_headers_name(h, i);
        size_t nl = strlen(name);
        if (router_response_header_dropped(name, nl))
            continue;
        if (!has_len && !r->no_body && strcasecmp(name, "content-length") == 0)
            continue;
        const char *v = name + nl + 1;
        size_t vl = strlen(v);
        put(o, name, nl);
        put(o, ": ", 2);
        put(o, v, vl);
        put(o, "\r\n", 2);
    }
#define PUT_LIT(lit) put(o, lit, sizeof(lit) - 1)
    if (r->chunked_out)
        PUT_LIT("Transfer-Encoding: chunked\r\n");
    if (r->upgraded) {
        PUT_LIT("Connection: Upgrade\r\nUpgrade: ");
        put(o, proto, strlen(proto));
        PUT_LIT("\r\n");
    } else if (!r->keep_alive)
        PUT_LIT("Connection: close\r\n");
    PUT_LIT("\r\n");
#undef PUT_LIT
    o->data[o->len] = '\0';
    r->head_done = true;
    return r->head_request ? 1 : 0; /* 1: http_parser expects no body */
}

static int rs_body(void *payload, const char *at, size_t n)
{
    router_relay *r = payload;
    if (r->no_body)
        return 0;
    int e = r->chunked_out ? router_chunk(r->out, at, n) : buf_append(r->out, at, n);
    return e < 0 ? fail(r, e) : 0;
}

static int rs_complete(void *payload)
{
    router_relay *r = payload;
    if (r->chunked_out && buf_append(r->out, "0\r\n\r\n", 5) < 0)
        return fail(r, -ENOMEM);
    r->done = true;
    return 0;
}

static const router_message_hooks relay_hooks = {
    .headers_complete = rs_headers_complete,
    .body = rs_body,
    .message_complete = rs_complete,
};

void router_relay_start(router_relay *r, bool head_request, bool client_http10, bool keep_alive)
{
    router_message_init(&r->m, HTTP_RESPONSE, &relay_hooks, r);
    r->out = NULL;
    r->head_request = head_request;
    r->client_http10 = client_http10;
    r->keep_alive = keep_alive;
    r->head_done = r->done = r->chunked_out = r->no_body = r->upgraded = false;
    r->err = 0;
}

ssize_t router_relay_feed(router_relay *r, const char *data, size_t len, buf *out)
{
    if (r->done)
        return 0;
    r->out = out;
    size_t k = router_message_execute(&r->m, data, len);
    r->out = NULL;
    if (r->done)
        return (ssize_t)k;
    if (r->err < 0)
        return r->err;
    if (len == 0)
        return -ECONNRESET; /* EOF before the response ended (a stale kept-alive upstream) */
    if (HTTP_PARSER_ERRNO(&r->m.p) != HPE_OK || k != len)
        return -EPROTO;
    return (ssize_t)k;
}

bool router_relay_reusable(const router_relay *r)
{
    return r->done && http_should_keep_alive(&r->m.p);
}

void router_relay_done(router_relay *r)
{
    router_message_done(&r->m);
}
