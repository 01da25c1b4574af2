/* What a local sandbox uses, read from its cgroups (cgroupsPath /asb/<uid>): CPU time and the
 * memory working set (usage minus inactive file pages, as the kubelet counts it), for
 * `asb top sandboxes` (the metrics.k8s.io PodMetrics of local-apiserver-podmetrics.c), /metrics
 * and `asb describe`. cgroup v1 (cpuacct, memory) and v2 (unified) alike. */
#pragma once

#include <stddef.h>
#include <stdint.h>

typedef struct local_usage {
    uint64_t cpu_ns;    /* CPU time used since the container started */
    uint64_t memory;    /* working set, bytes */
    uint64_t nanocores; /* local_usage_rates: CPU in use (1e9 = one core) over the window */
    uint64_t window_ms; /* that window */
} local_usage;

/* The figures of the sandbox uid. 0, -ENOENT (no cgroup: not running) or a negative errno. */
int local_usage_read(const char *uid, local_usage *ret);

/* local_usage_read() of each uid, with its CPU rate over the time since the previous call that
 * read it (kept in this process), or, for those read for the first time (or long ago), over a
 * 100 ms window taken now (one wait for all). ret[i].cpu_ns is 0 and ok[i] false for a uid
 * without a cgroup. 0 or -ENOMEM. */
int local_usage_rates(const char *const *uids, size_t n, local_usage *ret, int *ok);
