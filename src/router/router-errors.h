/* The router's own answers: every text it writes for a refused or failed request is built here,
 * once per kind, into an api_error (src/shared/status.h), and rendered here into the
 * {"detail": ...} JSON body of HTTP answers (HTTP status and gRPC status from the status
 * table). Each setter records the negative errno the caller fails with and returns it, so a
 * failing path is `return router_error_backend(err, -EIO, id);`. */
#pragma once

#include <stdbool.h>

#include "basic/buf.h"
#include "shared/status.h"

/* 500 "An internal error occurred in the proxy." */
int router_error_internal(api_error *err, int r);
/* The backend sandbox failed: 504 "Timed out waiting for the backend sandbox: <id>" for
 * r == -ETIMEDOUT, else 502 "Could not connect to the backend sandbox: <id>". */
int router_error_backend(api_error *err, int r, const char *sandbox_id);
/* 502 "Could not reach the control plane for sandbox <id>" */
int router_error_control_plane(api_error *err, int r, const char *sandbox_id);
/* 502 "Could not resume the backend sandbox: <id>" */
int router_error_resume(api_error *err, int r, const char *sandbox_id);
/* 404 `Sandbox "<id>" not found in namespace "<ns>".` (-ENOENT) */
int router_error_not_found(api_error *err, const char *ns, const char *sandbox_id);
/* 401 "Missing or invalid Authorization header." (-EACCES) */
int router_error_unauthorized(api_error *err);
/* 501 "Protocol upgrades are not supported by this router." (-EOPNOTSUPP) */
int router_error_upgrade(api_error *err);
/* 413 "Request body too large for the legacy layer." (-E2BIG) */
int router_error_legacy_too_large(api_error *err);
/* 400 "Malformed HTTP request." (-EINVAL) */
int router_error_malformed(api_error *err);
/* 502 "port <port> of sandbox <id> cannot be reached: the router's target template names unix
 * sockets" (-ENXIO) */
int router_error_port_unix(api_error *err, unsigned port, const char *sandbox_id);
/* Preview links (router-preview.h): 401 "This preview link is invalid or has expired: ask for a
 * new one (asb preview <id> <port>)." (-EACCES); 414 for a link too long to redirect with
 * (-EACCES); 400 "Invalid <param>." and 400 for a link request that lacks what it needs
 * (-EINVAL). */
int router_error_preview_expired(api_error *err, const char *sandbox_id, unsigned port);
int router_error_preview_too_long(api_error *err);
int router_error_preview_param(api_error *err, const char *param);
int router_error_preview_request(api_error *err);

/* The HTTP status an answer of err carries. */
unsigned router_error_http(const api_error *err);
/* {"detail": err->message} JSON body, owned; NULL on -ENOMEM. */
char *router_error_body(const api_error *err);
/* router_reply (router-core.h) of err's status with its detail body as application/json. */
int router_reply_error(buf *out, const api_error *err, bool keep_alive, bool head_only);
