/* libasb: SandboxSnapshots and forks (docs/snapshots.md, docs/libasb.md). A snapshot captures a
 * Sandbox's workspace and volumes; a fork is a new Sandbox whose image is `snapshot:NAME`, built
 * from what the snapshot recorded of its source (pod template, volume claim templates), so the
 * source need not exist any more. Control plane only: these calls work against any server that
 * serves the SandboxSnapshot kind. The client passed in is the caller's (not kept). */
#ifndef ASB_SNAPSHOT_H
#define ASB_SNAPSHOT_H

#include <stddef.h>

#include "asb/client.h"
#include "asb/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct asb_snapshot_options {
    unsigned int version;       /* ASB_SNAPSHOT_OPTIONS_VERSION */
    const char *name;           /* snapshot name; NULL: generateName "<sandbox>-snap-" */
    long wait_ms;               /* > 0: wait this long for Ready; 0: return once created */
    const volatile int *cancel; /* ends the wait with ASB_ECANCELLED (the snapshot stays) */
} asb_snapshot_options;

#define ASB_SNAPSHOT_OPTIONS_VERSION 1
/* clang-format off */
#define ASB_SNAPSHOT_OPTIONS_INIT {ASB_SNAPSHOT_OPTIONS_VERSION, NULL, 0, NULL}
/* clang-format on */

/* Snapshots the Sandbox `sandbox` of ns (NULL: "default"). *out (owned, asb_free; may be NULL)
 * is the SandboxSnapshot as JSON: as created, or as Ready when opts->wait_ms > 0. Errors:
 * ASB_EINVALID (no such Sandbox), ASB_EEXISTS (name taken), ASB_ETIMEOUT, ASB_ECANCELLED, or
 * ASB_ERROR with the Ready reason (SandboxNotFound, CaptureFailed) in asb_error_last(). opts
 * may be NULL. */
ASB_PUBLIC int asb_snapshot_create(char **out, asb_client *client, const char *ns,
                                   const char *sandbox, const asb_snapshot_options *opts);

/* One SandboxSnapshot, or the SandboxSnapshotList of ns, as JSON (*out owned, asb_free). */
ASB_PUBLIC int asb_snapshot_get(char **out, asb_client *client, const char *ns, const char *name);
ASB_PUBLIC int asb_snapshot_list(char **out, asb_client *client, const char *ns);

/* Deletes a SandboxSnapshot. ASB_ECONFLICT while a SandboxTemplate or a Sandbox that has not
 * started from it yet needs it (the message names which). */
ASB_PUBLIC int asb_snapshot_delete(asb_client *client, const char *ns, const char *name);

typedef struct asb_fork_options {
    unsigned int version;       /* ASB_FORK_OPTIONS_VERSION */
    unsigned int count;         /* sandboxes to make; 0: 1 */
    const char *name;           /* count 1: the fork's name; more: NAME-1 .. NAME-count;
                                   NULL: generateName "<sandbox>-fork-" */
    const char *snapshot;       /* fork from this existing snapshot; NULL: take a new one */
    long ready_timeout_ms;      /* wait for the snapshot and every fork to be Ready; 0: 180000 */
    const volatile int *cancel; /* ends the wait with ASB_ECANCELLED, forks rolled back */
    /* version 2: `snapshot` was made for these forks only: it is owned by them (deleted with
     * the last one), as the snapshot asb_fork takes itself always is. */
    int own_snapshot;
} asb_fork_options;

#define ASB_FORK_OPTIONS_VERSION 2
/* clang-format off */
#define ASB_FORK_OPTIONS_INIT {ASB_FORK_OPTIONS_VERSION, 0, NULL, NULL, 0, NULL, 0}
/* clang-format on */

/* Forks the Sandbox `sandbox` of ns: snapshots it (opts->snapshot: uses that one; then
 * `sandbox` may be NULL), creates count Sandboxes from the snapshot and waits until all are
 * Ready. Each fork carries its lineage: annotations agents.x-k8s.io/forked-from (the source
 * Sandbox) and agents.x-k8s.io/fork-snapshot, the label agents.x-k8s.io/fork-of (the source,
 * when it fits a label value); a source that a SandboxClaim controls passes on the claim's
 * lifecycle (spec.shutdownTime, shutdownPolicy Delete unless the claim's is Retain) and an
 * ownerReference to the claim, so forks never outlive it. A snapshot taken here (or given with
 * own_snapshot) gets the forks as its ownerReferences and goes with the last of them. *out_names (owned: free each with asb_free, then the array) gets their names, in
 * order, and *out_n their number. On failure the forks made so far are deleted; the snapshot
 * stays (its name is in the error message). opts may be NULL. */
ASB_PUBLIC int asb_fork(char ***out_names, size_t *out_n, asb_client *client, const char *ns,
                        const char *sandbox, const asb_fork_options *opts);

#ifdef __cplusplus
}
#endif
#endif
