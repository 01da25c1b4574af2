/* User namespace id ranges of local sandboxes (docs/security.md, "User namespaces").
 *
 * `asb serve` owns one host uid/gid range (--userns-range START:COUNT, ASB_USERNS_RANGE, or a
 * free block of LOCAL_IDMAP_AUTO_COUNT ids picked from [2^31, 2^32 - 2^26)) and hands each
 * Sandbox its own LOCAL_IDMAP_SLOT (65536) ids of it: id N inside maps to host id start + N, for
 * uids and gids alike.
 *
 * Records (all under $ASB_STATE_DIR/userns, written atomically):
 *   range            "START COUNT": the range this state directory owns; a restart without a
 *                    flag keeps it, so running containers are re-adopted with the same ids.
 *   sandboxes/<uid>  "START": the slot of one Sandbox (by metadata.uid), kept as long as the
 *                    Sandbox exists or its container does (its files are owned by those ids).
 * Machine-wide, /var/lib/asb-userns/ranges (flock'ed; persistent, so that after a reboot no
 * server takes the range of a state directory whose server has not started again yet) lists
 * "START COUNT PID STARTTIME STATE_DIR"
 * for every state directory that owns a range. An entry is stale, and is dropped by the next
 * `asb serve` that takes the lock, when its process is gone and its state directory has no
 * slot left (or no longer exists); otherwise no other state directory may overlap it.
 *
 * A range must not overlap any uid of /etc/passwd, gid of /etc/group or range of /etc/subuid
 * and /etc/subgid, nor contain 0 or 2^32 - 1. Not thread-safe: the reconciler thread owns it. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define LOCAL_IDMAP_SLOT 65536u
#define LOCAL_IDMAP_AUTO_START 0x80000000u
#define LOCAL_IDMAP_AUTO_COUNT 0x04000000u /* 1024 sandboxes per asb serve */
#define LOCAL_IDMAP_REGISTRY "/var/lib/asb-userns/ranges"
/* The rootfs path every user-namespaced bundle names (see local_idmap_stage_enter). */
#define LOCAL_IDMAP_ROOTFS "/run/asb/rootfs"

typedef struct local_idmap local_idmap;

typedef struct local_idmap_options {
    const char *state_dir; /* $ASB_STATE_DIR */
    const char *range;     /* "START:COUNT", "off" (no user namespaces) or NULL/"" (auto) */
    const char *registry;  /* NULL: LOCAL_IDMAP_REGISTRY */
} local_idmap_options;

/* Takes the range (registry updated under its lock) and loads this state directory's slots.
 * *ret owned (local_idmap_free); NULL with 0 when o->range is "off". A negative errno with
 * *ret_error (owned) saying why a range is refused: overlap with a host account, a sub-id range
 * or another asb serve, a bad value, or slots of this state directory outside the range. */
int local_idmap_open(const local_idmap_options *o, local_idmap **ret, char **ret_error);
/* Drops this process's registry entry when no slot is left (else it stays, owned by the state
 * directory, for the next start to take over). NULL-safe; returns NULL. */
local_idmap *local_idmap_free(local_idmap *m);

/* The server's range. */
void local_idmap_range(const local_idmap *m, uint32_t *ret_start, uint32_t *ret_count);
/* The first host id of the sandbox's slot: its recorded one, else a newly allocated and
 * recorded one. -ENOSPC when every slot is taken. */
int local_idmap_get(local_idmap *m, const char *sandbox_uid, uint32_t *ret_start);
/* The recorded slot only: 0, or -ENOENT. */
int local_idmap_lookup(const local_idmap *m, const char *sandbox_uid, uint32_t *ret_start);
/* Frees the sandbox's slot (call once its container is gone). Unknown uid: nothing. */
void local_idmap_release(local_idmap *m, const char *sandbox_uid);
/* Frees every slot whose sandbox keep() does not want any more. */
void local_idmap_gc(local_idmap *m, bool (*keep)(const char *sandbox_uid, void *payload),
                    void *payload);

/* runc's init opens the rootfs as the sandbox's root, a host id to which the state directory
 * (0700) and an operator's dir: image path may be closed. So runc runs with the rootfs bound
 * at LOCAL_IDMAP_ROOTFS (under 0755 directories) in a private mount namespace of the calling
 * thread (a slave of the host's, gone once runc has exited): enter moves the thread there,
 * leave brings it back (cwd kept). Nothing is mounted in the host's namespace. */
typedef struct local_idmap_stage {
    int mnt_fd, cwd_fd;
} local_idmap_stage;
int local_idmap_stage_enter(const char *rootfs, local_idmap_stage *st);
/* 0, or a negative errno when the thread could not go back (it must not go on then). */
int local_idmap_stage_leave(local_idmap_stage *st);

/* Parses "START:COUNT" (decimal or 0x hex). 0 or -EINVAL. */
int local_idmap_parse_range(const char *s, uint32_t *ret_start, uint32_t *ret_count);
