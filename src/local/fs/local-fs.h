/* local/fs: small filesystem helpers every folder of src/local uses. Includes from other
 * folders of src/local: none; never from a folder above it (docs/architecture.md, "src/local in
 * rooms"). */
/* Small filesystem helpers for the local runtime: whole-file writes, copies and
 * recursive removal. Return 0 or a negative errno; never log. */
#pragma once

#include <sys/types.h>

/* Writes content to path (created or truncated) with mode. */
int fs_write_file(const char *path, const char *content, mode_t mode);
/* Copies the regular file src to dst atomically (dst.tmp + rename) with mode. */
int fs_copy_file(const char *src, const char *dst, mode_t mode);
/* Removes path and everything below it, never following symlinks nor crossing mount points.
 * A missing path is success. */
int fs_rm_rf(const char *path);
/* Calls fn with the path of each entry of dir ("." and ".." left out) until one call returns
 * non-zero, and returns that; 0 when every call returned 0, -ENOMEM, or the error of opening
 * dir. */
int fs_each_entry(const char *dir, int (*fn)(const char *path, void *payload), void *payload);
