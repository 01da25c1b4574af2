/* Go ServeMux / net/url behaviour the REST router relies on: path cleaning, percent-decoding and
 * query lookup. Pure functions (unit tested and fuzzed). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/confine.h"
#include "basic/hex-util.h"
#include "basic/macro.h"
#include "sandboxd/sandboxd-rest-internal.h"

char *rest_mux_clean_path(const char *p)
{
    if (p[0] == '\0')
        return strdup("/");
    _cleanup_free_ char *rooted = NULL;
    if (p[0] != '/') {
        if (asprintf(&rooted, "/%s", p) < 0)
            return NULL;
        p = rooted;
    }
    char *np = path_clean(p);
    if (!np)
        return NULL;
    size_t pl = strlen(p), nl = strlen(np);
    if (p[pl - 1] == '/' && strcmp(np, "/") != 0) {
        if (pl == nl + 1 && strncmp(p, np, nl) == 0) {
            free(np);
            return strdup(p);
        }
        char *t = realloc(np, nl + 2);
        if (!t) {
            free(np);
            return NULL;
        }
        t[nl] = '/';
        t[nl + 1] = '\0';
        np = t;
    }
    return np;
}

bool rest_mux_valid_escapes(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (s[i] == '%') {
            if (i + 2 >= len || unhexchar(s[i + 1]) < 0 || unhexchar(s[i + 2]) < 0)
                return false;
            i += 2;
        }
    return true;
}

int rest_unescape(const char *s, size_t len, bool plus, char **ret, size_t *ret_len)
{
    char *out = malloc(len + 1);
    if (!out)
        return -ENOMEM;
    size_t w = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '%') {
            if (i + 2 < len) {
                int hi = unhexchar(s[i + 1]);
                int lo = unhexchar(s[i + 2]);
                if (hi >= 0 && lo >= 0) {
                    out[w++] = (char)(hi * 16 + lo);
                    i += 2;
                    continue;
                }
            }
            free(out);
            return -EINVAL;
        }
        out[w++] = plus && s[i] == '+' ? ' ' : s[i];
    }
    out[w] = '\0';
    *ret = out;
    if (ret_len)
        *ret_len = w;
    return 0;
}

int rest_query_get(const char *query, const char *key, char **ret)
{
    *ret = NULL;
    if (!query)
        return 0;
    const char *p = query;
    while (*p) {
        const char *amp = strchr(p, '&');
        size_t n = amp ? (size_t)(amp - p) : strlen(p);
        /* Go rejects pairs containing ';' and pairs with invalid escapes: skip them. */
        if (n > 0 && !memchr(p, ';', n)) {
            const char *eq = memchr(p, '=', n);
            size_t kl = eq ? (size_t)(eq - p) : n;
            _cleanup_free_ char *k = NULL;
            size_t klen = 0;
            int r = rest_unescape(p, kl, true, &k, &klen);
            if (r == -ENOMEM)
                return r;
            if (r == 0 && klen == strlen(key) && memcmp(k, key, klen) == 0) {
                char *v = NULL;
                r = eq ? rest_unescape(eq + 1, n - kl - 1, true, &v, NULL)
                       : ((v = strdup("")) ? 0 : -ENOMEM);
                if (r == -ENOMEM)
                    return r;
                if (r == 0) {
                    *ret = v;
                    return 0;
                }
            }
        }
        if (!amp)
            break;
        p = amp + 1;
    }
    return 0;
}
