/* Range and conditional-request handling with Go http.ServeContent semantics (no ETags), and the
 * date formats of the REST API. Pure functions. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "sandboxd/sandboxd-rest-internal.h"

/* Non-negative decimal (Go strconv.ParseInt base 10, no sign), -EINVAL or -ERANGE. */
static int64_t parse_nonneg(const char *s, size_t n)
{
    if (n == 0)
        return -EINVAL;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -EINVAL;
        if (v > (INT64_MAX - (s[i] - '0')) / 10)
            return -ERANGE;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

static void trim(const char **s, size_t *n)
{
    while (*n > 0 && (**s == ' ' || **s == '\t')) {
        (*s)++;
        (*n)--;
    }
    while (*n > 0 && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t'))
        (*n)--;
}

rest_range_result rest_range_parse_all(const char *header, int64_t size, rest_range **ret,
                                       size_t *ret_n)
{
    *ret = NULL;
    *ret_n = 0;
    if (!header || !*header)
        return RANGE_NONE;
    if (strncmp(header, "bytes=", 6) != 0)
        return RANGE_INVALID;
    const char *p = header + 6;
    size_t count = 0;
    bool no_overlap = false;
    int64_t sum = 0;
    bool too_big = false;
    rest_range *v = NULL;
    size_t cap = 0;
    rest_range_result res = RANGE_NONE;
    while (true) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        const char *ra = p;
        trim(&ra, &n);
        if (n > 0) {
            const char *dash = memchr(ra, '-', n);
            if (!dash)
                goto invalid;
            const char *st = ra, *en = dash + 1;
            size_t sl = (size_t)(dash - ra), el = n - sl - 1;
            trim(&st, &sl);
            trim(&en, &el);
            rest_range r;
            if (sl == 0) {
                if (el == 0 || en[0] == '-')
                    goto invalid;
                int64_t i = parse_nonneg(en, el);
                if (i < 0)
                    goto invalid;
                if (i > size)
                    i = size;
                if (i == 0) {
                    no_overlap = true;
                    goto next;
                }
                r.start = size - i;
                r.length = size - r.start;
            } else {
                int64_t i = parse_nonneg(st, sl);
                if (i < 0)
                    goto invalid;
                if (i >= size) {
                    no_overlap = true;
                    goto next;
                }
                r.start = i;
                if (el == 0)
                    r.length = size - r.start;
                else {
                    int64_t e = parse_nonneg(en, el);
                    if (e < 0 || r.start > e)
                        goto invalid;
                    if (e >= size)
                        e = size - 1;
                    r.length = e - r.start + 1;
                }
            }
            if (count == cap) {
                cap = cap ? cap * 2 : 4;
                rest_range *nv = realloc(v, cap * sizeof(*v));
                if (!nv)
                    goto invalid;
                v = nv;
            }
            v[count++] = r;
            if (r.length > size - sum)
                too_big = true; /* the ranges add up to more than the file: ignore Range */
            else
                sum += r.length;
        }
    next:
        if (!comma)
            break;
        p = comma + 1;
    }
    if (count == 0)
        res = no_overlap ? RANGE_NO_OVERLAP : RANGE_NONE;
    else if (too_big)
        res = RANGE_NONE; /* Go: ranges adding up to more than the file are ignored */
    else {
        *ret = v;
        *ret_n = count;
        return count == 1 ? RANGE_SINGLE : RANGE_MULTI;
    }
    free(v);
    return res;
invalid:
    free(v);
    return RANGE_INVALID;
}

rest_range_result rest_range_parse(const char *header, int64_t size, rest_range *ret)
{
    rest_range *v = NULL;
    size_t n = 0;
    rest_range_result r = rest_range_parse_all(header, size, &v, &n);
    if (r == RANGE_SINGLE)
        *ret = v[0];
    free(v);
    return r;
}

int rest_http_date_parse(const char *s, time_t *ret)
{
    static const char *const formats[] = {
        "%a, %d %b %Y %H:%M:%S GMT", /* IMF-fixdate (RFC 1123) */
        "%A, %d-%b-%y %H:%M:%S GMT", /* RFC 850 */
        "%a %b %e %H:%M:%S %Y",      /* asctime */
    };
    if (!s)
        return -EINVAL;
    for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
        struct tm tm = {0};
        const char *end = strptime(s, formats[i], &tm);
        if (end && *end == '\0') {
            time_t t = timegm(&tm);
            if (t == (time_t)-1)
                return -EINVAL;
            *ret = t;
            return 0;
        }
    }
    return -EINVAL;
}

void rest_http_date_format(time_t t, char *out, size_t size)
{
    struct tm tm;
    if (!gmtime_r(&t, &tm) || strftime(out, size, "%a, %d %b %Y %H:%M:%S GMT", &tm) == 0)
        snprintf(out, size, "Thu, 01 Jan 1970 00:00:00 GMT");
}

void rest_rfc3339_format(time_t t, char *out, size_t size)
{
    struct tm tm;
    if (!gmtime_r(&t, &tm) || strftime(out, size, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(out, size, "1970-01-01T00:00:00Z");
}

/* Whether an If-Match / If-None-Match list contains "*" (we have no ETag, so only "*" matches). */
static bool etag_list_has_star(const char *v)
{
    for (const char *p = v; *p; p++) {
        if (*p == ' ' || *p == '\t' || *p == ',')
            continue;
        if (*p == '*')
            return true;
        /* skip one entity tag */
        if (p[0] == 'W' && p[1] == '/')
            p += 2;
        if (*p != '"')
            return false;
        const char *q = strchr(p + 1, '"');
        if (!q)
            return false;
        p = q;
    }
    return false;
}

rest_cond_result rest_check_preconditions(bool get_or_head, time_t mtime, const char *if_match,
                                          const char *if_unmodified_since,
                                          const char *if_none_match, const char *if_modified_since,
                                          const char *range, const char *if_range,
                                          bool *ret_use_range)
{
    time_t t;
    *ret_use_range = true;
    bool mtime_set = mtime != 0;
    if (if_match && *if_match) {
        if (!etag_list_has_star(if_match))
            return COND_PRECONDITION_FAILED;
    } else if (if_unmodified_since && *if_unmodified_since && mtime_set &&
               rest_http_date_parse(if_unmodified_since, &t) == 0) {
        if (mtime > t)
            return COND_PRECONDITION_FAILED;
    }
    if (if_none_match && *if_none_match) {
        if (etag_list_has_star(if_none_match))
            return get_or_head ? COND_NOT_MODIFIED : COND_PRECONDITION_FAILED;
    } else if (get_or_head && if_modified_since && *if_modified_since && mtime_set &&
               rest_http_date_parse(if_modified_since, &t) == 0) {
        if (mtime <= t)
            return COND_NOT_MODIFIED;
    }
    if (range && *range && if_range && *if_range) {
        if (if_range[0] == '"' || strncmp(if_range, "W/", 2) == 0)
            *ret_use_range = false;
        else if (!mtime_set || rest_http_date_parse(if_range, &t) < 0 || t != mtime)
            *ret_use_range = false;
    }
    return COND_PROCEED;
}
