#include <unistd.h>
#include "router/router-internal.h"
void router_h2_serve(router_ctx *ctx, int fd, bool peer_loopback, const char *pre, size_t npre)
{
    close(fd);
}
