#include "basic/io-util.h"

#include <errno.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <unistd.h>

static int loop(int fd, const void *p, size_t n, bool sock)
{
    const char *c = p;
    while (n > 0) {
        ssize_t k = sock ? send(fd, c, n, MSG_NOSIGNAL) : write(fd, c, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return errno > 0 ? -errno : -EIO;
        if (k == 0)
            return sock ? -EPIPE : -EIO;
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

int loop_write(int fd, const void *p, size_t n)
{
    return loop(fd, p, n, false);
}

int loop_send(int fd, const void *p, size_t n)
{
    return loop(fd, p, n, true);
}
