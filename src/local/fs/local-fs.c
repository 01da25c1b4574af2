/* Filesystem helpers of the local runtime. See local-fs.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/fs-util.h"
#include "basic/io-util.h"
#include "basic/macro.h"
#include "local/fs/local-fs.h"

int fs_write_file(const char *path, const char *content, mode_t mode)
{
    _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0)
        return -errno;
    int r = loop_write(fd, content, strlen(content));
    if (r < 0)
        return r;
    return fchmod(fd, mode) < 0 ? -errno : 0;
}

int fs_copy_file(const char *src, const char *dst, mode_t mode)
{
    _cleanup_free_ char *tmp = NULL;
    if (asprintf(&tmp, "%s.tmp", dst) < 0)
        return -ENOMEM;
    _cleanup_close_ int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return -errno;
    struct stat st;
    if (fstat(in, &st) < 0)
        return -errno;
    if (!S_ISREG(st.st_mode))
        return -EINVAL;
    unlink(tmp);
    _cleanup_close_ int out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (out < 0)
        return -errno;
    off_t left = st.st_size;
    while (left > 0) {
        ssize_t n = sendfile(out, in, NULL, (size_t)MIN(left, (off_t)(1 << 30)));
        if (n <= 0) {
            int r = n < 0 ? -errno : -EIO;
            unlink(tmp);
            return r;
        }
        left -= n;
    }
    if (fchmod(out, mode) < 0 || rename(tmp, dst) < 0) {
        int r = -errno;
        unlink(tmp);
        return r;
    }
    return 0;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (flag == FTW_DP)
        return rmdir(path) < 0 && errno != ENOENT ? -1 : 0;
    return unlink(path) < 0 && errno != ENOENT ? -1 : 0;
}

int fs_each_entry(const char *dir, int (*fn)(const char *path, void *payload), void *payload)
{
    _cleanup_closedir_ DIR *d = opendir(dir);
    if (!d)
        return -errno;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        _cleanup_free_ char *p = NULL;
        if (asprintf(&p, "%s/%s", dir, e->d_name) < 0)
            return -ENOMEM;
        int r = fn(p, payload);
        if (r != 0)
            return r;
    }
    return 0;
}

int fs_rm_rf(const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return errno == ENOENT ? 0 : -errno;
    if (!S_ISDIR(st.st_mode))
        return unlink(path) < 0 ? -errno : 0;
    if (nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) < 0)
        return errno ? -errno : -EIO;
    return 0;
}
