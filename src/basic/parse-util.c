#include "basic/parse-util.h"

#include <errno.h>
#include <string.h>

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
