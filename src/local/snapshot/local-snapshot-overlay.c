/* Snapshot trees and the overlayfs mounts of forks (local-snapshot-overlay.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <linux/mount.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "basic/buf.h"
#include "basic/fs-util.h"
#include "basic/macro.h"
#include "local/runtime/local-cleanup.h"
#include "local/fs/local-fs.h"
#include "local/container/local-idmap.h"
#include "local/snapshot/local-snapshot-manifest.h"
#include "local/snapshot/local-snapshot-overlay.h"
#include "local/snapshot/local-snapshot-store.h"
#include "local/snapshot/local-snapshot-tree.h"

/* Unpacks every root of the snapshot into the new directory tmp. */
static int unpack(const char *state_dir, const char *snap_uid, const char *tmp, char **ret_error)
{
    _cleanup_free_ char *dir = strdup_printf("%s/snapshots", state_dir);
    if (!dir)
        return -ENOMEM;
    snap_store *s = NULL;
    _cleanup_(json_decrefp) json_t *m = NULL;
    int k = snap_store_open(dir, &s);
    if (k == 0 && (k = snap_store_load_manifest(s, snap_uid, &m)) == 0)
        k = snap_manifest_check(m, ret_error);
    const json_t *root;
    size_t i;
    json_array_foreach (k == 0 ? json_object_get(m, "roots") : NULL, i, root) {
        const char *name = json_string_value(json_object_get(root, "name"));
        _cleanup_free_ char *dest = strdup_printf("%s/%s", tmp, name);
        if (!dest) {
            k = -ENOMEM;
            break;
        }
        if ((k = mkdir_p(dest, 0755)) < 0 || (k = snap_restore(s, m, name, dest, 0, ret_error)) < 0)
            break;
    }
    snap_store_free(s);
    return k;
}

int local_snapshot_tree_get(const char *state_dir, const char *snap_uid, char **ret_dir,
                            char **ret_message)
{
    _cleanup_free_ char *trees = strdup_printf("%s/snapshots/" LOCAL_SNAPSHOT_TREES, state_dir),
                        *dir = NULL, *lock = NULL, *tmp = NULL, *err = NULL;
    if (!trees || !(dir = strdup_printf("%s/%s", trees, snap_uid)) ||
        !(lock = strdup_printf("%s/.lock-%s", trees, snap_uid)) ||
        !(tmp = strdup_printf("%s/.tmp-%s", trees, snap_uid)))
        return -ENOMEM;
    if (access(dir, F_OK) == 0) {
        *ret_dir = TAKE_PTR(dir);
        return 0;
    }
    /* Files owned by the sandbox's ids as host ids, setuid bits kept: root's eyes only. */
    int k = mkdir_p(trees, 0700);
    if (k < 0 || chmod(trees, 0700) < 0) {
        k = k < 0 ? k : -errno;
        *ret_message = strdup_printf("cannot create %s: %s", trees, strerror(-k));
        return k;
    }
    /* Concurrent first forks of one snapshot: one unpacks, the others wait for it. */
    _cleanup_close_ int lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lfd < 0 || flock(lfd, LOCK_EX) < 0) {
        k = -errno;
        *ret_message = strdup_printf("cannot lock %s: %s", lock, strerror(-k));
        return k;
    }
    if (access(dir, F_OK) < 0) {
        fs_rm_rf(tmp); /* left by a crash */
        if (mkdir(tmp, 0755) < 0)
            k = -errno;
        if (k == 0)
            k = unpack(state_dir, snap_uid, tmp, &err);
        if (k == 0 && rename(tmp, dir) < 0)
            k = -errno;
        if (k < 0) {
            fs_rm_rf(tmp);
            *ret_message =
                strdup_printf("cannot unpack snapshot %s: %s", snap_uid, err ? err : strerror(-k));
            return k;
        }
    }
    *ret_dir = TAKE_PTR(dir);
    return 0;
}

/* A user namespace mapping ids 0..LOCAL_IDMAP_SLOT-1 to id_base..: *ret_fd (owned) to idmap a
 * mount with. A child that does nothing but unshare holds it while the maps are written. */
static int userns_fd(uint32_t id_base, int *ret_fd)
{
    int ready[2], done[2];
    if (pipe2(ready, O_CLOEXEC) < 0)
        return -errno;
    if (pipe2(done, O_CLOEXEC) < 0) {
        int k = -errno;
        close(ready[0]);
        close(ready[1]);
        return k;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(ready[0]);
        close(done[1]);
        char c = unshare(CLONE_NEWUSER) == 0 ? 'y' : 'n';
        if (write(ready[1], &c, 1) != 1)
            _exit(1);
        (void)!read(done[0], &c, 1); /* until the parent has opened the namespace */
        _exit(0);
    }
    int k = pid < 0 ? -errno : 0;
    close(ready[1]);
    close(done[0]);
    char c = 0, map[64];
    if (k == 0 && (read(ready[0], &c, 1) != 1 || c != 'y'))
        k = -EPERM;
    snprintf(map, sizeof(map), "0 %u %u\n", (unsigned)id_base, LOCAL_IDMAP_SLOT);
    for (const char *const *f = (const char *const[]){"uid_map", "gid_map", NULL}; k == 0 && *f;
         f++) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, *f);
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, map, strlen(map)) != (ssize_t)strlen(map))
            k = -errno;
    }
    if (k == 0) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
        if ((*ret_fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
            k = -errno;
    }
    (void)!write(done[1], "x", 1); /* the child may go */
    close(done[1]);
    close(ready[0]);
    if (pid > 0)
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
    return k;
}

/* A detached copy of the mount of dir, its ids shifted by id_base: *ret_fd (owned). */
static int idmapped_tree(const char *dir, uint32_t id_base, int *ret_fd)
{
    _cleanup_close_ int ns = -1;
    int k = userns_fd(id_base, &ns);
    if (k < 0)
        return k;
    _cleanup_close_ int fd =
        (int)syscall(SYS_open_tree, AT_FDCWD, dir, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct mount_attr attr = {.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY,
                              .userns_fd = (uint64_t)ns};
    if (syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
        return -errno;
    *ret_fd = TAKE_FD(fd);
    return 0;
}

int local_snapshot_overlay_probe(const char *dir, uint32_t id_base)
{
    _cleanup_close_ int fd = -1;
    return idmapped_tree(dir, id_base, &fd);
}

static bool is_mount_point(const char *path)
{
    struct statx a, b;
    _cleanup_free_ char *parent = strdup_printf("%s/..", path);
    return parent && statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_MNT_ID, &a) == 0 &&
           statx(AT_FDCWD, parent, 0, STATX_MNT_ID, &b) == 0 && a.stx_mnt_id != b.stx_mnt_id;
}

/* upper/work beside dest; a new upper root takes the lower root's metadata (what a restore
 * gives the destination root). */
static int prepare_layers(const char *lower, const char *dest, uint32_t id_base, char **ret_upper,
                          char **ret_work)
{
    _cleanup_free_ char *d1 = strdup(dest), *d2 = strdup(dest), *upper = NULL, *work = NULL;
    if (!d1 || !d2)
        return -ENOMEM;
    const char *parent = dirname(d1), *name = basename(d2); /* both modify their copy */
    if (!(upper = strdup_printf("%s/.fork-%s/upper", parent, name)) ||
        !(work = strdup_printf("%s/.fork-%s/work", parent, name)))
        return -ENOMEM;
    int k = mkdir_p(work, 0700);
    if (k < 0 || (k = mkdir_parents(upper)) < 0)
        return k;
    if (mkdir(upper, 0755) == 0) {
        struct stat st;
        if (stat(lower, &st) < 0 || chown(upper, id_base + st.st_uid, id_base + st.st_gid) < 0 ||
            chmod(upper, st.st_mode & 07777) < 0 ||
            utimensat(AT_FDCWD, upper, (struct timespec[]){st.st_atim, st.st_mtim}, 0) < 0)
            return -errno;
    } else if (errno != EEXIST)
        return -errno;
    *ret_upper = TAKE_PTR(upper);
    *ret_work = TAKE_PTR(work);
    return 0;
}

int local_snapshot_overlay_mount(const char *lower_dir, const char *dest, uint32_t id_base,
                                 char **ret_error)
{
    _cleanup_free_ char *real = realpath(dest, NULL), *upper = NULL, *work = NULL, *opts = NULL,
                        *lower = NULL;
    if (!real) {
        int k = -errno;
        *ret_error = strdup_printf("cannot resolve %s: %s", dest, strerror(-k));
        return k;
    }
    if (is_mount_point(real))
        return 0; /* mounted before a restart of asb serve */
    int k = prepare_layers(lower_dir, real, id_base, &upper, &work);
    if (k < 0) {
        *ret_error = strdup_printf("cannot create the layers of %s: %s", real, strerror(-k));
        return k;
    }
    _cleanup_close_ int tree = -1;
    if (id_base && (k = idmapped_tree(lower_dir, id_base, &tree)) < 0) {
        *ret_error = strdup_printf("cannot idmap %s: %s", lower_dir, strerror(-k));
        return k;
    }
    lower = tree >= 0 ? strdup_printf("/proc/self/fd/%d", tree) : strdup(lower_dir);
    if (!lower)
        return -ENOMEM;
    /* mount(2) options are comma separated and lowerdir colon separated: no such paths. */
    if (strpbrk(lower, ",:") || strpbrk(upper, ",:") || strpbrk(work, ",:")) {
        *ret_error = strdup_printf("the state directory path may not contain ',' or ':' for an "
                                   "overlay mount (%s)",
                                   upper);
        return -EINVAL;
    }
    if (!(opts = strdup_printf("lowerdir=%s,upperdir=%s,workdir=%s,index=on,redirect_dir=on", lower,
                               upper, work)))
        return -ENOMEM;
    /* EBUSY: an overlay on the same upper and work directories, unmounted a moment ago (lazily,
     * when it was busy), still holds them until the kernel has let it go. */
    int r;
    for (int tries = 0;
         (r = mount("overlay", real, "overlay", MS_NOSUID | MS_NODEV, opts)) < 0 && errno == EBUSY &&
         tries < 100;
         tries++)
        nanosleep(&(struct timespec){.tv_nsec = 20 * 1000 * 1000}, NULL);
    if (r < 0) {
        k = -errno;
        *ret_error = strdup_printf("cannot mount the overlay on %s: %s", real, strerror(-k));
        return k;
    }
    return 0;
}

#ifndef OVERLAYFS_SUPER_MAGIC
#define OVERLAYFS_SUPER_MAGIC 0x794c7630
#endif

static bool is_overlay(const char *path)
{
    struct statfs sf;
    return statfs(path, &sf) == 0 && sf.f_type == OVERLAYFS_SUPER_MAGIC;
}

static int overlay_entry(const char *path, void *payload)
{
    (void)payload;
    return is_overlay(path);
}

/* Whether dir or one of its entries (followed, as a workspace is a link into the sandbox's disk)
 * is an overlayfs. */
static bool has_overlay_entry(const char *dir)
{
    if (is_overlay(dir))
        return true;
    int r = fs_each_entry(dir, overlay_entry, NULL);
    /* Out of memory or an unreadable dir: read the mount table rather than leave one. */
    return r != 0 && r != -ENOENT && r != -ENOTDIR;
}

int local_snapshot_overlays_release(const char *dir)
{
    _cleanup_free_ char *real = realpath(dir, NULL);
    if (!real)
        return errno == ENOENT ? 0 : -errno;
    return local_cleanup_unmount_under(real, "overlay", NULL);
}

int local_snapshot_entry_overlays_release(const char *dir)
{
    /* A missing dir has none; an unreadable one is left to the general release's answer. */
    return has_overlay_entry(dir) ? local_snapshot_overlays_release(dir) : 0;
}

/* Whether some sandboxes/<uid>/seeded names the snapshot uid on its first line. */
static bool tree_in_use(const char *state_dir, const char *snap_uid)
{
    _cleanup_free_ char *sbs = strdup_printf("%s/sandboxes", state_dir);
    _cleanup_closedir_ DIR *d = sbs ? opendir(sbs) : NULL;
    if (!sbs)
        return true; /* out of memory: keep it */
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        _cleanup_free_ char *p = strdup_printf("%s/%s/" LOCAL_SNAPSHOT_SEEDED, sbs, e->d_name);
        _cleanup_fclose_ FILE *f = p ? fopen(p, "re") : NULL;
        char line[256];
        if (!p)
            return true;
        if (f && fgets(line, sizeof(line), f)) {
            line[strcspn(line, "\n")] = 0;
            if (strcmp(line, snap_uid) == 0)
                return true;
        }
    }
    return false;
}

void local_snapshot_trees_gc(const char *state_dir)
{
    _cleanup_free_ char *trees = strdup_printf("%s/snapshots/" LOCAL_SNAPSHOT_TREES, state_dir);
    _cleanup_closedir_ DIR *d = trees ? opendir(trees) : NULL;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        _cleanup_free_ char *manifest =
            strdup_printf("%s/snapshots/manifests/%s.json", state_dir, e->d_name);
        if (!manifest || access(manifest, F_OK) == 0 || tree_in_use(state_dir, e->d_name))
            continue;
        _cleanup_free_ char *p = strdup_printf("%s/%s", trees, e->d_name),
                            *lock = strdup_printf("%s/.lock-%s", trees, e->d_name);
        if (p && fs_rm_rf(p) == 0 && lock)
            unlink(lock);
    }
}
