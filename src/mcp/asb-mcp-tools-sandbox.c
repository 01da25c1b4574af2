/* `asb mcp` tools on whole sandboxes: create_sandbox (claim from a warm pool), delete_sandbox,
 * and execute_command (sh -c, output streamed as progress, cancellation kills the process). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "basic/buf.h"
#include "basic/time-util.h"
#include "mcp/asb-mcp-tools.h"

/* A JSON object of strings (labels, annotations), or absent. false when of another shape. */
static bool string_map_ok(const json_t *v)
{
    if (!v || json_is_null(v))
        return true;
    if (!json_is_object(v))
        return false;
    const char *k;
    json_t *x;
    json_object_foreach ((json_t *)v, k, x)
        if (!json_is_string(x))
            return false;
    return true;
}

static void rfc3339_after(char out[40], long long seconds)
{
    time_t t = time(NULL) + seconds;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 40, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* The SandboxClaim to create (asb_claim_create has no labels or pod metadata to offer). */
static char *claim_manifest(const char *pool, const json_t *args, long long ttl)
{
    json_t *labels = json_object_get(args, "labels");
    /* A copy: the caller's arguments are not ours to add labels to. */
    json_t *md = json_pack("{s:s,s:o}", "generateName", "sandbox-claim-", "labels",
                           json_is_object(labels) ? json_deep_copy(labels) : json_object());
    json_t *spec = json_pack("{s:{s:s}}", "warmPoolRef", "name", pool);
    json_t *obj =
        json_pack("{s:s,s:s,s:o*,s:o*}", "apiVersion", "extensions.agents.x-k8s.io/v1beta1", "kind",
                  "SandboxClaim", "metadata", md, "spec", spec);
    if (!obj || !md || !spec) {
        json_decref(obj);
        return NULL;
    }
    json_object_set_new(json_object_get(md, "labels"), "agents.x-k8s.io/created-by",
                        json_string("asb-mcp"));
    if (ttl > 0) {
        char when[40];
        rfc3339_after(when, ttl);
        json_object_set_new(
            spec, "lifecycle",
            json_pack("{s:s,s:s}", "shutdownTime", when, "shutdownPolicy", "Delete"));
    }
    json_t *pl = json_object_get(args, "pod_labels"),
           *pa = json_object_get(args, "pod_annotations");
    if (json_is_object(pl) || json_is_object(pa)) {
        json_t *apm = json_object();
        if (apm && json_is_object(pl))
            json_object_set(apm, "labels", pl);
        if (apm && json_is_object(pa))
            json_object_set(apm, "annotations", pa);
        json_object_set_new(spec, "additionalPodMetadata", apm);
    }
    char *s = json_dumps(obj, JSON_COMPACT);
    json_decref(obj);
    return s;
}

/* Why the claim did not become ready, for the agent. */
static char *claim_failure(int r, const char *claim, const char *pool, long long timeout)
{
    const asb_error *e = asb_error_last();
    const char *msg = e && e->message && *e->message ? e->message : asb_strerror(r);
    if (r == ASB_ETIMEOUT)
        return strdup_printf("sandbox claim %s from warm pool \"%s\" was not ready within %lld s: the "
                         "pool had no ready sandbox and the cold start took longer (%s). The "
                         "claim was deleted; retry with a larger sandbox_ready_timeout, or wait "
                         "for the pool to refill",
                         claim, pool, timeout, msg);
    if (r == ASB_ECANCELLED)
        return strdup_printf("create_sandbox cancelled; claim %s was deleted", claim);
    return strdup_printf("sandbox claim %s from warm pool \"%s\" failed: %s (the claim was deleted)",
                     claim, pool, msg);
}

/* Tells a host that asked for progress what the claim waits for: a warm sandbox, or (the pool
 * has none ready) a cold start, which takes longer. */
static void report_wait(mcp_call *call, const char *pool_text, const char *claim, const char *pool,
                        long long timeout)
{
    if (!call->progress_token || !call->notify)
        return;
    json_t *pj = json_loads(pool_text, 0, NULL);
    json_int_t ready =
        json_integer_value(json_object_get(json_object_get(pj, "status"), "readyReplicas"));
    json_decref(pj);
    _cleanup_free_ char *msg =
        ready > 0
            ? strdup_printf("claim %s created; taking a warm sandbox from pool \"%s\"", claim, pool)
            : strdup_printf("claim %s created; pool \"%s\" has no ready sandbox, so one is being "
                        "started (cold path; waiting up to %lld s)",
                        claim, pool, timeout);
    json_t *n =
        msg ? jsonrpc_notification("notifications/progress",
                                   json_pack("{s:O,s:i,s:s}", "progressToken", call->progress_token,
                                             "progress", 0, "message", msg))
            : NULL;
    if (n)
        (void)call->notify(call, n);
}

void mcp_tool_create(mcp_call *call, const json_t *args, tool_out *out)
{
    const char *pool = mcp_arg_str(args, "warmpool", NULL), *ns = mcp_arg_ns(args);
    long long timeout = mcp_arg_int(args, "sandbox_ready_timeout", 180, 1, 86400);
    json_t *ttl_arg = json_object_get(args, "shutdown_after_seconds");
    long long ttl = ttl_arg && json_is_null(ttl_arg)
                        ? 0
                        : mcp_arg_int(args, "shutdown_after_seconds", 300, 1, 10LL * 365 * 86400);
    if (!pool) {
        out->error = strdup("warmpool is required: the name of a SandboxWarmPool");
        return;
    }
    if (timeout < 0 || ttl < 0) {
        out->error = strdup("sandbox_ready_timeout and shutdown_after_seconds must be positive "
                            "integers (shutdown_after_seconds may be null: no shutdown)");
        return;
    }
    if (!string_map_ok(json_object_get(args, "labels")) ||
        !string_map_ok(json_object_get(args, "pod_labels")) ||
        !string_map_ok(json_object_get(args, "pod_annotations"))) {
        out->error = strdup("labels, pod_labels and pod_annotations must map names to strings");
        return;
    }
    _cleanup_(asb_client_freep) asb_client *cl = NULL;
    if (mcp_client_new(&cl, &out->error) < 0)
        return;
    _cleanup_free_ char *pool_text = NULL;
    int r = asb_object_get(&pool_text, cl, "sandboxwarmpool", ns, pool);
    if (r == ASB_ENOTFOUND) {
        out->error = strdup_printf("unknown warm pool \"%s\" in namespace \"%s\": create a "
                               "SandboxWarmPool first (asb apply) or name an existing one",
                               pool, ns);
        return;
    }
    if (r != ASB_OK) {
        out->error = mcp_error_text("warm pool");
        return;
    }
    _cleanup_free_ char *manifest = claim_manifest(pool, args, ttl), *created = NULL;
    if (!manifest || asb_object_create(&created, cl, "SandboxClaim", ns, manifest) != ASB_OK) {
        out->error = manifest ? mcp_error_text("creating the sandbox claim") : NULL;
        return;
    }
    json_t *cj = json_loads(created, 0, NULL);
    _cleanup_free_ char *name =
        strdup(json_string_value(json_object_get(json_object_get(cj, "metadata"), "name")) ?: "");
    json_decref(cj);
    if (!name || !*name)
        return;
    report_wait(call, pool_text, name, pool, timeout);
    asb_claim_options o = ASB_CLAIM_OPTIONS_INIT;
    o.ready_timeout_ms = (long)timeout * 1000;
    o.no_connect = 1;
    o.cancel = &call->cancel;
    asb_claim *claim = NULL;
    r = asb_claim_attach(&claim, cl, ns, name, &o);
    if (r != ASB_OK) {
        out->error = claim_failure(r, name, pool, timeout);
        (void)asb_object_delete(NULL, cl, "SandboxClaim", ns, name);
        return;
    }
    out->structured = json_pack("{s:s,s:s,s:s}", "sandbox_claim_name", name, "sandbox_name",
                                asb_claim_sandbox_name(claim), "namespace", ns);
    asb_claim_disconnect(claim);
}

void mcp_tool_delete(mcp_call *call, const json_t *args, tool_out *out)
{
    const char *name = mcp_arg_str(args, "sandbox_claim_name", NULL), *ns = mcp_arg_ns(args);
    if (!name) {
        out->error = strdup("sandbox_claim_name is required");
        return;
    }
    _cleanup_(asb_client_freep) asb_client *cl = NULL;
    if (mcp_client_new(&cl, &out->error) < 0)
        return;
    const char *kind = "SandboxClaim";
    int r = asb_object_delete(NULL, cl, kind, ns, name);
    if (r == ASB_ENOTFOUND) {
        kind = "Sandbox";
        r = asb_object_delete(NULL, cl, kind, ns, name);
    }
    if (r == ASB_ENOTFOUND)
        out->error = strdup_printf("unknown sandbox \"%s\" in namespace \"%s\": no SandboxClaim or "
                               "Sandbox has that name (already deleted?)",
                               name, ns);
    else if (r != ASB_OK)
        out->error = mcp_error_text(name);
    else
        out->structured = json_pack("{s:s,s:s}", "deleted", name, "kind", kind);
    mcp_sandbox_forget(ns, name);
}

/* ---- execute_command ---- */

#define EXEC_OUTPUT_MAX (4u * 1024u * 1024u) /* per stream kept for the result */
#define PROGRESS_INTERVAL_USEC 200000        /* at most 5 progress notifications a second */

typedef struct exec_run {
    mcp_call *call;
    const char *command;
    long long timeout;
    int exit_code;
    buf out, err;
    bool out_cut, err_cut;
    buf pending;         /* output not yet sent as progress */
    long long last_sent; /* CLOCK_MONOTONIC usec of the last progress */
    long long total;     /* bytes of output so far: the progress value (strictly increasing) */
} exec_run;

static void send_progress(exec_run *x, bool force)
{
    mcp_call *c = x->call;
    if (!c->progress_token || !c->notify || x->pending.len == 0)
        return;
    long long now = (long long)now_usec(CLOCK_MONOTONIC);
    if (!force && x->last_sent && now - x->last_sent < PROGRESS_INTERVAL_USEC)
        return;
    json_t *msg = mcp_json_text(x->pending.data, x->pending.len);
    json_t *n =
        msg ? jsonrpc_notification("notifications/progress",
                                   json_pack("{s:O,s:I,s:o}", "progressToken", c->progress_token,
                                             "progress", (json_int_t)x->total, "message", msg))
            : NULL;
    if (n)
        (void)c->notify(c, n);
    buf_reset(&x->pending);
    x->last_sent = now;
}

static int on_output(exec_run *x, buf *b, bool *cut, const char *data, size_t len)
{
    if (x->call->cancel)
        return ASB_ECANCELLED;
    size_t keep = b->len < EXEC_OUTPUT_MAX ? MIN(len, EXEC_OUTPUT_MAX - b->len) : 0;
    if (keep < len)
        *cut = true;
    if (buf_append(b, data, keep) < 0)
        return ASB_ENOMEM;
    x->total += (long long)len;
    if (x->call->progress_token && x->pending.len < 65536)
        (void)buf_append(&x->pending, data, MIN(len, 65536 - x->pending.len));
    send_progress(x, false);
    return 0;
}

static int on_stdout(const char *data, size_t len, void *payload)
{
    exec_run *x = payload;
    return on_output(x, &x->out, &x->out_cut, data, len);
}

static int on_stderr(const char *data, size_t len, void *payload)
{
    exec_run *x = payload;
    return on_output(x, &x->err, &x->err_cut, data, len);
}

static void exec_run_done(exec_run *x)
{
    buf_done(&x->out);
    buf_done(&x->err);
    buf_done(&x->pending);
}

static int op_execute(asb_sandbox *sb, void *payload)
{
    exec_run *x = payload;
    /* The agent's commands get no stdin (`cat` and friends see EOF at once): the shell closes it
     * itself, which costs no extra round trip as closing it over gRPC would. */
    const char *argv[] = {"/bin/sh", "-c", "exec </dev/null; eval \"$1\"", "sh", x->command, NULL};
    asb_sandbox_process_options po = ASB_SANDBOX_PROCESS_OPTIONS_INIT;
    po.timeout_ms = (long)x->timeout * 1000;
    po.cancel = &x->call->cancel;
    asb_sandbox_callbacks cbs = ASB_SANDBOX_CALLBACKS_INIT;
    cbs.stdout_cb = on_stdout;
    cbs.stderr_cb = on_stderr;
    cbs.payload = x;
    x->exit_code = -1;
    return asb_sandbox_start(&x->exit_code, sb, argv, &po, &cbs);
}

static json_t *output_text(const buf *b, bool cut)
{
    json_t *s = mcp_json_text(b->data ? b->data : "", b->len);
    if (s && cut) {
        char *t =
            strdup_printf("%s\n[output truncated at %u bytes]", json_string_value(s), EXEC_OUTPUT_MAX);
        json_decref(s);
        s = t ? json_string(t) : NULL;
        free(t);
    }
    return s;
}

void mcp_tool_execute(mcp_call *call, const json_t *args, tool_out *out)
{
    const char *command = mcp_arg_str(args, "command", NULL);
    long long timeout = mcp_arg_int(args, "timeout", 60, 1, 86400);
    if (!command || timeout < 0) {
        out->error = strdup(!command ? "command is required: a shell command line"
                                     : "timeout must be a positive number of seconds");
        return;
    }
    exec_run x = {.call = call,
                  .command = command,
                  .timeout = timeout,
                  .out = BUF_INIT,
                  .err = BUF_INIT,
                  .pending = BUF_INIT};
    int r = mcp_tool_with_sandbox(args, out, op_execute, &x);
    if (out->error) {
        exec_run_done(&x);
        return;
    }
    send_progress(&x, true);
    if (r == ASB_OK) {
        json_t *so = output_text(&x.out, x.out_cut), *se = output_text(&x.err, x.err_cut);
        out->structured = so && se ? json_pack("{s:i,s:O,s:O}", "exit_code", x.exit_code, "stdout",
                                               so, "stderr", se)
                                   : NULL;
        json_decref(so);
        json_decref(se);
    } else if (r == ASB_ETIMEOUT) {
        out->error = strdup_printf("the command timed out after %lld s and was killed; run it in the "
                               "background (nohup ... &) or pass a larger timeout",
                               timeout);
    } else if (r == ASB_ECANCELLED || call->cancel) {
        out->error = strdup("the command was cancelled and its process group killed");
    } else {
        out->error = mcp_error_text("execute_command");
    }
    exec_run_done(&x);
}
