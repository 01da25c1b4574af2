/* -fork-from SEED: the first sandbox of a new session as a copy of session SEED's sandbox.
 * The copy is a SandboxSnapshot of the seed's sandbox and a Sandbox started from it (asb_fork:
 * the seed's pod template and volumes, every container's image `snapshot:NAME`), so the fork
 * has the seed's root filesystem, workspace and home volume as they are now. The snapshot is
 * deleted once the fork is Ready: a Ready sandbox holds its own copy (docs/snapshots.md). The
 * seed is only read: its sandbox keeps running and its directory (history, fs/ backups) is not
 * touched. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <asb/client.h>
#include <asb/snapshot.h>

#include "agent/agent-internal.h"
#include "basic/macro.h"

#define FORK_READY_TIMEOUT_MS (180L * 1000)

static int fork_fail(api_error *err, int code, const char *what, const char *seed)
{
    const asb_error *e = asb_error_last();
    const char *m = e && e->message && *e->message ? e->message : asb_strerror(code);
    int r = code == ASB_ECANCELLED ? -ECANCELED
            : code == ASB_ETIMEOUT ? -ETIMEDOUT
            : code == ASB_EEXISTS  ? -EEXIST
            : code == ASB_ENOMEM   ? -ENOMEM
                                   : -EIO;
    return api_error_set_errno(err, r, "fork of session %s: %s: %s", seed, what, m);
}

/* The Sandbox behind session `seed`: its SandboxClaim's sandbox (a -pool session), else the
 * Sandbox named like the session. *ret owned; -ENOENT when there is none. */
static int seed_sandbox(asb_client *c, const char *ns, const char *seed, char **ret)
{
    _cleanup_free_ char *text = NULL;
    if (asb_object_get(&text, c, "SandboxClaim", ns, seed) == ASB_OK) {
        json_t *o = json_loads(text, 0, NULL);
        const char *sn = json_string_value(
            json_object_get(json_object_get(json_object_get(o, "status"), "sandbox"), "name"));
        *ret = sn && *sn ? strdup(sn) : NULL;
        json_decref(o);
        return *ret ? 0 : -ENOENT;
    }
    if (asb_object_get(NULL, c, "Sandbox", ns, seed) != ASB_OK)
        return -ENOENT;
    *ret = strdup(seed);
    return *ret ? 0 : -ENOMEM;
}

/* The fork is the session's sandbox from now on: collected when idle, like one it created. */
static int adopt(asb_client *c, const char *ns, const char *name, const char *when)
{
    json_t *p =
        json_pack("{s:{s:{s:s}},s:{s:s,s:s}}", "metadata", "labels", "app.kubernetes.io/managed-by",
                  "sandboxed-tools", "spec", "shutdownTime", when, "shutdownPolicy", "Delete");
    char *s = p ? json_dumps(p, JSON_COMPACT) : NULL;
    json_decref(p);
    if (!s)
        return ASB_ENOMEM;
    int r = asb_object_patch(NULL, c, "Sandbox", ns, name, s, 0);
    free(s);
    return r;
}

int agent_fork_sandbox(asb_client *c, const char *ns, const char *seed, const char *name,
                       const char *when, const volatile int *cancel, api_error *err)
{
    _cleanup_free_ char *source = NULL, *snap_text = NULL;
    int r = seed_sandbox(c, ns, seed, &source);
    if (r < 0)
        return r;
    asb_snapshot_options so = ASB_SNAPSHOT_OPTIONS_INIT;
    so.wait_ms = FORK_READY_TIMEOUT_MS;
    so.cancel = cancel;
    r = asb_snapshot_create(&snap_text, c, ns, source, &so);
    if (r == ASB_EINVALID)
        return -ENOENT; /* deleted (or being deleted) since we looked */
    if (r != ASB_OK)
        return fork_fail(err, r, "snapshot", seed);
    json_t *snap = json_loads(snap_text, 0, NULL);
    const char *sn = json_string_value(json_object_get(json_object_get(snap, "metadata"), "name"));
    _cleanup_free_ char *snap_name = sn ? strdup(sn) : NULL;
    json_decref(snap);
    if (!snap_name)
        return -ENOMEM;
    asb_fork_options fo = ASB_FORK_OPTIONS_INIT;
    fo.name = name;
    fo.snapshot = snap_name;
    fo.ready_timeout_ms = FORK_READY_TIMEOUT_MS;
    fo.cancel = cancel;
    char **names = NULL;
    size_t n = 0;
    r = asb_fork(&names, &n, c, ns, source, &fo);
    if (r == ASB_OK) {
        for (size_t i = 0; i < n; i++)
            asb_free(names[i]);
        asb_free(names);
        r = adopt(c, ns, name, when);
        if (r != ASB_OK)
            r = fork_fail(err, r, "set the fork's shutdownTime", seed);
    } else
        r = fork_fail(err, r, "start the fork", seed);
    /* Not needed any more either way: the fork was seeded, or it is gone. */
    (void)asb_snapshot_delete(c, ns, snap_name);
    return r;
}
