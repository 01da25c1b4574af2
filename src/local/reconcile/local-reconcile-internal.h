/* Shared between local-reconcile.c (loop), local-reconcile-status.c (the status it writes),
 * local-reconcile-requeue.c and -gc.c (its bookkeeping and host clean-up) and
 * local-reconcile-sandbox.c (containers). */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/types.h>

#include "local/container/local-limits.h"
#include "local/runtime/local-logs.h"
#include "local/reconcile/local-reconcile.h"
#include "local/runtime/local-runtime-class.h"
#include "local/runtime/local-runtime-oci.h"
#include "reconcile/reconcile.h"

/* reportingController of the Events the Sandbox reconciler records (local-events.h). */
#define REC_EVENT_SOURCE "asb-serve-reconciler"

/* A container this process knows is running, keyed by the Sandbox's metadata.uid. */
typedef struct rec_entry {
    char *uid;
    pid_t pid;
    bool ready; /* sandboxd answered health */
    bool frozen; /* runc pause'd (operatingMode Suspended) */
    size_t handler; /* runs under rec_handler(r, handler) */
    int pidfd;      /* pidfd of the container's first process (in r->epoll_fd, one-shot), or -1 */
    bool limits_read;    /* limits holds what this container's config.json and disk say */
    local_limits limits; /* memory, cpu_millis, ephemeral (no *_defaulted) */
} rec_entry;

/* One teardown for the worker pool (local-reconcile-teardown.c): everything it needs is copied,
 * so a worker never reads the reconciler's entries or handlers. */
typedef struct rec_job {
    char *uid;
    char *ns, *name; /* the Sandbox whose finalizer goes when done; NULL: none (already gone) */
    oci_runtime rt;
    bool frozen;
    int pidfd; /* the container's first process (rec_entry_pidfd), or -1 */
    struct rec_job *next;
} rec_job;

/* Deletions run in parallel on a bounded pool of worker threads. */
typedef struct rec_pool {
    pthread_mutex_t lock;
    pthread_cond_t work, done;
    rec_job *head, *tail; /* queued */
    char **active;        /* uids being torn down now */
    size_t n_active;
    char **finalized; /* uids whose finalizer a worker removed: their DELETED event needs nothing */
    size_t n_finalized;
    pthread_t *threads;
    size_t n_threads;
    bool stop;
} rec_pool;

/* Why a sandbox is not running: reason/message for the Ready condition (owned message). */
typedef struct rec_failure {
    const char *reason;
    char *message;
} rec_failure;

/* One container start for the start workers (local-reconcile-start.c): the Sandbox as the loop
 * saw it and the runtime it runs under are copied in; the outcome comes back to the loop, which
 * alone records entries and writes the status. */
typedef struct rec_start {
    char *uid;
    json_t *sandbox; /* a deep copy */
    size_t handler;
    oci_runtime rt; /* a copy of rec_handler(r, handler) */
    int result;     /* 0, or <0 with failure filled */
    rec_failure failure;
    pid_t pid;
    bool ready; /* sandboxd answered health */
    bool warm_member; /* a warm pool's refill: held during claim bursts, run at lower priority */
    local_limits limits; /* what the started container got (result 0) */
    usec_t queued;    /* CLOCK_MONOTONIC */
    struct rec_start *next;
} rec_start;

/* Starts run on a bounded pool of their own, one object at a time: a uid is queued, running or
 * done-but-not-collected at most once, and the loop leaves it alone meanwhile. */
typedef struct rec_starter {
    pthread_mutex_t lock;
    pthread_cond_t work;
    rec_start *head, *tail; /* queued */
    rec_start *done;        /* finished, for the loop to collect */
    char **busy;            /* uids queued, running or done */
    size_t n_busy;
    pthread_t *threads;
    size_t n_threads;
    bool stop;
} rec_starter;

/* A Sandbox whose container could not be started at this generation: retried on the next
 * resync or spec change, not on every status write of its own. */
typedef struct rec_failed {
    char *uid;
    long long generation;
} rec_failed;

/* A requeue of one Sandbox at a monotonic time (expiry, §2.4.6): the loop's wait deadline is
 * the earliest of these, so there is no polling. */
typedef struct rec_timer {
    char *uid, *ns, *name;
    usec_t due;
} rec_timer;

struct local_reconciler {
    local_store *store;
    const api_kind *kind;
    const api_kind *template_kind; /* its events re-apply network rules */
    char *state_dir;
    char *inject_dir;
    char *inject_error; /* why sandboxd cannot be injected, or NULL */
    const char *no_root;  /* set when running without root */
    local_net *net;       /* never NULL once started; may be "unavailable" */
    local_idmap *idmap;   /* borrowed; NULL: no user namespaces */
    oci_runtime rt; /* the default runtime: handler 0 */
    /* runtimeClassName -> handler binary, and the runtimes other than the default that are
     * in use (handler i > 0 is extra[i - 1]), each with its own state root. */
    runtime_class *classes;
    size_t n_classes;
    oci_runtime *extra;
    size_t n_extra;
    char *class_error; /* ASB_RUNTIME_CLASSES did not parse */
    pthread_t thread;
    usec_t resync_interval;
    usec_t image_gc_idle;
    local_limits defaults; /* LimitRange-like defaults of containers (local-limits.h) */
    bool has_capacity;
    local_capacity capacity; /* the machine's (local-capacity.h) */
    rec_entry *entries;
    size_t n_entries;
    rec_failed *failed;
    size_t n_failed;
    rec_timer *timers;
    size_t n_timers;
    /* Main processes: an inotify watch on each sandboxes/<uid>/main; a watcher thread nudges
     * the loop when an exit file appears. */
    int inotify_fd, stop_fd;
    pthread_t watcher;
    bool watcher_started;
    _Atomic bool main_event;
    /* Containers' first processes: a one-shot pidfd each in epoll_fd; the watcher thread nudges
     * the loop when one exits, so the death of PID 1 is seen at once, not at the next resync. */
    int epoll_fd;
    _Atomic bool pid_event;
    /* local_net is single-threaded: the loop and the teardown workers take this lock. */
    pthread_mutex_t net_lock;
    rec_pool pool;
    rec_starter starter;
    usec_t teardown_grace;
    local_logs *logs; /* sandboxd's output (pipes), NULL without root */
};

/* Starts the teardown workers (n >= 1). */
int rec_pool_start(local_reconciler *r, size_t n);
/* Queues the teardown of a deleted sandbox (container, cgroups, network, sockets, its
 * directories) and then the removal of its finalizer from ns/name (NULL: none). The entry is
 * forgotten at once. No-op when one is queued or running for uid. */
void rec_teardown_async(local_reconciler *r, const char *uid, const char *ns, const char *name);
/* Whether a teardown of uid is queued or running. */
bool rec_teardown_pending(local_reconciler *r, const char *uid);
/* True once (and then forgotten) when a worker removed uid's finalizer itself. */
bool rec_teardown_take_finalized(local_reconciler *r, const char *uid);
/* Waits for queued and running teardowns until the monotonic deadline, then stops the workers
 * (running teardowns finish; queued ones stay recorded as deletionTimestamp in the store). */
void rec_pool_stop(local_reconciler *r, usec_t deadline);
/* The teardown itself, on the calling thread: 0, or the error of runc delete (the container may
 * still exist; everything else was removed anyway). pidfd: the container's first process
 * (rec_entry_pidfd; borrowed), killed before runc delete; -1 leaves it all to runc.
 * *ret_times (may be NULL): where the time went. */
typedef struct rec_teardown_times {
    usec_t kill;    /* the pidfd SIGKILL and the wait for the first process */
    usec_t runtime; /* runc delete */
    usec_t host;    /* cgroups left over, network, sockets, filesystem, directories */
} rec_teardown_times;
int rec_teardown_run(local_reconciler *r, const char *uid, const oci_runtime *rt, bool frozen,
                     int pidfd, bool purge, rec_teardown_times *ret_times);
/* A pidfd of its own (owned, O_CLOEXEC) on entry e's container process while it runs, else -1
 * (no entry, no pidfd, already exited). */
int rec_entry_pidfd(const rec_entry *e);
/* Forgets a known container (closes its pidfd). */
void rec_forget(local_reconciler *r, const char *uid);

/* Watches sandboxes/<uid>/main (if it exists) for the exit file of the main process. */
void rec_watch_main(local_reconciler *r, const char *uid);
/* The recorded exit code of the sandbox's main process: 0 and *ret_code, or -ENOENT. */
int rec_main_exit(local_reconciler *r, const char *uid, int *ret_code);

rec_entry *rec_find(local_reconciler *r, const char *uid);
/* The OCI runtime of handler index i (0 = default), and the one a known container runs under
 * (the default for unknown uids). Borrowed. */
const oci_runtime *rec_handler(local_reconciler *r, size_t i);
const oci_runtime *rec_runtime(local_reconciler *r, const char *uid);
static inline size_t rec_n_handlers(const local_reconciler *r)
{
    return 1 + r->n_extra;
}
/* The handler index for a pod spec's runtimeClassName (NULL = default), set up on first use.
 * -ENOENT (unknown class) / -EOPNOTSUPP (handler not installed) with f filled. */
int rec_handler_for_class(local_reconciler *r, const char *class_name, size_t *ret,
                          rec_failure *f);
/* Sets up the handler of binary (index in *ret) when its state root already exists, so a
 * restarted asb serve re-adopts the containers it runs. */
void rec_handlers_restore(local_reconciler *r);
/* Creates and starts the container of a Running sandbox. 0, or <0 with f filled. */
int rec_materialise(local_reconciler *r, const json_t *sandbox, rec_failure *f);
/* The loop's part of rec_materialise: what stops every start, then the handler of the
 * Sandbox's runtime class (set up on first use). 0, or <0 with f filled. */
int rec_materialise_handler(local_reconciler *r, const json_t *sandbox, size_t *ret_handler,
                            rec_failure *f);
/* The part of rec_materialise that may run on any thread: everything but choosing the handler
 * (rt is its runtime) and recording the entry; *ret_pid the container's first process,
 * *ret_limits (may be NULL) what its config.json and disk give it (what rec_effective_resources
 * would read back from them). */
int rec_materialise_run(local_reconciler *r, const json_t *sandbox, const oci_runtime *rt,
                        pid_t *ret_pid, local_limits *ret_limits, rec_failure *f);
/* Records a container's limits in its entry (as started, or read back once from its
 * config.json), so its status writes need not read that file again. */
void rec_entry_set_limits(rec_entry *e, const local_limits *l);

/* Starts the start workers (n >= 1). */
int rec_starter_start(local_reconciler *r, size_t n);
/* Queues the start (and first health check) of sb's container under handler: 0, or <0 when it
 * could not be queued (no workers, out of memory: start it on the calling thread). */
int rec_start_async(local_reconciler *r, const json_t *sb, size_t handler);
/* Whether a start of uid is queued, running or finished but not collected yet: the loop does
 * not touch the object meanwhile (one object is never reconciled by two threads at once). */
bool rec_start_pending(local_reconciler *r, const char *uid);
/* Takes the finished starts (a list linked by next, oldest first); the caller collects each
 * with rec_start_collected and frees it with rec_start_free. */
rec_start *rec_start_take_done(local_reconciler *r);
/* The uid is no longer pending (its entry, if any, is recorded now). */
void rec_start_collected(local_reconciler *r, const char *uid);
rec_start *rec_start_free(rec_start *s);
/* Stops the workers: running starts finish, queued ones are dropped (the next pass or the next
 * asb serve starts them). Finished starts stay for rec_start_take_done. */
void rec_starter_stop(local_reconciler *r);
/* Deletes the container and its socket dir; with purge also the sandbox's persistent dirs. */
void rec_teardown(local_reconciler *r, const char *uid, bool purge);
/* Adopts an already running container found by runc list. */
void rec_adopt(local_reconciler *r, const char *uid, pid_t pid);
/* The network policy of a sandbox from its template (§2.2 labels/annotation); *ret_tpl the
 * template as stored (owned) or NULL. */
local_net_policy_kind rec_net_policy(local_reconciler *r, const json_t *sandbox, json_t **ret_tpl);
/* The limits a Sandbox's container runs with, for status.resources (local_limits_to_json),
 * read from its bundle and filesystem image; owned, NULL when there is no bundle. */
json_t *rec_effective_resources(local_reconciler *r, const json_t *sandbox);
/* GET /v1/health on the sandbox's REST socket; true on 200 within timeout_ms. */
bool rec_health(local_reconciler *r, const char *uid, int timeout_ms);

/* local-reconcile-status.c */
/* A status write: what the container is (in the terms of the core's rules, which make the
 * status and conditions), plus what only this backend reports. */
typedef struct status_update {
    const char *uid;
    bool expiry; /* the core's expiry status (§2.4.6), not o */
    reconcile_sandbox_observed o;
    bool has_pod;       /* a container exists: network condition, pod-name annotation */
    const char *pod_ip; /* status.podIPs[0], NULL: none */
    const char *netpol_status, *netpol_reason, *netpol_message; /* NetworkPolicyEnforced */
    long long blocked; /* status.blockedConnections with the netpol condition, < 0: none */
    json_t *resources; /* status.resources (effective limits, owned), NULL: kept as stored
                        * while a container exists */
} status_update;
/* Writes sb's status (and the pod-name annotation) from u by the core's rules plus this backend's
 * additions; refreshes and describes the sandbox's network first when it has a container. A
 * failed write is logged. Fills u's network fields. */
void rec_write_status(local_reconciler *r, const json_t *sb, status_update *u);

/* local-reconcile-requeue.c: the failed start of a uid's generation (NULL: none), and the timed
 * requeues (rec_timer_set replaces an earlier one of the same Sandbox). Allocation failures
 * drop the entry silently: the next resync looks again. */
rec_failed *rec_failed_find(local_reconciler *r, const char *uid);
void rec_failed_set(local_reconciler *r, const char *uid, long long gen);
void rec_failed_clear(local_reconciler *r, const char *uid);
void rec_timer_clear(local_reconciler *r, const char *uid);
void rec_timer_set(local_reconciler *r, const json_t *sb, usec_t after);
/* The earliest due time (monotonic), UINT64_MAX when there is none. */
usec_t rec_timer_earliest(local_reconciler *r);

/* local-reconcile-gc.c, called by a resync. */
/* Unpacked images that no running container's bundle uses and that sat idle are removed. */
void rec_gc_images(local_reconciler *r);
/* Removes the run/, sandboxes/ and volumes/ directories of uids not in items (the stored
 * Sandboxes) with no start or teardown pending, and the user namespace slots nothing holds. */
void rec_gc_orphans(local_reconciler *r, const json_t *items);
