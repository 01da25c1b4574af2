/* Random bytes and identifiers (random-util.h). */
#include "basic/random-util.h"

#include <errno.h>
#include <stdio.h>
#include <sys/random.h>

int random_bytes(void *buf, size_t n)
{
    unsigned char *b = buf;
    while (n > 0) {
        ssize_t k = getrandom(b, n, 0);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

int uuid_v4(char out[37])
{
    unsigned char b[16];
    int r = random_bytes(b, sizeof(b));
    if (r < 0)
        return r;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
    return 0;
}
