#include "shared/http-framing.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

/* RFC 9110 tchar. */
static bool is_tchar(unsigned char c)
{
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return true;
    return c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

bool http_field_is(const char *name, size_t len, const char *want)
{
    return len == strlen(want) && strncasecmp(name, want, len) == 0;
}

/* Trims optional whitespace (SP, HTAB) on both sides, as Go's textproto.TrimString. */
static void trim_ows(const char **s, size_t *n)
{
    while (*n > 0 && ((*s)[0] == ' ' || (*s)[0] == '\t'))
        (*s)++, (*n)--;
    while (*n > 0 && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t'))
        (*n)--;
}

/* Go's 400 and 501 answers: the body text as message. */
static int fail(api_error *err, status_code code, const char *body)
{
    return api_error_set(err, code, "%s", body);
}

int http_framing_check(const http_field *f, size_t n, bool http11, api_error *err)
{
    size_t hosts = 0, tes = 0;
    const char *te = NULL, *cl = NULL;
    size_t te_len = 0, cl_len = 0;

    for (size_t i = 0; i < n; i++) {
        if (f[i].name_len == 0)
            return fail(err, STATUS_INVALID_ARGUMENT, "400 Bad Request");
        for (size_t k = 0; k < f[i].name_len; k++)
            if (!is_tchar((unsigned char)f[i].name[k]))
                return fail(err, STATUS_INVALID_ARGUMENT, "400 Bad Request");
    }
    for (size_t i = 0; i < n; i++) {
        if (http_field_is(f[i].name, f[i].name_len, "host"))
            hosts++;
        else if (http_field_is(f[i].name, f[i].name_len, "transfer-encoding")) {
            tes++;
            te = f[i].value;
            te_len = f[i].value_len;
        }
    }
    if (http11 && hosts == 0)
        return fail(err, STATUS_INVALID_ARGUMENT, "400 Bad Request: missing required Host header");
    if (hosts > 1)
        return fail(err, STATUS_INVALID_ARGUMENT, "400 Bad Request: too many Host headers");
    if (http11 && tes > 0) {
        if (tes > 1)
            return fail(err, STATUS_UNIMPLEMENTED, "Unsupported transfer encoding");
        trim_ows(&te, &te_len);
        if (!http_field_is(te, te_len, "chunked"))
            return fail(err, STATUS_UNIMPLEMENTED, "Unsupported transfer encoding");
        return 0; /* chunked: Go drops Content-Length */
    }
    for (size_t i = 0; i < n; i++) {
        if (!http_field_is(f[i].name, f[i].name_len, "content-length"))
            continue;
        const char *v = f[i].value;
        size_t vl = f[i].value_len;
        trim_ows(&v, &vl);
        if (vl == 0)
            return fail(err, STATUS_INVALID_ARGUMENT, "400 Bad Request");
        for (size_t k = 0; k < vl; k++)
            if (v[k] < '0' || v[k] > '9')
                return fail(err, STATUS_INVALID_ARGUMENT, "400 Bad Request");
        if (cl && (cl_len != vl || memcmp(cl, v, vl) != 0))
            return fail(err, STATUS_INVALID_ARGUMENT, "400 Bad Request");
        cl = v;
        cl_len = vl;
    }
    return 0;
}
