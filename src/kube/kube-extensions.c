/* SandboxTemplate, SandboxWarmPool and SandboxClaim on a cluster: the backend-neutral reconcile
 * core (src/reconcile) decides; this file reads its inputs from the informer caches and executes
 * the plan against the API server (merge patches with optimistic locking where the core hands
 * out a patch of an object it read, creates, deletes). Warm-pool creates and deletes are gated by
 * expectations: until the informer has observed them, no further creates or deletes are planned
 * (no over-creation with a lagging cache). */
#include "kube/kube.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "basic/macro.h"
#include "basic/time-util.h"
#include "reconcile/reconcile.h"
#include "shared/log.h"

#define EXPECTATION_TIMEOUT_USEC (30LL * 1000000)

/* ---- SandboxTemplate -> NetworkPolicy (§2.5) ---- */
int kube_reconcile_template(kube_ctl *ctl, const char *ns, const char *name, int64_t *ret_requeue)
{
    _cleanup_json_ json_t *t = kube_informer_get(&ctl->inf[KR_TEMPLATE], ns, name);
    if (!t || reconcile_deleting(t))
        return 0;
    _cleanup_json_ json_t *tp = reconcile_template_patch(t);
    if (tp) {
        int e = kube_patch(ctl, KR_TEMPLATE, t, NULL, tp, false, NULL);
        if (e < 0)
            return e;
    }
    _cleanup_json_ json_t *want = reconcile_template_network_policy(t);
    _cleanup_free_ char *pname = NULL;
    if (asprintf(&pname, "%s-network-policy", name) < 0)
        return -ENOMEM;
    _cleanup_json_ json_t *have = kube_informer_get(&ctl->inf[KR_NETPOL], ns, pname);
    if (!want) {
        if (have && reconcile_controlled_by(have, t))
            return kube_delete(ctl, KR_NETPOL, have, NULL);
        return 0;
    }
    if (!have) {
        int e = kube_create(ctl, KR_NETPOL, ns, want, NULL);
        if (e == 0)
            log_info("created network policy", "namespace", ns, "template", name);
        return e == -EEXIST ? 0 : e;
    }
    if (!reconcile_controlled_by(have, t)) {
        log_warn("refusing to update NetworkPolicy not controlled by the template", "namespace", ns,
                 "policy", pname);
        return -EPERM;
    }
    if (json_equal(json_object_get(have, "spec"), json_object_get(want, "spec")))
        return 0;
    /* Full spec update with the cached resourceVersion: a 409 retries from a fresh cache. */
    _cleanup_json_ json_t *upd = json_deep_copy(have);
    json_object_set(upd, "spec", json_object_get(want, "spec"));
    _cleanup_free_ char *path = kube_path(KR_NETPOL, ns, pname, NULL, NULL);
    return kube_call(ctl->client, "PUT", path, NULL, upd, NULL);
}

/* ---- expectations of the warm pool ---- */
static json_t *exp_for(kube_ctl *ctl, const char *key)
{
    json_t *e = json_object_get(ctl->expectations, key);
    if (!e) {
        e = json_pack("{s:{},s:{}}", "create", "delete");
        json_object_set_new(ctl->expectations, key, e);
    }
    return e;
}

/* Drops satisfied (or timed out) expectations; true when some are still pending. */
static bool exp_pending(kube_ctl *ctl, const char *key, const json_t *members)
{
    int64_t now = (int64_t)now_usec(CLOCK_REALTIME);
    pthread_mutex_lock(&ctl->exp_lock);
    json_t *e = exp_for(ctl, key);
    json_t *cr = json_object_get(e, "create"), *dl = json_object_get(e, "delete");
    const char *k;
    json_t *v;
    void *tmp;
    json_object_foreach_safe (cr, tmp, k, v) {
        bool seen = false;
        size_t i;
        json_t *m;
        json_array_foreach (members, i, m)
            if (strcmp(kube_str(m, "metadata.name") ?: "", k) == 0)
                seen = true;
        if (seen || json_integer_value(v) < now)
            json_object_del(cr, k);
    }
    json_object_foreach_safe (dl, tmp, k, v) {
        bool still = false;
        size_t i;
        json_t *m;
        json_array_foreach (members, i, m)
            if (strcmp(kube_str(m, "metadata.uid") ?: "", k) == 0 && !reconcile_deleting(m))
                still = true;
        if (!still || json_integer_value(v) < now)
            json_object_del(dl, k);
    }
    bool pending = json_object_size(cr) + json_object_size(dl) > 0;
    pthread_mutex_unlock(&ctl->exp_lock);
    return pending;
}

static void exp_add(kube_ctl *ctl, const char *key, const char *what, const char *id)
{
    pthread_mutex_lock(&ctl->exp_lock);
    json_object_set_new(json_object_get(exp_for(ctl, key), what), id,
                        json_integer((int64_t)now_usec(CLOCK_REALTIME) + EXPECTATION_TIMEOUT_USEC));
    pthread_mutex_unlock(&ctl->exp_lock);
}

static json_t *get_template_of_pool(kube_ctl *ctl, const char *ns, const json_t *pool)
{
    const char *tn = kube_str(pool, "spec.sandboxTemplateRef.name");
    return tn ? kube_informer_get(&ctl->inf[KR_TEMPLATE], ns, tn) : NULL;
}

/* ---- SandboxWarmPool (§2.7) ---- */
int kube_reconcile_pool(kube_ctl *ctl, const char *ns, const char *name, int64_t *ret_requeue)
{
    _cleanup_free_ char *key = NULL;
    if (asprintf(&key, "%s/%s", ns, name) < 0)
        return -ENOMEM;
    _cleanup_json_ json_t *pool = kube_informer_get(&ctl->inf[KR_POOL], ns, name);
    if (!pool || reconcile_deleting(pool)) {
        pthread_mutex_lock(&ctl->exp_lock);
        json_object_del(ctl->expectations, key);
        pthread_mutex_unlock(&ctl->exp_lock);
        return 0;
    }
    _cleanup_json_ json_t *tmpl = get_template_of_pool(ctl, ns, pool);
    _cleanup_json_ json_t *sbs = kube_informer_list(&ctl->inf[KR_SANDBOX], ns, NULL, NULL);
    _cleanup_json_ json_t *members = json_array();
    size_t i;
    json_t *s;
    json_array_foreach (sbs, i, s)
        if (reconcile_pool_member(pool, s))
            json_array_append(members, s);
    reconcile_pool_in in = {
        .pool = pool,
        .template = tmpl,
        .sandboxes = sbs,
        .now = (int64_t)now_usec(CLOCK_REALTIME),
        .grace = ctl->opt.pool_grace_usec,
        .max_batch = ctl->opt.pool_max_batch,
        .expectations_pending = exp_pending(ctl, key, members),
        .no_eviction_annotation = !ctl->opt.warm_pool_eviction,
    };
    reconcile_pool_out out = {0};
    int r = reconcile_pool(&in, &out);
    if (r < 0)
        return r;
    int err = 0;
    json_t *o;
    /* Slow start: batches of 1, 2, 4, ... stopping at the first failure. */
    size_t n = json_array_size(out.create), done = 0, batch = 1;
    while (done < n && err == 0) {
        for (size_t j = 0; j < batch && done < n; j++, done++) {
            json_t *created = NULL;
            int e = kube_create(ctl, KR_SANDBOX, ns, json_array_get(out.create, done), &created);
            if (e < 0) {
                _cleanup_free_ char *msg = NULL;
                if (asprintf(&msg, "cannot create a warm sandbox: %s", strerror(-e)) >= 0)
                    kube_event(ctl, pool, "Warning", "FailedCreate", msg);
                err = e;
                break;
            }
            exp_add(ctl, key, "create", kube_str(created, "metadata.name"));
            _cleanup_free_ char *msg = NULL;
            if (asprintf(&msg, "created warm sandbox %s",
                         kube_str(created, "metadata.name") ?: "") >= 0)
                kube_event(ctl, pool, "Normal", "SuccessfulCreate", msg);
            json_decref(created);
        }
        batch *= 2;
    }
    if (n)
        log_info("warm pool created sandboxes", "namespace", ns, "pool", name);
    json_array_foreach (out.remove, i, o) {
        int e = kube_delete(ctl, KR_SANDBOX, o, NULL);
        if (e == 0)
            exp_add(ctl, key, "delete", kube_str(o, "metadata.uid"));
        else if (!err)
            err = e;
    }
    json_array_foreach (out.patches, i, o) {
        int e = kube_patch(ctl, KR_SANDBOX, json_object_get(o, "object"), NULL,
                           json_object_get(o, "patch"), true, NULL);
        if (e < 0 && !err)
            err = e;
    }
    if (out.status_changed) {
        _cleanup_json_ json_t *patch = json_pack("{s:O}", "status", out.status);
        int e = kube_patch(ctl, KR_POOL, pool, "status", patch, false, NULL);
        if (e < 0 && e != -ENOENT && !err)
            err = e;
    }
    *ret_requeue = out.requeue;
    if (in.expectations_pending && (!*ret_requeue || *ret_requeue > 1000000))
        *ret_requeue = 1000000;
    reconcile_pool_out_done(&out);
    return err;
}

/* ---- SandboxClaim (§2.8) ---- */
/* Patches the claim and, on success, replaces *claim by the server's answer. */
static int patch_claim(kube_ctl *ctl, json_t **claim, const json_t *patch)
{
    json_t *updated = NULL;
    int err = kube_patch(ctl, KR_CLAIM, *claim, NULL, patch, true, &updated);
    if (err == 0) {
        json_decref(*claim);
        *claim = updated;
    }
    return err;
}

static const char *created_by(const json_t *claim)
{
    return json_string_value(json_object_get(
        json_object_get(json_object_get(claim, "metadata"), "labels"), RECONCILE_LABEL_CREATED_BY));
}

/* Carries out the core's action for the claim (its own patch included for adopt and create,
 * in the order each needs). 0 or a negative errno. */
static int claim_act(kube_ctl *ctl, const char *ns, const char *name, json_t **claim,
                     const json_t *pool, const char *pn, const reconcile_claim_out *out,
                     int64_t *ret_requeue)
{
    int err = 0;
    switch (out->action) {
    case RECONCILE_CLAIM_NOTHING:
        break;
    case RECONCILE_CLAIM_ADOPT:
        /* The claim first (optimistic lock), so two claims never adopt one sandbox; then the
         * sandbox with its resourceVersion, so a concurrent change of it fails too. */
        if (out->claim_patch)
            err = patch_claim(ctl, claim, out->claim_patch);
        if (err == 0)
            err = kube_patch(ctl, KR_SANDBOX, out->target, NULL, out->sandbox_patch, true, NULL);
        if (err == 0) {
            kube_metrics_claim_created(ctl, ns, kube_str(pool, "spec.sandboxTemplateRef.name"),
                                       "warm", pn, reconcile_sandbox_ready(out->target),
                                       created_by(*claim));
            log_info("adopted warm sandbox", "namespace", ns, "claim", name, "sandbox",
                     kube_str(out->target, "metadata.name"));
        }
        break;
    case RECONCILE_CLAIM_CREATE:
        err = kube_create(ctl, KR_SANDBOX, ns, out->sandbox, NULL);
        if (err == -EEXIST) {
            err = 0;
            *ret_requeue = 200000;
        } else if (err == 0) {
            kube_metrics_claim_created(ctl, ns, kube_str(pool, "spec.sandboxTemplateRef.name"),
                                       "cold", pn, false, created_by(*claim));
            log_info("created sandbox for claim", "namespace", ns, "claim", name);
        }
        if (err == 0 && out->claim_patch)
            err = patch_claim(ctl, claim, out->claim_patch);
        break;
    case RECONCILE_CLAIM_PATCH_SANDBOX:
        err = kube_patch(ctl, KR_SANDBOX, out->target, NULL, out->sandbox_patch, true, NULL);
        break;
    case RECONCILE_CLAIM_DELETE_SANDBOX:
        if (out->target)
            err = kube_delete(ctl, KR_SANDBOX, out->target, NULL);
        break;
    case RECONCILE_CLAIM_DELETE:
        err = kube_delete(ctl, KR_CLAIM, *claim, "Background");
        break;
    case RECONCILE_CLAIM_DELETE_FOREGROUND:
        err = kube_delete(ctl, KR_CLAIM, *claim, "Foreground");
        break;
    }
    return err;
}

/* Writes the claim's new status; *ret_first_ready: Ready became True with this write. */
static int claim_write_status(kube_ctl *ctl, const json_t *claim, const reconcile_claim_out *out,
                              bool *ret_first_ready)
{
    _cleanup_json_ json_t *patch = json_pack("{s:O}", "status", out->status);
    const json_t *was = reconcile_condition(claim, "Ready");
    const json_t *now = reconcile_condition(patch, "Ready");
    *ret_first_ready = now && strcmp(kube_str(now, "status") ?: "", "True") == 0 &&
                       (!was || strcmp(kube_str(was, "status") ?: "", "True") != 0);
    int err = kube_patch(ctl, KR_CLAIM, claim, "status", patch, true, NULL);
    return err == -ESTALE ? 0 : err; /* dropped: the event of the newer claim re-reconciles */
}

/* The controller's startup latency of a claim that just became Ready. */
static void observe_first_ready(kube_ctl *ctl, const json_t *claim)
{
    int64_t t0;
    const char *obs = json_string_value(
        json_object_get(json_object_get(json_object_get(claim, "metadata"), "annotations"),
                        RECONCILE_ANN_FIRST_OBSERVED));
    if (obs && reconcile_parse_time(obs, &t0) == 0)
        kube_metrics_observe_claim(ctl, (double)((int64_t)now_usec(CLOCK_REALTIME) - t0) / 1000.0);
}

int kube_reconcile_claim(kube_ctl *ctl, const char *ns, const char *name, int64_t *ret_requeue)
{
    _cleanup_json_ json_t *claim = kube_informer_get(&ctl->inf[KR_CLAIM], ns, name);
    if (!claim || reconcile_deleting(claim))
        return 0;
    /* Legacy per-claim NetworkPolicy controlled by the claim. */
    _cleanup_free_ char *legacy = NULL;
    if (asprintf(&legacy, "%s-network-policy", name) >= 0) {
        _cleanup_json_ json_t *np = kube_informer_get(&ctl->inf[KR_NETPOL], ns, legacy);
        if (np && reconcile_controlled_by(np, claim))
            kube_delete(ctl, KR_NETPOL, np, NULL);
    }
    /* A copy: claim is replaced by the answer of its patch below. */
    _cleanup_free_ char *pn = kube_str(claim, "spec.warmPoolRef.name")
                                  ? strdup(kube_str(claim, "spec.warmPoolRef.name"))
                                  : NULL;
    _cleanup_json_ json_t *pool = pn ? kube_informer_get(&ctl->inf[KR_POOL], ns, pn) : NULL;
    _cleanup_json_ json_t *tmpl = pool ? get_template_of_pool(ctl, ns, pool) : NULL;
    _cleanup_json_ json_t *sbs = kube_informer_list(&ctl->inf[KR_SANDBOX], ns, NULL, NULL);
    reconcile_claim_in in = {
        .claim = claim,
        .pool = pool,
        .template = tmpl,
        .sandboxes = sbs,
        .now = (int64_t)now_usec(CLOCK_REALTIME),
    };
    reconcile_claim_out out = {0};
    int r = reconcile_claim(&in, &out);
    if (r < 0)
        return r;
    bool first_ready = false;
    int err = claim_act(ctl, ns, name, &claim, pool, pn, &out, ret_requeue);
    if (err == 0 && out.action != RECONCILE_CLAIM_ADOPT && out.action != RECONCILE_CLAIM_CREATE &&
        out.claim_patch)
        err = patch_claim(ctl, &claim, out.claim_patch);
    if (err == 0 && out.status_changed && out.action != RECONCILE_CLAIM_DELETE &&
        out.action != RECONCILE_CLAIM_DELETE_FOREGROUND)
        err = claim_write_status(ctl, claim, &out, &first_ready);
    if (first_ready)
        observe_first_ready(ctl, claim);
    if (err == 0 && out.event_reason && ctl->opt.claim_events)
        kube_event(ctl, claim, "Normal", out.event_reason, out.message);
    if (!*ret_requeue)
        *ret_requeue = out.requeue;
    reconcile_claim_out_done(&out);
    if (err == -ENOENT)
        err = 0;
    return err;
}
