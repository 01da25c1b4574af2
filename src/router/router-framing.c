/* Request framing in the router: the request-smuggling shapes Go's net/http refuses
 * (shared/http-framing.h) checked on http_parser's view of a request. */
#include <http_parser.h>
#include <stdlib.h>

#include "router/router-internal.h"

void router_cl_dup_field(http_parser *p, router_cl_dup *st, const char *name, size_t len,
                         bool new_header)
{
    if (new_header)
        st->cleared = false; /* the previous Content-Length value set the flag again */
    if (http_field_is(name, len, "content-length")) {
        if ((p->flags & F_CONTENTLENGTH) && !st->cleared) {
            st->saved = p->content_length;
            st->cleared = true;
            p->flags &= (unsigned)~F_CONTENTLENGTH;
        }
    } else if (st->cleared) {
        /* the name went on past "content-length": not a Content-Length after all */
        p->flags |= F_CONTENTLENGTH;
        p->content_length = st->saved;
        st->cleared = false;
    }
}

int router_framing_check(const http_parser *p, const http_field *fields, size_t n, api_error *err)
{
    bool http11 = p->http_major > 1 || (p->http_major == 1 && p->http_minor >= 1);
    return http_framing_check(fields, n, http11, err);
}
