/* local/storage: the writable storage of a sandbox: workspace, home and /tmp with their
 * ephemeral-storage limit (local-scratch), and volumes (local-volume). Includes from other
 * folders of src/local: container (bundle volumes), runtime (spawning mke2fs), fs; never from a
 * folder above it (docs/architecture.md, "src/local in rooms"). */
/* The writable storage of a local sandbox: its workspace (/workspace), home (/home/sandbox)
 * and scratch (/tmp), and the enforcement of its ephemeral-storage limit.
 *
 * With a limit, the three live on a filesystem of their own: a sparse ext4 image
 * sandboxes/<uid>/disk.img (copied from a per-size template that mke2fs makes once under
 * $ASB_STATE_DIR/scratch/), attached to a loop device with autoclear and mounted
 * nosuid,nodev,discard at sandboxes/<uid>/disk. Writes past the size fail with ENOSPC inside
 * the sandbox; the image never takes more host space than the limit, and deleted files give
 * their blocks back (discard punches holes in the image). sandboxes/<uid>/workspace and
 * .../home are symlinks to disk/workspace and disk/home, so host paths stay what they were
 * (and sandboxes/<uid>/main to disk/main for a sandbox with a main process:
 * local_scratch_main_dir).
 * The mount lives in the host's mount namespace: it outlives a restart of `asb serve` (which
 * finds it mounted and keeps it) and is removed only by local_scratch_release.
 *
 * Without a limit (or for a sandbox whose workspace predates this), the directories are plain
 * directories under sandboxes/<uid> and /tmp stays a size-capped tmpfs. Root only (mount). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct local_scratch {
    char *workspace; /* host dir bound at /workspace */
    char *home;      /* host dir bound at /home/sandbox */
    char *tmp;       /* host dir bound at /tmp, NULL: keep the tmpfs */
    int64_t size;    /* bytes of the sandbox's own filesystem, 0: none */
} local_scratch;

/* Prepares the writable directories of the sandbox whose directory is base
 * ($ASB_STATE_DIR/sandboxes/<uid>): creates them (or mounts the existing image again),
 * workspace and home owned by uid:gid, tmp root-owned 1777. `bytes` > 0 asks for a filesystem
 * of that size when the sandbox has none yet; an existing one is kept as it is (its size is
 * fixed at first start). state_dir holds the template cache. On failure a negative errno and
 * *ret_error (owned). *ret is filled with owned strings (local_scratch_done). */
int local_scratch_prepare(const char *state_dir, const char *base, int64_t bytes, uid_t uid,
                          gid_t gid, local_scratch *ret, char **ret_error);
void local_scratch_done(local_scratch *s);

/* The main process's directory (bound at /.asb/main; sandboxd records the exit code there),
 * owned by uid:gid, at base/main. With the sandbox's own filesystem (s->size > 0) it lives at
 * disk/main and base/main is a symlink to it, so what the sandbox writes there counts against
 * the limit (a plain base/main left by an older version is replaced when it holds only the
 * files sandboxd wrote there). *ret_path (owned) is the directory to bind. */
int local_scratch_main_dir(const char *base, const local_scratch *s, uid_t uid, gid_t gid,
                           char **ret_path);

/* Unmounts base/disk (the loop device detaches with it) and removes the image. Call after
 * the container is gone and before removing base. Nothing mounted is success. */
int local_scratch_release(const char *base);

/* One size-limited filesystem, as above, for other users (volumes, local-volume.h): the image
 * at `image` (made from the template of max(bytes, 8 MiB) when missing; an existing one keeps
 * its size) mounted at mnt (made when missing) unless mounted there already. The root
 * directory of a new filesystem is root's, 0755, and holds the template's empty directories.
 * *ret_size is the image's size. On failure a negative errno and *ret_error (owned). */
int local_scratch_disk(const char *state_dir, const char *image, const char *mnt, int64_t bytes,
                       int64_t *ret_size, char **ret_error);
/* Unmounts every mount at mnt and removes image. Nothing mounted is success. */
int local_scratch_disk_release(const char *image, const char *mnt);
