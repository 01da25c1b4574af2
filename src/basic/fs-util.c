/* Directory helpers (fs-util.h). */
#include "basic/fs-util.h"

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/macro.h"

int mkdir_parents(const char *path)
{
    _cleanup_free_ char *p = strdup(path);
    if (!p)
        return -ENOMEM;
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, 0755) < 0 && errno != EEXIST)
            return -errno;
        *s = '/';
    }
    return 0;
}

int mkdir_p(const char *path, mode_t mode)
{
    int r = mkdir_parents(path);
    if (r < 0)
        return r;
    if (mkdir(path, mode) < 0)
        return errno == EEXIST ? 0 : -errno;
    return chmod(path, mode) < 0 ? -errno : 0;
}

int self_exe_dir(char **ret)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n < 0)
        return -errno;
    if ((size_t)n == sizeof(self) - 1)
        return -ENAMETOOLONG; /* possibly truncated */
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (!slash)
        return -EINVAL;
    *slash = '\0';
    char *dir = strdup(self); /* "" for an executable at /: callers append "/name" */
    if (!dir)
        return -ENOMEM;
    *ret = dir;
    return 0;
}

/* nftw callback: a negative errno stops the walk and is what nftw returns. */
static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    int r = flag == FTW_DP ? rmdir(path) : unlink(path);
    return r < 0 && errno != ENOENT ? -errno : 0;
}

int fs_rm_rf(const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return errno == ENOENT ? 0 : -errno;
    if (!S_ISDIR(st.st_mode))
        return unlink(path) < 0 ? -errno : 0;
    int r = nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
    if (r == -1 && errno != 0) /* nftw's own failure, or rm_one's -EPERM: errno says which */
        return -errno;
    return r < 0 ? r : 0;
}
