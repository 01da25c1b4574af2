/* The backend-neutral reconcile core for the Sandbox's own rules, SandboxTemplate,
 * SandboxWarmPool and SandboxClaim (shared/spec/UPSTREAM.md §2.2–§2.8). Pure functions over
 * jansson objects: no I/O, no clocks (callers pass `now`), no globals that change. A backend
 * (the local store of `asb serve`, or a kube-apiserver client in asb-controller) lists the
 * objects, calls reconcile_sandbox_*() / reconcile_pool() / reconcile_claim(), and executes the
 * returned plan:
 *
 *   - new objects are complete (apiVersion, kind, metadata incl. ownerReferences, spec); the
 *     backend adds uid/creationTimestamp/resourceVersion (and a name for generateName);
 *   - changes are RFC 7386 merge patches (apply locally with api_merge_patch(), or send as
 *     `application/merge-patch+json`); the object they apply to is given so the backend can use
 *     its uid/resourceVersion as an optimistic lock and re-run the reconcile on a conflict;
 *   - status objects are the complete desired `status` (write only when *_changed);
 *   - requeue is a delay in µs after which the backend must call again (0: only on events).
 *
 * Times are µs since the Unix epoch (wall clock). Every owned json_t in a plan is released by
 * the matching *_done(). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shared/status.h"

/* ---- label / annotation registry (§2.2) ---- */
#define RECONCILE_LABEL_NAME_HASH "agents.x-k8s.io/sandbox-name-hash"
#define RECONCILE_ANN_POD_NAME "agents.x-k8s.io/pod-name"
#define RECONCILE_ANN_TEMPLATE_REF "agents.x-k8s.io/sandbox-template-ref"
#define RECONCILE_LABEL_LAUNCH_TYPE "agents.x-k8s.io/launch-type"
#define RECONCILE_LABEL_CREATED_BY "agents.x-k8s.io/created-by"
#define RECONCILE_LABEL_POD_TEMPLATE_HASH "agents.x-k8s.io/sandbox-pod-template-hash"
#define RECONCILE_LABEL_TEMPLATE_HASH "agents.x-k8s.io/sandbox-template-hash"
#define RECONCILE_LABEL_WARM_POOL "agents.x-k8s.io/warm-pool-sandbox"
#define RECONCILE_LABEL_TEMPLATE_REF_HASH "agents.x-k8s.io/sandbox-template-ref-hash"
#define RECONCILE_LABEL_CLAIM_UID "agents.x-k8s.io/claim-uid"
#define RECONCILE_ANN_SANDBOX_NAME "agents.x-k8s.io/sandbox-name"
#define RECONCILE_ANN_FIRST_OBSERVED "agents.x-k8s.io/controller-first-observed-at"
#define RECONCILE_ANN_FIRST_READY "agents.x-k8s.io/claim-first-ready-at"
#define RECONCILE_ANN_TRACE "opentelemetry.io/trace-context"
#define RECONCILE_ANN_SAFE_TO_EVICT "cluster-autoscaler.kubernetes.io/safe-to-evict"

#define RECONCILE_DEFAULT_GRACE_USEC (5LL * 60 * 1000000) /* readiness grace of pool members */
#define RECONCILE_DEFAULT_MAX_BATCH 300
#define RECONCILE_COLD_GRACE_USEC (2LL * 1000000) /* warm candidates pending network */
#define RECONCILE_DEFAULT_LABEL_DOMAIN "sandbox.users.io"

/* ---- small helpers ---- */
/* NameHash (§2.3): 32-bit FNV-1a, 8 lowercase hex digits + NUL. */
void reconcile_name_hash(const char *s, char out[9]);
/* RFC 3339 time to µs since the epoch: 0 or -EINVAL. */
int reconcile_parse_time(const char *s, int64_t *ret_usec);
/* Formats µs since the epoch as RFC 3339 with `digits` fraction digits (0, 6 or 9; 9 =
 * RFC3339Nano as Go prints it, trailing zeros trimmed). */
void reconcile_format_time(int64_t usec, int digits, char out[40]);

/* The controller ownerReference of obj (borrowed) or NULL. */
const json_t *reconcile_controller_ref(const json_t *obj);
/* True when obj's controller ownerReference has owner's uid. */
bool reconcile_controlled_by(const json_t *obj, const json_t *owner);
/* {apiVersion, kind, name, uid, controller: true, blockOwnerDeletion: true} pointing at owner.
 * Owned reference. */
json_t *reconcile_owner_ref(const json_t *owner);
/* The condition of that type in obj.status.conditions (borrowed) or NULL. */
const json_t *reconcile_condition(const json_t *obj, const char *type);
/* A metav1.Condition keeping lastTransitionTime of old_obj's condition (obj.status.conditions) of that type while its
 * status is unchanged. Owned. */
json_t *reconcile_make_condition(const json_t *old_obj, const char *type, const char *status,
                                 const char *reason, const char *message, json_int_t generation,
                                 int64_t now);
/* Ready=True. */
bool reconcile_sandbox_ready(const json_t *sandbox);
bool reconcile_deleting(const json_t *obj);

/* spec.operatingMode is Suspended (§2.4.2; a v1alpha1 spec.replicas 0, §2.1): both backends
 * and the status rules use this. */
bool reconcile_sandbox_suspended(const json_t *sandbox);

/* ---- SandboxTemplate (§2.5, §2.6) ---- */
/* The template's blueprint: {podTemplate, volumeClaimTemplates?, service?}. Owned. */
json_t *reconcile_template_blueprint(const json_t *template);
/* sandbox-template-hash: NameHash of the canonical JSON (sorted keys, compact) of the blueprint;
 * pod template hash: the same over podTemplate alone. Self-consistent, not Go-identical. */
void reconcile_blueprint_hash(const json_t *template, char out[9]);
void reconcile_pod_template_hash(const json_t *template, char out[9]);
/* §2.6 on a pod spec built from template: automountServiceAccountToken nil -> false; DNS
 * override (dnsPolicy None, nameservers 8.8.8.8 1.1.1.1) only when the template is Managed,
 * has no networkPolicy and the pod's dnsPolicy is empty. */
void reconcile_apply_secure_defaults(const json_t *template, json_t *pod_spec);
/* A merge patch for the template itself (label sandbox-template-ref-hash), or NULL if none. */
json_t *reconcile_template_patch(const json_t *template);
/* §2.5: the desired networking.k8s.io/v1 NetworkPolicy "<template>-network-policy" (owned), or
 * NULL when networkPolicyManagement is Unmanaged (delete one the template controls). */
json_t *reconcile_template_network_policy(const json_t *template);
/* §2.7 staleness of a Sandbox built from template (any Recreate/orphan decision uses it):
 * ref-hash label != NameHash(template name) -> stale; template-hash label == blueprint hash ->
 * fresh; otherwise semantic comparison (pod spec after §2.6, VCT names+specs, service).
 * Metadata differences never make a sandbox stale. */
bool reconcile_sandbox_stale(const json_t *sandbox, const json_t *template);
/* The same against hashes of the template computed once (a pool checks every member). */
typedef struct reconcile_template_hashes {
    char ref[9];       /* NameHash(template name) */
    char blueprint[9]; /* the blueprint's hash */
} reconcile_template_hashes;
void reconcile_template_hashes_of(const json_t *template, reconcile_template_hashes *ret);
bool reconcile_sandbox_stale_hashed(const json_t *sandbox, const json_t *template,
                                    const reconcile_template_hashes *h);

/* ---- SandboxWarmPool (§2.7) ---- */
typedef struct reconcile_pool_in {
    const json_t *pool;
    const json_t *template;  /* NULL: not found (no creates) */
    const json_t *sandboxes; /* array: Sandboxes of the pool's namespace; the core picks members
                              * (label warm-pool-sandbox = NameHash(pool)) */
    int64_t now;
    int64_t grace;               /* readiness grace period; 0 = 5 min */
    size_t max_batch;            /* 0 = 300 */
    bool expectations_pending;   /* earlier creates/deletes not observed yet: plan none */
    bool no_eviction_annotation; /* --enable-warm-pool-eviction=false */
    bool hold_creates;           /* the caller holds the refill: plan no creates */
} reconcile_pool_in;

typedef struct reconcile_pool_out {
    json_t *create;  /* array of new Sandboxes (metadata.generateName "<pool>-", no name) */
    json_t *remove;  /* array of member Sandboxes (the input objects, referenced) to delete:
                      * stale under Recreate,
                      * stale orphans, past the grace period not Ready, scale down (not-Ready
                      * first, then newest) */
    json_t *patches; /* array of {"object": member (input object), "patch": merge patch}: orphan
                      * adoption (controller ref + launch-type=warm), launch-type=warm if missing */
    json_t *status;  /* desired status {replicas, readyReplicas, selector, observedGeneration,
                      * conditions: Ready True/PoolReady, False/PoolFilling ("N of M sandboxes
                      * Ready") or False/TemplateNotFound} */
    bool status_changed;
    int64_t requeue; /* µs from now, 0 = none (grace deadlines of young not-Ready members) */
} reconcile_pool_out;

/* 0, -ENOMEM or -EINVAL (pool without name/uid). */
int reconcile_pool(const reconcile_pool_in *in, reconcile_pool_out *out);
void reconcile_pool_out_done(reconcile_pool_out *out);
/* One new warm Sandbox for pool from template (§2.7 "New warm Sandbox"). Owned. */
json_t *reconcile_pool_new_sandbox(const json_t *pool, const json_t *template,
                                   bool no_eviction_annotation);
/* Whether sandbox is a member of pool (label warm-pool-sandbox = NameHash(pool name)). */
bool reconcile_pool_member(const json_t *pool, const json_t *sandbox);

/* ---- SandboxClaim (§2.8) ---- */
/* Whether the backend can reach a sandbox (clusters: status.podIPs non-empty; locally: sandboxd
 * answers health, which the Sandbox reconciler reports as Ready). */
typedef bool (*reconcile_networked_fn)(const json_t *sandbox, void *userdata);

typedef struct reconcile_claim_in {
    const json_t *claim;
    const json_t *pool;      /* NULL: not found */
    const json_t *template;  /* NULL: not found */
    const json_t *sandboxes; /* array: Sandboxes of the claim's namespace */
    int64_t now;
    const char *const *allowed_label_domains; /* NULL-terminated; NULL = {"sandbox.users.io"} */
    reconcile_networked_fn networked;         /* NULL: status.podIPs non-empty */
    void *userdata;
} reconcile_claim_in;

typedef enum reconcile_claim_action {
    RECONCILE_CLAIM_NOTHING,           /* only claim_patch / status (when changed) */
    RECONCILE_CLAIM_ADOPT,             /* warm adoption of target: sandbox_patch on target, and
                                        * claim_patch (annotation sandbox-name) + status on the
                                        * claim; locally all in one store write */
    RECONCILE_CLAIM_CREATE,            /* cold: create `sandbox`, then claim_patch + status */
    RECONCILE_CLAIM_PATCH_SANDBOX,     /* sandbox_patch on target (launch-type, pod metadata) */
    RECONCILE_CLAIM_DELETE_SANDBOX,    /* expiry with Retain: delete target (if it exists) */
    RECONCILE_CLAIM_DELETE,            /* expiry with Delete: delete the claim (owned sandbox GC) */
    RECONCILE_CLAIM_DELETE_FOREGROUND, /* expiry with DeleteForeground: claim goes after target */
} reconcile_claim_action;

typedef struct reconcile_claim_out {
    reconcile_claim_action action;
    const json_t *target;     /* borrowed from in->sandboxes, or NULL */
    json_t *sandbox;          /* CREATE: the new Sandbox, named like the claim */
    json_t *sandbox_patch;    /* ADOPT, PATCH_SANDBOX: merge patch for target */
    json_t *claim_patch;      /* merge patch of the claim's metadata (annotations), or NULL */
    json_t *status;           /* the claim's desired status, as it is once the action succeeded;
                               * NULL while a claim waits (< 2 s) for a starting member */
    bool status_changed;      /* status differs from the stored one */
    int64_t requeue;          /* µs from now; 0 = none */
    const char *event_reason; /* "SandboxAdopted", "SandboxProvisioned", "ClaimExpired" or NULL */
    char *message;            /* event message / error text, owned, or NULL */
} reconcile_claim_out;

/* 0, -ENOMEM or -EINVAL (claim without name/uid). Policy errors are not errors here: they are
 * reported in status (Ready=False with the §2.8 reason). */
int reconcile_claim(const reconcile_claim_in *in, reconcile_claim_out *out);
/* The pool member reconcile_claim would adopt for in->claim if it adopted now, from
 * in->sandboxes (oldest Ready networked member, else the oldest networked one), or NULL. A
 * backend can narrow a later reconcile_claim to this one member. */
const json_t *reconcile_claim_warm_pick(const reconcile_claim_in *in);
void reconcile_claim_out_done(reconcile_claim_out *out);

/* Reasons of the claim's Ready condition that SDKs treat as terminal (§2.8). */
bool reconcile_claim_reason_terminal(const char *reason);

/* Why an object could not be made as asked: the reason its Ready condition shows and the
 * error whose message the condition carries. `seen` marks an error met while reconciling (not a
 * refusal of what was asked): its condition reads "Error seen: <message>", words that
 * reconcile_failure_message() alone writes. */
typedef struct reconcile_failure {
    const char *reason; /* static, or NULL when nothing failed */
    bool seen;
    api_error error;
} reconcile_failure;

#define RECONCILE_FAILURE_INIT                                                                     \
    {                                                                                              \
        .error = API_ERROR_INIT                                                                    \
    }

/* Sets *f (dropping what it held) and returns its negative errno (err, or -EINVAL when err is
 * not negative). */
int reconcile_fail(reconcile_failure *f, const char *reason, bool seen, int err, const char *fmt,
                   ...) __attribute__((format(printf, 5, 6)));
/* The condition's message for f: owned, NULL when out of memory. */
char *reconcile_failure_message(const reconcile_failure *f);
/* "Error seen: <message>", the Ready message of an error met while reconciling: owned, NULL
 * when out of memory. */
char *reconcile_error_seen(const char *message);
void reconcile_failure_clear(reconcile_failure *f);

/* Building blocks of reconcile_claim, exposed for tests and for backends. */
/* additionalPodMetadata rules: 0, or -EINVAL with err set. */
int reconcile_validate_pod_metadata(const json_t *apm, const char *const *allowed_domains,
                                    api_error *err);
/* env injection into pod_spec per the template's envVarsInjectionPolicy. 0 or a negative errno
 * with *f set (reason EnvVarsInjectionRejected, or ReconcilerError for errors seen). */
int reconcile_inject_env(const json_t *template, const json_t *env, json_t *pod_spec,
                         reconcile_failure *f);
/* VCT merge per volumeClaimTemplatesPolicy. *ret owned array (may be empty); or -EINVAL with
 * err set (reason VolumeClaimTemplatesError), or -ENOMEM. */
int reconcile_merge_vcts(const json_t *template, const json_t *claim_vcts, json_t **ret,
                         api_error *err);

/* ---- Sandbox (§2.4.4–§2.4.6) ---- */
/* The Sandbox's own rules: its expiry and its status from what a backend observed of the pod
 * (on a cluster) or the container (`asb serve`) it became. A backend first asks
 * reconcile_sandbox_expiry(); only on RECONCILE_SANDBOX_RUN does it make or observe its
 * children, fill in->observed and ask reconcile_sandbox_status(). How a Sandbox becomes a Pod or
 * a container (and its Service, PVCs, network) stays in the backend. */
#define RECONCILE_EXPIRY_MIN_REQUEUE_USEC (2 * 1000000LL) /* look again after a failure */
#define RECONCILE_EXPIRY_MARK_REQUEUE_USEC 1000LL         /* after the first pass: 1 ms */

typedef enum reconcile_sandbox_action {
    RECONCILE_SANDBOX_RUN,           /* not expired (requeue set while a shutdownTime is ahead):
                                      * make the children, then reconcile_sandbox_status() */
    RECONCILE_SANDBOX_EXPIRE_MARK,   /* first expiry pass: write status (Ready=False/
                                      * SandboxExpired, PodScheduled gone), requeue; no cleanup */
    RECONCILE_SANDBOX_EXPIRE_DELETE, /* second pass, shutdownPolicy Delete (or DeleteForeground):
                                      * remove the pod/container and owned Service, then delete
                                      * the Sandbox */
    RECONCILE_SANDBOX_EXPIRE_RETAIN, /* second pass, Retain (nil): remove the pod/container and
                                      * owned Service, then write status (only conditions) */
} reconcile_sandbox_action;

/* What the backend found (or made) this pass. All borrowed. */
typedef struct reconcile_sandbox_observed {
    bool pod;            /* an owned pod (container) exists */
    size_t owned_pods;   /* > 1: MultiplePods (nothing else is looked at) */
    const char *phase;   /* the pod's status.phase ("Pending", "Running", "Succeeded",
                          * "Failed"), or NULL; Succeeded/Failed may be given without a pod
                          * (a finished container that is gone) */
    bool pod_ready;      /* the pod's Ready condition is True (locally: sandboxd answers) */
    bool pod_frozen;     /* suspended by freezing (locally): Suspended=True/PodFrozen */
    bool pod_not_owned;  /* suspended: the pod found is not this Sandbox's (never deleted) */
    const json_t *pod_ips;       /* array of IP strings, or NULL */
    const char *node_name;       /* or NULL */
    const json_t *pod_scheduled; /* the pod's PodScheduled condition, or NULL */
    bool service;                /* a Service is tracked */
    const char *service_fqdn;    /* "<name>.<ns>.svc.<cluster domain>" while tracked */
    const char *error;           /* reconcile errors, joined: Ready=False/ReconcilerError
                                  * "Error seen: <error>" */
    const char *failure_reason;  /* the pod could not be made (locally: ImageUnpackFailed, ...):
                                  * Ready=False with this reason and failure_message */
    const char *failure_message;
    const char *not_ready_message; /* replaces the DependenciesNotReady message, or NULL */
    const char *finished_message;  /* message of Finished, or NULL: as Ready's */
} reconcile_sandbox_observed;

typedef struct reconcile_sandbox_in {
    const json_t *sandbox; /* as stored (lastTransitionTimes are kept from it) */
    int64_t now;
    reconcile_sandbox_observed observed; /* reconcile_sandbox_status() only */
    /* What differs between backends (all false on a cluster). */
    bool no_scheduling;  /* no PodScheduled condition (a local container has no scheduler) */
    bool no_services;    /* spec.service is not honoured: never "required" */
    bool ips_optional;   /* Ready without podIPs (locally sandboxd is reached on its socket) */
} reconcile_sandbox_in;

typedef struct reconcile_sandbox_out {
    reconcile_sandbox_action action;
    json_t *status;      /* the desired complete status (owned), conditions[0] is Ready; NULL
                          * for EXPIRE_DELETE */
    bool status_changed; /* status differs from the stored one and is worth a write (a change
                          * of nodeName alone waits while the Sandbox is not Ready) */
    bool ready;          /* Ready=True in status */
    int64_t requeue;     /* µs from now; 0 = none */
} reconcile_sandbox_out;

/* §2.4.6. 0 or -ENOMEM. */
int reconcile_sandbox_expiry(const reconcile_sandbox_in *in, reconcile_sandbox_out *out);
/* §2.4.4, §2.4.5: status and conditions from in->observed; action is RUN. 0 or -ENOMEM. */
int reconcile_sandbox_status(const reconcile_sandbox_in *in, reconcile_sandbox_out *out);
void reconcile_sandbox_out_done(reconcile_sandbox_out *out);
