#include "basic/hex-util.h"

#include <errno.h>
#include <stdlib.h>

int unhexchar(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -EINVAL;
}

char *percent_decode_lenient(const char *s, size_t n, size_t *ret_len)
{
    char *d = malloc(n + 1);
    if (!d)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int h, l;
        if (s[i] == '%' && i + 2 < n && (h = unhexchar(s[i + 1])) >= 0 &&
            (l = unhexchar(s[i + 2])) >= 0) {
            d[k++] = (char)(h << 4 | l);
            i += 2;
        } else
            d[k++] = s[i];
    }
    d[k] = '\0';
    if (ret_len)
        *ret_len = k;
    return d;
}
