/* Wiring: informers feed work queues (event -> keys of the objects to reconcile), workers run the
 * reconcilers with per-key serialisation; errors retry with per-key backoff, requeues are delayed
 * adds. Everything is level-triggered: a reconcile reads the current state from the caches. */
#include "kube/kube.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "basic/macro.h"
#include "reconcile/reconcile.h"
#include "shared/log.h"

static void enqueue(kube_queue *q, const char *ns, const char *name)
{
    if (!q || !name)
        return;
    char *k = NULL;
    if (asprintf(&k, "%s/%s", ns ? ns : "", name) < 0)
        return;
    kube_queue_add(q, k);
    free(k);
}

static const char *controller_of(const json_t *obj, const char *kind)
{
    const json_t *ref = reconcile_controller_ref(obj);
    const char *k = json_string_value(json_object_get(ref, "kind"));
    if (!k || strcmp(k, kind) != 0)
        return NULL;
    return json_string_value(json_object_get(ref, "name"));
}

static void enqueue_claims(kube_ctl *ctl, const char *ns, const char *pool, bool unbound_only)
{
    _cleanup_json_ json_t *claims = kube_informer_list(&ctl->inf[KR_CLAIM], ns, NULL, NULL);
    size_t i;
    json_t *c;
    json_array_foreach (claims, i, c) {
        const char *pn = kube_str(c, "spec.warmPoolRef.name");
        if (pool && (!pn || strcmp(pn, pool) != 0))
            continue;
        if (unbound_only && kube_str(c, "status.sandbox.name"))
            continue;
        enqueue(ctl->q_claim, ns, kube_str(c, "metadata.name"));
    }
}

/* A Sandbox changed (extensions on): the claim and pool that own it now or owned it before, and
 * the pools that adopt it when it is an orphan with the pool label. */
static void on_sandbox_extensions(kube_ctl *ctl, const char *ns, const json_t *obj,
                                  const json_t *old)
{
    const json_t *objs[2] = {obj, old};
    for (size_t i = 0; i < 2; i++) {
        if (!objs[i])
            continue;
        const char *cn = controller_of(objs[i], "SandboxClaim");
        if (cn)
            enqueue(ctl->q_claim, ns, cn);
        const char *pn = controller_of(objs[i], "SandboxWarmPool");
        if (pn) {
            enqueue(ctl->q_pool, ns, pn);
            enqueue_claims(ctl, ns, pn, true);
        }
    }
    /* Orphans with the pool label: the pool adopts them. */
    if (!reconcile_controller_ref(obj) &&
        json_object_get(json_object_get(json_object_get(obj, "metadata"), "labels"),
                        RECONCILE_LABEL_WARM_POOL)) {
        _cleanup_json_ json_t *pools = kube_informer_list(&ctl->inf[KR_POOL], ns, NULL, NULL);
        size_t i;
        json_t *p;
        json_array_foreach (pools, i, p)
            if (reconcile_pool_member(p, obj))
                enqueue(ctl->q_pool, ns, kube_str(p, "metadata.name"));
    }
}

/* A SandboxTemplate changed: the pools made from it (and, for a new template, their claims). */
static void on_template(kube_ctl *ctl, const char *ns, const char *name, kube_event_type t)
{
    _cleanup_json_ json_t *pools = kube_informer_list(&ctl->inf[KR_POOL], ns, NULL, NULL);
    size_t i;
    json_t *p;
    json_array_foreach (pools, i, p) {
        const char *tn = kube_str(p, "spec.sandboxTemplateRef.name");
        if (tn && strcmp(tn, name) == 0) {
            enqueue(ctl->q_pool, ns, kube_str(p, "metadata.name"));
            if (t == KUBE_ADDED)
                enqueue_claims(ctl, ns, kube_str(p, "metadata.name"), true);
        }
    }
}

static void on_event(kube_res r, kube_event_type t, const json_t *obj, const json_t *old,
                     void *payload)
{
    kube_ctl *ctl = payload;
    const char *ns = kube_str(obj, "metadata.namespace");
    const char *name = kube_str(obj, "metadata.name");
    bool ext = ctl->opt.extensions;
    switch (r) {
    case KR_SANDBOX:
        enqueue(ctl->q_sandbox, ns, name);
        if (ext)
            on_sandbox_extensions(ctl, ns, obj, old);
        break;
    case KR_POD:
    case KR_SERVICE:
    case KR_PVC: {
        const char *sb = controller_of(obj, "Sandbox");
        if (sb)
            enqueue(ctl->q_sandbox, ns, sb);
        else if (!reconcile_controller_ref(obj))
            enqueue(ctl->q_sandbox, ns, name); /* adoption by name */
        if (old && (sb = controller_of(old, "Sandbox")))
            enqueue(ctl->q_sandbox, ns, sb);
        break;
    }
    case KR_TEMPLATE:
        if (!ext)
            break;
        enqueue(ctl->q_template, ns, name);
        on_template(ctl, ns, name, t);
        break;
    case KR_NETPOL: {
        const char *tn = controller_of(obj, "SandboxTemplate");
        if (ext && tn)
            enqueue(ctl->q_template, ns, tn);
        break;
    }
    case KR_POOL:
        if (!ext)
            break;
        enqueue(ctl->q_pool, ns, name);
        if (t != KUBE_MODIFIED || !old ||
            !json_equal(json_object_get(old, "spec"), json_object_get(obj, "spec")))
            enqueue_claims(ctl, ns, name, true);
        break;
    case KR_CLAIM:
        if (ext)
            enqueue(ctl->q_claim, ns, name);
        break;
    case KR_SNAPSHOT: {
        enqueue(ctl->q_snapshot, ns, name);
        /* Forks waiting for it to become Ready. */
        _cleanup_json_ json_t *sbs = kube_informer_list(&ctl->inf[KR_SANDBOX], ns, NULL, NULL);
        size_t i;
        json_t *sb;
        json_array_foreach (sbs, i, sb) {
            const char *from = kube_snapshot_of_sandbox(sb);
            if (from && strcmp(from, name) == 0)
                enqueue(ctl->q_sandbox, ns, kube_str(sb, "metadata.name"));
        }
        break;
    }
    case KR_VOLSNAP:
        enqueue(ctl->q_snapshot, ns, controller_of(obj, "SandboxSnapshot"));
        break;
    default:
        break;
    }
}

typedef int (*reconcile_fn)(kube_ctl *ctl, const char *ns, const char *name, int64_t *requeue);

typedef struct worker {
    kube_ctl *ctl;
    kube_queue *q;
    reconcile_fn fn;
    int idx;
    const char *what;
} worker;

static void *worker_thread(void *arg)
{
    worker *w = arg;
    kube_ctl *ctl = w->ctl;
    char *key;
    while ((key = kube_queue_get(w->q))) {
        char *slash = strchr(key, '/');
        int64_t requeue = 0;
        int e = 0;
        if (slash) {
            *slash = 0;
            e = w->fn(ctl, key, slash + 1, &requeue);
            *slash = '/';
        }
        atomic_fetch_add(&ctl->metrics.reconciles[w->idx], 1);
        if (e < 0) {
            atomic_fetch_add(&ctl->metrics.reconcile_errors[w->idx], 1);
            if (e != -ESTALE && e != -EAGAIN)
                log_debug("reconcile failed", "kind", w->what, "key", key, "error", strerror(-e));
            kube_queue_done(w->q, key);
            kube_queue_add_rate_limited(w->q, key);
        } else {
            kube_queue_forget(w->q, key);
            kube_queue_done(w->q, key);
            if (requeue > 0)
                kube_queue_add_after(w->q, key, requeue);
        }
        free(key);
    }
    return NULL;
}

static worker worker_defs[5];

bool kube_ctl_synced(kube_ctl *ctl)
{
    for (int r = 0; r < _KR_MAX; r++)
        if (ctl->inf[r].started && !atomic_load(&ctl->inf[r].synced))
            return false;
    return atomic_load(&ctl->leading);
}

int kube_ctl_start(kube_ctl *ctl)
{
    /* exp_lock and metrics.lock are initialised by the owner of ctl (the HTTP endpoints may
     * already be rendering metrics). */
    ctl->expectations = json_object();
    ctl->seen_ready = json_object();
    ctl->q_sandbox = kube_queue_new("sandbox");
    if (ctl->opt.extensions) {
        ctl->q_template = kube_queue_new("template");
        ctl->q_pool = kube_queue_new("pool");
        ctl->q_claim = kube_queue_new("claim");
    }
    if (ctl->opt.snapshots)
        ctl->q_snapshot = kube_queue_new("snapshot");
    kube_res core[] = {KR_SANDBOX, KR_POD, KR_SERVICE, KR_PVC};
    kube_res exts[] = {KR_TEMPLATE, KR_POOL, KR_CLAIM, KR_NETPOL};
    int e;
    kube_res snaps[] = {KR_SNAPSHOT, KR_VOLSNAP};
    if (ctl->opt.snapshots)
        for (size_t i = 0; i < ELEMENTSOF(snaps); i++)
            if ((e = kube_informer_start(&ctl->inf[snaps[i]], ctl->client, snaps[i], NULL,
                                         on_event, ctl, &ctl->stop)) < 0)
                return e;
    /* Extension caches first so that the Sandbox events find pools and claims. */
    if (ctl->opt.extensions)
        for (size_t i = 0; i < ELEMENTSOF(exts); i++)
            if ((e = kube_informer_start(&ctl->inf[exts[i]], ctl->client, exts[i], NULL, on_event,
                                         ctl, &ctl->stop)) < 0)
                return e;
    for (size_t i = 0; i < ELEMENTSOF(core); i++) {
        const char *sel = ctl->opt.cache_label_selectors && core[i] != KR_SANDBOX
                              ? RECONCILE_LABEL_NAME_HASH
                              : NULL;
        if ((e = kube_informer_start(&ctl->inf[core[i]], ctl->client, core[i], sel, on_event, ctl,
                                     &ctl->stop)) < 0)
            return e;
    }
    /* Workers start once every cache has synced (a reconcile on a partial cache would create
     * what already exists). */
    while (!atomic_load(&ctl->stop)) {
        bool all = true;
        for (int r = 0; r < _KR_MAX; r++)
            if (ctl->inf[r].started && !atomic_load(&ctl->inf[r].synced))
                all = false;
        if (all)
            break;
        usleep(10000);
    }
    log_info("caches synced: starting workers");
    worker_defs[0] = (worker){ctl, ctl->q_sandbox, kube_reconcile_sandbox, 0, "Sandbox"};
    worker_defs[1] = (worker){ctl, ctl->q_template, kube_reconcile_template, 1, "SandboxTemplate"};
    worker_defs[2] = (worker){ctl, ctl->q_pool, kube_reconcile_pool, 2, "SandboxWarmPool"};
    worker_defs[3] = (worker){ctl, ctl->q_claim, kube_reconcile_claim, 3, "SandboxClaim"};
    worker_defs[4] = (worker){ctl, ctl->q_snapshot, kube_reconcile_snapshot, 4, "SandboxSnapshot"};
    int counts[5] = {ctl->opt.sandbox_workers, ctl->opt.template_workers, ctl->opt.pool_workers,
                     ctl->opt.claim_workers, 1};
    size_t total = 0;
    for (int i = 0; i < 5; i++)
        if (worker_defs[i].q)
            total += (size_t)MAX(counts[i], 1);
    ctl->workers = calloc(total, sizeof *ctl->workers);
    if (!ctl->workers)
        return -ENOMEM;
    for (int i = 0; i < 5; i++) {
        if (!worker_defs[i].q)
            continue;
        for (int j = 0; j < MAX(counts[i], 1); j++) {
            pthread_attr_t a;
            pthread_attr_init(&a);
            pthread_attr_setstacksize(&a, 256 * 1024);
            e = pthread_create(&ctl->workers[ctl->n_workers], &a, worker_thread, &worker_defs[i]);
            pthread_attr_destroy(&a);
            if (e)
                return -e;
            ctl->n_workers++;
        }
    }
    return 0;
}

void kube_ctl_stop(kube_ctl *ctl)
{
    atomic_store(&ctl->stop, true);
    kube_queue *qs[] = {ctl->q_sandbox, ctl->q_template, ctl->q_pool, ctl->q_claim,
                        ctl->q_snapshot};
    for (size_t i = 0; i < ELEMENTSOF(qs); i++)
        if (qs[i])
            kube_queue_shutdown(qs[i]);
    for (size_t i = 0; i < ctl->n_workers; i++)
        pthread_join(ctl->workers[i], NULL);
    free(ctl->workers);
    ctl->workers = NULL;
    ctl->n_workers = 0;
    for (int r = 0; r < _KR_MAX; r++)
        kube_informer_join(&ctl->inf[r]);
    for (size_t i = 0; i < ELEMENTSOF(qs); i++)
        kube_queue_free(qs[i]);
    ctl->q_sandbox = ctl->q_template = ctl->q_pool = ctl->q_claim = ctl->q_snapshot = NULL;
    json_decref(ctl->expectations);
    json_decref(ctl->seen_ready);
    json_decref(ctl->metrics.claim_creation);
    ctl->metrics.claim_creation = NULL;
    ctl->expectations = ctl->seen_ready = NULL;
}
