/* Requests the router answered (router-stats.h). */
#include <stdatomic.h>
#include <time.h>

#include "basic/macro.h"
#include "basic/time-util.h"
#include "shared/router-stats.h"

/* Seconds: from a kept-alive REST call (sub-millisecond) to a cold resume (minutes). */
const double router_stats_bounds[ROUTER_STATS_NBOUNDS] = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 60};

/* The counters, in shards: a thread adds to its own (picked round-robin at its first answer), so
 * the epoll workers, one per CPU, do not bounce one cache line between cores on every request.
 * Adds stay atomic: the blocking and HTTP/2 threads share shards with them. */
#define NSHARDS 8

typedef struct shard {
    _Atomic uint64_t codes[ROUTER_STATS_NCODES];
    _Atomic uint64_t buckets[ROUTER_STATS_NBOUNDS + 1];
    _Atomic uint64_t sum_us;
} __attribute__((aligned(64))) shard;

static shard shards[NSHARDS];
static atomic_uint next_shard;
static __thread shard *mine;

void router_stats_answered(int status, int64_t started_us)
{
    if (!mine)
        mine = &shards[atomic_fetch_add_explicit(&next_shard, 1, memory_order_relaxed) % NSHARDS];
    if (status >= 100 && status < ROUTER_STATS_NCODES)
        atomic_fetch_add_explicit(&mine->codes[status], 1, memory_order_relaxed);
    if (started_us <= 0)
        return;
    int64_t us = (int64_t)now_usec(CLOCK_MONOTONIC) - started_us;
    if (us < 0)
        us = 0;
    double s = (double)us / 1e6;
    size_t i = 0;
    while (i < ROUTER_STATS_NBOUNDS && s > router_stats_bounds[i])
        i++;
    atomic_fetch_add_explicit(&mine->buckets[i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&mine->sum_us, (uint64_t)us, memory_order_relaxed);
}

void router_stats_snapshot(router_stats *ret)
{
    *ret = (router_stats){0};
    for (size_t s = 0; s < NSHARDS; s++) {
        const shard *sh = &shards[s];
        for (size_t i = 0; i < ROUTER_STATS_NCODES; i++)
            ret->codes[i] += atomic_load_explicit(&sh->codes[i], memory_order_relaxed);
        for (size_t i = 0; i < ELEMENTSOF(sh->buckets); i++) {
            uint64_t n = atomic_load_explicit(&sh->buckets[i], memory_order_relaxed);
            ret->buckets[i] += n;
            ret->count += n;
        }
        ret->sum_us += atomic_load_explicit(&sh->sum_us, memory_order_relaxed);
    }
}
