/* The content-addressed object store of SandboxSnapshots (docs/snapshots.md), under
 * $ASB_STATE_DIR/snapshots:
 *   objects/<h0h1>/<hex>      the data of one regular file (its non-hole extents, concatenated),
 *                             zstd-compressed, named by the SHA-256 of the uncompressed data.
 *                             Identical content is stored once, whatever snapshot holds it.
 *   objects/tmp/              objects being written (renamed into place when complete)
 *   manifests/<uid>.json      one snapshot's tree (local-snapshot-manifest.h), by metadata.uid
 * Objects are immutable once named; a manifest is written last (atomically), so a manifest never
 * names a missing object. Objects no manifest names are removed by snap_store_gc, which must not
 * run while a capture is writing objects (the snapshotter thread does both, one after the other).
 * A handle holds the compression state: use it from one thread at a time (open one per thread).
 * Functions return 0 or a negative errno and never log. */
#pragma once

#include <jansson.h>
#include <stdint.h>
#include <sys/types.h>

#define SNAP_HASH_HEX 64 /* SHA-256 in lower-case hex */

typedef struct snap_store snap_store;

/* Opens (creating) the store at dir. *ret owned (snap_store_free). */
int snap_store_open(const char *dir, snap_store **ret);
snap_store *snap_store_free(snap_store *s);
const char *snap_store_dir(const snap_store *s);

/* Stores `len` bytes of fd (read at the offsets of `extents`, pairs of offset and length, n of
 * them; NULL/0 with len > 0 reads [0, len)) as one object. ret_hex gets the object name
 * (SNAP_HASH_HEX + 1 bytes); *ret_stored the compressed bytes written when the object is new, 0
 * when it existed already (deduplicated). -EIO when fd yields fewer bytes than announced (the file
 * shrank while read). */
int snap_store_put(snap_store *s, int fd, const uint64_t *extents, size_t n, uint64_t len,
                   char ret_hex[SNAP_HASH_HEX + 1], uint64_t *ret_stored);

/* Writes the object `hex` to fd at the offsets of `extents` (as put read them), checking that
 * it decompresses to exactly `len` bytes with the named hash: -ENOENT (missing), -EBADMSG
 * (corrupt or not of that length), else the -errno of a failed write. */
int snap_store_get(snap_store *s, const char *hex, int fd, const uint64_t *extents, size_t n,
                   uint64_t len);

/* True when hex is a well-formed object name. */
int snap_hash_valid(const char *hex);

/* Manifests by snapshot uid: save (atomically), load (*ret owned), remove (missing: 0). */
int snap_store_save_manifest(snap_store *s, const char *uid, const json_t *manifest);
int snap_store_load_manifest(snap_store *s, const char *uid, json_t **ret);
int snap_store_remove_manifest(snap_store *s, const char *uid);

/* Removes every object no manifest names, the manifests of uids keep() rejects (NULL: keep all)
 * and leftover temporary files. *ret_removed (may be NULL) counts removed objects. */
int snap_store_gc(snap_store *s, int (*keep)(const char *uid, void *payload), void *payload,
                  size_t *ret_removed);
