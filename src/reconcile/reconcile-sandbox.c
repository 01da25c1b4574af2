/* The Sandbox's own rules (shared/spec/UPSTREAM.md §2.4.4–§2.4.6): two-pass expiry, and the
 * status and conditions from what a backend observed of the pod or container it made. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "basic/macro.h"
#include "reconcile/reconcile-internal.h"

#define REASON_EXPIRED "SandboxExpired"

static bool str_eq(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}

static const char *spec_string(const json_t *sb, const char *key)
{
    return json_string_value(json_object_get(json_object_get(sb, "spec"), key));
}

static json_int_t generation(const json_t *sb)
{
    return json_integer_value(json_object_get(json_object_get(sb, "metadata"), "generation"));
}

bool reconcile_sandbox_suspended(const json_t *sandbox)
{
    const char *mode = spec_string(sandbox, "operatingMode");
    if (mode)
        return str_eq(mode, "Suspended");
    /* A v1alpha1 object not converted yet: replicas 0 is Suspended, anything else Running. */
    const json_t *replicas = json_object_get(json_object_get(sandbox, "spec"), "replicas");
    return json_is_integer(replicas) && json_integer_value(replicas) == 0;
}

void reconcile_sandbox_out_done(reconcile_sandbox_out *out)
{
    if (!out)
        return;
    json_decref(out->status);
    *out = (reconcile_sandbox_out){0};
}

/* Appends a condition (owned) to conds; -ENOMEM when it or the append failed. */
static int append_condition(json_t *conds, json_t *c)
{
    return c && json_array_append_new(conds, c) == 0 ? 0 : -ENOMEM;
}

/* ---- expiry (§2.4.6) ---- */

/* The stored status with Ready=False/SandboxExpired first and PodScheduled removed; with
 * only_conditions (Retain after cleanup) nothing but the conditions. Owned, NULL on ENOMEM. */
static json_t *expired_status(const json_t *sb, int64_t now, bool only_conditions)
{
    const json_t *stored = json_object_get(sb, "status");
    _cleanup_json_ json_t *status =
        only_conditions || !json_is_object(stored) ? json_object() : json_deep_copy(stored);
    json_t *conds = json_array();
    if (!status || !conds || json_object_set_new(status, "conditions", conds) < 0)
        return NULL;
    if (append_condition(conds,
                         reconcile_make_condition(sb, "Ready", "False", REASON_EXPIRED,
                                                  "Sandbox has expired", generation(sb), now)) < 0)
        return NULL;
    size_t i;
    json_t *c;
    json_array_foreach (json_object_get(stored, "conditions"), i, c) {
        const char *t = json_string_value(json_object_get(c, "type"));
        if (t && !str_eq(t, "Ready") && !str_eq(t, "PodScheduled") &&
            json_array_append(conds, c) < 0)
            return NULL;
    }
    return TAKE_PTR(status);
}

int reconcile_sandbox_expiry(const reconcile_sandbox_in *in, reconcile_sandbox_out *out)
{
    const json_t *sb = in->sandbox;
    int64_t when;
    *out = (reconcile_sandbox_out){.action = RECONCILE_SANDBOX_RUN,
                                   .ready = reconcile_sandbox_ready(sb)};
    if (reconcile_parse_time(spec_string(sb, "shutdownTime"), &when) < 0)
        return 0; /* no (usable) shutdownTime: never expires */
    if (in->now < when) {
        /* At its time, not later: a user's expiry fires within a second of what they asked. */
        out->requeue = MAX(when - in->now, RECONCILE_EXPIRY_MARK_REQUEUE_USEC);
        return 0;
    }
    out->ready = false;
    const char *reason =
        json_string_value(json_object_get(reconcile_condition(sb, "Ready"), "reason"));
    const char *policy = spec_string(sb, "shutdownPolicy");
    if (!str_eq(reason, REASON_EXPIRED)) {
        out->action = RECONCILE_SANDBOX_EXPIRE_MARK;
        out->requeue = RECONCILE_EXPIRY_MARK_REQUEUE_USEC;
    } else if (str_eq(policy, "Delete") || str_eq(policy, "DeleteForeground")) {
        /* nil is Retain (the CRD default); DeleteForeground is a claim policy: as Delete. */
        out->action = RECONCILE_SANDBOX_EXPIRE_DELETE;
        return 0;
    } else
        out->action = RECONCILE_SANDBOX_EXPIRE_RETAIN;
    out->status = expired_status(sb, in->now, out->action == RECONCILE_SANDBOX_EXPIRE_RETAIN);
    if (!out->status)
        return -ENOMEM;
    out->status_changed = !json_equal(out->status, json_object_get(sb, "status"));
    return 0;
}

/* ---- status (§2.4.4, §2.4.5) ---- */

typedef struct ready_cond {
    const char *status, *reason;
    char *message; /* owned */
} ready_cond;

/* DependenciesNotReady / DependenciesReady: the pod's way to Ready, and the Service's when it
 * is required. */
static int dependencies(const reconcile_sandbox_in *in, ready_cond *r)
{
    const reconcile_sandbox_observed *o = &in->observed;
    const json_t *flag = json_object_get(json_object_get(in->sandbox, "spec"), "service");
    bool svc_required =
        !in->no_services && (json_is_true(flag) || ((!flag || json_is_null(flag)) && o->service));
    const char *suffix =
        svc_required ? (o->service ? "; Service Exists" : "; Service does not exist") : "";
    r->status = "False";
    r->reason = "DependenciesNotReady";
    int k;
    if (o->not_ready_message)
        k = asprintf(&r->message, "%s%s", o->not_ready_message, suffix);
    else if (!o->pod)
        k = asprintf(&r->message, "Pod does not exist%s", suffix);
    else if (!str_eq(o->phase, "Running"))
        k = asprintf(&r->message, "Pod exists with phase: %s%s", o->phase ? o->phase : "", suffix);
    else if (!o->pod_ready)
        k = asprintf(&r->message, "Pod is Running but not Ready%s", suffix);
    else if (json_array_size(o->pod_ips) == 0 && !in->ips_optional)
        k = asprintf(&r->message, "Pod is Ready but has no podIPs yet%s", suffix);
    else {
        if (!svc_required || o->service) {
            r->status = "True";
            r->reason = "DependenciesReady";
        }
        k = asprintf(&r->message, "Pod is Ready%s", suffix);
    }
    if (k < 0) {
        r->message = NULL;
        return -ENOMEM;
    }
    return 0;
}

/* The Ready condition's table (§2.4.5), first match wins. */
static int ready_condition(const reconcile_sandbox_in *in, ready_cond *r)
{
    const reconcile_sandbox_observed *o = &in->observed;
    const char *msg;
    int k = 0;
    r->status = "False";
    if (o->error) {
        r->reason = "ReconcilerError";
        r->message = reconcile_error_seen(o->error);
        k = r->message ? 0 : -1;
    } else if (o->failure_reason) {
        r->reason = o->failure_reason;
        k = asprintf(&r->message, "%s", o->failure_message ? o->failure_message : "");
    } else if (o->owned_pods > 1) {
        r->reason = "MultiplePods";
        k = asprintf(&r->message,
                     "multiple Pods (%zu) are controlled by this Sandbox; refusing to choose or "
                     "create a Pod",
                     o->owned_pods);
    } else if (reconcile_sandbox_suspended(in->sandbox)) {
        r->reason = "SandboxSuspended";
        msg = o->pod && !o->pod_frozen ? "Sandbox is suspending" : "Sandbox is suspended";
        k = asprintf(&r->message, "%s", msg);
    } else if (str_eq(o->phase, "Succeeded")) {
        r->reason = "PodSucceeded";
        k = asprintf(&r->message, "Pod completed successfully");
    } else if (str_eq(o->phase, "Failed")) {
        r->reason = "PodFailed";
        k = asprintf(&r->message, "Pod failed");
    } else
        return dependencies(in, r);
    if (k < 0) {
        r->message = NULL;
        return -ENOMEM;
    }
    return 0;
}

static json_t *suspended_condition(const reconcile_sandbox_in *in, json_int_t gen)
{
    const reconcile_sandbox_observed *o = &in->observed;
    const json_t *sb = in->sandbox;
    if (!reconcile_sandbox_suspended(sb))
        return reconcile_make_condition(sb, "Suspended", "False", "NotSuspended",
                                        "Sandbox is not suspended", gen, in->now);
    if (o->pod_not_owned)
        return reconcile_make_condition(sb, "Suspended", "False", "PodNotOwned",
                                        "Pod is not owned by this Sandbox", gen, in->now);
    if (o->pod && o->pod_frozen)
        return reconcile_make_condition(
            sb, "Suspended", "True", "PodFrozen",
            "Pod is frozen (memory and processes kept). Sandbox is suspended", gen, in->now);
    if (o->pod)
        return reconcile_make_condition(sb, "Suspended", "False", "PodTerminating",
                                        "Pod is terminating", gen, in->now);
    return reconcile_make_condition(sb, "Suspended", "True", "PodTerminated",
                                    "Pod has been terminated. Sandbox is suspended", gen, in->now);
}

/* PodScheduled copies the pod's condition; an empty reason becomes PodScheduled (True) or
 * PodSchedulingUnknown. */
static json_t *scheduled_condition(const reconcile_sandbox_in *in, json_int_t gen)
{
    const json_t *psc = in->observed.pod_scheduled;
    const char *s = json_string_value(json_object_get(psc, "status"));
    const char *r = json_string_value(json_object_get(psc, "reason"));
    const char *m = json_string_value(json_object_get(psc, "message"));
    if (!s)
        s = "Unknown";
    if (!r || !*r)
        r = str_eq(s, "True") ? "PodScheduled" : "PodSchedulingUnknown";
    return reconcile_make_condition(in->sandbox, "PodScheduled", s, r, m ? m : "", gen, in->now);
}

static int conditions(const reconcile_sandbox_in *in, json_t *conds, bool *ret_ready)
{
    const reconcile_sandbox_observed *o = &in->observed;
    json_int_t gen = generation(in->sandbox);
    ready_cond r = {0};
    int k = ready_condition(in, &r);
    if (k < 0)
        return k;
    *ret_ready = str_eq(r.status, "True");
    k = append_condition(conds, reconcile_make_condition(in->sandbox, "Ready", r.status, r.reason,
                                                         r.message, gen, in->now));
    free(r.message);
    if (k < 0 || append_condition(conds, suspended_condition(in, gen)) < 0)
        return -ENOMEM;
    if (o->pod && !in->no_scheduling && append_condition(conds, scheduled_condition(in, gen)) < 0)
        return -ENOMEM;
    bool succeeded = str_eq(o->phase, "Succeeded");
    if (succeeded || str_eq(o->phase, "Failed")) {
        const char *m = o->finished_message ? o->finished_message
                        : succeeded         ? "Pod completed successfully"
                                            : "Pod failed";
        if (append_condition(conds,
                             reconcile_make_condition(in->sandbox, "Finished", "True",
                                                      succeeded ? "PodSucceeded" : "PodFailed", m,
                                                      gen, in->now)) < 0)
            return -ENOMEM;
    }
    return 0;
}

/* selector, podIPs, nodeName (§2.4.4), service and serviceFQDN (§2.4.3). */
static int status_fields(const reconcile_sandbox_in *in, json_t *status)
{
    const reconcile_sandbox_observed *o = &in->observed;
    const json_t *stored = json_object_get(in->sandbox, "status");
    const char *name = api_meta_string(in->sandbox, "name");
    int k = 0;
    if (o->pod && o->owned_pods <= 1) {
        char hash[9], sel[80];
        reconcile_name_hash(name, hash);
        snprintf(sel, sizeof sel, "%s=%s", RECONCILE_LABEL_NAME_HASH, hash);
        k |= json_object_set_new(status, "selector", json_string(sel));
        if (json_array_size(o->pod_ips) > 0)
            k |= json_object_set_new(status, "podIPs", json_deep_copy(o->pod_ips));
        if (o->node_name && *o->node_name)
            k |= json_object_set_new(status, "nodeName", json_string(o->node_name));
    } else if (json_string_value(json_object_get(stored, "selector")))
        /* Set once a pod has been seen; not cleared on suspend. */
        k |= json_object_set(status, "selector", json_object_get(stored, "selector"));
    if (o->service) {
        k |= json_object_set_new(status, "service", json_string(name ? name : ""));
        k |= json_object_set_new(status, "serviceFQDN",
                                 json_string(o->service_fqdn ? o->service_fqdn : ""));
    }
    return k ? -ENOMEM : 0;
}

/* Whether new differs from stored by more than a nodeName that has to wait for Ready. */
static int worth_writing(const json_t *sb, const json_t *new, bool *ret)
{
    const json_t *stored = json_object_get(sb, "status");
    *ret = !json_equal(new, stored);
    if (!*ret || reconcile_sandbox_ready(sb))
        return 0;
    _cleanup_json_ json_t *same_node = json_deep_copy(new);
    if (!same_node)
        return -ENOMEM;
    json_t *node = json_object_get(stored, "nodeName");
    if (node && json_object_set(same_node, "nodeName", node) < 0)
        return -ENOMEM;
    if (!node)
        json_object_del(same_node, "nodeName");
    *ret = !json_equal(same_node, stored);
    return 0;
}

int reconcile_sandbox_status(const reconcile_sandbox_in *in, reconcile_sandbox_out *out)
{
    *out = (reconcile_sandbox_out){.action = RECONCILE_SANDBOX_RUN};
    _cleanup_json_ json_t *status = json_object();
    json_t *conds = json_array();
    if (!status || !conds || json_object_set_new(status, "conditions", conds) < 0)
        return -ENOMEM;
    int k = conditions(in, conds, &out->ready);
    if (k >= 0)
        k = status_fields(in, status);
    if (k >= 0)
        k = worth_writing(in->sandbox, status, &out->status_changed);
    if (k < 0)
        return k;
    out->status = TAKE_PTR(status);
    return 0;
}
