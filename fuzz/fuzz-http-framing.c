/* Request framing as the router sees it: http_parser with the repeated-Content-Length handling
 * (router_cl_dup_field) and router_framing_check at the end of the head. Input: raw request
 * bytes. Invariants: a refusal is 400 or 501 with a body; an accepted head without chunked
 * framing whose Content-Length headers exist has the parser's Content-Length flag set, and every
 * Content-Length value equals the length the parser will use. */
#include <http_parser.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "router/router-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAXH 64

typedef struct st {
    char name[MAXH][128], value[MAXH][128];
    size_t nl[MAXH], vl[MAXH];
    size_t n;
    bool in_value, overflow;
    router_cl_dup cl;
} st;

static int on_field(http_parser *p, const char *at, size_t len)
{
    st *s = p->data;
    bool new_header = s->n == 0 || s->in_value;
    if (new_header) {
        if (s->n == MAXH)
            return s->overflow = true, 1;
        s->n++;
        s->nl[s->n - 1] = s->vl[s->n - 1] = 0;
    }
    s->in_value = false;
    size_t i = s->n - 1;
    if (s->nl[i] + len > sizeof(s->name[i]))
        return s->overflow = true, 1;
    memcpy(s->name[i] + s->nl[i], at, len);
    s->nl[i] += len;
    router_cl_dup_field(p, &s->cl, s->name[i], s->nl[i], new_header);
    return 0;
}

static int on_value(http_parser *p, const char *at, size_t len)
{
    st *s = p->data;
    size_t i = s->n - 1;
    s->in_value = true;
    if (s->vl[i] + len > sizeof(s->value[i]))
        return s->overflow = true, 1;
    memcpy(s->value[i] + s->vl[i], at, len);
    s->vl[i] += len;
    return 0;
}

static int on_headers_complete(http_parser *p)
{
    st *s = p->data;
    http_field f[MAXH];
    for (size_t i = 0; i < s->n; i++)
        f[i] = (http_field){s->name[i], s->nl[i], s->value[i], s->vl[i]};
    api_error e = API_ERROR_INIT;
    if (router_framing_check(p, f, s->n, &e) < 0) {
        unsigned status = status_http(e.code);
        if ((status != 400 && status != 501) || !e.message)
            abort();
        api_error_clear(&e);
        return -1;
    }
    if (p->flags & F_CHUNKED)
        return -1;
    for (size_t i = 0; i < s->n; i++) {
        if (!http_field_is(f[i].name, f[i].name_len, "content-length"))
            continue;
        if (!(p->flags & F_CONTENTLENGTH))
            abort();
        uint64_t v = 0;
        for (size_t k = 0; k < f[i].value_len; k++)
            if (f[i].value[k] >= '0' && f[i].value[k] <= '9')
                v = v * 10 + (uint64_t)(f[i].value[k] - '0');
        if (f[i].value_len < 19 && v != p->content_length)
            abort();
    }
    return -1; /* the head is all we look at */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const http_parser_settings settings = {
        .on_header_field = on_field,
        .on_header_value = on_value,
        .on_headers_complete = on_headers_complete,
    };
    st *s = calloc(1, sizeof(*s));
    if (!s)
        return 0;
    http_parser p;
    http_parser_init(&p, HTTP_REQUEST);
    p.data = s;
    http_parser_execute(&p, &settings, (const char *)data, size);
    free(s);
    return 0;
}
