/* The user namespace of a local sandbox, made by asb serve and owned by the sandbox's own host id
 * (docs/security.md, "Kernel budgets").
 *
 * The kernel charges every per-user budget (inotify instances and watches, POSIX message queue
 * bytes, queued signals and POSIX timers, locked shm, user namespaces: kernel/ucount.c) at each
 * user namespace level up to the initial one, and at the level above a namespace to the uid that
 * OWNS it. A namespace that runc makes is owned by host root, so every sandbox would draw on host
 * root's budgets, and one sandbox could exhaust them for the host and every other sandbox.
 *
 * local_userns_hold makes the namespace from a child process that has taken the sandbox's first
 * host id (its slot's id 0) as real, effective and saved uid and gid, with the per-sandbox
 * RLIMIT_SIGPENDING and RLIMIT_MSGQUEUE below; asb serve (host root) writes its uid_map and
 * gid_map; runc joins it by path. The sandbox's processes, whatever their uid inside, then draw on
 * that one host id's budgets: the host's per-user limits (/proc/sys/user/max_inotify_*) and these
 * rlimits (the creator's, kept by the namespace) bound the whole sandbox, and host root's and
 * other sandboxes' budgets are not touched. */
#pragma once

#include <stdint.h>
#include <sys/types.h>

/* Queued signals (sigqueue, POSIX timers, realtime signals) of one sandbox, all its uids. */
#define LOCAL_USERNS_SIGPENDING 16384u
/* Bytes of POSIX message queues of one sandbox (the kernel's default RLIMIT_MSGQUEUE). */
#define LOCAL_USERNS_MSGQUEUE 819200u

typedef struct local_userns {
    pid_t pid;     /* the holder: a process in the namespace until local_userns_release */
    char path[48]; /* "/proc/<pid>/ns/user" */
} local_userns;

#define LOCAL_USERNS_INIT {.pid = -1}

/* A new user namespace owned by host_id (uid and gid) that maps ids 0..count-1 inside to
 * host_id.. on the host, held by a child process until local_userns_release. A negative errno
 * when the child could not take the id or create the namespace, or a map could not be written
 * (nothing is left running then). */
int local_userns_hold(uint32_t host_id, uint32_t count, local_userns *ret);
/* Kills the holder and reaps it (once runc has joined, the sandbox's processes keep the
 * namespace). Safe on LOCAL_USERNS_INIT and twice. */
void local_userns_release(local_userns *u);

/* runc 1.1 joins a user namespace given by path before any other namespace, and from inside it
 * can no longer join a network namespace that the host's user namespace owns. So the sandbox's
 * network namespace is runc's own: the calling thread moves there (setns is per thread) before it
 * starts runc, and config.json names none (the container stays in runc's). *ret_saved: the
 * thread's own namespace, for local_userns_netns_leave. */
int local_userns_netns_enter(const char *netns_path, int *ret_saved);
/* Brings the thread back and closes *saved; 0, or a negative errno when it could not go back
 * (the thread must not go on then). Nothing when *saved < 0. */
int local_userns_netns_leave(int *saved);
