/* Path confinement under a sandbox root (upstream "SanitizePath", shared/spec/UPSTREAM.md §1.3),
 * race-free: every step happens on directory fds (openat with O_NOFOLLOW + readlinkat), so a
 * symlink swapped in during a request can never redirect it outside the root. Symlinks that stay
 * inside the root are followed; a resolution that leaves it fails with -ERRNO_PATH_ESCAPE (EXDEV).
 * Never logs. */
#pragma once

/* Opens an existing directory P under the root as O_PATH|O_DIRECTORY|O_CLOEXEC (used for a process
 * cwd and for directory listings). `root_fd` is an O_PATH directory fd of the resolved root,
 * `root_path` its absolute resolved path (needed to interpret absolute paths and in-root absolute
 * symlinks). Returns 0 and *ret_fd (owned by the caller), or -ERRNO_PATH_ESCAPE, -ENOENT,
 * -ENOTDIR, -ELOOP, -EACCES, ... */
int confine_open_dir(int root_fd, const char *root_path, const char *path, int *ret_fd);
