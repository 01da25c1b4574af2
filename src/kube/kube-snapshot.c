/* SandboxSnapshots on a cluster (asb-controller --snapshots; docs/snapshots.md "On a cluster").
 * A SandboxSnapshot becomes one snapshot.storage.k8s.io/v1 VolumeSnapshot per volumeClaimTemplate
 * of its Sandbox (of the PVC <volume>-<sandbox>), owned by the SandboxSnapshot (deleting it
 * deletes them), with the VolumeSnapshotClass of the annotation below or, without it, the
 * cluster's default class. Ready follows the VolumeSnapshots' readyToUse and error. The source's
 * pod template and volume claim templates are recorded in status.source, as on the local backend,
 * so a fork needs only the snapshot. A fork is a Sandbox whose image is `snapshot:NAME`
 * (asb fork / asb_fork build them): its PVCs take the VolumeSnapshots as dataSource, its
 * containers the recorded images. The CSI driver copies the data, never this controller. */
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

#define CLASS_ANNOTATION "agents.x-k8s.io/volume-snapshot-class"
#define SNAPSHOT_IMAGE_PREFIX "snapshot:"
#define POLL_USEC (2LL * 1000000) /* VolumeSnapshot status changes also arrive as events */

static json_t *vct_list(const json_t *sb)
{
    return json_object_get(json_object_get(sb, "spec"), "volumeClaimTemplates");
}

/* The VolumeSnapshot of volume `volume` of snapshot `snap`: <snapshot>-<volume>. Owned. */
static char *volsnap_name(const char *snap, const char *volume)
{
    char *n = NULL;
    return asprintf(&n, "%s-%s", snap, volume) < 0 ? NULL : n;
}

static int write_status(kube_ctl *ctl, const json_t *snap, const char *status, const char *reason,
                        const char *message, json_t *extra)
{
    _cleanup_json_ json_t *x = extra;
    json_t *cond = reconcile_make_condition(
        snap, "Ready", status, reason, message,
        json_integer_value(json_object_get(json_object_get(snap, "metadata"), "generation")),
        (int64_t)now_usec(CLOCK_REALTIME));
    _cleanup_json_ json_t *st = json_pack("{s:[o*]}", "conditions", cond);
    if (!st || (x && json_object_update(st, x) < 0))
        return -ENOMEM;
    const json_t *old = json_object_get(snap, "status");
    bool same = true;
    const char *k;
    json_t *v;
    json_object_foreach (st, k, v)
        if (!json_equal(v, json_object_get(old, k)))
            same = false;
    if (same)
        return 0;
    if (strcmp(status, "False") == 0 && !json_equal(reconcile_condition(snap, "Ready"), cond))
        kube_event(ctl, snap, "Warning", reason, message);
    else if (strcmp(status, "True") == 0 && !json_equal(reconcile_condition(snap, "Ready"), cond))
        kube_event(ctl, snap, "Normal", reason, message);
    _cleanup_json_ json_t *patch = json_pack("{s:O}", "status", st);
    return patch ? kube_patch(ctl, KR_SNAPSHOT, snap, "status", patch, false, NULL) : -ENOMEM;
}

/* What a fork needs of the source, recorded once. Owned, NULL when out of memory. */
static json_t *source_of(const json_t *sb)
{
    const json_t *spec = json_object_get(sb, "spec");
    const json_t *pt = json_object_get(spec, "podTemplate");
    const json_t *c0 =
        json_array_get(json_object_get(json_object_get(pt, "spec"), "containers"), 0);
    json_t *src =
        json_pack("{s:s,s:s,s:s,s:O*,s:O*}", "sandbox", kube_str(sb, "metadata.name") ?: "",
                  "sandboxUID", kube_str(sb, "metadata.uid") ?: "", "image",
                  json_string_value(json_object_get(c0, "image")) ?: "", "podTemplate", pt,
                  "volumeClaimTemplates", vct_list(sb));
    return src;
}

/* Creates the missing VolumeSnapshots; their states into *ret_vs (owned array). Returns 0, or
 * a negative errno. *ret_failed (borrowed) is the first error a VolumeSnapshot reports. */
static int ensure_volume_snapshots(kube_ctl *ctl, const json_t *snap, const json_t *vcts,
                                   const char *sandbox, json_t **ret_vs, bool *ret_ready,
                                   const char **ret_failed)
{
    const char *ns = kube_str(snap, "metadata.namespace"), *name = kube_str(snap, "metadata.name");
    const char *cls = json_string_value(json_object_get(
        json_object_get(json_object_get(snap, "metadata"), "annotations"), CLASS_ANNOTATION));
    _cleanup_json_ json_t *out = json_array();
    if (!out)
        return -ENOMEM;
    *ret_ready = true;
    *ret_failed = NULL;
    size_t i;
    json_t *t;
    json_array_foreach (vcts, i, t) {
        const char *vol = kube_str(t, "metadata.name");
        if (!vol)
            continue; /* no PVC either (kube-sandbox.c skips it too) */
        _cleanup_free_ char *vs_name = volsnap_name(name, vol), *pvc = NULL;
        if (!vs_name || asprintf(&pvc, "%s-%s", vol, sandbox) < 0)
            return -ENOMEM;
        _cleanup_json_ json_t *vs = kube_informer_get(&ctl->inf[KR_VOLSNAP], ns, vs_name);
        if (!vs) {
            _cleanup_json_ json_t *o = json_pack(
                "{s:s,s:s,s:{s:s,s:s,s:{s:s,s:s},s:[o]},s:{s:{s:s}}}", "apiVersion",
                "snapshot.storage.k8s.io/v1", "kind", "VolumeSnapshot", "metadata", "name", vs_name,
                "namespace", ns, "labels", "agents.x-k8s.io/sandbox-snapshot", name,
                "agents.x-k8s.io/volume", vol, "ownerReferences", reconcile_owner_ref(snap), "spec",
                "source", "persistentVolumeClaimName", pvc);
            if (!o || (cls && json_object_set_new(json_object_get(o, "spec"),
                                                  "volumeSnapshotClassName", json_string(cls)) < 0))
                return -ENOMEM;
            int e = kube_create(ctl, KR_VOLSNAP, ns, o, &vs);
            if (e == -EEXIST)
                e = 0;
            if (e < 0)
                return e;
            if (!vs)
                vs = json_incref(o);
            log_info("created volume snapshot", "namespace", ns, "snapshot", name, "volume", vol);
        }
        const json_t *st = json_object_get(vs, "status");
        bool ready = json_is_true(json_object_get(st, "readyToUse"));
        const char *err = kube_str(vs, "status.error.message");
        json_t *item =
            json_pack("{s:s,s:s,s:b}", "volume", vol, "name", vs_name, "readyToUse", ready);
        if (!item || json_array_append_new(out, item) < 0)
            return -ENOMEM;
        if (kube_str(vs, "status.restoreSize"))
            json_object_set_new(item, "restoreSize",
                                json_string(kube_str(vs, "status.restoreSize")));
        if (err) {
            json_object_set_new(item, "error", json_string(err));
            if (!*ret_failed)
                *ret_failed = kube_str(item, "error"); /* borrowed from out */
        }
        *ret_ready = *ret_ready && ready;
    }
    *ret_vs = TAKE_PTR(out);
    return 0;
}

int kube_reconcile_snapshot(kube_ctl *ctl, const char *ns, const char *name, int64_t *ret_requeue)
{
    _cleanup_json_ json_t *snap = kube_informer_get(&ctl->inf[KR_SNAPSHOT], ns, name);
    if (!snap || reconcile_deleting(snap))
        return 0; /* its VolumeSnapshots go with it (ownerReferences) */
    const json_t *status = json_object_get(snap, "status");
    _cleanup_json_ json_t *source = json_incref(json_object_get(status, "source"));
    if (!source) {
        const char *sbn = kube_str(snap, "spec.sandboxRef.name");
        _cleanup_json_ json_t *sb = sbn ? kube_informer_get(&ctl->inf[KR_SANDBOX], ns, sbn) : NULL;
        if (!sb || reconcile_deleting(sb))
            return write_status(ctl, snap, "False", "SandboxNotFound",
                                "the Sandbox does not exist or is being deleted", NULL);
        if (json_array_size(vct_list(sb)) == 0)
            return write_status(ctl, snap, "False", "NoVolumes",
                                "the Sandbox has no volumeClaimTemplates: on a cluster a snapshot "
                                "captures PVCs, so its root directory must live on one "
                                "(docs/snapshots.md, \"On a cluster\")",
                                NULL);
        if (!(source = source_of(sb)))
            return -ENOMEM;
    }
    _cleanup_json_ json_t *vs = NULL;
    bool ready;
    const char *failed;
    int e = ensure_volume_snapshots(ctl, snap, json_object_get(source, "volumeClaimTemplates"),
                                    kube_str(source, "sandbox"), &vs, &ready, &failed);
    if (e < 0)
        return e;
    json_t *extra = json_pack("{s:O,s:O}", "source", source, "volumeSnapshots", vs);
    if (!extra)
        return -ENOMEM;
    if (failed)
        return write_status(ctl, snap, "False", "CaptureFailed", failed, extra);
    if (!ready) {
        *ret_requeue = POLL_USEC;
        return write_status(ctl, snap, "False", "Capturing",
                            "waiting for the VolumeSnapshots to be readyToUse", extra);
    }
    if (!json_object_get(status, "capturedAt")) {
        char when[32];
        time_t t = (time_t)((int64_t)now_usec(CLOCK_REALTIME) / 1000000);
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
        json_object_set_new(extra, "capturedAt", json_string(when));
    } else
        json_object_set(extra, "capturedAt", json_object_get(status, "capturedAt"));
    return write_status(ctl, snap, "True", "Captured", "every volume is captured", extra);
}

const char *kube_snapshot_of_sandbox(const json_t *sb)
{
    const json_t *c0 = json_array_get(
        json_object_get(
            json_object_get(json_object_get(json_object_get(sb, "spec"), "podTemplate"), "spec"),
            "containers"),
        0);
    const char *img = json_string_value(json_object_get(c0, "image"));
    size_t n = strlen(SNAPSHOT_IMAGE_PREFIX);
    return img && strncmp(img, SNAPSHOT_IMAGE_PREFIX, n) == 0 && img[n] ? img + n : NULL;
}

/* The Ready SandboxSnapshot NAME (new reference), or NULL with *ret_why. */
static json_t *ready_snapshot(kube_ctl *ctl, const char *ns, const char *name, const char **ret_why)
{
    if (!ctl->opt.snapshots) {
        *ret_why = "image snapshot:NAME needs asb-controller --snapshots";
        return NULL;
    }
    json_t *snap = kube_informer_get(&ctl->inf[KR_SNAPSHOT], ns, name);
    const char *st =
        json_string_value(json_object_get(reconcile_condition(snap, "Ready"), "status"));
    if (!snap || !st || strcmp(st, "True") != 0) {
        *ret_why = snap ? "SnapshotNotReady" : "SnapshotNotFound";
        json_decref(snap);
        return NULL;
    }
    return snap;
}

int kube_snapshot_data_source(kube_ctl *ctl, const char *ns, const char *snapshot,
                              const char *volume, json_t **ret, const char **ret_why)
{
    *ret = NULL;
    _cleanup_json_ json_t *snap = ready_snapshot(ctl, ns, snapshot, ret_why);
    if (!snap)
        return -EAGAIN;
    size_t i;
    json_t *v;
    json_array_foreach (json_object_get(json_object_get(snap, "status"), "volumeSnapshots"), i, v)
        if (strcmp(kube_str(v, "volume") ?: "", volume) == 0) {
            *ret = json_pack("{s:s,s:s,s:s}", "apiGroup", "snapshot.storage.k8s.io", "kind",
                             "VolumeSnapshot", "name", kube_str(v, "name") ?: "");
            return *ret ? 0 : -ENOMEM;
        }
    return 0;
}

int kube_snapshot_pod_images(kube_ctl *ctl, const char *ns, const char *snapshot, json_t *spec,
                             const char **ret_why)
{
    _cleanup_json_ json_t *snap = ready_snapshot(ctl, ns, snapshot, ret_why);
    if (!snap)
        return -EAGAIN;
    const json_t *src = json_object_get(json_object_get(snap, "status"), "source");
    const json_t *recorded =
        json_object_get(json_object_get(json_object_get(src, "podTemplate"), "spec"), "containers");
    size_t i, j;
    json_t *c, *r;
    json_array_foreach (json_object_get(spec, "containers"), i, c) {
        const char *img = json_string_value(json_object_get(c, "image"));
        if (!img || strncmp(img, SNAPSHOT_IMAGE_PREFIX, strlen(SNAPSHOT_IMAGE_PREFIX)) != 0)
            continue;
        const char *want = kube_str(src, "image"); /* a container the source did not have */
        json_array_foreach (recorded, j, r)
            if (json_equal(json_object_get(r, "name"), json_object_get(c, "name")))
                want = json_string_value(json_object_get(r, "image")) ?: want;
        if (!want || !*want) {
            *ret_why = "the snapshot records no image for the container";
            return -EINVAL;
        }
        if (json_object_set_new(c, "image", json_string(want)) < 0)
            return -ENOMEM;
    }
    return 0;
}
