/* One sandbox's container: directories, sockets, bundle, runc, health. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "api/api-objects.h"
#include "api/api-pod.h"
#include "basic/fs-util.h"
#include "api/api.h"
#include "basic/macro.h"
#include "basic/state-files.h"
#include "basic/time-util.h"
#include "local/container/local-bundle.h"
#include "local/container/local-bundle-shared.h"
#include "local/runtime/local-cleanup.h"
#include "local/fs/local-fs.h"
#include "local/container/local-image.h"
#include "local/container/local-limits.h"
#include "local/store/local-events.h"
#include "local/reconcile/local-reconcile-internal.h"
#include "local/runtime/local-runtime-gvisor.h"
#include "local/storage/local-scratch.h"
#include "local/snapshot/local-snapshot-overlay.h"
#include "local/snapshot/local-snapshot.h"
#include "local/storage/local-volume.h"
#include "local/container/local-tcpmem.h"
#include "local/container/local-userns.h"
#include "reconcile/reconcile.h"
#include "shared/log.h"

#define DEFAULT_UID 1000
#define DEFAULT_PIDS_LIMIT 4096
/* How long a start under runsc waits for sandboxd to bind its sockets (its Sentry boots
 * first: ~0.3 s idle, seconds on a loaded machine). */
#define START_SOCKETS_TIMEOUT_MS 10000
/* How long a teardown waits for a killed container's first process before leaving the rest to
 * runc delete --force (a loaded machine, a cgroup still frozen). */
#define TEARDOWN_KILL_TIMEOUT_MS 2000

rec_entry *rec_find(local_reconciler *r, const char *uid)
{
    for (size_t i = 0; i < r->n_entries; i++)
        if (strcmp(r->entries[i].uid, uid) == 0)
            return &r->entries[i];
    return NULL;
}

/* A one-shot pidfd on the container's first process: the watcher thread sees its exit. */
static void watch_pid(local_reconciler *r, rec_entry *e)
{
    if (e->pidfd >= 0) {
        close(e->pidfd);
        e->pidfd = -1;
    }
    if (e->pid <= 0 || r->epoll_fd < 0)
        return;
    int fd = (int)syscall(SYS_pidfd_open, e->pid, 0);
    if (fd < 0)
        return; /* already gone (the resync sees it) or no pidfd: resync only */
    struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT, .data.fd = fd};
    if (epoll_ctl(r->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        close(fd);
        return;
    }
    e->pidfd = fd;
}

void rec_adopt(local_reconciler *r, const char *uid, pid_t pid)
{
    rec_entry *e = rec_find(r, uid);
    if (e) {
        if (e->pid != pid || e->pidfd < 0) {
            if (e->pid != pid) /* another container: its limits are read again */
                e->limits_read = false;
            e->pid = pid;
            watch_pid(r, e);
        }
        return;
    }
    rec_entry *v = realloc(r->entries, (r->n_entries + 1) * sizeof(*v));
    char *u = strdup(uid);
    if (!v || !u) {
        free(u);
        if (v)
            r->entries = v;
        return;
    }
    r->entries = v;
    e = &r->entries[r->n_entries++];
    *e = (rec_entry){.uid = u, .pid = pid, .pidfd = -1};
    watch_pid(r, e);
}

void rec_forget(local_reconciler *r, const char *uid)
{
    for (size_t i = 0; i < r->n_entries; i++) {
        if (strcmp(r->entries[i].uid, uid) != 0)
            continue;
        free(r->entries[i].uid);
        if (r->entries[i].pidfd >= 0)
            close(r->entries[i].pidfd); /* also leaves the epoll set */
        r->entries[i] = r->entries[--r->n_entries];
        return;
    }
}

static char *path_of(local_reconciler *r, const char *area, const char *uid, const char *leaf)
{
    char *p = NULL;
    if (asprintf(&p, "%s/%s/%s%s%s", r->state_dir, area, uid, leaf ? "/" : "", leaf ? leaf : "") <
        0)
        return NULL;
    return p;
}

int rec_entry_pidfd(const rec_entry *e)
{
    if (!e || e->pidfd < 0 || e->pid <= 0)
        return -ESRCH;
    int fd = (int)syscall(SYS_pidfd_open, e->pid, 0);
    if (fd < 0)
        return -errno;
    /* The entry's own pidfd has not fired after the new one was opened: the pid still named
     * the container's process then, so both refer to it. */
    struct pollfd p = {e->pidfd, POLLIN, 0};
    if (poll(&p, 1, 0) != 0) {
        close(fd);
        return -ESRCH;
    }
    return fd;
}

int rec_teardown_run(local_reconciler *r, const char *uid, const oci_runtime *rt, bool frozen,
                     int pidfd, bool purge, rec_teardown_times *ret_times)
{
    usec_t t0 = now_usec(CLOCK_MONOTONIC), t_kill, t_runtime;
    _cleanup_(api_error_clearp) api_error err = API_ERROR_INIT;
    _cleanup_free_ char *run = path_of(r, "run", uid, NULL),
                        *base = path_of(r, "sandboxes", uid, NULL),
                        *bundle = path_of(r, "sandboxes", uid, "bundle"),
                        *vols = path_of(r, "volumes", uid, NULL);
    if (frozen && !r->no_root) {
        /* Thaw first: a frozen container cannot act on the SIGKILL of runc delete. */
        _cleanup_(api_error_clearp) api_error rerr = API_ERROR_INIT;
        oci_resume(rt, uid, &rerr);
    }
    /* runc delete --force kills every process and removes the container's cgroups; with the
     * first process already dead it does so without its 100 ms polling (oci_kill_wait). */
    if (!r->no_root)
        (void)oci_kill_wait(rt, pidfd, TEARDOWN_KILL_TIMEOUT_MS);
    t_kill = now_usec(CLOCK_MONOTONIC);
    int k = r->no_root ? 0 : oci_delete(rt, uid, &err);
    t_runtime = now_usec(CLOCK_MONOTONIC);
    if (k < 0)
        log_warn("cannot delete container", "uid", uid, "error", err.message ?: strerror(-k));
    else {
        /* runc gives up on cgroups whose processes are still dying: finish its job. */
        (void)local_cleanup_sandbox_cgroups(uid, NULL);
        if (purge)
            local_idmap_release(r->idmap, uid); /* the Sandbox and its container are gone */
    }
    if (r->net) {
        pthread_mutex_lock(&r->net_lock);
        local_net_detach(r->net, uid); /* rules, veth, namespace, address, DNS state */
        pthread_mutex_unlock(&r->net_lock);
    }
    if (run) {
        _cleanup_free_ char *stage = path_of(r, "run", uid, "volumes");
        if (stage)
            (void)local_volumes_unstage(stage); /* left by a crash mid-start: rm stops at mounts */
        fs_rm_rf(run); /* sockets */
    }
    /* The container is gone: its bundle becomes a spare for the next start, else removed. */
    _cleanup_free_ char *shared = NULL;
    if (k == 0 && bundle && asprintf(&shared, "%s/shared", r->state_dir) >= 0)
        (void)local_shared_bundle_recycle(shared, bundle);
    if (purge) {
        /* A fork's overlays first: removal stops at mount points. */
        int ok = vols ? local_snapshot_entry_overlays_release(vols) : 0;
        if (ok == 0 && base)
            ok = local_snapshot_entry_overlays_release(base);
        if (ok < 0)
            log_warn("cannot unmount the sandbox's overlays", "uid", uid, "error", strerror(-ok));
    }
    if (purge && vols) {
        /* volumeClaimTemplates live as long as the Sandbox object: filesystems, then files. */
        int vk = local_volumes_release(vols);
        if (vk < 0)
            log_warn("cannot release the sandbox's volumes", "uid", uid, "error", strerror(-vk));
        fs_rm_rf(vols);
    }
    if (purge && base) {
        int rk = local_scratch_release(base); /* the container is gone: nothing holds it */
        if (rk < 0)
            log_warn("cannot release the sandbox filesystem", "uid", uid, "error",
                     strerror(-rk));
        fs_rm_rf(base);
        local_snapshot_trees_gc(r->state_dir); /* a deleted snapshot's last fork is gone */
    }
    else if (bundle)
        fs_rm_rf(bundle);
    if (ret_times)
        *ret_times = (rec_teardown_times){.kill = t_kill - t0, .runtime = t_runtime - t_kill,
                                          .host = now_usec(CLOCK_MONOTONIC) - t_runtime};
    return k;
}

void rec_teardown(local_reconciler *r, const char *uid, bool purge)
{
    rec_entry *e = rec_find(r, uid);
    bool frozen = e && e->frozen;
    const oci_runtime *rt = rec_runtime(r, uid);
    _cleanup_close_ int pidfd = rec_entry_pidfd(e);
    rec_forget(r, uid);
    (void)rec_teardown_run(r, uid, rt, frozen, pidfd, purge, NULL);
}

local_net_policy_kind rec_net_policy(local_reconciler *r, const json_t *sb, json_t **ret_tpl)
{
    *ret_tpl = NULL;
    const json_t *md = json_object_get(sb, "metadata");
    const char *ns = api_meta_string(sb, "namespace");
    const char *name = json_string_value(
        json_object_get(json_object_get(md, "annotations"), RECONCILE_ANN_TEMPLATE_REF));
    const char *hash = json_string_value(
        json_object_get(json_object_get(md, "labels"), RECONCILE_LABEL_TEMPLATE_REF_HASH));
    if (!hash)
        hash = json_string_value(json_object_get(
            json_object_get(json_object_get(api_pod_template_of(sb), "metadata"), "labels"),
            RECONCILE_LABEL_TEMPLATE_REF_HASH));
    const api_kind *tk = api_kind_by_plural(API_GROUP_EXT, "sandboxtemplates");
    if (!tk || (!name && !hash))
        return local_net_policy_of(NULL, false);
    if (name && local_store_get(r->store, tk, ns, name, ret_tpl) == 0)
        return local_net_policy_of(*ret_tpl, true);
    if (hash) {
        /* The label names the template by hash only (a NetworkPolicy podSelector). */
        json_t *items = NULL, *t;
        uint64_t rv;
        size_t i;
        if (local_store_list(r->store, tk, ns, &items, &rv) == 0) {
            json_array_foreach(items, i, t) {
                char h[9];
                const char *tn = api_meta_string(t, "name");
                if (!tn)
                    continue;
                reconcile_name_hash(tn, h);
                if (strcmp(h, hash) == 0) {
                    *ret_tpl = json_incref(t);
                    break;
                }
            }
            json_decref(items);
        }
    }
    return local_net_policy_of(*ret_tpl, true);
}

#define fail(f, reason, ...) reconcile_fail(f, reason, false, __VA_ARGS__)
/* An error met while reconciling: Ready reads "Error seen: <message>". */
#define fail_seen(f, reason, ...) reconcile_fail(f, reason, true, __VA_ARGS__)

/* Resolves the image: *ret_rootfs NULL for `host`, else an owned path. */
static int resolve_image(const char *state_dir, const char *image, char **ret_rootfs,
                         json_t **ret_env, rec_failure *f)
{
    *ret_rootfs = NULL;
    *ret_env = NULL;
    if (!image || strcmp(image, "host") == 0)
        return 0;
    if (strncmp(image, "dir:", 4) == 0) {
        const char *p = image + 4;
        struct stat st;
        if (p[0] != '/')
            return fail(f, "ImageNotSupported", -EINVAL,
                        "image \"%s\": dir: needs an absolute path to a rootfs directory", image);
        if (stat(p, &st) < 0 || !S_ISDIR(st.st_mode))
            return fail(f, "ImageNotSupported", -ENOENT,
                        "image \"%s\": %s is not a directory", image, p);
        *ret_rootfs = strdup(p);
        return *ret_rootfs ? 0 : -ENOMEM;
    }
    if (strncmp(image, "oci:", 4) == 0) {
        int k = local_image_oci(state_dir, image + 4, ret_rootfs, ret_env, f);
        if (k < 0 && !f->error.message)
            return fail(f, f->reason ?: "ImageUnpackFailed", k, "image \"%s\": %s", image,
                        strerror(-k));
        return k;
    }
    return fail(f, "ImageNotSupported", -EOPNOTSUPP,
                "image \"%s\" is not supported locally: no registry is reachable, so registry "
                "references cannot be pulled; use \"host\", \"dir:/path/to/rootfs\" or "
                "\"oci:/path/to/layout[:tag]\" (an OCI image layout)",
                image);
}

/* runAsUser/runAsGroup from the container, else the pod securityContext, else the image's
 * User when it is not root, else 1000: the secure default never runs an image as root unless
 * the spec asks for it. */
static void sandbox_user(const api_pod *pod, const api_container *ctr, const json_t *image,
                         uid_t *ret_uid, gid_t *ret_gid)
{
    json_int_t uid = ctr && ctr->run_as_user >= 0 ? ctr->run_as_user : pod->run_as_user;
    json_int_t gid = ctr && ctr->run_as_group >= 0 ? ctr->run_as_group : pod->run_as_group;
    json_t *iu = json_object_get(json_object_get(image, "user"), "uid"),
           *ig = json_object_get(json_object_get(image, "user"), "gid");
    if (uid < 0 && json_is_integer(iu) && json_integer_value(iu) > 0 &&
        json_integer_value(iu) <= 0x7fffffff) {
        uid = json_integer_value(iu);
        if (gid < 0 && json_is_integer(ig) && json_integer_value(ig) >= 0)
            gid = json_integer_value(ig);
    }
    if (uid < 0 || uid > 0x7fffffff)
        uid = DEFAULT_UID;
    if (gid < 0 || gid > 0x7fffffff)
        gid = uid;
    *ret_uid = (uid_t)uid;
    *ret_gid = (gid_t)gid;
}

json_t *rec_effective_resources(local_reconciler *r, const json_t *sb)
{
    const char *uid = api_meta_string(sb, "uid");
    if (!uid)
        return NULL;
    /* What the container was given when it started (its entry), or, for one a previous asb serve
     * started, what that server wrote in the status then: a restart with other defaults does not
     * change a running container, and nothing reads its bundle back. */
    rec_entry *e = rec_find(r, uid);
    local_limits l;
    if (e && e->limits_read)
        l = e->limits;
    else if (local_limits_from_json(json_object_get(json_object_get(sb, "status"), "resources"),
                                    &l) < 0)
        return NULL;
    else if (e)
        rec_entry_set_limits(e, &l);
    json_t *res = local_limits_to_json(&l);
    /* Limits the machine cannot give: it is their real limit. */
    const struct {
        const char *name;
        int64_t v, have;
    } rows[] = {{"memory", l.memory, r->capacity.memory},
                {"cpu", l.cpu_millis, r->capacity.cpu_millis},
                {"ephemeral-storage", l.ephemeral, r->capacity.ephemeral}};
    json_t *beyond = NULL;
    for (size_t i = 0; res && r->has_capacity && i < ELEMENTSOF(rows); i++)
        if (rows[i].have > 0 && rows[i].v > rows[i].have &&
            (beyond || (beyond = json_array())))
            json_array_append_new(beyond, json_string(rows[i].name));
    if (beyond)
        json_object_set_new(res, "beyondCapacity", beyond);
    return res;
}

/* A container that requests more than this machine has is not started, as a scheduler leaves a
 * Pod that fits no node Pending (the reason and message are kube-scheduler's); one whose limits
 * go beyond it runs, with the machine as its real limit, and an Event says so once. */
static int check_capacity(local_reconciler *r, const json_t *sb, const api_container *ctr,
                          rec_failure *f)
{
    if (!r->has_capacity || !ctr)
        return 0;
    local_capacity_excess x[API_RESOURCE_COUNT];
    size_t n = local_capacity_excess_of(&r->capacity, &ctr->requests, "requests", x);
    if (n > 0)
        return fail(f, "Unschedulable", -ENOSPC,
                    "0/1 nodes are available: 1 Insufficient %s (requests.%s %s, this machine "
                    "has %s)",
                    x[0].resource, x[0].resource, x[0].value, x[0].have);
    n = local_capacity_excess_of(&r->capacity, &ctr->limits, "limits", x);
    for (size_t i = 0; i < n; i++)
        local_event_record(r->store, REC_EVENT_SOURCE, sb, LOCAL_EVENT_WARNING,
                           "LimitAboveCapacity", "Start",
                           "limits.%s %s is more than this machine has (%s): the machine is the "
                           "real limit",
                           x[i].resource, x[i].value, x[i].have);
    return 0;
}

static int listen_unix(const char *path, int *ret_fd)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path))
        return -ENAMETOOLONG;
    strcpy(sa.sun_path, path);
    _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    unlink(path);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, SOMAXCONN) < 0)
        return -errno;
    *ret_fd = TAKE_FD(fd);
    return 0;
}

static pid_t read_pid(const char *path)
{
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    long pid = 0;
    if (!f || fscanf(f, "%ld", &pid) != 1)
        return 0;
    return (pid_t)pid;
}

/* Per-sandbox host directories: the socket dir, and the workspace, home and scratch the
 * sandbox writes (local-scratch.h: on a filesystem of `ephemeral` bytes when > 0), which
 * belong to the sandbox user. The one place that prepares what the sandbox may write. */
static int make_dirs(local_reconciler *r, const char *uid, uid_t u, gid_t g, int64_t ephemeral,
                     local_scratch *ret, rec_failure *f)
{
    _cleanup_free_ char *run = path_of(r, "run", uid, NULL),
                        *base = path_of(r, "sandboxes", uid, NULL);
    _cleanup_(api_error_clearp) api_error err = API_ERROR_INIT;
    if (!run || !base)
        return -ENOMEM;
    int k = mkdir_p(run, 0700);
    if (k == 0)
        k = local_scratch_prepare(r->state_dir, base, ephemeral, u, g, ret, &err);
    if (k < 0)
        return fail_seen(f, "ReconcilerError", k, "cannot create the sandbox directories: %s",
                         err.message ?: strerror(-k));
    return 0;
}

/* Seeds the new sandbox's workspace and volumes from a snapshot, once: sandboxes/<uid>/seeded
 * records it (the snapshot's uid and its base image, which a snapshot of this sandbox records as
 * its source image, and whether its directories are overlays), so that a restart keeps what the
 * sandbox changed since; overlays are mounted again when they are not (after a reboot). The
 * first seed says in an Event which way the fork got its files. */
static int seed_once(local_reconciler *r, const json_t *sb, const char *snap_name,
                     const char *snap_uid, const char *base_image, const char *workspace,
                     const char *vols, uint32_t ns_start, rec_failure *f)
{
    const char *uid = api_meta_string(sb, "uid");
    _cleanup_free_ char *marker = path_of(r, "sandboxes", uid, LOCAL_SNAPSHOT_SEEDED),
                        *content = NULL, *note = NULL;
    _cleanup_(api_error_clearp) api_error err = API_ERROR_INIT;
    if (!marker)
        return fail_seen(f, "ReconcilerError", -ENOMEM, "out of memory");
    _cleanup_fclose_ FILE *old = fopen(marker, "re");
    if (old) {
        char line[4096];
        bool overlay = false;
        for (int i = 0; fgets(line, sizeof(line), old); i++)
            overlay |= i == 2 && strcmp(line, "overlay\n") == 0;
        if (!overlay)
            return 0;
        int k = local_snapshot_seed(r->state_dir, snap_uid, workspace, vols, ns_start, true, &note,
                                    &err);
        return k < 0 ? fail_seen(f, "SnapshotRestoreFailed", k, "%s", err.message ?: strerror(-k))
                     : 0;
    }
    usec_t start = now_usec(CLOCK_MONOTONIC);
    int mode = local_snapshot_seed(r->state_dir, snap_uid, workspace, vols, ns_start, false, &note,
                                   &err),
        k = mode < 0 ? mode : 0;
    if (k == 0 && asprintf(&content, "%s\n%s\n%s", snap_uid, base_image ? base_image : "host",
                           mode == LOCAL_SNAPSHOT_SEED_OVERLAY ? "overlay\n" : "") < 0)
        k = -ENOMEM;
    if (k == 0)
        k = fs_write_file(marker, content, 0644);
    if (k < 0)
        return fail_seen(f, "SnapshotRestoreFailed", k, "%s",
                         (mode < 0 ? err.message : note) ?: strerror(-k));
    double took = (double)(now_usec(CLOCK_MONOTONIC) - start) / 1e6;
    if (mode == LOCAL_SNAPSHOT_SEED_OVERLAY)
        local_event_record(r->store, REC_EVENT_SOURCE, sb, LOCAL_EVENT_NORMAL, "SnapshotSeeded",
                           "Seed",
                           "files of SandboxSnapshot \"%s\" as overlays over its tree, nothing "
                           "copied (%.3fs)",
                           snap_name, took);
    else
        local_event_record(r->store, REC_EVENT_SOURCE, sb, LOCAL_EVENT_NORMAL, "SnapshotSeeded",
                           "Seed", "files of SandboxSnapshot \"%s\" copied in %.3fs: %s", snap_name,
                           took, note ? note : "no overlays here");
    return 0;
}

/* Every volumeClaimTemplate's storage (local-volume.h), sized by its storage request. */
static int make_volumes(local_reconciler *r, const json_t *sb, const char *vols, char **names,
                        uid_t u, gid_t g, rec_failure *f)
{
    for (size_t i = 0; names[i]; i++) {
        int64_t bytes;
        _cleanup_(api_error_clearp) api_error err = API_ERROR_INIT;
        int k = local_volume_request(sb, i, &bytes);
        if (k < 0)
            return fail(f, "ReconcilerError", k,
                        "spec.volumeClaimTemplates[%zu].spec.resources.requests.storage: not a "
                        "quantity",
                        i);
        if ((k = local_volume_prepare(r->state_dir, vols, names[i], bytes, u, g, &err)) < 0)
            return fail(f, "ReconcilerError", k, "cannot prepare volume \"%s\": %s", names[i],
                        err.message ?: strerror(-k));
    }
    return 0;
}

/* What a refused mount's message says about it. */
static const char *refusal(int k)
{
    switch (k) {
    case -ELOOP:
        return "is a symlink or passes through one";
    case -ENOTDIR:
        return "is not a directory";
    case -EXDEV:
        return "crosses a mount point";
    default:
        return strerror(-k);
    }
}

/* Binds every volume mount's directory where no one but root can redirect it (local-volume.h);
 * a subPath that is or passes through a symlink mounts nothing. */
static int stage_volumes(local_reconciler *r, const char *uid, const char *vols,
                         local_bundle_volume *vv, size_t n, uid_t u, gid_t g,
                         local_volumes_staged *ret, rec_failure *f)
{
    _cleanup_free_ char *dir = path_of(r, "run", uid, "volumes");
    size_t bad = 0;
    if (!dir)
        return fail(f, "ReconcilerError", -ENOMEM, "out of memory");
    int k = local_volumes_stage(vols, dir, vv, n, u, g, ret, &bad);
    if (k == 0)
        return 0;
    const local_bundle_volume *v = &vv[bad];
    if (v->sub_path)
        return fail(f, "ReconcilerError", k,
                    "spec.podTemplate.spec.containers[0].volumeMounts[%zu].subPath: \"%s\" in "
                    "volume \"%s\" %s; nothing is mounted",
                    v->mount_index, v->sub_path, v->claim, refusal(k));
    return fail(f, "ReconcilerError", k,
                "spec.podTemplate.spec.containers[0].volumeMounts[%zu]: volume \"%s\" %s; nothing "
                "is mounted",
                v->mount_index, v->claim, refusal(k));
}

/* What stops any container of this asb serve, before its runtime class is looked at. */
static int preconditions(local_reconciler *r, const json_t *sb, rec_failure *f)
{
    if (!api_meta_string(sb, "uid") || !api_meta_string(sb, "name"))
        return fail_seen(f, "ReconcilerError", -EINVAL, "the Sandbox has no metadata.uid");
    if (r->no_root)
        return fail_seen(f, "ReconcilerError", -EPERM, "%s", r->no_root);
    if (r->inject_error.code != STATUS_OK)
        return fail_seen(f, "ReconcilerError", -ENOENT, "%s",
                         r->inject_error.message ?: "cannot inject sandboxd");
    return 0;
}

int rec_materialise_handler(local_reconciler *r, const json_t *sb, size_t *ret_handler,
                            rec_failure *f)
{
    const json_t *pod = api_pod_spec_of(sb);
    int k = preconditions(r, sb, f);
    if (k < 0)
        return k;
    return rec_handler_for_class(r, json_string_value(json_object_get(pod, "runtimeClassName")),
                                 ret_handler, f);
}

int rec_materialise(local_reconciler *r, const json_t *sb, rec_failure *f)
{
    const char *uid = api_meta_string(sb, "uid");
    size_t handler = 0;
    int k = rec_materialise_handler(r, sb, &handler, f);
    if (k < 0)
        return k;
    pid_t pid = 0;
    local_limits lim;
    if ((k = rec_materialise_run(r, sb, rec_handler(r, handler), &pid, &lim, f)) < 0)
        return k;
    rec_adopt(r, uid, pid);
    rec_entry *e = rec_find(r, uid);
    if (e) {
        e->handler = handler;
        rec_entry_set_limits(e, &lim);
    }
    return 0;
}

void rec_entry_set_limits(rec_entry *e, const local_limits *l)
{
    e->limits = *l;
    e->limits_read = true;
}

/* Why the bind sources could not be staged for runsc. */
static int stage_error(int k, api_error *err)
{
    return api_error_set_errno(err, k, "cannot stage the mounts' sources at %s: %s",
                               LOCAL_BUNDLE_STAGE_DIR, strerror(-k));
}

/* A failed `run` of the runtime: the message names the RuntimeClass and its handler, so that
 * an error of runsc is never read as one of runc. */
static int fail_runtime(const api_pod *pod, const oci_runtime *rt, int k, const api_error *err,
                        rec_failure *f)
{
    const char *cls = pod->runtime_class_name;
    const char *what = err->message ?: strerror(-k);
    if (!cls || !*cls)
        return fail_seen(f, "ReconcilerError", k, "%s", what);
    return fail_seen(f, "ReconcilerError", k, "RuntimeClass \"%s\" (handler %s): %s", cls,
                     oci_runtime_program(rt), what);
}

/* A bridge-networked sandbox under runsc: what it would need, instead of a failure of runsc's
 * own (docs/local-sandboxes.md, "gVisor"). */
static int gvisor_refuse_network(const api_pod *pod, rec_failure *f)
{
    const char *cls = pod->runtime_class_name;
    return fail_seen(
        f, "ReconcilerError", -EOPNOTSUPP,
        "RuntimeClass \"%s\" (handler runsc) runs loopback-only sandboxes: "
        "asb serve starts runsc with --network=none, as runsc --network=sandbox of "
        "Debian 12 (release 20221219) refuses the network namespace of a 6.x kernel "
        "(fixed in gVisor release-20240807.0) and --network=host would hand the sandbox "
        "the host kernel's network stack. Run asb serve with --network none, or give the "
        "sandbox a template with networkPolicyManagement: Unmanaged",
        cls ? cls : "runsc");
}

/* Back from the sandbox's network namespace (local_userns_netns_enter), or abort: this thread
 * would go on making every later sandbox's network and container from inside this one's. */
static void rec_netns_leave(int *saved)
{
    int k = local_userns_netns_leave(saved);
    if (k < 0) {
        log_error("cannot return to the host network namespace", "error", strerror(-k));
        abort();
    }
}

/* One start of a sandbox's container, as rec_materialise_run's steps hand it on: each step fills
 * its part, and mat_run_done frees and undoes what was set, in the reverse order, whichever step
 * returned (the one cleanup path). The volumes' binds and the user namespace stay until then:
 * the runtime has made its own by the time rec_materialise_run returns. */
typedef struct mat_run {
    local_reconciler *r;
    const json_t *sb;
    const oci_runtime *rt;
    const char *uid, *name;
    api_sandbox_spec *spec; /* the Sandbox's spec, typed once for this start */
    api_pod *pod;           /* its pod template's (borrowed from spec) */
    const api_container *ctr;
    char *rootfs, *snap_uid, *snap_image;
    const char *snap_name;
    json_t *image;
    const char *wd;
    local_limits lim;
    uid_t u, hu;
    gid_t g, hg;
    uint32_t ns_start;
    local_scratch sc;
    char *vols;
    local_bundle_volume *vv;
    size_t nvv;
    char **vnames;
    local_volumes_staged staged;
    json_t *main_argv;
    char *main_dir, *base, *main_log;
    char *bundle, *log, *rest, *grpc, *ibin, *ilib, *cg, *pidfile, *shared;
    json_t *tpl;
    char *netns, *nameserver;
    bool gvisor;
    char *run_dir, *box;
    local_userns uns;
    char *root;
    json_t *gvisor_binds;
    int rest_fd, grpc_fd, out_r, out_w, main_r, main_w;
    usec_t t_prep, t_storage, t_net, t_bundle, t0;
} mat_run;

#define MAT_RUN_INIT(r_, sb_, rt_)                                                                 \
    {                                                                                              \
        .r = (r_), .sb = (sb_), .rt = (rt_), .uid = api_meta_string((sb_), "uid"),                 \
        .name = api_meta_string((sb_), "name"), .uns = LOCAL_USERNS_INIT, .rest_fd = -1,           \
        .grpc_fd = -1, .out_r = -1, .out_w = -1, .main_r = -1, .main_w = -1                        \
    }

static void mat_run_done(mat_run *m)
{
    safe_close(m->main_w);
    safe_close(m->main_r);
    safe_close(m->out_w);
    safe_close(m->out_r);
    safe_close(m->grpc_fd);
    safe_close(m->rest_fd);
    json_decref(m->gvisor_binds);
    free(m->root);
    local_userns_release(&m->uns);
    free(m->box);
    free(m->run_dir);
    free(m->nameserver);
    free(m->netns);
    json_decref(m->tpl);
    char *strs[] = {m->shared, m->pidfile, m->cg,     m->ilib,     m->ibin, m->grpc,
                    m->rest,   m->log,     m->bundle, m->main_log, m->base, m->main_dir};
    for (size_t i = 0; i < ELEMENTSOF(strs); i++)
        free(strs[i]);
    json_decref(m->main_argv);
    local_volumes_stage_done(&m->staged);
    if (m->vv || m->vnames)
        local_bundle_volumes_free(m->vv, m->nvv, m->vnames);
    free(m->vols);
    local_scratch_done(&m->sc);
    json_decref(m->image);
    free(m->snap_image);
    free(m->snap_uid);
    free(m->rootfs);
    api_sandbox_spec_free(m->spec);
}

/* The pod spec, typed once for this start (admission checked it), and what must hold first. */
static int mat_pod(mat_run *m, rec_failure *f)
{
    int k = api_sandbox_spec_parse(m->sb, NULL, &m->spec);
    if (k < 0)
        return fail_seen(f, "ReconcilerError", k, "%s",
                         k == -ENOMEM ? "out of memory"
                                      : "a resource quantity of the pod spec does "
                                        "not parse (stored before admission checked "
                                        "it): fix the spec");
    m->pod = m->spec->pod_template.pod;
    m->ctr = m->pod->n_containers ? &m->pod->containers[0] : NULL;
    return preconditions(m->r, m->sb, f);
}

/* The root filesystem: an image (unpacked once), or snapshot:NAME, whose source image is the
 * root filesystem and whose files seed the workspace and volumes (mat_volumes); then the
 * working directory. */
static int mat_image(mat_run *m, rec_failure *f)
{
    local_reconciler *r = m->r;
    const char *image_ref = m->ctr ? m->ctr->image : NULL;
    int k;
    if (image_ref &&
        strncmp(image_ref, LOCAL_SNAPSHOT_IMAGE_PREFIX, strlen(LOCAL_SNAPSHOT_IMAGE_PREFIX)) == 0) {
        m->snap_name = image_ref + strlen(LOCAL_SNAPSHOT_IMAGE_PREFIX);
        k = local_snapshot_resolve(r->store, api_meta_string(m->sb, "namespace"), m->snap_name,
                                   &m->snap_uid, &m->snap_image, f);
        if (k < 0)
            return k;
        image_ref = m->snap_image;
    }
    bool unpack = image_ref && strncmp(image_ref, "oci:", 4) == 0;
    usec_t unpack_start = now_usec(CLOCK_MONOTONIC);
    /* An OCI image is unpacked (once; later starts reuse it): say so, as kubelet says Pulling. */
    if (unpack)
        local_event_record(r->store, REC_EVENT_SOURCE, m->sb, LOCAL_EVENT_NORMAL, "Pulling", "Pull",
                           "unpacking image \"%s\"", image_ref);
    k = resolve_image(r->state_dir, image_ref, &m->rootfs, &m->image, f);
    if (k < 0)
        return k;
    if (unpack)
        local_event_record(r->store, REC_EVENT_SOURCE, m->sb, LOCAL_EVENT_NORMAL, "Pulled", "Pull",
                           "image \"%s\" ready in %.3fs", image_ref,
                           (double)(now_usec(CLOCK_MONOTONIC) - unpack_start) / 1e6);
    /* workingDir of the container, else the image's WorkingDir (umoci says "/" when unset). */
    m->wd = m->ctr ? m->ctr->working_dir : NULL;
    if (!m->wd || !*m->wd) {
        m->wd = json_string_value(json_object_get(m->image, "cwd"));
        if (m->wd && strcmp(m->wd, "/") == 0)
            m->wd = NULL;
    }
    if (m->wd && m->wd[0] != '/')
        return fail_seen(f, "ReconcilerError", -EINVAL,
                         "workingDir \"%s\" must be an absolute path", m->wd);
    return 0;
}

/* Limits, capacity, the sandbox user and its host ids in the sandbox's user namespace (files
 * the host makes for it belong to the mapped ids), and its writable directories. */
static int mat_user_and_dirs(mat_run *m, rec_failure *f)
{
    local_reconciler *r = m->r;
    int k;
    local_limits_effective(&r->defaults, m->ctr, &m->lim);
    if ((k = check_capacity(r, m->sb, m->ctr, f)) < 0)
        return k;
    sandbox_user(m->pod, m->ctr, m->image, &m->u, &m->g);
    m->t_prep = now_usec(CLOCK_MONOTONIC);
    if (r->idmap) {
        if (m->u >= LOCAL_IDMAP_SLOT || m->g >= LOCAL_IDMAP_SLOT)
            return fail_seen(f, "ReconcilerError", -EINVAL,
                             "runAsUser %u / runAsGroup %u: the sandbox's user namespace "
                             "maps ids 0-%u only",
                             (unsigned)m->u, (unsigned)m->g, LOCAL_IDMAP_SLOT - 1);
        if ((k = local_idmap_get(r->idmap, m->uid, &m->ns_start)) < 0)
            return fail_seen(f, "ReconcilerError", k,
                             "no user namespace id range for the sandbox: %s",
                             k == -ENOSPC ? "every slot of this asb serve's --userns-range is taken"
                                          : strerror(-k));
    }
    m->hu = (uid_t)(m->ns_start + m->u);
    m->hg = (gid_t)(m->ns_start + m->g);
    if ((k = make_dirs(r, m->uid, m->hu, m->hg, m->lim.ephemeral, &m->sc, f)) < 0)
        return k;
    m->t_storage = now_usec(CLOCK_MONOTONIC);
    return 0;
}

/* volumeClaimTemplates: persistent directories, created once, owned by the sandbox user; seeded
 * from the snapshot, if any; then staged (after the seed: a fork's volume directories are its
 * overlays by now). */
static int mat_volumes(mat_run *m, rec_failure *f)
{
    local_reconciler *r = m->r;
    _cleanup_(api_error_clearp) api_error verr = API_ERROR_INIT;
    int k;
    if (!(m->vols = path_of(r, "volumes", m->uid, NULL)))
        return fail_seen(f, "ReconcilerError", -ENOMEM, "out of memory");
    if ((k = local_bundle_volumes(m->sb, m->vols, &m->vv, &m->nvv, &m->vnames, &verr)) < 0)
        return fail_seen(f, "ReconcilerError", k, "%s", verr.message ?: strerror(-k));
    if ((k = make_volumes(r, m->sb, m->vols, m->vnames, m->hu, m->hg, f)) < 0)
        return k;
    if (m->snap_uid && (k = seed_once(r, m->sb, m->snap_name, m->snap_uid, m->snap_image,
                                      m->sc.workspace, m->vols, m->ns_start, f)) < 0)
        return k;
    return stage_volumes(r, m->uid, m->vols, m->vv, m->nvv, m->hu, m->hg, &m->staged, f);
}

/* A container command: sandboxd runs it as the main process; its output goes through a pipe to
 * sandboxes/<uid>/main.log (mat_launch), its exit code lands in sandboxes/<uid>/main (bound at
 * /.asb/main; on the sandbox's own filesystem when it has one). */
static int mat_main_process(mat_run *m, rec_failure *f)
{
    local_reconciler *r = m->r;
    _cleanup_(api_error_clearp) api_error merr = API_ERROR_INIT;
    m->base = path_of(r, "sandboxes", m->uid, NULL);
    if (!m->base || local_bundle_main_argv(m->ctr ? m->ctr->json : NULL, &m->main_argv, &merr) < 0)
        return fail_seen(f, "ReconcilerError", -EINVAL, "%s", merr.message ?: "out of memory");
    if (!m->main_argv)
        return 0;
    _cleanup_free_ char *exitf = path_of(r, "sandboxes", m->uid, "main/exit");
    int k = local_scratch_main_dir(m->base, &m->sc, m->hu, m->hg, &m->main_dir);
    if (exitf)
        unlink(exitf);
    if (k < 0)
        return fail_seen(f, "ReconcilerError", k, "cannot create %s/main: %s", m->base,
                         strerror(-k));
    rec_watch_main(r, m->uid);
    return 0;
}

/* The paths of the bundle, its sockets, logs and cgroup. */
static int mat_paths(mat_run *m, rec_failure *f)
{
    local_reconciler *r = m->r;
    m->bundle = path_of(r, "sandboxes", m->uid, "bundle");
    m->log = path_of(r, "sandboxes", m->uid, "sandboxd.log");
    m->rest = path_of(r, "run", m->uid, "rest.sock");
    m->grpc = path_of(r, "run", m->uid, "grpc.sock");
    if (!m->bundle || !m->log || !m->rest || !m->grpc ||
        asprintf(&m->shared, "%s/shared", r->state_dir) < 0 ||
        asprintf(&m->ibin, "%s/bin", r->inject_dir) < 0 ||
        asprintf(&m->ilib, "%s/lib", r->inject_dir) < 0 ||
        asprintf(&m->cg, SANDBOX_CGROUP_PARENT "%s", m->uid) < 0 ||
        asprintf(&m->pidfile, "%s/pid", m->bundle) < 0)
        return fail_seen(f, "ReconcilerError", -ENOMEM, "out of memory");
    return 0;
}

/* The network: namespace, address and rules exist before the first process runs. gVisor: its
 * own network stack with loopback only, and sandboxd binds its sockets itself
 * (local-runtime-gvisor.h). The user namespace, owned by the sandbox's own first host id so
 * that the kernel's per-user budgets of the sandbox are its own (local-userns.h), lives until
 * runc has joined it. */
static int mat_network(mat_run *m, rec_failure *f)
{
    local_reconciler *r = m->r;
    _cleanup_(api_error_clearp) api_error nerr = API_ERROR_INIT;
    local_net_policy_kind nk = rec_net_policy(r, m->sb, &m->tpl);
    m->t_net = now_usec(CLOCK_MONOTONIC);
    pthread_mutex_lock(&r->net_lock);
    int k = local_net_attach(r->net, m->uid, nk, m->tpl, &m->netns, &m->nameserver, &nerr);
    pthread_mutex_unlock(&r->net_lock);
    m->t_net = now_usec(CLOCK_MONOTONIC) - m->t_net; /* the lock's wait included */
    if (k < 0)
        return fail_seen(f, "NetworkSetupFailed", k, "cannot set up the network: %s",
                         nerr.message ?: strerror(-k));
    m->gvisor = oci_runtime_is_runsc(m->rt);
    if (m->gvisor && m->netns)
        return gvisor_refuse_network(m->pod, f);
    if (m->gvisor && (!(m->run_dir = path_of(r, "run", m->uid, NULL)) ||
                      (k = local_gvisor_prepare(m->run_dir, m->hu, m->hg, &m->box)) < 0))
        return fail_seen(f, "ReconcilerError", m->run_dir ? k : -ENOMEM,
                         "cannot prepare the socket directory of %s: %s",
                         m->run_dir ? m->run_dir : "the sandbox",
                         strerror(m->run_dir ? -k : ENOMEM));
    if (r->idmap && oci_is_runc(m->rt) &&
        (k = local_userns_hold(m->ns_start, LOCAL_IDMAP_SLOT, &m->uns)) < 0)
        return fail_seen(f, "ReconcilerError", k, "cannot create the user namespace: %s",
                         strerror(-k));
    return 0;
}

/* The bundle: config.json and the rootfs to run (runsc's gofer mounts as the sandbox's root:
 * it gets the bind sources staged). */
static int mat_bundle(mat_run *m, rec_failure *f)
{
    local_reconciler *r = m->r;
    char hostname[64];
    snprintf(hostname, sizeof(hostname), "%s", m->name);
    local_bundle_params bp = {
        .bundle_dir = m->bundle,
        .rootfs = m->rootfs,
        .hostname = hostname,
        .uid = m->u,
        .gid = m->g,
        .workspace_dir = m->sc.workspace,
        .home_dir = m->sc.home,
        .tmp_dir = m->sc.tmp,
        .inject_bin = m->ibin,
        .inject_lib = m->ilib,
        .env = m->ctr ? m->ctr->env : NULL,
        .image_env = json_object_get(m->image, "env"),
        .working_dir = m->wd,
        .memory_limit = m->lim.memory,
        .cpu_millis = m->lim.cpu_millis,
        .pids_limit = DEFAULT_PIDS_LIMIT,
        .cgroups_path = m->cg,
        .volumes = m->vv,
        .n_volumes = m->nvv,
        .main_argv = m->main_argv,
        .main_dir = m->main_dir,
        .netns_path = m->netns,
        .nameserver = m->nameserver,
        .userns_start = m->ns_start,
        .userns_size = r->idmap ? LOCAL_IDMAP_SLOT : 0,
        .userns_path = m->uns.pid > 0 ? m->uns.path : NULL,
        .shared_dir = m->shared,
        .gvisor = m->gvisor,
        .socket_dir = m->box,
    };
    _cleanup_(api_error_clearp) api_error err = API_ERROR_INIT;
    m->t_bundle = now_usec(CLOCK_MONOTONIC);
    int k = local_bundle_write_staged(&bp, &m->root,
                                      m->gvisor && r->idmap ? &m->gvisor_binds : NULL, &err);
    m->t_bundle = now_usec(CLOCK_MONOTONIC) - m->t_bundle;
    if (k < 0)
        return fail_seen(f, "ReconcilerError", k, "%s", err.message ?: strerror(-k));
    return 0;
}

/* The fds the container gets: sandboxd's sockets (runc: listened here), its stdout/stderr (a
 * pipe asb serve reads, local-logs.h, not a host file), and the main process's stdout/stderr:
 * another pipe, fd 5 in the container (ASB_MAIN_OUTPUT_FD in the bundle), read into
 * sandboxes/<uid>/main.log, never bound into the container. Its read end is fd 6 there too
 * (ASB_MAIN_OUTPUT_KEEP_FD): sandboxd holds it, so that the main process's writes wait (once
 * the pipe is full) instead of failing with EPIPE while no asb serve reads. */
static int mat_fds(mat_run *m, rec_failure *f)
{
    int k;
    if (!m->gvisor && ((k = listen_unix(m->rest, &m->rest_fd)) < 0 ||
                       (k = listen_unix(m->grpc, &m->grpc_fd)) < 0))
        return fail_seen(f, "ReconcilerError", k, "cannot listen on %s: %s",
                         m->rest_fd < 0 ? m->rest : m->grpc, strerror(-k));
    int pp[2];
    if (pipe2(pp, O_CLOEXEC) < 0)
        return fail_seen(f, "ReconcilerError", -errno, "cannot create a pipe: %s", strerror(errno));
    m->out_r = pp[0];
    m->out_w = pp[1];
    if (!m->main_dir)
        return 0;
    m->main_log = path_of(m->r, "sandboxes", m->uid, "main.log");
    if (!m->main_log || pipe2(pp, O_CLOEXEC) < 0)
        return fail_seen(f, "ReconcilerError", m->main_log ? -errno : -ENOMEM,
                         "cannot create a pipe: %s", m->main_log ? strerror(errno) : "no memory");
    m->main_r = pp[0];
    m->main_w = pp[1];
    return 0;
}

/* `run` of the runtime, from inside the sandbox's network namespace when its user namespace
 * owns it, and with the rootfs staged for idmapped mounts; back to the host's namespaces after,
 * or abort. A stopped leftover under the same id (sandboxd died) is removed and the run retried
 * once. */
static int mat_launch(mat_run *m, rec_failure *f)
{
    local_reconciler *r = m->r;
    _cleanup_(api_error_clearp) api_error err = API_ERROR_INIT;
    int k;
    /* The container gets both ends: it writes to 5 and sandboxd holds 6 (local-runtime-oci.h). */
    const int main_fds[2] = {m->main_w, m->main_r};
    m->t0 = now_usec(CLOCK_MONOTONIC);
    /* runc only: runsc applies no limits to a cgroup that exists already, and its network
     * stack's buffers are the Sentry's own memory, which the memory limit counts anyway. */
    if (oci_is_runc(m->rt) && (k = local_tcpmem_limit(m->cg, m->lim.memory)) < 0)
        return fail_seen(f, "ReconcilerError", k, "cannot limit the TCP buffers of %s: %s", m->cg,
                         strerror(-k));
    int netns_saved = -1;
    if (m->uns.pid > 0 && m->netns && (k = local_userns_netns_enter(m->netns, &netns_saved)) < 0)
        return fail_seen(f, "ReconcilerError", k, "cannot enter %s: %s", m->netns, strerror(-k));
    local_idmap_stage stage = {-1, -1};
    if (r->idmap && (k = local_idmap_stage_enter(m->root, &stage)) < 0) {
        rec_netns_leave(&netns_saved);
        return fail_seen(f, "ReconcilerError", k, "cannot stage the rootfs at %s: %s",
                         LOCAL_IDMAP_ROOTFS, strerror(-k));
    }
    if (m->gvisor_binds && (k = local_gvisor_stage_binds(m->gvisor_binds)) < 0)
        stage_error(k, &err);
    else
        k = oci_run_detached(m->rt, m->uid, m->bundle, m->rest_fd, m->grpc_fd,
                             m->main_r >= 0 ? main_fds : NULL, m->out_w, m->out_r, &err);
    if (k == -EEXIST) {
        _cleanup_(api_error_clearp) api_error derr = API_ERROR_INIT;
        api_error_clear(&err);
        oci_delete(m->rt, m->uid, &derr);
        k = oci_run_detached(m->rt, m->uid, m->bundle, m->rest_fd, m->grpc_fd,
                             m->main_r >= 0 ? main_fds : NULL, m->out_w, m->out_r, &err);
    }
    if (r->idmap) {
        int sk = local_idmap_stage_leave(&stage);
        if (sk < 0) {
            /* This thread would go on in a private mount namespace: network namespaces it
             * mounts later would be invisible to the host. */
            log_error("cannot return to the host mount namespace", "error", strerror(-sk));
            abort();
        }
    }
    rec_netns_leave(&netns_saved);
    return k < 0 ? fail_runtime(m->pod, m->rt, k, &err, f) : 0;
}

/* After a run: the output collected, the pid, gVisor's sockets published, what it was given,
 * and one log line with where the time went. */
static int mat_started(mat_run *m, pid_t *ret_pid, local_limits *ret_limits, rec_failure *f)
{
    local_reconciler *r = m->r;
    int k, lk = local_logs_add(r->logs, m->uid, TAKE_FD(m->out_r), m->log, true);
    if (lk < 0 && r->logs)
        log_warn("cannot collect the sandbox's output", "uid", m->uid, "error", strerror(-lk));
    if (m->main_r >= 0) {
        lk = local_logs_add(r->logs, m->uid, TAKE_FD(m->main_r), m->main_log, true);
        if (lk < 0 && r->logs)
            log_warn("cannot collect the main process's output", "uid", m->uid, "error",
                     strerror(-lk));
    }
    pid_t pid = read_pid(m->pidfile);
    if (pid <= 0) { /* no pid file: ask the runtime, or the container would look dead */
        _cleanup_free_ char *st = NULL;
        if (oci_state(m->rt, m->uid, &st, &pid) < 0)
            pid = 0;
    }
    *ret_pid = pid;
    /* -ESRCH: sandboxd exited first, which the health check reports with its last words. */
    if (m->gvisor && (k = local_gvisor_publish(m->run_dir, pid, START_SOCKETS_TIMEOUT_MS)) < 0 &&
        k != -ESRCH) {
        /* Unreachable as it is: removed, so that a later start begins afresh. */
        _cleanup_(api_error_clearp) api_error derr = API_ERROR_INIT;
        if (oci_delete(m->rt, m->uid, &derr) < 0)
            log_warn("cannot remove the container", "uid", m->uid, "error", derr.message ?: "");
        return fail_seen(f, "ReconcilerError", k,
                         "sandboxd under runsc did not bind its sockets in %s/%s: %s", m->run_dir,
                         LOCAL_GVISOR_BOX, strerror(-k));
    }
    if (ret_limits) { /* what it was given: its storage is the disk's real size */
        *ret_limits = m->lim;
        ret_limits->memory = MAX(m->lim.memory, 0);
        ret_limits->cpu_millis = MAX(m->lim.cpu_millis, 0);
        ret_limits->ephemeral = m->sc.size;
    }
    char ms[32], prep[32], storage[32], net[32], bundle_ms[32];
    snprintf(bundle_ms, sizeof(bundle_ms), "%.1f", (double)m->t_bundle / 1000.0);
    snprintf(ms, sizeof(ms), "%.1f", (double)(now_usec(CLOCK_MONOTONIC) - m->t0) / 1000.0);
    snprintf(net, sizeof(net), "%.1f", (double)m->t_net / 1000.0);
    snprintf(prep, sizeof(prep), "%.1f", (double)(m->t0 - m->t_prep) / 1000.0);
    snprintf(storage, sizeof(storage), "%.1f", (double)(m->t_storage - m->t_prep) / 1000.0);
    log_info("sandbox container started", "sandbox", m->name, "uid", m->uid, "prepare_ms", prep,
             "storage_ms", storage, "network_ms", net, "bundle_ms", bundle_ms, "runc_ms", ms);
    return 0;
}

int rec_materialise_run(local_reconciler *r, const json_t *sb, const oci_runtime *rt,
                        pid_t *ret_pid, local_limits *ret_limits, rec_failure *f)
{
    _cleanup_(mat_run_done) mat_run m = MAT_RUN_INIT(r, sb, rt);
    int k;
    if ((k = mat_pod(&m, f)) < 0 || (k = mat_image(&m, f)) < 0 ||
        (k = mat_user_and_dirs(&m, f)) < 0 || (k = mat_volumes(&m, f)) < 0 ||
        (k = mat_main_process(&m, f)) < 0 || (k = mat_paths(&m, f)) < 0 ||
        (k = mat_network(&m, f)) < 0 || (k = mat_bundle(&m, f)) < 0 || (k = mat_fds(&m, f)) < 0 ||
        (k = mat_launch(&m, f)) < 0)
        return k;
    return mat_started(&m, ret_pid, ret_limits, f);
}

bool rec_health(local_reconciler *r, const char *uid, int timeout_ms)
{
    _cleanup_free_ char *path = path_of(r, "run", uid, "rest.sock");
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (!path || strlen(path) >= sizeof(sa.sun_path))
        return false;
    strcpy(sa.sun_path, path);
    _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        return false;
    static const char req[] = "GET /v1/health HTTP/1.0\r\nHost: sandbox\r\n\r\n";
    if (send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof(req) - 1))
        return false;
    char buf[64];
    size_t got = 0;
    usec_t deadline = now_usec(CLOCK_MONOTONIC) + (usec_t)timeout_ms * 1000;
    while (got < 12) {
        usec_t now = now_usec(CLOCK_MONOTONIC);
        if (now >= deadline)
            return false;
        struct pollfd p = {fd, POLLIN, 0};
        int n = poll(&p, 1, (int)((deadline - now + 999) / 1000));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        ssize_t k = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);
        if (k < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (k <= 0)
            return false;
        got += (size_t)k;
    }
    buf[got] = '\0';
    return strncmp(buf, "HTTP/1.", 7) == 0 && strncmp(buf + 8, " 200", 4) == 0;
}

void rec_watch_main(local_reconciler *r, const char *uid)
{
    _cleanup_free_ char *dir = path_of(r, "sandboxes", uid, "main");
    if (r->inotify_fd >= 0 && dir && access(dir, F_OK) == 0 &&
        inotify_add_watch(r->inotify_fd, dir, IN_MOVED_TO | IN_CLOSE_WRITE) < 0)
        log_warn("cannot watch the main process", "uid", uid, "error", strerror(errno));
}

int rec_main_exit(local_reconciler *r, const char *uid, int *ret_code)
{
    _cleanup_free_ char *path = path_of(r, "sandboxes", uid, "main/exit");
    /* The directory is the sandbox's: its exit may be a symlink or a FIFO it made, or a file
     * of gigabytes of digits. Only a regular file is read, opening never blocks, and only its
     * first bytes are read. */
    _cleanup_close_ int fd = path ? open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK) : -1;
    struct stat st;
    char buf[32];
    ssize_t n = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)
                    ? pread(fd, buf, sizeof(buf) - 1, 0)
                    : -1;
    int code;
    if (n <= 0)
        return -ENOENT;
    buf[n] = '\0';
    if (sscanf(buf, "%d", &code) != 1)
        return -ENOENT;
    *ret_code = code;
    return 0;
}
