/* Container starts off the reconcile loop: a bounded pool of worker threads runs `runc run`
 * and the first health check of each new Sandbox, so that N sandboxes start in parallel and the
 * loop (deletions, status, expiry, other sandboxes) never waits behind one. The loop decides
 * (handler, failures, status) and records entries; a worker only runs the start and hands the
 * outcome back (rec_start_take_done). See local-reconcile-internal.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "basic/macro.h"
#include "basic/time-util.h"
#include "local/reconcile/local-claim-activity.h"
#include "local/reconcile/local-reconcile-internal.h"
#include "local/reconcile/local-start-priority.h"
#include "reconcile/reconcile.h"
#include "shared/log.h"

#define START_HEALTH_TIMEOUT_MS 5000

rec_start *rec_start_free(rec_start *s)
{
    if (!s)
        return NULL;
    free(s->uid);
    json_decref(s->sandbox);
    oci_runtime_done(&s->rt);
    free(s->failure.message);
    free(s);
    return NULL;
}

/* Locked. */
static ssize_t busy_index(rec_starter *st, const char *uid)
{
    for (size_t i = 0; i < st->n_busy; i++)
        if (strcmp(st->busy[i], uid) == 0)
            return (ssize_t)i;
    return -1;
}

bool rec_start_pending(local_reconciler *r, const char *uid)
{
    pthread_mutex_lock(&r->starter.lock);
    bool b = busy_index(&r->starter, uid) >= 0;
    pthread_mutex_unlock(&r->starter.lock);
    return b;
}

void rec_start_collected(local_reconciler *r, const char *uid)
{
    rec_starter *st = &r->starter;
    pthread_mutex_lock(&st->lock);
    ssize_t i = busy_index(st, uid);
    if (i >= 0) {
        free(st->busy[i]);
        st->busy[i] = st->busy[--st->n_busy];
    }
    pthread_mutex_unlock(&st->lock);
}

int rec_start_async(local_reconciler *r, const json_t *sb, size_t handler)
{
    rec_starter *st = &r->starter;
    const char *uid = api_meta_string(sb, "uid");
    const oci_runtime *rt = rec_handler(r, handler);
    if (!uid)
        return -EINVAL;
    rec_start *s = calloc(1, sizeof(*s));
    if (!s || !(s->uid = strdup(uid)) || !(s->sandbox = json_deep_copy(sb)) ||
        oci_runtime_init(&s->rt, rt->binary, rt->root) < 0) {
        rec_start_free(s);
        return -ENOMEM;
    }
    s->handler = handler;
    const json_t *labels = json_object_get(json_object_get(sb, "metadata"), "labels");
    s->warm_member = json_object_get(labels, RECONCILE_LABEL_WARM_POOL) != NULL;
    s->queued = now_usec(CLOCK_MONOTONIC);
    pthread_mutex_lock(&st->lock);
    if (st->n_threads == 0 || st->stop) {
        pthread_mutex_unlock(&st->lock);
        rec_start_free(s);
        return -ESHUTDOWN;
    }
    if (busy_index(st, uid) >= 0) { /* the caller checks; never two starts of one object */
        pthread_mutex_unlock(&st->lock);
        rec_start_free(s);
        return 0;
    }
    char **v = realloc(st->busy, (st->n_busy + 1) * sizeof(*v));
    if (!v || !(v[st->n_busy] = strdup(uid))) {
        if (v)
            st->busy = v;
        pthread_mutex_unlock(&st->lock);
        rec_start_free(s);
        return -ENOMEM;
    }
    st->busy = v;
    st->n_busy++;
    if (st->tail)
        st->tail->next = s;
    else
        st->head = s;
    st->tail = s;
    pthread_cond_signal(&st->work);
    pthread_mutex_unlock(&st->lock);
    return 0;
}

rec_start *rec_start_take_done(local_reconciler *r)
{
    pthread_mutex_lock(&r->starter.lock);
    rec_start *d = r->starter.done, *rev = NULL;
    r->starter.done = NULL;
    pthread_mutex_unlock(&r->starter.lock);
    while (d) { /* pushed newest first */
        rec_start *n = d->next;
        d->next = rev;
        rev = d;
        d = n;
    }
    return rev;
}

static void run_start(local_reconciler *r, rec_start *s)
{
    usec_t t0 = now_usec(CLOCK_MONOTONIC);
    int k = local_start_priority_set(s->warm_member);
    if (k < 0)
        log_debug("cannot set a start's priority", "error", strerror(-k));
    s->result = rec_materialise_run(r, s->sandbox, &s->rt, &s->pid, &s->limits, &s->failure);
    if (s->result == 0)
        s->ready = rec_health(r, s->uid, START_HEALTH_TIMEOUT_MS);
    /* Also when it did not answer health yet: the loop's later checks must not leave it low. */
    if (s->warm_member && s->result == 0 && s->pid > 0 &&
        (k = local_start_priority_restore(s->pid)) < 0)
        log_debug("cannot restore a started sandbox's priority", "uid", s->uid, "error",
                  strerror(-k));
    /* Start and end on the monotonic clock: overlapping intervals show the parallelism. */
    usec_t t1 = now_usec(CLOCK_MONOTONIC);
    char start[32], end[32], ms[32];
    snprintf(start, sizeof(start), "%llu", (unsigned long long)t0);
    snprintf(end, sizeof(end), "%llu", (unsigned long long)t1);
    snprintf(ms, sizeof(ms), "%.1f", (double)(t1 - t0) / 1000.0);
    log_info("sandbox start finished", "uid", s->uid, "sandbox",
             api_meta_string(s->sandbox, "name") ?: "", "ready", s->ready ? "true" : "false",
             "start_usec", start, "end_usec", end, "start_ms", ms);
}

/* Locked. The first queued start that may run now (unlinked), or NULL with *ret_wake set to
 * when the earliest held one may (local-claim-activity.h). */
static rec_start *take_runnable(rec_starter *st, usec_t *ret_wake)
{
    usec_t now = now_usec(CLOCK_MONOTONIC), wake = UINT64_MAX;
    for (rec_start **pp = &st->head, *prev = NULL; *pp; prev = *pp, pp = &(*pp)->next) {
        rec_start *s = *pp;
        usec_t at = local_claim_activity_release(s->warm_member, s->queued, now);
        if (at > now) {
            wake = MIN(wake, at);
            continue;
        }
        *pp = s->next;
        if (st->tail == s)
            st->tail = prev;
        s->next = NULL;
        return s;
    }
    *ret_wake = wake;
    return NULL;
}

/* Locked. Waits for a signal or until `until` (CLOCK_MONOTONIC). */
static void wait_until(rec_starter *st, usec_t until)
{
    usec_t now = now_usec(CLOCK_MONOTONIC);
    if (until <= now)
        return;
    /* The condition variable uses CLOCK_REALTIME: a relative wait converted to it (a clock
     * step only makes the hold shorter or longer by the step, never unbounded). */
    struct timespec ts =
        timespec_realtime_after(MIN(until - now, LOCAL_CLAIM_ACTIVITY_MAX_HOLD_USEC));
    pthread_cond_timedwait(&st->work, &st->lock, &ts);
}

static void *start_worker(void *arg)
{
    local_reconciler *r = arg;
    rec_starter *st = &r->starter;
    pthread_mutex_lock(&st->lock);
    for (;;) {
        while (!st->head && !st->stop)
            pthread_cond_wait(&st->work, &st->lock);
        if (st->stop)
            break;
        usec_t wake = 0;
        rec_start *s = take_runnable(st, &wake);
        if (!s) {
            /* Only refills held by a claim burst: wait for the earliest to be released (or
             * for new work, which may be a claim's own start). */
            wait_until(st, wake);
            continue;
        }
        pthread_mutex_unlock(&st->lock);
        if (local_store_is_shutdown(r->store))
            s->result = -ESHUTDOWN; /* SIGTERM: no more containers */
        else
            run_start(r, s);
        pthread_mutex_lock(&st->lock);
        s->next = st->done;
        st->done = s;
        pthread_mutex_unlock(&st->lock);
        local_store_nudge(r->store); /* the loop collects it now, not at its next wake-up */
        pthread_mutex_lock(&st->lock);
    }
    pthread_mutex_unlock(&st->lock);
    return NULL;
}

int rec_starter_start(local_reconciler *r, size_t n)
{
    rec_starter *st = &r->starter;
    st->threads = calloc(n, sizeof(pthread_t));
    if (!st->threads)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        int k = pthread_create(&st->threads[i], NULL, start_worker, r);
        if (k != 0)
            return st->n_threads ? 0 : -k;
        st->n_threads++;
    }
    return 0;
}

void rec_starter_stop(local_reconciler *r)
{
    rec_starter *st = &r->starter;
    pthread_mutex_lock(&st->lock);
    st->stop = true;
    pthread_cond_broadcast(&st->work);
    pthread_mutex_unlock(&st->lock);
    for (size_t i = 0; i < st->n_threads; i++)
        pthread_join(st->threads[i], NULL);
    free(st->threads);
    st->threads = NULL;
    st->n_threads = 0;
    while (st->head) { /* never started: forgotten, the next asb serve starts them */
        rec_start *s = st->head;
        st->head = s->next;
        rec_start_collected(r, s->uid);
        rec_start_free(s);
    }
    st->tail = NULL;
}
