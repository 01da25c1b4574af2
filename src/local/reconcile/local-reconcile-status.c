/* The Sandbox status the reconcile loop writes (UPSTREAM.md §2.4.5 where it applies): the core's
 * rules (reconcile/reconcile.h) plus what only this backend reports: the NetworkPolicyEnforced
 * condition, status.blockedConnections, status.resources and the pod-name annotation. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "basic/macro.h"
#include "basic/time-util.h"
#include "local/reconcile/local-names.h"
#include "local/reconcile/local-reconcile-internal.h"
#include "reconcile/reconcile.h"
#include "shared/log.h"

#define ANN_POD_NAME "agents.x-k8s.io/pod-name"
/* Conditions only this backend writes. */
#define COND_NETPOL "NetworkPolicyEnforced"

static bool condition_in(const json_t *conds, const char *type)
{
    size_t i;
    json_t *c;
    json_array_foreach (conds, i, c)
        if (strcmp(json_string_value(json_object_get(c, "type")) ?: "", type) == 0)
            return true;
    return false;
}

/* The local additions to the core's status: conditions other writers own are kept, the
 * network one is this backend's, and status.resources. */
static int local_status(const status_update *u, const json_t *old, json_t *status, int64_t now)
{
    static const char *const rules_own[] = {"Ready", "Suspended", "PodScheduled", "Finished",
                                            COND_NETPOL};
    json_t *conds = json_object_get(status, "conditions");
    json_t *kept = json_array();
    if (!kept)
        return -ENOMEM;
    size_t i;
    json_t *c;
    json_array_foreach (conds, i, c) /* the core keeps stored conditions on expiry */
        if (strcmp(json_string_value(json_object_get(c, "type")) ?: "", COND_NETPOL) != 0 &&
            json_array_append(kept, c) < 0)
            goto nomem;
    json_array_foreach (json_object_get(json_object_get(old, "status"), "conditions"), i, c) {
        const char *t = json_string_value(json_object_get(c, "type"));
        bool owned = !t;
        for (size_t k = 0; t && k < ELEMENTSOF(rules_own); k++)
            owned |= strcmp(t, rules_own[k]) == 0;
        if (!owned && !condition_in(kept, t) && json_array_append(kept, c) < 0)
            goto nomem;
    }
    if (u->has_pod && u->netpol_status) {
        json_int_t gen =
            json_integer_value(json_object_get(json_object_get(old, "metadata"), "generation"));
        json_t *np = reconcile_make_condition(old, COND_NETPOL, u->netpol_status, u->netpol_reason,
                                              u->netpol_message, gen, now);
        if (!np || json_array_append_new(kept, np) < 0)
            goto nomem;
    }
    if (json_object_set_new(status, "conditions", kept) < 0)
        return -ENOMEM;
    if (u->has_pod && u->netpol_status && u->blocked >= 0) {
        if (json_object_set_new(status, "blockedConnections", json_integer(u->blocked)) < 0)
            return -ENOMEM;
    } else {
        json_object_del(status, "blockedConnections");
    }
    const json_t *stored = json_object_get(json_object_get(old, "status"), "resources");
    if (u->resources && json_object_set(status, "resources", u->resources) < 0)
        return -ENOMEM;
    if (!u->resources && u->has_pod && stored &&
        json_object_set(status, "resources", (json_t *)stored) < 0)
        return -ENOMEM;
    return 0;
nomem:
    json_decref(kept);
    return -ENOMEM;
}

/* The desired status by the core's rules: expiry's, or the one of what the container is. */
static int rules_status(const status_update *u, const json_t *old, int64_t now, json_t **ret)
{
    _cleanup_(json_decrefp) json_t *ips =
        u->has_pod && u->pod_ip ? json_pack("[s]", u->pod_ip) : NULL;
    if (u->has_pod && u->pod_ip && !ips)
        return -ENOMEM;
    reconcile_sandbox_in in = {.sandbox = old,
                               .now = now,
                               .observed = u->o,
                               /* a container has no scheduler, no Service, and sandboxd is
                                * reached on its socket, with or without an IP */
                               .no_scheduling = true,
                               .no_services = true,
                               .ips_optional = true};
    in.observed.pod_ips = ips;
    _cleanup_(reconcile_sandbox_out_done) reconcile_sandbox_out out = {0};
    int k = u->expiry ? reconcile_sandbox_expiry(&in, &out) : reconcile_sandbox_status(&in, &out);
    if (k < 0)
        return k;
    *ret = TAKE_PTR(out.status); /* NULL: nothing to write (not expired, or to be deleted) */
    return 0;
}

static int status_fn(const json_t *old, json_t **ret_new, void *payload)
{
    const status_update *u = payload;
    const char *uid = api_meta_string(old, "uid");
    if (!uid || strcmp(uid, u->uid) != 0)
        return STORE_UPDATE_UNCHANGED; /* deleted and recreated under the same name */
    int64_t now = (int64_t)now_usec(CLOCK_REALTIME);
    _cleanup_(json_decrefp) json_t *status = NULL;
    int k = rules_status(u, old, now, &status);
    if (k < 0)
        return k;
    if (!status)
        return STORE_UPDATE_UNCHANGED;
    if ((k = local_status(u, old, status, now)) < 0)
        return k;
    /* old is the store's (never modified): new shares it but for what changes here. */
    _cleanup_(json_decrefp) json_t *new = json_copy((json_t *)old);
    if (!new || json_object_set(new, "status", status) < 0)
        return -ENOMEM;
    json_t *md = api_own_member(new, "metadata");
    json_t *ann = api_own_member(md, "annotations");
    if (!md || (json_object_get(md, "annotations") && !ann))
        return -ENOMEM;
    const char *name = api_meta_string(old, "name");
    if (u->has_pod && name) {
        if (!json_is_object(ann)) {
            ann = json_object();
            if (json_object_set_new(md, "annotations", ann) < 0)
                return -ENOMEM;
        }
        if (!json_object_get(ann, ANN_POD_NAME) &&
            json_object_set_new(ann, ANN_POD_NAME, json_string(name)) < 0)
            return -ENOMEM;
    } else
        json_object_del(ann, ANN_POD_NAME);
    if (json_equal(new, old))
        return STORE_UPDATE_UNCHANGED;
    *ret_new = TAKE_PTR(new);
    return 0;
}

void rec_write_status(local_reconciler *r, const json_t *sb, status_update *u)
{
    json_t *out = NULL;
    _cleanup_free_ char *ip = NULL, *msg = NULL;
    if (u->has_pod && r->net && u->uid) {
        /* The sandbox's rules follow its template (re-applied after a restart, or when the
         * template changed); the condition carries the blocked-connection counts. */
        _cleanup_(json_decrefp) json_t *tpl = NULL;
        local_net_policy_kind nk = rec_net_policy(r, sb, &tpl);
        const char *st, *reason;
        pthread_mutex_lock(&r->net_lock);
        local_net_refresh(r->net, u->uid, nk, tpl);
        local_net_describe(r->net, u->uid, nk, &ip, &st, &reason, &msg, &u->blocked);
        pthread_mutex_unlock(&r->net_lock);
        u->netpol_status = st;
        u->netpol_reason = reason;
        u->netpol_message = msg ? msg : "";
        u->pod_ip = ip;
    }
    const char *ns = api_meta_string(sb, "namespace"), *name = api_meta_string(sb, "name");
    int k = local_store_update_current(r->store, r->kind, ns, name, sb, status_fn, u, &out);
    if (k < 0 && k != -ENOENT)
        log_warn("cannot write sandbox status", "sandbox", name, "error", strerror(-k));
    json_decref(out);
    /* Ready: its name leads local clients to its sockets (local-names.h). */
    if (k != -ENOENT && u->uid && u->has_pod && u->o.pod_ready && !u->o.pod_frozen) {
        int nk = local_names_bind(r->state_dir, ns, name, u->uid);
        if (nk < 0)
            log_warn("cannot record the sandbox's name", "sandbox", name, "error", strerror(-nk));
    }
}
