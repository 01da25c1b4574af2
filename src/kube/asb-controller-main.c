/* asb-controller: the Kubernetes controller of Agent Sandbox (docs/kubernetes.md). Flags are
 * named as upstream's where they mean the same (shared/spec/UPSTREAM.md §2.9). */
#include <curl/curl.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "basic/macro.h"
#include "basic/time-util.h"
#include "kube/kube-http.h"
#include "kube/kube.h"
#include "reconcile/reconcile.h"
#include "shared/log.h"
#include "shared/main-usage.h"

typedef enum flag_type { F_BOOL, F_STR, F_INT, F_DUR, F_IGNORED } flag_type;

typedef struct flag {
    const char *name;
    flag_type type;
    void *ptr;
    const char *help;
} flag;

static bool opt_version, opt_help, opt_extensions, opt_snapshots, opt_leader_elect = true, opt_eviction = true;
static bool opt_zap_devel, opt_disable_claim_events, opt_cache_selectors;
static const char *opt_kubeconfig, *opt_context, *opt_cluster_domain = "cluster.local";
static const char *opt_metrics = ":8080", *opt_health = ":8081", *opt_le_ns = "";
static const char *opt_le_id = "agent-sandbox-controller", *opt_zap_level = "info";
static const char *opt_zap_encoder = "json";
static long opt_sb_workers = 100, opt_claim_workers = 50, opt_pool_workers = 1;
static long opt_tmpl_workers = 1, opt_max_batch = 300;
static int64_t opt_grace = 5LL * 60 * 1000000, opt_lease = 15000000, opt_renew = 10000000;
static int64_t opt_retry = 2000000;
static bool opt_ignored_bool;
static const char *opt_ignored_str;

static const flag flags[] = {
    {"version", F_BOOL, &opt_version, "print the version and exit"},
    {"help", F_BOOL, &opt_help, "this text"},
    {"kubeconfig", F_STR, &opt_kubeconfig,
     "kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)"},
    {"context", F_STR, &opt_context, "kubeconfig context (default: current-context)"},
    {"cluster-domain", F_STR, &opt_cluster_domain, "cluster DNS domain for status.serviceFQDN"},
    {"metrics-bind-address", F_STR, &opt_metrics, "Prometheus /metrics address (0 = off)"},
    {"health-probe-bind-address", F_STR, &opt_health, "/healthz and /readyz address (0 = off)"},
    {"leader-elect", F_BOOL, &opt_leader_elect, "leader election with a coordination.k8s.io Lease"},
    {"leader-election-namespace", F_STR, &opt_le_ns,
     "namespace of the Lease (default: the client's)"},
    {"leader-election-id", F_STR, &opt_le_id, "name of the Lease"},
    {"leader-election-lease-duration", F_DUR, &opt_lease, "lease duration (15s)"},
    {"leader-election-renew-deadline", F_DUR, &opt_renew, "renew deadline (10s)"},
    {"leader-election-retry-period", F_DUR, &opt_retry, "retry period (2s)"},
    {"extensions", F_BOOL, &opt_extensions,
     "run the SandboxTemplate, SandboxWarmPool and SandboxClaim reconcilers"},
    {"snapshots", F_BOOL, &opt_snapshots,
     "map SandboxSnapshots to snapshot.storage.k8s.io VolumeSnapshots (needs their CRDs)"},
    {"sandbox-concurrent-workers", F_INT, &opt_sb_workers, "Sandbox workers (100)"},
    {"sandbox-claim-concurrent-workers", F_INT, &opt_claim_workers, "SandboxClaim workers (50)"},
    {"sandbox-warm-pool-concurrent-workers", F_INT, &opt_pool_workers,
     "SandboxWarmPool workers (1)"},
    {"sandbox-template-concurrent-workers", F_INT, &opt_tmpl_workers,
     "SandboxTemplate workers (1)"},
    {"sandbox-warm-pool-max-batch-size", F_INT, &opt_max_batch,
     "max creates/deletes per pool pass (300)"},
    {"sandbox-warm-pool-readiness-grace-period", F_DUR, &opt_grace,
     "not-Ready pool members are replaced after this (5m)"},
    {"enable-warm-pool-eviction", F_BOOL, &opt_eviction, "safe-to-evict annotation on warm pods"},
    {"zap-log-level", F_STR, &opt_zap_level, "debug, info, error"},
    {"zap-devel", F_BOOL, &opt_zap_devel, "console logs at debug level"},
    {"zap-encoder", F_STR, &opt_zap_encoder, "json or console"},
    /* Accepted for compatibility with upstream's manifests; no effect here (docs/kubernetes.md). */
    {"webhook-port", F_IGNORED, &opt_ignored_str, NULL},
    {"webhook-cert-dir", F_IGNORED, &opt_ignored_str, NULL},
    {"webhook-cert-name", F_IGNORED, &opt_ignored_str, NULL},
    {"webhook-key-name", F_IGNORED, &opt_ignored_str, NULL},
    {"webhook-service-name", F_IGNORED, &opt_ignored_str, NULL},
    {"webhook-namespace", F_IGNORED, &opt_ignored_str, NULL},
    {"manage-webhook-certs", F_BOOL, &opt_ignored_bool, NULL},
    {"enable-webhook", F_BOOL, &opt_ignored_bool, NULL},
    {"enable-tracing", F_BOOL, &opt_ignored_bool, NULL},
    {"enable-pprof", F_BOOL, &opt_ignored_bool, NULL},
    {"enable-pprof-debug", F_BOOL, &opt_ignored_bool, NULL},
    {"pprof-block-profile-rate", F_IGNORED, &opt_ignored_str, NULL},
    {"pprof-mutex-profile-fraction", F_IGNORED, &opt_ignored_str, NULL},
    {"kube-api-qps", F_IGNORED, &opt_ignored_str, NULL},
    {"kube-api-burst", F_IGNORED, &opt_ignored_str, NULL},
    {"api-connections", F_IGNORED, &opt_ignored_str, NULL},
    {"separate-watch-connection", F_BOOL, &opt_ignored_bool, NULL},
    {"sandbox-warm-pool-replenish-delay", F_IGNORED, &opt_ignored_str, NULL},
    {"sandbox-warm-pool-max-refill-rate", F_IGNORED, &opt_ignored_str, NULL},
    {"sandbox-warm-pool-unschedulable-recheck-interval", F_IGNORED, &opt_ignored_str, NULL},
    {"cache-label-selectors", F_BOOL, &opt_cache_selectors, "cache only labelled Pods/Services/PVCs"},
    {"disable-claim-events", F_BOOL, &opt_disable_claim_events, "no Event objects for claims"},
    {"disable-claim-observability-annotations", F_BOOL, &opt_ignored_bool, NULL},
    {"sandbox-write-behind-window", F_IGNORED, &opt_ignored_str, NULL},
    {"zap-stacktrace-level", F_IGNORED, &opt_ignored_str, NULL},
    {"zap-time-encoding", F_IGNORED, &opt_ignored_str, NULL},
};

/* Go durations: "300ms", "1.5s", "5m", "1h", "2m30s", "0". */
static int parse_duration(const char *s, int64_t *ret)
{
    double total = 0;
    if (strcmp(s, "0") == 0) {
        *ret = 0;
        return 0;
    }
    while (*s) {
        char *end;
        double v = strtod(s, &end);
        if (end == s)
            return -EINVAL;
        double mul;
        if (strncmp(end, "ms", 2) == 0)
            mul = 1e3, end += 2;
        else if (strncmp(end, "us", 2) == 0)
            mul = 1, end += 2;
        else if (*end == 's')
            mul = 1e6, end++;
        else if (*end == 'm')
            mul = 60e6, end++;
        else if (*end == 'h')
            mul = 3600e6, end++;
        else
            return -EINVAL;
        total += v * mul;
        s = end;
    }
    *ret = (int64_t)total;
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "Usage: asb-controller [flags]\n\nThe Kubernetes controller of Agent Sandbox.\n\n");
    for (size_t i = 0; i < ELEMENTSOF(flags); i++)
        if (flags[i].help)
            fprintf(f, "  --%-42s %s\n", flags[i].name, flags[i].help);
    fprintf(f, "\nUpstream flags without an effect here are accepted (see docs/kubernetes.md).\n");
}

static int parse_flags(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0 && !(a[0] == '-' && a[1] && a[1] != '-')) {
            fprintf(stderr, "asb-controller: unexpected argument %s\n", a);
            return -EINVAL;
        }
        a += a[1] == '-' ? 2 : 1;
        const char *eq = strchr(a, '=');
        size_t n = eq ? (size_t)(eq - a) : strlen(a);
        const flag *f = NULL;
        for (size_t j = 0; j < ELEMENTSOF(flags); j++)
            if (strlen(flags[j].name) == n && strncmp(flags[j].name, a, n) == 0)
                f = &flags[j];
        if (!f) {
            fprintf(stderr, "asb-controller: unknown flag --%.*s\n", (int)n, a);
            return -EINVAL;
        }
        const char *val = eq ? eq + 1 : NULL;
        if (f->type == F_BOOL) {
            if (!val)
                *(bool *)f->ptr = true;
            else if (strcmp(val, "true") == 0 || strcmp(val, "1") == 0)
                *(bool *)f->ptr = true;
            else if (strcmp(val, "false") == 0 || strcmp(val, "0") == 0)
                *(bool *)f->ptr = false;
            else {
                fprintf(stderr, "asb-controller: --%s: invalid boolean %s\n", f->name, val);
                return -EINVAL;
            }
            continue;
        }
        if (!val) {
            if (i + 1 >= argc) {
                fprintf(stderr, "asb-controller: --%s needs a value\n", f->name);
                return -EINVAL;
            }
            val = argv[++i];
        }
        switch (f->type) {
        case F_STR:
        case F_IGNORED:
            *(const char **)f->ptr = val;
            break;
        case F_INT: {
            char *end;
            long v = strtol(val, &end, 10);
            if (*end || v < 0) {
                fprintf(stderr, "asb-controller: --%s: invalid number %s\n", f->name, val);
                return -EINVAL;
            }
            *(long *)f->ptr = v;
            break;
        }
        case F_DUR:
            if (parse_duration(val, (int64_t *)f->ptr) < 0) {
                fprintf(stderr, "asb-controller: --%s: invalid duration %s\n", f->name, val);
                return -EINVAL;
            }
            break;
        default:
            break;
        }
    }
    return 0;
}

static volatile sig_atomic_t got_signal;
static atomic_bool run_failed;

static void *run_controller(void *arg)
{
    kube_ctl *ctl = arg;
    if (ctl->opt.leader_elect) {
        if (kube_leader_acquire(ctl, ctl->opt.leader_election_namespace, opt_le_id) < 0)
            return NULL;
    } else
        atomic_store(&ctl->leading, true);
    int r = kube_ctl_start(ctl);
    if (r < 0 && !atomic_load(&ctl->stop)) {
        log_error("cannot start the controller", "error", strerror(-r));
        atomic_store(&run_failed, true);
    }
    return NULL;
}
static void on_signal(int sig)
{
    got_signal = sig;
}

int main(int argc, char **argv)
{
    if (parse_flags(argc, argv) < 0)
        return main_usage_error(usage);
    if (opt_help) {
        usage(stdout);
        return 0;
    }
    if (opt_version) {
        printf("asb-controller 0.1.0\n");
        return 0;
    }
    log_level lvl = strcmp(opt_zap_level, "debug") == 0 || opt_zap_devel ? LOG_LEVEL_DEBUG
                    : strcmp(opt_zap_level, "error") == 0                ? LOG_LEVEL_ERROR
                                                                         : LOG_LEVEL_INFO;
    log_setup("asb-controller", strcmp(opt_zap_encoder, "console") != 0 && !opt_zap_devel, lvl);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    static kube_ctl ctl;
    pthread_mutex_init(&ctl.exp_lock, NULL);
    pthread_mutex_init(&ctl.metrics.lock, NULL);
    char *err = NULL;
    int r = kube_client_load(opt_kubeconfig, opt_context, &ctl.client, &err);
    if (r < 0) {
        log_error("cannot configure the API client", "error", err ? err : strerror(-r));
        free(err);
        return 1;
    }
    char host[256] = "host";
    gethostname(host, sizeof host - 1);
    char identity[320];
    snprintf(identity, sizeof identity, "%s_%d_%08lx", host, (int)getpid(),
             (unsigned long)(int64_t)now_usec(CLOCK_REALTIME) & 0xffffffffUL);
    ctl.opt = (kube_options){
        .cluster_domain = opt_cluster_domain,
        .extensions = opt_extensions,
        .snapshots = opt_snapshots,
        .sandbox_workers = (int)MIN(opt_sb_workers, 256),
        .claim_workers = (int)MIN(opt_claim_workers, 256),
        .pool_workers = (int)MIN(opt_pool_workers, 64),
        .template_workers = (int)MIN(opt_tmpl_workers, 64),
        .pool_grace_usec = opt_grace,
        .pool_max_batch = (size_t)opt_max_batch,
        .warm_pool_eviction = opt_eviction,
        .lease_duration_usec = opt_lease,
        .renew_deadline_usec = opt_renew,
        .retry_period_usec = opt_retry,
        .leader_elect = opt_leader_elect,
        .claim_events = !opt_disable_claim_events,
        .cache_label_selectors = opt_cache_selectors,
        .leader_election_namespace = *opt_le_ns ? opt_le_ns : ctl.client->namespace,
        .identity = identity,
    };
    log_info("starting asb-controller", "server", ctl.client->server, "extensions",
             opt_extensions ? "true" : "false", "identity", identity);
    void *health = NULL, *metrics = NULL;
    char *bound = NULL;
    if ((r = kube_http_start(&ctl, opt_health, &health, &bound)) < 0) {
        log_error("cannot listen", "address", opt_health, "error", strerror(-r));
        return 1;
    }
    if (bound)
        log_info("health listening", "address", bound);
    free(bound);
    bound = NULL;
    if ((r = kube_http_start(&ctl, opt_metrics, &metrics, &bound)) < 0) {
        log_error("cannot listen", "address", opt_metrics, "error", strerror(-r));
        return 1;
    }
    if (bound)
        log_info("metrics listening", "address", bound);
    free(bound);

    /* Leader election and the controller run on a thread; the main thread waits for a signal. */
    pthread_t runner;
    if (pthread_create(&runner, NULL, run_controller, &ctl) != 0) {
        log_error("cannot start the controller thread");
        return 1;
    }
    while (!got_signal && !atomic_load(&run_failed))
        usleep(50000);
    log_info("shutting down");
    atomic_store(&ctl.stop, true);
    pthread_join(runner, NULL);
    kube_http_stop(health);
    kube_http_stop(metrics);
    kube_ctl_stop(&ctl);
    if (ctl.opt.leader_elect)
        kube_leader_release(&ctl, ctl.opt.leader_election_namespace, opt_le_id);
    kube_client_free(ctl.client);
    curl_global_cleanup();
    return atomic_load(&run_failed) ? 1 : 0;
}
