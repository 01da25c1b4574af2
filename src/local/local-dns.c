/* The DNS forwarder of local sandboxes (docs/network.md): UDP and TCP on port 53 of the bridge
 * address, relayed to one upstream resolver. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "basic/macro.h"
#include "basic/time-util.h"
#include "local/local-dns.h"
#include "shared/log.h"

#define DNS_SLOTS 64
#define DNS_TIMEOUT_USEC (3 * USEC_PER_SEC)

typedef struct dns_slot {
    int fd; /* socket connected to the upstream, -1 when free */
    struct sockaddr_in client;
    usec_t deadline;
} dns_slot;

struct local_dns {
    uint32_t addr; /* host byte order */
    char addr_s[16];
    struct sockaddr_in upstream;
    int fd, tcp_fd, stop;
    pthread_t thread;
    bool started;
    dns_slot slots[DNS_SLOTS];
};


static void dns_forward_query(local_dns *n, const char *buf, size_t len,
                              const struct sockaddr_in *client)
{
    dns_slot *s = NULL;
    for (size_t i = 0; i < DNS_SLOTS && !s; i++)
        if (n->slots[i].fd < 0)
            s = &n->slots[i];
    if (!s)
        return; /* overloaded: the client retries */
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return;
    if (connect(fd, (const struct sockaddr *)&n->upstream, sizeof(n->upstream)) < 0 ||
        send(fd, buf, len, 0) < 0) {
        close(fd);
        return;
    }
    s->fd = fd;
    s->client = *client;
    s->deadline = now_usec(CLOCK_MONOTONIC) + DNS_TIMEOUT_USEC;
}

/* DNS over TCP: one detached thread per connection (at most DNS_SLOTS), relaying
 * length-prefixed messages to the upstream over TCP. Uses no state of local_net. */
static _Atomic int dns_tcp_threads;

typedef struct dns_tcp_conn {
    int fd;
    struct sockaddr_in upstream;
} dns_tcp_conn;

static bool read_full(int fd, void *buf, size_t len)
{
    for (size_t got = 0; got < len;) {
        ssize_t k = read(fd, (char *)buf + got, len - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return false;
        got += (size_t)k;
    }
    return true;
}

static bool write_full(int fd, const void *buf, size_t len)
{
    for (size_t done = 0; done < len;) {
        ssize_t k = send(fd, (const char *)buf + done, len - done, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return false;
        done += (size_t)k;
    }
    return true;
}

static void set_timeouts(int fd)
{
    struct timeval tv = {.tv_sec = 3};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static void *dns_tcp_thread(void *arg)
{
    dns_tcp_conn *c = arg;
    int up = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    set_timeouts(c->fd);
    if (up >= 0) {
        set_timeouts(up);
        if (connect(up, (struct sockaddr *)&c->upstream, sizeof(c->upstream)) == 0) {
            unsigned char buf[2 + 65535];
            for (;;) {
                if (!read_full(c->fd, buf, 2))
                    break;
                size_t len = (size_t)buf[0] << 8 | buf[1];
                if (!read_full(c->fd, buf + 2, len) || !write_full(up, buf, 2 + len) ||
                    !read_full(up, buf, 2))
                    break;
                len = (size_t)buf[0] << 8 | buf[1];
                if (!read_full(up, buf + 2, len) || !write_full(c->fd, buf, 2 + len))
                    break;
            }
        }
        close(up);
    }
    close(c->fd);
    free(c);
    dns_tcp_threads--;
    return NULL;
}

static void dns_tcp_accept(local_dns *n)
{
    int fd = accept4(n->tcp_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    dns_tcp_conn *c = malloc(sizeof(*c));
    pthread_attr_t attr;
    pthread_t t;
    if (!c || dns_tcp_threads >= DNS_SLOTS) {
        free(c);
        close(fd);
        return;
    }
    *c = (dns_tcp_conn){fd, n->upstream};
    dns_tcp_threads++;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    if (pthread_create(&t, &attr, dns_tcp_thread, c) != 0) {
        dns_tcp_threads--;
        close(fd);
        free(c);
    }
    pthread_attr_destroy(&attr);
}

static void *dns_thread(void *arg)
{
    local_dns *n = arg;
    for (;;) {
        struct pollfd p[3 + DNS_SLOTS];
        dns_slot *owner[3 + DNS_SLOTS];
        size_t np = 0;
        p[np++] = (struct pollfd){n->stop, POLLIN, 0};
        p[np++] = (struct pollfd){n->fd, POLLIN, 0};
        p[np++] = (struct pollfd){n->tcp_fd, POLLIN, 0};
        usec_t now = now_usec(CLOCK_MONOTONIC);
        for (size_t i = 0; i < DNS_SLOTS; i++) {
            if (n->slots[i].fd < 0)
                continue;
            if (n->slots[i].deadline <= now) {
                close(n->slots[i].fd);
                n->slots[i].fd = -1;
                continue;
            }
            owner[np] = &n->slots[i];
            p[np++] = (struct pollfd){n->slots[i].fd, POLLIN, 0};
        }
        int k = poll(p, np, np > 3 ? 500 : -1);
        if (k < 0 && errno != EINTR)
            break;
        if (k <= 0)
            continue;
        if (p[0].revents)
            break;
        char buf[4096];
        if (p[1].revents & POLLIN) {
            struct sockaddr_in from;
            socklen_t fl = sizeof(from);
            ssize_t got = recvfrom(n->fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl);
            if (got > 12 && fl == sizeof(from))
                dns_forward_query(n, buf, (size_t)got, &from);
        }
        if (p[2].revents & POLLIN)
            dns_tcp_accept(n);
        for (size_t i = 3; i < np; i++) {
            if (!p[i].revents)
                continue;
            dns_slot *s = owner[i];
            ssize_t got = recv(s->fd, buf, sizeof(buf), 0);
            if (got > 0)
                sendto(n->fd, buf, (size_t)got, 0, (const struct sockaddr *)&s->client,
                       sizeof(s->client));
            close(s->fd);
            s->fd = -1;
        }
    }
    return NULL;
}

static int parse_upstream(const char *spec, struct sockaddr_in *ret)
{
    char buf[64];
    _cleanup_free_ char *fromconf = NULL;
    if (!spec) {
        /* The first IPv4 nameserver of the host's resolv.conf. */
        _cleanup_fclose_ FILE *f = fopen("/etc/resolv.conf", "re");
        char line[256];
        while (f && !fromconf && fgets(line, sizeof(line), f)) {
            char a[64];
            struct in_addr t;
            if (sscanf(line, " nameserver %63s", a) == 1 && inet_pton(AF_INET, a, &t) == 1)
                fromconf = strdup(a);
        }
        if (!fromconf)
            return -ENOENT;
        spec = fromconf;
    }
    if (strlen(spec) >= sizeof(buf))
        return -EINVAL;
    snprintf(buf, sizeof(buf), "%s", spec);
    long port = 53;
    char *colon = strchr(buf, ':');
    if (colon) {
        char *end;
        *colon = '\0';
        port = strtol(colon + 1, &end, 10);
        if (*end || port < 1 || port > 65535)
            return -EINVAL;
    }
    *ret = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    return inet_pton(AF_INET, buf, &ret->sin_addr) == 1 ? 0 : -EINVAL;
}

static void dns_start(local_dns *n, const char *upstream, const char **ret_why)
{
    int k = parse_upstream(upstream, &n->upstream);
    if (k < 0) {
        log_warn("DNS forwarder off: no usable upstream resolver", "upstream",
                 upstream ? upstream : "/etc/resolv.conf");
        *ret_why = "no DNS forwarder (no usable upstream resolver)";
        return;
    }
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(53),
                             .sin_addr.s_addr = htonl(n->addr)};
    n->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    if (n->fd >= 0)
        setsockopt(n->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    /* IP_FREEBIND: the bridge address may still be tentative. */
    if (n->fd >= 0)
        setsockopt(n->fd, IPPROTO_IP, IP_FREEBIND, &one, sizeof(one));
    if (n->fd < 0 || bind(n->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        (n->stop = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
        log_warn("DNS forwarder off: cannot listen", "address", n->addr_s, "error", strerror(errno));
        *ret_why = "no DNS forwarder (cannot listen on port 53 of the bridge address)";
        if (n->fd >= 0)
            close(n->fd);
        n->fd = -1;
        return;
    }
    /* TCP (truncated answers, large records); off when it cannot listen, UDP still works. */
    n->tcp_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (n->tcp_fd >= 0) {
        setsockopt(n->tcp_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        setsockopt(n->tcp_fd, IPPROTO_IP, IP_FREEBIND, &one, sizeof(one));
        if (bind(n->tcp_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
            listen(n->tcp_fd, 64) < 0) {
            log_warn("DNS forwarder: no TCP", "address", n->addr_s, "error", strerror(errno));
            close(n->tcp_fd);
            n->tcp_fd = -1;
        }
    }
    if (pthread_create(&n->thread, NULL, dns_thread, n) == 0)
        n->started = true;
    else
        *ret_why = "no DNS forwarder (cannot start its thread)";
}

local_dns *local_dns_start(uint32_t addr, const char *upstream, const char **ret_why)
{
    local_dns *n = calloc(1, sizeof(*n));
    *ret_why = NULL;
    if (!n) {
        *ret_why = "no DNS forwarder (out of memory)";
        return NULL;
    }
    n->addr = addr;
    snprintf(n->addr_s, sizeof(n->addr_s), "%u.%u.%u.%u", addr >> 24, (addr >> 16) & 255,
             (addr >> 8) & 255, addr & 255);
    n->fd = n->tcp_fd = n->stop = -1;
    for (size_t i = 0; i < DNS_SLOTS; i++)
        n->slots[i].fd = -1;
    dns_start(n, upstream, ret_why);
    if (!n->started) {
        local_dns_stop(n);
        return NULL;
    }
    return n;
}

void local_dns_stop(local_dns *n)
{
    if (!n)
        return;
    if (n->started) {
        uint64_t one = 1;
        if (write(n->stop, &one, sizeof(one)) == sizeof(one))
            pthread_join(n->thread, NULL);
    }
    for (size_t i = 0; i < DNS_SLOTS; i++)
        if (n->slots[i].fd >= 0)
            close(n->slots[i].fd);
    if (n->fd >= 0)
        close(n->fd);
    if (n->tcp_fd >= 0)
        close(n->tcp_fd);
    if (n->stop >= 0)
        close(n->stop);
    free(n);
}
