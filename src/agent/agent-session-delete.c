/* Removing a session: its sandbox (or claim) on the control plane and its directory on the host
 * (agent-loop.h, agent_session_delete). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent-internal.h"
#include "agent/agent-loop.h"
#include "asb/asb.h"
#include "basic/fs-util.h"
#include "basic/macro.h"
#include "local/fs/local-fs.h"

/* Deletes the object `kind`/`name` of ns when it exists: 1 deleted, 0 absent, or an error. */
static int delete_if_there(asb_client *c, const char *kind, const char *ns, const char *name,
                           char **ret_message)
{
    int r = asb_object_delete(NULL, c, kind, ns, name);
    if (r == ASB_ENOTFOUND)
        return 0;
    if (r != ASB_OK)
        return agent_fail(ret_message, -EIO, "cannot delete %s \"%s\": %s", kind, name,
                          asb_error_last() ? asb_error_last()->message : asb_strerror(r));
    return 1;
}

int agent_session_delete(const agent_config *cfg, const char *name, char **ret_message)
{
    _cleanup_free_ char *dir = NULL;
    int r = agent_store_session_dir(cfg, name, &dir);
    if (r < 0)
        return agent_fail(ret_message, r, "invalid session name \"%s\"", name ? name : "");
    if (access(dir, F_OK) < 0)
        return agent_fail(ret_message, -ENOENT, "no session \"%s\" (%s)", name, dir);
    /* Held until the directory is gone: no process may open the session meanwhile. */
    _cleanup_close_ int lock = -1;
    if ((r = agent_store_lock(dir, name, &lock, ret_message)) < 0)
        return r;
    asb_client_options o = ASB_CLIENT_OPTIONS_INIT;
    o.server = cfg->server;
    o.token = cfg->token;
    o.state_dir = cfg->state_dir;
    asb_client *c = NULL;
    if ((r = asb_client_new(&c, &o)) != ASB_OK)
        return agent_fail(ret_message, -EIO, "control plane: %s",
                          asb_error_last() ? asb_error_last()->message : asb_strerror(r));
    const char *ns = cfg->ns ? cfg->ns : "default";
    /* A -pool session's claim (its sandbox goes with it), else the Sandbox named after it. */
    int claim = delete_if_there(c, "SandboxClaim", ns, name, ret_message), sandbox = 0;
    if (claim >= 0)
        sandbox = delete_if_there(c, "Sandbox", ns, name, ret_message);
    asb_client_free(c);
    if (claim < 0 || sandbox < 0)
        return claim < 0 ? claim : sandbox; /* the directory stays: nothing is lost half-way */
    if ((r = fs_rm_rf(dir)) < 0)
        return agent_fail(ret_message, r, "cannot remove %s: %s", dir, strerror(-r));
    r = agent_fail(ret_message, 0, "session \"%s\" deleted%s%s%s", name,
                   claim ? ": its SandboxClaim" : "", claim && sandbox ? " and" : sandbox ? ":" : "",
                   sandbox ? " its Sandbox" : claim ? "" : " (it had no sandbox)");
    return r < 0 ? r : 0;
}
