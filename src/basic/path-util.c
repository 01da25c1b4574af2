/* Predicates on path strings (path-util.h). */
#include <string.h>

#include "basic/path-util.h"

bool path_is_clean_relative(const char *s, bool allow_slash)
{
    if (!s || !*s || s[0] == '/' || strlen(s) > 253)
        return false;
    const char *p = s;
    while (*p) {
        size_t n = strcspn(p, "/");
        if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
            return false;
        p += n;
        if (*p == '/') {
            if (!allow_slash)
                return false;
            p++;
            if (!*p)
                return false;
        }
    }
    return true;
}

bool path_is_clean_absolute(const char *s)
{
    return s && s[0] == '/' && path_is_clean_relative(s + 1, true);
}
