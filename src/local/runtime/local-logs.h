/* The output of sandboxes, kept by `asb serve`: each container's stdout and stderr (sandboxd's)
 * and the main process's stdout and stderr are pipes, never a host file the sandbox could write
 * (issue 13, hole 4). One thread reads every pipe and appends to a file only this process writes
 * ($STATE/sandboxes/<uid>/sandboxd.log, .../main.log), capped: past max_bytes it is rotated to
 * <path>.1 (one generation), so a sandbox flooding its output uses at most 2 x max_bytes per
 * file on the host. Beside each file, <path>.times records when each chunk came ("OFFSET
 * UNIX_NS" lines: the file offset the chunk starts at, the time it was read; at most one a
 * millisecond, and no larger than the log's cap), which gives
 * `asb logs --timestamps/--since` a time per line; a new run of the container (truncate) keeps
 * the last run's files as <path>.previous (`asb logs --previous`). A restarted asb serve takes the
 * read end again through /proc/<pid>/fd/<n> of the container's first process (sandboxd holds the
 * write ends: fd 1, and the main process's pipe at the fd it was given). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct local_logs local_logs;

/* *ret owned (local_logs_stop). max_bytes 0 = 1 MiB. */
int local_logs_start(size_t max_bytes, local_logs **ret);
/* Stops the thread, closes every pipe (containers keep running; their writes fail until the
 * next asb serve takes the pipes again) and frees. */
local_logs *local_logs_stop(local_logs *l);
/* Takes fd (the read end; owned from now on, also on error) of uid's pipe written to path,
 * replacing an earlier pipe for the same path; truncate starts the file anew. 0 or a negative
 * errno. */
int local_logs_add(local_logs *l, const char *uid, int fd, const char *path, bool truncate);
/* Takes the read end of pid's descriptor proc_fd (1: its stdout) again after a restart: only
 * when it is a pipe, never a file. 0, -ENOTSUP (not a pipe) or a negative errno (-ENOENT: no
 * such descriptor). */
int local_logs_adopt(local_logs *l, const char *uid, pid_t pid, int proc_fd, const char *path);
