/* Shared, read-only parts of local bundles. See local-bundle-shared.h. */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/fs-util.h"
#include "basic/hash.h"
#include "basic/macro.h"
#include "local/container/local-bundle-shared.h"
#include "local/fs/local-fs.h"

/* A temporary name in shared_dir, unique in this process and across processes. */
static char *tmp_name(const char *shared_dir, const char *name)
{
    static atomic_uint counter;
    char *p = NULL;
    if (asprintf(&p, "%s/.tmp-%s-%ld-%u", shared_dir, name, (long)getpid(),
                 atomic_fetch_add(&counter, 1)) < 0)
        return NULL;
    return p;
}

int local_shared_dir(const char *shared_dir, const char *name, local_shared_fill_fn fill,
                     void *payload, char **ret_path)
{
    *ret_path = NULL;
    _cleanup_free_ char *path = NULL, *tmp = NULL;
    if (asprintf(&path, "%s/%s", shared_dir, name) < 0)
        return -ENOMEM;
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        *ret_path = TAKE_PTR(path);
        return 0;
    }
    int r = mkdir_p(shared_dir, 0755);
    if (r < 0)
        return r;
    if (!(tmp = tmp_name(shared_dir, name)))
        return -ENOMEM;
    if (mkdir(tmp, 0755) < 0)
        return -errno;
    r = chmod(tmp, 0755) < 0 ? -errno : 0; /* umask notwithstanding */
    if (r == 0)
        r = fill(tmp, payload);
    if (r == 0 && rename(tmp, path) < 0)
        r = -errno;
    if (r < 0) {
        fs_rm_rf(tmp);
        /* Another start made it first (ENOTEMPTY/EEXIST from rename): use theirs. */
        if (!(lstat(path, &st) == 0 && S_ISDIR(st.st_mode)))
            return r;
    }
    *ret_path = TAKE_PTR(path);
    return 0;
}

/* Whether the regular file at path holds exactly content (n bytes). */
static bool holds(const char *path, const char *content, size_t n)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size != n)
        return false;
    _cleanup_free_ char *buf = malloc(n + 1);
    if (!buf)
        return false;
    size_t off = 0;
    while (off < n) {
        ssize_t k = read(fd, buf + off, n - off);
        if (k <= 0)
            return false;
        off += (size_t)k;
    }
    return memcmp(buf, content, n) == 0;
}

/* Replaces dst with a hard link of shared (which exists). */
static int link_over(const char *shared, const char *dst)
{
    if (unlink(dst) < 0 && errno != ENOENT)
        return -errno;
    return link(shared, dst) < 0 ? -errno : 0;
}

/* Makes <shared_dir>/<name> with make(tmp) when missing. */
static int shared_file(const char *shared_dir, const char *name, const char *path,
                       int (*make)(const char *tmp, const void *arg), const void *arg)
{
    struct stat st;
    if (lstat(path, &st) == 0)
        return S_ISREG(st.st_mode) ? 0 : -EEXIST;
    int r = mkdir_p(shared_dir, 0755);
    if (r < 0)
        return r;
    _cleanup_free_ char *tmp = tmp_name(shared_dir, name);
    if (!tmp)
        return -ENOMEM;
    r = make(tmp, arg);
    /* rename replaces a concurrent maker's identical file: either one is fine. */
    if (r == 0 && rename(tmp, path) < 0)
        r = -errno;
    if (r < 0)
        unlink(tmp);
    return r;
}

static int make_content(const char *tmp, const void *arg)
{
    return fs_write_file(tmp, arg, 0644);
}

static int make_copy(const char *tmp, const void *arg)
{
    return fs_copy_file(arg, tmp, 0644);
}

int local_shared_link_content(const char *shared_dir, const char *content, const char *dst)
{
    char name[32];
    snprintf(name, sizeof(name), "etc-%016" PRIx64, fnv1a64_str(content));
    _cleanup_free_ char *path = NULL;
    if (asprintf(&path, "%s/%s", shared_dir, name) < 0)
        return -ENOMEM;
    if (shared_file(shared_dir, name, path, make_content, content) == 0 &&
        holds(path, content, strlen(content)) && link_over(path, dst) == 0)
        return 0;
    /* A file of its own, never written through an earlier link. */
    if (unlink(dst) < 0 && errno != ENOENT)
        return -errno;
    return fs_write_file(dst, content, 0644);
}

int local_shared_link_copy(const char *shared_dir, const char *src, const char *dst)
{
    struct stat st;
    if (stat(src, &st) < 0)
        return -errno;
    if (!S_ISREG(st.st_mode))
        return -EINVAL;
    char key[128];
    snprintf(key, sizeof(key), "%ju:%ju:%jd:%jd.%09ld", (uintmax_t)st.st_dev, (uintmax_t)st.st_ino,
             (intmax_t)st.st_size, (intmax_t)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
    char name[32];
    snprintf(name, sizeof(name), "copy-%016" PRIx64, fnv1a64_str(key));
    _cleanup_free_ char *path = NULL;
    if (asprintf(&path, "%s/%s", shared_dir, name) < 0)
        return -ENOMEM;
    struct stat sst;
    if (shared_file(shared_dir, name, path, make_copy, src) == 0 && stat(path, &sst) == 0 &&
        sst.st_size == st.st_size && link_over(path, dst) == 0)
        return 0;
    if (unlink(dst) < 0 && errno != ENOENT)
        return -errno;
    return fs_copy_file(src, dst, 0644);
}

/* Whether the directory name under dir_fd has no entries. */
static bool empty_dir(int dir_fd, const char *name)
{
    int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return false;
    }
    bool empty = true;
    for (struct dirent *de; empty && (de = readdir(d));)
        empty = strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0;
    closedir(d);
    return empty;
}

/* Whether every entry of the directory dir_fd is one of names[] (NULL-terminated), the one
 * named empty (when not NULL) an empty directory. */
static bool only(int dir_fd, const char *const *names, const char *empty)
{
    int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return false;
    }
    bool ok = true;
    struct dirent *de;
    while (ok && (de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        bool known = false;
        for (size_t i = 0; names[i] && !known; i++)
            known = strcmp(de->d_name, names[i]) == 0;
        if (known && empty && strcmp(de->d_name, empty) == 0)
            known = empty_dir(dir_fd, empty);
        ok = known;
    }
    closedir(d);
    return ok;
}

int local_shared_bundle_recycle(const char *shared_dir, const char *bundle_dir)
{
    static const char *const top[] = {"config.json", "etc", "pid", NULL};
    static const char *const etc[] = {"passwd",      "group",        "hosts",
                                      "hostname",    "resolv.conf",  "nsswitch.conf",
                                      "ld.so.cache", "alternatives", NULL};
    _cleanup_close_ int bfd = open(bundle_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (bfd < 0)
        return -errno;
    _cleanup_close_ int efd = openat(bfd, "etc", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    _cleanup_free_ char *spares = NULL, *dst = NULL;
    /* alternatives/ is a mount point: only ever empty on the host, made again to be sure. */
    if (efd < 0 || !only(bfd, top, NULL) || !only(efd, etc, "alternatives"))
        return -ENOTEMPTY;
    if (asprintf(&spares, "%s/spare", shared_dir) < 0)
        return -ENOMEM;
    int r = mkdir_p(spares, 0700);
    if (r < 0)
        return r;
    DIR *d = opendir(spares);
    size_t n = 0;
    for (struct dirent *de; d && (de = readdir(d));)
        n += de->d_name[0] != '.';
    if (d)
        closedir(d);
    if (n >= LOCAL_SHARED_SPARES)
        return -ENOSPC;
    if (unlinkat(bfd, "pid", 0) < 0 && errno != ENOENT)
        return -errno;
    static atomic_uint counter;
    if (asprintf(&dst, "%s/b-%ld-%u", spares, (long)getpid(), atomic_fetch_add(&counter, 1)) < 0)
        return -ENOMEM;
    return rename(bundle_dir, dst) < 0 ? -errno : 0;
}

int local_shared_bundle_take(const char *shared_dir, const char *bundle_dir)
{
    _cleanup_free_ char *spares = NULL;
    if (asprintf(&spares, "%s/spare", shared_dir) < 0)
        return -ENOMEM;
    DIR *d = opendir(spares);
    if (!d)
        return -ENOENT;
    int r = -ENOENT;
    for (struct dirent *de; r == -ENOENT && (de = readdir(d));) {
        _cleanup_free_ char *src = NULL;
        if (de->d_name[0] == '.' && (!de->d_name[1] || strcmp(de->d_name, "..") == 0))
            continue;
        if (asprintf(&src, "%s/%s", spares, de->d_name) < 0)
            r = -ENOMEM;
        else if (rename(src, bundle_dir) == 0)
            r = 0;
        else if (errno != ENOENT) /* ENOENT: another start took it first */
            r = -errno;
    }
    closedir(d);
    return r;
}
