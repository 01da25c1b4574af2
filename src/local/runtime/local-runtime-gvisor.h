/* What `asb serve` does differently for sandboxes run by gVisor's runsc (docs/local-sandboxes.md,
 * "gVisor"). runsc of Debian 12 (release 20221219) cannot pass listening fds into its sandbox
 * (`--pass-fd` came in 2023), so sandboxd binds rest.sock and grpc.sock itself, in a host
 * directory bound at /.asb/run (run/<uid>/box, owned by the sandbox user), which runsc's
 * --host-uds=create turns into real host sockets. The host then links the two socket inodes
 * into run/<uid>, where every client looks for them: checked and linked by fd, so nothing the
 * sandbox puts in its directory afterwards (another socket, a symlink) is what clients reach. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

/* Where sandboxd binds, under run_dir (run/<uid>). */
#define LOCAL_GVISOR_BOX "box"
/* Where staged bind sources are, inside the sandbox (local_bundle_write_staged points the
 * bundle's binds there; local_gvisor_stage_binds mounts them). */
#define LOCAL_BUNDLE_STAGE_DIR "/run/asb/src"

/* Makes run_dir/box owned by uid:gid (host ids of the sandbox user), mode 0700, without
 * sockets of an earlier container, and removes run_dir's rest.sock and grpc.sock (links of an
 * earlier container: clients must not reach a dead one's inode). *ret_dir owned: the box's
 * path. 0 or a negative errno. */
int local_gvisor_prepare(const char *run_dir, uid_t uid, gid_t gid, char **ret_dir);

/* Waits up to timeout_ms for both sockets in run_dir/box, then links each into run_dir: opened
 * O_PATH|O_NOFOLLOW beneath the box, linked by fd once it is a socket (a symlink or any other
 * file there is never linked). pid > 0 is the sandbox's first process: its exit ends the wait.
 * 0; -ETIMEDOUT; -ESRCH (pid exited first); other negative errnos. */
int local_gvisor_publish(const char *run_dir, pid_t pid, int timeout_ms);

/* In the calling thread's staging mount namespace (local_idmap_stage_enter: private, a slave of
 * the host's), mounts a small tmpfs at LOCAL_BUNDLE_STAGE_DIR and binds the i-th of sources
 * (local_bundle_write_staged) at LOCAL_BUNDLE_STAGE_DIR/<i>: runsc's gofer, which makes the
 * sandbox's mounts as the sandbox's root (a host id the state directory is closed to), reaches
 * each source there and nothing else of the state directory. Nothing is mounted on the host
 * (only LOCAL_BUNDLE_STAGE_DIR is created there, empty). 0 or a negative errno. */
int local_gvisor_stage_binds(const json_t *sources);
