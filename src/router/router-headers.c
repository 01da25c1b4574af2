/* The router's one header list (router-core.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "router/router-core.h"

void router_headers_reset(router_headers *h)
{
    buf_reset(&h->a);
    buf_reset(&h->offs);
    h->n = 0;
    h->st = 0;
    h->bytes = 0;
}

void router_headers_done(router_headers *h)
{
    buf_done(&h->a);
    buf_done(&h->offs);
    *h = (router_headers){0};
}

int router_headers_field(router_headers *h, const char *at, size_t n)
{
    h->bytes += n;
    if (h->bytes > ROUTER_HEAD_MAX)
        return -E2BIG;
    if (h->st == 2 && buf_append_byte(&h->a, '\0') < 0)
        return -ENOMEM;
    if (h->st != 1) {
        size_t off = h->a.len;
        if (buf_append(&h->offs, &off, sizeof(off)) < 0)
            return -ENOMEM;
        h->n++;
    }
    h->st = 1;
    return buf_append(&h->a, at, n);
}

int router_headers_value(router_headers *h, const char *at, size_t n)
{
    h->bytes += n;
    if (h->bytes > ROUTER_HEAD_MAX || h->n == 0)
        return -E2BIG;
    if (h->st == 1 && buf_append_byte(&h->a, '\0') < 0)
        return -ENOMEM;
    h->st = 2;
    return buf_append(&h->a, at, n);
}

int router_headers_end(router_headers *h)
{
    /* a name without a value gets an empty one */
    if (h->st == 1 && buf_append_byte(&h->a, '\0') < 0)
        return -ENOMEM;
    if (h->st != 0 && buf_append_byte(&h->a, '\0') < 0)
        return -ENOMEM;
    h->st = 0;
    return 0;
}

const char *router_headers_current(const router_headers *h, size_t *ret_len)
{
    const char *name = router_headers_name(h, h->n - 1);
    *ret_len = (size_t)(h->a.data + h->a.len - name);
    return name;
}

const char *router_headers_get(const router_headers *h, const char *name)
{
    for (size_t i = 0; i < h->n; i++) {
        const char *nm = router_headers_name(h, i);
        if (strcasecmp(nm, name) == 0)
            return nm + strlen(nm) + 1;
    }
    return NULL;
}

int router_headers_fields(const router_headers *h, http_field **ret)
{
    http_field *f = calloc(h->n ? h->n : 1, sizeof(*f));
    if (!f)
        return -ENOMEM;
    for (size_t i = 0; i < h->n; i++) {
        const char *name = router_headers_name(h, i);
        size_t nl = strlen(name);
        f[i] = (http_field){name, nl, name + nl + 1, strlen(name + nl + 1)};
    }
    *ret = f;
    return 0;
}
