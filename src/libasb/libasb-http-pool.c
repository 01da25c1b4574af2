/* See libasb-http-pool.h. */
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "libasb/libasb-http-pool.h"
#include "basic/time-util.h"

typedef struct idle_conn {
    char *hostport; /* NULL: free slot */
    int fd;
    long since_ms; /* CLOCK_MONOTONIC */
} idle_conn;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static idle_conn idle[ASBI_HTTP_POOL_MAX];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void drop(idle_conn *c)
{
    close(c->fd);
    free(c->hostport);
    *c = (idle_conn){.fd = -1};
}

/* A child must not share its parent's connections (their replies would go to either process):
 * it closes its copies and starts empty. The lock may have been held by another thread of the
 * parent at the fork, so it is made anew. */
static void in_child(void)
{
    pthread_mutex_init(&lock, NULL);
    for (size_t i = 0; i < ASBI_HTTP_POOL_MAX; i++)
        if (idle[i].hostport)
            drop(&idle[i]);
}

static void init_once(void)
{
    pthread_atfork(NULL, NULL, in_child);
}

/* Still usable: nothing to read (a reply without a request, or the server's close). */
static bool quiet(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 0) == 0;
}

int asbi_http_pool_take(const char *hostport)
{
    pthread_once(&once, init_once);
    int fd = -1;
    long now = now_msec(CLOCK_MONOTONIC);
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < ASBI_HTTP_POOL_MAX; i++) {
        idle_conn *c = &idle[i];
        if (!c->hostport)
            continue;
        if (now - c->since_ms > ASBI_HTTP_POOL_IDLE_MS || !quiet(c->fd)) {
            drop(c);
            continue;
        }
        if (fd < 0 && strcmp(c->hostport, hostport) == 0) {
            fd = c->fd;
            free(c->hostport);
            *c = (idle_conn){.fd = -1};
        }
    }
    pthread_mutex_unlock(&lock);
    return fd;
}

void asbi_http_pool_put(const char *hostport, int fd)
{
    pthread_once(&once, init_once);
    char *hp = strdup(hostport);
    if (!hp) {
        close(fd);
        return;
    }
    pthread_mutex_lock(&lock);
    idle_conn *slot = NULL;
    for (size_t i = 0; i < ASBI_HTTP_POOL_MAX; i++) /* a free slot, else the oldest */
        if (!slot || !idle[i].hostport ||
            (slot->hostport && idle[i].since_ms < slot->since_ms))
            slot = &idle[i];
    if (slot->hostport)
        drop(slot);
    *slot = (idle_conn){.hostport = hp, .fd = fd, .since_ms = now_msec(CLOCK_MONOTONIC)};
    pthread_mutex_unlock(&lock);
}
