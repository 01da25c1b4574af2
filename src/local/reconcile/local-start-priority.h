/* CPU priority of container starts (issue 16). A warm pool's refill runs `runc run` at a lower
 * priority than everything a claim waits for (the API server's requests, the store's commits,
 * the adopted sandboxes' Executes): on 2 CPUs a refill's starts otherwise take the CPUs from a
 * burst of claims. Children inherit the nice value, so the new container's processes are
 * brought back to normal priority once it is up (its first seconds are the start's, after that
 * it serves a claim).
 *
 * Only done with the privilege to undo it (raising a nice value back needs CAP_SYS_NICE);
 * without it every start runs at normal priority, as before. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/* The nice value of a refill's start; the network preparer (local-net-prepared.c) runs at 10,
 * behind the starts it prepares for. */
#define LOCAL_START_REFILL_NICE 5
/* Teardowns are garbage collection: on 2 CPUs the teardowns of a burst's closed claims (runc
 * delete, cgroups, the scratch disk) otherwise take half the CPU from the refill that replaces
 * them. Nothing a client waits for runs there, except a deletion that waits for its finalizer,
 * and that only loses CPU to starts and requests. The store's lock is never taken at this
 * priority (a claim would wait for a thread the scheduler keeps off the CPU). */
#define LOCAL_TEARDOWN_NICE 10

/* Sets the calling thread's nice value for a start of a warm pool member (warm_member: the
 * refill's nice value) or of anything else (0). Returns 0 or a negative errno; never lowers the
 * priority when it could not raise it back. */
int local_start_priority_set(bool warm_member);

/* Sets the calling thread (a teardown worker) to LOCAL_TEARDOWN_NICE (background) or back to
 * 0. Returns 0 or a negative errno; does nothing without the privilege to undo it. */
int local_teardown_priority_set(bool background);

/* Every thread of `pid` and of its descendants back to nice 0. Returns 0, or a negative errno
 * when none could be changed. */
int local_start_priority_restore(pid_t pid);
