/* Path confinement under a sandbox root (upstream "SanitizePath", shared/spec/UPSTREAM.md §1.3),
 * race-free: every step happens on directory fds (openat with O_NOFOLLOW + readlinkat), so a
 * symlink swapped in during a request can never redirect it outside the root. Symlinks that stay
 * inside the root are followed (also the final component: GET/PUT/DELETE act on the target, as
 * upstream). A resolution that would leave the root fails with -ERRNO_PATH_ESCAPE (EXDEV).
 * Callers map -ERRNO_PATH_ESCAPE to PERMISSION_DENIED and every other error to INTERNAL, as
 * upstream does. Never logs. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <sys/types.h>

/* Where a user path lands. Operations then use *at() calls on dir_fd with O_NOFOLLOW. */
typedef struct confined {
    int dir_fd;    /* owned O_PATH|O_DIRECTORY fd: the directory holding the target; when
                      `missing` is non-empty, the deepest existing directory on the way */
    char *missing; /* owned: '/'-separated directories below dir_fd that do not exist yet and lead
                      to the target's parent ("a/b" for a/b/f.txt when only the root exists), or "" */
    char *name;    /* owned: the target's final component (inside dir_fd, or inside the last
                      `missing` directory); "" when the target is the root itself */
} confined;

/* Path confinement reports "resolution left the root" with this errno. */
#define ERRNO_PATH_ESCAPE EXDEV

#define CONFINED_INIT {-1, NULL, NULL}

/* Resolves `path` (a decoded user path or cwd: relative, or absolute meaning relative to the root
 * unless it starts with `root_path`) under the root. `root_fd` is an O_PATH directory fd of the
 * resolved root and `root_path` its absolute, symlink-free path. A dangling symlink resolves to
 * the link itself (DELETE removes the link, PUT replaces it), as upstream. Returns 0 and fills
 * *ret (release with confined_done), or -ERRNO_PATH_ESCAPE, -ENOTDIR, -ELOOP, -EACCES, -ENOMEM. */
int confine_resolve(int root_fd, const char *root_path, const char *path, confined *ret);
void confined_done(confined *c);

/* Opens an existing directory P under the root as O_PATH|O_DIRECTORY|O_CLOEXEC (a process cwd, a
 * directory to list). Returns 0 and *ret_fd (owned by the caller), or -ERRNO_PATH_ESCAPE,
 * -ENOENT, -ENOTDIR, -ELOOP, -EACCES, ... */
int confine_open_dir(int root_fd, const char *root_path, const char *path, int *ret_fd);

/* Go filepath.Clean of a '/'-separated path into a newly allocated string (NULL on ENOMEM). */
char *path_clean(const char *path);

/* Opens (creating what is missing) the directory `path` below the directory `dir_fd` without
 * following any symlink and without leaving dir_fd's mount: every component is one openat2()
 * with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_XDEV on the fd of the one before, so a
 * tree someone else can write (a sandbox's volume) can never redirect it. `path` is relative,
 * '/'-separated, without "." or ".." components. Each directory it creates gets exactly `mode`
 * and uid:gid; the last one gets uid:gid when it existed already (by fd, never by path). Returns 0
 * and *ret_fd (owned, O_RDONLY|O_DIRECTORY|O_CLOEXEC), or -ELOOP (a component is a symlink),
 * -EXDEV (a mount point, or ".."), -ENOTDIR (not a directory), -EINVAL (a bad path), -errno. */
int confine_mkdir_beneath(int dir_fd, const char *path, mode_t mode, uid_t uid, gid_t gid,
                          int *ret_fd);
