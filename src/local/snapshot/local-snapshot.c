/* The snapshotter of `asb serve` (local-snapshot.h): captures SandboxSnapshots and collects
 * the garbage of deleted ones. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api.h"
#include "basic/buf.h"
#include "basic/macro.h"
#include "local/store/local-events.h"
#include "local/snapshot/local-snapshot-manifest.h"
#include "local/snapshot/local-snapshot-overlay.h"
#include "local/snapshot/local-snapshot-store.h"
#include "local/snapshot/local-snapshot-tree.h"
#include "local/snapshot/local-snapshot.h"
#include "reconcile/reconcile.h"
#include "shared/log.h"

#define EVENT_SOURCE "snapshot-controller"
#define PENDING_RETRY (2 * USEC_PER_SEC)
#define FREEZER_ROOT "/sys/fs/cgroup/freezer/asb"

struct local_snapshotter {
    local_store *store;
    char *state_dir;
    local_idmap *idmap;
    snap_store *objects;
    const api_kind *k_snap, *k_sandbox;
    pthread_t thread;
};

/* ---- the freezer (cgroup v1, the container's cgroup /asb/<uid>) ---- */

static int freezer_state(const char *uid, char *out, size_t n)
{
    _cleanup_free_ char *p = strdup_printf(FREEZER_ROOT "/%s/freezer.state", uid);
    if (!p)
        return -ENOMEM;
    _cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t r = read(fd, out, n - 1);
    if (r < 0)
        return -errno;
    out[r] = 0;
    out[strcspn(out, "\n")] = 0;
    return 0;
}

static int freezer_set(const char *uid, const char *state)
{
    _cleanup_free_ char *p = strdup_printf(FREEZER_ROOT "/%s/freezer.state", uid);
    if (!p)
        return -ENOMEM;
    _cleanup_close_ int fd = open(p, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    if (write(fd, state, strlen(state)) < 0)
        return -errno;
    return 0;
}

/* Freezes the sandbox's processes and waits until they are (FREEZING -> FROZEN). Returns 1
 * when we froze it, 0 when there is nothing to freeze or it was frozen already (suspended:
 * leave it so), or a negative errno. */
static int freeze(const char *uid)
{
    char st[32];
    int k = freezer_state(uid, st, sizeof(st));
    if (k == -ENOENT)
        return 0; /* no container, or not runc's cgroup v1: nothing runs that could write */
    if (k < 0)
        return k;
    if (strcmp(st, "FROZEN") == 0)
        return 0;
    if ((k = freezer_set(uid, "FROZEN")) < 0)
        return k;
    for (int i = 0; i < 2000; i++) {
        if ((k = freezer_state(uid, st, sizeof(st))) < 0)
            break;
        if (strcmp(st, "FROZEN") == 0)
            return 1;
        usleep(1000);
    }
    freezer_set(uid, "THAWED");
    return k < 0 ? k : -ETIMEDOUT;
}

/* ---- status ---- */

static int set_status_cb(const json_t *old, json_t **ret_new, void *payload)
{
    json_t *want = payload;
    /* Another object of the same name (deleted and created again meanwhile): not ours. */
    if (!json_equal(json_object_get(json_object_get(old, "metadata"), "uid"),
                    json_object_get(want, "uid")))
        return STORE_UPDATE_UNCHANGED;
    json_t *n = json_deep_copy(old);
    if (!n)
        return -ENOMEM;
    json_t *status = json_deep_copy(json_object_get(want, "status"));
    json_t *ready = reconcile_make_condition(
        old, "Ready", json_string_value(json_object_get(want, "ready")),
        json_string_value(json_object_get(want, "reason")),
        json_string_value(json_object_get(want, "message")),
        json_integer_value(json_object_get(json_object_get(old, "metadata"), "generation")),
        (int64_t)now_usec(CLOCK_REALTIME));
    if (!status || !ready ||
        json_object_set_new(status, "conditions", json_pack("[o]", ready)) < 0 ||
        json_object_set_new(n, "status", status) < 0) {
        json_decref(n);
        return -ENOMEM;
    }
    if (json_equal(json_object_get(old, "status"), status)) {
        json_decref(n);
        return STORE_UPDATE_UNCHANGED;
    }
    *ret_new = n;
    return json_object_set_new(want, "changed", json_true()) < 0 ? -ENOMEM : 0;
}

static void set_status(local_snapshotter *s, const json_t *snap, const char *ready,
                       const char *reason, json_t *status, const char *fmt, ...) _printf_(6, 7);
static void set_status(local_snapshotter *s, const json_t *snap, const char *ready,
                       const char *reason, json_t *status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    _cleanup_buf_ buf msg = BUF_INIT;
    (void)buf_appendv(&msg, fmt, ap);
    va_end(ap);
    _cleanup_(json_decrefp) json_t *want = json_pack(
        "{s:s?,s:s,s:s,s:s,s:o}", "uid", api_meta_string(snap, "uid"), "ready", ready, "reason",
        reason, "message", msg.data ? msg.data : "", "status", status ? status : json_object());
    json_t *res = NULL;
    if (want && local_store_update(s->store, s->k_snap, api_meta_string(snap, "namespace"),
                                   api_meta_string(snap, "name"), set_status_cb, want, &res) == 0)
        json_decref(res);
    if (!json_is_true(json_object_get(want, "changed")))
        return; /* the same outcome again (a pending retry): nothing new to say */
    local_event_record(s->store, EVENT_SOURCE, snap,
                       strcmp(ready, "True") == 0 ? LOCAL_EVENT_NORMAL : LOCAL_EVENT_WARNING,
                       reason, "Snapshot", "%s", msg.data ? msg.data : reason);
}

/* ---- capture ---- */

/* The newest Ready snapshot of the same Sandbox (by uid), as hint: unchanged files are not read
 * again. *ret owned or NULL. */
static json_t *lineage_hint(local_snapshotter *s, const char *ns, const char *sandbox_uid)
{
    _cleanup_(json_decrefp) json_t *items = NULL;
    uint64_t rv;
    if (local_store_list(s->store, s->k_snap, ns, &items, &rv) < 0)
        return NULL;
    const json_t *best = NULL, *it;
    const char *best_at = NULL;
    size_t i;
    json_array_foreach (items, i, it) {
        const json_t *st = json_object_get(it, "status");
        const char *at = json_string_value(json_object_get(st, "capturedAt")),
                   *src = json_string_value(
                       json_object_get(json_object_get(st, "source"), "sandboxUID"));
        if (at && src && strcmp(src, sandbox_uid) == 0 && (!best_at || strcmp(at, best_at) > 0)) {
            best = it;
            best_at = at;
        }
    }
    json_t *m = NULL;
    if (best && snap_store_load_manifest(s->objects, api_meta_string(best, "uid"), &m) == 0 &&
        snap_manifest_check(m, NULL) == 0)
        return m;
    json_decref(m);
    return NULL;
}

/* The workspace and every volume directory of the sandbox. *ret_paths owns the strings. */
static int sandbox_roots(local_snapshotter *s, const char *uid, snap_root **ret, size_t *ret_n,
                         char ***ret_paths)
{
    _cleanup_free_ char *vols = strdup_printf("%s/volumes/%s", s->state_dir, uid);
    char *ws = strdup_printf("%s/sandboxes/%s/workspace", s->state_dir, uid);
    if (!vols || !ws) {
        free(ws);
        return -ENOMEM;
    }
    size_t n = 1, cap = 8;
    snap_root *r = calloc(cap, sizeof(*r));
    char **paths = calloc(2 * cap + 1, sizeof(char *));
    if (!r || !paths) {
        free(r), free(paths), free(ws);
        return -ENOMEM;
    }
    paths[0] = ws;
    r[0] = (snap_root){SNAP_ROOT_WORKSPACE, ws};
    _cleanup_closedir_ DIR *d = opendir(vols);
    struct dirent *e;
    int k = 0;
    while (k == 0 && d && (e = readdir(d))) {
        /* A volume with a size of its own is a link to its filesystem (local-volume.h). */
        if (e->d_name[0] == '.' || (e->d_type != DT_DIR && e->d_type != DT_LNK))
            continue;
        if (n == cap) {
            k = -E2BIG; /* more volumes than a Sandbox has in practice */
            break;
        }
        char *name = strdup_printf(SNAP_ROOT_VOLUME_PREFIX "%s", e->d_name),
             *path = strdup_printf("%s/%s", vols, e->d_name);
        paths[2 * n - 1] = name;
        paths[2 * n] = path;
        if (!name || !path)
            k = -ENOMEM;
        r[n++] = (snap_root){name, path};
    }
    *ret = r;
    *ret_n = n;
    *ret_paths = paths;
    return k;
}

static void free_roots(snap_root *r, size_t n, char **paths)
{
    for (size_t i = 0; paths && i < 2 * n; i++)
        free(paths[i]);
    free(paths);
    free(r);
}

/* The root filesystem image of a sandbox: its container's image, or for one started from a
 * snapshot the base image its seed recorded (a fork of a fork runs on the first one's image). */
static char *base_image(local_snapshotter *s, const json_t *sb, const char *image)
{
    if (!image ||
        strncmp(image, LOCAL_SNAPSHOT_IMAGE_PREFIX, strlen(LOCAL_SNAPSHOT_IMAGE_PREFIX)) != 0)
        return image ? strdup(image) : NULL;
    _cleanup_free_ char *p = strdup_printf("%s/sandboxes/%s/" LOCAL_SNAPSHOT_SEEDED, s->state_dir,
                                           api_meta_string(sb, "uid"));
    _cleanup_fclose_ FILE *f = p ? fopen(p, "re") : NULL;
    char line[4096];
    if (!f || !fgets(line, sizeof(line), f) || !fgets(line, sizeof(line), f))
        return NULL;
    line[strcspn(line, "\n")] = 0;
    return strdup(line);
}

static json_t *source_of(local_snapshotter *s, const json_t *sb)
{
    const json_t *spec = json_object_get(sb, "spec"), *pt = json_object_get(spec, "podTemplate"),
                 *ctr =
                     json_array_get(json_object_get(json_object_get(pt, "spec"), "containers"), 0);
    const char *tpl = json_string_value(
        json_object_get(json_object_get(json_object_get(sb, "metadata"), "annotations"),
                        RECONCILE_ANN_TEMPLATE_REF));
    _cleanup_free_ char *image =
        base_image(s, sb, json_string_value(json_object_get(ctr, "image")));
    json_t *src =
        json_pack("{s:s?,s:s?,s:s?,s:s?}", "sandbox", api_meta_string(sb, "name"), "sandboxUID",
                  api_meta_string(sb, "uid"), "template", tpl, "image", image);
    if (src && pt)
        json_object_set(src, "podTemplate", (json_t *)pt);
    if (src && json_object_get(spec, "volumeClaimTemplates"))
        json_object_set(src, "volumeClaimTemplates", json_object_get(spec, "volumeClaimTemplates"));
    return src;
}

static bool capture(local_snapshotter *s, const json_t *snap)
{
    const char *ns = api_meta_string(snap, "namespace"), *uid = api_meta_string(snap, "uid");
    const char *sbname = json_string_value(
        json_object_get(json_object_get(json_object_get(snap, "spec"), "sandboxRef"), "name"));
    _cleanup_(json_decrefp) json_t *sb = NULL;
    if (!uid || !sbname || local_store_get(s->store, s->k_sandbox, ns, sbname, &sb) < 0 ||
        reconcile_deleting(sb)) {
        set_status(s, snap, "False", "SandboxNotFound", NULL,
                   "Sandbox \"%s\" not found in namespace \"%s\"%s", sbname ? sbname : "", ns,
                   sb ? " (it is being deleted)" : "");
        return false;
    }
    const char *sbuid = api_meta_string(sb, "uid");
    snap_root *roots = NULL;
    size_t n = 0;
    char **paths = NULL;
    int k = sbuid ? sandbox_roots(s, sbuid, &roots, &n, &paths) : -EINVAL;
    struct stat st;
    if (k == 0 && stat(roots[0].path, &st) < 0) {
        free_roots(roots, n, paths);
        set_status(s, snap, "False", "SandboxNotStarted", NULL,
                   "Sandbox \"%s\" has no workspace yet: waiting for it to start", sbname);
        return true;
    }
    uint32_t base = 0, count = 0;
    if (s->idmap && local_idmap_lookup(s->idmap, sbuid, &base) == 0)
        count = LOCAL_IDMAP_SLOT;
    _cleanup_(json_decrefp) json_t *hint = lineage_hint(s, ns, sbuid), *first = NULL, *m = NULL;
    _cleanup_free_ char *err = NULL;
    snap_stats st1 = {0}, st2 = {0};
    /* Pass one, live: most data is read here, while the sandbox runs. */
    snap_capture_options o = {.id_base = base, .id_count = count, .hint = hint, .tolerant = true};
    if (k == 0)
        k = snap_capture(s->objects, roots, n, &o, &first, &st1, &err);
    /* Pass two, frozen: only what changed since pass one is read. */
    usec_t t0 = now_usec(CLOCK_MONOTONIC), paused = 0;
    int froze = k == 0 ? freeze(sbuid) : 0;
    if (froze >= 0 && k == 0) {
        o.hint = first;
        o.tolerant = false;
        free(err);
        err = NULL;
        k = snap_capture(s->objects, roots, n, &o, &m, &st2, &err);
    }
    if (froze > 0) {
        freezer_set(sbuid, "THAWED");
        paused = now_usec(CLOCK_MONOTONIC) - t0;
    }
    free_roots(roots, n, paths);
    if (froze < 0 && k == 0)
        k = froze;
    if (k == 0)
        k = snap_store_save_manifest(s->objects, uid, m);
    if (k < 0) {
        set_status(s, snap, "False", "CaptureFailed", NULL, "cannot capture Sandbox \"%s\": %s",
                   sbname, err ? err : strerror(-k));
        return false;
    }
    char at[40];
    reconcile_format_time((int64_t)now_usec(CLOCK_REALTIME), 0, at);
    json_t *status = json_pack("{s:s,s:I,s:I,s:I,s:I,s:o*}", "capturedAt", at, "files",
                               json_integer_value(json_object_get(m, "files")), "size",
                               json_integer_value(json_object_get(m, "size")), "storedBytes",
                               (json_int_t)(st1.stored + st2.stored), "pauseMicroseconds",
                               (json_int_t)paused, "source", source_of(s, sb));
    set_status(s, snap, "True", "Captured", status,
               "captured %lld entries (%lld bytes) of Sandbox \"%s\"; paused %.1f ms%s",
               (long long)json_integer_value(json_object_get(m, "files")),
               (long long)json_integer_value(json_object_get(m, "size")), sbname,
               (double)paused / 1000.0,
               froze > 0 ? "" : " (not frozen: not running, or already suspended)");
    log_info("snapshot captured", "snapshot", api_meta_string(snap, "name"), "sandbox", sbname);
    return false;
}

/* ---- the thread ---- */

static bool needs_capture(const json_t *snap)
{
    if (reconcile_deleting(snap))
        return false;
    const json_t *ready = reconcile_condition(snap, "Ready");
    const char *reason = json_string_value(json_object_get(ready, "reason"));
    return !ready || (reason && strcmp(reason, "SandboxNotStarted") == 0);
}

static int known_uid(const char *uid, void *payload)
{
    const json_t *items = payload, *it;
    size_t i;
    json_array_foreach (items, i, it) {
        const char *u = api_meta_string(it, "uid");
        if (u && strcmp(u, uid) == 0)
            return 1;
    }
    return 0;
}

/* Whether snap is owned by Sandboxes only (the forks it was made for: asb_fork) and none of
 * them is left. */
static bool owners_gone(const json_t *snap, const json_t *sandboxes)
{
    const json_t *refs = json_object_get(json_object_get(snap, "metadata"), "ownerReferences"),
                 *ref;
    size_t i;
    if (json_array_size(refs) == 0)
        return false;
    json_array_foreach (refs, i, ref) {
        const char *kind = json_string_value(json_object_get(ref, "kind")),
                   *uid = json_string_value(json_object_get(ref, "uid"));
        if (!kind || strcmp(kind, "Sandbox") != 0 || !uid || known_uid(uid, (void *)sandboxes))
            return false;
    }
    return true;
}

/* Deletes the snapshots whose owning forks are all gone, as Kubernetes' garbage collector
 * deletes an object once every owner is. */
static void collect_owned(local_snapshotter *s, const json_t *snaps)
{
    _cleanup_(json_decrefp) json_t *sandboxes = NULL;
    uint64_t rv;
    const json_t *it;
    size_t i;
    bool any = false; /* most snapshots have no owner: then no list of every sandbox */
    json_array_foreach (snaps, i, it)
        any |= json_array_size(json_object_get(json_object_get(it, "metadata"),
                                               "ownerReferences")) > 0;
    if (!any || local_store_list(s->store, s->k_sandbox, NULL, &sandboxes, &rv) < 0)
        return;
    json_array_foreach (snaps, i, it) {
        if (!owners_gone(it, sandboxes))
            continue;
        json_t *gone = NULL;
        int k = local_store_delete(s->store, s->k_snap, api_meta_string(it, "namespace"),
                                   api_meta_string(it, "name"), &gone);
        json_decref(gone);
        if (k < 0 && k != -ENOENT)
            log_warn("cannot delete a snapshot whose forks are gone", "snapshot",
                     api_meta_string(it, "name"), "error", strerror(-k));
        else if (k == 0)
            log_info("snapshot deleted with the last of its forks", "snapshot",
                     api_meta_string(it, "name"));
    }
}

/* Captures what waits; with gc, removes the data of snapshots that are gone; with owned, the
 * snapshots whose forks are all gone. True when a capture waits for its Sandbox to start. */
static bool run_pass(local_snapshotter *s, bool gc, bool owned)
{
    _cleanup_(json_decrefp) json_t *items = NULL;
    uint64_t rv;
    if (local_store_list(s->store, s->k_snap, NULL, &items, &rv) < 0)
        return true;
    bool pending = false;
    const json_t *it;
    size_t i;
    json_array_foreach (items, i, it)
        if (needs_capture(it))
            pending |= capture(s, it);
    if (owned || gc)
        collect_owned(s, items);
    if (gc) {
        size_t removed = 0;
        int k = snap_store_gc(s->objects, known_uid, items, &removed);
        local_snapshot_trees_gc(s->state_dir); /* kept while a fork mounts it */
        if (k < 0)
            log_warn("snapshot garbage collection failed", "error", strerror(-k));
        else if (removed > 0) {
            char count[24];
            snprintf(count, sizeof(count), "%zu", removed);
            log_info("snapshot objects removed", "count", count);
        }
    }
    return pending;
}

static void *snapshotter_thread(void *arg)
{
    local_snapshotter *s = arg;
    uint64_t rv = local_store_current_rv(s->store);
    bool pending = run_pass(s, true, true);
    usec_t passed = now_usec(CLOCK_MONOTONIC); /* unrelated events must not push a retry back */
    for (;;) {
        usec_t deadline = passed + (pending ? PENDING_RETRY : 60 * USEC_PER_SEC);
        store_event **evs = NULL;
        int n = local_store_wait(s->store, rv, deadline, &evs);
        if (n == -ESHUTDOWN)
            break;
        bool run = n == 0 ? pending : n == -ESTALE, gc = n == -ESTALE, owned = false;
        if (n == -ESTALE)
            rv = local_store_current_rv(s->store);
        for (int i = 0; i < n; i++) {
            rv = MAX(rv, evs[i]->rv);
            if (evs[i]->kind == s->k_snap) {
                run |= evs[i]->type == STORE_ADDED;
                gc |= evs[i]->type == STORE_DELETED;
            } else if (evs[i]->kind == s->k_sandbox) {
                run |= pending;
                owned |= evs[i]->type == STORE_DELETED; /* the last fork of a snapshot? */
            }
        }
        if (n > 0)
            store_events_free(evs, (size_t)n);
        if (n < 0 && n != -ESTALE) {
            usleep(10000);
            continue;
        }
        if (run || gc || owned) {
            pending = run_pass(s, gc, owned);
            passed = now_usec(CLOCK_MONOTONIC);
        } else if (n == 0)
            passed = now_usec(CLOCK_MONOTONIC); /* a quiet minute: wait another */
    }
    return NULL;
}

int local_snapshotter_start(const local_snapshotter_options *o, local_snapshotter **ret)
{
    local_snapshotter *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->store = o->store;
    s->idmap = o->idmap;
    s->k_snap = api_kind_by_plural(API_GROUP_EXT, "sandboxsnapshots");
    s->k_sandbox = api_kind_by_plural(API_GROUP_CORE, "sandboxes");
    _cleanup_free_ char *dir = strdup_printf("%s/snapshots", o->state_dir);
    int k = !dir || !(s->state_dir = strdup(o->state_dir)) ? -ENOMEM : 0;
    if (k == 0)
        k = snap_store_open(dir, &s->objects);
    if (k == 0)
        k = -pthread_create(&s->thread, NULL, snapshotter_thread, s);
    if (k < 0) {
        snap_store_free(s->objects);
        free(s->state_dir);
        free(s);
        return k;
    }
    *ret = s;
    return 0;
}

local_snapshotter *local_snapshotter_stop(local_snapshotter *s)
{
    if (!s)
        return NULL;
    pthread_join(s->thread, NULL);
    snap_store_free(s->objects);
    free(s->state_dir);
    free(s);
    return NULL;
}
