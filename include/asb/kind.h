/* libasb: the four object kinds and the names people use for them. */
#ifndef ASB_KIND_H
#define ASB_KIND_H

#include "asb/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One kind of object. All strings are static. */
typedef struct asb_kind {
    const char *kind;        /* "Sandbox" */
    const char *plural;      /* "sandboxes" (the REST resource) */
    const char *singular;    /* "sandbox" */
    const char *group;       /* "agents.x-k8s.io" */
    const char *version;     /* "v1beta1" */
    const char *api_version; /* "agents.x-k8s.io/v1beta1" */
} asb_kind;

/* Finds a kind by any name a person would type: the Kind ("Sandbox", any case), the singular,
 * plural and short names (sandbox, sandboxes, sbx; sandboxtemplate(s), template(s);
 * sandboxwarmpool(s), warmpool(s), swp; sandboxclaim(s), claim(s); event(s), ev for the
 * events.k8s.io/v1 Events `asb serve` records), each optionally qualified with its group
 * ("sandboxes.agents.x-k8s.io").
 * *out is borrowed (static). Returns ASB_OK, ASB_EINVAL (NULL) or ASB_EUNKNOWNKIND. */
ASB_PUBLIC int asb_kind_lookup(const asb_kind **out, const char *name);

/* Number of agents.x-k8s.io kinds and the i-th one (NULL when out of range), for listing them
 * (Event is found by asb_kind_lookup only). Borrowed. */
ASB_PUBLIC size_t asb_kind_count(void);
ASB_PUBLIC const asb_kind *asb_kind_at(size_t i);

#ifdef __cplusplus
}
#endif
#endif
