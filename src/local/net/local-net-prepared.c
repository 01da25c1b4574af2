/* Networks prepared ahead (issue 16, docs/network.md "Prepared ahead"): a thread keeps a few
 * complete sandbox networks ready (namespace, veth pair on the bridge, address, empty chains,
 * counters and map elements), so that a sandbox start only renames one into place and fills its
 * chains in one nft transaction. A spare never held a process: its namespace, conntrack table
 * and counters are new, and it is never given back (teardown destroys a sandbox's network). */
#include <dirent.h>
#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <unistd.h>

#include "basic/fs-util.h"
#include "basic/macro.h"
#include "basic/time-util.h"
#include "local/fs/local-fs.h"
#include "local/net/local-net-internal.h"
#include "shared/log.h"

/* After a start took a network, the next one is built only this much later while others are
 * still ready: the start it was taken for has its runc to run, on the same CPUs. */
#define QUIET_AFTER_TAKE_USEC (150 * USEC_PER_MSEC)

static size_t ready_count(const net_prepared *p)
{
    size_t k = 0;
    for (size_t i = 0; i < p->n_spares; i++)
        k += p->spares[i].ready;
    return k;
}

static void wait_until(net_prepared *p, usec_t mono_deadline)
{
    /* The condition variable runs on CLOCK_REALTIME: convert the remaining time. */
    usec_t now = now_usec(CLOCK_MONOTONIC), left = mono_deadline > now ? mono_deadline - now : 0;
    struct timespec until = timespec_realtime_after(left);
    pthread_cond_timedwait(&p->wake, p->lock, &until);
}

static unsigned target(const net_prepared *p)
{
    return p->base ? MIN(p->base + p->demand, (unsigned)NET_PREPARED_MAX) : 0;
}

static char *spare_path(const local_net *n, const char *id, const char *leaf)
{
    char *p = NULL;
    if (asprintf(&p, "%s/" NET_SPARE_PREFIX "%s%s%s", n->net_dir, id, leaf ? "/" : "",
                 leaf ? leaf : "") < 0)
        return NULL;
    return p;
}

static char *gone_path(const local_net *n, const char *id)
{
    char *p = NULL;
    return asprintf(&p, "%s/" NET_GONE_PREFIX "%s", n->net_dir, id) < 0 ? NULL : p;
}

static bool id_taken(const local_net *n, const char *id)
{
    char veth[16];
    snprintf(veth, sizeof(veth), "asv%s", id);
    for (size_t i = 0; i < n->n_sb; i++)
        if (strcmp(n->sb[i].id, id) == 0)
            return true;
    for (size_t i = 0; i < n->prep.n_spares; i++)
        if (strcmp(n->prep.spares[i].id, id) == 0)
            return true;
    return if_nametoindex(veth) > 0;
}

/* Reserves an address and a name for the next spare (lock held). */
static int reserve(local_net *n, net_spare *ret)
{
    net_prepared *p = &n->prep;
    net_spare sp = {.ip = net_allocate_ip(n)};
    if (!sp.ip)
        return -ENOSPC;
    do {
        char what[64];
        snprintf(what, sizeof(what), "spare/%d/%llu/%llu", (int)getpid(), ++p->seq,
                 (unsigned long long)now_usec(CLOCK_MONOTONIC));
        snprintf(sp.id, sizeof(sp.id), "%012llx",
                 (unsigned long long)(local_net_name_hash(n->state_dir, what) & 0xffffffffffffull));
    } while (id_taken(n, sp.id));
    net_spare *v = realloc(p->spares, (p->n_spares + 1) * sizeof(*v));
    if (!v)
        return -ENOMEM;
    p->spares = v;
    v[p->n_spares++] = sp;
    *ret = sp;
    return 0;
}

static void forget_in(net_spare *v, size_t *n, const char *id)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp(v[i].id, id) == 0) {
            v[i] = v[--*n];
            return;
        }
}

static void forget(net_prepared *p, const char *id)
{
    forget_in(p->spares, &p->n_spares, id);
}

/* Destroys the first retired network (lock held; released while it works). */
static void reap_one(local_net *n)
{
    net_prepared *p = &n->prep;
    net_spare g = p->gone[0];
    _cleanup_free_ char *dir = gone_path(n, g.id);
    pthread_mutex_unlock(p->lock);
    if (dir)
        net_network_destroy(p->rtnl, dir, g.id);
    pthread_mutex_lock(p->lock);
    forget_in(p->gone, &p->n_gone, g.id); /* its address is free from here on */
}

/* The chains, counters and map elements first, then namespace and veth: until the sandbox's
 * rules fill them, its chains are empty and the base table drops every packet from and to its
 * address. */
static int build(local_net *n, const net_spare *sp, char **ret_error)
{
    _cleanup_free_ char *dir = spare_path(n, sp->id, NULL);
    if (!dir)
        return -ENOMEM;
    int k = net_objects_add(n->prep.nfnl, n->table, sp->id, sp->ip, ret_error);
    return k < 0 ? k : net_network_make(n, n->prep.rtnl, dir, sp->id, sp->ip, ret_error);
}

/* The nft objects (when c), the namespace (and with it the veth pair) and the directory. */
static void destroy(local_net *n, net_counters *c, const net_spare *sp)
{
    if (c)
        net_objects_del(c, n->table, sp->id, sp->ip);
    _cleanup_free_ char *ns = spare_path(n, sp->id, "ns"), *dir = spare_path(n, sp->id, NULL);
    if (ns)
        while (umount2(ns, MNT_DETACH) == 0)
            ;
    if (dir)
        fs_rm_rf(dir);
}

static void *preparer(void *arg)
{
    local_net *n = arg;
    net_prepared *p = &n->prep;
    bool backoff = false;
    /* Behind the starts it works for: on a busy machine a start's runc gets the CPU first (the
     * `ip` children inherit the nice value). Per thread on Linux. */
    if (setpriority(PRIO_PROCESS, (id_t)gettid(), 10) < 0)
        log_debug("cannot lower the preparer's priority", "error", strerror(errno));
    pthread_mutex_lock(p->lock);
    while (!p->stop) {
        if (p->n_gone > 0) {
            reap_one(n);
            continue;
        }
        if (backoff) {
            /* Out of addresses, or the host refused: try again later, not in a loop. */
            wait_until(p, now_usec(CLOCK_MONOTONIC) + USEC_PER_SEC);
            backoff = false;
            continue;
        }
        if (p->n_spares >= target(p)) {
            pthread_cond_wait(&p->wake, p->lock);
            continue;
        }
        usec_t quiet = p->last_take + QUIET_AFTER_TAKE_USEC;
        if (ready_count(p) > 0 && now_usec(CLOCK_MONOTONIC) < quiet) {
            wait_until(p, quiet);
            continue;
        }
        net_spare sp;
        if (reserve(n, &sp) < 0) {
            backoff = true;
            continue;
        }
        pthread_mutex_unlock(p->lock);
        _cleanup_free_ char *err = NULL;
        int k = build(n, &sp, &err);
        if (k < 0) {
            log_warn("cannot prepare a sandbox network", "error", err ? err : strerror(-k));
            destroy(n, p->nfnl, &sp);
        }
        pthread_mutex_lock(p->lock);
        if (k < 0) {
            forget(p, sp.id);
            backoff = true;
            continue;
        }
        for (size_t i = 0; i < p->n_spares; i++)
            if (strcmp(p->spares[i].id, sp.id) == 0)
                p->spares[i].ready = true;
    }
    pthread_mutex_unlock(p->lock);
    return NULL;
}

int net_prepared_start(local_net *n, pthread_mutex_t *lock, unsigned base)
{
    net_prepared *p = &n->prep;
    if (!lock || !base)
        return 0;
    int k = net_counters_open(&p->nfnl);
    if (k < 0 || (k = net_rtnl_open(&p->rtnl)) < 0) {
        p->nfnl = net_counters_free(p->nfnl);
        return k;
    }
    p->lock = lock;
    p->base = MIN(base, (unsigned)NET_PREPARED_MAX);
    k = -pthread_cond_init(&p->wake, NULL);
    if (k < 0 || (k = -pthread_create(&p->thread, NULL, preparer, n)) < 0) {
        p->nfnl = net_counters_free(p->nfnl);
        p->rtnl = net_rtnl_free(p->rtnl);
        return k;
    }
    p->running = true;
    char base_s[16];
    snprintf(base_s, sizeof(base_s), "%u", p->base);
    log_info("sandbox networks prepared ahead", "base", base_s);
    return 0;
}

void net_prepared_stop(local_net *n)
{
    net_prepared *p = &n->prep;
    if (p->running) {
        pthread_mutex_lock(p->lock);
        p->stop = true;
        pthread_cond_signal(&p->wake);
        pthread_mutex_unlock(p->lock);
        pthread_join(p->thread, NULL);
        pthread_cond_destroy(&p->wake);
        p->running = false;
        pthread_mutex_lock(p->lock);
        while (p->n_gone > 0)
            reap_one(n);
        pthread_mutex_unlock(p->lock);
    }
    free(p->gone);
    p->gone = NULL;
    /* Nothing prepared outlives the server: the next start would remove it anyway. */
    for (size_t i = 0; i < p->n_spares; i++)
        destroy(n, p->nfnl, &p->spares[i]);
    free(p->spares);
    p->spares = NULL;
    p->n_spares = 0;
    p->nfnl = net_counters_free(p->nfnl);
    p->rtnl = net_rtnl_free(p->rtnl);
}

int net_prepared_take(local_net *n, const char *uid, char ret_id[13], uint32_t *ret_ip)
{
    net_prepared *p = &n->prep;
    if (!p->running)
        return -ENOENT;
    for (size_t i = 0; i < p->n_spares; i++) {
        net_spare sp = p->spares[i];
        if (!sp.ready)
            continue;
        _cleanup_free_ char *from = spare_path(n, sp.id, NULL), *to = NULL;
        if (!from || asprintf(&to, "%s/%s", n->net_dir, uid) < 0)
            return -ENOMEM;
        forget(p, sp.id);
        pthread_cond_signal(&p->wake);
        /* One rename moves namespace mount, address and id files: a crash leaves the network
         * either a spare (removed at the next start) or the sandbox's (adopted or collected). */
        if (rename(from, to) < 0) {
            int e = -errno;
            log_warn("cannot use a prepared network", "path", from, "error", strerror(-e));
            destroy(n, n->counters, &sp);
            p->missed++;
            return e;
        }
        memcpy(ret_id, sp.id, sizeof(sp.id));
        *ret_ip = sp.ip;
        p->taken++;
        p->last_take = now_usec(CLOCK_MONOTONIC);
        return 0;
    }
    p->missed++;
    pthread_cond_signal(&p->wake);
    return -ENOENT;
}

bool net_prepared_holds(const local_net *n, uint32_t ip)
{
    for (size_t i = 0; i < n->prep.n_spares; i++)
        if (n->prep.spares[i].ip == ip)
            return true;
    for (size_t i = 0; i < n->prep.n_gone; i++)
        if (n->prep.gone[i].ip == ip)
            return true;
    return false;
}

int net_prepared_retire(local_net *n, const char *dir, const char *id, uint32_t ip)
{
    net_prepared *p = &n->prep;
    if (!p->running)
        return -ENOENT;
    net_spare g = {.ip = ip};
    snprintf(g.id, sizeof(g.id), "%s", id);
    _cleanup_free_ char *to = gone_path(n, g.id);
    net_spare *v = realloc(p->gone, (p->n_gone + 1) * sizeof(*v));
    if (!to || !v)
        return -ENOMEM;
    p->gone = v;
    /* One rename: a crash leaves it a sandbox's (collected) or gone (removed at start). */
    if (rename(dir, to) < 0)
        return -errno;
    v[p->n_gone++] = g;
    pthread_cond_signal(&p->wake);
    return 0;
}

void net_prepared_remove_stale(local_net *n)
{
    _cleanup_closedir_ DIR *d = opendir(n->net_dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        bool spare = strncmp(de->d_name, NET_SPARE_PREFIX, strlen(NET_SPARE_PREFIX)) == 0 &&
                     strlen(de->d_name) == strlen(NET_SPARE_PREFIX) + 12;
        bool gone = strncmp(de->d_name, NET_GONE_PREFIX, strlen(NET_GONE_PREFIX)) == 0 &&
                    strlen(de->d_name) == strlen(NET_GONE_PREFIX) + 12;
        if (!spare && !gone)
            continue;
        net_spare sp = {0};
        snprintf(sp.id, sizeof(sp.id), "%s", strchr(de->d_name, '-') + 1);
        log_info(spare ? "removing a network prepared by an earlier run"
                       : "removing a network an earlier run was destroying",
                 "id", sp.id);
        /* Its nft objects went with the table, which start made anew. */
        if (spare)
            destroy(n, NULL, &sp);
        else {
            _cleanup_free_ char *dir = gone_path(n, sp.id);
            if (dir)
                net_network_destroy(n->rtnl, dir, sp.id);
        }
    }
}

void local_net_prepare_demand(local_net *n, unsigned pool_members)
{
    net_prepared *p = &n->prep;
    if (!p->running || p->demand == pool_members)
        return;
    p->demand = pool_members;
    pthread_cond_signal(&p->wake);
}

void local_net_prepared_counts(local_net *n, unsigned *ret_ready, unsigned long long *ret_taken,
                               unsigned long long *ret_missed)
{
    const net_prepared *p = &n->prep;
    *ret_ready = (unsigned)ready_count(p);
    *ret_taken = p->taken;
    *ret_missed = p->missed;
}
