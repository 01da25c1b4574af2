/* See local-usage.h. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "basic/macro.h"
#include "basic/time-util.h"
#include "local/metrics/local-usage.h"

#define CG "/sys/fs/cgroup"
#define FIRST_WINDOW_MS 100
#define MAX_AGE_MS 60000

/* The first unsigned number of the file (after "key " when key is given: a line of a stat file). */
static int read_u64(const char *path, const char *key, uint64_t *ret)
{
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    if (!f)
        return -errno;
    char line[256];
    size_t kl = key ? strlen(key) : 0;
    while (fgets(line, sizeof(line), f)) {
        if (key && (strncmp(line, key, kl) != 0 || line[kl] != ' '))
            continue;
        unsigned long long v;
        if (sscanf(line + (key ? kl + 1 : 0), "%llu", &v) != 1)
            return -EINVAL;
        *ret = v;
        return 0;
    }
    return key ? -ENOENT : -EINVAL;
}

int local_usage_read(const char *uid, local_usage *ret)
{
    char p[256];
    uint64_t mem = 0, inactive = 0;
    *ret = (local_usage){0};
    snprintf(p, sizeof(p), CG "/cpuacct/asb/%s/cpuacct.usage", uid);
    int k = read_u64(p, NULL, &ret->cpu_ns);
    if (k == 0) { /* cgroup v1 */
        snprintf(p, sizeof(p), CG "/memory/asb/%s/memory.usage_in_bytes", uid);
        if ((k = read_u64(p, NULL, &mem)) < 0)
            return k;
        snprintf(p, sizeof(p), CG "/memory/asb/%s/memory.stat", uid);
        (void)read_u64(p, "total_inactive_file", &inactive);
    } else { /* cgroup v2 */
        uint64_t usec = 0;
        snprintf(p, sizeof(p), CG "/asb/%s/cpu.stat", uid);
        if ((k = read_u64(p, "usage_usec", &usec)) < 0)
            return k;
        ret->cpu_ns = usec * 1000;
        snprintf(p, sizeof(p), CG "/asb/%s/memory.current", uid);
        if ((k = read_u64(p, NULL, &mem)) < 0)
            return k;
        snprintf(p, sizeof(p), CG "/asb/%s/memory.stat", uid);
        (void)read_u64(p, "inactive_file", &inactive);
    }
    ret->memory = mem > inactive ? mem - inactive : 0;
    return 0;
}

/* The previous reading of each uid seen: CPU time and when. */
typedef struct prev_sample {
    char uid[40];
    uint64_t cpu_ns, at_ms;
} prev_sample;

static pthread_mutex_t prev_lock = PTHREAD_MUTEX_INITIALIZER;
static prev_sample *prev;
static size_t n_prev;

/* Locked. The sample of uid, or a new slot (NULL on ENOMEM); stale slots are reused. */
static prev_sample *prev_slot(const char *uid, uint64_t now)
{
    prev_sample *free_slot = NULL;
    for (size_t i = 0; i < n_prev; i++) {
        if (strcmp(prev[i].uid, uid) == 0)
            return &prev[i];
        if (!free_slot && now - prev[i].at_ms > MAX_AGE_MS)
            free_slot = &prev[i];
    }
    if (!free_slot) {
        prev_sample *v = realloc(prev, (n_prev + 1) * sizeof(*v));
        if (!v)
            return NULL;
        prev = v;
        free_slot = &prev[n_prev++];
    }
    *free_slot = (prev_sample){0};
    snprintf(free_slot->uid, sizeof(free_slot->uid), "%s", uid);
    return free_slot;
}

static void rate(local_usage *u, uint64_t cpu0, uint64_t ms)
{
    u->window_ms = ms ? ms : 1;
    u->nanocores = u->cpu_ns > cpu0 ? (u->cpu_ns - cpu0) * 1000 / u->window_ms : 0;
}

int local_usage_rates(const char *const *uids, size_t n, local_usage *ret, int *ok)
{
    _cleanup_free_ uint64_t *first = calloc(n + 1, sizeof(*first));
    if (!first)
        return -ENOMEM;
    bool wait = false;
    uint64_t t0 = (uint64_t)now_msec(CLOCK_MONOTONIC);
    pthread_mutex_lock(&prev_lock);
    for (size_t i = 0; i < n; i++) {
        ok[i] = strlen(uids[i]) < sizeof(prev->uid) && local_usage_read(uids[i], &ret[i]) == 0;
        if (!ok[i])
            continue;
        prev_sample *p = prev_slot(uids[i], t0);
        uint64_t age = p ? t0 - p->at_ms : 0;
        if (p && p->at_ms && age >= FIRST_WINDOW_MS && age <= MAX_AGE_MS)
            rate(&ret[i], p->cpu_ns, age);
        else {
            first[i] = ret[i].cpu_ns;
            wait = true;
        }
        if (p) {
            p->cpu_ns = ret[i].cpu_ns;
            p->at_ms = t0;
        }
    }
    pthread_mutex_unlock(&prev_lock);
    if (!wait)
        return 0;
    struct timespec ts = {0, FIRST_WINDOW_MS * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
    uint64_t t1 = (uint64_t)now_msec(CLOCK_MONOTONIC);
    for (size_t i = 0; i < n; i++) {
        if (!ok[i] || ret[i].window_ms)
            continue;
        local_usage u;
        if (local_usage_read(uids[i], &u) < 0)
            continue;
        ret[i].cpu_ns = u.cpu_ns;
        ret[i].memory = u.memory;
        rate(&ret[i], first[i], t1 - t0);
    }
    return 0;
}
