/* A work queue with client-go's semantics: a key is queued at most once; a key being processed
 * is never handed to a second worker (an add meanwhile marks it dirty and it is queued again on
 * done); delayed adds; per-key exponential backoff for failures. */
#include "kube/kube.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "basic/macro.h"
#include "basic/time-util.h"

typedef struct delayed {
    char *key;
    int64_t when;
} delayed;

struct kube_queue {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    char **fifo;
    size_t head, len, cap;
    json_t *queued;     /* key -> true: in fifo */
    json_t *processing; /* key -> true */
    json_t *dirty;      /* key -> true: added while processing */
    json_t *failures;   /* key -> count */
    delayed *later;
    size_t n_later, cap_later;
    bool shutdown;
    char *name;
};

kube_queue *kube_queue_new(const char *name)
{
    kube_queue *q = calloc(1, sizeof *q);
    if (!q)
        return NULL;
    pthread_mutex_init(&q->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&q->cond, &ca);
    pthread_condattr_destroy(&ca);
    q->queued = json_object();
    q->processing = json_object();
    q->dirty = json_object();
    q->failures = json_object();
    q->name = strdup(name);
    return q;
}

kube_queue *kube_queue_free(kube_queue *q)
{
    if (!q)
        return NULL;
    for (size_t i = 0; i < q->len; i++)
        free(q->fifo[(q->head + i) % q->cap]);
    free(q->fifo);
    for (size_t i = 0; i < q->n_later; i++)
        free(q->later[i].key);
    free(q->later);
    json_decref(q->queued);
    json_decref(q->processing);
    json_decref(q->dirty);
    json_decref(q->failures);
    free(q->name);
    pthread_cond_destroy(&q->cond);
    pthread_mutex_destroy(&q->lock);
    free(q);
    return NULL;
}

static void push_locked(kube_queue *q, const char *key)
{
    if (json_object_get(q->queued, key))
        return;
    if (json_object_get(q->processing, key)) {
        json_object_set_new(q->dirty, key, json_true());
        return;
    }
    if (q->len == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 64;
        char **n = malloc(cap * sizeof *n);
        if (!n)
            return;
        for (size_t i = 0; i < q->len; i++)
            n[i] = q->fifo[(q->head + i) % q->cap];
        free(q->fifo);
        q->fifo = n;
        q->cap = cap;
        q->head = 0;
    }
    char *k = strdup(key);
    if (!k)
        return;
    q->fifo[(q->head + q->len) % q->cap] = k;
    q->len++;
    json_object_set_new(q->queued, key, json_true());
    pthread_cond_signal(&q->cond);
}

void kube_queue_add(kube_queue *q, const char *key)
{
    pthread_mutex_lock(&q->lock);
    if (!q->shutdown)
        push_locked(q, key);
    pthread_mutex_unlock(&q->lock);
}

void kube_queue_add_after(kube_queue *q, const char *key, int64_t usec)
{
    if (usec <= 0) {
        kube_queue_add(q, key);
        return;
    }
    pthread_mutex_lock(&q->lock);
    int64_t when = (int64_t)now_usec(CLOCK_MONOTONIC) + usec;
    /* One pending delayed entry per key: keep the earliest. */
    for (size_t i = 0; i < q->n_later; i++)
        if (strcmp(q->later[i].key, key) == 0) {
            if (when < q->later[i].when)
                q->later[i].when = when;
            pthread_cond_broadcast(&q->cond);
            pthread_mutex_unlock(&q->lock);
            return;
        }
    if (q->n_later == q->cap_later) {
        size_t cap = q->cap_later ? q->cap_later * 2 : 16;
        delayed *n = realloc(q->later, cap * sizeof *n);
        if (!n) {
            pthread_mutex_unlock(&q->lock);
            return;
        }
        q->later = n;
        q->cap_later = cap;
    }
    q->later[q->n_later].key = strdup(key);
    q->later[q->n_later].when = when;
    if (q->later[q->n_later].key)
        q->n_later++;
    pthread_cond_broadcast(&q->cond);
    pthread_mutex_unlock(&q->lock);
}

void kube_queue_add_rate_limited(kube_queue *q, const char *key)
{
    pthread_mutex_lock(&q->lock);
    json_int_t n = json_integer_value(json_object_get(q->failures, key));
    json_object_set_new(q->failures, key, json_integer(n + 1));
    pthread_mutex_unlock(&q->lock);
    int64_t d = 5000LL << MIN(n, 12);
    kube_queue_add_after(q, key, MIN(d, 30000000LL));
}

void kube_queue_forget(kube_queue *q, const char *key)
{
    pthread_mutex_lock(&q->lock);
    json_object_del(q->failures, key);
    pthread_mutex_unlock(&q->lock);
}

static int64_t promote_locked(kube_queue *q)
{
    int64_t now = (int64_t)now_usec(CLOCK_MONOTONIC), next = -1;
    for (size_t i = 0; i < q->n_later;) {
        if (q->later[i].when <= now) {
            push_locked(q, q->later[i].key);
            free(q->later[i].key);
            q->later[i] = q->later[--q->n_later];
            continue;
        }
        if (next < 0 || q->later[i].when < next)
            next = q->later[i].when;
        i++;
    }
    return next;
}

char *kube_queue_get(kube_queue *q)
{
    pthread_mutex_lock(&q->lock);
    for (;;) {
        if (q->shutdown) {
            pthread_mutex_unlock(&q->lock);
            return NULL;
        }
        int64_t next = promote_locked(q);
        if (q->len > 0)
            break;
        if (next < 0)
            pthread_cond_wait(&q->cond, &q->lock);
        else {
            struct timespec ts = {next / 1000000, (next % 1000000) * 1000};
            pthread_cond_timedwait(&q->cond, &q->lock, &ts);
        }
    }
    char *key = q->fifo[q->head];
    q->head = (q->head + 1) % q->cap;
    q->len--;
    json_object_del(q->queued, key);
    json_object_set_new(q->processing, key, json_true());
    pthread_mutex_unlock(&q->lock);
    return key;
}

void kube_queue_done(kube_queue *q, const char *key)
{
    pthread_mutex_lock(&q->lock);
    json_object_del(q->processing, key);
    if (json_object_get(q->dirty, key)) {
        json_object_del(q->dirty, key);
        if (!q->shutdown)
            push_locked(q, key);
    }
    pthread_mutex_unlock(&q->lock);
}

void kube_queue_shutdown(kube_queue *q)
{
    pthread_mutex_lock(&q->lock);
    q->shutdown = true;
    pthread_cond_broadcast(&q->cond);
    pthread_mutex_unlock(&q->lock);
}

size_t kube_queue_len(kube_queue *q)
{
    pthread_mutex_lock(&q->lock);
    size_t n = q->len + q->n_later;
    pthread_mutex_unlock(&q->lock);
    return n;
}
