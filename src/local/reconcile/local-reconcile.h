/* local/reconcile: the Sandbox reconciler (local-reconcile*.c): turns each Sandbox into a
 * container and its status, tears down what is deleted, and the bookkeeping around it
 * (finalizer, expiry, names of Ready sandboxes, start priority, claim activity). The one folder
 * that puts the others together; only the controller (finalizers, claim activity) and
 * src/server include it. Internal to the folder:
 * local-reconcile-internal.h. Includes from other folders of src/local: store, metrics,
 * container, runtime, storage, net, snapshot, fs; never from a folder above it
 * (docs/architecture.md, "src/local in rooms"). */
/* The Sandbox reconciler of `asb serve`: one thread that turns each Sandbox into a runc
 * container running sandboxd (docs/local-sandboxes.md). Woken by the store's watch window on
 * every commit; a slow resync (runc list, liveness) runs when nothing happens for a while. */
#pragma once

#include "basic/time-util.h"
#include "local/container/local-capacity.h"
#include "local/container/local-limits.h"
#include "local/container/local-idmap.h"
#include "local/net/local-net.h"
#include "local/store/local-store.h"

typedef struct local_reconciler local_reconciler;

typedef struct local_reconciler_options {
    local_store *store;    /* borrowed; must outlive the reconciler */
    const char *state_dir; /* $ASB_STATE_DIR */
    const char *sandboxd;  /* the binary injected into sandboxes */
    const char *runtime;   /* OCI runtime CLI ("runc") */
    usec_t resync_interval; /* full pass after this much quiet; 0 = 10 s */
    usec_t image_gc_idle;   /* unpacked images unused this long are removed; 0 = 10 min */
    local_net_options net;  /* sandbox networking (mode, pod CIDR, bridge, DNS upstream) */
    local_limits defaults;  /* limits of containers that set none (local_limits_parse_defaults);
                             * all zero: none */
    const local_capacity *capacity; /* the machine's: a container requesting more is not
                                     * started (Unschedulable); NULL: not checked */
    local_idmap *idmap;     /* borrowed, must outlive the reconciler: each sandbox's user
                             * namespace ids; NULL: sandboxes share the host's ids */
    size_t teardown_workers; /* parallel deletions; 0 = 4 */
    size_t start_workers;    /* parallel container starts; 0 = $ASB_START_WORKERS,
                              * else two per CPU (2..16) */
    usec_t teardown_grace;   /* how long stop waits for pending deletions; 0 = 10 s */
    size_t log_max;          /* bytes of sandboxd output kept per sandbox (x2: one rotation) */
} local_reconciler_options;

/* Starts the thread (and sandbox networking). Problems that only affect sandboxes (no root, no sandboxd) are logged and
 * reported in each Sandbox's Ready condition, not returned. *ret owned (local_reconciler_stop). */
int local_reconciler_start(const local_reconciler_options *o, local_reconciler **ret);
/* Joins the thread (call local_store_shutdown first to wake it), completes the teardown of
 * every Sandbox marked for deletion within teardown_grace (what is left stays marked in the
 * store and the next start completes it) and frees. Containers of undeleted Sandboxes keep
 * running: a later `asb serve` re-adopts them. */
local_reconciler *local_reconciler_stop(local_reconciler *r);
