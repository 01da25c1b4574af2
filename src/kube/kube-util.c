/* Small helpers of the controller: clock, JSON paths, writes with optimistic locking. */
#include "kube/kube.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "basic/macro.h"
#include "basic/time-util.h"
#include "reconcile/reconcile.h"
#include "shared/log.h"

const char *kube_str(const json_t *obj, const char *path)
{
    const json_t *cur = obj;
    const char *p = path;
    while (cur && *p) {
        size_t n = strcspn(p, ".");
        char seg[64];
        if (n >= sizeof seg)
            return NULL;
        memcpy(seg, p, n);
        seg[n] = 0;
        cur = json_object_get(cur, seg);
        p += n;
        if (*p == '.')
            p++;
    }
    return json_string_value(cur);
}

bool kube_is_system_key(const char *key)
{
    return strncmp(key, "agents.x-k8s.io/", 16) == 0 ||
           strncmp(key, "extensions.agents.x-k8s.io/", 27) == 0 ||
           strcmp(key, "opentelemetry.io/trace-context") == 0;
}

int kube_patch(kube_ctl *ctl, kube_res r, const json_t *obj, const char *sub, const json_t *patch,
               bool lock_rv, json_t **ret_obj)
{
    _cleanup_json_ json_t *p = json_deep_copy(patch);
    if (!p)
        return -ENOMEM;
    if (lock_rv) {
        json_t *md = json_object_get(p, "metadata");
        if (!md) {
            md = json_object();
            json_object_set_new(p, "metadata", md);
        }
        json_object_set_new(md, "resourceVersion",
                            json_string(kube_str(obj, "metadata.resourceVersion")));
    }
    _cleanup_free_ char *path = kube_path(r, kube_str(obj, "metadata.namespace"),
                                          kube_str(obj, "metadata.name"), sub, NULL);
    if (!path)
        return -ENOMEM;
    json_t *ans = NULL;
    int e = kube_call(ctl->client, "PATCH", path, "application/merge-patch+json", p, &ans);
    if (e == -ESTALE)
        atomic_fetch_add(&ctl->metrics.conflicts, 1);
    if (e == 0 && ret_obj)
        *ret_obj = ans;
    else
        json_decref(ans);
    return e;
}

int kube_delete(kube_ctl *ctl, kube_res r, const json_t *obj, const char *propagation)
{
    _cleanup_free_ char *path = kube_path(r, kube_str(obj, "metadata.namespace"),
                                          kube_str(obj, "metadata.name"), NULL, NULL);
    _cleanup_json_ json_t *body =
        json_pack("{s:s,s:s,s:{s:s}}", "kind", "DeleteOptions", "apiVersion", "v1", "preconditions",
                  "uid", kube_str(obj, "metadata.uid") ?: "");
    if (!path || !body)
        return -ENOMEM;
    if (propagation)
        json_object_set_new(body, "propagationPolicy", json_string(propagation));
    int e = kube_call(ctl->client, "DELETE", path, NULL, body, NULL);
    return e == -ENOENT ? 0 : e;
}

int kube_create(kube_ctl *ctl, kube_res r, const char *ns, const json_t *obj, json_t **ret_obj)
{
    _cleanup_free_ char *path = kube_path(r, ns, NULL, NULL, NULL);
    if (!path)
        return -ENOMEM;
    json_t *ans = NULL;
    int e = kube_call(ctl->client, "POST", path, NULL, obj, &ans);
    if (e == 0 && ret_obj)
        *ret_obj = ans;
    else
        json_decref(ans);
    return e;
}

void kube_event(kube_ctl *ctl, const json_t *obj, const char *type, const char *reason,
                const char *message)
{
    const char *ns = kube_str(obj, "metadata.namespace");
    const char *name = kube_str(obj, "metadata.name");
    if (!ns || !name || !reason)
        return;
    char ts[40];
    reconcile_format_time((int64_t)now_usec(CLOCK_REALTIME), 0, ts);
    char mts[40];
    reconcile_format_time((int64_t)now_usec(CLOCK_REALTIME), 6, mts);
    _cleanup_free_ char *gen = NULL;
    if (asprintf(&gen, "%s.", name) < 0)
        return;
    _cleanup_json_ json_t *ev = json_pack(
        "{s:s,s:s,s:{s:s,s:s},s:{s:s,s:s,s:s,s:s,s:s},s:s,s:s,s:s,s:{s:s},s:s,s:s,s:I,s:s,s:s}",
        "apiVersion", "v1", "kind", "Event", "metadata", "generateName", gen, "namespace", ns,
        "involvedObject", "apiVersion", kube_str(obj, "apiVersion") ?: "", "kind",
        kube_str(obj, "kind") ?: "", "name", name, "namespace", ns, "uid",
        kube_str(obj, "metadata.uid") ?: "", "reason", reason, "message", message ? message : "",
        "type", type, "source", "component", "agent-sandbox-controller", "firstTimestamp", ts,
        "lastTimestamp", ts, "count", (json_int_t)1, "reportingComponent",
        "agent-sandbox-controller", "eventTime", mts);
    if (!ev)
        return;
    int e = kube_create(ctl, KR_EVENT, ns, ev, NULL);
    if (e < 0)
        log_debug("event not recorded", "reason", reason, "error", strerror(-e));
}
