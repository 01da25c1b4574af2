/* libasb: sandboxes claimed from a warm pool (SandboxClaim), after upstream's Go SDK (§5.1 of the
 * spec): claim, wait until Ready, use, then close (delete the claim) or disconnect (keep it and
 * attach again later, from this or another process).
 *
 * An asb_claim is used from one thread at a time. The client passed to each call is the caller's
 * (not kept). */
#ifndef ASB_CLAIM_H
#define ASB_CLAIM_H

#include "asb/client.h"
#include "asb/common.h"
#include "asb/handle.h"
#include "asb/sandbox.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct asb_claim asb_claim;

/* How the data plane (files, processes) is reached. */
#define ASB_DATA_PLANE_LOCAL 0  /* the sandbox's unix sockets under the state directory */
#define ASB_DATA_PLANE_ROUTER 1 /* the router (router_url, else asb_client_router()) */

typedef struct asb_claim_options {
    unsigned int version;        /* ASB_CLAIM_OPTIONS_VERSION */
    const char *name;            /* claim name; NULL: generateName "sandbox-claim-" */
    long ready_timeout_ms;       /* create/attach: wait this long for Ready; 0: 180000 */
    long ttl_seconds;            /* > 0: spec.lifecycle.shutdownTime = now + ttl */
    const char *shutdown_policy; /* spec.lifecycle.shutdownPolicy (Delete, DeleteForeground,
                                    Retain) when ttl_seconds is set; NULL: the server's default */
    int auto_cleanup;            /* non-zero: registered for asb_claims_cleanup_run() and the
                                    signal handler of asb_claims_cleanup_install() */
    int data_plane;              /* ASB_DATA_PLANE_LOCAL or ASB_DATA_PLANE_ROUTER */
    const char *router_url;      /* router mode: NULL means asb_client_router() */
    int no_connect;              /* non-zero: no data-plane handle (control plane only) */
    const asb_sandbox_options *sandbox_options; /* for the handle; may be NULL */
    const volatile int *cancel; /* ends the wait: ASB_ECANCELLED, the claim rolled back */
    /* Version 2: called (on the waiting thread) each time the claim's Ready condition changes
     * while create/attach waits: the claim's name and "Ready=False Reason: message" (both
     * borrowed, valid during the call). May be NULL. */
    void (*progress)(const char *claim, const char *condition, void *payload);
    void *progress_payload;
} asb_claim_options;

#define ASB_CLAIM_OPTIONS_VERSION 2
/* clang-format off */
#define ASB_CLAIM_OPTIONS_INIT \
    {ASB_CLAIM_OPTIONS_VERSION, NULL, 0, 0, NULL, 0, ASB_DATA_PLANE_LOCAL, NULL, 0, NULL, NULL, \
     NULL, NULL}
/* clang-format on */

/* Claims a sandbox from the SandboxWarmPool `pool` in ns (NULL: "default"): creates a
 * SandboxClaim (spec.warmPoolRef.name = pool, label agents.x-k8s.io/created-by=libasb,
 * annotation agents.x-k8s.io/client-first-requested-at), watches it until its Ready condition is
 * True with a sandbox bound (status.sandbox.name, else the agents.x-k8s.io/sandbox-name
 * annotation), then opens the data-plane handle. Any failure after the create -- a terminal
 * condition (InvalidMetadata, EnvVarsInjectionRejected, VolumeClaimTemplatesError, ClaimExpired,
 * SandboxExpired: ASB_ECLAIMFAILED with that reason), the claim deleted (ASB_ECLAIMFAILED),
 * ASB_ETIMEOUT (message has the last Ready condition), ASB_ECANCELLED, a handle error -- deletes
 * the claim again (rollback). opts may be NULL. *out is owned by the caller (asb_claim_close or
 * asb_claim_disconnect). */
ASB_PUBLIC int asb_claim_create(asb_claim **out, asb_client *client, const char *ns,
                                const char *pool, const asb_claim_options *opts);

/* Attaches to the existing claim `name` in ns: waits (ready_timeout_ms) until it is Ready and
 * opens the handle. opts->name, ttl_seconds and shutdown_policy are ignored. Nothing is rolled
 * back on failure (the claim is not ours). */
ASB_PUBLIC int asb_claim_attach(asb_claim **out, asb_client *client, const char *ns,
                                const char *name, const asb_claim_options *opts);

/* The claim's name, namespace and bound sandbox name. Borrowed, valid while the claim lives. */
ASB_PUBLIC const char *asb_claim_name(const asb_claim *claim);
ASB_PUBLIC const char *asb_claim_namespace(const asb_claim *claim);
ASB_PUBLIC const char *asb_claim_sandbox_name(const asb_claim *claim);

/* The bound sandbox's metadata.uid when the create's own answer named it (asb serve adopted a
 * Ready warm pool member in the create), else NULL. Borrowed, valid while the claim lives. */
ASB_PUBLIC const char *asb_claim_sandbox_uid(const asb_claim *claim);

/* Microseconds from just before the create (attach: the attach call) until Ready was seen. */
ASB_PUBLIC long long asb_claim_ready_usec(const asb_claim *claim);

/* The data-plane handle (borrowed; NULL with no_connect). asb_claim_handle() wraps the same
 * sandbox in the replaceable asb_handle interface. */
ASB_PUBLIC asb_sandbox *asb_claim_sandbox(asb_claim *claim);
ASB_PUBLIC asb_handle *asb_claim_handle(asb_claim *claim);

/* Sets the claim's spec.lifecycle.shutdownTime to now + ttl_seconds (merge patch; a policy
 * already set is kept, else shutdown_policy when non-NULL). */
ASB_PUBLIC int asb_claim_extend(asb_claim *claim, asb_client *client, long ttl_seconds,
                                const char *shutdown_policy);

/* The same for any object with a lifecycle: kind "Sandbox" patches spec.shutdownTime (and
 * spec.shutdownPolicy), "SandboxClaim" spec.lifecycle.{shutdownTime,shutdownPolicy}. */
ASB_PUBLIC int asb_lifecycle_extend(asb_client *client, const char *kind, const char *ns,
                                    const char *name, long ttl_seconds,
                                    const char *shutdown_policy);

/* Frees the handle and the claim object; the SandboxClaim (and its sandbox) stay. Accepts NULL. */
ASB_PUBLIC void asb_claim_disconnect(asb_claim *claim);

/* Deletes the SandboxClaim (404 counts as success), then frees as asb_claim_disconnect(). The
 * claim is freed even when the delete fails (the error is returned). Accepts NULL (ASB_OK). */
ASB_PUBLIC int asb_claim_close(asb_claim *claim, asb_client *client);

/* ---- Auto-cleanup of owned claims (claims created with auto_cleanup) ---- */

/* Installs SIGINT and SIGTERM handlers. The handler only writes the signal number to a pipe
 * (async-signal-safe); a cleanup thread then deletes every registered claim (with its own
 * clients, bounded by about 10 s in all), restores the previous disposition and re-raises the
 * signal so the process still ends as it would have. Idempotent. Returns ASB_OK or ASB_ERROR. */
ASB_PUBLIC int asb_claims_cleanup_install(void);

/* Restores the previous handlers and stops the cleanup thread. The registry is kept. */
ASB_PUBLIC void asb_claims_cleanup_uninstall(void);

/* Deletes every registered claim now (e.g. from an atexit handler); returns how many deletes
 * failed (0: all gone). */
ASB_PUBLIC int asb_claims_cleanup_run(void);

#ifdef __cplusplus
}
#endif
#endif
