/* The four kinds (shared/spec/UPSTREAM.md §2.1) and the names the CLI accepts for them. Kept here
 * rather than borrowed from src/api so the library stands alone. */
#include <string.h>
#include <strings.h>

#include "libasb/libasb-internal.h"

#define CORE "agents.x-k8s.io"
#define EXT "extensions.agents.x-k8s.io"

static const asb_kind kinds[] = {
    {"Sandbox", "sandboxes", "sandbox", CORE, "v1beta1", CORE "/v1beta1"},
    {"SandboxTemplate", "sandboxtemplates", "sandboxtemplate", EXT, "v1beta1", EXT "/v1beta1"},
    {"SandboxWarmPool", "sandboxwarmpools", "sandboxwarmpool", EXT, "v1beta1", EXT "/v1beta1"},
    {"SandboxClaim", "sandboxclaims", "sandboxclaim", EXT, "v1beta1", EXT "/v1beta1"},
    /* Found by name, not counted by asb_kind_count() either: our extension (docs/snapshots.md),
     * not one of upstream's four. */
    {"SandboxSnapshot", "sandboxsnapshots", "sandboxsnapshot", EXT, "v1beta1", EXT "/v1beta1"},
    /* Found by name, but not one of the agents.x-k8s.io kinds asb_kind_count() counts: the
     * Events the controllers record (read-only). */
    {"Event", "events", "event", "events.k8s.io", "v1", "events.k8s.io/v1"},
};
#define N_AGENT_KINDS 4

/* Extra names per kind (short names and the unprefixed forms). */
static const char *const aliases[][4] = {
    {"sbx", NULL},
    {"template", "templates", NULL},
    {"warmpool", "warmpools", "swp", NULL},
    {"claim", "claims", NULL},
    {"snapshot", "snapshots", "ssnap", NULL},
    {"ev", NULL},
};

static int name_matches(const asb_kind *k, size_t idx, const char *name, size_t len)
{
    const char *names[] = {k->kind, k->plural, k->singular};
    for (size_t i = 0; i < 3; i++)
        if (strlen(names[i]) == len && strncasecmp(names[i], name, len) == 0)
            return 1;
    for (size_t i = 0; aliases[idx][i]; i++)
        if (strlen(aliases[idx][i]) == len && strncasecmp(aliases[idx][i], name, len) == 0)
            return 1;
    return 0;
}

const asb_kind *asbi_kind_find(const char *name)
{
    if (!name || !*name)
        return NULL;
    /* "sandboxes.agents.x-k8s.io": the part before the first dot, checked against the group. */
    const char *dot = strchr(name, '.');
    size_t len = dot ? (size_t)(dot - name) : strlen(name);
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        if (!name_matches(&kinds[i], i, name, len))
            continue;
        if (dot && strcasecmp(dot + 1, kinds[i].group) != 0)
            continue;
        return &kinds[i];
    }
    return NULL;
}

ASB_PUBLIC int asb_kind_lookup(const asb_kind **out, const char *name)
{
    if (!out || !name)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_kind_lookup: NULL argument");
    const asb_kind *k = asbi_kind_find(name);
    if (!k)
        return asbi_error_set(ASB_EUNKNOWNKIND, 0, NULL,
                              "the server doesn't have a resource type \"%s\"", name);
    *out = k;
    return ASB_OK;
}

ASB_PUBLIC size_t asb_kind_count(void)
{
    return N_AGENT_KINDS;
}

ASB_PUBLIC const asb_kind *asb_kind_at(size_t i)
{
    return i < asb_kind_count() ? &kinds[i] : NULL;
}
