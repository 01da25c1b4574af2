/* The reconcile loop (the status it writes: local-reconcile-status.c). */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "basic/fs-util.h"
#include "api/api.h"
#include "basic/macro.h"
#include "basic/time-util.h"
#include "local/store/local-events.h"
#include "local/metrics/local-metrics.h"
#include "local/container/local-bundle.h"
#include "local/reconcile/local-finalizer.h"
#include "local/fs/local-fs.h"
#include "local/container/local-inject.h"
#include "local/container/local-image.h"
#include "local/reconcile/local-names.h"
#include "local/reconcile/local-reconcile-internal.h"
#include "local/storage/local-scratch.h"
#include "reconcile/reconcile.h"
#include "shared/log.h"

#define DEFAULT_RESYNC_INTERVAL (10 * USEC_PER_SEC)
#define NOT_READY_RETRY (200 * USEC_PER_MSEC)
#define HEALTH_TIMEOUT_MS 5000

static bool container_alive(const rec_entry *e)
{
    return e->pid > 0 && (kill(e->pid, 0) == 0 || errno == EPERM);
}

/* A zombie still answers kill(pid, 0); runc state reports it as stopped. */
static bool container_dead(local_reconciler *r, const rec_entry *e)
{
    if (!container_alive(e))
        return true;
    _cleanup_free_ char *status = NULL;
    pid_t pid;
    return oci_state(rec_handler(r, e->handler), e->uid, &status, &pid) == 0 && strcmp(status, "running") != 0;
}

/* Takes the output pipes of a running container again after a restart: sandboxd's stdout, and
 * the main process's pipe when its bundle passed one (ASB_MAIN_OUTPUT_FD, held by sandboxd at
 * that number). */
static void readopt_logs(local_reconciler *r, const char *uid, pid_t pid)
{
    _cleanup_free_ char *lp = NULL, *mp = NULL, *cfg = NULL;
    if (!r->logs || asprintf(&lp, "%s/sandboxes/%s/sandboxd.log", r->state_dir, uid) < 0 ||
        asprintf(&mp, "%s/sandboxes/%s/main.log", r->state_dir, uid) < 0 ||
        asprintf(&cfg, "%s/sandboxes/%s/bundle/config.json", r->state_dir, uid) < 0)
        return;
    (void)local_logs_adopt(r->logs, uid, pid, 1, lp);
    _cleanup_(json_decrefp) json_t *c = json_load_file(cfg, 0, NULL);
    json_t *env = json_object_get(json_object_get(c, "process"), "env"), *e;
    size_t i;
    json_array_foreach(env, i, e) {
        const char *kv = json_string_value(e);
        int n;
        char end;
        if (kv && sscanf(kv, "ASB_MAIN_OUTPUT_FD=%d%c", &n, &end) == 1 && n > 2) {
            int k = local_logs_adopt(r->logs, uid, pid, n, mp);
            if (k < 0)
                log_warn("cannot take the main process's output again", "uid", uid, "error",
                         strerror(-k));
        }
    }
}

/* The last line sandboxd wrote before it exited. Owned. */
static char *last_log_line(local_reconciler *r, const char *uid)
{
    _cleanup_free_ char *path = NULL;
    if (asprintf(&path, "%s/sandboxes/%s/sandboxd.log", r->state_dir, uid) < 0)
        return NULL;
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    char line[512], last[512] = "";
    while (f && fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        if (*line)
            snprintf(last, sizeof(last), "%s", line);
    }
    return strdup(*last ? last : "(no output)");
}

static int expired_delete_fn(const json_t *old, json_t **ret_new, void *payload)
{
    const char *uid = api_meta_string(old, "uid");
    if (!uid || strcmp(uid, payload) != 0)
        return STORE_UPDATE_UNCHANGED; /* deleted and recreated under the same name */
    return local_delete_or_mark(old, ret_new); /* the teardown follows the deletionTimestamp */
}

/* §2.4.6 (the decision and the status are the core's). Returns true when expiry
 * short-circuits the reconcile. */
static bool reconcile_expiry(local_reconciler *r, const json_t *sb, const char *uid)
{
    reconcile_sandbox_in in = {.sandbox = sb, .now = (int64_t)now_usec(CLOCK_REALTIME)};
    _cleanup_(reconcile_sandbox_out_done) reconcile_sandbox_out out = {0};
    const char *name = api_meta_string(sb, "name");
    if (reconcile_sandbox_expiry(&in, &out) < 0) {
        rec_timer_set(r, sb, RECONCILE_EXPIRY_MIN_REQUEUE_USEC); /* out of memory: look again */
        return true;
    }
    if (out.action == RECONCILE_SANDBOX_RUN) {
        if (out.requeue)
            rec_timer_set(r, sb, (usec_t)out.requeue);
        else
            rec_timer_clear(r, uid);
        return false;
    }
    status_update u = {.uid = uid, .expiry = true};
    if (out.action == RECONCILE_SANDBOX_EXPIRE_MARK) {
        /* First pass: say so and persist; the container is removed on the next pass. */
        log_info("sandbox expired", "sandbox", name, "uid", uid);
        local_event_record(r->store, REC_EVENT_SOURCE, sb, LOCAL_EVENT_NORMAL, "Expired", "Expire",
                           "spec.shutdownTime %s passed",
                           json_string_value(json_object_get(json_object_get(sb, "spec"),
                                                             "shutdownTime")) ?: "");
        u.has_pod = rec_find(r, uid) != NULL;
        rec_write_status(r, sb, &u);
        rec_timer_set(r, sb, (usec_t)out.requeue);
        return true;
    }
    rec_timer_clear(r, uid);
    if (out.action == RECONCILE_SANDBOX_EXPIRE_DELETE) {
        /* The teardown follows the deletionTimestamp. */
        json_t *deleted = NULL;
        int k = local_store_update(r->store, r->kind, api_meta_string(sb, "namespace"), name,
                                   expired_delete_fn, (void *)uid, &deleted);
        json_decref(deleted);
        if (k < 0 && k != -ENOENT) {
            log_warn("cannot delete expired sandbox", "sandbox", name, "error", strerror(-k));
            rec_timer_set(r, sb, RECONCILE_EXPIRY_MIN_REQUEUE_USEC);
        }
        return true;
    }
    if (rec_find(r, uid)) {
        log_info("sandbox expired: stopping its container", "sandbox", name, "uid", uid, "policy",
                 "Retain");
        rec_teardown(r, uid, false);
    }
    rec_write_status(r, sb, &u);
    return true;
}

static int add_finalizer_fn(const json_t *old, json_t **ret_new, void *payload)
{
    const char *uid = api_meta_string(old, "uid");
    if (!uid || strcmp(uid, payload) != 0 || reconcile_deleting(old) ||
        local_has_finalizer(old, LOCAL_TEARDOWN_FINALIZER))
        return STORE_UPDATE_UNCHANGED;
    *ret_new = local_finalizer_add(old, LOCAL_TEARDOWN_FINALIZER);
    return *ret_new ? 0 : -ENOMEM;
}

/* The local backend's finalizer goes on before anything is made on the host for the Sandbox,
 * so that its deletion waits for the teardown. */
static int add_finalizer(local_reconciler *r, const json_t *sb)
{
    json_t *out = NULL;
    int k = local_store_update(r->store, r->kind, api_meta_string(sb, "namespace"),
                               api_meta_string(sb, "name"), add_finalizer_fn,
                               (void *)api_meta_string(sb, "uid"), &out);
    bool deleting = k == 0 && reconcile_deleting(out);
    json_decref(out);
    if (k < 0 && k != -ENOENT)
        log_warn("cannot add the teardown finalizer", "sandbox", api_meta_string(sb, "name"),
                 "error", strerror(-k));
    return k < 0 ? k : deleting ? -ENOENT : 0;
}

/* The container of sb could not be started at generation gen: reported, and retried at the
 * next resync or spec change. */
static void start_failed(local_reconciler *r, const json_t *sb, long long gen, rec_failure *f)
{
    const char *uid = api_meta_string(sb, "uid");
    status_update u = {.uid = uid};
    rec_failed_set(r, uid, gen);
    rec_teardown(r, uid, false);
    u.o.failure_reason = f->reason;
    u.o.failure_message = f->message ? f->message : "out of memory";
    log_warn("sandbox not started", "sandbox", api_meta_string(sb, "name"), "reason", f->reason,
             "message", f->message ? f->message : "");
    local_event_record(r->store, REC_EVENT_SOURCE, sb, LOCAL_EVENT_WARNING, f->reason ?: "StartFailed",
                       "Start", "%s", u.o.failure_message);
    local_metrics_reconcile_error("sandboxes");
    rec_write_status(r, sb, &u);
}

/* Suspend freezes the container (cgroup freezer): memory and processes are kept, no CPU is
 * used; Running thaws it (reconcile_thaw). If freezing fails the container is stopped
 * instead. Writes the status. */
static void reconcile_suspend(local_reconciler *r, const json_t *sb, const char *uid,
                              status_update *u)
{
    rec_entry *fe = rec_find(r, uid);
    if (fe && !fe->frozen) {
        _cleanup_free_ char *err = NULL;
        /* First: a local client must not find, and then wait on, a frozen sandboxd. */
        local_names_unbind(r->state_dir, api_meta_string(sb, "namespace"),
                           api_meta_string(sb, "name"), uid);
        usec_t t0 = now_usec(CLOCK_MONOTONIC);
        int k = oci_pause(rec_runtime(r, uid), uid, &err);
        char ms[32];
        snprintf(ms, sizeof(ms), "%.1f", (double)(now_usec(CLOCK_MONOTONIC) - t0) / 1000.0);
        if (k < 0) {
            log_warn("cannot freeze sandbox: stopping it", "sandbox", api_meta_string(sb, "name"),
                     "error", err ? err : strerror(-k));
            rec_teardown(r, uid, false);
        } else {
            fe->frozen = true;
            log_info("sandbox frozen", "sandbox", api_meta_string(sb, "name"), "pause_ms", ms);
        }
    }
    fe = rec_find(r, uid);
    u->has_pod = u->o.pod = fe != NULL;
    u->o.pod_frozen = fe && fe->frozen;
    rec_write_status(r, sb, u);
}

/* A frozen container whose Sandbox runs again is thawed; one that cannot be is torn down (and
 * started anew). The entry, or NULL when there is none now. */
static rec_entry *reconcile_thaw(local_reconciler *r, const json_t *sb, const char *uid,
                                 rec_entry *e)
{
    if (!e || !e->frozen)
        return e;
    _cleanup_free_ char *err = NULL;
    usec_t t0 = now_usec(CLOCK_MONOTONIC);
    int k = oci_resume(rec_runtime(r, uid), uid, &err);
    char ms[32];
    snprintf(ms, sizeof(ms), "%.1f", (double)(now_usec(CLOCK_MONOTONIC) - t0) / 1000.0);
    if (k < 0) {
        log_warn("cannot thaw sandbox: starting it anew", "sandbox", api_meta_string(sb, "name"),
                 "error", err ? err : strerror(-k));
        rec_teardown(r, uid, false);
        e = NULL;
    } else {
        e->frozen = false;
        log_info("sandbox thawed", "sandbox", api_meta_string(sb, "name"), "resume_ms", ms);
    }
    return e;
}

/* The main process exited: Finished, as a terminated pod; the container is not started again
 * (sandboxd keeps serving files while it runs). True when it has (status written). */
static bool reconcile_finished(local_reconciler *r, const json_t *sb, const char *uid,
                               const rec_entry *e, status_update *u)
{
    int code = -1;
    bool exited = rec_main_exit(r, uid, &code) == 0;
    const json_t *stored_fin = reconcile_condition(sb, "Finished");
    if (exited || (stored_fin && json_string_value(json_object_get(stored_fin, "status")) &&
                   strcmp(json_string_value(json_object_get(stored_fin, "status")), "True") == 0)) {
        const char *reason = exited ? (code == 0 ? "PodSucceeded" : "PodFailed")
                                    : json_string_value(json_object_get(stored_fin, "reason"));
        bool ok = reason && strcmp(reason, "PodSucceeded") == 0;
        _cleanup_free_ char *msg = NULL;
        if (exited && asprintf(&msg, "main process exited with code %d", code) < 0)
            msg = NULL;
        const char *m = msg ? msg : json_string_value(json_object_get(stored_fin, "message"));
        u->has_pod = u->o.pod = e != NULL;
        u->o.phase = ok ? "Succeeded" : "Failed";
        u->o.finished_message = m ? m : "";
        rec_write_status(r, sb, u);
        return true;
    }
    return false;
}

/* Reconciles one Sandbox as stored. force: retry a start that failed at this generation.
 * Returns true while it waits for sandboxd to come up. */
static bool reconcile_one_untimed(local_reconciler *r, const json_t *sb, bool force)
{
    const char *uid = api_meta_string(sb, "uid");
    if (!uid)
        return false;
    /* A worker is starting its container: the object is left alone until the loop collects
     * the outcome (run_starts_done reconciles it again then, also when it was deleted). */
    if (rec_start_pending(r, uid))
        return false;
    if (reconcile_deleting(sb)) {
        /* Deleted: tear down in the pool, then drop the finalizer (the object goes then). */
        rec_timer_clear(r, uid);
        rec_failed_clear(r, uid);
        rec_teardown_async(r, uid, api_meta_string(sb, "namespace"), api_meta_string(sb, "name"));
        return false;
    }
    if (!local_has_finalizer(sb, LOCAL_TEARDOWN_FINALIZER) && !r->no_root &&
        add_finalizer(r, sb) < 0)
        return false; /* gone, or retried at the next resync */
    if (reconcile_expiry(r, sb, uid))
        return false;
    status_update u = {.uid = uid};
    if (reconcile_sandbox_suspended(sb)) {
        reconcile_suspend(r, sb, uid, &u);
        return false;
    }
    rec_entry *e = reconcile_thaw(r, sb, uid, rec_find(r, uid));
    if (reconcile_finished(r, sb, uid, e, &u))
        return false;
    rec_failure f = {0};
    long long gen = json_integer_value(json_object_get(json_object_get(sb, "metadata"), "generation"));
    rec_failed *prev = rec_failed_find(r, uid);
    if (!e && prev && prev->generation == gen && !force)
        return false;
    /* First sight: say that the sandbox is being started (o is zero: Ready=False/
     * DependenciesNotReady "Pod does not exist"). Written once the start is queued, so that
     * its commit overlaps runc run instead of preceding it; the loop alone writes status, so
     * the Ready written when the start is collected always comes after it. */
    bool first_sight = !e && !reconcile_condition(sb, "Ready");
    if (!e) {
        /* runc run and the first health check go to a start worker; on the calling thread only
         * when none can take it. */
        size_t handler = 0;
        int k = rec_materialise_handler(r, sb, &handler, &f);
        if (k >= 0 && rec_start_async(r, sb, handler) == 0) {
            if (first_sight)
                rec_write_status(r, sb, &u);
            return false;
        }
        if (first_sight)
            rec_write_status(r, sb, &u);
        if (k >= 0)
            k = rec_materialise(r, sb, &f);
        if (k < 0) {
            start_failed(r, sb, gen, &f);
            free(f.message);
            return false;
        }
    }
    e = rec_find(r, uid);
    if (!e)
        return false;
    rec_failed_clear(r, uid);
    if (!e->ready) {
        usec_t t0 = now_usec(CLOCK_MONOTONIC);
        e->ready = rec_health(r, uid, HEALTH_TIMEOUT_MS);
        char ms[32];
        snprintf(ms, sizeof(ms), "%.1f", (double)(now_usec(CLOCK_MONOTONIC) - t0) / 1000.0);
        log_info(e->ready ? "sandbox ready" : "sandbox not answering health yet", "sandbox",
                 api_meta_string(sb, "name"), "health_ms", ms);
    }
    if (!e->ready && container_dead(r, e)) {
        /* sandboxd exited: report it and retry at the next resync, not in a tight loop. */
        _cleanup_free_ char *line = last_log_line(r, uid), *msg = NULL;
        if (asprintf(&msg, "sandboxd exited: %s", line ? line : "") < 0)
            msg = NULL;
        rec_teardown(r, uid, false);
        rec_failed_set(r, uid, gen);
        u.has_pod = false;
        u.o.error = msg ? msg : "sandboxd exited";
        log_warn("sandboxd exited", "sandbox", api_meta_string(sb, "name"), "output",
                 line ? line : "");
        rec_write_status(r, sb, &u);
        return false;
    }
    u.has_pod = u.o.pod = true;
    u.o.phase = "Running";
    u.o.pod_ready = e->ready;
    u.resources = rec_effective_resources(r, sb);
    rec_write_status(r, sb, &u);
    json_decref(u.resources);
    return !e->ready;
}

/* Removes per-sandbox directories left behind by sandboxes that no longer exist. */
/* reconcile_one_untimed, its duration observed for /metrics. */
static bool reconcile_one(local_reconciler *r, const json_t *sb, bool force)
{
    usec_t start = now_usec(CLOCK_MONOTONIC);
    bool pending = reconcile_one_untimed(r, sb, force);
    local_metrics_reconcile("sandboxes", (double)(now_usec(CLOCK_MONOTONIC) - start) / 1e6,
                            false);
    return pending;
}

static bool net_keep(const char *uid, void *userdata)
{
    return rec_find(userdata, uid) != NULL || rec_teardown_pending(userdata, uid) ||
           rec_start_pending(userdata, uid);
}

/* The first process of a Ready sandbox's container exited (seen by its pidfd, or by a resync
 * that got there first): Finished when its main process exited, else reported and restarted. */
static void first_process_exited(local_reconciler *r, const json_t *sb, const char *uid,
                                 bool *pending)
{
    int code;
    bool main_exited = rec_main_exit(r, uid, &code) == 0;
    log_info("sandbox's first process exited", "sandbox", api_meta_string(sb, "name"), "uid", uid,
             "next", main_exited ? "finished" : "restart");
    rec_teardown(r, uid, false);
    if (!main_exited && !reconcile_deleting(sb)) {
        status_update u = {
            .uid = uid,
            .o = {.not_ready_message =
                      "Pod exited (the sandbox's first process is gone): restarting"}};
        rec_write_status(r, sb, &u);
    }
    *pending |= reconcile_one(r, sb, true);
}

/* Sandboxes a warm pool owns and no claim took yet: a burst of claims can take them all at
 * once, and the pools' refill then creates as many (the networks worth preparing ahead). */
static unsigned warm_pool_members(const json_t *items)
{
    unsigned members = 0;
    size_t i, j;
    json_t *sb, *ref;
    json_array_foreach(items, i, sb) {
        const json_t *refs = json_object_get(json_object_get(sb, "metadata"), "ownerReferences");
        json_array_foreach(refs, j, ref)
            if (strcmp(json_string_value(json_object_get(ref, "kind")) ?: "",
                       "SandboxWarmPool") == 0) {
                members++;
                break;
            }
    }
    return members;
}

/* Full pass: adopt running containers, delete orphans, reconcile every Sandbox. Returns the
 * resourceVersion the pass is consistent with; *ret_pending when something is still starting.
 * Only a periodic pass (retry) starts again the sandboxes that failed at their generation; the
 * quick passes that watch starting sandboxes do not, or a sandboxd that dies a little after
 * its start would be restarted in a loop. */
static uint64_t resync(local_reconciler *r, bool *ret_pending, bool retry)
{
    json_t *items = NULL, *ctrs = NULL;
    uint64_t rv = 0;
    *ret_pending = false;
    if (local_store_list(r->store, r->kind, NULL, &items, &rv) < 0)
        return local_store_current_rv(r->store);
    bool listed = false;
    for (size_t h = 0; !r->no_root && h < rec_n_handlers(r); h++) {
        const oci_runtime *rt = rec_handler(r, h);
        json_decref(ctrs);
        ctrs = NULL;
        if (oci_list(rt, &ctrs) < 0)
            continue;
        listed |= h == 0;
        size_t i, j;
        json_t *c, *sb;
        json_array_foreach(ctrs, i, c) {
            const char *id = json_string_value(json_object_get(c, "id"));
            const char *st = json_string_value(json_object_get(c, "status"));
            bool wanted = false;
            json_array_foreach(items, j, sb) {
                const char *uid = api_meta_string(sb, "uid");
                wanted |= uid && id && strcmp(uid, id) == 0;
            }
            if (!id || rec_teardown_pending(r, id) || rec_start_pending(r, id))
                continue; /* a worker owns it now */
            bool paused = st && strcmp(st, "paused") == 0;
            if (wanted && st && (strcmp(st, "running") == 0 || paused)) {
                pid_t cpid = (pid_t)json_integer_value(json_object_get(c, "pid"));
                if (!rec_find(r, id)) {
                    log_info("re-adopted sandbox container", "uid", id, "status", st);
                    /* Its output pipes, read again (a file from an older version is not). */
                    readopt_logs(r, id, cpid);
                }
                rec_adopt(r, id, cpid);
                rec_watch_main(r, id);
                rec_entry *e = rec_find(r, id);
                if (e) {
                    e->frozen = paused;
                    e->handler = h;
                }
            } else {
                if (paused) {
                    _cleanup_free_ char *rerr = NULL;
                    oci_resume(rt, id, &rerr);
                }
                /* Known under this handler, so that teardown asks the right runtime. */
                rec_adopt(r, id, 0);
                rec_entry *e = rec_find(r, id);
                if (e)
                    e->handler = h;
                log_info("removing container", "uid", id, "reason",
                         wanted ? "not running" : "no Sandbox");
                rec_teardown(r, id, !wanted);
            }
        }
    }
    if (listed) {
        /* Entries whose container vanished behind our back are started again. */
        for (size_t k = 0; k < r->n_entries;) {
            rec_entry *e = &r->entries[k];
            if (container_alive(e)) {
                k++;
                continue;
            }
            _cleanup_free_ char *uid = strdup(e->uid);
            if (!uid)
                break;
            const json_t *sb = NULL, *it;
            size_t j;
            json_array_foreach (items, j, it)
                if (strcmp(api_meta_string(it, "uid") ?: "", uid) == 0)
                    sb = it;
            if (sb && e->ready)
                first_process_exited(r, sb, uid, ret_pending);
            else
                rec_teardown(r, uid, false);
        }
        rec_gc_images(r);
        pthread_mutex_lock(&r->net_lock);
        local_net_gc(r->net, net_keep, r);
        local_net_prepare_demand(r->net, warm_pool_members(items));
        pthread_mutex_unlock(&r->net_lock);
        rec_gc_orphans(r, items);
    }
    json_decref(ctrs);
    size_t i;
    json_t *sb;
    json_array_foreach(items, i, sb) {
        if (local_store_is_shutdown(r->store))
            break; /* SIGTERM: do not start more containers */
        *ret_pending |= reconcile_one(r, sb, retry);
    }
    json_decref(items);
    return rv;
}

/* A SandboxTemplate changed: its running sandboxes' network rules follow it now (write_status
 * re-applies them), not at the next resync. */
static void template_changed(local_reconciler *r, bool *pending)
{
    json_t *items = NULL;
    uint64_t rv;
    if (!r->n_entries || local_store_list(r->store, r->kind, NULL, &items, &rv) < 0)
        return;
    size_t i;
    json_t *sb;
    json_array_foreach(items, i, sb) {
        const char *uid = api_meta_string(sb, "uid");
        if (uid && rec_find(r, uid))
            *pending |= reconcile_one(r, sb, false);
    }
    json_decref(items);
}

static void handle_event(local_reconciler *r, const store_event *ev, bool *pending)
{
    if (ev->kind == r->template_kind) {
        template_changed(r, pending);
        return;
    }
    if (ev->kind != r->kind)
        return;
    const char *uid = api_meta_string(ev->object, "uid");
    if (ev->type == STORE_DELETED) {
        if (uid) {
            rec_failed_clear(r, uid);
            rec_timer_clear(r, uid);
            /* Deleted without the teardown finalizer (created before it existed, or removed by
             * hand): tear down now, late. */
            if (!rec_teardown_take_finalized(r, uid) && !rec_teardown_pending(r, uid) &&
                !rec_start_pending(r, uid)) { /* a start's outcome: run_starts_done */
                log_info("sandbox deleted: removing its container", "uid", uid);
                rec_teardown_async(r, uid, NULL, NULL);
            }
        }
        return;
    }
    /* Act on the object as stored now: later events of this batch may have changed it (the
     * event's own object when they did not, without a parse). */
    json_t *cur = NULL;
    if (local_store_get_current(r->store, r->kind, api_meta_string(ev->object, "namespace"),
                                api_meta_string(ev->object, "name"), ev->object, &cur) < 0)
        return;
    if (uid && strcmp(uid, api_meta_string(cur, "uid") ?: "") == 0)
        *pending |= reconcile_one(r, cur, false);
    json_decref(cur);
}

/* Records one finished start (its entry) and reconciles its Sandbox as stored now: Ready when
 * sandboxd answered, the failure reported, or torn down when the Sandbox went meanwhile. */
static void start_done(local_reconciler *r, rec_start *s, bool *pending)
{
    if (s->result == 0) {
        rec_adopt(r, s->uid, s->pid);
        rec_entry *e = rec_find(r, s->uid);
        if (e) {
            e->handler = s->handler;
            e->ready = s->ready;
            rec_entry_set_limits(e, &s->limits);
        }
    }
    rec_start_collected(r, s->uid);
    if (s->result == -ESHUTDOWN)
        return; /* not started: the next asb serve does */
    json_t *cur = NULL;
    bool same = local_store_get(r->store, r->kind, api_meta_string(s->sandbox, "namespace"),
                                api_meta_string(s->sandbox, "name"), &cur) == 0 &&
                strcmp(api_meta_string(cur, "uid") ?: "", s->uid) == 0;
    if (!same) {
        if (!rec_teardown_pending(r, s->uid)) /* gone (no finalizer): nothing waits for it */
            rec_teardown_async(r, s->uid, NULL, NULL);
    } else if (s->result < 0 && !reconcile_deleting(cur)) {
        long long gen = json_integer_value(
            json_object_get(json_object_get(s->sandbox, "metadata"), "generation"));
        start_failed(r, cur, gen, &s->failure);
    } else {
        /* Ready first: the event's own commit is not on the path of a client waiting for it. */
        *pending |= reconcile_one(r, cur, false);
        if (s->result == 0)
            local_event_record(r->store, REC_EVENT_SOURCE, cur, LOCAL_EVENT_NORMAL, "Started",
                               "Start", "started its container");
    }
    json_decref(cur);
}

static void run_starts_done(local_reconciler *r, bool *pending)
{
    for (rec_start *s = rec_start_take_done(r); s;) {
        rec_start *next = s->next;
        start_done(r, s, pending);
        rec_start_free(s);
        s = next;
    }
}

/* A main process exited (the watcher saw an exit file): reconcile the sandboxes that have one. */
static void run_main_exits(local_reconciler *r, bool *pending)
{
    if (!atomic_exchange(&r->main_event, false))
        return;
    json_t *items = NULL;
    uint64_t rv;
    if (local_store_list(r->store, r->kind, NULL, &items, &rv) < 0)
        return;
    size_t i;
    json_t *sb;
    json_array_foreach(items, i, sb) {
        const char *uid = api_meta_string(sb, "uid");
        int code;
        if (uid && rec_main_exit(r, uid, &code) == 0)
            *pending |= reconcile_one(r, sb, false);
    }
    json_decref(items);
}

/* The first process of a container exited (its pidfd fired): the sandbox restarts, or is
 * Finished when its main process exited, as at a resync but at once. */
static void run_pid_exits(local_reconciler *r, bool *pending)
{
    if (!atomic_exchange(&r->pid_event, false))
        return;
    json_t *items = NULL;
    uint64_t rv;
    if (local_store_list(r->store, r->kind, NULL, &items, &rv) < 0)
        return;
    size_t i;
    json_t *sb;
    json_array_foreach (items, i, sb) {
        const char *uid = api_meta_string(sb, "uid");
        rec_entry *e = uid ? rec_find(r, uid) : NULL;
        if (!e || e->pidfd < 0 || !e->ready)
            continue; /* still starting: its health check sees a dead sandboxd (no loop) */
        struct pollfd p = {e->pidfd, POLLIN, 0};
        if (poll(&p, 1, 0) <= 0 || !(p.revents & POLLIN))
            continue;
        first_process_exited(r, sb, uid, pending);
    }
    json_decref(items);
}

static void *watch_thread(void *arg)
{
    local_reconciler *r = arg;
    for (;;) {
        struct pollfd p[3] = {
            {r->inotify_fd, POLLIN, 0}, {r->stop_fd, POLLIN, 0}, {r->epoll_fd, POLLIN, 0}};
        if (poll(p, 3, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[1].revents)
            break;
        if (p[2].revents) {
            /* One-shot: each pidfd reports once, then stays quiet until closed. */
            struct epoll_event evs[16];
            while (epoll_wait(r->epoll_fd, evs, ELEMENTSOF(evs), 0) > 0)
                ;
            atomic_store(&r->pid_event, true);
            local_store_nudge(r->store);
        }
        char buf[4096];
        bool seen = false;
        ssize_t n;
        while ((n = read(r->inotify_fd, buf, sizeof(buf))) > 0) {
            for (char *q = buf; q < buf + n;) {
                const struct inotify_event *ev = (const struct inotify_event *)q;
                if (ev->len && strcmp(ev->name, "exit") == 0)
                    seen = true;
                q += sizeof(*ev) + ev->len;
            }
        }
        if (seen) {
            atomic_store(&r->main_event, true);
            local_store_nudge(r->store);
        }
    }
    return NULL;
}

/* Reconciles every Sandbox whose requeue time has come (as stored now). */
static void run_due_timers(local_reconciler *r, bool *pending)
{
    usec_t now = now_usec(CLOCK_MONOTONIC);
    for (size_t i = 0; i < r->n_timers;) {
        if (r->timers[i].due > now) {
            i++;
            continue;
        }
        rec_timer t = r->timers[i];
        r->timers[i] = r->timers[--r->n_timers];
        json_t *cur = NULL;
        if (local_store_get(r->store, r->kind, t.ns, t.name, &cur) == 0 &&
            strcmp(api_meta_string(cur, "uid") ?: "", t.uid) == 0)
            *pending |= reconcile_one(r, cur, false);
        json_decref(cur);
        free(t.uid);
        free(t.ns);
        free(t.name);
        i = 0; /* reconcile_one may have added or removed timers */
    }
}

/* What the workers and watchers announced with a nudge, and the timers that came due. */
static void run_announced(local_reconciler *r, bool *pending)
{
    bool p = false;
    run_starts_done(r, &p);
    run_pid_exits(r, &p);
    run_main_exits(r, &p);
    run_due_timers(r, &p);
    *pending = p || *pending;
}

static void *reconcile_thread(void *arg)
{
    local_reconciler *r = arg;
    bool pending = false;
    uint64_t rv = resync(r, &pending, true), nudges = 0;
    usec_t next_resync = now_usec(CLOCK_MONOTONIC) + r->resync_interval;
    for (;;) {
        usec_t now = now_usec(CLOCK_MONOTONIC);
        usec_t wake = pending ? MIN(now + NOT_READY_RETRY, next_resync) : next_resync;
        usec_t deadline = MIN(wake, rec_timer_earliest(r));
        store_event **evs = NULL;
        int n = local_store_wait_nudged(r->store, rv, deadline, &nudges, &evs);
        if (n == -ESHUTDOWN)
            break;
        if (n == 0 && now_usec(CLOCK_MONOTONIC) < wake) {
            run_announced(r, &pending);
            continue;
        }
        if (n == -ESTALE || (n == 0 && now_usec(CLOCK_MONOTONIC) >= wake)) {
            bool periodic = n == -ESTALE || now_usec(CLOCK_MONOTONIC) >= next_resync;
            rv = MAX(rv, resync(r, &pending, periodic));
            if (periodic)
                next_resync = now_usec(CLOCK_MONOTONIC) + r->resync_interval;
            /* A nudge that came with the deadline was consumed by the wait: collect what it
             * announced (a finished start would otherwise wait for the next one). */
            run_announced(r, &pending);
            continue;
        }
        if (n < 0) {
            usleep(10000);
            continue;
        }
        bool p = false;
        for (int i = 0; i < n && !local_store_is_shutdown(r->store); i++) {
            rv = MAX(rv, evs[i]->rv);
            handle_event(r, evs[i], &p);
        }
        pending = p || pending;
        run_announced(r, &pending);
        store_events_free(evs, (size_t)n);
        if (now_usec(CLOCK_MONOTONIC) >= next_resync) { /* a steady stream of writes */
            rv = MAX(rv, resync(r, &pending, true));
            next_resync = now_usec(CLOCK_MONOTONIC) + r->resync_interval;
        }
    }
    return NULL;
}

/* Starts are runc's and sandboxd's CPU plus waits on the kernel: two per CPU keep the CPUs
 * busy without a queue of forks fighting over them. */
static size_t default_start_workers(void)
{
    const char *env = getenv("ASB_START_WORKERS"); /* benchmarks and tests: 1 = one at a time */
    char *end;
    unsigned long w = env ? strtoul(env, &end, 10) : 0;
    if (env && *env && !*end && w >= 1 && w <= 64)
        return w;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return (size_t)MIN(MAX(n > 0 ? 2 * n : 2, 2), 16);
}

int local_reconciler_start(const local_reconciler_options *o, local_reconciler **ret)
{
    local_reconciler *r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    r->store = o->store;
    r->idmap = o->idmap;
    pthread_mutex_init(&r->net_lock, NULL);
    pthread_mutex_init(&r->pool.lock, NULL);
    pthread_mutex_init(&r->starter.lock, NULL);
    pthread_cond_init(&r->starter.work, NULL);
    pthread_cond_init(&r->pool.work, NULL);
    pthread_cond_init(&r->pool.done, NULL);
    r->teardown_grace = o->teardown_grace ? o->teardown_grace : 10 * USEC_PER_SEC;
    r->inotify_fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    r->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    r->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (r->inotify_fd >= 0 && r->stop_fd >= 0 && r->epoll_fd >= 0 &&
        pthread_create(&r->watcher, NULL, watch_thread, r) == 0)
        r->watcher_started = true;
    else
        log_warn("cannot watch main processes and containers: their exit is seen at the next "
                 "resync");
    r->resync_interval = o->resync_interval ? o->resync_interval : DEFAULT_RESYNC_INTERVAL;
    r->image_gc_idle = o->image_gc_idle ? o->image_gc_idle : 10 * 60 * USEC_PER_SEC;
    r->defaults = o->defaults;
    if (o->capacity) {
        r->capacity = *o->capacity;
        r->has_capacity = true;
    }
    r->kind = api_kind_by_plural(API_GROUP_CORE, "sandboxes");
    r->template_kind = api_kind_by_plural(API_GROUP_EXT, "sandboxtemplates");
    _cleanup_free_ char *runc_root = NULL;
    int k;
    if (!r->kind || !(r->state_dir = strdup(o->state_dir)) ||
        asprintf(&r->inject_dir, "%s/inject", o->state_dir) < 0 ||
        asprintf(&runc_root, "%s/runc", o->state_dir) < 0 ||
        oci_runtime_init(&r->rt, o->runtime, runc_root) < 0) {
        local_reconciler_stop(r);
        return -ENOMEM;
    }
    if (geteuid() != 0) {
        r->no_root = "asb serve runs without root: local sandboxes need root in this version "
                     "(rootless runc is not supported yet)";
        log_warn("sandboxes unavailable", "reason", r->no_root);
    } else {
        char *err = NULL;
        k = local_inject_prepare(o->sandboxd, r->inject_dir, &err);
        if (k < 0) {
            if (!err && asprintf(&err, "cannot inject %s: %s", o->sandboxd, strerror(-k)) < 0)
                err = NULL;
            r->inject_error = err ? err : strdup("cannot inject sandboxd");
            log_warn("sandboxes unavailable", "reason", r->inject_error);
        }
        mkdir_p(runc_root, 0700);
        k = local_logs_start(o->log_max, &r->logs);
        if (k < 0)
            log_warn("cannot collect sandbox output", "error", strerror(-k));
    }
    local_net_options no = o->net;
    no.state_dir = o->state_dir;
    no.lock = &r->net_lock;
    char *nerr = NULL;
    int nk = local_net_start(&no, &r->net, &nerr);
    if (nk < 0) {
        log_error("bad network options", "error", nerr ? nerr : strerror(-nk));
        free(nerr);
        local_reconciler_stop(r);
        return nk;
    }
    k = runtime_classes_parse(getenv("ASB_RUNTIME_CLASSES"), &r->classes, &r->n_classes,
                              &r->class_error);
    if (k == -ENOMEM) {
        local_reconciler_stop(r);
        return k;
    }
    if (k < 0)
        log_warn("runtime classes unavailable", "reason", r->class_error);
    else if (!r->no_root)
        rec_handlers_restore(r);
    k = rec_pool_start(r, o->teardown_workers ? o->teardown_workers : 4);
    if (k < 0) {
        local_reconciler_stop(r);
        return k;
    }
    k = rec_starter_start(r, o->start_workers ? o->start_workers : default_start_workers());
    if (k < 0) {
        local_reconciler_stop(r);
        return k;
    }
    k = pthread_create(&r->thread, NULL, reconcile_thread, r);
    if (k != 0) {
        r->thread = 0;
        local_reconciler_stop(r);
        return -k;
    }
    *ret = r;
    return 0;
}

/* SIGTERM: every Sandbox marked for deletion (also those whose event the loop did not reach)
 * goes to the teardown pool, which stop waits for within teardown_grace. */
static void finish_deletions(local_reconciler *r)
{
    json_t *items = NULL;
    uint64_t rv;
    if (r->no_root || local_store_list(r->store, r->kind, NULL, &items, &rv) < 0)
        return;
    size_t i;
    json_t *sb;
    json_array_foreach (items, i, sb) {
        const char *uid = api_meta_string(sb, "uid");
        if (uid && reconcile_deleting(sb))
            rec_teardown_async(r, uid, api_meta_string(sb, "namespace"),
                               api_meta_string(sb, "name"));
    }
    json_decref(items);
}

local_reconciler *local_reconciler_stop(local_reconciler *r)
{
    if (!r)
        return NULL;
    if (r->thread)
        pthread_join(r->thread, NULL);
    /* Running starts finish; their containers are recorded, so that a deletion below tears
     * them down under the right runtime (and a later asb serve re-adopts the others). */
    rec_starter_stop(r);
    for (rec_start *s = rec_start_take_done(r); s;) {
        rec_start *next = s->next;
        if (s->result == 0) {
            rec_adopt(r, s->uid, s->pid);
            rec_entry *e = rec_find(r, s->uid);
            if (e)
                e->handler = s->handler;
        }
        rec_start_collected(r, s->uid);
        rec_start_free(s);
        s = next;
    }
    if (r->thread)
        finish_deletions(r);
    rec_pool_stop(r, now_usec(CLOCK_MONOTONIC) + r->teardown_grace);
    if (r->watcher_started) {
        uint64_t one = 1;
        if (write(r->stop_fd, &one, sizeof(one)) == sizeof(one))
            pthread_join(r->watcher, NULL);
    }
    if (r->inotify_fd >= 0)
        close(r->inotify_fd);
    if (r->stop_fd >= 0)
        close(r->stop_fd);
    for (size_t i = 0; i < r->n_entries; i++) {
        free(r->entries[i].uid);
        if (r->entries[i].pidfd >= 0)
            close(r->entries[i].pidfd);
    }
    if (r->epoll_fd >= 0)
        close(r->epoll_fd);
    free(r->entries);
    for (size_t i = 0; i < r->n_failed; i++)
        free(r->failed[i].uid);
    free(r->failed);
    for (size_t i = 0; i < r->n_timers; i++) {
        free(r->timers[i].uid);
        free(r->timers[i].ns);
        free(r->timers[i].name);
    }
    free(r->timers);
    oci_runtime_done(&r->rt);
    for (size_t i = 0; i < r->n_extra; i++)
        oci_runtime_done(&r->extra[i]);
    free(r->extra);
    runtime_classes_free(r->classes, r->n_classes);
    free(r->class_error);
    local_net_stop(r->net);
    local_logs_stop(r->logs);
    free(r->inject_error);
    free(r->inject_dir);
    free(r->state_dir);
    pthread_mutex_destroy(&r->net_lock);
    pthread_mutex_destroy(&r->pool.lock);
    for (size_t i = 0; i < r->starter.n_busy; i++)
        free(r->starter.busy[i]);
    free(r->starter.busy);
    pthread_mutex_destroy(&r->starter.lock);
    pthread_cond_destroy(&r->starter.work);
    pthread_cond_destroy(&r->pool.work);
    pthread_cond_destroy(&r->pool.done);
    free(r);
    return NULL;
}
