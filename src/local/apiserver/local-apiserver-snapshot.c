/* The SandboxSnapshot rules the API server applies before the store (docs/snapshots.md): a
 * snapshot names a Sandbox that exists, and one that a template or a starting Sandbox needs
 * is not deleted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/buf.h"
#include "basic/macro.h"
#include "local/apiserver/local-apiserver-internal.h"
#include "local/snapshot/local-snapshot.h"
#include "reconcile/reconcile.h"

static bool is_snapshot(const api_kind *k)
{
    return strcmp(k->kind, "SandboxSnapshot") == 0;
}

int apiserver_snapshot_admit_create(api_request *rq, const json_t *obj, api_error *err)
{
    if (!is_snapshot(rq->kind))
        return 0;
    const char *name = api_meta_string(obj, "name"), *ns = rq->ns ? rq->ns : "default";
    const char *sb = json_string_value(
        json_object_get(json_object_get(json_object_get(obj, "spec"), "sandboxRef"), "name"));
    if (!sb)
        return 0; /* validation says what is missing */
    _cleanup_(json_decrefp) json_t *found = NULL;
    const api_kind *ks = api_kind_by_plural(API_GROUP_CORE, "sandboxes");
    if (local_store_get(rq->srv->store, ks, ns, sb, &found) == 0 && !reconcile_deleting(found))
        return 0;
    return api_error_set_reason(
        err, KUBE_REASON_INVALID,
        "SandboxSnapshot.%s \"%s\" is invalid: spec.sandboxRef.name: Not found: \"%s\": no Sandbox "
        "of that name in namespace \"%s\"%s",
        rq->kind->group, name ? name : "", sb, ns, found ? " (it is being deleted)" : "");
}

int apiserver_snapshot_admit_delete(api_request *rq, api_error *err)
{
    if (!is_snapshot(rq->kind) || !rq->name)
        return 0;
    _cleanup_free_ char *why =
        local_snapshot_in_use(rq->srv->store, rq->ns ? rq->ns : "default", rq->name);
    return why ? api_error_set_reason(err, KUBE_REASON_CONFLICT, "%s", why) : 0;
}
