/* `asb mcp` tools on snapshots: snapshot_sandbox (capture a sandbox's files as a SandboxSnapshot)
 * and fork_sandbox (new sandboxes that start from one). Both resolve a claim name to its Sandbox
 * like the other tools, and word every failure so that an agent knows what to do next. */
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "mcp/asb-mcp-tools.h"

#define MAX_FORKS 20 /* per call: each fork is a whole sandbox */

static const char *snap_name(const json_t *snap)
{
    return json_string_value(json_object_get(json_object_get(snap, "metadata"), "name"));
}

/* The Ready condition's reason and message of a snapshot, borrowed; "" when absent. */
static void ready_reason(const json_t *snap, const char **ret_reason, const char **ret_message)
{
    size_t i;
    json_t *c;
    *ret_reason = *ret_message = "";
    json_array_foreach (json_object_get(json_object_get(snap, "status"), "conditions"), i, c)
        if (json_is_string(json_object_get(c, "type")) &&
            strcmp(json_string_value(json_object_get(c, "type")), "Ready") == 0) {
            *ret_reason = json_string_value(json_object_get(c, "reason")) ?: "";
            *ret_message = json_string_value(json_object_get(c, "message")) ?: "";
        }
}

/* The structured result for a snapshot (as created, or Ready). NULL when out of memory. */
static json_t *snapshot_result(const json_t *snap, const char *sandbox, const char *ns)
{
    const json_t *st = json_object_get(snap, "status");
    const char *reason, *message;
    ready_reason(snap, &reason, &message);
    json_t *r =
        json_pack("{s:s,s:s,s:s,s:b}", "snapshot_name", snap_name(snap) ?: "", "sandbox_name",
                  sandbox, "namespace", ns, "ready", strcmp(reason, "Captured") == 0);
    if (!r)
        return NULL;
    static const struct {
        const char *from, *to;
    } fields[] = {{"files", "files"},
                  {"size", "size_bytes"},
                  {"storedBytes", "stored_bytes"},
                  {"pauseMicroseconds", "pause_microseconds"},
                  {"capturedAt", "captured_at"}};
    for (size_t i = 0; i < ELEMENTSOF(fields); i++) {
        json_t *v = json_object_get(st, fields[i].from);
        if (v && !json_is_null(v) && json_object_set(r, fields[i].to, v) < 0) {
            json_decref(r);
            return NULL;
        }
    }
    return r;
}

/* Why asb_snapshot_create (or the wait for a named snapshot) failed, for the agent. */
static char *snapshot_failure(int r, const char *what, const char *sandbox, const char *ns,
                              long long timeout)
{
    const asb_error *e = asb_error_last();
    const char *msg = e && e->message && *e->message ? e->message : asb_strerror(r);
    if (r == ASB_EEXISTS)
        return strdup_printf("a snapshot named \"%s\" already exists in namespace \"%s\": choose "
                             "another name, or omit name to get a generated one",
                             what, ns);
    if (r == ASB_EINVALID)
        return strdup_printf("cannot snapshot sandbox \"%s\" in namespace \"%s\": %s (it does not "
                             "exist or is being deleted)",
                             sandbox, ns, msg);
    if (r == ASB_ETIMEOUT)
        return strdup_printf("the snapshot of \"%s\" was not ready within %lld s (%s); it is still "
                             "being captured: retry with a larger timeout",
                             sandbox, timeout, msg);
    if (r == ASB_ECANCELLED)
        return strdup("cancelled while waiting for the snapshot (it is still being captured)");
    return strdup_printf("snapshot of sandbox \"%s\" failed: %s", sandbox, msg);
}

/* Checks the common arguments and opens a client; *ret_sandbox (owned) is the Sandbox that the
 * claim or Sandbox name `sandbox_claim_name` designates, NULL when the name is absent and
 * !required. false with out->error set on failure. */
static bool prepare(const json_t *args, tool_out *out, bool required, asb_client **ret_client,
                    char **ret_sandbox)
{
    const char *name = mcp_arg_str(args, "sandbox_claim_name", NULL), *ns = mcp_arg_ns(args);
    if (!name && required) {
        out->error = strdup("sandbox_claim_name is required: the name create_sandbox returned, "
                            "or a Sandbox name");
        return false;
    }
    if (mcp_client_new(ret_client, &out->error) < 0)
        return false;
    if (name && mcp_sandbox_resolve(*ret_client, ns, name, ret_sandbox, &out->error) < 0)
        return false;
    return true;
}

void mcp_tool_snapshot(mcp_call *call, const json_t *args, tool_out *out)
{
    const char *ns = mcp_arg_ns(args), *name = mcp_arg_str(args, "name", NULL);
    long long timeout = mcp_arg_int(args, "timeout", 300, 1, 86400);
    json_t *wait_arg = json_object_get(args, "wait");
    if (timeout < 0 || (wait_arg && !json_is_boolean(wait_arg))) {
        out->error = strdup("timeout must be a positive number of seconds and wait a boolean");
        return;
    }
    _cleanup_(asb_client_freep) asb_client *cl = NULL;
    _cleanup_free_ char *sandbox = NULL, *text = NULL;
    if (!prepare(args, out, true, &cl, &sandbox))
        return;
    asb_snapshot_options o = ASB_SNAPSHOT_OPTIONS_INIT;
    o.name = name;
    o.wait_ms = wait_arg && json_is_false(wait_arg) ? 0 : (long)timeout * 1000;
    o.cancel = &call->cancel;
    int r = asb_snapshot_create(&text, cl, ns, sandbox, &o);
    if (r != ASB_OK) {
        out->error = snapshot_failure(r, name ? name : "", sandbox, ns, timeout);
        return;
    }
    json_t *snap = json_loads(text, 0, NULL);
    out->structured = snap ? snapshot_result(snap, sandbox, ns) : NULL;
    json_decref(snap);
}

/* The snapshot to fork from: the named one when Ready, or a new one of `sandbox` (waited for).
 * *ret_name (owned) is its name. false with out->error set. */
static bool fork_source(mcp_call *call, asb_client *cl, const char *ns, const char *sandbox,
                        const char *snapshot, long long timeout, tool_out *out, char **ret_name)
{
    _cleanup_free_ char *text = NULL;
    int r;
    if (snapshot) {
        r = asb_snapshot_get(&text, cl, ns, snapshot);
        if (r == ASB_ENOTFOUND) {
            out->error = strdup_printf("unknown snapshot \"%s\" in namespace \"%s\": take one with "
                                       "snapshot_sandbox, or omit snapshot to fork the sandbox as "
                                       "it is now",
                                       snapshot, ns);
            return false;
        }
        if (r != ASB_OK) {
            out->error = mcp_error_text(snapshot);
            return false;
        }
        json_t *snap = json_loads(text, 0, NULL);
        const char *reason, *message;
        ready_reason(snap, &reason, &message);
        bool final = strcmp(reason, "SandboxNotFound") == 0 || strcmp(reason, "CaptureFailed") == 0;
        if (final)
            out->error = strdup_printf("snapshot \"%s\" failed (%s: %s) and cannot be forked; "
                                       "take a new one with snapshot_sandbox",
                                       snapshot, reason, message);
        json_decref(snap);
        if (final)
            return false;
        *ret_name = strdup(snapshot);
        return *ret_name != NULL;
    }
    asb_snapshot_options o = ASB_SNAPSHOT_OPTIONS_INIT;
    o.wait_ms = (long)timeout * 1000;
    o.cancel = &call->cancel;
    r = asb_snapshot_create(&text, cl, ns, sandbox, &o);
    if (r != ASB_OK) {
        out->error = snapshot_failure(r, "", sandbox, ns, timeout);
        return false;
    }
    json_t *snap = json_loads(text, 0, NULL);
    *ret_name = snap_name(snap) ? strdup(snap_name(snap)) : NULL;
    json_decref(snap);
    return *ret_name != NULL;
}

static char *fork_failure(int r, const char *snapshot, long long timeout)
{
    const asb_error *e = asb_error_last();
    const char *msg = e && e->message && *e->message ? e->message : asb_strerror(r);
    if (r == ASB_EEXISTS)
        return strdup_printf("a sandbox with the fork's name already exists (%s): choose another "
                             "name, or omit name to get generated ones; snapshot \"%s\" is kept "
                             "for another try",
                             msg, snapshot);
    if (r == ASB_ETIMEOUT)
        return strdup_printf("the forks were not ready within %lld s (%s) and were deleted; "
                             "retry with a larger sandbox_ready_timeout and snapshot \"%s\"",
                             timeout, msg, snapshot);
    if (r == ASB_ECANCELLED)
        return strdup_printf("fork_sandbox cancelled; the forks were deleted, snapshot \"%s\" "
                             "is kept",
                             snapshot);
    return strdup_printf("fork_sandbox failed: %s", msg);
}

void mcp_tool_fork(mcp_call *call, const json_t *args, tool_out *out)
{
    const char *ns = mcp_arg_ns(args), *snapshot = mcp_arg_str(args, "snapshot", NULL),
               *name = mcp_arg_str(args, "name", NULL);
    long long count = mcp_arg_int(args, "count", 1, 1, MAX_FORKS);
    long long timeout = mcp_arg_int(args, "sandbox_ready_timeout", 180, 1, 86400);
    if (count < 0 || timeout < 0) {
        out->error = strdup_printf("count must be an integer from 1 to %d and "
                                   "sandbox_ready_timeout a positive number of seconds",
                                   MAX_FORKS);
        return;
    }
    if (!snapshot && !mcp_arg_str(args, "sandbox_claim_name", NULL)) {
        out->error = strdup("give sandbox_claim_name (the sandbox to fork as it is now) or "
                            "snapshot (a snapshot_sandbox result to fork from)");
        return;
    }
    _cleanup_(asb_client_freep) asb_client *cl = NULL;
    _cleanup_free_ char *sandbox = NULL, *snap = NULL;
    if (!prepare(args, out, false, &cl, &sandbox) ||
        !fork_source(call, cl, ns, sandbox, snapshot, timeout, out, &snap))
        return;
    asb_fork_options o = ASB_FORK_OPTIONS_INIT;
    o.count = (unsigned)count;
    o.name = name;
    o.snapshot = snap;
    o.own_snapshot = !snapshot; /* made here for these forks: it goes with the last of them */
    o.ready_timeout_ms = (long)timeout * 1000;
    o.cancel = &call->cancel;
    char **names = NULL;
    size_t n = 0;
    int r = asb_fork(&names, &n, cl, ns, sandbox, &o);
    if (r != ASB_OK) {
        out->error = fork_failure(r, snap, timeout);
        return;
    }
    json_t *list = json_array();
    for (size_t i = 0; i < n; i++) {
        if (list && json_array_append_new(list, json_string(names[i])) < 0)
            json_decref(list), list = NULL;
        asb_free(names[i]);
    }
    asb_free(names);
    out->structured = list ? json_pack("{s:s,s:o,s:s}", "snapshot_name", snap, "sandbox_names",
                                       list, "namespace", ns)
                           : NULL;
}
