/* The rest_server API in-process: serving on loopback, health 503 once not ready (upstream's
 * SetReady(false)), stop_accepting, active request accounting, free. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandboxd/sandboxd-rest.h"
#include "unit.h"

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
        abort();
    close(fd);
    return ntohs(sa.sin_port);
}

static int connect_port(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        close(fd);
        return -errno;
    }
    return fd;
}

/* One request with Connection: close; returns the whole response (owned) or NULL. */
static char *http_get(int port, const char *path)
{
    int fd = connect_port(port);
    if (fd < 0)
        return NULL;
    char req[256];
    snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path);
    if (write(fd, req, strlen(req)) < 0) {
        close(fd);
        return NULL;
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    ssize_t n;
    while ((n = read(fd, buf + len, cap - len - 1)) > 0) {
        len += (size_t)n;
        if (len + 1 == cap)
            buf = realloc(buf, cap *= 2);
    }
    buf[len] = '\0';
    close(fd);
    return buf;
}

TEST(health_ready_then_unavailable)
{
    char tmpl[] = "/tmp/test-rest-server-XXXXXX";
    CHECK(mkdtemp(tmpl) != NULL);
    sandboxd_config cfg = {.listen_host = "127.0.0.1", .rest_port = free_port(),
                           .http_idle_timeout = 60 * USEC_PER_SEC, .rest_fd = -1, .grpc_fd = -1};
    sandboxd sd = {.config = &cfg, .root_path = realpath(tmpl, NULL)};
    sd.root_fd = open(sd.root_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    sd.started_at = now_usec(CLOCK_MONOTONIC);
    atomic_init(&sd.ready, true);

    rest_server *s = NULL;
    CHECK_INT_EQ(rest_server_new(&s, &sd), 0);
    char *r = http_get(cfg.rest_port, "/v1/health");
    CHECK(r && strstr(r, "HTTP/1.1 200") == r);
    CHECK(r && strstr(r, "{\"status\":\"ok\",\"uptime_seconds\":0}\n"));
    free(r);
    CHECK_INT_EQ(rest_server_active_requests(s), 0);

    atomic_store(&sd.ready, false);
    r = http_get(cfg.rest_port, "/v1/health");
    CHECK(r && strstr(r, "HTTP/1.1 503") == r);
    CHECK(r && strstr(r, "\r\n\r\n{\"code\":\"UNAVAILABLE\",\"message\":\"sandboxd is shutting down\"}\n"));
    free(r);

    rest_server_stop_accepting(s);
    int fd = connect_port(cfg.rest_port);
    CHECK_INT_EQ(fd, -ECONNREFUSED);
    if (fd >= 0)
        close(fd);
    CHECK_INT_EQ(rest_server_active_requests(s), 0);
    CHECK(rest_server_free(s) == NULL);
    CHECK(rest_server_free(NULL) == NULL);
    close(sd.root_fd);
    rmdir(sd.root_path);
    free(sd.root_path);
}

TEST(bind_failure_reported)
{
    int port = free_port();
    int busy = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK(bind(busy, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(busy, 1) == 0);
    sandboxd_config cfg = {.listen_host = "127.0.0.1", .rest_port = port, .rest_fd = -1};
    sandboxd sd = {.config = &cfg, .root_fd = -1};
    rest_server *s = NULL;
    CHECK(rest_server_new(&s, &sd) < 0);
    s = rest_server_free(s);
    close(busy);
}
