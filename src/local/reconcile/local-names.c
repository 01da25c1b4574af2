/* See local-names.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api.h"
#include "basic/macro.h"
#include "basic/state-files.h"
#include "local/reconcile/local-names.h"

static bool valid(const char *ns, const char *name, const char *uid)
{
    const char *why;
    return ns && name && api_is_dns1123_label(ns, &why) && api_is_dns1123_subdomain(name, &why) &&
           (!uid || (*uid && !strchr(uid, '/') && strcmp(uid, ".") != 0 &&
                     strcmp(uid, "..") != 0));
}

/* The link exists and holds exactly target. */
static bool points_at(const char *link, const char *target)
{
    char now[PATH_MAX];
    ssize_t n = readlink(link, now, sizeof(now) - 1);
    if (n < 0)
        return false;
    now[n] = '\0';
    return strcmp(now, target) == 0;
}

int local_names_bind(const char *state_dir, const char *ns, const char *name, const char *uid)
{
    if (!valid(ns, name, uid))
        return -EINVAL;
    _cleanup_free_ char *dir = NULL, *link = NULL, *target = NULL, *tmp = NULL;
    if (asprintf(&dir, "%s/" SANDBOX_NAMES_DIR "/%s", state_dir, ns) < 0 ||
        asprintf(&link, "%s/%s", dir, name) < 0 ||
        asprintf(&target, SANDBOX_NAMES_TARGET "%s", uid) < 0 ||
        asprintf(&tmp, "%s/.%s.new", dir, name) < 0) {
        dir = link = target = tmp = NULL; /* asprintf leaves them undefined */
        return -ENOMEM;
    }
    if (points_at(link, target))
        return 0; /* the usual case: every status write of a Ready sandbox comes here */
    _cleanup_free_ char *top = NULL;
    if (asprintf(&top, "%s/" SANDBOX_NAMES_DIR, state_dir) < 0) {
        top = NULL;
        return -ENOMEM;
    }
    if ((mkdir(top, 0700) < 0 && errno != EEXIST) || (mkdir(dir, 0700) < 0 && errno != EEXIST))
        return -errno;
    (void)unlink(tmp);
    if (symlink(target, tmp) < 0)
        return -errno;
    if (rename(tmp, link) < 0) {
        int k = -errno;
        (void)unlink(tmp);
        return k;
    }
    return 0;
}

void local_names_unbind(const char *state_dir, const char *ns, const char *name, const char *uid)
{
    if (!valid(ns, name, uid))
        return;
    _cleanup_free_ char *link = NULL, *target = NULL;
    if (asprintf(&link, "%s/" SANDBOX_NAMES_DIR "/%s/%s", state_dir, ns, name) < 0 ||
        asprintf(&target, SANDBOX_NAMES_TARGET "%s", uid) < 0) {
        link = target = NULL;
        return;
    }
    if (points_at(link, target))
        (void)unlink(link);
}

/* Dangling links of one namespace directory (dfd), and leftovers of an interrupted bind. Returns
 * how many entries are left. */
static size_t prune_namespace(int dfd)
{
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return 1;
    }
    size_t left = 0;
    struct dirent *de;
    struct stat st;
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        /* fstatat follows the link: ENOENT is a link whose run/<uid> is gone. */
        if (de->d_name[0] == '.' || fstatat(dirfd(d), de->d_name, &st, 0) < 0)
            (void)unlinkat(dirfd(d), de->d_name, 0);
        else
            left++;
    }
    closedir(d);
    return left;
}

void local_names_prune(const char *state_dir)
{
    _cleanup_free_ char *top = NULL;
    if (asprintf(&top, "%s/" SANDBOX_NAMES_DIR, state_dir) < 0)
        return;
    _cleanup_closedir_ DIR *d = opendir(top);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0 && prune_namespace(fd) == 0)
            (void)unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR);
    }
}
