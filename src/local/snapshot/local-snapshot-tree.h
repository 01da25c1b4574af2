/* Capture and restore of directory trees for snapshots (docs/snapshots.md): what a manifest
 * (local-snapshot-manifest.h) records and how it is made real again, with ownership, modes,
 * times, symlinks, hard links, sparse files, fifos and xattrs. Regular file data goes to the
 * object store (local-snapshot-store.h). Never crosses a mount point, never follows a symlink.
 * Functions return 0 or a negative errno with *ret_error (owned) saying which path; never log. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "local/snapshot/local-snapshot-store.h"

/* One tree to capture: its root name in the manifest and its host directory. */
typedef struct snap_root {
    const char *name; /* SNAP_ROOT_WORKSPACE or SNAP_ROOT_VOLUME_PREFIX + volume name */
    const char *path;
} snap_root;

typedef struct snap_capture_options {
    /* Host ids [id_base, id_base + id_count) are recorded as 0..id_count-1 (the sandbox's user
     * namespace); ids outside it as 65534 (the overflow id the sandbox sees). id_count 0: ids
     * are recorded as they are. */
    uint32_t id_base, id_count;
    /* A manifest of an earlier capture of the same trees (borrowed, may be NULL): a regular
     * file whose inode, size, mtime and ctime are unchanged keeps its object without being
     * read again. */
    const json_t *hint;
    /* Tolerate files that change while read (a first pass while the source runs): such a
     * file is recorded without data, so that a second, frozen pass with this manifest as hint
     * reads it again. */
    bool tolerant;
} snap_capture_options;

typedef struct snap_stats {
    uint64_t entries; /* everything recorded */
    uint64_t bytes;   /* file data (holes excluded) */
    uint64_t stored;  /* compressed bytes of new objects */
    uint64_t read;    /* file data actually read (not reused from the hint) */
} snap_stats;

/* Captures the roots into *ret (an owned manifest) and adds to *stats (may be NULL). */
int snap_capture(snap_store *s, const snap_root *roots, size_t n_roots,
                 const snap_capture_options *o, json_t **ret, snap_stats *stats, char **ret_error);

/* Restores the root named `name` of a checked manifest into the existing directory dest
 * (empty but for what the manifest's root itself may replace): sandbox ids N become host ids
 * id_base + N. Missing root in the manifest: -ENOENT. */
int snap_restore(snap_store *s, const json_t *manifest, const char *name, const char *dest,
                 uint32_t id_base, char **ret_error);
