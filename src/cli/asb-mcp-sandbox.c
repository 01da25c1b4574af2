/* `asb mcp`: reaching the control plane and a sandbox, with errors phrased for an agent (what is
 * wrong and what to do about it) instead of printed (cli_sandbox_open prints; we return text). */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "basic/buf.h"
#include "basic/macro.h"
#include "cli/asb-cli.h"
#include "cli/asb-mcp.h"

static char *textf(const char *fmt, ...) _printf_(1, 2);
static char *textf(const char *fmt, ...)
{
    _cleanup_buf_ buf b = BUF_INIT;
    va_list ap;
    va_start(ap, fmt);
    int r = buf_appendv(&b, fmt, ap);
    va_end(ap);
    return r < 0 ? NULL : buf_steal(&b, NULL);
}

char *mcp_error_text(const char *context)
{
    const asb_error *e = asb_error_last();
    const char *msg = e && e->message && *e->message ? e->message : "unknown error";
    if (e && e->code == ASB_ECONNECT)
        return textf("%s%scannot reach the Agent Sandbox server (%s); is `asb serve` running?",
                     context ? context : "", context ? ": " : "", msg);
    return textf("%s%s%s", context ? context : "", context ? ": " : "", msg);
}

static void client_log(int level, const char *message, void *payload)
{
    if (level <= ASB_LOG_WARNING)
        fprintf(stderr, "asb mcp: %s\n", message);
}

int mcp_client_new(asb_client **ret, char **ret_error)
{
    asb_client_options o = ASB_CLIENT_OPTIONS_INIT;
    o.server = cli_global.server;
    o.token = cli_global.token;
    o.log_cb = client_log;
    if (asb_client_new(ret, &o) != ASB_OK) {
        *ret_error = mcp_error_text("no Agent Sandbox server configured");
        return -1;
    }
    return 0;
}

/* The sandbox a claim is bound to, or NULL (not bound yet). Borrowed from claim. */
static const char *claim_sandbox(const json_t *claim)
{
    const char *sn = json_string_value(
        json_object_get(json_object_get(json_object_get(claim, "status"), "sandbox"), "name"));
    if (!sn || !*sn)
        sn = json_string_value(json_object_get(
            json_object_get(json_object_get(claim, "metadata"), "annotations"),
            "agents.x-k8s.io/sandbox-name"));
    return sn && *sn ? sn : NULL;
}

int mcp_sandbox_resolve(asb_client *cl, const char *ns, const char *name, char **ret_sandbox,
                        char **ret_error)
{
    /* Claims first: the tools hand out claim names, and a claim named like a sandbox is its own. */
    _cleanup_free_ char *text = NULL;
    int r = asb_object_get(&text, cl, "sandboxclaim", ns, name);
    if (r == ASB_OK) {
        json_t *claim = json_loads(text, 0, NULL);
        const char *sn = claim_sandbox(claim);
        if (!sn) {
            json_decref(claim);
            *ret_error = textf("sandbox claim \"%s\" in namespace \"%s\" has no sandbox yet; wait "
                               "a moment and try again, or create a new one with create_sandbox",
                               name, ns);
            return -1;
        }
        *ret_sandbox = strdup(sn);
        json_decref(claim);
        return *ret_sandbox ? 0 : -1;
    }
    if (r != ASB_ENOTFOUND) {
        *ret_error = mcp_error_text(name);
        return -1;
    }
    r = asb_object_get(NULL, cl, "sandbox", ns, name);
    if (r == ASB_ENOTFOUND) {
        *ret_error = textf("unknown sandbox \"%s\" in namespace \"%s\": no SandboxClaim or Sandbox "
                           "has that name (create one with create_sandbox, or read the "
                           "asb://sandboxes resource for the existing ones)",
                           name, ns);
        return -1;
    }
    if (r != ASB_OK) {
        *ret_error = mcp_error_text(name);
        return -1;
    }
    *ret_sandbox = strdup(name);
    return *ret_sandbox ? 0 : -1;
}

int mcp_sandbox_open(asb_sandbox **ret, asb_client *cl, const char *ns, const char *name,
                     char **ret_error)
{
    _cleanup_free_ char *sn = NULL;
    if (mcp_sandbox_resolve(cl, ns, name, &sn, ret_error) < 0)
        return -1;
    int r = asb_sandbox_open(ret, cl, ns, sn, NULL);
    if (r == ASB_OK)
        return 0;
    if (r == ASB_ECONFLICT)
        *ret_error = mcp_error_text("the sandbox cannot run commands or serve files now (it may "
                                    "be starting, suspended or stopped; try again shortly or "
                                    "create a new one)");
    else
        *ret_error = mcp_error_text(sn);
    return -1;
}
