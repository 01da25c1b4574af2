/* What the router answered: requests by HTTP status code and the time from a request's head to
 * its response head (the router's own answer or the upstream's). Process-wide, fed by every
 * transport (the epoll loop, the blocking HTTP/1.1 path, HTTP/2) with relaxed atomic adds, so
 * the hot path takes no lock; readers (`asb serve`'s /metrics) take a snapshot. It lives in
 * src/shared, not src/router, so the control plane's metrics can read it in every binary that
 * links them (asb-controller and the agents do without the router). */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Upper bounds (seconds) of the latency buckets; the last bucket is +Inf. */
#define ROUTER_STATS_NBOUNDS 14
extern const double router_stats_bounds[ROUTER_STATS_NBOUNDS];
/* Status codes counted one by one: 100..599 (anything else is not counted). */
#define ROUTER_STATS_NCODES 600

/* One request answered with `status`; started_us: now_usec(CLOCK_MONOTONIC) when its head was in
 * (0: unknown, counted without a latency). */
void router_stats_answered(int status, int64_t started_us);

typedef struct router_stats {
    uint64_t codes[ROUTER_STATS_NCODES];
    /* per bucket, not cumulative; [ROUTER_STATS_NBOUNDS] is above the last bound */
    uint64_t buckets[ROUTER_STATS_NBOUNDS + 1];
    uint64_t count;  /* requests with a latency */
    uint64_t sum_us; /* their latencies summed */
} router_stats;

/* Copies the counters (each read atomically; the copy is not one instant). */
void router_stats_snapshot(router_stats *ret);
