/* The volumes of a local sandbox (volumeClaimTemplates): their storage, and how their mounts
 * reach the runtime without the sandbox being able to redirect them.
 *
 * Storage: a template with resources.requests.storage lives on a filesystem of that size of its
 * own (local-scratch.h: a sparse ext4 image on a loop device; at least 8 MiB):
 * volumes/<uid>/.disk-<name>.img mounted at volumes/<uid>/.disk-<name>, whose directory data/
 * (owned by the sandbox user) is the volume; volumes/<uid>/<name> is a symlink to it, so host
 * paths stay what they were and a fork's overlay layers (local-snapshot-overlay.h, made beside
 * the directory they cover) count against the size too. Writes past it fail with ENOSPC inside.
 * The mount outlives restarts of the container and of asb serve; local_volumes_release removes
 * it with the Sandbox. A template without a request, or a volume that predates this (a plain
 * directory), is a plain directory under volumes/<uid> as before.
 *
 * Mounts: the sandbox owns everything inside a volume, so a subPath may have been replaced by a
 * symlink (to a host directory) since the last start. local_volumes_stage opens each mount's
 * directory with confine_mkdir_beneath (no symlink followed, missing ones created and chowned by
 * fd) and binds the directory it holds at run/<uid>/volumes/<i>, a root-only path that runc and
 * any other runtime can be given as it is; the binds are removed once the runtime has made its
 * own (local_volumes_stage_done). Root only (mount). */
#pragma once

#include <jansson.h>
#include <stdint.h>
#include <sys/types.h>

#include "local/container/local-bundle.h"

/* spec.volumeClaimTemplates[i].spec.resources.requests.storage in bytes, 0 when it has none.
 * -EINVAL when it is not a quantity. */
int local_volume_request(const json_t *sandbox, size_t i, int64_t *ret);

/* Makes the volume `name` of vols_dir (volumes/<uid>) ready for a start: its filesystem of
 * `bytes` (> 0; mounted again after a reboot) or a plain directory (0), its directory owned by
 * uid:gid. state_dir holds the image templates. On failure a negative errno and *ret_error
 * (owned). */
int local_volume_prepare(const char *state_dir, const char *vols_dir, const char *name,
                         int64_t bytes, uid_t uid, gid_t gid, char **ret_error);

/* Removes every volume filesystem of vols_dir (unmounted, images deleted), so that vols_dir can
 * be removed. Call after the container and any overlay above are gone. 0 or the last error. */
int local_volumes_release(const char *vols_dir);

typedef struct local_volumes_staged {
    char *dir; /* run/<uid>/volumes, owned */
    size_t n;  /* binds made below dir: 0..n-1 */
} local_volumes_staged;

/* Stages the mounts v[0..n) of the volumes in vols_dir under stage_dir (made, 0700; what an
 * earlier run left there is removed first) and points each v[i].source at its bind. A subPath
 * directory that is missing is created (uid:gid, 0755). -ELOOP (a symlink on the way),
 * -ENOTDIR, -EXDEV (a mount point) or another negative errno with *ret_bad the index in v of
 * the mount refused; nothing is left mounted then. *ret holds what to undo either way. */
int local_volumes_stage(const char *vols_dir, const char *stage_dir, local_bundle_volume *v,
                        size_t n, uid_t uid, gid_t gid, local_volumes_staged *ret, size_t *ret_bad);
/* Unmounts and removes the binds (the runtime has its own by now). For _cleanup_. */
void local_volumes_stage_done(local_volumes_staged *s);
/* The same for a stage directory whatever made it (teardown, orphans): every mount below it. */
int local_volumes_unstage(const char *stage_dir);
