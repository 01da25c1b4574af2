/* local/runtime: running containers and helpers: the OCI runtime driver (local-runtime-oci),
 * its sealed binary (-exec), posix_spawn of helpers (-spawn), RuntimeClass handlers (-class),
 * gVisor specifics (-gvisor), sandbox output (local-logs) and `asb serve --cleanup`
 * (local-cleanup). How a container runs, not what it is made of. Includes from other folders of
 * src/local: fs, net (the cleanup removes the network); never from a folder above it
 * (docs/architecture.md, "src/local in rooms"). */
/* The OCI runtime driver of `asb serve`: runs runc (or a compatible CLI) with its state under
 * $ASB_STATE_DIR/runc. Each call execs the runtime once and waits for it. Errors are a negative
 * errno plus, where a person needs words, *ret_error (owned) with the runtime's own message. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

typedef struct oci_runtime {
    char *binary; /* "runc" or an absolute path */
    char *root;   /* --root */
} oci_runtime;

/* Whether rt is runc itself (by its file name). */
bool oci_is_runc(const oci_runtime *rt);

int oci_runtime_init(oci_runtime *rt, const char *binary, const char *root);
/* The program's file name ("runc", "runsc", ...), borrowed from rt: what errors name. */
const char *oci_runtime_program(const oci_runtime *rt);
/* Whether rt is gVisor's runsc (by file name). It gets --network=none --host-uds=create
 * --oci-seccomp before every command and no --preserve-fds: its sandboxd binds its sockets
 * itself (local-bundle.h, socket_dir). */
bool oci_runtime_is_runsc(const oci_runtime *rt);
void oci_runtime_done(oci_runtime *rt);

/* `runc run --detach --preserve-fds 2` (4 with main_fds): rest_fd and grpc_fd become fds 3 and 4
 * (runsc: none of these fds is passed, see oci_runtime_is_runsc)
 * of the container's first process; main_fds (NULL: none) the main process's output pipe, its
 * write end fd 5 and its read end fd 6 (held by sandboxd so that the pipe keeps a reader, and
 * its writers block instead of failing, while no asb serve reads); its stdout/stderr are out_fd
 * (the write end of a pipe: never a host file the sandbox could write). On failure runc's
 * message is read from out_read_fd into *ret_error; -EEXIST when a container `id` already
 * existed (decided by `runc list`, not by the message), -EIO for other runc failures. */
int oci_run_detached(const oci_runtime *rt, const char *id, const char *bundle, int rest_fd,
                     int grpc_fd, const int main_fds[2], int out_fd, int out_read_fd,
                     char **ret_error);
/* `runc state`: *ret_status owned ("running", "stopped", ...), *ret_pid. -ENOENT if unknown
 * (not in `runc list`). */
int oci_state(const oci_runtime *rt, const char *id, char **ret_status, pid_t *ret_pid);
/* `runc list --format json`: *ret owned array of {id, status, pid, ...} (possibly empty). */
int oci_list(const oci_runtime *rt, json_t **ret);
/* `runc delete --force`: kills what is left and removes the container. Unknown id = success.
 * On a running container runc 1.1 sends SIGKILL and then sleeps 100 ms between checks, so a
 * caller holding the first process's pidfd calls oci_kill_wait first. */
int oci_delete(const oci_runtime *rt, const char *id, char **ret_error);

/* Stops a runc container without runc: SIGKILL to its first process through pidfd (opened
 * while the container was known to run, so it cannot name a reused pid) and a wait of up to
 * timeout_ms for its exit, after which `runc delete` finds the container stopped and removes it
 * at once. 0 once the process has exited; -EOPNOTSUPP for runtimes other than runc or
 * pidfd < 0 (the caller goes on with oci_delete alone); -ETIMEDOUT (e.g. a frozen cgroup). */
int oci_kill_wait(const oci_runtime *rt, int pidfd, int timeout_ms);

/* `runc pause` / `runc resume`: freeze / thaw every process of the container (cgroup freezer). */
int oci_pause(const oci_runtime *rt, const char *id, char **ret_error);
int oci_resume(const oci_runtime *rt, const char *id, char **ret_error);

/* Runs argv (argv[0] looked up in PATH) with stdin from /dev/null and returns its exit status
 * (>= 0) or a negative errno; *ret_output (owned, may be NULL) gets stdout+stderr. */
int local_spawn_capture(char *const argv[], char **ret_output);
