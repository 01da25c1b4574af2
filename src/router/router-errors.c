/* The router's answer texts and their rendering (router-errors.h). */
#include <errno.h>
#include <stdarg.h>
#include <jansson.h>
#include <string.h>

#include "basic/macro.h"
#include "router/router-core.h"
#include "router/router-errors.h"

/* api_error_set, keeping the caller's errno r (the status alone would give another one). */
_printf_(4, 5) static int set(api_error *err, int r, status_code code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    api_error_setv(err, code, fmt, ap);
    va_end(ap);
    err->err = r;
    return r;
}

int router_error_internal(api_error *err, int r)
{
    return set(err, r, STATUS_INTERNAL, "An internal error occurred in the proxy.");
}

int router_error_backend(api_error *err, int r, const char *sandbox_id)
{
    if (r == -ETIMEDOUT)
        return set(err, r, STATUS_DEADLINE_EXCEEDED,
                   "Timed out waiting for the backend sandbox: %s", sandbox_id);
    return set(err, r, STATUS_BAD_GATEWAY, "Could not connect to the backend sandbox: %s",
               sandbox_id);
}

int router_error_control_plane(api_error *err, int r, const char *sandbox_id)
{
    return set(err, r, STATUS_BAD_GATEWAY, "Could not reach the control plane for sandbox %s",
               sandbox_id);
}

int router_error_resume(api_error *err, int r, const char *sandbox_id)
{
    return set(err, r, STATUS_BAD_GATEWAY, "Could not resume the backend sandbox: %s", sandbox_id);
}

int router_error_not_found(api_error *err, const char *ns, const char *sandbox_id)
{
    return set(err, -ENOENT, STATUS_NOT_FOUND, "Sandbox \"%s\" not found in namespace \"%s\".",
               sandbox_id, ns);
}

int router_error_unauthorized(api_error *err)
{
    return set(err, -EACCES, STATUS_UNAUTHENTICATED, "Missing or invalid Authorization header.");
}

int router_error_upgrade(api_error *err)
{
    return set(err, -EOPNOTSUPP, STATUS_UNIMPLEMENTED,
               "Protocol upgrades are not supported by this router.");
}

int router_error_legacy_too_large(api_error *err)
{
    return set(err, -E2BIG, STATUS_RESOURCE_EXHAUSTED,
               "Request body too large for the legacy layer.");
}

int router_error_malformed(api_error *err)
{
    return set(err, -EINVAL, STATUS_INVALID_ARGUMENT, "Malformed HTTP request.");
}

int router_error_port_unix(api_error *err, unsigned port, const char *sandbox_id)
{
    return set(err, -ENXIO, STATUS_BAD_GATEWAY,
               "port %u of sandbox %s cannot be reached: the router's target template names "
               "unix sockets",
               port, sandbox_id);
}

int router_error_preview_expired(api_error *err, const char *sandbox_id, unsigned port)
{
    return set(err, -EACCES, STATUS_UNAUTHENTICATED,
               "This preview link is invalid or has expired: ask for a new one (asb preview %s "
               "%u).",
               sandbox_id, port);
}

int router_error_preview_too_long(api_error *err)
{
    return set(err, -EACCES, STATUS_URI_TOO_LONG, "The preview link is too long.");
}

int router_error_preview_param(api_error *err, const char *param)
{
    return set(err, -EINVAL, STATUS_INVALID_ARGUMENT, "Invalid %s.", param);
}

int router_error_preview_request(api_error *err)
{
    return set(err, -EINVAL, STATUS_INVALID_ARGUMENT,
               "A preview link needs namespace, sandbox, a port (not 8080, 9090 or 8888) and ttl "
               "seconds (at most a year).");
}

unsigned router_error_http(const api_error *err)
{
    return status_http(err->code);
}

char *router_error_body(const api_error *err)
{
    json_t *o = json_pack("{s:s}", "detail", err->message ? err->message : "");
    if (!o)
        return NULL;
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

int router_reply_error(buf *out, const api_error *err, bool keep_alive, bool head_only)
{
    _cleanup_free_ char *body = router_error_body(err);
    if (!body)
        return -ENOMEM;
    return router_reply(out, (int)router_error_http(err), "application/json", NULL, body,
                        strlen(body), keep_alive, head_only);
}
