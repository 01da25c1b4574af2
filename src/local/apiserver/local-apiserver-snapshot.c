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

json_t *apiserver_snapshot_admit_create(api_request *rq, const json_t *obj)
{
    if (!is_snapshot(rq->kind))
        return NULL;
    const char *name = api_meta_string(obj, "name"), *ns = rq->ns ? rq->ns : "default";
    const char *sb = json_string_value(
        json_object_get(json_object_get(json_object_get(obj, "spec"), "sandboxRef"), "name"));
    if (!sb)
        return NULL; /* validation says what is missing */
    _cleanup_(json_decrefp) json_t *found = NULL;
    const api_kind *ks = api_kind_by_plural(API_GROUP_CORE, "sandboxes");
    if (local_store_get(rq->srv->store, ks, ns, sb, &found) == 0 && !reconcile_deleting(found))
        return NULL;
    _cleanup_free_ char *msg = strdup_printf(
        "SandboxSnapshot.%s \"%s\" is invalid: spec.sandboxRef.name: Not found: \"%s\": no Sandbox "
        "of that name in namespace \"%s\"%s",
        rq->kind->group, name ? name : "", sb, ns, found ? " (it is being deleted)" : "");
    return status_failure(KUBE_REASON_INVALID, msg, rq->kind, name);
}

json_t *apiserver_snapshot_admit_delete(api_request *rq)
{
    if (!is_snapshot(rq->kind) || !rq->name)
        return NULL;
    _cleanup_free_ char *why =
        local_snapshot_in_use(rq->srv->store, rq->ns ? rq->ns : "default", rq->name);
    return why ? status_failure(KUBE_REASON_CONFLICT, why, rq->kind, rq->name) : NULL;
}
