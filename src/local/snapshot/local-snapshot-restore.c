/* Restore of a manifest's tree into a directory (local-snapshot-tree.h). Every path is reached
 * one component at a time with O_NOFOLLOW from the destination's fd, so a manifest cannot make
 * us write outside it, whatever symlinks it creates first. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "basic/base64.h"
#include "basic/buf.h"
#include "basic/macro.h"
#include "local/snapshot/local-snapshot-manifest.h"
#include "local/snapshot/local-snapshot-tree.h"

typedef struct restore {
    snap_store *store;
    int root_fd;
    uint32_t id_base;
    char **ret_error;
    /* The parent directory last walked to, kept for its siblings. */
    char *parent;
    int parent_fd;
} restore;

static int failed(restore *r, int k, const char *path, const char *what)
{
    if (r->ret_error && !*r->ret_error)
        *r->ret_error = strdup_printf("cannot %s %s: %s", what, *path ? path : "/", strerror(-k));
    return k;
}

/* The directory holding path (its parent), as an fd owned by r; *ret_name points into path. */
static int parent_of(restore *r, const char *path, int *ret_fd, const char **ret_name)
{
    const char *slash = strrchr(path, '/');
    size_t plen = slash ? (size_t)(slash - path) : 0;
    *ret_name = slash ? slash + 1 : path;
    if (r->parent && strlen(r->parent) == plen && strncmp(r->parent, path, plen) == 0) {
        *ret_fd = r->parent_fd;
        return 0;
    }
    _cleanup_free_ char *dir = strndup(path, plen);
    if (!dir)
        return -ENOMEM;
    _cleanup_close_ int fd = dup(r->root_fd);
    if (fd < 0)
        return -errno;
    for (char *c = dir, *next; *c; c = next) {
        next = strchr(c, '/');
        if (next)
            *next++ = 0;
        else
            next = c + strlen(c);
        int nfd = openat(fd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (nfd < 0)
            return -errno;
        close(fd);
        fd = nfd;
    }
    if (r->parent_fd >= 0)
        close(r->parent_fd);
    free(r->parent);
    r->parent = strndup(path, plen);
    if (!r->parent)
        return -ENOMEM;
    r->parent_fd = TAKE_FD(fd);
    *ret_fd = r->parent_fd;
    return 0;
}

static int set_xattrs(int dir_fd, const char *name, const json_t *x)
{
    const char *k;
    const json_t *v;
    _cleanup_free_ char *p = strdup_printf("/proc/self/fd/%d/%s", dir_fd, *name ? name : ".");
    if (!p)
        return -ENOMEM;
    json_object_foreach ((json_t *)x, k, v) {
        _cleanup_free_ char *raw = NULL;
        size_t n;
        if (base64_decode(json_string_value(v), json_string_length(v), &raw, &n) < 0)
            return -EBADMSG;
        if (lsetxattr(p, k, raw, n, 0) < 0 && errno != ENOTSUP)
            return -errno; /* ENOTSUP: the destination's filesystem keeps none */
    }
    return 0;
}

static struct timespec time_of(const json_t *t)
{
    return (struct timespec){.tv_sec = json_integer_value(json_array_get(t, 0)),
                             .tv_nsec = (long)json_integer_value(json_array_get(t, 1))};
}

/* Owner, mode, xattrs and (except for directories, whose times their contents would change)
 * times of the entry at name under dir_fd ("" the directory itself). */
static int set_meta(restore *r, int dir_fd, const char *name, const json_t *e, bool is_link,
                    bool times)
{
    const char *n = *name ? name : ".";
    uid_t u = (uid_t)(r->id_base + (uint32_t)json_integer_value(json_object_get(e, "uid")));
    gid_t g = (gid_t)(r->id_base + (uint32_t)json_integer_value(json_object_get(e, "gid")));
    if (fchownat(dir_fd, n, u, g, AT_SYMLINK_NOFOLLOW) < 0)
        return -errno;
    /* After chown, which clears setuid/setgid. Symlinks have no mode of their own. */
    if (!is_link &&
        fchmodat(dir_fd, n, (mode_t)json_integer_value(json_object_get(e, "mode")), 0) < 0)
        return -errno;
    const json_t *x = json_object_get(e, "xattrs");
    int k = x ? set_xattrs(dir_fd, *name ? name : "", x) : 0;
    if (k < 0)
        return k;
    if (times) {
        struct timespec ts[2] = {time_of(json_object_get(e, "atime")),
                                 time_of(json_object_get(e, "mtime"))};
        if (utimensat(dir_fd, n, ts, AT_SYMLINK_NOFOLLOW) < 0)
            return -errno;
    }
    return 0;
}

static int make_file(restore *r, int dir_fd, const char *name, const json_t *e)
{
    _cleanup_close_ int fd =
        openat(dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    uint64_t size = (uint64_t)json_integer_value(json_object_get(e, "size"));
    if (ftruncate(fd, (off_t)size) < 0)
        return -errno;
    const char *obj = json_string_value(json_object_get(e, "object"));
    if (!obj)
        return 0;
    _cleanup_free_ uint64_t *ext = NULL;
    size_t n = 0;
    int k = snap_manifest_extents(e, &ext, &n);
    if (k < 0)
        return k;
    uint64_t data = size;
    if (ext) {
        data = 0;
        for (size_t i = 0; i < n; i++)
            data += ext[2 * i + 1];
    }
    return snap_store_get(r->store, obj, fd, ext, n, data);
}

static int restore_entry(restore *r, const json_t *e)
{
    const char *path = json_string_value(json_object_get(e, "path")),
               *type = json_string_value(json_object_get(e, "type")), *name;
    int dir_fd, k;
    if (!*path)
        return set_meta(r, r->root_fd, "", e, false, false);
    if ((k = parent_of(r, path, &dir_fd, &name)) < 0)
        return failed(r, k, path, "reach the directory of");
    if (strcmp(type, "hardlink") == 0) {
        const char *target = json_string_value(json_object_get(e, "link")), *tname;
        int tfd;
        /* The target's directory may differ from ours: walk to it, then back. */
        _cleanup_close_ int keep = dup(dir_fd);
        if (keep < 0)
            return -errno;
        _cleanup_free_ char *mine = strdup(name);
        if (!mine || (k = parent_of(r, target, &tfd, &tname)) < 0)
            return failed(r, k < 0 ? k : -ENOMEM, target, "reach");
        if (linkat(tfd, tname, keep, mine, 0) < 0)
            return failed(r, -errno, path, "link");
        return 0;
    }
    if (strcmp(type, "dir") == 0)
        k = mkdirat(dir_fd, name, 0700) < 0 ? -errno : 0;
    else if (strcmp(type, "symlink") == 0)
        k = symlinkat(json_string_value(json_object_get(e, "target")), dir_fd, name) < 0 ? -errno
                                                                                         : 0;
    else if (strcmp(type, "fifo") == 0)
        k = mkfifoat(dir_fd, name, 0600) < 0 ? -errno : 0;
    else
        k = make_file(r, dir_fd, name, e);
    if (k < 0)
        return failed(r, k, path, "create");
    k = set_meta(r, dir_fd, name, e, strcmp(type, "symlink") == 0, strcmp(type, "dir") != 0);
    return k < 0 ? failed(r, k, path, "set the owner, mode, xattrs or times of") : 0;
}

/* Directory times last, deepest first: creating their contents changed them. */
static int restore_dir_times(restore *r, const json_t *entries)
{
    for (size_t i = json_array_size(entries); i-- > 0;) {
        const json_t *e = json_array_get(entries, i);
        if (strcmp(json_string_value(json_object_get(e, "type")), "dir") != 0)
            continue;
        const char *path = json_string_value(json_object_get(e, "path")), *name = ".";
        int dir_fd = r->root_fd, k;
        if (*path && (k = parent_of(r, path, &dir_fd, &name)) < 0)
            return failed(r, k, path, "reach the directory of");
        struct timespec ts[2] = {time_of(json_object_get(e, "atime")),
                                 time_of(json_object_get(e, "mtime"))};
        if (utimensat(dir_fd, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
            return failed(r, -errno, path, "set the times of");
    }
    return 0;
}

int snap_restore(snap_store *s, const json_t *manifest, const char *name, const char *dest,
                 uint32_t id_base, char **ret_error)
{
    const json_t *root = NULL, *x;
    size_t i;
    json_array_foreach (json_object_get(manifest, "roots"), i, x)
        if (strcmp(json_string_value(json_object_get(x, "name")), name) == 0)
            root = x;
    if (!root)
        return -ENOENT;
    restore r = {.store = s, .id_base = id_base, .ret_error = ret_error, .parent_fd = -1};
    r.root_fd = open(dest, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (r.root_fd < 0)
        return failed(&r, -errno, dest, "open");
    const json_t *entries = json_object_get(root, "entries"), *e;
    int k = 0;
    json_array_foreach (entries, i, e)
        if (k == 0)
            k = restore_entry(&r, e);
    if (k == 0)
        k = restore_dir_times(&r, entries);
    if (r.parent_fd >= 0)
        close(r.parent_fd);
    free(r.parent);
    close(r.root_fd);
    return k;
}
