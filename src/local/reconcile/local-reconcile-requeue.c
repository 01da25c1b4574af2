/* The reconcile loop's bookkeeping per Sandbox uid: the generation whose start failed (not
 * retried until the spec changes), and the timed requeues (expiry, not-Ready retries). */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "basic/macro.h"
#include "basic/time-util.h"
#include "local/reconcile/local-reconcile-internal.h"

rec_failed *rec_failed_find(local_reconciler *r, const char *uid)
{
    for (size_t i = 0; i < r->n_failed; i++)
        if (strcmp(r->failed[i].uid, uid) == 0)
            return &r->failed[i];
    return NULL;
}

void rec_failed_set(local_reconciler *r, const char *uid, long long gen)
{
    rec_failed *f = rec_failed_find(r, uid);
    if (f) {
        f->generation = gen;
        return;
    }
    rec_failed *v = realloc(r->failed, (r->n_failed + 1) * sizeof(*v));
    if (!v)
        return;
    r->failed = v;
    if ((v[r->n_failed].uid = strdup(uid)))
        v[r->n_failed++].generation = gen;
}

void rec_failed_clear(local_reconciler *r, const char *uid)
{
    rec_failed *f = rec_failed_find(r, uid);
    if (!f)
        return;
    free(f->uid);
    *f = r->failed[--r->n_failed];
}

void rec_timer_clear(local_reconciler *r, const char *uid)
{
    for (size_t i = 0; i < r->n_timers; i++) {
        if (strcmp(r->timers[i].uid, uid) != 0)
            continue;
        free(r->timers[i].uid);
        free(r->timers[i].ns);
        free(r->timers[i].name);
        r->timers[i] = r->timers[--r->n_timers];
        return;
    }
}

/* Requeues sb after `after` µs (replacing an earlier requeue of the same Sandbox). */
void rec_timer_set(local_reconciler *r, const json_t *sb, usec_t after)
{
    const char *uid = api_meta_string(sb, "uid"), *ns = api_meta_string(sb, "namespace"),
               *name = api_meta_string(sb, "name");
    if (!uid || !name)
        return;
    rec_timer_clear(r, uid);
    rec_timer *v = realloc(r->timers, (r->n_timers + 1) * sizeof(*v));
    if (!v)
        return;
    r->timers = v;
    rec_timer t = {strdup(uid), ns ? strdup(ns) : NULL, strdup(name),
                   now_usec(CLOCK_MONOTONIC) + after};
    if (!t.uid || !t.name || (ns && !t.ns)) {
        free(t.uid);
        free(t.ns);
        free(t.name);
        return;
    }
    r->timers[r->n_timers++] = t;
}

usec_t rec_timer_earliest(local_reconciler *r)
{
    usec_t m = UINT64_MAX;
    for (size_t i = 0; i < r->n_timers; i++)
        m = MIN(m, r->timers[i].due);
    return m;
}
