/* Shared, read-only parts of local bundles. See local-bundle-shared.h. */
#include <errno.h>
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
#include "local/local-bundle-shared.h"
#include "local/local-fs.h"

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
