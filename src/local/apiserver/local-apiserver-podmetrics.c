/* GET /apis/metrics.k8s.io/v1beta1/[namespaces/NS/]pods[/NAME]: what each running Sandbox uses,
 * as metrics-server's PodMetrics (CPU in nanocores over a window, memory working set in Ki; one
 * container, the sandbox's), read from its cgroups (local-usage.h). `asb top sandboxes` and
 * `asb describe` read it; a Sandbox without a running container has none (404 by name). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api-objects.h"
#include "api/api.h"
#include "basic/macro.h"
#include "basic/time-util.h"
#include "local/apiserver/local-apiserver-internal.h"
#include "local/metrics/local-usage.h"
#include "reconcile/reconcile.h"

#define METRICS_GROUP "metrics.k8s.io"
#define METRICS_API METRICS_GROUP "/v1beta1"

bool apiserver_is_podmetrics(char **seg, size_t n)
{
    return n >= 3 && strcmp(seg[0], "apis") == 0 && strcmp(seg[1], METRICS_GROUP) == 0 &&
           strcmp(seg[2], "v1beta1") == 0;
}

static json_t *pod_metrics(const json_t *sb, const local_usage *u, const char *now)
{
    const json_t *ctr = api_pod_template_container0(api_pod_template_of(sb));
    char cpu[32], mem[32], window[32];
    snprintf(cpu, sizeof(cpu), "%llun", (unsigned long long)u->nanocores);
    snprintf(mem, sizeof(mem), "%lluKi", (unsigned long long)(u->memory / 1024));
    snprintf(window, sizeof(window), "%llums", (unsigned long long)u->window_ms);
    return json_pack("{s:s,s:s,s:{s:s?,s:s?,s:s},s:s,s:s,s:[{s:s,s:{s:s,s:s}}]}", "kind",
                     "PodMetrics", "apiVersion", METRICS_API, "metadata", "name",
                     api_meta_string(sb, "name"), "namespace", api_meta_string(sb, "namespace"),
                     "creationTimestamp", now, "timestamp", now, "window", window, "containers",
                     "name", json_string_value(json_object_get(ctr, "name")) ?: "main", "usage",
                     "cpu", cpu, "memory", mem);
}

/* The PodMetrics of the sandboxes in items (those with a cgroup), appended to out. */
static int collect(json_t *items, json_t *out)
{
    size_t n = json_array_size(items);
    _cleanup_free_ const char **uids = calloc(n + 1, sizeof(*uids));
    _cleanup_free_ local_usage *u = calloc(n + 1, sizeof(*u));
    _cleanup_free_ int *ok = calloc(n + 1, sizeof(*ok));
    if (!uids || !u || !ok)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        uids[i] = api_meta_string(json_array_get(items, i), "uid") ?: "";
    int r = local_usage_rates(uids, n, u, ok);
    char now[40];
    reconcile_format_time((int64_t)now_usec(CLOCK_REALTIME), 0, now);
    for (size_t i = 0; r >= 0 && i < n; i++)
        if (ok[i] && json_array_append_new(out, pod_metrics(json_array_get(items, i), &u[i], now)))
            r = -ENOMEM;
    return r;
}

enum MHD_Result apiserver_podmetrics(local_apiserver *srv, struct MHD_Connection *c,
                                     const char *method, char **seg, size_t n)
{
    if (strcmp(method, "GET") != 0)
        return reply_status(c, KUBE_REASON_METHOD_NOT_ALLOWED, NULL, NULL,
                            "the server does not allow this method on the requested resource");
    const char *ns = NULL, *name = NULL;
    if (n == 6 && strcmp(seg[3], "namespaces") == 0 && strcmp(seg[5], "pods") == 0)
        ns = seg[4];
    else if (n == 7 && strcmp(seg[3], "namespaces") == 0 && strcmp(seg[5], "pods") == 0) {
        ns = seg[4];
        name = seg[6];
    } else if (!(n == 4 && strcmp(seg[3], "pods") == 0))
        return reply_status(c, KUBE_REASON_NOT_FOUND, NULL, NULL,
                            "the server could not find the requested resource");
    json_t *items = NULL;
    uint64_t rv;
    if (local_store_list(srv->store, api_kind_by_name("Sandbox"), ns, &items, &rv) < 0)
        return reply_status(c, KUBE_REASON_INTERNAL_ERROR, NULL, NULL, "cannot list sandboxes");
    for (size_t i = json_array_size(items); name && i-- > 0;)
        if (strcmp(api_meta_string(json_array_get(items, i), "name") ?: "", name) != 0)
            json_array_remove(items, i);
    json_t *out = json_array();
    int r = out ? collect(items, out) : -ENOMEM;
    json_decref(items);
    if (r < 0) {
        json_decref(out);
        return reply_status(c, KUBE_REASON_INTERNAL_ERROR, NULL, NULL, "cannot read the usage");
    }
    if (name) {
        json_t *one = json_incref(json_array_get(out, 0));
        json_decref(out);
        if (!one)
            return reply_status(c, KUBE_REASON_NOT_FOUND, NULL, NULL,
                                "podmetrics.metrics.k8s.io \"%s\" not found", name);
        return reply_json(c, 200, one);
    }
    return reply_json(c, 200,
                      json_pack("{s:s,s:s,s:{},s:o}", "kind", "PodMetricsList", "apiVersion",
                                METRICS_API, "metadata", "items", out));
}
