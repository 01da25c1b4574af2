#include "basic/time-util.h"

#include <errno.h>
#include <string.h>

usec_t now_usec(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (usec_t)ts.tv_sec * USEC_PER_SEC + (usec_t)ts.tv_nsec / NSEC_PER_USEC;
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
