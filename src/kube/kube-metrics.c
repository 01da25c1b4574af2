/* Prometheus text exposition of the controller's metrics (shared/spec/UPSTREAM.md §2.10 names). */
#include "kube/kube.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "basic/buf.h"
#include "basic/macro.h"
#include "reconcile/reconcile.h"

static const double creation_bounds[] = {50,    100,   250,   500,    1000,   2500,  5000,
                                         10000, 30000, 60000, 120000, 300000, 600000};
static const double claim_bounds[] = {100,  250,  500,   750,   1000,  1250,   1500,  2000,
                                      2500, 5000, 10000, 30000, 60000, 120000, 240000};

static void observe(kube_ctl *ctl, unsigned long long *buckets, const double *bounds, size_t n,
                    unsigned long long *count, double *sum, double ms)
{
    pthread_mutex_lock(&ctl->metrics.lock);
    for (size_t i = 0; i < n; i++)
        if (ms <= bounds[i])
            buckets[i]++;
    (*count)++;
    *sum += ms;
    pthread_mutex_unlock(&ctl->metrics.lock);
}

void kube_metrics_observe_creation(kube_ctl *ctl, double ms)
{
    observe(ctl, ctl->metrics.creation_buckets, creation_bounds, ELEMENTSOF(creation_bounds),
            &ctl->metrics.creation_count, &ctl->metrics.creation_sum, ms);
}

void kube_metrics_observe_claim(kube_ctl *ctl, double ms)
{
    observe(ctl, ctl->metrics.claim_buckets, claim_bounds, ELEMENTSOF(claim_bounds),
            &ctl->metrics.claim_count, &ctl->metrics.claim_sum, ms);
}

void kube_metrics_claim_created(kube_ctl *ctl, const char *ns, const char *tmpl,
                                const char *launch_type, const char *pool, bool ready,
                                const char *created_by)
{
    char *key = NULL;
    if (asprintf(&key,
                 "namespace=\"%s\",sandbox_template=\"%s\",launch_type=\"%s\",warmpool_name=\"%s\","
                 "pod_condition=\"%s\",created_by=\"%s\"",
                 ns ?: "", tmpl ?: "", launch_type, pool ?: "", ready ? "ready" : "not_ready",
                 created_by ?: "") < 0)
        return;
    pthread_mutex_lock(&ctl->metrics.lock);
    if (!ctl->metrics.claim_creation)
        ctl->metrics.claim_creation = json_object();
    json_t *m = ctl->metrics.claim_creation;
    json_object_set_new(m, key, json_integer(json_integer_value(json_object_get(m, key)) + 1));
    pthread_mutex_unlock(&ctl->metrics.lock);
    free(key);
}

/* Appends printf text to out unless an earlier append failed; *err the first failure. */
static void put(buf *out, int *err, const char *fmt, ...) _printf_(3, 4);
static void put(buf *out, int *err, const char *fmt, ...)
{
    if (*err < 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    *err = buf_appendv(out, fmt, ap);
    va_end(ap);
}

static void histogram(buf *out, int *err, kube_ctl *ctl, const char *name, const char *help,
                      const unsigned long long *b, const double *bounds, size_t n,
                      unsigned long long count, double sum)
{
    put(out, err, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    if (!count)
        return;
    for (size_t i = 0; i < n; i++)
        put(out, err, "%s_bucket{le=\"%g\"} %llu\n", name, bounds[i], b[i]);
    put(out, err, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %g\n%s_count %llu\n", name, count, name, sum,
        name, count);
}

static const char *lbl(const json_t *o, const char *k)
{
    return json_string_value(
        json_object_get(json_object_get(json_object_get(o, "metadata"), "labels"), k));
}

/* agent_sandbox_build_info. */
static void render_build_info(buf *out, int *err)
{
    put(out, err,
        "# HELP agent_sandbox_build_info Build information.\n# TYPE agent_sandbox_build_info "
        "gauge\n"
        "agent_sandbox_build_info{git_version=\"0.1.0\",git_commit=\"unknown\",build_date=\"%s\","
        "go_version=\"none\",compiler=\"cc\",platform=\"linux/%s\"} 1\n",
        __DATE__,
#if defined(__x86_64__)
        "amd64"
#elif defined(__aarch64__)
        "arm64"
#else
        "unknown"
#endif
    );
}

/* agent_sandboxes: collected from the cache at scrape time. */
static void render_sandboxes(kube_ctl *ctl, buf *out, int *err)
{
    put(out, err, "# HELP agent_sandboxes Sandboxes by state.\n# TYPE agent_sandboxes gauge\n");
    _cleanup_json_ json_t *all = kube_informer_list(&ctl->inf[KR_SANDBOX], NULL, NULL, NULL);
    _cleanup_json_ json_t *groups = json_object();
    size_t i;
    json_t *s;
    json_array_foreach (all, i, s) {
        const json_t *ready = reconcile_condition(s, "Ready");
        const char *rs = json_string_value(json_object_get(ready, "status")) ?: "Unknown";
        const char *reason = json_string_value(json_object_get(ready, "reason")) ?: "";
        const json_t *ref = reconcile_controller_ref(s);
        const char *kind = json_string_value(json_object_get(ref, "kind"));
        const char *owned = kind && strcmp(kind, "SandboxClaim") == 0      ? "SandboxClaim"
                            : kind && strcmp(kind, "SandboxWarmPool") == 0 ? "SandboxWarmPool"
                                                                           : "None";
        const char *tmpl = json_string_value(
            json_object_get(json_object_get(json_object_get(s, "metadata"), "annotations"),
                            RECONCILE_ANN_TEMPLATE_REF));
        char *key = NULL;
        if (asprintf(&key,
                     "namespace=\"%s\",ready_condition=\"%s\",expired=\"%s\",launch_type=\"%s\","
                     "sandbox_template=\"%s\",owned_by=\"%s\",created_by=\"%s\"",
                     kube_str(s, "metadata.namespace") ?: "", rs,
                     strcmp(reason, "SandboxExpired") == 0 ? "true" : "false",
                     lbl(s, RECONCILE_LABEL_LAUNCH_TYPE) ?: "", tmpl ?: "", owned,
                     lbl(s, RECONCILE_LABEL_CREATED_BY) ?: "") < 0)
            continue;
        json_object_set_new(groups, key,
                            json_integer(json_integer_value(json_object_get(groups, key)) + 1));
        free(key);
    }
    const char *k;
    json_t *v;
    json_object_foreach (groups, k, v)
        put(out, err, "agent_sandboxes{%s} %lld\n", k, (long long)json_integer_value(v));
}

/* Claims bound, and the creation and claim startup latencies. */
static void render_claims(kube_ctl *ctl, buf *out, int *err)
{
    const char *k;
    json_t *v;
    put(out, err,
        "# HELP agent_sandbox_claim_creation_total Sandboxes bound to claims.\n"
        "# TYPE agent_sandbox_claim_creation_total counter\n");
    pthread_mutex_lock(&ctl->metrics.lock);
    json_object_foreach (ctl->metrics.claim_creation, k, v)
        put(out, err, "agent_sandbox_claim_creation_total{%s} %lld\n", k,
            (long long)json_integer_value(v));
    histogram(out, err, ctl, "agent_sandbox_creation_latency_ms",
              "Sandbox creation to Ready, in milliseconds.", ctl->metrics.creation_buckets,
              creation_bounds, ELEMENTSOF(creation_bounds), ctl->metrics.creation_count,
              ctl->metrics.creation_sum);
    histogram(out, err, ctl, "agent_sandbox_claim_controller_startup_latency_ms",
              "Claim first observed by the controller to Ready, in milliseconds.",
              ctl->metrics.claim_buckets, claim_bounds, ELEMENTSOF(claim_bounds),
              ctl->metrics.claim_count, ctl->metrics.claim_sum);
    pthread_mutex_unlock(&ctl->metrics.lock);
    put(out, err,
        "# HELP agent_sandbox_claim_startup_latency_ms Claim startup latency from the "
        "admission webhook annotation (no webhook here: no samples).\n"
        "# TYPE agent_sandbox_claim_startup_latency_ms histogram\n"
        "# HELP agent_sandbox_client_claim_startup_latency_ms Claim startup latency from the "
        "client annotation.\n# TYPE agent_sandbox_client_claim_startup_latency_ms histogram\n");
}

/* The controller's own series: reconciles, conflicts, informers, leadership. */
static void render_controller(kube_ctl *ctl, buf *out, int *err)
{
    static const char *const names[5] = {"sandbox", "sandboxtemplate", "sandboxwarmpool",
                                         "sandboxclaim", "sandboxsnapshot"};
    put(out, err,
        "# HELP controller_runtime_reconcile_total Reconciles per controller.\n"
        "# TYPE controller_runtime_reconcile_total counter\n");
    for (int j = 0; j < (ctl->opt.snapshots ? 5 : 4); j++)
        put(out, err,
            "controller_runtime_reconcile_total{controller=\"%s\",result=\"success\"} %llu\n"
            "controller_runtime_reconcile_total{controller=\"%s\",result=\"error\"} %llu\n",
            names[j],
            (unsigned long long)(atomic_load(&ctl->metrics.reconciles[j]) -
                                 atomic_load(&ctl->metrics.reconcile_errors[j])),
            names[j], (unsigned long long)atomic_load(&ctl->metrics.reconcile_errors[j]));
    put(out, err,
        "# HELP asb_controller_conflicts_total 409 answers to optimistic writes.\n"
        "# TYPE asb_controller_conflicts_total counter\nasb_controller_conflicts_total %llu\n",
        (unsigned long long)atomic_load(&ctl->metrics.conflicts));
    put(out, err,
        "# HELP asb_controller_informer_relists_total Lists per resource (initial and after "
        "410 Gone).\n# TYPE asb_controller_informer_relists_total counter\n");
    for (int r = 0; r < _KR_MAX; r++)
        if (ctl->inf[r].started)
            put(out, err, "asb_controller_informer_relists_total{resource=\"%s\"} %u\n",
                kube_resources[r].plural, atomic_load(&ctl->inf[r].relists));
    put(out, err,
        "# HELP asb_controller_informer_watches_total Watch requests per resource.\n"
        "# TYPE asb_controller_informer_watches_total counter\n");
    for (int r = 0; r < _KR_MAX; r++)
        if (ctl->inf[r].started)
            put(out, err, "asb_controller_informer_watches_total{resource=\"%s\"} %u\n",
                kube_resources[r].plural, atomic_load(&ctl->inf[r].watches));
    put(out, err,
        "# HELP asb_controller_cache_objects Objects in the informer cache.\n"
        "# TYPE asb_controller_cache_objects gauge\n");
    for (int r = 0; r < _KR_MAX; r++)
        if (ctl->inf[r].started)
            put(out, err, "asb_controller_cache_objects{resource=\"%s\"} %zu\n",
                kube_resources[r].plural, kube_informer_size(&ctl->inf[r]));
    put(out, err,
        "# HELP asb_controller_leader 1 while this process holds the lease.\n"
        "# TYPE asb_controller_leader gauge\nasb_controller_leader %d\n",
        atomic_load(&ctl->leading) ? 1 : 0);
}

char *kube_metrics_render(kube_ctl *ctl)
{
    _cleanup_buf_ buf out = BUF_INIT;
    int err = 0; /* the first failure (-ENOMEM); later appends are skipped */
    render_build_info(&out, &err);
    render_sandboxes(ctl, &out, &err);
    render_claims(ctl, &out, &err);
    render_controller(ctl, &out, &err);
    return err < 0 ? NULL : buf_steal(&out, NULL);
}
