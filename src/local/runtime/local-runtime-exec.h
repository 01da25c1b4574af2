/* The image runc is executed from: a sealed memfd holding a copy of its binary, made once per
 * binary (and again when the file on disk changes).
 *
 * Why: runc 1.1 re-executes itself as `runc init` for every container and, to keep the
 * container from overwriting the host's runc through /proc/PID/exe (CVE-2019-5736), first makes
 * sure that image cannot be written: unless /proc/self/exe already is a memfd sealed against
 * writes, it bind-mounts itself read-only into its state directory and execs itself once more
 * from there (two mounts, an unmount and a second exec of an 8.7 MB binary per start). Started
 * from a sealed memfd, runc finds the protection in place and skips all of it; the kernel
 * refuses every write to the memfd, so the container gains nothing it could write. */
#pragma once

/* An fd (O_CLOEXEC, borrowed: never closed by the caller, valid for the life of the process)
 * to exec with execveat(fd, "", ..., AT_EMPTY_PATH) instead of `binary` (a path, or a name
 * looked up in $PATH); -1 when there is none (memfds or sealing unsupported, the binary not
 * found or unreadable): the caller execs `binary` as usual. Thread-safe. */
int local_runtime_exec_fd(const char *binary);
