/* The output of sandboxes' first processes (sandboxd), kept by `asb serve`: each container's
 * stdout and stderr is a pipe, never a host file the sandbox could write (issue 13, hole 4). One
 * thread reads every pipe and appends to $STATE/sandboxes/<uid>/sandboxd.log, a file only this
 * process writes, capped: past max_bytes it is rotated to sandboxd.log.1 (one generation), so a
 * sandbox flooding its output uses at most 2 x max_bytes on the host. A restarted asb serve takes
 * the read end again through /proc/<pid>/fd/1 of the container's first process. */
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
/* Takes fd (the read end; owned from now on, also on error) for uid, replacing an earlier one;
 * truncate starts the file anew. 0 or a negative errno. */
int local_logs_add(local_logs *l, const char *uid, int fd, const char *path, bool truncate);
/* Takes the read end of pid's stdout again (after a restart): only when it is a pipe, never a
 * file. 0, -ENOTSUP (not a pipe) or a negative errno. */
int local_logs_adopt(local_logs *l, const char *uid, pid_t pid, const char *path);
