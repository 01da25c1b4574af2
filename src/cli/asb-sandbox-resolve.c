/* Name resolution shared by the sandbox verbs: a Sandbox of that name, else a SandboxClaim of that
 * name whose status.sandbox.name (or agents.x-k8s.io/sandbox-name annotation) names the sandbox
 * (DESIGN.md, Decisions: CLI). */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "basic/macro.h"
#include "cli/asb-cli.h"

int cli_sandbox_resolve(asb_client *cl, const char *name, char **ret_name, json_t **ret_obj)
{
    const char *ns = cli_namespace();
    _cleanup_free_ char *sandbox_name = strdup(name);
    if (!sandbox_name) {
        fprintf(stderr, "error: out of memory\n");
        return 1;
    }
    char *text = NULL;
    int r = asb_object_get(&text, cl, "sandbox", ns, name);
    if (r == ASB_ENOTFOUND) {
        /* Not a Sandbox: maybe a claim. */
        char *claim = NULL;
        int rc = asb_object_get(&claim, cl, "sandboxclaim", ns, name);
        if (rc == ASB_ENOTFOUND) {
            fprintf(stderr, "error: sandbox \"%s\" not found in namespace \"%s\" (no Sandbox or "
                            "SandboxClaim of that name)\n",
                    name, ns);
            return 1;
        }
        if (rc != ASB_OK)
            return cli_print_error(NULL);
        json_t *cj = json_loads(claim, 0, NULL);
        asb_free(claim);
        const char *sn = json_string_value(
            json_object_get(json_object_get(json_object_get(cj, "status"), "sandbox"), "name"));
        if (!sn || !*sn) /* adopted, status not written yet: the adoption annotation (§2.8) */
            sn = json_string_value(
                json_object_get(json_object_get(json_object_get(cj, "metadata"), "annotations"),
                                "agents.x-k8s.io/sandbox-name"));
        if (!sn || !*sn) {
            fprintf(stderr, "error: sandbox claim \"%s\" has no sandbox yet (status.sandbox.name is "
                            "empty)\n",
                    name);
            json_decref(cj);
            return 1;
        }
        free(sandbox_name);
        sandbox_name = strdup(sn);
        json_decref(cj);
        if (!sandbox_name) {
            fprintf(stderr, "error: out of memory\n");
            return 1;
        }
        r = asb_object_get(&text, cl, "sandbox", ns, sandbox_name);
        if (r == ASB_ENOTFOUND) {
            fprintf(stderr, "error: sandbox \"%s\" of claim \"%s\" not found\n", sandbox_name,
                    name);
            return 1;
        }
    }
    if (r != ASB_OK)
        return cli_print_error(NULL);
    if (ret_obj) {
        *ret_obj = json_loads(text, 0, NULL);
        if (!*ret_obj) {
            asb_free(text);
            fprintf(stderr, "error: the server returned an object that is not JSON\n");
            return 1;
        }
    }
    asb_free(text);
    *ret_name = TAKE_PTR(sandbox_name);
    return 0;
}

int cli_sandbox_open(asb_client *cl, const char *name, asb_sandbox **ret)
{
    _cleanup_free_ char *sn = NULL;
    char *text = NULL, *why = NULL;
    json_t *obj = NULL;
    /* A Ready sandbox of the local server by its name, without an API request; anything else
     * (a claim's name, a sandbox not serving, a remote server) is read and explained below. */
    int lr = asb_sandbox_open_local(ret, cl, cli_namespace(), name, NULL);
    if (lr == ASB_OK)
        return 0;
    if (lr != ASB_ENOTFOUND)
        return cli_print_sandbox_error(name);
    if (cli_sandbox_resolve(cl, name, &sn, &obj))
        return 1;
    /* Ready, or Finished with its container kept (sandboxd still serves the main process's
     * results): open. Suspended, stopped for good, or finished without a container: refused at
     * once, saying why. Pending: asb_sandbox_open decides (it waits for a Ready=True that is
     * only about an older generation, as right after `asb claim`). */
    asb_sandbox_phase phase = ASB_SANDBOX_PENDING;
    text = json_dumps(obj, JSON_COMPACT);
    json_decref(obj);
    if (!text || asb_sandbox_phase_of(&phase, &why, text) != ASB_OK) {
        free(text);
        return cli_print_sandbox_error(sn);
    }
    int r = ASB_ECONFLICT;
    /* From the object just read: resolution and open share one GET. */
    if (phase == ASB_SANDBOX_READY || phase == ASB_SANDBOX_FINISHED || phase == ASB_SANDBOX_PENDING)
        r = asb_sandbox_open_object(ret, cl, cli_namespace(), text, NULL);
    free(text);
    if (r == ASB_OK) {
        asb_free(why);
        return 0;
    }
    if (r != ASB_ECONFLICT) {
        asb_free(why);
        return cli_print_sandbox_error(sn);
    }
    if (phase == ASB_SANDBOX_FINISHED_GONE)
        fprintf(stderr, "error: sandbox \"%s\" has finished and its container is gone (%s)\n", sn,
                why);
    else
        fprintf(stderr, "error: sandbox \"%s\" is not ready%s%s%s\n", sn, *why ? " (" : "", why,
                *why ? ")" : "");
    asb_free(why);
    return 1;
}

int cli_print_sandbox_error(const char *context)
{
    const asb_error *e = asb_error_last();
    const char *msg = e && e->message ? e->message : "unknown error";
    fprintf(stderr, "error: %s%s%s\n", context ? context : "", context ? ": " : "", msg);
    return 1;
}
