/* Capture of directory trees into a manifest and store objects (local-snapshot-tree.h). */
#include <dirent.h>
#include <stdbool.h>
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

#define OVERFLOW_ID 65534

typedef struct capture {
    snap_store *store;
    const snap_capture_options *o;
    snap_stats *stats;
    json_t *entries; /* of the root being captured */
    json_t *inodes;  /* "dev:ino" -> first path, for hard links */
    json_t *hint;    /* path -> entry of the hint's root of the same name (borrowed) */
    dev_t dev;       /* the root's filesystem */
    uint64_t mnt_id; /* and its mount (overlayfs reports its layers' st_dev for files) */
    char **ret_error;
} capture;

static int failed(capture *c, int k, const char *path, const char *what)
{
    if (c->ret_error && !*c->ret_error)
        *c->ret_error = strdup_printf("%s %s: %s", what, *path ? path : "/", strerror(-k));
    return k;
}

static json_int_t map_id(const capture *c, uint32_t id)
{
    if (c->o->id_count == 0)
        return id;
    if (id >= c->o->id_base && id - c->o->id_base < c->o->id_count)
        return id - c->o->id_base;
    return OVERFLOW_ID;
}

static json_t *time_json(const struct timespec *t)
{
    return json_pack("[I,i]", (json_int_t)t->tv_sec, (int)t->tv_nsec);
}

/* name under the directory fd, as a path the l*xattr calls take without following it. */
static char *proc_path(int dir_fd, const char *name)
{
    return strdup_printf("/proc/self/fd/%d/%s", dir_fd, name);
}

static int capture_xattrs(int dir_fd, const char *name, json_t *e)
{
    _cleanup_free_ char *p = proc_path(dir_fd, name), *list = NULL;
    if (!p)
        return -ENOMEM;
    ssize_t n = llistxattr(p, NULL, 0);
    if (n <= 0)
        return n < 0 && errno != ENOTSUP && errno != ENODATA ? -errno : 0;
    if (!(list = malloc((size_t)n)) || (n = llistxattr(p, list, (size_t)n)) < 0)
        return list ? -errno : -ENOMEM;
    json_t *x = json_object();
    if (!x || json_object_set_new(e, "xattrs", x) < 0)
        return -ENOMEM;
    for (char *k = list; k < list + n; k += strlen(k) + 1) {
        ssize_t vn = lgetxattr(p, k, NULL, 0);
        if (vn < 0)
            continue; /* gone meanwhile */
        _cleanup_free_ char *v = malloc((size_t)vn + 1), *b64 = NULL;
        if (!v)
            return -ENOMEM;
        if ((vn = lgetxattr(p, k, v, (size_t)vn)) < 0)
            continue;
        size_t bl;
        if (base64_encode(v, (size_t)vn, &b64, &bl) < 0 ||
            json_object_set_new(x, k, json_string(b64)) < 0)
            return -ENOMEM;
    }
    return 0;
}

/* The data extents of fd (SEEK_DATA/SEEK_HOLE) as flat pairs; *ret NULL when the file is one
 * extent [0, size) (the common, non-sparse case). */
static int data_extents(int fd, uint64_t size, uint64_t **ret, size_t *ret_n, uint64_t *ret_data)
{
    _cleanup_free_ uint64_t *v = NULL;
    size_t n = 0, cap = 0;
    uint64_t data = 0;
    off_t pos = 0;
    while ((uint64_t)pos < size) {
        off_t d = lseek(fd, pos, SEEK_DATA);
        if (d < 0 && errno == ENXIO)
            break; /* only a hole is left */
        if (d < 0)
            return -errno;
        off_t h = lseek(fd, d, SEEK_HOLE);
        if (h < 0)
            return -errno;
        if ((uint64_t)h > size)
            h = (off_t)size;
        if (h <= d)
            break;
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            uint64_t *nv = reallocarray(v, cap, 2 * sizeof(uint64_t));
            if (!nv)
                return -ENOMEM;
            v = nv;
        }
        v[2 * n] = (uint64_t)d;
        v[2 * n + 1] = (uint64_t)(h - d);
        data += (uint64_t)(h - d);
        n++;
        pos = h;
    }
    *ret_data = data;
    if (n == 1 && v[0] == 0 && v[1] == size) {
        *ret = NULL;
        *ret_n = 0;
    } else {
        *ret = TAKE_PTR(v);
        *ret_n = n;
    }
    return 0;
}

static int extents_json(json_t *e, const uint64_t *v, size_t n)
{
    json_t *a = json_array();
    if (!a || json_object_set_new(e, "extents", a) < 0)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        if (json_array_append_new(
                a, json_pack("[I,I]", (json_int_t)v[2 * i], (json_int_t)v[2 * i + 1])) < 0)
            return -ENOMEM;
    return 0;
}

static bool same_inode(const json_t *h, const struct stat *st)
{
    const json_t *ct = json_object_get(h, "ctime");
    return json_integer_value(json_object_get(h, "ino")) == (json_int_t)st->st_ino &&
           json_integer_value(json_array_get(ct, 0)) == (json_int_t)st->st_ctim.tv_sec &&
           json_integer_value(json_array_get(ct, 1)) == (json_int_t)st->st_ctim.tv_nsec;
}

/* The hint's entry for path when the inode is unchanged; borrowed. */
static const json_t *unchanged(capture *c, const char *path, const struct stat *st)
{
    const json_t *h = json_object_get(c->hint, path);
    const json_t *ct = json_object_get(h, "ctime"), *mt = json_object_get(h, "mtime");
    if (!h || !json_is_string(json_object_get(h, "type")) ||
        strcmp(json_string_value(json_object_get(h, "type")), "file") != 0 ||
        json_integer_value(json_object_get(h, "ino")) != (json_int_t)st->st_ino ||
        json_integer_value(json_object_get(h, "size")) != (json_int_t)st->st_size ||
        json_integer_value(json_array_get(ct, 0)) != (json_int_t)st->st_ctim.tv_sec ||
        json_integer_value(json_array_get(ct, 1)) != (json_int_t)st->st_ctim.tv_nsec ||
        json_integer_value(json_array_get(mt, 0)) != (json_int_t)st->st_mtim.tv_sec ||
        json_integer_value(json_array_get(mt, 1)) != (json_int_t)st->st_mtim.tv_nsec ||
        json_is_true(json_object_get(h, "unread")))
        return NULL;
    return h;
}

/* name under dir_fd opened for reading, when it is still the regular file st describes: *ret_fd
 * (owned). The sandbox can change its tree between the fstatat and the open: swap the file for a
 * FIFO (whose open waits for a writer), or hold a write lease on it (whose open waits for the
 * lease break, 45 s by default). O_NONBLOCK makes both return at once (a FIFO opens, a lease
 * gives EWOULDBLOCK); the fd's own type and inode decide. -ESTALE when it is another inode. */
static int open_regular(int dir_fd, const char *name, const struct stat *st, int *ret_fd)
{
    /* O_NOATIME: reading must not change what the next capture compares (we are root). */
    _cleanup_close_ int fd = openat(dir_fd, name,
                                    O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NOATIME |
                                        O_NONBLOCK);
    struct stat now;
    if (fd < 0 || fstat(fd, &now) < 0)
        return -errno;
    if (!S_ISREG(now.st_mode) || now.st_dev != st->st_dev || now.st_ino != st->st_ino)
        return -ESTALE;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
        return -errno;
    *ret_fd = TAKE_FD(fd);
    return 0;
}

/* What a live pass skips (recorded "unread", read again by the frozen pass): the entry changed
 * under us or is held by a lease. */
static bool changed_meanwhile(int k)
{
    return k == -ESTALE || k == -ENOENT || k == -ELOOP || k == -EWOULDBLOCK || k == -ENXIO;
}

static int capture_file(capture *c, int dir_fd, const char *name, const char *path,
                        const struct stat *st, json_t *e)
{
    if (json_object_set_new(e, "size", json_integer((json_int_t)st->st_size)) < 0)
        return -ENOMEM;
    const json_t *h = unchanged(c, path, st);
    if (h) {
        const json_t *obj = json_object_get(h, "object"), *ext = json_object_get(h, "extents");
        if ((obj && json_object_set(e, "object", (json_t *)obj) < 0) ||
            (ext && json_object_set_new(e, "extents", json_deep_copy(ext)) < 0))
            return -ENOMEM;
        uint64_t data = (uint64_t)st->st_size;
        if (ext) {
            size_t i;
            const json_t *x;
            data = 0;
            json_array_foreach (ext, i, x)
                data += (uint64_t)json_integer_value(json_array_get(x, 1));
        }
        c->stats->bytes += data;
        return 0;
    }
    _cleanup_close_ int fd = -1;
    int k = open_regular(dir_fd, name, st, &fd);
    if (k < 0 && c->o->tolerant && changed_meanwhile(k))
        return json_object_set_new(e, "unread", json_true()) < 0 ? -ENOMEM : 0;
    if (k < 0)
        return failed(c, k == -ESTALE ? -EAGAIN : k, path, "cannot open");
    _cleanup_free_ uint64_t *ext = NULL;
    size_t n = 0;
    uint64_t data = 0, stored = 0;
    k = data_extents(fd, (uint64_t)st->st_size, &ext, &n, &data);
    if (k < 0)
        return failed(c, k, path, "cannot map");
    if (ext && (k = extents_json(e, ext, n)) < 0)
        return k;
    if (data == 0) {
        json_object_del(e, "extents");
        if (st->st_size > 0 && (k = extents_json(e, NULL, 0)) < 0)
            return k; /* all hole: no extents at all */
        return 0;
    }
    char hex[SNAP_HASH_HEX + 1];
    k = snap_store_put(c->store, fd, ext, n, data, hex, &stored);
    if (k == -EIO && c->o->tolerant) /* changed while read: the frozen pass reads it */
        return json_object_set_new(e, "unread", json_true()) < 0 ? -ENOMEM : 0;
    if (k < 0)
        return failed(c, k, path, "cannot store");
    c->stats->bytes += data;
    c->stats->read += data;
    c->stats->stored += stored;
    return json_object_set_new(e, "object", json_string(hex)) < 0 ? -ENOMEM : 0;
}

static int walk(capture *c, int dir_fd, const char *name, const char *path);

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int walk_dir(capture *c, int fd, const char *path)
{
    _cleanup_closedir_ DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return failed(c, -errno, path, "cannot list");
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int k = 0;
    struct dirent *de;
    while (k == 0 && (errno = 0, de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            char **nn = reallocarray(names, cap, sizeof(*names));
            if (!nn) {
                k = -ENOMEM;
                break;
            }
            names = nn;
        }
        if (!(names[n] = strdup(de->d_name)))
            k = -ENOMEM;
        else
            n++;
    }
    if (k == 0 && errno != 0)
        k = failed(c, -errno, path, "cannot list");
    if (k == 0 && n > 0) /* names is NULL for an empty directory */
        qsort(names, n, sizeof(*names), compare_names); /* a manifest does not depend on order */
    for (size_t i = 0; k == 0 && i < n; i++) {
        _cleanup_free_ char *child =
            *path ? strdup_printf("%s/%s", path, names[i]) : strdup(names[i]);
        k = child ? walk(c, dirfd(d), names[i], child) : -ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return k;
}

/* Records name (under dir_fd; the root itself when path is "") and, for a directory, what it
 * holds. */
static int walk(capture *c, int dir_fd, const char *name, const char *path)
{
    struct stat st;
    if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT && c->o->tolerant ? 0 : failed(c, -errno, path, "cannot stat");
    struct statx sx;
    if (*path && st.st_dev != c->dev &&
        (statx(dir_fd, name, AT_SYMLINK_NOFOLLOW, STATX_MNT_ID, &sx) < 0 ||
         sx.stx_mnt_id != c->mnt_id))
        return 0; /* another filesystem mounted here: not ours to capture */
    json_t *e = json_pack("{s:s}", "path", path);
    if (!e || json_array_append_new(c->entries, e) < 0)
        return -ENOMEM;
    c->stats->entries++;
    if (S_ISREG(st.st_mode) && st.st_nlink > 1) {
        char key[64];
        snprintf(key, sizeof(key), "%llu:%llu", (unsigned long long)st.st_dev,
                 (unsigned long long)st.st_ino);
        const char *first = json_string_value(json_object_get(c->inodes, key));
        if (first)
            return json_object_set_new(e, "type", json_string("hardlink")) < 0 ||
                           json_object_set_new(e, "link", json_string(first)) < 0
                       ? -ENOMEM
                       : 0;
        if (json_object_set_new(c->inodes, key, json_string(path)) < 0)
            return -ENOMEM;
    }
    const char *type = S_ISDIR(st.st_mode)    ? "dir"
                       : S_ISREG(st.st_mode)  ? "file"
                       : S_ISLNK(st.st_mode)  ? "symlink"
                       : S_ISFIFO(st.st_mode) ? "fifo"
                                              : NULL;
    if (!type) { /* sockets and devices: nothing a restore could make useful */
        json_array_remove(c->entries, json_array_size(c->entries) - 1);
        c->stats->entries--;
        return 0;
    }
    if (json_object_set_new(e, "type", json_string(type)) < 0 ||
        json_object_set_new(e, "mode", json_integer(st.st_mode & 07777)) < 0 ||
        json_object_set_new(e, "uid", json_integer(map_id(c, st.st_uid))) < 0 ||
        json_object_set_new(e, "gid", json_integer(map_id(c, st.st_gid))) < 0 ||
        json_object_set_new(e, "mtime", time_json(&st.st_mtim)) < 0 ||
        json_object_set_new(e, "atime", time_json(&st.st_atim)) < 0)
        return -ENOMEM;
    if (json_object_set_new(e, "ino", json_integer((json_int_t)st.st_ino)) < 0 ||
        json_object_set_new(e, "ctime", time_json(&st.st_ctim)) < 0)
        return -ENOMEM;
    /* Setting an xattr changes ctime: an inode whose ctime is unchanged keeps the xattrs the
     * hint recorded, without asking the filesystem again (the frozen pass stays short). */
    const json_t *h = json_object_get(c->hint, path), *hx = json_object_get(h, "xattrs");
    int k = 0;
    if (h && same_inode(h, &st)) {
        if (hx && json_object_set_new(e, "xattrs", json_deep_copy(hx)) < 0)
            return -ENOMEM;
    } else if ((k = capture_xattrs(dir_fd, name, e)) < 0)
        return failed(c, k, path, "cannot read the xattrs of");
    if (S_ISLNK(st.st_mode)) {
        _cleanup_free_ char *t = malloc((size_t)st.st_size + 1);
        if (!t)
            return -ENOMEM;
        ssize_t n = readlinkat(dir_fd, name, t, (size_t)st.st_size + 1);
        if (n < 0 || n > st.st_size)
            return failed(c, n < 0 ? -errno : -EAGAIN, path, "cannot read the symlink");
        t[n] = 0;
        return json_object_set_new(e, "target", json_string(t)) < 0 ? -ENOMEM : 0;
    }
    if (S_ISREG(st.st_mode))
        return capture_file(c, dir_fd, name, path, &st, e);
    if (S_ISDIR(st.st_mode)) {
        int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 && c->o->tolerant && (changed_meanwhile(-errno) || errno == ENOTDIR))
            return 0; /* replaced meanwhile: the frozen pass walks what is there */
        if (fd < 0)
            return failed(c, -errno, path, "cannot open");
        return walk_dir(c, fd, path);
    }
    return 0;
}

/* path -> entry of the hint's root `name`, in a new object (*ret owned, NULL without hint). */
static int hint_index(const json_t *hint, const char *name, json_t **ret)
{
    *ret = NULL;
    const json_t *r, *e;
    size_t i, j;
    json_array_foreach (json_object_get(hint, "roots"), i, r) {
        if (!json_is_string(json_object_get(r, "name")) ||
            strcmp(json_string_value(json_object_get(r, "name")), name) != 0)
            continue;
        json_t *idx = json_object();
        if (!idx)
            return -ENOMEM;
        json_array_foreach (json_object_get(r, "entries"), j, e) {
            const char *p = json_string_value(json_object_get(e, "path"));
            if (p && json_object_set(idx, p, (json_t *)e) < 0) {
                json_decref(idx);
                return -ENOMEM;
            }
        }
        *ret = idx;
    }
    return 0;
}

int snap_capture(snap_store *s, const snap_root *roots, size_t n_roots,
                 const snap_capture_options *o, json_t **ret, snap_stats *stats, char **ret_error)
{
    snap_stats local = {0};
    if (!stats)
        stats = &local;
    uint64_t entries0 = stats->entries, bytes0 = stats->bytes;
    _cleanup_(json_decrefp) json_t *m =
        json_pack("{s:i,s:[]}", "version", SNAP_MANIFEST_VERSION, "roots");
    if (!m)
        return -ENOMEM;
    for (size_t i = 0; i < n_roots; i++) {
        _cleanup_close_ int fd = open(roots[i].path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        struct stat st;
        struct statx sx;
        if (fd < 0 || fstat(fd, &st) < 0 ||
            statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &sx) < 0) {
            if (ret_error)
                *ret_error = strdup_printf("cannot open %s: %s", roots[i].path, strerror(errno));
            return -errno;
        }
        _cleanup_(json_decrefp) json_t *inodes = json_object(), *hint = NULL;
        json_t *entries = json_array();
        if (!inodes || !entries ||
            json_array_append_new(
                json_object_get(m, "roots"),
                json_pack("{s:s,s:o}", "name", roots[i].name, "entries", entries)) < 0)
            return -ENOMEM;
        int k = hint_index(o->hint, roots[i].name, &hint);
        if (k < 0)
            return k;
        capture c = {.store = s,
                     .o = o,
                     .stats = stats,
                     .entries = entries,
                     .inodes = inodes,
                     .hint = hint,
                     .dev = st.st_dev,
                     .mnt_id = sx.stx_mnt_id,
                     .ret_error = ret_error};
        if ((k = walk(&c, fd, ".", "")) < 0)
            return k;
    }
    if (json_object_set_new(m, "files", json_integer((json_int_t)(stats->entries - entries0))) <
            0 ||
        json_object_set_new(m, "size", json_integer((json_int_t)(stats->bytes - bytes0))) < 0)
        return -ENOMEM;
    *ret = TAKE_PTR(m);
    return 0;
}
