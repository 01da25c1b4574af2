/* Forks without copying (docs/snapshots.md, "Fork and restore"): a snapshot is unpacked once
 * into a read-only tree, and each fork's workspace and volumes are overlayfs mounts over it.
 *
 * Trees: $ASB_STATE_DIR/snapshots/trees/<snapshot uid>/<root name> (the manifest's roots:
 * "workspace", "volume-NAME"), written by snap_restore with the sandbox's ids as they are
 * (uid 0 inside is 0 on disk). trees/ is 0700: nothing on the host but root reaches them. A tree
 * is made at the first fork (under a lock, in a temporary directory renamed into place) and
 * removed by local_snapshot_trees_gc once its snapshot is deleted and no sandbox directory names
 * it in its `seeded` marker: deleting a snapshot never takes a running fork's files away.
 *
 * A fork's root `dest` becomes overlayfs(lower = the tree's root, idmapped to the sandbox's
 * user namespace range when it has one, so files appear owned by its ids; upper and work =
 * <dirname(dest)>/.fork-<basename(dest)>/{upper,work}, on the same filesystem as dest, so
 * copied-up data counts against the sandbox's ephemeral-storage limit). index=on keeps hard
 * links whole across copy-up; redirect_dir=on lets directories be renamed. The mounts live in
 * the host's mount namespace: they survive a restart of `asb serve`; after a reboot the next
 * start mounts them again (local_snapshot_overlay_mount is idempotent). Root only. All
 * functions return 0 or a negative errno, never log. */
#pragma once

#include <stdint.h>

#define LOCAL_SNAPSHOT_TREES "trees"
/* sandboxes/<uid>/seeded of a sandbox started from a snapshot: "SNAPSHOT_UID\nBASE_IMAGE\n", then
 * "overlay\n" when its directories are overlays over the snapshot's tree. */
#define LOCAL_SNAPSHOT_SEEDED "seeded"

/* The unpacked tree of snapshot snap_uid: made now unless it exists. *ret_dir (owned) is
 * trees/<uid>. On failure *ret_message (owned) says why. */
int local_snapshot_tree_get(const char *state_dir, const char *snap_uid, char **ret_dir,
                            char **ret_message);

/* Whether a mount of dir can be idmapped to a user namespace starting at id_base, as a fork's
 * lower layer is: 0 when it can, else the negative errno the kernel gave (EINVAL on filesystems
 * that refuse idmapped mounts: overlayfs among them, so a state directory on a container's
 * overlayfs root; ENOSYS/EPERM on older kernels or without the capability). Mounts nothing. */
int local_snapshot_overlay_probe(const char *dir, uint32_t id_base);

/* Mounts the overlay over the existing directory dest (nothing happens when dest is a mount
 * point already): lower = lower_dir, host ids = id_base + ids in the tree (id_base 0: no
 * idmapping). The upper root takes the lower root's owner, mode and times. *ret_error (owned) on
 * failure. */
int local_snapshot_overlay_mount(const char *lower_dir, const char *dest, uint32_t id_base,
                                 char **ret_error);

/* Unmounts every overlayfs mounted at or below dir (deepest first; lazily when busy). Nothing
 * mounted is success. */
int local_snapshot_overlays_release(const char *dir);

/* The same for a sandbox's directory or its volumes directory, where a fork's overlays are
 * mounted only on the directory itself or one of its entries (its workspace, each volume): the
 * mount table is read only when a statfs of those finds an overlayfs. Every teardown calls it,
 * and the table has a line per mount on the host (one per sandbox with a disk). */
int local_snapshot_entry_overlays_release(const char *dir);

/* Removes the trees of snapshots whose manifest is gone and that no
 * sandboxes/<uid>/seeded names. */
void local_snapshot_trees_gc(const char *state_dir);
