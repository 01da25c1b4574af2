/* Discovery documents (/version, /api, /api/v1, /apis, /apis/<group>, /apis/<group>/<version>:
 * the agents groups at v1beta1, events.k8s.io at v1) so kubectl-style and official clients find
 * our kinds. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "asb/common.h"
#include "local/apiserver/local-apiserver-internal.h"

/* The version a group is served at: the agents groups at API_VERSION, events.k8s.io at v1;
 * NULL for a group we do not serve. */
static const char *served_version(const char *group)
{
    if (strcmp(group, API_GROUP_EVENTS) == 0)
        return API_VERSION_EVENTS;
    return api_group_known(group) ? API_VERSION : NULL;
}

static json_t *group_version(const char *group)
{
    const char *v = served_version(group);
    return json_pack("{s:s++,s:s}", "groupVersion", group, "/", v, "version", v);
}

static json_t *api_group(const char *group)
{
    return json_pack("{s:s,s:s,s:s,s:[o],s:o}", "kind", "APIGroup", "apiVersion", "v1", "name",
                     group, "versions", group_version(group), "preferredVersion",
                     group_version(group));
}

/* One kind's discovery entries (the kind, its status and scale subresources) appended to res.
 * Events are written by the recorder only: read, watched and deleted. 0 or -ENOMEM. */
static int append_kind_resources(json_t *res, const api_kind *k)
{
    bool events = k == &api_event_kind;
    json_t *shorts = json_array();
    if (!shorts)
        return -ENOMEM;
    for (size_t j = 0; j < 2 && k->short_names[j]; j++)
        json_array_append_new(shorts, json_string(k->short_names[j]));
    json_t *verbs = events
                        ? json_pack("[sssss]", "delete", "deletecollection", "get", "list", "watch")
                        : json_pack("[ssssssss]", "create", "delete", "deletecollection", "get",
                                    "list", "patch", "update", "watch");
    if (!verbs) {
        json_decref(shorts);
        return -ENOMEM;
    }
    if (json_array_append_new(res, json_pack("{s:s,s:s,s:b,s:s,s:o,s:o,s:s}", "name", k->plural,
                                             "singularName", k->singular, "namespaced", 1, "kind",
                                             k->kind, "verbs", verbs, "shortNames", shorts,
                                             "storageVersionHash", "")) < 0)
        return -ENOMEM;
    if (k->has_status) {
        char name[128];
        snprintf(name, sizeof(name), "%s/status", k->plural);
        if (json_array_append_new(res, json_pack("{s:s,s:s,s:b,s:s,s:[sss]}", "name", name,
                                                 "singularName", "", "namespaced", 1, "kind",
                                                 k->kind, "verbs", "get", "patch", "update")) < 0)
            return -ENOMEM;
    }
    if (k->has_scale) {
        char name[128];
        snprintf(name, sizeof(name), "%s/scale", k->plural);
        if (json_array_append_new(res, json_pack("{s:s,s:s,s:b,s:s,s:s,s:s,s:[sss]}", "name", name,
                                                 "singularName", "", "namespaced", 1, "group",
                                                 "autoscaling", "version", "v1", "kind", "Scale",
                                                 "verbs", "get", "patch", "update")) < 0)
            return -ENOMEM;
    }
    return 0;
}

/* The APIResourceList of a served group; NULL on -ENOMEM (a list with a kind missing would
 * mislead clients). */
static json_t *resource_list(const char *group)
{
    json_t *res = json_array();
    int r = res ? 0 : -ENOMEM;
    if (r == 0 && strcmp(group, API_GROUP_EVENTS) == 0)
        r = append_kind_resources(res, &api_event_kind);
    for (size_t i = 0; r == 0 && i < api_n_kinds; i++)
        if (strcmp(api_kinds[i].group, group) == 0)
            r = append_kind_resources(res, &api_kinds[i]);
    if (r < 0) {
        json_decref(res);
        return NULL;
    }
    return json_pack("{s:s,s:s,s:s++,s:o}", "kind", "APIResourceList", "apiVersion", "v1",
                     "groupVersion", group, "/", served_version(group), "resources", res);
}

enum MHD_Result apiserver_discovery(local_apiserver *srv, struct MHD_Connection *c, char **seg,
                                    size_t n)
{
    if (n == 1 && strcmp(seg[0], "version") == 0)
        return reply_json(c, 200,
                          json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "major", "1",
                                    "minor", "31", "gitVersion", "v1.31.0-asb", "gitCommit", "",
                                    "gitTreeState", "clean", "buildDate", "", "goVersion", "",
                                    "compiler", "gcc", "platform", "linux/amd64",
                                    /* what `asb version` prints as the server's version */
                                    "asbVersion", ASB_VERSION));
    if (n == 1 && (strcmp(seg[0], "healthz") == 0 || strcmp(seg[0], "readyz") == 0 ||
                   strcmp(seg[0], "livez") == 0)) {
        struct MHD_Response *r = MHD_create_response_from_buffer(2, "ok", MHD_RESPMEM_PERSISTENT);
        if (!r)
            return MHD_NO;
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain");
        enum MHD_Result ret = MHD_queue_response(c, 200, r);
        MHD_destroy_response(r);
        return ret;
    }
    if (n == 1 && strcmp(seg[0], "api") == 0) {
        char addr[64];
        snprintf(addr, sizeof(addr), "127.0.0.1:%u", srv->port);
        return reply_json(c, 200,
                          json_pack("{s:s,s:[s],s:[{s:s,s:s}]}", "kind", "APIVersions", "versions",
                                    "v1", "serverAddressByClientCIDRs", "clientCIDR", "0.0.0.0/0",
                                    "serverAddress", addr));
    }
    if (n == 2 && strcmp(seg[0], "api") == 0 && strcmp(seg[1], "v1") == 0)
        return reply_json(c, 200,
                          json_pack("{s:s,s:s,s:[]}", "kind", "APIResourceList", "groupVersion",
                                    "v1", "resources"));
    if (n == 1 && strcmp(seg[0], "apis") == 0)
        return reply_json(c, 200,
                          json_pack("{s:s,s:s,s:[ooo]}", "kind", "APIGroupList", "apiVersion", "v1",
                                    "groups", api_group(API_GROUP_CORE), api_group(API_GROUP_EXT),
                                    api_group(API_GROUP_EVENTS)));
    if (n >= 2 && strcmp(seg[0], "apis") == 0 && served_version(seg[1])) {
        if (n == 2)
            return reply_json(c, 200, api_group(seg[1]));
        if (n == 3 && strcmp(seg[2], served_version(seg[1])) == 0)
            return reply_json(c, 200, resource_list(seg[1]));
    }
    return reply_status(c, KUBE_REASON_NOT_FOUND, NULL, NULL,
                        "the server could not find the requested resource");
}
