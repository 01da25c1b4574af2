/* Prometheus metrics of `asb serve` (local-metrics.h). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "asb/sandbox.h"
#include "basic/buf.h"
#include "basic/macro.h"
#include "basic/time-util.h"
#include "local/metrics/local-metrics.h"
#include "local/metrics/local-usage.h"
#include "shared/router-stats.h"
#include "reconcile/reconcile.h"

/* Seconds: from a warm adoption (milliseconds) to a cold start pulling an image (minutes). */
static const double latency_bounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                        1,     2.5,  5,     10,   30,  60,   300};
#define NBOUNDS ELEMENTSOF(latency_bounds)

typedef struct histogram {
    const char *label; /* the label's value; NULL: an unused slot */
    unsigned long long buckets[NBOUNDS];
    unsigned long long count;
    double sum;
} histogram;

/* A few label values each, known in advance: small fixed tables, no allocation. */
#define MAX_SERIES 8

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static histogram claim_ready[MAX_SERIES];    /* by launch_type */
static histogram reconcile_time[MAX_SERIES]; /* by controller */
static unsigned long long reconcile_errors[MAX_SERIES];
static histogram store_sync[1] = {{.label = ""}};
static unsigned long long dns_queries, dns_blocked;

/* The series for label (a static string or one copied into the slot's own storage). Caller
 * holds the lock. NULL when the table is full. */
static histogram *series(histogram *h, const char *label)
{
    for (size_t i = 0; i < MAX_SERIES; i++) {
        if (!h[i].label) {
            h[i].label = label;
            return &h[i];
        }
        if (strcmp(h[i].label, label) == 0)
            return &h[i];
    }
    return NULL;
}

static void observe(histogram *h, double v)
{
    if (!h)
        return;
    for (size_t i = 0; i < NBOUNDS; i++)
        if (v <= latency_bounds[i])
            h->buckets[i]++;
    h->count++;
    h->sum += v;
}

/* Label values are a closed set: anything else is counted as "other". */
static const char *launch_label(const char *lt)
{
    return strcmp(lt, "warm") == 0 ? "warm" : strcmp(lt, "cold") == 0 ? "cold" : "other";
}

void local_metrics_claim_ready(const json_t *claim, const char *ready_at, const char *launch_type)
{
    static const char *const starts[] = {"agents.x-k8s.io/client-first-requested-at",
                                         "agents.x-k8s.io/controller-first-observed-at"};
    const json_t *ann = json_object_get(json_object_get(claim, "metadata"), "annotations");
    int64_t end, start = -1;
    if (reconcile_parse_time(ready_at, &end) < 0)
        return;
    for (size_t i = 0; i < ELEMENTSOF(starts) && start < 0; i++)
        if (reconcile_parse_time(json_string_value(json_object_get(ann, starts[i])), &start) < 0)
            start = -1;
    if (start < 0 && reconcile_parse_time(api_meta_string(claim, "creationTimestamp"), &start) < 0)
        return;
    double s = end > start ? (double)(end - start) / 1e6 : 0;
    pthread_mutex_lock(&lock);
    observe(series(claim_ready, launch_label(launch_type)), s);
    pthread_mutex_unlock(&lock);
}

void local_metrics_reconcile(const char *controller, double seconds, bool error)
{
    pthread_mutex_lock(&lock);
    histogram *h = series(reconcile_time, controller);
    observe(h, seconds);
    if (h && error)
        reconcile_errors[h - reconcile_time]++;
    pthread_mutex_unlock(&lock);
}

void local_metrics_reconcile_error(const char *controller)
{
    pthread_mutex_lock(&lock);
    histogram *h = series(reconcile_time, controller);
    if (h)
        reconcile_errors[h - reconcile_time]++;
    pthread_mutex_unlock(&lock);
}

void local_metrics_store_sync(double seconds)
{
    pthread_mutex_lock(&lock);
    observe(store_sync, seconds);
    pthread_mutex_unlock(&lock);
}

void local_metrics_dns_query(bool blocked)
{
    pthread_mutex_lock(&lock);
    dns_queries++;
    if (blocked)
        dns_blocked++;
    pthread_mutex_unlock(&lock);
}

static int header(buf *out, const char *name, const char *type, const char *help)
{
    return buf_appendf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A metric with one unlabelled sample: its header and its value. */
static int render_single(buf *out, const char *name, const char *type, const char *help,
                         unsigned long long value)
{
    int r = header(out, name, type, help);
    return r < 0 ? r : buf_appendf(out, "%s %llu\n", name, value);
}

/* One histogram series; label "" renders without labels. */
static int render_histogram(buf *out, const char *name, const char *label_name, const histogram *h)
{
    char lbl[128] = "";
    if (h->label[0])
        snprintf(lbl, sizeof(lbl), "%s=\"%s\",", label_name, h->label);
    int r = 0;
    for (size_t i = 0; i < NBOUNDS && r >= 0; i++)
        r = buf_appendf(out, "%s_bucket{%sle=\"%g\"} %llu\n", name, lbl, latency_bounds[i],
                        h->buckets[i]);
    if (r >= 0)
        r = buf_appendf(out, "%s_bucket{%sle=\"+Inf\"} %llu\n", name, lbl, h->count);
    if (lbl[0])
        lbl[strlen(lbl) - 1] = '\0';
    const char *o = lbl[0] ? "{" : "", *c = lbl[0] ? "}" : "";
    if (r >= 0)
        r = buf_appendf(out, "%s_sum%s%s%s %.9g\n%s_count%s%s%s %llu\n", name, o, lbl, c, h->sum,
                        name, o, lbl, c, h->count);
    return r < 0 ? r : 0;
}

/* The n series of h in use (a table ends at its first unused slot). */
static int render_histograms(buf *out, const char *name, const char *label_name, const histogram *h,
                             size_t n, const char *help)
{
    int r = header(out, name, "histogram", help);
    for (size_t i = 0; i < n && h[i].label && r >= 0; i++)
        r = render_histogram(out, name, label_name, &h[i]);
    return r < 0 ? r : 0;
}

/* Counters and histograms, under the lock. */
static int render_observed(buf *out)
{
    int r = render_histograms(out, "asb_claim_ready_seconds", "launch_type", claim_ready,
                              MAX_SERIES, "Time from a claim's first request to its first Ready.");
    if (r >= 0)
        r = render_histograms(out, "asb_reconcile_duration_seconds", "controller", reconcile_time,
                              MAX_SERIES, "Duration of one reconcile pass.");
    if (r >= 0)
        r = render_histograms(out, "asb_store_wal_sync_duration_seconds", "", store_sync,
                              ELEMENTSOF(store_sync),
                              "Duration of one fdatasync of the store's WAL (a group commit).");
    if (r >= 0)
        r = header(out, "asb_reconcile_errors_total", "counter", "Reconcile passes that failed.");
    for (size_t i = 0; i < MAX_SERIES && reconcile_time[i].label && r >= 0; i++)
        r = buf_appendf(out, "asb_reconcile_errors_total{controller=\"%s\"} %llu\n",
                        reconcile_time[i].label, reconcile_errors[i]);
    if (r >= 0)
        r = render_single(out, "asb_dns_queries_total", "counter", "DNS queries from sandboxes.",
                          dns_queries);
    if (r >= 0)
        r = render_single(out, "asb_dns_queries_blocked_total", "counter",
                          "DNS queries from sandboxes not relayed (malformed, over budget).",
                          dns_blocked);
    return r < 0 ? r : 0;
}

/* Sandboxes by phase: libasb's classification (asb_sandbox_phase_of), the one the SDK, the CLI
 * and the router share, indexed by asb_sandbox_phase. */
static const char *const phases[] = {"Pending",   "Ready",   "Finished",
                                     "Suspended", "Stopped", "FinishedGone"};

static asb_sandbox_phase sandbox_phase(const json_t *sb)
{
    asb_sandbox_phase p = ASB_SANDBOX_PENDING;
    _cleanup_free_ char *text = json_dumps(sb, JSON_COMPACT);
    if (!text || asb_sandbox_phase_of(&p, NULL, text) != ASB_OK || (size_t)p >= ELEMENTSOF(phases))
        p = ASB_SANDBOX_PENDING;
    return p;
}

static int append_label_value(buf *out, const char *v);

/* `{namespace="ns",name="n"}` of an object. */
static int object_labels(buf *out, const json_t *obj)
{
    int r = buf_append_str(out, "{namespace=\"");
    if (r >= 0)
        r = append_label_value(out, api_meta_string(obj, "namespace"));
    if (r >= 0)
        r = buf_append_str(out, "\",name=\"");
    if (r >= 0)
        r = append_label_value(out, api_meta_string(obj, "name"));
    return r < 0 ? r : buf_append_str(out, "\"}");
}

/* What each running sandbox uses, from its cgroups (local-usage.h): the figures of
 * `asb top sandboxes`, as a counter of CPU seconds and a gauge of the memory working set. */
static int render_usage(buf *out, const json_t *sandboxes)
{
    size_t n = json_array_size(sandboxes), i;
    _cleanup_free_ local_usage *u = calloc(n + 1, sizeof(*u));
    _cleanup_free_ bool *ok = calloc(n + 1, sizeof(*ok));
    if (!u || !ok)
        return -ENOMEM;
    for (i = 0; i < n; i++)
        ok[i] = local_usage_read(api_meta_string(json_array_get(sandboxes, i), "uid") ?: "",
                                 &u[i]) == 0;
    int r = header(out, "asb_sandbox_cpu_usage_seconds_total", "counter",
                   "CPU time used by each running sandbox's container.");
    for (i = 0; i < n && r >= 0; i++)
        if (ok[i] && (r = buf_append_str(out, "asb_sandbox_cpu_usage_seconds_total")) >= 0 &&
            (r = object_labels(out, json_array_get(sandboxes, i))) >= 0)
            r = buf_appendf(out, " %.9f\n", (double)u[i].cpu_ns / 1e9);
    if (r >= 0)
        r = header(out, "asb_sandbox_memory_working_set_bytes", "gauge",
                   "Memory working set (usage minus inactive file pages) of each running sandbox.");
    for (i = 0; i < n && r >= 0; i++)
        if (ok[i] && (r = buf_append_str(out, "asb_sandbox_memory_working_set_bytes")) >= 0 &&
            (r = object_labels(out, json_array_get(sandboxes, i))) >= 0)
            r = buf_appendf(out, " %llu\n", (unsigned long long)u[i].memory);
    return r < 0 ? r : 0;
}

static int render_sandboxes(const json_t *items, buf *out)
{
    unsigned long long by_phase[ELEMENTSOF(phases)] = {0}, blocked = 0;
    size_t i;
    const json_t *sb;
    json_array_foreach (items, i, sb) {
        by_phase[sandbox_phase(sb)]++;
        json_int_t b = json_integer_value(
            json_object_get(json_object_get(sb, "status"), "blockedConnections"));
        blocked += b > 0 ? (unsigned long long)b : 0;
    }
    int r = render_usage(out, items);
    if (r >= 0)
        r = header(out, "asb_sandboxes", "gauge", "Sandboxes by phase.");
    for (size_t j = 0; j < ELEMENTSOF(phases) && r >= 0; j++)
        r = buf_appendf(out, "asb_sandboxes{phase=\"%s\"} %llu\n", phases[j], by_phase[j]);
    if (r >= 0)
        r = render_single(out, "asb_blocked_connections", "gauge",
                          "Connections refused by network policy, summed over live sandboxes.",
                          blocked);
    return r < 0 ? r : 0;
}

/* Label values from object names: escape as the format wants (\\, \", \n). */
static int append_label_value(buf *out, const char *v)
{
    int r = 0;
    for (const char *p = v ? v : ""; *p && r >= 0; p++)
        r = *p == '\\'   ? buf_append_str(out, "\\\\")
            : *p == '"'  ? buf_append_str(out, "\\\"")
            : *p == '\n' ? buf_append_str(out, "\\n")
                         : buf_append_byte(out, *p);
    return r;
}

static int render_pools(const json_t *items, buf *out)
{
    int r = 0;
    static const char *const gauges[][3] = {
        {"asb_warmpool_ready_replicas", "readyReplicas", "Ready sandboxes of a warm pool."},
        {"asb_warmpool_desired_replicas", "replicas", "Sandboxes a warm pool wants."},
    };
    for (size_t g = 0; g < ELEMENTSOF(gauges) && r >= 0; g++) {
        r = header(out, gauges[g][0], "gauge", gauges[g][2]);
        size_t i;
        const json_t *pool;
        json_array_foreach (items, i, pool) {
            const json_t *src = json_object_get(pool, g == 0 ? "status" : "spec");
            json_int_t v = json_integer_value(json_object_get(src, gauges[g][1]));
            if (r >= 0)
                r = buf_appendf(out, "%s{namespace=\"", gauges[g][0]);
            if (r >= 0)
                r = append_label_value(out, api_meta_string(pool, "namespace"));
            if (r >= 0)
                r = buf_append_str(out, "\",warmpool=\"");
            if (r >= 0)
                r = append_label_value(out, api_meta_string(pool, "name"));
            if (r >= 0)
                r = buf_appendf(out, "\"} %lld\n", (long long)v);
            if (r < 0)
                break;
        }
    }
    return r < 0 ? r : 0;
}

/* The router's counters (shared/router-stats.h): requests by code, and their latency. */
static int render_router(buf *out)
{
    _cleanup_free_ router_stats *st = malloc(sizeof(*st));
    if (!st)
        return -ENOMEM;
    router_stats_snapshot(st);
    int r = header(out, "asb_router_requests_total", "counter",
                   "Requests the router answered, by HTTP status code.");
    for (size_t i = 0; i < ROUTER_STATS_NCODES && r >= 0; i++)
        if (st->codes[i])
            r = buf_appendf(out, "asb_router_requests_total{code=\"%zu\"} %llu\n", i,
                            (unsigned long long)st->codes[i]);
    const char *name = "asb_router_request_duration_seconds";
    if (r >= 0)
        r = header(out, name, "histogram",
                   "Time from a request's head to its response head, through the router.");
    unsigned long long cum = 0;
    for (size_t i = 0; i < ROUTER_STATS_NBOUNDS && r >= 0; i++) {
        cum += st->buckets[i];
        r = buf_appendf(out, "%s_bucket{le=\"%g\"} %llu\n", name, router_stats_bounds[i], cum);
    }
    if (r >= 0)
        r = buf_appendf(out, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name,
                        (unsigned long long)st->count, name, (double)st->sum_us / 1e6, name,
                        (unsigned long long)st->count);
    return r < 0 ? r : 0;
}

int local_metrics_render(const json_t *pools, const json_t *sandboxes, char **ret_text,
                         size_t *ret_len)
{
    _cleanup_buf_ buf out = BUF_INIT;
    pthread_mutex_lock(&lock);
    int r = render_observed(&out);
    pthread_mutex_unlock(&lock);
    if (r >= 0)
        r = render_router(&out);
    if (r >= 0)
        r = render_pools(pools, &out);
    if (r >= 0)
        r = render_sandboxes(sandboxes, &out);
    if (r < 0)
        return r;
    *ret_text = buf_steal(&out, ret_len);
    return *ret_text ? 0 : -ENOMEM;
}
