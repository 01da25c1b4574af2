/* The event-driven HTTP/1.1 engine. A fixed pool of worker threads (one per CPU), each with its
 * own epoll loop (edge-triggered, every fd registered once), accepts connections from the shared
 * listener (EPOLLEXCLUSIVE), sniffs the h2 preface and serves every proxied request without a
 * thread of its own: the head goes through the proxy core's admission (router-core.h), the
 * upstream connection (unix socket or TCP, connected without blocking; a host name looked up on
 * a helper thread) is kept alive per client connection, a request body streams upstream as it
 * arrives and the response is relayed by the core's relay, with flow control both ways (neither
 * side is read while more than OUT_HIGH bytes wait for the other); after a 101 the connection
 * is a byte tunnel (router-loop-tunnel.c). Router-made answers (healthz, 400 and the smuggling
 * refusals, 401, 404, 431, 502, 504) are written by the loop too; a resolution that may block
 * runs on a helper thread while the connection waits.
 *
 * What is left is handed off, at a request boundary and before any of that request was
 * answered, to a thread running the blocking code (router_http1_serve / router_h2_serve) with
 * the bytes not yet consumed: the legacy emulation (blocking calls to sandboxd) and HTTP/2. An
 * HTTP/2 connection stays on its thread; an HTTP/1.1 one comes back after its legacy request
 * (router_loop_adopt: the worker takes it from its adoption list when its eventfd fires). */
#include <errno.h>
#include <fcntl.h>
#include <http_parser.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "basic/macro.h"
#include "basic/time-util.h"
#include "router/router-loop-internal.h"

/* A connection the blocking code gives back, waiting for its worker. */
typedef struct loop_adoption {
    struct loop_adoption *next;
    int fd;
    bool loopback;
    size_t npre;
    char pre[];
} loop_adoption;

/* Takes the list of connections given back (all of them when the worker stops). */
static loop_adoption *adoptions_take(lworker *w, bool exiting)
{
    pthread_mutex_lock(&w->lock);
    loop_adoption *list = w->adopt;
    w->adopt = NULL;
    if (exiting)
        w->exited = true;
    pthread_mutex_unlock(&w->lock);
    return list;
}

static void adoptions_run(lworker *w, bool exiting)
{
    for (loop_adoption *a = adoptions_take(w, exiting), *next; a; a = next) {
        next = a->next;
        if (exiting) {
            w->L->hooks.closed(w->L->hooks.payload, a->fd);
            close(a->fd);
        } else
            router_loop_conn_adopt(w, a->fd, a->loopback, a->pre, a->npre);
        free(a);
    }
}

int router_loop_adopt(router_loop *L, int fd, bool loopback, const char *pre, size_t npre)
{
    if (npre > IN_CAP)
        return -E2BIG;
    if (atomic_load(&L->phase) != 0)
        return -ESHUTDOWN;
    loop_adoption *a = malloc(sizeof(*a) + npre);
    if (!a)
        return -ENOMEM;
    *a = (loop_adoption){.fd = fd, .loopback = loopback, .npre = npre};
    if (npre)
        memcpy(a->pre, pre, npre);
    size_t nw = L->nw; /* workers only ever get added while starting */
    if (nw == 0)
        return -ESHUTDOWN;
    lworker *w = &L->w[(size_t)fd % nw]; /* spread without shared state */
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    pthread_mutex_lock(&w->lock);
    bool taken = !w->exited;
    if (taken) {
        a->next = w->adopt;
        w->adopt = a;
    }
    pthread_mutex_unlock(&w->lock);
    if (!taken) {
        fcntl(fd, F_SETFL, fl);
        free(a);
        return -ESHUTDOWN;
    }
    uint64_t one = 1;
    (void)!write(w->ev, &one, sizeof(one));
    return 0;
}

static void *worker_main(void *p)
{
    lworker *w = p;
    router_loop *L = w->L;
    struct epoll_event evs[128];
    bool listening = true;
    long long last_sweep = now_msec(CLOCK_MONOTONIC);
    for (;;) {
        int ph = atomic_load(&L->phase);
        if (ph >= 1 && listening) {
            epoll_ctl(w->ep, EPOLL_CTL_DEL, L->listen_fd, NULL);
            listening = false;
        }
        if (ph >= 2)
            break;
        int n = epoll_wait(w->ep, evs, 128, w->conns ? 1000 : -1);
        if (n < 0 && errno != EINTR)
            break;
        for (int i = 0; i < n; i++) {
            void *ptr = evs[i].data.ptr;
            uint32_t e = evs[i].events;
            if (ptr == NULL) { /* the listener */
                for (int k = 0; k < 64 && atomic_load(&L->phase) == 0; k++) {
                    int fd = accept4(L->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                    if (fd < 0)
                        break;
                    int r = L->hooks.accepted(L->hooks.payload, fd);
                    if (r < 0) {
                        close(fd);
                        continue;
                    }
                    if (r > 0 && !router_loop_make_room(w)) {
                        L->hooks.closed(L->hooks.payload, fd);
                        close(fd);
                        continue;
                    }
                    router_loop_conn_new(w, fd);
                }
                continue;
            }
            if (ptr == (void *)w) { /* the eventfd */
                uint64_t v;
                (void)!read(w->ev, &v, sizeof(v));
                router_loop_resolve_done(w);
                adoptions_run(w, false);
                continue;
            }
            /* A connection closed earlier in this batch could have been freed: events of this
             * batch for it are skipped by checking membership. */
            lconn *c = (lconn *)((uintptr_t)ptr & ~TAG_UP);
            if (c->dead)
                continue;
            if ((uintptr_t)ptr & TAG_UP) {
                if (e & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP))
                    c->up_can_read = true;
                if (e & (EPOLLHUP | EPOLLERR | EPOLLRDHUP))
                    c->up_rdhup = true;
                if (e & (EPOLLOUT | EPOLLHUP | EPOLLERR))
                    c->up_can_write = true;
                if (c->st != ST_UPSTREAM && c->st != ST_TUNNEL) {
                    /* an idle kept-alive upstream went away: forget it */
                    if (e & (EPOLLHUP | EPOLLERR | EPOLLRDHUP))
                        c->up_eof = true;
                    continue;
                }
            } else {
                if (e & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP))
                    c->can_read = true;
                if (e & (EPOLLHUP | EPOLLERR | EPOLLRDHUP))
                    c->rdhup = true;
                if (e & (EPOLLOUT | EPOLLHUP | EPOLLERR))
                    c->can_write = true;
            }
            router_loop_conn_run(c);
        }
        long long now = now_msec(CLOCK_MONOTONIC);
        if (now - last_sweep >= 1000) {
            last_sweep = now;
            router_loop_sweep(w, now);
        }
        router_loop_reap(w);
    }
    adoptions_run(w, true);
    while (w->conns)
        router_loop_conn_close(w->conns);
    router_loop_reap(w);
    return NULL;
}

int router_loop_start(router_ctx *ctx, int listen_fd, const router_loop_hooks *hooks,
                      router_loop **ret)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    const char *env = getenv("ASB_ROUTER_WORKERS");
    if (env && atoi(env) > 0)
        ncpu = atoi(env);
    size_t nw = ncpu < 1 ? 1 : ncpu > 64 ? 64 : (size_t)ncpu;
    router_loop *L = calloc(1, sizeof(*L));
    if (!L)
        return -ENOMEM;
    L->ctx = ctx;
    L->listen_fd = listen_fd;
    L->hooks = *hooks;
    L->w = calloc(nw, sizeof(*L->w));
    if (!L->w) {
        free(L);
        return -ENOMEM;
    }
    int fl = fcntl(listen_fd, F_GETFL);
    fcntl(listen_fd, F_SETFL, fl | O_NONBLOCK);
    /* set before any worker runs: a connection handed off and given back (router_loop_adopt)
     * may find the loop through *ret before this returns */
    *ret = L;
    int r = 0;
    for (size_t i = 0; i < nw; i++) {
        lworker *w = &L->w[i];
        w->L = L;
        pthread_mutex_init(&w->lock, NULL);
        w->ep = epoll_create1(EPOLL_CLOEXEC);
        w->ev = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        struct epoll_event le = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.ptr = NULL};
        struct epoll_event ee = {.events = EPOLLIN, .data.ptr = w};
        if (w->ep < 0 || w->ev < 0 || epoll_ctl(w->ep, EPOLL_CTL_ADD, listen_fd, &le) < 0 ||
            epoll_ctl(w->ep, EPOLL_CTL_ADD, w->ev, &ee) < 0) {
            r = -errno;
            safe_close(w->ep);
            safe_close(w->ev);
            break;
        }
        if ((r = -pthread_create(&w->thread, NULL, worker_main, w)) < 0) {
            close(w->ep);
            close(w->ev);
            break;
        }
        L->nw++;
    }
    if (r < 0) {
        *ret = NULL;
        router_loop_stop(L, 2);
        return r;
    }
    *ret = L;
    return 0;
}

static void wake_all(router_loop *L)
{
    uint64_t one = 1;
    for (size_t i = 0; i < L->nw; i++)
        (void)!write(L->w[i].ev, &one, sizeof(one));
}

void router_loop_stop(router_loop *L, int phase)
{
    if (!L)
        return;
    atomic_store(&L->phase, phase);
    wake_all(L);
    if (phase < 2)
        return;
    for (size_t i = 0; i < L->nw; i++) {
        pthread_join(L->w[i].thread, NULL);
        close(L->w[i].ep);
        close(L->w[i].ev);
    }
    free(L->w);
    free(L);
}
