/* The one table of a SandboxClaim's Ready=False reasons that end a wait: the controller's
 * terminal reasons (upstream §2.8: it stops reconciling the claim) and the missing template or
 * pool, on which the controller keeps looking (it may be created later) but a client waiting for
 * the claim stops at once, as upstream's SDKs do (UPSTREAM.md §5.2). Used by the reconciler,
 * libasb and the agent. Header only: libasb uses it without linking src/shared. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

static const struct claim_reason_info {
    const char *reason;
    bool terminal; /* the controller stops; false: only a waiting client stops */
} claim_reason_table[] = {
    {"InvalidMetadata", true},
    {"EnvVarsInjectionRejected", true},
    {"VolumeClaimTemplatesError", true},
    {"ClaimExpired", true},
    {"SandboxExpired", true},
    {"WarmPoolNotFound", false},
    {"TemplateNotFound", false},
};

static inline const struct claim_reason_info *claim_reason_find(const char *reason)
{
    for (size_t i = 0; reason && i < sizeof(claim_reason_table) / sizeof(claim_reason_table[0]);
         i++)
        if (strcmp(reason, claim_reason_table[i].reason) == 0)
            return &claim_reason_table[i];
    return NULL;
}

/* True for a reason the controller never leaves (NULL: false). */
static inline bool claim_reason_terminal(const char *reason)
{
    const struct claim_reason_info *i = claim_reason_find(reason);
    return i && i->terminal;
}

/* True for a reason on which a client waiting for the claim to be Ready stops (NULL: false). */
static inline bool claim_reason_stops_wait(const char *reason)
{
    return claim_reason_find(reason) != NULL;
}
