/* Sandbox expiry (UPSTREAM.md §2.4.6): the reconcile core's decision (reconcile_sandbox_expiry)
 * as the local reconciler's actions. */
#pragma once

#include <jansson.h>
#include <stdint.h>

#include "reconcile/reconcile.h"

#define EXPIRY_MIN_REQUEUE_USEC RECONCILE_EXPIRY_MIN_REQUEUE_USEC
#define EXPIRY_MARK_REQUEUE_USEC RECONCILE_EXPIRY_MARK_REQUEUE_USEC

typedef enum expiry_action {
    EXPIRY_NEVER,   /* no (usable) spec.shutdownTime */
    EXPIRY_PENDING, /* not yet: requeue after *ret_requeue */
    EXPIRY_MARK,    /* first pass: Ready=False/SandboxExpired, persist, requeue 1 ms */
    EXPIRY_DELETE,  /* second pass, shutdownPolicy Delete: stop the container, delete the object */
    EXPIRY_RETAIN,  /* second pass, Retain (default): stop the container, keep object and dirs */
} expiry_action;

/* What to do with sandbox sb at wall-clock time now_usec (µs since the epoch). For
 * EXPIRY_PENDING and EXPIRY_MARK *ret_requeue (µs) says when to look again; else 0. */
expiry_action local_expiry_decide(const json_t *sb, int64_t now_usec, int64_t *ret_requeue);

const char *local_expiry_action_name(expiry_action a);
