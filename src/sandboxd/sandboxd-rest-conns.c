/* REST connection bookkeeping: the header deadline (Go's ReadHeaderTimeout), the connection cap
 * with eviction, and the list stop_accepting uses to close idle connections.
 *
 * libmicrohttpd's connection timeout is an inactivity timeout: a client sending one header line
 * every 2 s never trips it. So every connection carries a phase and when it entered it; a
 * watchdog thread shuts down (shutdown(2); libmicrohttpd's thread for the connection then sees
 * EOF and closes it) any connection still sending a request head `header_timeout` after the head
 * began (accept, or the request line of a kept-alive connection), and any idle kept-alive
 * connection past the idle timeout. A connection whose head is complete is never cut (Go has no
 * body timeout either). The watchdog sleeps until the earliest of those deadlines (not at all
 * while there is none): a phase change that brings a deadline earlier wakes it, so an idle
 * sandbox's sandboxd does not wake up for it.
 *
 * At --max-connections the accept policy makes room by cutting the oldest connection that is
 * still sending its head or idle; only when every connection carries a request in flight is the
 * new one refused. So a readiness probe is answered however many slow clients are connected. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "basic/time-util.h"
#include "sandboxd/sandboxd-rest-internal.h"
#include "shared/log.h"

#define USEC_NEVER UINT64_MAX

/* When rc is to be cut in its current phase; USEC_NEVER when never. Under conns_lock. */
static usec_t conn_deadline(const rest_server *s, const rest_conn *rc)
{
    usec_t limit = rc->phase == REST_CONN_HEAD   ? s->header_timeout
                   : rc->phase == REST_CONN_IDLE ? s->idle_timeout
                                                 : 0;
    return limit > 0 && !rc->cut ? rc->since + limit : USEC_NEVER;
}

/* rc's deadline changed: wakes the watchdog when it sleeps past it. Under conns_lock. */
static void watchdog_reschedule(rest_server *s, const rest_conn *rc)
{
    if (conn_deadline(s, rc) < s->watchdog_wake)
        pthread_cond_signal(&s->watchdog_cond);
}

/* Under conns_lock. */
static void conn_cut(rest_server *s, rest_conn *rc)
{
    if (rc->cut)
        return;
    rc->cut = true;
    s->n_cut++;
    shutdown(rc->fd, SHUT_RDWR);
}

void rest_conn_set_phase(rest_server *s, rest_conn *rc, rest_conn_phase phase)
{
    if (!rc)
        return;
    pthread_mutex_lock(&s->conns_lock);
    /* A kept-alive connection's next head starts with its request line. */
    if (phase != REST_CONN_HEAD || rc->phase == REST_CONN_IDLE) {
        rc->phase = phase;
        rc->since = now_usec(CLOCK_MONOTONIC);
        watchdog_reschedule(s, rc);
    }
    pthread_mutex_unlock(&s->conns_lock);
}

enum MHD_Result rest_conns_on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    rest_server *s = cls;
    bool ok = true;
    pthread_mutex_lock(&s->conns_lock);
    if (s->n_conns - s->n_cut >= s->max_conns) {
        rest_conn *victim = NULL;
        for (rest_conn *rc = s->conns; rc; rc = rc->next)
            if (!rc->cut && rc->phase != REST_CONN_BUSY && (!victim || rc->since < victim->since))
                victim = rc;
        if (victim)
            conn_cut(s, victim);
        else
            ok = false;
    }
    pthread_mutex_unlock(&s->conns_lock);
    if (!ok)
        log_debug("rest: connection refused: every connection has a request in flight");
    return ok ? MHD_YES : MHD_NO;
}

void rest_conns_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                       enum MHD_ConnectionNotificationCode code)
{
    rest_server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        rest_conn *rc = ci ? calloc(1, sizeof(*rc)) : NULL;
        if (!rc)
            return;
        rc->fd = ci->connect_fd;
        rc->phase = REST_CONN_HEAD;
        rc->since = now_usec(CLOCK_MONOTONIC);
        pthread_mutex_lock(&s->conns_lock);
        rc->next = s->conns;
        if (s->conns)
            s->conns->prev = rc;
        s->conns = rc;
        s->n_conns++;
        watchdog_reschedule(s, rc);
        pthread_mutex_unlock(&s->conns_lock);
        *socket_context = rc;
        return;
    }
    rest_conn *rc = *socket_context;
    if (!rc)
        return;
    /* Called before libmicrohttpd closes the fd: under the lock the fd is never a reused one. */
    pthread_mutex_lock(&s->conns_lock);
    if (rc->prev)
        rc->prev->next = rc->next;
    else
        s->conns = rc->next;
    if (rc->next)
        rc->next->prev = rc->prev;
    s->n_conns--;
    if (rc->cut)
        s->n_cut--;
    pthread_mutex_unlock(&s->conns_lock);
    free(rc);
    *socket_context = NULL;
}

/* Cuts the connections past their deadline; returns the earliest deadline of the others
 * (USEC_NEVER: none). Under conns_lock. */
static usec_t cut_expired(rest_server *s)
{
    usec_t now = now_usec(CLOCK_MONOTONIC), next = USEC_NEVER;
    for (rest_conn *rc = s->conns; rc; rc = rc->next) {
        usec_t deadline = conn_deadline(s, rc);
        if (deadline <= now)
            conn_cut(s, rc);
        else if (deadline < next)
            next = deadline;
    }
    return next;
}

static void *watchdog_main(void *arg)
{
    rest_server *s = arg;
    pthread_mutex_lock(&s->conns_lock);
    while (!s->watchdog_stop) {
        s->watchdog_wake = cut_expired(s);
        if (s->watchdog_wake == USEC_NEVER) {
            pthread_cond_wait(&s->watchdog_cond, &s->conns_lock);
            continue;
        }
        struct timespec ts = {
            .tv_sec = (time_t)(s->watchdog_wake / USEC_PER_SEC),
            .tv_nsec = (long)(s->watchdog_wake % USEC_PER_SEC) * 1000L,
        };
        pthread_cond_timedwait(&s->watchdog_cond, &s->conns_lock, &ts);
    }
    pthread_mutex_unlock(&s->conns_lock);
    return NULL;
}

int rest_conns_init(rest_server *s)
{
    const sandboxd_config *cfg = s->sd->config;
    s->max_conns = sandboxd_max_connections(cfg);
    s->header_timeout = cfg->header_timeout;
    s->idle_timeout = cfg->http_idle_timeout;
    s->watchdog_wake = USEC_NEVER;
    pthread_mutex_init(&s->conns_lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&s->watchdog_cond, &attr);
    pthread_condattr_destroy(&attr);
    int r = -pthread_create(&s->watchdog, NULL, watchdog_main, s);
    if (r < 0)
        return r;
    s->watchdog_running = true;
    return 0;
}

void rest_conns_done(rest_server *s)
{
    if (s->watchdog_running) {
        pthread_mutex_lock(&s->conns_lock);
        s->watchdog_stop = true;
        pthread_cond_signal(&s->watchdog_cond);
        pthread_mutex_unlock(&s->conns_lock);
        pthread_join(s->watchdog, NULL);
        s->watchdog_running = false;
    }
}
