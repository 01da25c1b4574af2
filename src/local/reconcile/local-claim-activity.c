/* See local-claim-activity.h. */
#include <stdatomic.h>

#include "basic/macro.h"
#include "local/reconcile/local-claim-activity.h"

static _Atomic usec_t activity_until;

void local_claim_activity_mark(void)
{
    usec_t until = now_usec(CLOCK_MONOTONIC) + LOCAL_CLAIM_ACTIVITY_GRACE_USEC;
    usec_t cur = atomic_load(&activity_until);
    /* Only ever forward: two threads marking at once keep the later deadline. */
    while (cur < until && !atomic_compare_exchange_weak(&activity_until, &cur, until))
        ;
}

usec_t local_claim_activity_until(void)
{
    return atomic_load(&activity_until);
}

usec_t local_claim_activity_release(bool warm_member, usec_t queued, usec_t now)
{
    if (!warm_member)
        return now;
    usec_t at = MIN(local_claim_activity_until(), queued + LOCAL_CLAIM_ACTIVITY_MAX_HOLD_USEC);
    return MAX(at, now);
}
