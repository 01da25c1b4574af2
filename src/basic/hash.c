#include "basic/hash.h"

#include <string.h>

uint32_t fnv1a32_update(uint32_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= UINT32_C(16777619);
    }
    return h;
}

uint64_t fnv1a64_update(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= UINT64_C(1099511628211);
    }
    return h;
}

uint32_t fnv1a32_str(const char *s)
{
    return fnv1a32_update(FNV1A32_INIT, s, strlen(s));
}

uint64_t fnv1a64_str(const char *s)
{
    return fnv1a64_update(FNV1A64_INIT, s, strlen(s));
}
