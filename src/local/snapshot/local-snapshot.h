/* local/snapshot: SandboxSnapshots (local-snapshot*.c): the snapshotter thread, capture and
 * restore of trees, the content-addressed object store, manifests, overlays and the seed of a
 * fork. Includes from other folders of src/local: store, container (idmap), runtime (cleanup of
 * mounts), fs; never from a folder above it (docs/architecture.md, "src/local in rooms"). */
/* SandboxSnapshots in `asb serve` (docs/snapshots.md).
 *
 * The snapshotter: one thread woken by the store's watch window. A new SandboxSnapshot is
 * captured (local-snapshot-tree.h) from its Sandbox's workspace and volumes into the store at
 * $ASB_STATE_DIR/snapshots (local-snapshot-store.h), in two passes: one while the sandbox runs,
 * then one with the sandbox's cgroup frozen that re-reads only what changed since (inode, size,
 * mtime and ctime), so the pause lasts a metadata walk plus the changed files; the sandbox is
 * thawed at once (a suspended sandbox stays frozen). Status: Ready True/Captured with files,
 * size, storedBytes, pauseMicroseconds, capturedAt and the source (pod template, volume claim
 * templates, template, image), or Ready False with SandboxNotFound / SandboxNotStarted (tried
 * again while it is pending) / CaptureFailed. A deleted snapshot's manifest goes, and with it
 * every object no other snapshot holds.
 *
 * The seed: a Sandbox whose image is `snapshot:NAME` starts from it: local_snapshot_resolve at
 * start, local_snapshot_seed once, into its fresh workspace and volumes. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "local/container/local-idmap.h"
#include "local/store/local-store.h"

#define LOCAL_SNAPSHOT_IMAGE_PREFIX "snapshot:"

typedef struct local_snapshotter local_snapshotter;

typedef struct local_snapshotter_options {
    local_store *store;    /* borrowed; must outlive the snapshotter */
    const char *state_dir; /* $ASB_STATE_DIR */
    local_idmap *idmap;    /* borrowed (thread-safe lookups); NULL: no user namespaces */
} local_snapshotter_options;

/* Starts the thread. *ret owned (local_snapshotter_stop). */
int local_snapshotter_start(const local_snapshotter_options *o, local_snapshotter **ret);
/* Joins the thread (call local_store_shutdown first) and frees. NULL-safe. */
local_snapshotter *local_snapshotter_stop(local_snapshotter *s);

/* The Ready snapshot `name` in ns: *ret_uid (owned) its metadata.uid and *ret_image (owned) the
 * image of its source. A negative errno with *ret_reason (static: SnapshotNotFound,
 * SnapshotNotReady) and *ret_message (owned). */
int local_snapshot_resolve(local_store *store, const char *ns, const char *name, char **ret_uid,
                           char **ret_image, const char **ret_reason, char **ret_message);

#define LOCAL_SNAPSHOT_SEED_COPY 0
#define LOCAL_SNAPSHOT_SEED_OVERLAY 1
/* Starts the workspace and volume directories (volumes_dir/<name>) of a new sandbox from the
 * snapshot with metadata.uid snapshot_uid, sandbox ids N as host ids id_base + N: overlayfs
 * mounts over the snapshot's unpacked tree (local-snapshot-overlay.h), nothing copied:
 * LOCAL_SNAPSHOT_SEED_OVERLAY. Where overlays cannot be had (no overlayfs, a state directory whose
 * filesystem refuses idmapped mounts, as overlayfs and older kernels do: probed before anything
 * is unpacked; ENODEV, EPERM, EINVAL, ENOSYS, EOPNOTSUPP) the files are copied in instead:
 * LOCAL_SNAPSHOT_SEED_COPY, with *ret_message (owned, may be NULL) saying why no overlay.
 * `again` (a restart of a sandbox seeded with overlays, after a reboot): mounts what is not
 * mounted and never removes anything. A first seed that fails removes what it wrote (a retry
 * starts from empty directories). On failure *ret_message (owned) says why. *ret_message must be
 * NULL on entry. */
int local_snapshot_seed(const char *state_dir, const char *snapshot_uid, const char *workspace,
                        const char *volumes_dir, uint32_t id_base, bool again,
                        char **ret_message);

/* Why a SandboxSnapshot may not be deleted now: NULL when nothing needs it, else an owned
 * message naming the SandboxTemplate whose pod template starts from it, or the Sandbox that
 * starts from it and has not started yet. */
char *local_snapshot_in_use(local_store *store, const char *ns, const char *name);
