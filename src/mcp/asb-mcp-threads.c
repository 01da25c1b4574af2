/* `asb mcp`: the threads that run requests. They are joinable, not detached: a thread is only
 * gone once joined, after its thread-local destructors (libcurl's and OpenSSL's per-thread state)
 * have run, so exiting after mcp_threads_join_all() frees everything. Finished threads are joined
 * whenever a new one starts, so a long-lived server keeps no zombies. */
#include <errno.h>
#include <stdlib.h>

#include "mcp/asb-mcp.h"

typedef struct mcp_thread {
    pthread_t id;
    bool finished;
    void *(*fn)(void *);
    void *arg;
    struct mcp_thread *next;
} mcp_thread;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static mcp_thread *threads;

static void *trampoline(void *arg)
{
    mcp_thread *t = arg;
    t->fn(t->arg);
    pthread_mutex_lock(&lock);
    t->finished = true;
    pthread_mutex_unlock(&lock);
    return NULL;
}

/* Joins the finished threads (all of them with `all`, waiting for the others). */
static void reap(bool all)
{
    for (;;) {
        pthread_mutex_lock(&lock);
        mcp_thread **p = &threads;
        while (*p && !(all || (*p)->finished))
            p = &(*p)->next;
        mcp_thread *t = *p;
        if (t)
            *p = t->next;
        pthread_mutex_unlock(&lock);
        if (!t)
            return;
        pthread_join(t->id, NULL);
        free(t);
    }
}

int mcp_thread_start(void *(*fn)(void *), void *arg)
{
    reap(false);
    mcp_thread *t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->fn = fn;
    t->arg = arg;
    pthread_mutex_lock(&lock);
    int r = pthread_create(&t->id, NULL, trampoline, t);
    if (r == 0) {
        t->next = threads;
        threads = t;
    }
    pthread_mutex_unlock(&lock);
    if (r != 0) {
        free(t);
        return -r;
    }
    return 0;
}

void mcp_threads_join_all(void)
{
    reap(true);
}
