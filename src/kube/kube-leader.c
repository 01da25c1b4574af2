/* Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does: a
 * candidate takes the Lease when it is free or when its record has not changed for
 * leaseDurationSeconds *as observed on the local clock* (no trust in other clocks); the leader
 * renews every retry period and gives up (the process exits) when it could not renew within
 * the renew deadline. On a clean shutdown the Lease is released so a standby takes over at once. */
#include "kube/kube.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "basic/macro.h"
#include "basic/time-util.h"
#include "reconcile/reconcile.h"
#include "shared/log.h"

static void sleep_usec(kube_ctl *ctl, int64_t usec)
{
    while (usec > 0 && !atomic_load(&ctl->stop)) {
        int64_t s = MIN(usec, 50000);
        struct timespec ts = {s / 1000000, (s % 1000000) * 1000};
        nanosleep(&ts, NULL);
        usec -= s;
    }
}

static void micro_time(char out[40])
{
    reconcile_format_time((int64_t)now_usec(CLOCK_REALTIME), 6, out);
}

static json_t *lease_spec(kube_ctl *ctl, const json_t *old_spec, bool take)
{
    char now[40];
    micro_time(now);
    json_t *spec = json_deep_copy(old_spec) ?: json_object();
    int dur = (int)MAX(ctl->opt.lease_duration_usec / 1000000, 1);
    json_object_set_new(spec, "holderIdentity", json_string(ctl->opt.identity));
    json_object_set_new(spec, "leaseDurationSeconds", json_integer(dur));
    json_object_set_new(spec, "renewTime", json_string(now));
    if (take) {
        json_object_set_new(spec, "acquireTime", json_string(now));
        json_int_t tr = json_integer_value(json_object_get(spec, "leaseTransitions"));
        json_object_set_new(spec, "leaseTransitions", json_integer(tr + 1));
    }
    return spec;
}

static pthread_t renew_thread;
static bool renew_started;
static char *lease_ns, *lease_name;

static int try_update(kube_ctl *ctl, const json_t *lease, bool take)
{
    _cleanup_json_ json_t *upd = json_deep_copy(lease);
    json_object_set_new(upd, "spec", lease_spec(ctl, json_object_get(lease, "spec"), take));
    _cleanup_free_ char *path = kube_path(KR_LEASE, lease_ns, lease_name, NULL, NULL);
    return kube_call(ctl->client, "PUT", path, NULL, upd, NULL);
}

static void *renew_loop(void *arg)
{
    kube_ctl *ctl = arg;
    int64_t last_ok = (int64_t)now_usec(CLOCK_MONOTONIC);
    _cleanup_free_ char *path = kube_path(KR_LEASE, lease_ns, lease_name, NULL, NULL);
    while (!atomic_load(&ctl->stop)) {
        sleep_usec(ctl, ctl->opt.retry_period_usec);
        if (atomic_load(&ctl->stop))
            break;
        json_t *lease = NULL;
        int e = kube_call(ctl->client, "GET", path, NULL, NULL, &lease);
        const char *holder = e == 0 ? kube_str(lease, "spec.holderIdentity") : NULL;
        if (e == 0 && holder && strcmp(holder, ctl->opt.identity) == 0)
            e = try_update(ctl, lease, false);
        else if (e == 0)
            e = -EBUSY;
        json_decref(lease);
        if (e == 0) {
            last_ok = (int64_t)now_usec(CLOCK_MONOTONIC);
            continue;
        }
        if (e == -EBUSY ||
            (int64_t)now_usec(CLOCK_MONOTONIC) - last_ok > ctl->opt.renew_deadline_usec) {
            log_error("leader election lost", "lease", lease_name, "identity", ctl->opt.identity);
            atomic_store(&ctl->leading, false);
            /* As controller-runtime: a former leader must not keep reconciling. */
            _exit(1);
        }
    }
    return NULL;
}

int kube_leader_acquire(kube_ctl *ctl, const char *ns, const char *name)
{
    lease_ns = strdup(ns);
    lease_name = strdup(name);
    _cleanup_free_ char *path = kube_path(KR_LEASE, ns, name, NULL, NULL);
    _cleanup_free_ char *coll = kube_path(KR_LEASE, ns, NULL, NULL, NULL);
    _cleanup_json_ json_t *observed = NULL;
    int64_t observed_at = 0;
    log_info("attempting to acquire leader lease", "lease", name, "namespace", ns);
    while (!atomic_load(&ctl->stop)) {
        json_t *lease = NULL;
        int e = kube_call(ctl->client, "GET", path, NULL, NULL, &lease);
        if (e == -ENOENT) {
            json_decref(lease);
            _cleanup_json_ json_t *nl =
                json_pack("{s:s,s:s,s:{s:s,s:s},s:o}", "apiVersion", "coordination.k8s.io/v1",
                          "kind", "Lease", "metadata", "name", name, "namespace", ns, "spec",
                          lease_spec(ctl, NULL, true));
            e = kube_call(ctl->client, "POST", coll, NULL, nl, NULL);
            if (e == 0)
                break;
        } else if (e == 0) {
            json_t *spec = json_object_get(lease, "spec");
            const char *holder = kube_str(lease, "spec.holderIdentity");
            if (!observed || !json_equal(observed, spec)) {
                json_decref(observed);
                observed = json_deep_copy(spec);
                observed_at = (int64_t)now_usec(CLOCK_MONOTONIC);
            }
            json_int_t dur = json_integer_value(json_object_get(spec, "leaseDurationSeconds"));
            bool free_ = !holder || !*holder || strcmp(holder, ctl->opt.identity) == 0 ||
                         (int64_t)now_usec(CLOCK_MONOTONIC) > observed_at + dur * 1000000;
            if (free_) {
                e = try_update(ctl, lease, !holder || strcmp(holder, ctl->opt.identity) != 0);
                if (e == 0) {
                    json_decref(lease);
                    break;
                }
            }
            json_decref(lease);
        } else
            json_decref(lease);
        sleep_usec(ctl, ctl->opt.retry_period_usec);
    }
    if (atomic_load(&ctl->stop))
        return -ECANCELED;
    log_info("successfully acquired lease", "lease", name, "identity", ctl->opt.identity);
    atomic_store(&ctl->leading, true);
    if (pthread_create(&renew_thread, NULL, renew_loop, ctl) == 0)
        renew_started = true;
    return 0;
}

void kube_leader_release(kube_ctl *ctl, const char *ns, const char *name)
{
    if (renew_started)
        pthread_join(renew_thread, NULL);
    renew_started = false;
    if (atomic_load(&ctl->leading)) {
        _cleanup_free_ char *path = kube_path(KR_LEASE, ns, name, NULL, NULL);
        json_t *lease = NULL;
        if (kube_call(ctl->client, "GET", path, NULL, NULL, &lease) == 0 &&
            strcmp(kube_str(lease, "spec.holderIdentity") ?: "", ctl->opt.identity) == 0) {
            json_t *spec = json_object_get(lease, "spec");
            json_object_set_new(spec, "holderIdentity", json_string(""));
            json_object_set_new(spec, "leaseDurationSeconds", json_integer(1));
            kube_call(ctl->client, "PUT", path, NULL, lease, NULL);
            log_info("released leader lease", "lease", name);
        }
        json_decref(lease);
    }
    free(lease_ns);
    free(lease_name);
    lease_ns = lease_name = NULL;
}
