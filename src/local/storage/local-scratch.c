/* Workspace, home and scratch of a local sandbox on a size-limited filesystem. See
 * local-scratch.h. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "basic/fs-util.h"
#include "basic/macro.h"
#include "local/fs/local-fs.h"
#include "local/runtime/local-runtime-oci.h"
#include "local/storage/local-scratch.h"

#define LOOP_MAJOR 7
#define MIN_SIZE (INT64_C(8) << 20) /* mke2fs needs a few MiB for an ext4 without journal */

static int failf(char **ret_error, int err, const char *fmt, const char *a, const char *b)
{
    if (asprintf(ret_error, fmt, a, b) < 0)
        *ret_error = NULL;
    return err < 0 ? err : -EIO;
}

/* mke2fs from /usr/sbin or /sbin even when PATH lacks them (asb serve started by a user). */
static const char *mke2fs_path(void)
{
    static const char *const candidates[] = {"/usr/sbin/mke2fs", "/sbin/mke2fs"};
    for (size_t i = 0; i < ELEMENTSOF(candidates); i++)
        if (access(candidates[i], X_OK) == 0)
            return candidates[i];
    return "mke2fs";
}

/* Copies [from, to) of in to the same offsets of out: copy_file_range, or read/write where the
 * filesystems do not do it (overlayfs, some FUSE and network filesystems). */
static int copy_range(int in, int out, off_t from, off_t to)
{
    off_t o_in = from, o_out = from;
    while (o_in < to) {
        ssize_t n = copy_file_range(in, &o_in, out, &o_out, (size_t)(to - o_in), 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n > 0)
            continue;
        if (n == 0 || (errno != EXDEV && errno != EINVAL && errno != EOPNOTSUPP && errno != ENOSYS))
            return n < 0 ? -errno : -EIO;
        char buf[65536];
        while (o_in < to) {
            ssize_t r = pread(in, buf, (size_t)MIN((off_t)sizeof(buf), to - o_in), o_in);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                return r < 0 ? -errno : -EIO;
            bool zero = buf[0] == 0 && memcmp(buf, buf + 1, (size_t)r - 1) == 0;
            for (ssize_t w = zero ? r : 0; w < r;) { /* zeros stay a hole */
                ssize_t k = pwrite(out, buf + w, (size_t)(r - w), o_out + w);
                if (k < 0 && errno == EINTR)
                    continue;
                if (k < 0)
                    return -errno;
                w += k;
            }
            o_in += r;
            o_out += r;
        }
    }
    return 0;
}

/* Copies src to dst (created, 0600) keeping holes: a reflink where the filesystem has them,
 * else the data extents only (SEEK_DATA/SEEK_HOLE + copy_file_range). */
static int copy_sparse(const char *src, const char *dst)
{
    _cleanup_close_ int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return -errno;
    struct stat st;
    if (fstat(in, &st) < 0)
        return -errno;
    _cleanup_close_ int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (out < 0)
        return -errno;
    if (ioctl(out, FICLONE, in) == 0)
        return 0;
    if (ftruncate(out, st.st_size) < 0)
        return -errno;
    off_t pos = 0;
    while (pos < st.st_size) {
        off_t data = lseek(in, pos, SEEK_DATA);
        if (data < 0) {
            if (errno == ENXIO)
                break; /* only a hole is left */
            return -errno;
        }
        off_t hole = lseek(in, data, SEEK_HOLE);
        if (hole < 0)
            return -errno;
        int k = copy_range(in, out, data, hole);
        if (k < 0)
            return k;
        pos = hole;
    }
    return 0;
}

/* The directories every image starts with (mke2fs -d), so a new sandbox creates none. */
static const struct {
    const char *name;
    mode_t mode;
    bool owned; /* by the sandbox user (chowned after mount), else root */
} scratch_dirs[] = {{"workspace", 0755, true}, {"home", 0755, true}, {"tmp", 01777, false}};

/* mke2fs of image (sized already) with tree's contents. Exit status, or a negative errno. */
static int run_mke2fs(const char *image, const char *tree, char **ret_output)
{
    /* No journal (the contents do not outlive the sandbox), no reserved blocks, no resize inode
     * (4 MiB of reserved descriptors at 10Gi; the size is fixed), no backup superblocks
     * (sparse_super2 with none: nothing fscks this filesystem) and all block groups' metadata in
     * one flex group, so the image's data is 3 extents instead of 15 (each one a copy at every
     * start and a discard on the host at every delete), inode tables initialised lazily, no
     * discard of the sparse image at mkfs time. assume_storage_prezeroed
     * (e2fsprogs >= 1.47): the sparse file reads as zeros, so the inode tables are marked
     * zeroed and the kernel does not write ~16 MiB per GiB into every image after mount (older
     * mke2fs: retried without it; mount_image passes noinit_itable too). */
    char opts[] = "num_backup_sb=0,lazy_itable_init=1,nodiscard,assume_storage_prezeroed=1";
    char *argv[] = {(char *)mke2fs_path(),
                    "-q",
                    "-F",
                    "-t",
                    "ext4",
                    "-O",
                    "^has_journal,^resize_inode,sparse_super2",
                    "-G",
                    "128",
                    "-m",
                    "0",
                    "-E",
                    opts,
                    "-L",
                    "asb-scratch",
                    "-d",
                    (char *)tree,
                    (char *)image,
                    NULL};
    int k = local_spawn_capture(argv, ret_output);
    if (k > 0) {
        free(*ret_output);
        *ret_output = NULL;
        opts[strlen("num_backup_sb=0,lazy_itable_init=1,nodiscard")] = '\0';
        k = local_spawn_capture(argv, ret_output);
    }
    return k;
}

/* $ASB_STATE_DIR/scratch/ext4-<bytes>.img, made by mke2fs at first use. Owned path. */
static int template_for(const char *state_dir, int64_t bytes, char **ret, char **ret_error)
{
    _cleanup_free_ char *dir = NULL, *path = NULL, *tmp = NULL, *tree = NULL, *out = NULL;
    if (asprintf(&dir, "%s/scratch", state_dir) < 0 ||
        asprintf(&path, "%s/ext4-%" PRId64 ".img", dir, bytes) < 0 ||
        /* per thread: start workers may make the same template at once (the loser's rename
         * replaces an identical file) */
        asprintf(&tmp, "%s.%d.tmp", path, (int)gettid()) < 0 || asprintf(&tree, "%s.d", tmp) < 0)
        return -ENOMEM;
    if (access(path, F_OK) == 0) {
        *ret = TAKE_PTR(path);
        return 0;
    }
    int k = mkdir_p(dir, 0700);
    if (k < 0)
        return failf(ret_error, k, "cannot create %s: %s", dir, strerror(-k));
    unlink(tmp);
    fs_rm_rf(tree);
    k = mkdir_p(tree, 0755);
    for (size_t i = 0; k == 0 && i < ELEMENTSOF(scratch_dirs); i++) {
        _cleanup_free_ char *d = NULL;
        if (asprintf(&d, "%s/%s", tree, scratch_dirs[i].name) < 0)
            return -ENOMEM;
        if (mkdir(d, 0700) < 0 || chmod(d, scratch_dirs[i].mode) < 0)
            k = -errno;
    }
    _cleanup_close_ int fd = k < 0 ? -1 : open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (k < 0 || fd < 0 || ftruncate(fd, (off_t)bytes) < 0) {
        k = k < 0 ? k : -errno;
        unlink(tmp);
        fs_rm_rf(tree);
        return failf(ret_error, k, "cannot create %s: %s", tmp, strerror(-k));
    }
    k = run_mke2fs(tmp, tree, &out);
    fs_rm_rf(tree);
    if (k != 0) {
        unlink(tmp);
        if (out)
            out[strcspn(out, "\n")] = '\0';
        if (k == 127)
            return failf(ret_error, -ENOENT,
                         "mke2fs not found: install e2fsprogs (ephemeral storage needs it)%s%s", "",
                         "");
        return failf(ret_error, k < 0 ? k : -EIO, "mke2fs (e2fsprogs) failed: %s%s",
                     k < 0 ? strerror(-k) : (out && *out ? out : "no output"), "");
    }
    if (fsync(fd) < 0 || rename(tmp, path) < 0) {
        k = -errno;
        unlink(tmp);
        return failf(ret_error, k, "cannot write %s: %s", path, strerror(-k));
    }
    *ret = TAKE_PTR(path);
    return 0;
}

/* Attaches image to a free loop device with autoclear (it detaches when its last user, the
 * mount, goes away). Returns the open device fd and its path. */
static int loop_attach(const char *image, int *ret_fd, char *dev, size_t n)
{
    _cleanup_close_ int img = open(image, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (img < 0)
        return -errno;
    _cleanup_close_ int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
    if (ctl < 0)
        return -errno;
    for (int attempt = 0; attempt < 32; attempt++) {
        int nr = ioctl(ctl, LOOP_CTL_GET_FREE);
        if (nr < 0)
            return -errno;
        snprintf(dev, n, "/dev/loop%d", nr);
        _cleanup_close_ int fd = open(dev, O_RDWR | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT &&
            mknod(dev, S_IFBLK | 0600, makedev(LOOP_MAJOR, (unsigned)nr)) == 0)
            fd = open(dev, O_RDWR | O_CLOEXEC);
        if (fd < 0)
            return -errno;
        struct loop_config cfg = {.fd = (uint32_t)img};
        cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR;
        snprintf((char *)cfg.info.lo_file_name, LO_NAME_SIZE, "%s", image);
        if (ioctl(fd, LOOP_CONFIGURE, &cfg) == 0) {
            *ret_fd = TAKE_FD(fd);
            return 0;
        }
        if (errno == EBUSY)
            continue; /* taken by someone else between GET_FREE and CONFIGURE */
        if (errno != EINVAL && errno != ENOTTY)
            return -errno;
        /* Kernels before 5.8: set the fd, then the flags. */
        if (ioctl(fd, LOOP_SET_FD, img) < 0) {
            if (errno == EBUSY)
                continue;
            return -errno;
        }
        if (ioctl(fd, LOOP_SET_STATUS64, &cfg.info) < 0) {
            int k = -errno;
            ioctl(fd, LOOP_CLR_FD, 0);
            return k;
        }
        *ret_fd = TAKE_FD(fd);
        return 0;
    }
    return -EBUSY;
}

static bool is_mounted(const char *mnt, const char *base)
{
    struct stat a, b;
    return stat(mnt, &a) == 0 && stat(base, &b) == 0 && a.st_dev != b.st_dev;
}

static int mount_image(const char *image, const char *mnt, char **ret_error)
{
    char dev[64];
    int fd = -1;
    int k = mkdir_p(mnt, 0700);
    if (k < 0)
        return failf(ret_error, k, "cannot create %s: %s", mnt, strerror(-k));
    k = loop_attach(image, &fd, dev, sizeof(dev));
    if (k < 0)
        return failf(ret_error, k,
                     "cannot attach %s to a loop device (%s): ephemeral storage limits need loop "
                     "devices; asb serve --default-ephemeral-storage=0 runs sandboxes without one",
                     image, strerror(-k));
    /* discard: deleted files' blocks are punched out of the sparse image again; noinit_itable:
     * the image reads as zeros where mke2fs wrote nothing, no background zeroing; nobarrier: no
     * cache flush or FUA write goes down to the image, whose filesystem has no journal and does
     * not outlive the sandbox, so there is no ordering to keep. Each flush is an fsync of the
     * image on the host's disk: 7 per sandbox otherwise (the superblock at mount and unmount,
     * the unmount's sync), and a sandbox's fsync calls would flush the host's disk. */
    if (mount(dev, mnt, "ext4", MS_NOSUID | MS_NODEV | MS_NOATIME,
              "discard,noinit_itable,nobarrier") < 0)
        k = failf(ret_error, -errno, "cannot mount %s: %s", image, strerror(errno));
    close(fd); /* the mount holds the device now; on failure autoclear detaches it */
    return k;
}

/* Makes dir (mode, owner) unless it exists; an existing one gets mode and owner too. */
static int own_dir(const char *dir, mode_t mode, uid_t uid, gid_t gid)
{
    if (mkdir(dir, mode) < 0 && errno != EEXIST)
        return -errno;
    _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || fchown(fd, uid, gid) < 0 || fchmod(fd, mode) < 0)
        return -errno;
    return 0;
}

/* base/<name> -> disk/<name>, replacing nothing but a symlink. */
static int link_into_disk(const char *base, const char *name)
{
    _cleanup_free_ char *link = NULL, *target = NULL;
    if (asprintf(&link, "%s/%s", base, name) < 0 || asprintf(&target, "disk/%s", name) < 0)
        return -ENOMEM;
    struct stat st;
    if (lstat(link, &st) == 0) {
        if (!S_ISLNK(st.st_mode))
            return -EEXIST;
        unlink(link);
    }
    return symlink(target, link) < 0 ? -errno : 0;
}

int local_scratch_disk(const char *state_dir, const char *image, const char *mnt, int64_t bytes,
                       int64_t *ret_size, char **ret_error)
{
    _cleanup_free_ char *tpl = NULL, *tmp = NULL, *parent = NULL;
    if (asprintf(&parent, "%s/..", mnt) < 0)
        return -ENOMEM;
    int k;
    if (access(image, F_OK) < 0) {
        if ((k = template_for(state_dir, MAX(bytes, MIN_SIZE), &tpl, ret_error)) < 0)
            return k;
        if (asprintf(&tmp, "%s.tmp", image) < 0)
            return -ENOMEM;
        unlink(tmp);
        if ((k = copy_sparse(tpl, tmp)) < 0 || (rename(tmp, image) < 0 && (k = -errno))) {
            unlink(tmp);
            return failf(ret_error, k, "cannot create %s: %s", image, strerror(-k));
        }
    }
    if (!is_mounted(mnt, parent) && (k = mount_image(image, mnt, ret_error)) < 0)
        return k;
    struct stat st;
    *ret_size = stat(image, &st) == 0 ? (int64_t)st.st_size : 0;
    return 0;
}

static int prepare_disk(const char *state_dir, const char *base, int64_t bytes, uid_t uid,
                        gid_t gid, local_scratch *s, char **ret_error)
{
    _cleanup_free_ char *image = NULL, *mnt = NULL;
    if (asprintf(&image, "%s/disk.img", base) < 0 || asprintf(&mnt, "%s/disk", base) < 0)
        return -ENOMEM;
    int k = local_scratch_disk(state_dir, image, mnt, bytes, &s->size, ret_error);
    if (k < 0)
        return k;
    for (size_t i = 0; i < ELEMENTSOF(scratch_dirs); i++) {
        _cleanup_free_ char *d = NULL;
        if (asprintf(&d, "%s/%s", mnt, scratch_dirs[i].name) < 0)
            return -ENOMEM;
        k = own_dir(d, scratch_dirs[i].mode, scratch_dirs[i].owned ? uid : 0,
                    scratch_dirs[i].owned ? gid : 0);
        if (k == 0 && scratch_dirs[i].owned)
            k = link_into_disk(base, scratch_dirs[i].name);
        if (k < 0)
            return failf(ret_error, k, "cannot prepare %s: %s", d, strerror(-k));
    }
    if (asprintf(&s->workspace, "%s/workspace", mnt) < 0 ||
        asprintf(&s->home, "%s/home", mnt) < 0 || asprintf(&s->tmp, "%s/tmp", mnt) < 0)
        return -ENOMEM;
    return 0;
}

int local_scratch_prepare(const char *state_dir, const char *base, int64_t bytes, uid_t uid,
                          gid_t gid, local_scratch *ret, char **ret_error)
{
    local_scratch s = {0};
    _cleanup_free_ char *image = NULL, *ws = NULL;
    *ret_error = NULL;
    if (asprintf(&image, "%s/disk.img", base) < 0 || asprintf(&ws, "%s/workspace", base) < 0)
        return -ENOMEM;
    int k = mkdir_p(base, 0755);
    if (k < 0)
        return failf(ret_error, k, "cannot create %s: %s", base, strerror(-k));
    struct stat st;
    bool exists = access(image, F_OK) == 0;
    /* A workspace that predates the limit (a plain directory) is kept: no data is moved. */
    bool legacy = !exists && lstat(ws, &st) == 0 && S_ISDIR(st.st_mode);
    if (exists || (bytes > 0 && !legacy)) {
        k = prepare_disk(state_dir, base, bytes, uid, gid, &s, ret_error);
        if (k < 0) {
            local_scratch_done(&s);
            if (!exists)
                local_scratch_release(base);
            return k;
        }
        *ret = s;
        return 0;
    }
    const char *owned[] = {"workspace", "home"};
    char **out[] = {&s.workspace, &s.home};
    for (size_t i = 0; i < ELEMENTSOF(owned); i++) {
        if (asprintf(out[i], "%s/%s", base, owned[i]) < 0) {
            local_scratch_done(&s);
            return -ENOMEM;
        }
        k = own_dir(*out[i], 0755, uid, gid);
        if (k < 0) {
            failf(ret_error, k, "cannot create %s: %s", *out[i], strerror(-k));
            local_scratch_done(&s);
            return k;
        }
    }
    *ret = s;
    return 0;
}

int local_scratch_main_dir(const char *base, const local_scratch *s, uid_t uid, gid_t gid,
                           char **ret_path)
{
    _cleanup_free_ char *link = NULL, *dir = NULL;
    if (asprintf(&link, "%s/main", base) < 0 ||
        asprintf(&dir, s->size > 0 ? "%s/disk/main" : "%s/main", base) < 0)
        return -ENOMEM;
    int k = own_dir(dir, 0755, uid, gid);
    if (k < 0)
        return k;
    if (s->size > 0) {
        struct stat st;
        if (lstat(link, &st) == 0 && S_ISDIR(st.st_mode)) {
            /* An older version's host directory: its log and exit only. */
            static const char *const old[] = {"log", "exit", ".exit.tmp"};
            for (size_t i = 0; i < ELEMENTSOF(old); i++) {
                _cleanup_free_ char *f = NULL;
                if (asprintf(&f, "%s/%s", link, old[i]) < 0)
                    return -ENOMEM;
                (void)unlink(f);
            }
            if (rmdir(link) < 0)
                return -errno;
        }
        if ((k = link_into_disk(base, "main")) < 0)
            return k;
    }
    *ret_path = TAKE_PTR(dir);
    return 0;
}

void local_scratch_done(local_scratch *s)
{
    free(s->workspace);
    free(s->home);
    free(s->tmp);
    *s = (local_scratch){0};
}

int local_scratch_release(const char *base)
{
    _cleanup_free_ char *image = NULL, *mnt = NULL;
    if (asprintf(&image, "%s/disk.img", base) < 0 || asprintf(&mnt, "%s/disk", base) < 0)
        return -ENOMEM;
    return local_scratch_disk_release(image, mnt);
}

int local_scratch_disk_release(const char *image, const char *mnt)
{
    _cleanup_free_ char *parent = NULL;
    if (asprintf(&parent, "%s/..", mnt) < 0)
        return -ENOMEM;
    int r = 0;
    /* Every mount stacked there (a crash between two mounts could leave two). */
    for (int i = 0; i < 8 && is_mounted(mnt, parent); i++) {
        if (umount2(mnt, UMOUNT_NOFOLLOW) == 0)
            continue;
        if (errno == EBUSY && umount2(mnt, UMOUNT_NOFOLLOW | MNT_DETACH) == 0)
            continue; /* a process still inside: detached now, freed when it goes */
        r = -errno;
        break;
    }
    if (r == 0 && unlink(image) < 0 && errno != ENOENT)
        r = -errno;
    if (r == 0)
        rmdir(mnt);
    return r;
}
