/* asb_preview_url(): a browser link to a port of a sandbox, signed by the router
 * (docs/router.md, "Preview hosts"). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "asb/sandbox.h"
#include "basic/buf.h"
#include "libasb/libasb-http.h"
#include "libasb/libasb-internal.h"

static bool collect(const char *data, size_t len, long status, void *payload)
{
    return buf_append(payload, data, len) == 0;
}

ASB_PUBLIC int asb_preview_url(char **out, asb_client *client, const char *ns, const char *name,
                               unsigned port, long ttl_seconds)
{
    if (!out || !client || !name || port < 1 || port > 65535)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_preview_url: bad argument");
    *out = NULL;
    char *router = NULL;
    int r = asb_client_router(&router, client);
    if (r != ASB_OK)
        return r;
    size_t rl = strlen(router);
    while (rl > 0 && router[rl - 1] == '/')
        router[--rl] = '\0';
    char *ens = asbi_url_escape(ns ? ns : "default"), *ename = asbi_url_escape(name), *url = NULL;
    char *lines[ASBI_MAX_HEADERS];
    size_t nl = 0;
    _cleanup_buf_ buf body = BUF_INIT;
    long status = 0;
    if (!ens || !ename ||
        asprintf(&url, "%s/preview-url?namespace=%s&sandbox=%s&port=%u&ttl=%ld", router, ens, ename,
                 port, ttl_seconds > 0 ? ttl_seconds : 86400) < 0) {
        r = asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
        url = NULL;
        goto out;
    }
    if ((r = asbi_headers(client, NULL, lines, &nl)) != ASB_OK)
        goto out;
    asbi_http_exchange x = {.method = "GET",
                            .url = url,
                            .headers = (const char *const *)lines,
                            .n_headers = nl,
                            .timeout_ms = 30000,
                            .on_body = collect,
                            .payload = &body};
    r = asbi_http_perform(client, &x, &status);
    asbi_headers_free(lines, nl);
    if (r != ASB_OK)
        goto out;
    json_t *j = json_loadb(body.data ? body.data : "", body.len, 0, NULL);
    const char *u = json_string_value(json_object_get(j, "url"));
    const char *detail = json_string_value(json_object_get(j, "detail"));
    if (status == 200 && u)
        r = (*out = strdup(u)) ? ASB_OK : asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    else if (detail)
        r = asbi_error_set(asbi_error_from_status((int)status, NULL), (int)status, NULL,
                           "the router at %s answered %ld: %s", router, status, detail);
    else
        r = asbi_error_set(ASB_EPROTOCOL, (int)status, NULL,
                           "the router at %s answered %ld without a preview URL", router, status);
    json_decref(j);
out:
    free(url);
    free(ens);
    free(ename);
    free(router);
    return r;
}
