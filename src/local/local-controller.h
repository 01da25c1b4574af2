/* The template / warm pool / claim controller of `asb serve`: one thread woken by the store's
 * watch window on every commit, that runs the reconcile core (src/reconcile) over the stored
 * objects and executes its plans through the store, plus garbage collection of objects whose
 * owner is gone (ownerReferences) and foreground deletion. docs/claims.md. */
#pragma once

#include "basic/time-util.h"
#include "local/local-store.h"

typedef struct local_controller local_controller;

typedef struct local_controller_options {
    local_store *store;        /* borrowed; must outlive the controller */
    usec_t readiness_grace;    /* warm pool members not Ready after this are replaced; 0 = 5 min */
    const char *label_domains; /* additionalPodMetadata label domains, comma separated; NULL =
                                * sandbox.users.io */
} local_controller_options;

/* Starts the thread. *ret owned (local_controller_stop). */
int local_controller_start(const local_controller_options *o, local_controller **ret);
/* For the API server, inside the store batch of a new SandboxClaim's create (so in the same
 * transaction, one commit and one sync): when the claim's warm pool has a Ready member, the claim
 * adopts it now, exactly as the controller's next pass would (the same core, the same writes and
 * Event), so the client's 201 already says Ready and names the sandbox. Otherwise nothing is
 * written and the controller serves the claim as before. Returns 1 when adopted, with *ret_claim the claim as stored (owned), else 0. */
int local_controller_adopt_created_claim(local_controller *c, const json_t *claim,
                                         json_t **ret_claim);
/* Joins the thread (call local_store_shutdown first) and frees. */
local_controller *local_controller_stop(local_controller *c);
