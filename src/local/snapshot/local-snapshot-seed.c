/* Starting a Sandbox from a SandboxSnapshot (local-snapshot.h): resolving `snapshot:NAME`,
 * seeding the new sandbox's directories, and what keeps a snapshot from being deleted. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "basic/buf.h"
#include "basic/macro.h"
#include "local/fs/local-fs.h"
#include "local/snapshot/local-snapshot-manifest.h"
#include "local/snapshot/local-snapshot-overlay.h"
#include "local/snapshot/local-snapshot-store.h"
#include "local/snapshot/local-snapshot-tree.h"
#include "local/snapshot/local-snapshot.h"
#include "reconcile/reconcile.h"

int local_snapshot_resolve(local_store *store, const char *ns, const char *name, char **ret_uid,
                           char **ret_image, const char **ret_reason, char **ret_message)
{
    const api_kind *k = api_kind_by_plural(API_GROUP_EXT, "sandboxsnapshots");
    _cleanup_(json_decrefp) json_t *snap = NULL;
    int r = local_store_get(store, k, ns, name, &snap);
    if (r < 0 || reconcile_deleting(snap)) {
        *ret_reason = "SnapshotNotFound";
        *ret_message =
            strdup_printf("SandboxSnapshot \"%s\" not found in namespace \"%s\"", name, ns);
        return r < 0 ? r : -ENOENT;
    }
    const json_t *ready = reconcile_condition(snap, "Ready");
    if (!json_is_string(json_object_get(ready, "status")) ||
        strcmp(json_string_value(json_object_get(ready, "status")), "True") != 0) {
        *ret_reason = "SnapshotNotReady";
        *ret_message = strdup_printf("SandboxSnapshot \"%s\" is not Ready: %s", name,
                                     json_string_value(json_object_get(ready, "message"))
                                         ?: "not captured yet");
        return -EAGAIN;
    }
    const char *img = json_string_value(
        json_object_get(json_object_get(json_object_get(snap, "status"), "source"), "image"));
    *ret_uid = strdup(api_meta_string(snap, "uid"));
    *ret_image = img ? strdup(img) : NULL;
    if (!*ret_uid || (img && !*ret_image)) {
        free(*ret_uid);
        *ret_uid = NULL;
        return -ENOMEM;
    }
    return 0;
}

static int remove_entry(const char *path, void *payload)
{
    (void)payload;
    (void)fs_rm_rf(path);
    return 0;
}

/* Removes what dir holds, keeping dir. */
static void empty_dir(const char *dir)
{
    (void)fs_each_entry(dir, remove_entry, NULL);
}

/* The old way, where overlayfs is missing: every file decompressed into the directories. */
static int seed_by_copy(const char *state_dir, const char *snapshot_uid, const char *workspace,
                        const char *volumes_dir, uint32_t id_base, char **ret_message)
{
    _cleanup_free_ char *dir = strdup_printf("%s/snapshots", state_dir), *err = NULL;
    if (!dir)
        return -ENOMEM;
    snap_store *s = NULL;
    _cleanup_(json_decrefp) json_t *m = NULL;
    int k = snap_store_open(dir, &s);
    if (k == 0 && (k = snap_store_load_manifest(s, snapshot_uid, &m)) == 0)
        k = snap_manifest_check(m, &err);
    const json_t *root;
    size_t i;
    json_array_foreach (k == 0 ? json_object_get(m, "roots") : NULL, i, root) {
        const char *name = json_string_value(json_object_get(root, "name"));
        _cleanup_free_ char *dest =
            strcmp(name, SNAP_ROOT_WORKSPACE) == 0
                ? strdup(workspace)
                : strdup_printf("%s/%s", volumes_dir, name + strlen(SNAP_ROOT_VOLUME_PREFIX));
        if (!dest) {
            k = -ENOMEM;
            break;
        }
        /* A volume the new sandbox does not declare: nothing to put it in. */
        if (access(dest, F_OK) < 0)
            continue;
        if ((k = snap_restore(s, m, name, dest, id_base, &err)) < 0)
            break;
    }
    snap_store_free(s);
    if (k < 0)
        *ret_message =
            strdup_printf("cannot restore snapshot %s: %s", snapshot_uid, err ? err : strerror(-k));
    return k;
}

/* Mounts the overlay of every root of the unpacked tree over its directory. */
static int seed_by_overlay(const char *tree, const char *workspace, const char *volumes_dir,
                           uint32_t id_base, char **ret_message)
{
    _cleanup_free_ char *ws = strdup_printf("%s/" SNAP_ROOT_WORKSPACE, tree),
                        *vols = strdup_printf("%s/" SNAP_ROOT_VOLUME_PREFIX, tree);
    if (!ws || !vols)
        return -ENOMEM;
    int k = 0;
    if (access(ws, F_OK) == 0 && (k = local_snapshot_overlay_mount(ws, workspace, id_base,
                                                                   ret_message)) < 0)
        return k;
    _cleanup_closedir_ DIR *d = opendir(vols);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        _cleanup_free_ char *lower = strdup_printf("%s%s", vols, e->d_name),
                            *dest = strdup_printf("%s/%s", volumes_dir, e->d_name);
        if (!lower || !dest)
            return -ENOMEM;
        /* A volume the new sandbox does not declare: nothing to put it in. */
        if (access(dest, F_OK) < 0)
            continue;
        if ((k = local_snapshot_overlay_mount(lower, dest, id_base, ret_message)) < 0)
            return k;
    }
    return 0;
}

/* Unmounts and empties what a failed first seed left in dir (a workspace or a volume). */
static void undo(const char *dir)
{
    _cleanup_free_ char *real = realpath(dir, NULL), *d1 = real ? strdup(real) : NULL,
                        *d2 = real ? strdup(real) : NULL, *layers = NULL;
    local_snapshot_overlays_release(dir);
    empty_dir(dir);
    if (d1 && d2 && (layers = strdup_printf("%s/.fork-%s", dirname(d1), basename(d2))))
        fs_rm_rf(layers);
}

/* An overlay failure that a copy avoids: no overlayfs here (ENODEV), none over idmapped layers
 * (EINVAL from a filesystem that refuses idmapped mounts, ENOSYS or EOPNOTSUPP on older kernels),
 * or not allowed (EPERM). */
static bool copy_instead(int k)
{
    return k == -ENODEV || k == -EPERM || k == -EINVAL || k == -ENOSYS || k == -EOPNOTSUPP;
}

/* Unmounts and empties every directory a first seed may have written (workspace and volumes). */
static void undo_all(const char *workspace, const char *volumes_dir)
{
    undo(workspace);
    _cleanup_closedir_ DIR *d = opendir(volumes_dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        _cleanup_free_ char *p =
            e->d_name[0] == '.' ? NULL : strdup_printf("%s/%s", volumes_dir, e->d_name);
        if (p)
            undo(p);
    }
}

/* Why a first fork cannot have overlays on this state directory, before anything is unpacked:
 * NULL when idmapped mounts work there (or nothing idmaps), else owned words. */
static char *overlays_refused(const char *state_dir, uint32_t id_base, int *ret_k)
{
    _cleanup_free_ char *dir = strdup_printf("%s/snapshots", state_dir);
    *ret_k = 0;
    if (!id_base || !dir)
        return NULL;
    int k = local_snapshot_overlay_probe(dir, id_base);
    if (k == 0 || !copy_instead(k))
        return NULL;
    *ret_k = k;
    return strdup_printf("the filesystem of %s refuses idmapped mounts (%s)", dir, strerror(-k));
}

int local_snapshot_seed(const char *state_dir, const char *snapshot_uid, const char *workspace,
                        const char *volumes_dir, uint32_t id_base, bool again,
                        char **ret_message)
{
    _cleanup_free_ char *tree = NULL;
    int k = 0;
    _cleanup_free_ char *why = again ? NULL : overlays_refused(state_dir, id_base, &k);
    if (k == 0 && (k = local_snapshot_tree_get(state_dir, snapshot_uid, &tree, ret_message)) == 0)
        k = seed_by_overlay(tree, workspace, volumes_dir, id_base, ret_message);
    if (k == 0)
        return LOCAL_SNAPSHOT_SEED_OVERLAY;
    if (again)
        return k; /* never empty what a running fork wrote */
    undo_all(workspace, volumes_dir);
    if (copy_instead(k)) {
        if (!why)
            why = TAKE_PTR(*ret_message);
        free(*ret_message);
        *ret_message = NULL;
        if ((k = seed_by_copy(state_dir, snapshot_uid, workspace, volumes_dir, id_base,
                              ret_message)) == 0) {
            *ret_message = TAKE_PTR(why);
            return LOCAL_SNAPSHOT_SEED_COPY;
        }
        undo_all(workspace, volumes_dir);
    }
    if (!*ret_message)
        *ret_message = strdup_printf("cannot start from snapshot %s: %s", snapshot_uid,
                                     strerror(-k));
    return k;
}

static bool uses(const json_t *pod_template, const char *image)
{
    const json_t *c;
    size_t i;
    json_array_foreach (json_object_get(json_object_get(pod_template, "spec"), "containers"), i,
                        c) {
        const char *img = json_string_value(json_object_get(c, "image"));
        if (img && strcmp(img, image) == 0)
            return true;
    }
    return false;
}

char *local_snapshot_in_use(local_store *store, const char *ns, const char *name)
{
    _cleanup_free_ char *image = strdup_printf(LOCAL_SNAPSHOT_IMAGE_PREFIX "%s", name);
    const api_kind *kt = api_kind_by_plural(API_GROUP_EXT, "sandboxtemplates"),
                   *ks = api_kind_by_plural(API_GROUP_CORE, "sandboxes");
    _cleanup_(json_decrefp) json_t *tpls = NULL, *sbs = NULL;
    uint64_t rv;
    if (!image)
        return NULL;
    const json_t *it;
    size_t i;
    if (local_store_list(store, kt, ns, &tpls, &rv) == 0)
        json_array_foreach (tpls, i, it)
            if (uses(json_object_get(json_object_get(it, "spec"), "podTemplate"), image))
                return strdup_printf("SandboxSnapshot \"%s\" is the image of SandboxTemplate "
                                     "\"%s\": change or delete the template first",
                                     name, api_meta_string(it, "name"));
    /* A Sandbox that has been Ready was seeded already: it no longer needs the snapshot. */
    if (local_store_list(store, ks, ns, &sbs, &rv) == 0)
        json_array_foreach (sbs, i, it)
            if (!reconcile_deleting(it) && !reconcile_sandbox_ready(it) &&
                uses(json_object_get(json_object_get(it, "spec"), "podTemplate"), image))
                return strdup_printf("SandboxSnapshot \"%s\" is the image of Sandbox \"%s\", which "
                                     "has not started from it yet: wait until it is Ready, or "
                                     "delete it first",
                                     name, api_meta_string(it, "name"));
    return NULL;
}
