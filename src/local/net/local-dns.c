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

#include "basic/io-util.h"
#include "basic/macro.h"
#include "basic/time-util.h"
#include "local/net/local-dns-query.h"
#include "local/net/local-dns.h"
#include "local/metrics/local-metrics.h"
#include "shared/log.h"

#define DNS_SLOTS 256        /* UDP queries waiting for the upstream, all sandboxes */
#define DNS_TCP_MAX 64       /* TCP connections, all sandboxes */
#define DNS_TCP_PER_CLIENT 4 /* TCP connections of one sandbox */
#define DNS_CLIENTS 1024     /* sandboxes with a budget at once (an idle one is forgotten) */
#define DNS_DRAIN 256        /* datagrams read per wakeup */
#define DNS_RCVBUF (1 << 20)
#define DNS_TIMEOUT_USEC (3 * USEC_PER_SEC)
#define DNS_LOG_EVERY_USEC (10 * USEC_PER_SEC)

/* The budget of one source address: a token bucket and what it has open. */
typedef struct dns_client {
    uint32_t addr; /* network byte order; 0: free entry */
    double tokens;
    usec_t refilled, logged;
    unsigned inflight, tcp;
} dns_client;

/* The budgets, shared by the UDP thread and the TCP connection threads (which may outlive
 * local_dns_stop(): the last reference frees it). */
typedef struct dns_limits {
    pthread_mutex_t lock;
    _Atomic int refs;
    local_dns_limits opt;
    struct sockaddr_in upstream;
    usec_t full_logged; /* when "too many sandboxes" was last logged */
    dns_client clients[DNS_CLIENTS];
} dns_limits;

typedef struct dns_slot {
    int fd; /* socket connected to the upstream, -1 when free */
    struct sockaddr_in client;
    usec_t deadline;
} dns_slot;

struct local_dns {
    uint32_t addr; /* host byte order */
    char addr_s[16];
    dns_limits *lim;
    int fd, tcp_fd, stop;
    pthread_t thread;
    bool started;
    dns_slot slots[DNS_SLOTS];
};

static void limits_unref(dns_limits *l)
{
    if (l && --l->refs == 0) {
        pthread_mutex_destroy(&l->lock);
        free(l);
    }
}

/* The entry of addr, made when missing (reusing an idle one when the table is full); NULL when
 * every entry is busy. Called with l->lock held. */
static dns_client *client_get(dns_limits *l, uint32_t addr, usec_t now)
{
    size_t h = (size_t)((ntohl(addr) * 2654435761u) % DNS_CLIENTS);
    dns_client *idle = NULL;
    usec_t full = (usec_t)((double)l->opt.burst / l->opt.rate * USEC_PER_SEC);
    for (size_t i = 0; i < DNS_CLIENTS; i++) {
        dns_client *c = &l->clients[(h + i) % DNS_CLIENTS];
        if (c->addr == addr)
            return c;
        if (c->addr == 0) {
            idle = idle ? idle : c;
            break;
        }
        if (!idle && c->inflight == 0 && c->tcp == 0 && now - c->refilled >= full)
            idle = c;
    }
    if (idle)
        *idle = (dns_client){.addr = addr, .tokens = l->opt.burst, .refilled = now};
    return idle;
}

/* Takes one token of addr's bucket (and, for UDP, one of its in-flight budget). False: over
 * budget, the query is dropped (logged at most every 10 s per sandbox). */
static bool budget_take(dns_limits *l, uint32_t addr, bool udp)
{
    usec_t now = now_usec(CLOCK_MONOTONIC);
    bool ok = false, log = false;
    pthread_mutex_lock(&l->lock);
    dns_client *c = client_get(l, addr, now);
    if (c) {
        c->tokens += (double)(now - c->refilled) * l->opt.rate / USEC_PER_SEC;
        if (c->tokens > l->opt.burst)
            c->tokens = l->opt.burst;
        c->refilled = now;
        ok = c->tokens >= 1 && (!udp || c->inflight < l->opt.inflight);
        if (ok) {
            c->tokens -= 1;
            c->inflight += udp;
        } else if (now - c->logged >= DNS_LOG_EVERY_USEC) {
            c->logged = now;
            log = true;
        }
    } else if (now - l->full_logged >= DNS_LOG_EVERY_USEC) {
        l->full_logged = now;
        log = true;
    }
    pthread_mutex_unlock(&l->lock);
    if (log) {
        char a[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &addr, a, sizeof(a));
        log_warn("DNS: queries of a sandbox dropped", "source", a, "reason",
                 c ? "over its rate or in-flight budget" : "too many sandboxes");
    }
    return ok;
}

static void budget_done(dns_limits *l, uint32_t addr)
{
    pthread_mutex_lock(&l->lock);
    dns_client *c = client_get(l, addr, now_usec(CLOCK_MONOTONIC));
    if (c && c->inflight > 0)
        c->inflight--;
    pthread_mutex_unlock(&l->lock);
}

/* One more TCP connection of addr, within DNS_TCP_PER_CLIENT and DNS_TCP_MAX; or false. */
static _Atomic int dns_tcp_threads;

static bool tcp_take(dns_limits *l, uint32_t addr)
{
    bool ok = false;
    pthread_mutex_lock(&l->lock);
    dns_client *c = client_get(l, addr, now_usec(CLOCK_MONOTONIC));
    if (c && c->tcp < DNS_TCP_PER_CLIENT && dns_tcp_threads < DNS_TCP_MAX) {
        c->tcp++;
        dns_tcp_threads++;
        ok = true;
    }
    pthread_mutex_unlock(&l->lock);
    return ok;
}

static void tcp_done(dns_limits *l, uint32_t addr)
{
    pthread_mutex_lock(&l->lock);
    dns_client *c = client_get(l, addr, now_usec(CLOCK_MONOTONIC));
    if (c && c->tcp > 0)
        c->tcp--;
    dns_tcp_threads--;
    pthread_mutex_unlock(&l->lock);
}

static void dns_forward_query(local_dns *n, const uint8_t *buf, size_t len,
                              const struct sockaddr_in *client)
{
    if (!budget_take(n->lim, client->sin_addr.s_addr, true)) {
        local_metrics_dns_query(true);
        return; /* the client retries */
    }
    local_dns_verdict v = local_dns_query_check(buf, len);
    local_metrics_dns_query(v != LOCAL_DNS_RELAY);
    if (v != LOCAL_DNS_RELAY) {
        uint8_t err[12];
        if (v != LOCAL_DNS_DROP && local_dns_query_error(err, buf, len, (int)v) == sizeof(err))
            sendto(n->fd, err, sizeof(err), MSG_DONTWAIT, (const struct sockaddr *)client,
                   sizeof(*client));
        budget_done(n->lim, client->sin_addr.s_addr);
        return;
    }
    dns_slot *s = NULL;
    for (size_t i = 0; i < DNS_SLOTS && !s; i++)
        if (n->slots[i].fd < 0)
            s = &n->slots[i];
    int fd = s ? socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0) : -1;
    if (fd >= 0 &&
        (connect(fd, (const struct sockaddr *)&n->lim->upstream, sizeof(n->lim->upstream)) < 0 ||
         send(fd, buf, len, 0) < 0)) {
        close(fd);
        fd = -1;
    }
    if (fd < 0) { /* overloaded: the client retries */
        budget_done(n->lim, client->sin_addr.s_addr);
        return;
    }
    s->fd = fd;
    s->client = *client;
    s->deadline = now_usec(CLOCK_MONOTONIC) + DNS_TIMEOUT_USEC;
}

static void slot_free(local_dns *n, dns_slot *s)
{
    close(s->fd);
    s->fd = -1;
    budget_done(n->lim, s->client.sin_addr.s_addr);
}

/* DNS over TCP: one detached thread per connection (DNS_TCP_MAX in all, DNS_TCP_PER_CLIENT per
 * sandbox), relaying length-prefixed, checked queries to the upstream over TCP; every query
 * takes a token of the sandbox's bucket. */
typedef struct dns_tcp_conn {
    int fd;
    uint32_t client; /* network byte order */
    dns_limits *lim; /* a reference */
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

static void set_timeouts(int fd)
{
    struct timeval tv = {.tv_sec = 3};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* One query of the connection: checked, relayed (the upstream connection is opened at the first
 * one), its answer written back. False: close the connection. */
static bool dns_tcp_one(dns_tcp_conn *c, int *up, unsigned char *buf)
{
    if (!read_full(c->fd, buf, 2))
        return false;
    size_t len = (size_t)buf[0] << 8 | buf[1];
    if (!read_full(c->fd, buf + 2, len))
        return false;
    if (!budget_take(c->lim, c->client, false)) {
        local_metrics_dns_query(true);
        return false;
    }
    local_dns_verdict v = local_dns_query_check(buf + 2, len);
    local_metrics_dns_query(v != LOCAL_DNS_RELAY);
    if (v == LOCAL_DNS_DROP)
        return false;
    if (v != LOCAL_DNS_RELAY) {
        unsigned char err[2 + 12] = {0, 12};
        local_dns_query_error(err + 2, buf + 2, len, (int)v);
        return loop_send(c->fd, err, sizeof(err)) == 0;
    }
    if (*up < 0) {
        *up = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (*up < 0)
            return false;
        set_timeouts(*up);
        if (connect(*up, (struct sockaddr *)&c->lim->upstream, sizeof(c->lim->upstream)) < 0)
            return false;
    }
    if (loop_send(*up, buf, 2 + len) < 0 || !read_full(*up, buf, 2))
        return false;
    len = (size_t)buf[0] << 8 | buf[1];
    return read_full(*up, buf + 2, len) && loop_send(c->fd, buf, 2 + len) == 0;
}

static void *dns_tcp_thread(void *arg)
{
    dns_tcp_conn *c = arg;
    unsigned char *buf = malloc(2 + 65535);
    int up = -1;
    set_timeouts(c->fd);
    while (buf && dns_tcp_one(c, &up, buf))
        ;
    if (up >= 0)
        close(up);
    free(buf);
    close(c->fd);
    tcp_done(c->lim, c->client);
    limits_unref(c->lim);
    free(c);
    return NULL;
}

static void dns_tcp_accept(local_dns *n)
{
    struct sockaddr_in from;
    socklen_t fl = sizeof(from);
    int fd = accept4(n->tcp_fd, (struct sockaddr *)&from, &fl, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    dns_tcp_conn *c = malloc(sizeof(*c));
    if (!c || fl != sizeof(from) || !tcp_take(n->lim, from.sin_addr.s_addr)) {
        free(c);
        close(fd);
        return;
    }
    *c = (dns_tcp_conn){fd, from.sin_addr.s_addr, n->lim};
    n->lim->refs++;
    pthread_attr_t attr;
    pthread_t t;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    if (pthread_create(&t, &attr, dns_tcp_thread, c) != 0) {
        close(fd);
        tcp_done(n->lim, c->client);
        n->lim->refs--;
        free(c);
    }
    pthread_attr_destroy(&attr);
}

/* Reads every datagram waiting (up to DNS_DRAIN), so that a flood from one sandbox does not fill
 * the socket's buffer and crowd out the others' queries. */
static void dns_drain(local_dns *n)
{
    uint8_t buf[LOCAL_DNS_QUERY_MAX + 1];
    for (size_t i = 0; i < DNS_DRAIN; i++) {
        struct sockaddr_in from;
        socklen_t fl = sizeof(from);
        ssize_t got = recvfrom(n->fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC,
                               (struct sockaddr *)&from, &fl);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return;
        if (fl != sizeof(from) || from.sin_family != AF_INET)
            continue;
        /* An oversized datagram is checked as its first LOCAL_DNS_QUERY_MAX + 1 bytes: never
         * relayed, FORMERR when it starts like a query. */
        dns_forward_query(n, buf, MIN((size_t)got, sizeof(buf)), &from);
    }
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
                slot_free(n, &n->slots[i]);
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
        for (size_t i = 3; i < np; i++) {
            if (!p[i].revents)
                continue;
            dns_slot *s = owner[i];
            uint8_t buf[4096];
            ssize_t got = recv(s->fd, buf, sizeof(buf), 0);
            if (got > 0)
                sendto(n->fd, buf, (size_t)got, MSG_DONTWAIT, (const struct sockaddr *)&s->client,
                       sizeof(s->client));
            slot_free(n, s);
        }
        if (p[1].revents & POLLIN)
            dns_drain(n);
        if (p[2].revents & POLLIN)
            dns_tcp_accept(n);
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
    int k = parse_upstream(upstream, &n->lim->upstream);
    if (k < 0) {
        log_warn("DNS forwarder off: no usable upstream resolver", "upstream",
                 upstream ? upstream : "/etc/resolv.conf");
        *ret_why = "no DNS forwarder (no usable upstream resolver)";
        return;
    }
    struct sockaddr_in sa = {
        .sin_family = AF_INET, .sin_port = htons(53), .sin_addr.s_addr = htonl(n->addr)};
    n->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    if (n->fd >= 0)
        setsockopt(n->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    /* IP_FREEBIND: the bridge address may still be tentative. */
    if (n->fd >= 0)
        setsockopt(n->fd, IPPROTO_IP, IP_FREEBIND, &one, sizeof(one));
    /* Room for a burst of every sandbox while the thread is busy (best effort). */
    int rcvbuf = DNS_RCVBUF;
    if (n->fd >= 0 && setsockopt(n->fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)) < 0)
        setsockopt(n->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    if (n->fd < 0 || bind(n->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        (n->stop = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
        log_warn("DNS forwarder off: cannot listen", "address", n->addr_s, "error",
                 strerror(errno));
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
        if (bind(n->tcp_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(n->tcp_fd, 64) < 0) {
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

local_dns *local_dns_start(uint32_t addr, const char *upstream, const local_dns_limits *limits,
                           const char **ret_why)
{
    local_dns *n = calloc(1, sizeof(*n));
    dns_limits *l = calloc(1, sizeof(*l));
    *ret_why = NULL;
    if (!n || !l) {
        free(n);
        free(l);
        *ret_why = "no DNS forwarder (out of memory)";
        return NULL;
    }
    pthread_mutex_init(&l->lock, NULL);
    l->refs = 1;
    if (limits)
        l->opt = *limits;
    if (!l->opt.rate)
        l->opt.rate = LOCAL_DNS_DEFAULT_RATE;
    if (!l->opt.burst)
        l->opt.burst = LOCAL_DNS_DEFAULT_BURST;
    if (!l->opt.inflight)
        l->opt.inflight = LOCAL_DNS_DEFAULT_INFLIGHT;
    n->lim = l;
    n->addr = addr;
    snprintf(n->addr_s, sizeof(n->addr_s), "%u.%u.%u.%u", addr >> 24, (addr >> 16) & 255,
             (addr >> 8) & 255, addr & 255);
    n->fd = n->tcp_fd = n->stop = -1;
    for (size_t i = 0; i < DNS_SLOTS; i++)
        n->slots[i].fd = -1;
    dns_start(n, upstream, ret_why);
    if (n->started) {
        char budget[96];
        snprintf(budget, sizeof(budget), "%u/s, burst %u, %u in flight", l->opt.rate, l->opt.burst,
                 l->opt.inflight);
        log_info("DNS forwarder on", "address", n->addr_s, "budget_per_sandbox", budget);
    }
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
    limits_unref(n->lim);
    free(n);
}
