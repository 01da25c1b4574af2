/* How asb serve starts the OCI runtime and its other helpers (mke2fs, image tools): glibc's
 * posix_spawn, whose child shares asb serve's memory until it execs (CLONE_VM | CLONE_VFORK) and
 * runs only glibc's internal, async-signal-safe code, instead of fork(), which copies the page
 * tables of a large multi-threaded process for every runc call (kernel_clone, copy_page_range,
 * the child's exit_mmap at exec, and copy-on-write faults in the parent: docs/performance.md,
 * "CPU per sandbox"). */
#pragma once

#include <sys/types.h>

/* Spawns argv with stdin /dev/null, stdout and stderr onto out_fd, and extra[i] (when >= 0) as fd
 * 3 + i (i < 4; the caller keeps every source fd above 6 so that no move clobbers another). The
 * child starts with an empty signal mask, SIGPIPE at its default action and umask 022 (runc
 * creates missing mount points in the rootfs with it; asb serve's own 077 would make them
 * untraversable for the sandbox user), whatever the calling thread's umask is. exec_fd >= 7: the
 * image to exec (a sealed memfd, local-runtime-exec.h), argv[0] looked up in $PATH when that
 * fails or exec_fd < 7. Every other fd of asb serve is O_CLOEXEC and never reaches the child.
 * 0 and *ret_pid (a child to wait for) or a negative errno (nothing was started). The calling
 * thread gets a filesystem context of its own (unshare(CLONE_FS)) the first time: the umask is
 * set for the spawn only, and never seen by another thread. */
int local_runtime_spawn(char *const argv[], int exec_fd, int out_fd, const int extra[4],
                        pid_t *ret_pid);
