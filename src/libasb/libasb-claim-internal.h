/* libasb claim internals (hidden): the pure helpers the unit tests reach and the registry of
 * owned claims behind the auto-cleanup. */
#pragma once

#include <jansson.h>
#include <stddef.h>

#include "asb/client.h"

/* UTC now + add_seconds as RFC3339 ("...Z"), with nanoseconds when nanos is set. */
void asbi_rfc3339(char out[40], long long add_seconds, int nanos);
/* Whether a claim Ready reason is terminal (§2.8: SDKs stop waiting). */
int asbi_claim_reason_terminal(const char *reason);
/* The bound sandbox of a claim object: status.sandbox.name, else the
 * agents.x-k8s.io/sandbox-name annotation; NULL when neither. Borrowed from claim. */
const char *asbi_claim_bound_sandbox(const json_t *claim);
/* 0: not ready yet; 1: Ready=True with a bound sandbox (*ret_sandbox, owned, when non-NULL);
 * ASB_ECLAIMFAILED (error set, reason = the condition's) on a terminal reason. `last` (may be
 * NULL) gets a one-line summary of the Ready condition. */
int asbi_claim_check(const json_t *claim, char **ret_sandbox, char *last, size_t last_size);
/* The Asb-Claim-Sandbox header of a claim's create (shared/claim-header.h): 1 with the bound
 * sandbox's name and uid (owned), 0 when value is NULL or not of that shape, -ENOMEM. */
int asbi_claim_parse_bound(const char *value, char **ret_name, char **ret_uid);

/* Registry of claims to delete on asb_claims_cleanup_run() or a signal (thread-safe). */
int asbi_claims_register(asb_client *client, const char *ns, const char *name);
void asbi_claims_unregister(const char *ns, const char *name);
/* Number of registered claims. */
size_t asbi_claims_registered(void);
/* A create with auto_cleanup is in flight from before its POST until it is registered (or
 * failed): asb_claims_cleanup_run waits for those first (bounded), so a signal that arrives
 * while the server answers still deletes the claim. */
void asbi_claims_create_begin(void);
void asbi_claims_create_end(void);
