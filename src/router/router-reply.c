/* What the router writes itself on HTTP/1.1: its own answers, the upstream request head and
 * chunked framing (router-core.h). Reason phrases come from shared/status.c. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "basic/macro.h"
#include "router/router-core.h"
#include "router/router-preview.h"
#include "shared/status.h"

int router_reply(buf *out, int status, const char *ctype, const char *extra, const char *body,
                 size_t len, bool keep_alive, bool head_only)
{
    size_t before = out->len;
    int r = buf_appendf(out, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s%s%s\r\n",
                        status, status_http_reason(status), ctype, len, extra ? extra : "",
                        extra ? "\r\n" : "", keep_alive ? "" : "Connection: close\r\n");
    if (r == 0 && !head_only && len > 0)
        r = buf_append(out, body, len);
    if (r < 0)
        out->len = before; /* nothing half-written */
    return r;
}

int router_reply_answer(buf *out, const router_answer *a, bool keep_alive, bool head_only)
{
    return router_reply(out, a->status, a->ctype, a->headers[0] ? a->headers : NULL, a->body,
                        strlen(a->body), keep_alive, head_only);
}

const char *router_upstream_host(const char *addr)
{
    return strncmp(addr, "unix:", 5) == 0 ? "sandbox" : router_addr_hostport(addr);
}

/* One "name: value\r\n" line; room was reserved by the caller. */
static void put_line(buf *b, const char *name, size_t nl, const char *v, size_t vl)
{
    char *p = b->data + b->len;
    memcpy(p, name, nl);
    memcpy(p + nl, ": ", 2);
    memcpy(p + nl + 2, v, vl);
    memcpy(p + nl + 2 + vl, "\r\n", 2);
    b->len += nl + vl + 4;
    b->data[b->len] = '\0';
}

int router_request_head(buf *out, const char *method, const char *url, const char *host,
                        const router_headers *h, bool chunked)
{
    size_t before = out->len;
    if (buf_reserve(out, 64 + strlen(method) + strlen(url) + strlen(host) + h->a.len + 4 * h->n) <
        0)
        return -ENOMEM;
    buf_append_str(out, method);
    buf_append_byte(out, ' ');
    buf_append_str(out, url);
    buf_append_str(out, " HTTP/1.1\r\nHost: ");
    buf_append_str(out, host);
    buf_append(out, "\r\n", 2);
    const char *cl = NULL;
    for (size_t i = 0; i < h->n; i++) {
        const char *name = router_headers_name(h, i);
        size_t nl = strlen(name);
        if (router_header_dropped(name, nl)) {
            if (!cl && nl == 14 && strcasecmp(name, "content-length") == 0)
                cl = name + nl + 1;
            continue;
        }
        const char *v = name + nl + 1;
        if (nl == 6 && strcasecmp(name, "cookie") == 0) {
            /* the router's preview cookie is the router's, not the sandbox's */
            _cleanup_free_ char *kept = NULL;
            if (router_preview_cookie_filter(v, &kept) < 0) {
                out->len = before;
                return -ENOMEM;
            }
            if (kept)
                put_line(out, name, nl, kept, strlen(kept));
            continue;
        }
        put_line(out, name, nl, v, strlen(v));
    }
    int r = 0;
    if (chunked)
        r = buf_append_str(out, "Transfer-Encoding: chunked\r\n");
    else if (cl)
        r = buf_appendf(out, "Content-Length: %s\r\n", cl);
    if (r == 0)
        r = buf_append(out, "\r\n", 2);
    if (r < 0)
        out->len = before;
    return r;
}

int router_request_upgrade(buf *out, const char *proto)
{
    if (out->len < 2 || memcmp(out->data + out->len - 2, "\r\n", 2) != 0)
        return -EINVAL;
    out->len -= 2;
    return buf_appendf(out, "Connection: Upgrade\r\nUpgrade: %s\r\n\r\n", proto);
}

int router_chunk(buf *out, const char *data, size_t n)
{
    char pre[32];
    int k = snprintf(pre, sizeof(pre), "%zx\r\n", n);
    if (buf_reserve(out, (size_t)k + n + 2) < 0)
        return -ENOMEM;
    buf_append(out, pre, (size_t)k); /* cannot fail after the reserve */
    buf_append(out, data, n);
    buf_append(out, "\r\n", 2);
    return 0;
}
