/* Claim bursts and pool refills: while claims are arriving or being adopted, the pools'
 * replacement starts (`runc run`, mostly CPU) wait, so that the claims' requests, commits,
 * watch events and first Executes have the CPUs (issue 16: on 2 CPUs a refill started at the
 * first adoption doubled the burst's claim -> Ready).
 *
 * One process-wide deadline (asb serve runs one controller and one reconciler): the claim
 * controller pushes it forward when a claim arrives or is adopted; the start workers hold a
 * warm pool member's start until it has passed, but never longer than
 * LOCAL_CLAIM_ACTIVITY_MAX_HOLD_USEC after the start was queued (a steady stream of claims
 * must not starve the pool it drains). Claims' own (cold) starts are never held. */
#pragma once

#include <stdbool.h>

#include "basic/time-util.h"

/* How long after the last claim arrival or adoption the refill waits: the next claims of a
 * burst usually follow within a few ms of each other. */
#define LOCAL_CLAIM_ACTIVITY_GRACE_USEC (150 * USEC_PER_MSEC)
/* The longest a start is ever held. */
#define LOCAL_CLAIM_ACTIVITY_MAX_HOLD_USEC (1 * USEC_PER_SEC)

/* A claim arrived or was adopted now (CLOCK_MONOTONIC): hold refills for the grace. */
void local_claim_activity_mark(void);

/* The CLOCK_MONOTONIC time until which refill starts are held (0: never marked). */
usec_t local_claim_activity_until(void);

/* When a start queued at `queued` (CLOCK_MONOTONIC) of a sandbox that is a warm pool member
 * (`warm_member`) may run: `now` or later. */
usec_t local_claim_activity_release(bool warm_member, usec_t queued, usec_t now);
