/* Preview hosts for browsers, which cannot send the bearer token: PORT-SANDBOX.NAMESPACE.DOMAIN
 * routes to PORT inside the sandbox, and a signed link admits the browser. The link carries
 * "asb-preview=EXP.SIG" in its query, SIG = HMAC-SHA256(router token, "asb-preview v1" NS ID
 * PORT EXP); the router answers it with a redirect to the same URL without the parameter that
 * sets the same value as a host-only HttpOnly cookie, which admits every later request of that
 * host (and only of that host, port and sandbox) until EXP. The token itself never appears in a
 * URL or a cookie, and the cookie is taken out of the Cookie header sent upstream. */
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "basic/buf.h"
#include "basic/macro.h"
#include "router/router-preview.h"

#define SIG_HEX 64

static int sign(const char *key, const char *ns, const char *id, unsigned port, long long exp,
                char out[SIG_HEX + 1])
{
    char msg[256];
    int n = snprintf(msg, sizeof(msg), "asb-preview v1\n%s\n%s\n%u\n%lld", ns, id, port, exp);
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned ml = 0;
    if (n < 0 || (size_t)n >= sizeof(msg) ||
        !HMAC(EVP_sha256(), key, (int)strlen(key), (const unsigned char *)msg, (size_t)n, mac,
              &ml) ||
        ml * 2 != SIG_HEX)
        return -EIO;
    for (unsigned i = 0; i < ml; i++)
        snprintf(out + 2 * i, 3, "%02x", mac[i]);
    return 0;
}

int router_preview_credential(const char *key, const char *ns, const char *id, unsigned port,
                              long long exp, char *out, size_t size)
{
    char sig[SIG_HEX + 1];
    int r = sign(key, ns, id, port, exp, sig);
    if (r < 0)
        return r;
    int n = snprintf(out, size, "%lld.%s", exp, sig);
    return n < 0 || (size_t)n >= size ? -ENOBUFS : 0;
}

bool router_preview_check(const char *key, const char *ns, const char *id, unsigned port,
                          const char *cred, size_t len, long long now)
{
    char tmp[96];
    if (!cred || len == 0 || len >= sizeof(tmp))
        return false;
    memcpy(tmp, cred, len);
    tmp[len] = 0;
    char *end;
    long long exp = strtoll(tmp, &end, 10);
    if (end == tmp || *end != '.' || exp <= now || strlen(end + 1) != SIG_HEX)
        return false;
    char want[SIG_HEX + 1];
    return sign(key, ns, id, port, exp, want) == 0 && CRYPTO_memcmp(want, end + 1, SIG_HEX) == 0;
}

/* The value of a "name=value" pair in a list separated by sep (a query: '&'; a Cookie header:
 * ';' with optional spaces). */
static const char *find_pair(const char *s, const char *end, char sep, const char *name,
                             size_t *ret_len)
{
    size_t nl = strlen(name);
    while (s < end) {
        while (s < end && *s == ' ')
            s++;
        const char *e = memchr(s, sep, (size_t)(end - s));
        if (!e)
            e = end;
        if ((size_t)(e - s) > nl && memcmp(s, name, nl) == 0 && s[nl] == '=') {
            *ret_len = (size_t)(e - s - nl - 1);
            return s + nl + 1;
        }
        s = e + 1;
    }
    return NULL;
}

const char *router_preview_cookie(const char *cookie, size_t *ret_len)
{
    return cookie ? find_pair(cookie, cookie + strlen(cookie), ';', ROUTER_PREVIEW_NAME, ret_len)
                  : NULL;
}

const char *router_query_param(const char *target, const char *name, size_t *ret_len)
{
    const char *q = strchr(target, '?');
    if (!q)
        return NULL;
    const char *end = strchr(q, '#');
    return find_pair(q + 1, end ? end : q + strlen(q), '&', name, ret_len);
}

const char *router_preview_link_param(const char *target, size_t *ret_len)
{
    return router_query_param(target, ROUTER_PREVIEW_NAME, ret_len);
}

int router_preview_strip_param(const char *target, char **ret)
{
    size_t vl;
    const char *v = router_preview_link_param(target, &vl);
    if (!v)
        return (*ret = strdup(target)) ? 0 : -ENOMEM;
    _cleanup_buf_ buf b = BUF_INIT;
    const char *pair = v - strlen(ROUTER_PREVIEW_NAME) - 1, *after = v + vl;
    int r = buf_append(&b, target, (size_t)(pair - target));
    if (r == 0 && *after == '&')
        after++; /* "?a&asb-preview=x&b" -> "?a&b" */
    else if (r == 0 && b.len > 0 && (b.data[b.len - 1] == '&' || b.data[b.len - 1] == '?'))
        b.len--; /* the last pair: drop its separator ("?x" -> "", "?a&x" -> "?a") */
    if (r == 0)
        r = buf_append_str(&b, after);
    if (r == 0 && b.len == 0)
        r = buf_append_byte(&b, '/');
    if (r < 0 || !(*ret = buf_steal(&b, NULL)))
        return -ENOMEM;
    return 0;
}

int router_preview_cookie_filter(const char *cookie, char **ret)
{
    _cleanup_buf_ buf b = BUF_INIT;
    const char *s = cookie, *end = cookie + strlen(cookie);
    size_t nl = strlen(ROUTER_PREVIEW_NAME);
    while (s < end) {
        while (s < end && *s == ' ')
            s++;
        const char *e = memchr(s, ';', (size_t)(end - s));
        if (!e)
            e = end;
        bool ours = (size_t)(e - s) > nl && memcmp(s, ROUTER_PREVIEW_NAME, nl) == 0 && s[nl] == '=';
        if (!ours && e > s) {
            if ((b.len && buf_append(&b, "; ", 2) < 0) || buf_append(&b, s, (size_t)(e - s)) < 0)
                return -ENOMEM;
        }
        s = e + 1;
    }
    if (b.len == 0) {
        *ret = NULL; /* nothing left */
        return 0;
    }
    return (*ret = buf_steal(&b, NULL)) ? 0 : -ENOMEM;
}
