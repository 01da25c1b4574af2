/* What the bundles of one state directory share instead of making it again per sandbox, under
 * $ASB_STATE_DIR/shared (docs/performance.md, "Shared rootfs skeleton"): on this kind of host
 * every inode made and removed per sandbox costs (ext4 bitmap scans, discards), and the `host`
 * image's rootfs skeleton and most of its /etc are the same for every sandbox.
 *
 * Entries are made once, in a temporary name renamed into place, so concurrent starts and a
 * crash leave either nothing or a complete entry, and are never modified afterwards: a changed
 * input gets a new name (names carry a hash of what they hold). They belong to root (0755
 * directories, 0644 files) and reach a container only through read-only mounts of its bundle.
 * Not removed while the server runs (running containers use them); `asb serve --cleanup`
 * removes the whole area. Thread-safe (no state but the filesystem). */
#pragma once

/* Fills the new directory `dir` (a temporary path); 0 or a negative errno. */
typedef int (*local_shared_fill_fn)(const char *dir, void *payload);

/* *ret_path (owned): <shared_dir>/<name>, made with fill() when missing. name is a single
 * path component. A negative errno when it cannot be made. */
int local_shared_dir(const char *shared_dir, const char *name, local_shared_fill_fn fill,
                     void *payload, char **ret_path);

/* Makes dst a hard link of the shared file holding exactly `content` (a link makes no new
 * inode). An existing dst is replaced, never written through. When the shared file cannot be
 * made or linked (other filesystem, link limit) or does not hold `content` (a hash collision),
 * dst gets a file of its own. 0 or a negative errno. */
int local_shared_link_content(const char *shared_dir, const char *content, const char *dst);

/* The same for a copy of the host file src, keyed by its device, inode, size and mtime (an
 * update on the host makes a new copy). */
int local_shared_link_copy(const char *shared_dir, const char *src, const char *dst);

/* Spare bundle directories (<shared_dir>/spare/): a torn-down sandbox's bundle is kept instead
 * of removed, and the next bundle takes it over, so that neither pays for making and removing
 * its directories and files (they are rewritten in place or replaced). */

/* Moves the bundle directory of a container that is gone into the spares when it holds only
 * what a shared-`host` bundle holds (config.json, pid, etc/ with the generated files and an
 * empty alternatives/) and fewer than LOCAL_SHARED_SPARES are kept; its pid file is removed.
 * 0, or a negative errno and the bundle is left where it was (the caller removes it). */
#define LOCAL_SHARED_SPARES 64
int local_shared_bundle_recycle(const char *shared_dir, const char *bundle_dir);

/* Renames a spare to bundle_dir (which must not exist). 0, or -ENOENT when there is none. */
int local_shared_bundle_take(const char *shared_dir, const char *bundle_dir);
