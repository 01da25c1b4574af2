/* Deletion that finishes: a bounded pool of worker threads tears deleted sandboxes down in
 * parallel (runc delete, cgroups, network, sockets, directories) and only then removes the
 * local backend's finalizer, which lets the store delete the object. See
 * local-reconcile-internal.h and docs/local-sandboxes.md. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "basic/macro.h"
#include "basic/time-util.h"
#include "local/reconcile/local-finalizer.h"
#include "local/reconcile/local-reconcile-internal.h"
#include "local/reconcile/local-start-priority.h"
#include "shared/log.h"

static rec_job *job_free(rec_job *j)
{
    if (!j)
        return NULL;
    free(j->uid);
    free(j->ns);
    free(j->name);
    if (j->pidfd >= 0)
        close(j->pidfd);
    oci_runtime_done(&j->rt);
    free(j);
    return NULL;
}

static bool in_list(char **v, size_t n, const char *uid)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i], uid) == 0)
            return true;
    return false;
}

static void list_remove(char **v, size_t *n, const char *uid)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp(v[i], uid) == 0) {
            free(v[i]);
            v[i] = v[--*n];
            return;
        }
}

/* Appends a copy of uid; false on ENOMEM. */
static bool list_add(char ***v, size_t *n, const char *uid)
{
    char **nv = realloc(*v, (*n + 1) * sizeof(char *));
    if (!nv)
        return false;
    *v = nv;
    return (nv[*n] = strdup(uid)) ? ((*n)++, true) : false;
}

/* Locked. */
static bool pending_locked(rec_pool *p, const char *uid)
{
    for (rec_job *j = p->head; j; j = j->next)
        if (strcmp(j->uid, uid) == 0)
            return true;
    return in_list(p->active, p->n_active, uid);
}

bool rec_teardown_pending(local_reconciler *r, const char *uid)
{
    pthread_mutex_lock(&r->pool.lock);
    bool b = pending_locked(&r->pool, uid);
    pthread_mutex_unlock(&r->pool.lock);
    return b;
}

bool rec_teardown_take_finalized(local_reconciler *r, const char *uid)
{
    pthread_mutex_lock(&r->pool.lock);
    bool b = in_list(r->pool.finalized, r->pool.n_finalized, uid);
    if (b)
        list_remove(r->pool.finalized, &r->pool.n_finalized, uid);
    pthread_mutex_unlock(&r->pool.lock);
    return b;
}

void rec_teardown_async(local_reconciler *r, const char *uid, const char *ns, const char *name)
{
    if (rec_teardown_pending(r, uid))
        return;
    rec_entry *e = rec_find(r, uid);
    const oci_runtime *rt = rec_runtime(r, uid);
    rec_job *j = calloc(1, sizeof(*j));
    if (j)
        j->pidfd = -1;
    if (!j || !(j->uid = strdup(uid)) || (ns && !(j->ns = strdup(ns))) ||
        (name && !(j->name = strdup(name))) || oci_runtime_init(&j->rt, rt->binary, rt->root) < 0) {
        job_free(j);
        /* Out of memory: tear down here rather than leave it. */
        rec_teardown(r, uid, true);
        return;
    }
    j->frozen = e && e->frozen;
    j->pidfd = rec_entry_pidfd(e); /* before rec_forget closes the entry's own */
    rec_forget(r, uid);
    pthread_mutex_lock(&r->pool.lock);
    if (r->pool.n_threads == 0 || r->pool.stop) {
        pthread_mutex_unlock(&r->pool.lock);
        (void)rec_teardown_run(r, j->uid, &j->rt, j->frozen, j->pidfd, true, NULL);
        job_free(j);
        return;
    }
    if (r->pool.tail)
        r->pool.tail->next = j;
    else
        r->pool.head = j;
    r->pool.tail = j;
    pthread_cond_signal(&r->pool.work);
    pthread_mutex_unlock(&r->pool.lock);
}

/* Removes the teardown finalizer of the Sandbox with this uid; the last finalizer going deletes
 * it, with the final state in the DELETED event. */
static int finalize_fn(const json_t *old, json_t **ret_new, void *payload)
{
    const char *uid = api_meta_string(old, "uid");
    if (!uid || strcmp(uid, payload) != 0 || !local_has_finalizer(old, LOCAL_TEARDOWN_FINALIZER))
        return STORE_UPDATE_UNCHANGED;
    json_t *new = local_finalizer_remove(old, LOCAL_TEARDOWN_FINALIZER);
    if (!new)
        return -ENOMEM;
    *ret_new = new;
    bool last = !json_object_get(json_object_get(new, "metadata"), "finalizers");
    return last && json_object_get(json_object_get(new, "metadata"), "deletionTimestamp")
               ? STORE_UPDATE_DELETE
               : 0;
}

static void run_job(local_reconciler *r, rec_job *j)
{
    usec_t t0 = now_usec(CLOCK_MONOTONIC);
    rec_teardown_times tt = {0};
    /* The teardown itself in the background (runc delete inherits it); the finalizer's commit
     * below at normal priority, as it holds the store's lock, which claims wait for. */
    (void)local_teardown_priority_set(true);
    int tk = rec_teardown_run(r, j->uid, &j->rt, j->frozen, j->pidfd, true, &tt);
    (void)local_teardown_priority_set(false);
    usec_t t1 = now_usec(CLOCK_MONOTONIC);
    /* The container may still run: the object stays (deletionTimestamp) and the next resync
     * tries again. */
    if (j->name && tk == 0) {
        /* Recorded before the write that publishes DELETED, so the loop never tears it down
         * a second time. */
        pthread_mutex_lock(&r->pool.lock);
        bool listed = list_add(&r->pool.finalized, &r->pool.n_finalized, j->uid);
        pthread_mutex_unlock(&r->pool.lock);
        json_t *out = NULL;
        int k = local_store_update(r->store, api_kind_by_plural(API_GROUP_CORE, "sandboxes"), j->ns,
                                   j->name, finalize_fn, j->uid, &out);
        json_decref(out);
        if (k < 0 && k != -ENOENT)
            log_warn("cannot remove the teardown finalizer", "sandbox", j->name, "error",
                     strerror(-k));
        if (k < 0 && listed) { /* no DELETED event of ours will come */
            pthread_mutex_lock(&r->pool.lock);
            list_remove(r->pool.finalized, &r->pool.n_finalized, j->uid);
            pthread_mutex_unlock(&r->pool.lock);
        }
    }
    /* Start and end on the monotonic clock: overlapping intervals show the parallelism. */
    char start[32], end[32], ms[32], kill[32], runtime[32], host[32], commit[32];
    snprintf(start, sizeof(start), "%llu", (unsigned long long)t0);
    snprintf(end, sizeof(end), "%llu", (unsigned long long)t1);
    snprintf(ms, sizeof(ms), "%.1f", (double)(t1 - t0) / 1000.0);
    snprintf(kill, sizeof(kill), "%.1f", (double)tt.kill / 1000.0);
    snprintf(runtime, sizeof(runtime), "%.1f", (double)tt.runtime / 1000.0);
    snprintf(host, sizeof(host), "%.1f", (double)tt.host / 1000.0);
    snprintf(commit, sizeof(commit), "%.1f", (double)(now_usec(CLOCK_MONOTONIC) - t1) / 1000.0);
    log_info("sandbox torn down", "uid", j->uid, "sandbox", j->name ? j->name : "", "start_usec",
             start, "end_usec", end, "teardown_ms", ms, "kill_ms", kill, "runtime_ms", runtime,
             "host_ms", host, "finalizer_ms", commit);
}

static void *worker(void *arg)
{
    local_reconciler *r = arg;
    rec_pool *p = &r->pool;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->head && !p->stop)
            pthread_cond_wait(&p->work, &p->lock);
        if (p->stop)
            break; /* queued jobs stay recorded in the store (deletionTimestamp) */
        rec_job *j = p->head;
        p->head = j->next;
        if (!p->head)
            p->tail = NULL;
        bool tracked = list_add(&p->active, &p->n_active, j->uid);
        pthread_mutex_unlock(&p->lock);
        run_job(r, j);
        pthread_mutex_lock(&p->lock);
        if (tracked)
            list_remove(p->active, &p->n_active, j->uid);
        job_free(j);
        pthread_cond_broadcast(&p->done);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

int rec_pool_start(local_reconciler *r, size_t n)
{
    rec_pool *p = &r->pool;
    p->threads = calloc(n, sizeof(pthread_t));
    if (!p->threads)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        int k = pthread_create(&p->threads[i], NULL, worker, r);
        if (k != 0)
            return p->n_threads ? 0 : -k;
        p->n_threads++;
    }
    return 0;
}

void rec_pool_stop(local_reconciler *r, usec_t deadline)
{
    rec_pool *p = &r->pool;
    pthread_mutex_lock(&p->lock);
    while ((p->head || p->n_active) && p->n_threads) {
        usec_t now = now_usec(CLOCK_MONOTONIC);
        if (now >= deadline)
            break;
        struct timespec ts = timespec_realtime_after(MIN(deadline - now, 100 * USEC_PER_MSEC));
        pthread_cond_timedwait(&p->done, &p->lock, &ts);
    }
    size_t left = 0;
    for (rec_job *j = p->head; j; j = j->next)
        left++;
    p->stop = true;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->lock);
    if (left) {
        char n[32];
        snprintf(n, sizeof(n), "%zu", left);
        log_warn("teardowns left for the next start (the Sandboxes stay marked for deletion)",
                 "count", n);
    }
    for (size_t i = 0; i < p->n_threads; i++)
        pthread_join(p->threads[i], NULL);
    free(p->threads);
    p->threads = NULL;
    p->n_threads = 0;
    while (p->head) {
        rec_job *j = p->head;
        p->head = j->next;
        job_free(j);
    }
    p->tail = NULL;
    for (size_t i = 0; i < p->n_active; i++)
        free(p->active[i]);
    free(p->active);
    p->active = NULL;
    p->n_active = 0;
    for (size_t i = 0; i < p->n_finalized; i++)
        free(p->finalized[i]);
    free(p->finalized);
    p->finalized = NULL;
    p->n_finalized = 0;
}
