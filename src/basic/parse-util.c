#include "basic/parse-util.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"

int parse_go_bool(const char *s, bool *ret)
{
    static const char *const truthy[] = {"1", "t", "T", "TRUE", "true", "True"};
    static const char *const falsy[] = {"0", "f", "F", "FALSE", "false", "False"};
    if (!s)
        return -EINVAL;
    for (size_t i = 0; i < sizeof(truthy) / sizeof(truthy[0]); i++) {
        if (strcmp(s, truthy[i]) == 0) {
            *ret = true;
            return 0;
        }
        if (strcmp(s, falsy[i]) == 0) {
            *ret = false;
            return 0;
        }
    }
    return -EINVAL;
}

static int digit_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'Z')
        return c - 'A' + 10;
    return 99;
}

int parse_go_int(const char *s, int64_t *ret)
{
    if (!s || !*s)
        return -EINVAL;
    bool neg = false;
    if (*s == '+' || *s == '-')
        neg = *s++ == '-';
    int base = 10;
    bool prefixed = false;
    if (s[0] == '0' && s[1]) {
        prefixed = true;
        switch (s[1]) {
        case 'x': case 'X': base = 16; s += 2; break;
        case 'o': case 'O': base = 8; s += 2; break;
        case 'b': case 'B': base = 2; s += 2; break;
        default: base = 8; s += 1; break;
        }
    }
    if (!*s)
        return -EINVAL;
    uint64_t v = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    bool any = false, last_underscore = false;
    for (; *s; s++) {
        if (*s == '_') {
            if (!prefixed || last_underscore)
                return -EINVAL;
            last_underscore = true;
            continue;
        }
        last_underscore = false;
        int d = digit_value(*s);
        if (d >= base)
            return -EINVAL;
        if (v > (limit - (uint64_t)d) / (uint64_t)base)
            return -ERANGE;
        v = v * (uint64_t)base + (uint64_t)d;
        any = true;
    }
    if (!any || last_underscore)
        return -EINVAL;
    *ret = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

/* The digits of a decimal number at *p ("12", "1.5", ".5", "3."): advances past them. */
static bool decimal_number(const char **p)
{
    const char *s = *p;
    size_t whole = strspn(s, "0123456789"), frac = 0;
    s += whole;
    if (*s == '.') {
        frac = strspn(s + 1, "0123456789");
        s += 1 + frac;
    }
    if (whole == 0 && frac == 0)
        return false;
    *p = s;
    return true;
}

int parse_quantity(const char *s, long double *ret)
{
    static const struct {
        const char *suffix;
        long double mult;
    } units[] = {
        {"Ki", 1024.0L}, {"Mi", 1048576.0L}, {"Gi", 1073741824.0L}, {"Ti", 1099511627776.0L},
        {"Pi", 1125899906842624.0L}, {"Ei", 1152921504606846976.0L}, {"n", 1e-9L}, {"u", 1e-6L},
        {"m", 1e-3L}, {"", 1.0L}, {"k", 1e3L}, {"M", 1e6L}, {"G", 1e9L}, {"T", 1e12L},
        {"P", 1e15L}, {"E", 1e18L},
    };
    if (!s)
        return -EINVAL;
    const char *p = s + (*s == '+' || *s == '-');
    if (!decimal_number(&p))
        return -EINVAL;
    _cleanup_free_ char *num = strndup(s, (size_t)(p - s));
    if (!num)
        return -ENOMEM;
    long double v = strtold(num, NULL);
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
        if (strcmp(p, units[i].suffix) == 0) {
            *ret = v * units[i].mult;
            return 0;
        }
    /* Not a suffix ("E" and "Ei" are): a decimal exponent. */
    if (*p != 'e' && *p != 'E')
        return -EINVAL;
    const char *q = p + 1 + (p[1] == '+' || p[1] == '-');
    size_t n = strspn(q, "0123456789");
    if (n == 0 || n > 4 || q[n])
        return -EINVAL;
    *ret = v * powl(10.0L, (long double)strtol(p + 1, NULL, 10));
    return 0;
}
