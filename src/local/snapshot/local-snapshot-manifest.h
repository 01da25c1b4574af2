/* A snapshot's manifest: the trees it captured, as JSON, written by the capture
 * (local-snapshot-capture.c), read by the restore (local-snapshot-restore.c) and checked in full
 * by snap_manifest_check before any of it is used (fuzzed: fuzz/fuzz-snapshot-manifest.c).
 *
 *   {"version": 1, "files": N, "size": BYTES,
 *    "roots": [{"name": "workspace" | "volume/<name>",
 *               "entries": [ENTRY, ...]}]}        pre-order: a directory before its contents
 *   ENTRY = {"path": "" (the root itself, first) | "a/b" (relative, no "." or ".." component),
 *            "type": "dir" | "file" | "symlink" | "hardlink" | "fifo",
 *            "mode": permission bits incl. setuid/setgid/sticky (0..07777),
 *            "uid", "gid": ids as the sandbox sees them (its user namespace), 0..2^32-2,
 *            "mtime", "atime": [seconds, nanoseconds],
 *            "xattrs": {"name": "base64 value"}            (optional)
 *            file:     "size": bytes, "object": SHA-256 hex (absent when no data),
 *                      "extents": [[offset, length], ...] (absent: one extent [0, size]);
 *                      holes between extents are restored as holes
 *            symlink:  "target": text
 *            hardlink: "link": path of an earlier "file" entry of the same root; no metadata
 *            "ino", "ctime": the source inode, used only to skip unchanged files in the next
 *                      capture of the same sandbox}
 */
#pragma once

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define SNAP_MANIFEST_VERSION 1
/* Root names: "workspace", or "volume/" + a volumeClaimTemplates name. */
#define SNAP_ROOT_WORKSPACE "workspace"
#define SNAP_ROOT_VOLUME_PREFIX "volume/"

/* 0 when m has the shape above in every detail (types, ranges, safe paths, extents sorted,
 * non-overlapping, inside the size and adding up, hard links to earlier files, valid object
 * names); else -EBADMSG and *ret_error (owned) saying where. */
int snap_manifest_check(const json_t *m, char **ret_error);

/* The [offset, length] pairs of a file entry as a flat array (*ret owned, NULL when the file
 * has none) and their count; call only on a checked manifest. 0 or -ENOMEM. */
int snap_manifest_extents(const json_t *entry, uint64_t **ret, size_t *ret_n);
