/* Picks the transport of one exchange (libasb-http.h) and escapes URL parts without libcurl. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libasb/libasb-http.h"
#include "libasb/libasb-internal.h"

int asbi_http_perform(asb_client *c, const asbi_http_exchange *x, long *ret_status)
{
    if (asbi_http_plain_applies(x->url))
        return asbi_http_plain(x, c->server, ret_status);
    return asbi_http_curl(c, x, ret_status);
}

char *asbi_url_escape(const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(s);
    char *out = malloc(n * 3 + 1), *o = out;
    if (!out) {
        asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
        return NULL;
    }
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        bool unreserved = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
                          (*p >= '0' && *p <= '9') || strchr("-._~", *p);
        if (unreserved) {
            *o++ = (char)*p;
        } else {
            *o++ = '%';
            *o++ = hex[*p >> 4];
            *o++ = hex[*p & 15];
        }
    }
    *o = '\0';
    return out;
}

int asbi_url_add_query(char **url, const char *key, const char *value)
{
    char *ev = asbi_url_escape(value), *u = NULL;
    if (!ev || asprintf(&u, "%s%s%s=%s", *url, strchr(*url, '?') ? "&" : "?", key, ev) < 0) {
        free(ev);
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    }
    free(ev);
    free(*url);
    *url = u;
    return ASB_OK;
}
