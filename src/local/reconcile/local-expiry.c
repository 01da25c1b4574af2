/* Sandbox expiry (UPSTREAM.md §2.4.6) in the terms of the local reconciler: the decision is the
 * reconcile core's (reconcile_sandbox_expiry), shared with asb-controller. */
#include <errno.h>

#include "basic/time-util.h"
#include "local/reconcile/local-expiry.h"
#include "reconcile/reconcile.h"

expiry_action local_expiry_decide(const json_t *sb, int64_t now_usec, int64_t *ret_requeue)
{
    reconcile_sandbox_in in = {.sandbox = sb, .now = now_usec};
    reconcile_sandbox_out out;
    int k = reconcile_sandbox_expiry(&in, &out);
    reconcile_sandbox_action action = out.action;
    *ret_requeue = out.requeue;
    reconcile_sandbox_out_done(&out); /* the status is the caller's to write, not ours */
    if (k < 0) {
        *ret_requeue = EXPIRY_MIN_REQUEUE_USEC; /* out of memory: look again soon */
        return EXPIRY_PENDING;
    }
    switch (action) {
    case RECONCILE_SANDBOX_RUN:
        return *ret_requeue ? EXPIRY_PENDING : EXPIRY_NEVER;
    case RECONCILE_SANDBOX_EXPIRE_MARK:
        return EXPIRY_MARK;
    case RECONCILE_SANDBOX_EXPIRE_DELETE:
        return EXPIRY_DELETE;
    case RECONCILE_SANDBOX_EXPIRE_RETAIN:
        return EXPIRY_RETAIN;
    }
    return EXPIRY_NEVER;
}

const char *local_expiry_action_name(expiry_action a)
{
    static const char *const names[] = {"never", "pending", "mark", "delete", "retain"};
    return (unsigned)a < sizeof(names) / sizeof(names[0]) ? names[a] : "?";
}
