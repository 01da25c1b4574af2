/* Preview hosts' credentials (router-preview.c): signed, scoped to one sandbox port, with an
 * expiry; carried by a link's query parameter once and by a cookie afterwards. Pure: no I/O. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* The query parameter and cookie name. */
#define ROUTER_PREVIEW_NAME "asb-preview"
/* Room for a credential ("EXP.SIG"). */
#define ROUTER_PREVIEW_CRED_MAX 96

/* Writes the credential for (ns, id, port) valid until exp (Unix seconds) signed with key into
 * out. 0, -ENOBUFS or -EIO (the MAC failed). */
int router_preview_credential(const char *key, const char *ns, const char *id, unsigned port,
                              long long exp, char *out, size_t size);
/* Whether cred[0..len) is a credential of key for (ns, id, port) that has not expired at now. */
bool router_preview_check(const char *key, const char *ns, const char *id, unsigned port,
                          const char *cred, size_t len, long long now);
/* The credential in a Cookie header value / in a request target's query; borrowed, with its
 * length in *ret_len; NULL when absent. */
const char *router_preview_cookie(const char *cookie, size_t *ret_len);
/* The raw (not decoded) value of query parameter name of a request target. */
const char *router_query_param(const char *target, const char *name, size_t *ret_len);
const char *router_preview_link_param(const char *target, size_t *ret_len);
/* The request target without the link parameter ("/" when nothing is left). *ret owned. 0 or
 * -ENOMEM. */
int router_preview_strip_param(const char *target, char **ret);
/* A Cookie header value without the preview cookie; *ret owned, NULL when nothing is left. 0 or
 * -ENOMEM. */
int router_preview_cookie_filter(const char *cookie, char **ret);
