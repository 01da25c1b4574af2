/* local/controller: templates, warm pools, claims and owner garbage collection: the reconcile
 * core (src/reconcile) run over the store, its plans written back through the store. It never
 * touches the host: sandboxes are the reconciler's. Includes from other folders of src/local:
 * store, metrics, reconcile (finalizers, claim activity); never from a folder above it
 * (docs/architecture.md, "src/local in rooms"). */
/* The template / warm pool / claim controller of `asb serve`: one thread woken by the store's
 * watch window on every commit, that runs the reconcile core (src/reconcile) over the stored
 * objects and executes its plans through the store, plus garbage collection of objects whose
 * owner is gone (ownerReferences) and foreground deletion. docs/claims.md. */
#pragma once

#include "basic/time-util.h"
#include "local/store/local-store.h"

typedef struct local_controller local_controller;

typedef struct local_controller_options {
    local_store *store;        /* borrowed; must outlive the controller */
    usec_t readiness_grace;    /* warm pool members not Ready after this are replaced; 0 = 5 min */
    const char *label_domains; /* additionalPodMetadata label domains, comma separated; NULL =
                                * sandbox.users.io */
} local_controller_options;

/* Starts the thread. *ret owned (local_controller_stop). */
int local_controller_start(const local_controller_options *o, local_controller **ret);
/* A new SandboxClaim adopts a Ready member of its warm pool in its own create, exactly as the
 * controller's next pass would (the same core, the same writes and Event), so the client's 201
 * already names the sandbox. In two steps, so that the store's lock is held only for the writes:
 *  - plan, before the claim is created (it has its name and uid): picks the member from the
 *    controller's cache and reserves it against concurrent creates; NULL when there is none, and
 *    the controller serves the claim as before;
 *  - adopt, inside the store batch of the claim's create (one transaction, one sync): returns 1
 *    with *ret_claim the claim as stored (owned), else 0 (the member changed meanwhile: nothing
 *    is written). It frees the plan;
 *  - drop frees a plan whose create failed. */
typedef struct local_claim_adoption local_claim_adoption;
local_claim_adoption *local_controller_plan_adoption(local_controller *c, const json_t *claim);
int local_controller_adopt_planned(local_controller *c, local_claim_adoption *a,
                                   json_t **ret_claim);
void local_controller_drop_adoption(local_controller *c, local_claim_adoption *a);
/* Joins the thread (call local_store_shutdown first) and frees. */
local_controller *local_controller_stop(local_controller *c);
