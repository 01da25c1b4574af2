/* Volumes of a local sandbox: storage and staged mounts. See local-volume.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "api/api-pod.h"
#include "basic/buf.h"
#include "basic/confine.h"
#include "basic/fs-util.h"
#include "basic/macro.h"
#include "local/runtime/local-cleanup.h"
#include "local/fs/local-fs.h"
#include "local/storage/local-scratch.h"
#include "local/storage/local-volume.h"

#define DISK_PREFIX ".disk-"
#define DATA_DIR "data"

int local_volume_request(const json_t *sb, size_t i, int64_t *ret)
{
    const json_t *req = json_object_get(
        json_object_get(
            json_object_get(
                json_object_get(
                    json_array_get(
                        json_object_get(json_object_get(sb, "spec"), "volumeClaimTemplates"), i),
                    "spec"),
                "resources"),
            "requests"),
        "storage");
    *ret = 0;
    if (!req)
        return 0;
    char num[64];
    const char *s = json_string_value(req);
    if (json_is_number(req)) { /* `storage: 5` in YAML: a quantity too, as for limits */
        snprintf(num, sizeof(num), "%.17g", json_number_value(req));
        s = num;
    }
    return s ? api_quantity_parse(s, API_RESOURCE_EPHEMERAL_STORAGE, ret) : -EINVAL;
}

static int failf(char **ret_error, int err, const char *what, const char *path)
{
    *ret_error = strdup_printf("cannot %s %s: %s", what, path, strerror(-err));
    return err;
}

/* dir_fd/name made (mode) unless it exists, then owned by uid:gid through its fd. */
static int own_at(int dir_fd, const char *name, uid_t uid, gid_t gid)
{
    if (mkdirat(dir_fd, name, 0755) < 0 && errno != EEXIST)
        return -errno;
    _cleanup_close_ int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || fchown(fd, uid, gid) < 0)
        return -errno;
    return 0;
}

/* vols_dir/name -> .disk-<name>/data, replacing nothing but a symlink. */
static int link_volume(int vols_fd, const char *name)
{
    _cleanup_free_ char *target = strdup_printf(DISK_PREFIX "%s/" DATA_DIR, name);
    if (!target)
        return -ENOMEM;
    char cur[PATH_MAX];
    ssize_t n = readlinkat(vols_fd, name, cur, sizeof(cur) - 1);
    if (n >= 0) {
        cur[n] = '\0';
        if (strcmp(cur, target) == 0)
            return 0;
        if (unlinkat(vols_fd, name, 0) < 0)
            return -errno;
    } else if (errno != ENOENT) {
        return errno == EINVAL ? -EEXIST : -errno; /* EINVAL: not a symlink */
    }
    return symlinkat(target, vols_fd, name) < 0 ? -errno : 0;
}

static int prepare_disk(const char *state_dir, const char *vols_dir, int vols_fd, const char *name,
                        int64_t bytes, uid_t uid, gid_t gid, char **ret_error)
{
    _cleanup_free_ char *image = strdup_printf("%s/" DISK_PREFIX "%s.img", vols_dir, name),
                        *mnt = strdup_printf("%s/" DISK_PREFIX "%s", vols_dir, name);
    if (!image || !mnt)
        return -ENOMEM;
    int64_t size;
    int k = local_scratch_disk(state_dir, image, mnt, bytes, &size, ret_error);
    if (k < 0)
        return k;
    /* The filesystem's root is root's: only data/ is the sandbox's, and bound. */
    _cleanup_close_ int mnt_fd = openat(vols_fd, mnt + strlen(vols_dir) + 1,
                                        O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (mnt_fd < 0)
        return failf(ret_error, -errno, "open", mnt);
    if ((k = own_at(mnt_fd, DATA_DIR, uid, gid)) < 0)
        return failf(ret_error, k, "prepare the data directory of", mnt);
    if ((k = link_volume(vols_fd, name)) < 0)
        return failf(ret_error, k, "link the volume directory in", vols_dir);
    return 0;
}

int local_volume_prepare(const char *state_dir, const char *vols_dir, const char *name,
                         int64_t bytes, uid_t uid, gid_t gid, char **ret_error)
{
    *ret_error = NULL;
    int k = mkdir_p(vols_dir, 0755);
    if (k < 0)
        return failf(ret_error, k, "create", vols_dir);
    _cleanup_close_ int vols_fd = open(vols_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (vols_fd < 0)
        return failf(ret_error, -errno, "open", vols_dir);
    struct stat st;
    /* A plain directory (no request, or a volume older than the limits) stays one: no data is
     * moved. */
    bool plain =
        fstatat(vols_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 ? S_ISDIR(st.st_mode) : bytes <= 0;
    if (plain) {
        if ((k = own_at(vols_fd, name, uid, gid)) < 0)
            return failf(ret_error, k, "create the volume directory", name);
        return 0;
    }
    return prepare_disk(state_dir, vols_dir, vols_fd, name, bytes, uid, gid, ret_error);
}

static int release_entry(const char *path, void *payload)
{
    int *last = payload;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    if (strncmp(base, DISK_PREFIX, strlen(DISK_PREFIX)) != 0 ||
        (n > 4 && strcmp(base + n - 4, ".img") == 0))
        return 0;
    _cleanup_free_ char *image = strdup_printf("%s.img", path);
    int k = image ? local_scratch_disk_release(image, path) : -ENOMEM;
    if (k < 0)
        *last = k;
    return 0;
}

int local_volumes_release(const char *vols_dir)
{
    int last = 0;
    int k = fs_each_entry(vols_dir, release_entry, &last);
    if (k < 0 && k != -ENOENT)
        return k;
    return last;
}

/* The directory of volume `claim` in vols_dir: its own link (made by local_volume_prepare, in a
 * directory only root writes) may be followed, nothing the sandbox made can be. */
static int open_volume(int vols_fd, const char *claim)
{
    struct open_how how = {.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
                           .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS};
    int fd = (int)syscall(SYS_openat2, vols_fd, claim, &how, sizeof(how));
    return fd < 0 ? -errno : fd;
}

static int bind_fd(int fd, const char *target)
{
    char src[64];
    snprintf(src, sizeof(src), "/proc/self/fd/%d", fd);
    if (mkdir(target, 0700) < 0 && errno != EEXIST)
        return -errno;
    /* A private bind: it does not propagate to other mount namespaces. */
    if (mount(src, target, NULL, MS_BIND, NULL) < 0)
        return -errno;
    if (mount(NULL, target, NULL, MS_PRIVATE, NULL) < 0) {
        int k = -errno;
        umount2(target, MNT_DETACH);
        return k;
    }
    return 0;
}

static int stage_one(int vols_fd, const char *dir, local_bundle_volume *v, size_t i, uid_t uid,
                     gid_t gid)
{
    _cleanup_close_ int vol = open_volume(vols_fd, v->claim);
    if (vol < 0)
        return vol;
    _cleanup_close_ int fd = -1;
    if (v->sub_path) {
        int k = confine_mkdir_beneath(vol, v->sub_path, 0755, uid, gid, &fd);
        if (k < 0)
            return k;
    } else {
        fd = TAKE_FD(vol);
    }
    _cleanup_free_ char *target = strdup_printf("%s/%zu", dir, i);
    if (!target)
        return -ENOMEM;
    int k = bind_fd(fd, target);
    if (k < 0)
        return k;
    free(v->source);
    v->source = TAKE_PTR(target);
    return 0;
}

int local_volumes_stage(const char *vols_dir, const char *stage_dir, local_bundle_volume *v,
                        size_t n, uid_t uid, gid_t gid, local_volumes_staged *ret, size_t *ret_bad)
{
    *ret = (local_volumes_staged){0};
    *ret_bad = 0;
    if (n == 0)
        return 0;
    int k = local_volumes_unstage(stage_dir);
    if (k < 0)
        return k;
    if ((k = mkdir_p(stage_dir, 0700)) < 0)
        return k;
    if (!(ret->dir = strdup(stage_dir)))
        return -ENOMEM;
    _cleanup_close_ int vols_fd = open(vols_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (vols_fd < 0)
        return -errno;
    for (size_t i = 0; i < n; i++) {
        if ((k = stage_one(vols_fd, stage_dir, &v[i], i, uid, gid)) < 0) {
            *ret_bad = i;
            local_volumes_stage_done(ret);
            return k;
        }
        ret->n = i + 1;
    }
    return 0;
}

void local_volumes_stage_done(local_volumes_staged *s)
{
    for (size_t i = 0; s->dir && i < s->n; i++) {
        _cleanup_free_ char *t = strdup_printf("%s/%zu", s->dir, i);
        if (t && umount2(t, UMOUNT_NOFOLLOW | MNT_DETACH) == 0)
            rmdir(t);
    }
    if (s->dir)
        (void)fs_rm_rf(s->dir);
    free(s->dir);
    *s = (local_volumes_staged){0};
}

int local_volumes_unstage(const char *stage_dir)
{
    if (access(stage_dir, F_OK) < 0)
        return 0;
    int k = local_cleanup_unmount_under(stage_dir, NULL, NULL);
    if (k < 0)
        return k;
    return fs_rm_rf(stage_dir);
}
