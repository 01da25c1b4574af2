/* The message reader (router-core.h): the one set of http_parser callbacks, collecting a
 * request or response head for the epoll loop, the blocking path, the response relay and the
 * HTTP/2 path's HTTP/1.1 upstream; what follows the head is the caller's (hooks). */
#include <errno.h>
#include <string.h>

#include "router/router-core.h"

/* A 1xx that is not the 101 answering an upgrade (http_parser sets `upgrade` for that one
 * before on_headers_complete). */
static bool interim(const http_parser *p)
{
    return p->type == HTTP_RESPONSE && p->status_code < 200 && !p->upgrade;
}

static int on_begin(http_parser *p)
{
    router_message *m = p->data;
    return m->hooks->message_begin ? m->hooks->message_begin(m->payload) : 0;
}

static int on_first(http_parser *p, const char *at, size_t n)
{
    router_message *m = p->data;
    if (m->first.len + n > ROUTER_HEAD_MAX)
        return 1;
    return buf_append(&m->first, at, n) < 0;
}

static int on_field(http_parser *p, const char *at, size_t n)
{
    router_message *m = p->data;
    bool new_header = m->h.st != 1;
    if (router_headers_field(&m->h, at, n) < 0)
        return 1;
    if (p->type == HTTP_REQUEST) {
        size_t len;
        const char *name = router_headers_current(&m->h, &len);
        router_cl_dup_field(p, &m->cl_dup, name, len, new_header);
    }
    return 0;
}

static int on_value(http_parser *p, const char *at, size_t n)
{
    router_message *m = p->data;
    return router_headers_value(&m->h, at, n) < 0;
}

static int on_headers_complete(http_parser *p)
{
    router_message *m = p->data;
    if (interim(p))
        return 0; /* 100 Continue and the like: not relayed (Expect is answered by the router) */
    int r = router_headers_end(&m->h);
    if (r < 0)
        return r;
    return m->hooks->headers_complete ? m->hooks->headers_complete(m->payload) : 0;
}

static int on_body(http_parser *p, const char *at, size_t n)
{
    router_message *m = p->data;
    return m->hooks->body ? m->hooks->body(m->payload, at, n) : 0;
}

static int on_complete(http_parser *p)
{
    router_message *m = p->data;
    if (interim(p)) {
        router_message_reset(m); /* the final response follows */
        return 0;
    }
    int r = m->hooks->message_complete ? m->hooks->message_complete(m->payload) : 0;
    if (r == 0)
        http_parser_pause(p, 1); /* one message at a time: the caller unpauses for the next */
    return r;
}

static const http_parser_settings message_settings = {
    .on_message_begin = on_begin,
    .on_url = on_first,
    .on_status = on_first,
    .on_header_field = on_field,
    .on_header_value = on_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_complete,
};

void router_message_init(router_message *m, enum http_parser_type type,
                         const router_message_hooks *hooks, void *payload)
{
    http_parser_init(&m->p, type);
    m->p.data = m;
    m->hooks = hooks;
    m->payload = payload;
    router_message_reset(m);
}

size_t router_message_execute(router_message *m, const char *data, size_t len)
{
    return http_parser_execute(&m->p, &message_settings, data, len);
}

void router_message_reset(router_message *m)
{
    buf_reset(&m->first);
    router_headers_reset(&m->h);
    m->cl_dup = (router_cl_dup){0};
}

void router_message_done(router_message *m)
{
    buf_done(&m->first);
    router_headers_done(&m->h);
}

int router_request_refuse_framing(const router_message *rq, buf *out)
{
    _cleanup_free_ http_field *f = NULL;
    if (router_headers_fields(&rq->h, &f) < 0)
        return -ENOMEM;
    _cleanup_(api_error_clear) api_error e = API_ERROR_INIT;
    if (router_framing_check(&rq->p, f, rq->h.n, &e) == 0)
        return 0;
    if (!e.message)
        return -ENOMEM;
    int status = (int)status_http(e.code);
    int r = router_reply(out, status, "text/plain; charset=utf-8", NULL, e.message,
                         strlen(e.message), false, rq->p.method == HTTP_HEAD);
    return r < 0 ? r : status;
}

int router_request_refuse_malformed(const router_message *rq, buf *out)
{
    _cleanup_(api_error_clear) api_error err = API_ERROR_INIT;
    router_error_malformed(&err);
    return router_reply_error(out, &err, false, rq->p.method == HTTP_HEAD);
}
