/* `asb mcp` resources: asb://sandboxes (every sandbox with its claim, pool, Ready and age) and
 * each sandbox's files, asb://sandboxes/{namespace}/{sandbox}/files/{path} (a directory reads as
 * its JSON listing, a file as text, or as a base64 blob when it is not UTF-8). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "basic/base64.h"
#include "basic/time-util.h"
#include "mcp/asb-mcp-tools.h"

#define SANDBOXES_URI "asb://sandboxes"
#define FILES_TEMPLATE "asb://sandboxes/{namespace}/{sandbox}/files/{+path}"

static const char *meta(const json_t *obj, const char *field)
{
    return json_string_value(json_object_get(json_object_get(obj, "metadata"), field));
}

static const char *owner_of_kind(const json_t *obj, const char *kind)
{
    size_t i;
    json_t *r;
    json_array_foreach (json_object_get(json_object_get(obj, "metadata"), "ownerReferences"), i, r)
        if (json_is_string(json_object_get(r, "kind")) &&
            strcmp(json_string_value(json_object_get(r, "kind")), kind) == 0)
            return json_string_value(json_object_get(r, "name"));
    return NULL;
}

static bool is_ready(const json_t *obj)
{
    size_t i;
    json_t *c;
    json_array_foreach (json_object_get(json_object_get(obj, "status"), "conditions"), i, c) {
        const char *t = json_string_value(json_object_get(c, "type"));
        const char *s = json_string_value(json_object_get(c, "status"));
        if (t && s && strcmp(t, "Ready") == 0)
            return strcmp(s, "True") == 0;
    }
    return false;
}

/* The pool a claim was made from (claims list items), by claim name and namespace. */
static const char *claim_pool(const json_t *claims, const char *ns, const char *claim)
{
    size_t i;
    json_t *c;
    json_array_foreach (json_object_get(claims, "items"), i, c) {
        const char *n = meta(c, "name"), *cns = meta(c, "namespace");
        if (n && strcmp(n, claim) == 0 && (!cns || strcmp(cns, ns) == 0))
            return json_string_value(json_object_get(
                json_object_get(json_object_get(c, "spec"), "warmPoolRef"), "name"));
    }
    return NULL;
}

/* The sandboxes as {"sandboxes":[{name, namespace, claim, pool, ready, age_seconds}]}. */
static json_t *sandbox_summaries(asb_client *cl, char **ret_error)
{
    asb_list_options lo = ASB_LIST_OPTIONS_INIT;
    lo.all_namespaces = 1;
    _cleanup_free_ char *text = NULL, *ctext = NULL;
    if (asb_object_list(&text, cl, "sandbox", NULL, &lo) != ASB_OK ||
        asb_object_list(&ctext, cl, "sandboxclaim", NULL, &lo) != ASB_OK) {
        *ret_error = mcp_error_text("listing sandboxes");
        return NULL;
    }
    json_t *list = json_loads(text, 0, NULL), *claims = json_loads(ctext, 0, NULL);
    json_t *arr = json_array();
    size_t i;
    json_t *sb;
    int64_t now = (int64_t)time(NULL) * 1000000;
    json_array_foreach (json_object_get(list, "items"), i, sb) {
        const char *name = meta(sb, "name"), *ns = meta(sb, "namespace") ?: "default";
        const char *created = meta(sb, "creationTimestamp");
        const char *claim = owner_of_kind(sb, "SandboxClaim");
        const char *pool =
            claim ? claim_pool(claims, ns, claim) : owner_of_kind(sb, "SandboxWarmPool");
        int64_t at = 0;
        if (!created || parse_rfc3339(created, &at) < 0)
            at = now;
        json_t *e = name ? json_pack("{s:s,s:s,s:s?,s:s?,s:b,s:I}", "name", name, "namespace", ns,
                                     "claim", claim, "pool", pool, "ready", is_ready(sb),
                                     "age_seconds", (json_int_t)((now - at) / 1000000))
                         : NULL;
        if (arr && e)
            json_array_append_new(arr, e);
    }
    json_decref(list);
    json_decref(claims);
    return arr ? json_pack("{s:o}", "sandboxes", arr) : NULL;
}

json_t *mcp_resources_list(mcp_call *call, int *ret_code, const char **ret_why)
{
    _cleanup_(asb_client_freep) asb_client *cl = NULL;
    _cleanup_free_ char *error = NULL;
    json_t *summaries = NULL;
    if (mcp_client_new(&cl, &error) == 0)
        summaries = sandbox_summaries(cl, &error);
    if (!summaries) {
        *ret_code = JSONRPC_ERR_INTERNAL;
        *ret_why = "cannot list sandboxes (is the Agent Sandbox server reachable?)";
        return NULL;
    }
    json_t *res = json_array();
    json_t *all = json_pack("{s:s,s:s,s:s,s:s}", "uri", SANDBOXES_URI, "name", "sandboxes",
                            "description", "Every sandbox: name, claim, pool, Ready and age",
                            "mimeType", "application/json");
    if (!res || !all || json_array_append_new(res, all) < 0) {
        json_decref(res);
        json_decref(summaries);
        return NULL;
    }
    size_t i;
    json_t *s;
    json_array_foreach (json_object_get(summaries, "sandboxes"), i, s) {
        const char *name = json_string_value(json_object_get(s, "name"));
        const char *ns = json_string_value(json_object_get(s, "namespace"));
        char *uri = strdup_printf(SANDBOXES_URI "/%s/%s/files/", ns, name);
        char *title = strdup_printf("Files of sandbox %s", name);
        json_t *r = uri && title ? json_pack("{s:s,s:s,s:s,s:s}", "uri", uri, "name", name, "title",
                                             title, "mimeType", "application/json")
                                 : NULL;
        free(uri);
        free(title);
        if (r)
            json_array_append_new(res, r);
    }
    json_decref(summaries);
    return json_pack("{s:o}", "resources", res);
}

json_t *mcp_resource_templates_list(void)
{
    return json_pack("{s:[{s:s,s:s,s:s}]}", "resourceTemplates", "uriTemplate", FILES_TEMPLATE,
                     "name", "sandbox-file", "description",
                     "A file or directory of a sandbox (directories read as a JSON listing)");
}

static json_t *contents(const char *uri, const char *mime, json_t *text_or_blob, bool blob)
{
    return json_pack("{s:[{s:s,s:s,s:o}]}", "contents", "uri", uri, "mimeType", mime,
                     blob ? "blob" : "text", text_or_blob);
}

/* Reads the file or directory `path` of sandbox ns/name as a resource. */
static json_t *read_file_resource(const char *uri, const char *ns, const char *name,
                                  const char *path, char **ret_message)
{
    _cleanup_(asb_client_freep) asb_client *cl = NULL;
    _cleanup_(asb_sandbox_freep) asb_sandbox *sb = NULL;
    if (mcp_client_new(&cl, ret_message) < 0 ||
        mcp_sandbox_open(&sb, cl, ns, name, ret_message) < 0)
        return NULL;
    asb_sandbox_file_entry *ents = NULL;
    size_t n = 0;
    if (!*path || path[strlen(path) - 1] == '/' ||
        asb_sandbox_file_list(&ents, &n, sb, path) == ASB_OK) {
        if (!ents && asb_sandbox_file_list(&ents, &n, sb, *path ? path : "/") != ASB_OK) {
            *ret_message = mcp_file_error("read", path);
            return NULL;
        }
        json_t *arr = json_array();
        for (size_t i = 0; arr && i < n; i++)
            json_array_append_new(
                arr,
                json_pack("{s:s,s:I,s:s}", "name", ents[i].name, "size", (json_int_t)ents[i].size,
                          "type", ents[i].type == ASB_SANDBOX_DIRECTORY ? "directory" : "file"));
        asb_sandbox_file_entries_free(ents, n);
        char *text = arr ? json_dumps(arr, JSON_COMPACT) : NULL;
        json_decref(arr);
        json_t *r = text ? contents(uri, "application/json", json_string(text), false) : NULL;
        free(text);
        return r;
    }
    char *data = NULL;
    size_t len = 0;
    if (asb_sandbox_file_read_buffer(&data, &len, sb, path) != ASB_OK) {
        *ret_message = mcp_file_error("read", path);
        return NULL;
    }
    json_t *text = json_stringn(data, len), *r = NULL;
    if (text) {
        r = contents(uri, "text/plain", text, false);
    } else {
        char *b64 = NULL;
        if (base64_encode(data, len, &b64, NULL) == 0)
            r = contents(uri, "application/octet-stream", json_string(b64), true);
        free(b64);
    }
    asb_free(data);
    return r;
}

json_t *mcp_resources_read(mcp_call *call, const json_t *params, int *ret_code, char **ret_message)
{
    const char *uri = json_string_value(json_object_get(params, "uri"));
    *ret_code = MCP_ERR_RESOURCE_NOT_FOUND;
    if (!uri) {
        *ret_code = JSONRPC_ERR_INVALID_PARAMS;
        *ret_message = strdup("resources/read needs params.uri");
        return NULL;
    }
    if (strcmp(uri, SANDBOXES_URI) == 0) {
        _cleanup_(asb_client_freep) asb_client *cl = NULL;
        json_t *s = NULL;
        if (mcp_client_new(&cl, ret_message) < 0 || !(s = sandbox_summaries(cl, ret_message))) {
            *ret_code = JSONRPC_ERR_INTERNAL;
            return NULL;
        }
        char *text = json_dumps(s, JSON_COMPACT);
        json_decref(s);
        json_t *r = text ? contents(uri, "application/json", json_string(text), false) : NULL;
        free(text);
        return r;
    }
    /* asb://sandboxes/NS/NAME/files/PATH */
    const char *p = strncmp(uri, SANDBOXES_URI "/", strlen(SANDBOXES_URI) + 1) == 0
                        ? uri + strlen(SANDBOXES_URI) + 1
                        : NULL;
    const char *slash1 = p ? strchr(p, '/') : NULL;
    const char *slash2 = slash1 ? strchr(slash1 + 1, '/') : NULL;
    if (!slash2 || slash1 == p || slash2 == slash1 + 1 || strncmp(slash2, "/files/", 7) != 0) {
        *ret_message =
            strdup_printf("unknown resource %s (known: " SANDBOXES_URI " and " FILES_TEMPLATE ")", uri);
        return NULL;
    }
    _cleanup_free_ char *ns = strndup(p, (size_t)(slash1 - p));
    _cleanup_free_ char *name = strndup(slash1 + 1, (size_t)(slash2 - slash1 - 1));
    if (!ns || !name)
        return NULL;
    /* Every failure here (unknown sandbox, missing file) is a resource that cannot be had. */
    return read_file_resource(uri, ns, name, slash2 + 7, ret_message);
}
