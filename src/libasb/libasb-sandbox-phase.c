/* What a Sandbox object says about reaching its sandboxd: Ready, Finished with its container
 * kept (docs/local-sandboxes.md: sandboxd keeps serving files and exec), suspended, stopped for
 * good, or still on its way. The one classification the SDK, the CLI and the router share, so
 * that none of them waits for a Ready that will not come. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "libasb/libasb-internal.h"
#include "libasb/libasb-sandbox-internal.h"

/* Ready reasons after which the sandbox does not become Ready without a spec change (local
 * backend: docs/local-sandboxes.md "Status written"; clusters: the same names). */
static const char *const terminal_reasons[] = {
    "ImageNotSupported", "ImageNotFound", "ImageUnpackFailed", "ReconcilerError",
    "SandboxExpired",    "PodSucceeded",  "PodFailed",
};

static bool condition_is(const json_t *c, const char *status)
{
    const char *s = json_string_value(json_object_get(c, "status"));
    return s && strcasecmp(s, status) == 0;
}

/* False when the condition was written for an older metadata.generation (a spec change the
 * controller has not looked at yet). */
static bool condition_current(const json_t *obj, const json_t *c)
{
    json_t *og = json_object_get(c, "observedGeneration");
    json_t *gen = json_object_get(json_object_get(obj, "metadata"), "generation");
    return !(json_is_integer(og) && json_is_integer(gen) &&
             json_integer_value(og) < json_integer_value(gen));
}

bool asbi_sandbox_reason_terminal(const char *reason)
{
    for (size_t i = 0; reason && i < sizeof(terminal_reasons) / sizeof(terminal_reasons[0]); i++)
        if (strcmp(reason, terminal_reasons[i]) == 0)
            return true;
    return false;
}

/* "Reason: message", "Reason", or the fallback; NULL on ENOMEM. */
static char *describe(const json_t *c, const char *fallback)
{
    const char *reason = json_string_value(json_object_get(c, "reason"));
    const char *msg = json_string_value(json_object_get(c, "message"));
    char *s = NULL;
    if (!reason || !*reason)
        return strdup(fallback);
    if (asprintf(&s, "%s%s%s", reason, msg && *msg ? ": " : "", msg && *msg ? msg : "") < 0)
        return NULL;
    return s;
}

int asbi_sandbox_phase(const json_t *obj, asb_sandbox_phase *ret, char **ret_explanation)
{
    const json_t *md = json_object_get(obj, "metadata");
    const json_t *ready = asbi_find_condition(obj, "Ready");
    const json_t *fin = asbi_find_condition(obj, "Finished");
    const char *mode =
        json_string_value(json_object_get(json_object_get(obj, "spec"), "operatingMode"));
    const char *reason = json_string_value(json_object_get(ready, "reason"));
    const json_t *decider = ready;
    const char *fallback = "";
    asb_sandbox_phase p = ASB_SANDBOX_PENDING;
    if (json_string_value(json_object_get(md, "deletionTimestamp"))) {
        p = ASB_SANDBOX_STOPPED;
        decider = NULL;
        fallback = "Deleting: the Sandbox is being deleted";
    } else if (mode && strcmp(mode, "Running") != 0) {
        p = ASB_SANDBOX_SUSPENDED;
        if (!reason || strcmp(reason, "SandboxSuspended") != 0)
            decider = NULL;
        fallback = "SandboxSuspended: spec.operatingMode is Suspended";
    } else if (ready && condition_is(ready, "True") && condition_current(obj, ready)) {
        p = ASB_SANDBOX_READY;
    } else if (fin && condition_is(fin, "True")) {
        /* The main process exited. The exit is a fact no later spec change undoes; whether the
         * container (and so sandboxd) is still there is what status.selector says. */
        const char *sel =
            json_string_value(json_object_get(json_object_get(obj, "status"), "selector"));
        p = sel && *sel ? ASB_SANDBOX_FINISHED : ASB_SANDBOX_FINISHED_GONE;
        decider = fin;
    } else if (ready && condition_is(ready, "False") && condition_current(obj, ready) &&
               asbi_sandbox_reason_terminal(reason)) {
        p = ASB_SANDBOX_STOPPED;
    }
    if (ret_explanation &&
        !(*ret_explanation = decider ? describe(decider, fallback) : strdup(fallback)))
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    *ret = p;
    return ASB_OK;
}

ASB_PUBLIC int asb_sandbox_phase_of(asb_sandbox_phase *out, char **why, const char *object)
{
    if (why)
        *why = NULL;
    if (!out || !object)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_sandbox_phase_of: NULL out or object");
    json_t *obj = json_loads(object, 0, NULL);
    if (!json_is_object(obj)) {
        json_decref(obj);
        return asbi_error_set(ASB_EPROTOCOL, 0, NULL, "a Sandbox that is not a JSON object");
    }
    int r = asbi_sandbox_phase(obj, out, why);
    json_decref(obj);
    return r;
}

static bool settled(const json_t *obj, void *payload)
{
    (void)payload;
    asb_sandbox_phase p = ASB_SANDBOX_PENDING;
    return asbi_sandbox_phase(obj, &p, NULL) == ASB_OK && p != ASB_SANDBOX_PENDING;
}

ASB_PUBLIC int asb_sandbox_wait_settled(char **out, asb_client *client, const char *ns,
                                        const char *name, const asb_wait_options *opts)
{
    if (out)
        *out = NULL;
    return asbi_object_wait_until(out, client, "Sandbox", ns, name, settled, NULL, opts);
}
