/* Client-input parsers of the legacy layer: shlex splitting, multipart "file" extraction and
 * legacy path decoding. Pure functions. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "basic/buf.h"
#include "basic/hex-util.h"
#include "basic/strv.h"
#include "router/router-internal.h"
#include "router/router-legacy-parse.h"

/* Ends the token in b (an empty one too: '' is a token) and adds it to v. 0 or -ENOMEM. */
static int push_token(strv *v, buf *b)
{
    return strv_push(v, buf_steal(b, NULL));
}

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

int router_shlex_split(const char *s, char ***out, const char **ret_error)
{
    strv v = STRV_INIT;
    buf b = BUF_INIT;
    bool in_token = false;
    int r = 0;
    *ret_error = NULL;
    for (const char *p = s; *p && r == 0; p++) {
        char c = *p;
        if (is_ws(c)) {
            if (in_token)
                r = push_token(&v, &b);
            in_token = false;
            continue;
        }
        in_token = true;
        if (c == '\\') {
            if (!p[1]) {
                *ret_error = "No escaped character";
                r = -EINVAL;
                break;
            }
            r = buf_append_byte(&b, *++p);
        } else if (c == '\'') {
            const char *e = strchr(p + 1, '\'');
            if (!e) {
                *ret_error = "No closing quotation";
                r = -EINVAL;
                break;
            }
            for (const char *q = p + 1; q < e && r == 0; q++)
                r = buf_append_byte(&b, *q);
            p = e;
        } else if (c == '"') {
            const char *q = p + 1;
            for (; *q && *q != '"' && r == 0; q++) {
                if (*q == '\\' && (q[1] == '"' || q[1] == '\\'))
                    q++;
                else if (*q == '\\' && !q[1])
                    break;
                r = buf_append_byte(&b, *q);
            }
            if (r == 0 && *q != '"') {
                *ret_error = "No closing quotation";
                r = -EINVAL;
                break;
            }
            p = q;
        } else
            r = buf_append_byte(&b, c);
    }
    if (r == 0 && in_token)
        r = push_token(&v, &b);
    if (r == 0 && !v.v && !(v.v = calloc(1, sizeof(char *))))
        r = -ENOMEM; /* no token: an empty vector */
    buf_done(&b);
    if (r < 0) {
        strv_done(&v);
        return r;
    }
    *out = v.v;
    return 0;
}

int router_percent_decode(const char *s, size_t n, char **out)
{
    size_t k;
    char *d = percent_decode_lenient(s, n, &k);
    if (!d)
        return -ENOMEM;
    if (memchr(d, '\0', k)) {
        free(d);
        return -EINVAL;
    }
    *out = d;
    return 0;
}

int router_legacy_path(const char *target, const char *prefix, char **out)
{
    size_t pl = strlen(prefix);
    if (strncmp(target, prefix, pl) != 0)
        return -EINVAL;
    const char *rest = target + pl;
    size_t n = strcspn(rest, "?#");
    char *once = NULL;
    /* Starlette decodes the path once, upstream's handler unquotes it again. */
    int r = router_percent_decode(rest, n, &once);
    if (r < 0)
        return r;
    r = router_percent_decode(once, strlen(once), out);
    free(once);
    return r;
}

/* The value of parameter `param` in a header value like `form-data; name="file"; filename=x`.
 * Owned, or NULL. */
static char *header_param(const char *v, size_t n, const char *param)
{
    size_t pl = strlen(param);
    const char *end = v + n;
    const char *p = v;
    while (p < end) {
        const char *semi = memchr(p, ';', (size_t)(end - p));
        if (!semi)
            break;
        p = semi + 1;
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        if ((size_t)(end - p) > pl && strncasecmp(p, param, pl) == 0 && p[pl] == '=') {
            const char *val = p + pl + 1;
            if (val < end && *val == '"') {
                val++;
                const char *q = val;
                while (q < end && *q != '"')
                    q++;
                return strndup(val, (size_t)(q - val));
            }
            const char *q = val;
            while (q < end && *q != ';' && *q != ' ' && *q != '\r' && *q != '\n')
                q++;
            return strndup(val, (size_t)(q - val));
        }
    }
    return NULL;
}

static const char *find(const char *h, size_t hn, const char *needle, size_t nn)
{
    return nn == 0 || hn < nn ? NULL : memmem(h, hn, needle, nn);
}

/* Walks the parts of a multipart/form-data body to the part named "file". Complete bodies
 * (partial false): 1 with the part's content, or -EINVAL. Prefixes (partial true): 1 as soon as
 * that part's headers are in (*ret_data, *ret_len unset), 0 when more bytes are needed, -EINVAL
 * when the body cannot have one. */
static int multipart_scan(const char *content_type, const char *body, size_t len, bool partial,
                          char **ret_filename, const char **ret_data, size_t *ret_len)
{
    if (!content_type || strncasecmp(content_type, "multipart/form-data", 19) != 0 || !body)
        return -EINVAL;
    char *boundary = header_param(content_type, strlen(content_type), "boundary");
    if (!boundary || !*boundary || strlen(boundary) > 200) {
        free(boundary);
        return -EINVAL;
    }
    char delim[256];
    size_t dl = (size_t)snprintf(delim, sizeof(delim), "--%s", boundary);
    free(boundary);
    const char *end = body + len;
    const char *p = find(body, len, delim, dl);
    if (!p)
        return partial ? 0 : -EINVAL;
    for (;;) {
        p += dl;
        if (end - p < 2)
            return partial ? 0 : -EINVAL;
        if (p[0] == '-' && p[1] == '-')
            return -EINVAL; /* closing delimiter: no file part */
        if (p[0] != '\r' || p[1] != '\n')
            return -EINVAL;
        p += 2;
        const char *hend = find(p, (size_t)(end - p), "\r\n\r\n", 4);
        if (!hend)
            return partial ? 0 : -EINVAL;
        const char *content = hend + 4;
        /* Headers of this part: look for Content-Disposition. */
        char *name = NULL, *filename = NULL;
        const char *h = p;
        while (h < hend) {
            const char *eol = find(h, (size_t)(hend + 2 - h), "\r\n", 2);
            if (!eol)
                break;
            if (eol - h > 20 && strncasecmp(h, "content-disposition:", 20) == 0) {
                free(name);
                free(filename);
                name = header_param(h, (size_t)(eol - h), "name");
                filename = header_param(h, (size_t)(eol - h), "filename");
            }
            h = eol + 2;
        }
        bool match = name && strcmp(name, "file") == 0 && filename;
        free(name);
        if (match && partial) {
            *ret_filename = filename;
            return 1;
        }
        const char *next = find(content, (size_t)(end - content), delim, dl);
        if (!next || next - content < 2 || next[-2] != '\r' || next[-1] != '\n') {
            free(filename);
            if (!next && partial)
                return 0;
            return -EINVAL;
        }
        if (match) {
            *ret_filename = filename;
            *ret_data = content;
            *ret_len = (size_t)(next - 2 - content);
            return 1;
        }
        free(filename);
        p = next;
    }
}

int router_multipart_file(const char *content_type, const char *body, size_t len,
                          char **ret_filename, const char **ret_data, size_t *ret_len)
{
    int r = multipart_scan(content_type, body, len, false, ret_filename, ret_data, ret_len);
    return r == 1 ? 0 : r < 0 ? r : -EINVAL;
}

int router_multipart_peek_filename(const char *content_type, const char *prefix, size_t len,
                                   char **ret_filename)
{
    return multipart_scan(content_type, prefix, len, true, ret_filename, NULL, NULL);
}

char *router_percent_encode(const char *s, bool (*keep)(unsigned char ch))
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(s);
    char *o = malloc(3 * n + 1), *q = o;
    if (!o)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (keep(ch)) {
            *q++ = (char)ch;
            continue;
        }
        *q++ = '%';
        *q++ = hex[ch >> 4];
        *q++ = hex[ch & 15];
    }
    *q = '\0';
    return o;
}
