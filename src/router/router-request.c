/* The request reader (router-core.h): http_parser callbacks that collect a request head, shared
 * by the epoll loop and the blocking path; what follows the head is the caller's (hooks). */
#include <errno.h>
#include <string.h>

#include "router/router-core.h"

static int rq_begin(http_parser *p)
{
    router_request *rq = p->data;
    return rq->hooks->message_begin ? rq->hooks->message_begin(rq->payload) : 0;
}

static int rq_url(http_parser *p, const char *at, size_t n)
{
    router_request *rq = p->data;
    if (rq->url.len + n > ROUTER_HEAD_MAX)
        return 1;
    return buf_append(&rq->url, at, n) < 0;
}

static int rq_field(http_parser *p, const char *at, size_t n)
{
    router_request *rq = p->data;
    bool new_header = rq->h.st != 1;
    if (router_headers_field(&rq->h, at, n) < 0)
        return 1;
    size_t len;
    const char *name = router_headers_current(&rq->h, &len);
    router_cl_dup_field(p, &rq->cl_dup, name, len, new_header);
    return 0;
}

static int rq_value(http_parser *p, const char *at, size_t n)
{
    router_request *rq = p->data;
    return router_headers_value(&rq->h, at, n) < 0;
}

static int rq_headers_complete(http_parser *p)
{
    router_request *rq = p->data;
    if (router_headers_end(&rq->h) < 0)
        return -1;
    return rq->hooks->headers_complete ? rq->hooks->headers_complete(rq->payload) : 0;
}

static int rq_body(http_parser *p, const char *at, size_t n)
{
    router_request *rq = p->data;
    return rq->hooks->body ? rq->hooks->body(rq->payload, at, n) : 0;
}

static int rq_complete(http_parser *p)
{
    router_request *rq = p->data;
    return rq->hooks->message_complete ? rq->hooks->message_complete(rq->payload) : 0;
}

static const http_parser_settings request_settings = {
    .on_message_begin = rq_begin,
    .on_url = rq_url,
    .on_header_field = rq_field,
    .on_header_value = rq_value,
    .on_headers_complete = rq_headers_complete,
    .on_body = rq_body,
    .on_message_complete = rq_complete,
};

void router_request_init(router_request *rq, const router_request_hooks *hooks, void *payload)
{
    http_parser_init(&rq->p, HTTP_REQUEST);
    rq->p.data = rq;
    rq->hooks = hooks;
    rq->payload = payload;
    router_request_reset(rq);
}

size_t router_request_execute(router_request *rq, const char *data, size_t len)
{
    return http_parser_execute(&rq->p, &request_settings, data, len);
}

void router_request_reset(router_request *rq)
{
    buf_reset(&rq->url);
    router_headers_reset(&rq->h);
    rq->cl_dup = (router_cl_dup){0};
}

void router_request_done(router_request *rq)
{
    buf_done(&rq->url);
    router_headers_done(&rq->h);
}

int router_request_refuse_framing(const router_request *rq, buf *out)
{
    _cleanup_free_ http_field *f = NULL;
    if (router_headers_fields(&rq->h, &f) < 0)
        return -ENOMEM;
    http_framing_error e;
    if (router_framing_check(&rq->p, f, rq->h.n, &e) == 0)
        return 0;
    int r = router_reply(out, e.status, "text/plain; charset=utf-8", NULL, e.body, strlen(e.body),
                         false, rq->p.method == HTTP_HEAD);
    return r < 0 ? r : -EINVAL;
}

int router_request_refuse_malformed(const router_request *rq, buf *out)
{
    router_error err;
    router_error_set(&err, 400, "Malformed HTTP request.");
    return router_reply_error(out, &err, false, rq->p.method == HTTP_HEAD);
}
