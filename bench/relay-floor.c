#define _GNU_SOURCE
/* The floor of any proxy in bench-router.py's shape, measured beside the router: a relay that
 * does only what every proxy of this shape must do, and nothing a router does besides (no HTTP
 * parsing, no auth, no routing, no header rewriting). It accepts TCP connections on 127.0.0.1,
 * opens one unix-socket connection to the upstream per client connection, and copies bytes both
 * ways: one recv and one send per direction per request, as the router's hot path does, on one
 * epoll loop per CPU sharing the listener (EPOLLEXCLUSIVE), as the router's workers do.
 *
 * Usage: relay-floor UPSTREAM_UNIX_PATH. Prints the port it listens on, then serves until
 * killed. A write that would block waits in poll (bench responses are small: it does not). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static struct sockaddr_un upstream = {.sun_family = AF_UNIX};
static int listen_fd;

/* One direction of a pair: bytes read from `from` go to `to`. */
typedef struct side {
    int from, to;
    struct side *other;
} side;

static int send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k > 0) {
            p += k;
            n -= (size_t)k;
        } else if (k < 0 && errno == EAGAIN) {
            struct pollfd pf = {fd, POLLOUT, 0};
            poll(&pf, 1, 1000);
        } else if (k < 0 && errno != EINTR) {
            return -1;
        }
    }
    return 0;
}

static void close_pair(int ep, side *s)
{
    epoll_ctl(ep, EPOLL_CTL_DEL, s->from, NULL);
    epoll_ctl(ep, EPOLL_CTL_DEL, s->to, NULL);
    close(s->from);
    close(s->to);
    free(s->other);
    free(s);
}

static void accept_one(int ep)
{
    int c = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c < 0)
        return;
    int one = 1;
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    int u = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (u < 0 || connect(u, (struct sockaddr *)&upstream, sizeof(upstream)) < 0) {
        close(c);
        if (u >= 0)
            close(u);
        return;
    }
    fcntl(u, F_SETFL, fcntl(u, F_GETFL) | O_NONBLOCK);
    side *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
    if (!a || !b) {
        free(a);
        free(b);
        close(c);
        close(u);
        return;
    }
    *a = (side){c, u, b};
    *b = (side){u, c, a};
    struct epoll_event ea = {.events = EPOLLIN, .data.ptr = a};
    struct epoll_event eb = {.events = EPOLLIN, .data.ptr = b};
    epoll_ctl(ep, EPOLL_CTL_ADD, c, &ea);
    epoll_ctl(ep, EPOLL_CTL_ADD, u, &eb);
}

static void *worker(void *unused)
{
    (void)unused;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event le = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.ptr = NULL};
    epoll_ctl(ep, EPOLL_CTL_ADD, listen_fd, &le);
    static __thread char buf[65536];
    struct epoll_event ev[64];
    for (;;) {
        int n = epoll_wait(ep, ev, 64, -1);
        for (int i = 0; i < n; i++) {
            side *s = ev[i].data.ptr;
            if (!s) {
                accept_one(ep);
                continue;
            }
            ssize_t k = recv(s->from, buf, sizeof(buf), 0);
            if (k < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            if (k <= 0 || send_all(s->to, buf, (size_t)k) < 0) {
                /* The pair goes as one: the other side's event in this batch, if any, is
                 * for memory freed here, so the rest of the batch is dropped and re-polled. */
                close_pair(ep, s);
                break;
            }
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2 || strlen(argv[1]) >= sizeof(upstream.sun_path)) {
        fprintf(stderr, "usage: relay-floor UPSTREAM_UNIX_PATH\n");
        return 2;
    }
    strcpy(upstream.sun_path, argv[1]);
    listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        listen(listen_fd, 1024) < 0 || getsockname(listen_fd, (struct sockaddr *)&sa, &len) < 0) {
        perror("relay-floor: listen");
        return 1;
    }
    printf("%d\n", ntohs(sa.sin_port));
    fflush(stdout);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    for (long i = 1; i < (ncpu < 1 ? 1 : ncpu); i++) {
        pthread_t t;
        pthread_create(&t, NULL, worker, NULL);
    }
    worker(NULL);
    return 0;
}
