#include "basic/time-util.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>

usec_t now_usec(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (usec_t)ts.tv_sec * USEC_PER_SEC + (usec_t)ts.tv_nsec / NSEC_PER_USEC;
}

int64_t now_msec(clockid_t clock)
{
    return (int64_t)(now_usec(clock) / USEC_PER_MSEC);
}

struct timespec timespec_realtime_after(usec_t usec)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t ns = (uint64_t)ts.tv_nsec + (usec % USEC_PER_SEC) * NSEC_PER_USEC;
    ts.tv_sec += (time_t)(usec / USEC_PER_SEC + ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);
    return ts;
}

static const struct {
    const char *suffix;
    double nsec;
} duration_units[] = {
    /* Longest suffixes first so "ms" is not read as "m". */
    {"ns", 1},           {"us", 1e3},        {"\xc2\xb5s", 1e3}, {"\xce\xbcs", 1e3},
    {"ms", 1e6},         {"s", 1e9},         {"m", 60e9},        {"h", 3600e9},
};

int parse_go_duration(const char *s, usec_t *ret)
{
    if (!s || !*s)
        return -EINVAL;
    if (*s == '+')
        s++;
    if (*s == '-')
        return -EINVAL;
    if (strcmp(s, "0") == 0) {
        *ret = 0;
        return 0;
    }
    double total_ns = 0;
    while (*s) {
        const char *start = s;
        double whole = 0, frac = 0, scale = 1;
        while (*s >= '0' && *s <= '9')
            whole = whole * 10 + (*s++ - '0');
        int had_digits = s > start;
        if (*s == '.') {
            s++;
            const char *fstart = s;
            while (*s >= '0' && *s <= '9') {
                scale /= 10;
                frac += (*s++ - '0') * scale;
            }
            had_digits = had_digits || s > fstart;
        }
        if (!had_digits)
            return -EINVAL;
        double unit = 0;
        for (size_t i = 0; i < sizeof(duration_units) / sizeof(duration_units[0]); i++) {
            size_t n = strlen(duration_units[i].suffix);
            if (strncmp(s, duration_units[i].suffix, n) == 0) {
                unit = duration_units[i].nsec;
                s += n;
                break;
            }
        }
        if (unit == 0)
            return -EINVAL; /* Go: "missing unit in duration" / "unknown unit" */
        total_ns += (whole + frac) * unit;
        if (total_ns > 9.2e18)
            return -ERANGE;
    }
    *ret = (usec_t)(total_ns / 1000.0);
    return 0;
}

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

int parse_rfc3339(const char *s, int64_t *ret_usec)
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
