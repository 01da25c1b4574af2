/* Sandbox expiry decision (UPSTREAM.md §2.4.6), kept free of I/O for unit tests. */
#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <time.h>

#include "local/local-expiry.h"

static int digits(const char **p, int n, int *ret)
{
    int v = 0;
    for (int i = 0; i < n; i++, (*p)++) {
        if (!isdigit((unsigned char)**p))
            return -EINVAL;
        v = v * 10 + (**p - '0');
    }
    *ret = v;
    return 0;
}

static int expect(const char **p, const char *chars)
{
    if (!**p || !strchr(chars, **p))
        return -EINVAL;
    (*p)++;
    return 0;
}

int local_parse_rfc3339(const char *s, int64_t *ret_usec)
{
    if (!s)
        return -EINVAL;
    const char *p = s;
    int Y, M, D, h, m, sec;
    if (digits(&p, 4, &Y) < 0 || expect(&p, "-") < 0 || digits(&p, 2, &M) < 0 ||
        expect(&p, "-") < 0 || digits(&p, 2, &D) < 0 || expect(&p, "Tt ") < 0 ||
        digits(&p, 2, &h) < 0 || expect(&p, ":") < 0 || digits(&p, 2, &m) < 0 ||
        expect(&p, ":") < 0 || digits(&p, 2, &sec) < 0)
        return -EINVAL;
    if (M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || m > 59 || sec > 60)
        return -EINVAL;
    int64_t frac = 0;
    if (*p == '.') {
        p++;
        int64_t scale = 100000;
        if (!isdigit((unsigned char)*p))
            return -EINVAL;
        for (; isdigit((unsigned char)*p); p++) {
            if (scale > 0)
                frac += (*p - '0') * scale;
            scale /= 10;
        }
    }
    int64_t off = 0;
    if (*p == 'Z' || *p == 'z')
        p++;
    else if (*p == '+' || *p == '-') {
        int sign = *p == '-' ? -1 : 1, oh, om;
        p++;
        if (digits(&p, 2, &oh) < 0 || expect(&p, ":") < 0 || digits(&p, 2, &om) < 0 || oh > 23 ||
            om > 59)
            return -EINVAL;
        off = sign * (oh * 3600 + om * 60);
    } else
        return -EINVAL;
    if (*p)
        return -EINVAL;
    struct tm tm = {.tm_year = Y - 1900,
                    .tm_mon = M - 1,
                    .tm_mday = D,
                    .tm_hour = h,
                    .tm_min = m,
                    .tm_sec = sec};
    time_t t = timegm(&tm);
    *ret_usec = ((int64_t)t - off) * 1000000LL + frac;
    return 0;
}

static const char *ready_reason(const json_t *sb)
{
    size_t i;
    json_t *c;
    json_array_foreach (json_object_get(json_object_get(sb, "status"), "conditions"), i, c) {
        const char *t = json_string_value(json_object_get(c, "type"));
        if (t && strcmp(t, "Ready") == 0)
            return json_string_value(json_object_get(c, "reason"));
    }
    return NULL;
}

expiry_action local_expiry_decide(const json_t *sb, int64_t now_usec, int64_t *ret_requeue)
{
    const json_t *spec = json_object_get(sb, "spec");
    int64_t when;
    *ret_requeue = 0;
    if (local_parse_rfc3339(json_string_value(json_object_get(spec, "shutdownTime")), &when) < 0)
        return EXPIRY_NEVER;
    if (now_usec < when) {
        int64_t left = when - now_usec;
        *ret_requeue = left > EXPIRY_MIN_REQUEUE_USEC ? left : EXPIRY_MIN_REQUEUE_USEC;
        return EXPIRY_PENDING;
    }
    const char *reason = ready_reason(sb);
    if (!reason || strcmp(reason, "SandboxExpired") != 0) {
        *ret_requeue = EXPIRY_MARK_REQUEUE_USEC;
        return EXPIRY_MARK;
    }
    const char *policy = json_string_value(json_object_get(spec, "shutdownPolicy"));
    /* nil is Retain (the CRD default); DeleteForeground is a claim policy, treated as Delete. */
    if (policy && (strcmp(policy, "Delete") == 0 || strcmp(policy, "DeleteForeground") == 0))
        return EXPIRY_DELETE;
    return EXPIRY_RETAIN;
}

const char *local_expiry_action_name(expiry_action a)
{
    static const char *const names[] = {"never", "pending", "mark", "delete", "retain"};
    return (unsigned)a < sizeof(names) / sizeof(names[0]) ? names[a] : "?";
}
