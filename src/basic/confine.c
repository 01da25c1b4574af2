/* Race-free path confinement: see confine.h. Every filesystem step is one openat() of a single
 * component with O_NOFOLLOW relative to a directory fd we hold, and symlinks are interpreted here,
 * so nothing the sandbox does to the tree while we walk it can make us touch a path outside. */
#include "basic/confine.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "basic/macro.h"

#define CONFINE_MAX_FOLLOWS 40

char *path_clean(const char *path)
{
    size_t n = strlen(path);
    bool rooted = n > 0 && path[0] == '/';
    char *out = malloc(n + 2);
    if (!out)
        return NULL;
    size_t w = 0;        /* write position */
    size_t dotdot = 0;   /* out[0..dotdot) holds leading ".." that cannot be backtracked */
    if (rooted)
        out[w++] = '/', dotdot = 1;
    for (size_t r = 0; r < n;) {
        if (path[r] == '/') {
            r++;
        } else if (path[r] == '.' && (r + 1 == n || path[r + 1] == '/')) {
            r++;
        } else if (path[r] == '.' && path[r + 1] == '.' && (r + 2 == n || path[r + 2] == '/')) {
            r += 2;
            if (w > dotdot) {
                w--;
                while (w > dotdot && out[w] != '/')
                    w--;
            } else if (!rooted) {
                if (w > 0)
                    out[w++] = '/';
                out[w++] = '.';
                out[w++] = '.';
                dotdot = w;
            }
        } else {
            if ((rooted && w != 1) || (!rooted && w != 0))
                out[w++] = '/';
            for (; r < n && path[r] != '/'; r++)
                out[w++] = path[r];
        }
    }
    if (w == 0)
        out[w++] = '.';
    out[w] = '\0';
    return out;
}

static bool is_outside(const char *rel)
{
    return strcmp(rel, "..") == 0 || strncmp(rel, "../", 3) == 0;
}

/* Maps a clean absolute path to root-relative form if it lies under root_path. */
static const char *strip_root(const char *abs, const char *root_path)
{
    if (strcmp(root_path, "/") == 0)
        return abs[1] ? abs + 1 : ".";
    size_t rl = strlen(root_path);
    if (strncmp(abs, root_path, rl) != 0)
        return NULL;
    if (abs[rl] == '\0')
        return ".";
    return abs[rl] == '/' ? abs + rl + 1 : NULL;
}

typedef struct walker {
    int root_fd;
    const char *root_path;
    unsigned follows;
} walker;

/* Outcome of walking a root-relative clean path. */
typedef struct walk_result {
    int dir_fd;     /* directory holding `name`, or the deepest existing directory */
    char *name;     /* final component ("" = root) */
    char *missing;  /* directories below dir_fd to create, when the target is missing */
    char *logical;  /* root-relative path of the object reached (valid when it exists) */
    bool exists;
} walk_result;

static void walk_result_done(walk_result *w)
{
    w->dir_fd = safe_close(w->dir_fd);
    free(w->name);
    free(w->missing);
    free(w->logical);
    w->name = w->missing = w->logical = NULL;
}

static char *join2(const char *a, const char *b)
{
    char *s = NULL;
    if (!*a || strcmp(a, ".") == 0)
        return strdup(b);
    if (!*b)
        return strdup(a);
    return asprintf(&s, "%s/%s", a, b) < 0 ? NULL : s;
}

static int walk(walker *w, const char *rel, walk_result *ret);

/* Resolves the symlink `link_fd` found in directory `dir_logical`. Returns 0 with the target's
 * walk result (exists or not), or -ERRNO_PATH_ESCAPE / -errno. A target outside the root that
 * does not exist counts as dangling (ret->exists false), as upstream treats it lexically. */
static int follow_link(walker *w, int link_fd, const char *dir_logical, walk_result *ret)
{
    if (++w->follows > CONFINE_MAX_FOLLOWS)
        return -ELOOP;
    char target[PATH_MAX + 1];
    ssize_t n = readlinkat(link_fd, "", target, PATH_MAX);
    if (n < 0)
        return negative_errno();
    target[n] = '\0';

    _cleanup_free_ char *abs = NULL;
    if (target[0] == '/') {
        abs = path_clean(target);
    } else {
        _cleanup_free_ char *joined = NULL;
        if (asprintf(&joined, "%s/%s/%s", w->root_path, dir_logical, target) < 0)
            return -ENOMEM;
        abs = path_clean(joined);
    }
    if (!abs)
        return -ENOMEM;
    const char *rel = strip_root(abs, w->root_path);
    if (!rel) {
        struct stat st;
        /* Outside the root: only an existence probe, never an operation. */
        if (fstatat(AT_FDCWD, abs, &st, 0) < 0 && errno == ENOENT) {
            *ret = (walk_result){.dir_fd = -1, .exists = false};
            return 0;
        }
        return -ERRNO_PATH_ESCAPE;
    }
    _cleanup_free_ char *rel_copy = strdup(rel);
    if (!rel_copy)
        return -ENOMEM;
    return walk(w, rel_copy, ret);
}

static int set_missing(walk_result *ret, int dir_fd, char **comps, size_t i, size_t n)
{
    size_t len = 1;
    for (size_t k = i; k + 1 < n; k++)
        len += strlen(comps[k]) + 1;
    char *m = malloc(len);
    if (!m)
        return -ENOMEM;
    m[0] = '\0';
    for (size_t k = i; k + 1 < n; k++) {
        if (k > i)
            strcat(m, "/");
        strcat(m, comps[k]);
    }
    ret->dir_fd = dir_fd;
    ret->missing = m;
    ret->name = strdup(comps[n - 1]);
    ret->exists = false;
    return ret->name ? 0 : -ENOMEM;
}

static size_t split_components(char *rel, char **comps)
{
    size_t n = 0;
    if (strcmp(rel, ".") == 0)
        return 0;
    for (char *save = NULL, *c = strtok_r(rel, "/", &save); c; c = strtok_r(NULL, "/", &save))
        comps[n++] = c;
    return n;
}

/* Walks `rel` (clean, root-relative, not leaving the root) from the root, component by
 * component. `rel` is modified (split in place). */
static int walk(walker *w, const char *rel_in, walk_result *ret)
{
    _cleanup_free_ char *rel = strdup(rel_in);
    _cleanup_free_ char **comps = calloc(strlen(rel_in) / 2 + 2, sizeof(char *));
    _cleanup_free_ char *logical = strdup("");
    if (!rel || !comps || !logical)
        return -ENOMEM;
    size_t n = split_components(rel, comps);

    _cleanup_close_ int cur = openat(w->root_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (cur < 0)
        return negative_errno();
    if (n == 0) {
        *ret = (walk_result){.dir_fd = TAKE_FD(cur), .name = strdup(""), .missing = strdup(""),
                             .logical = strdup(""), .exists = true};
        return ret->name && ret->missing && ret->logical ? 0 : -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        bool last = i + 1 == n;
        _cleanup_close_ int fd = openat(cur, comps[i], O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
            if (errno != ENOENT)
                return negative_errno();
            return set_missing(ret, TAKE_FD(cur), comps, i, n);
        }
        struct stat st;
        if (fstat(fd, &st) < 0)
            return negative_errno();
        if (S_ISLNK(st.st_mode)) {
            walk_result t = {.dir_fd = -1};
            int r = follow_link(w, fd, logical, &t);
            if (r < 0)
                return r;
            if (!t.exists) { /* dangling: the link path itself, lexically */
                walk_result_done(&t);
                return set_missing(ret, TAKE_FD(cur), comps, i, n);
            }
            if (last) {
                *ret = t;
                return 0;
            }
            safe_close(cur);
            cur = openat(t.dir_fd, *t.name ? t.name : ".", O_PATH | O_NOFOLLOW | O_CLOEXEC);
            free(logical);
            logical = TAKE_PTR(t.logical);
            walk_result_done(&t);
            if (cur < 0)
                return negative_errno();
            continue;
        }
        _cleanup_free_ char *next_logical = join2(logical, comps[i]);
        if (!next_logical)
            return -ENOMEM;
        if (last) {
            *ret = (walk_result){.dir_fd = TAKE_FD(cur), .name = strdup(comps[i]),
                                 .missing = strdup(""), .logical = TAKE_PTR(next_logical),
                                 .exists = true};
            return ret->name && ret->missing ? 0 : -ENOMEM;
        }
        /* Not a directory: the next openat() fails with ENOTDIR, as upstream's resolution does. */
        safe_close(cur);
        cur = TAKE_FD(fd);
        free(logical);
        logical = TAKE_PTR(next_logical);
    }
    return -EINVAL; /* unreachable */
}

int confine_resolve(int root_fd, const char *root_path, const char *path, confined *ret)
{
    _cleanup_free_ char *clean = path_clean(path ? path : "");
    if (!clean)
        return -ENOMEM;
    const char *rel = clean;
    if (clean[0] == '/') {
        rel = strip_root(clean, root_path);
        if (!rel)
            rel = clean[1] ? clean + 1 : "."; /* absolute paths are relative to the root */
    }
    if (is_outside(rel))
        return -ERRNO_PATH_ESCAPE;

    walker w = {.root_fd = root_fd, .root_path = root_path};
    walk_result res = {.dir_fd = -1};
    int r = walk(&w, rel, &res);
    if (r < 0) {
        walk_result_done(&res);
        return r;
    }
    *ret = (confined){.dir_fd = res.dir_fd, .missing = res.missing, .name = res.name};
    free(res.logical);
    return 0;
}

void confined_done(confined *c)
{
    c->dir_fd = safe_close(c->dir_fd);
    free(c->missing);
    free(c->name);
    c->missing = c->name = NULL;
}

int confine_open_dir(int root_fd, const char *root_path, const char *path, int *ret_fd)
{
    confined c = CONFINED_INIT;
    int r = confine_resolve(root_fd, root_path, path, &c);
    if (r < 0)
        return r;
    if (*c.missing) {
        confined_done(&c);
        return -ENOENT;
    }
    int fd = openat(c.dir_fd, *c.name ? c.name : ".", O_PATH | O_NOFOLLOW | O_CLOEXEC);
    r = fd < 0 ? negative_errno() : 0;
    confined_done(&c);
    if (r < 0)
        return r;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        r = negative_errno();
    } else if (S_ISLNK(st.st_mode)) {
        r = -ENOENT; /* only dangling links survive resolution */
    } else if (!S_ISDIR(st.st_mode)) {
        r = -ENOTDIR;
    }
    if (r < 0) {
        safe_close(fd);
        return r;
    }
    *ret_fd = fd;
    return 0;
}

/* One component below dir_fd, opened as a directory without following or crossing anything. */
static int open_beneath(int dir_fd, const char *name)
{
    struct open_how how = {
        .flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
    };
    int fd = (int)syscall(SYS_openat2, dir_fd, name, &how, sizeof(how));
    return fd < 0 ? negative_errno() : fd;
}

/* ELOOP from openat2 is a symlink (O_NOFOLLOW on the last component, RESOLVE_NO_SYMLINKS on
 * any other); ENOTDIR with O_NOFOLLOW|O_DIRECTORY may be a symlink too: ask the entry. */
static int classify(int dir_fd, const char *name, int err)
{
    struct stat st;
    if (err == -ENOTDIR && fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISLNK(st.st_mode))
        return -ELOOP;
    return err;
}

int confine_mkdir_beneath(int dir_fd, const char *path, mode_t mode, uid_t uid, gid_t gid,
                          int *ret_fd)
{
    _cleanup_free_ char *copy = strdup(path ? path : "");
    if (!copy)
        return -ENOMEM;
    if (!*copy || copy[0] == '/')
        return -EINVAL;
    _cleanup_close_ int cur = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
    if (cur < 0)
        return negative_errno();
    bool created = false;
    for (char *save = NULL, *c = strtok_r(copy, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        if (strcmp(c, ".") == 0 || strcmp(c, "..") == 0)
            return -EINVAL;
        created = false;
        int fd = open_beneath(cur, c);
        if (fd == -ENOENT) {
            if (mkdirat(cur, c, 0700) < 0 && errno != EEXIST)
                return negative_errno();
            created = true;
            fd = open_beneath(cur, c);
        }
        if (fd < 0)
            return classify(cur, c, fd);
        /* Directories made here are the caller's: owner and mode set by fd before going on. */
        if (created && (fchown(fd, uid, gid) < 0 || fchmod(fd, mode) < 0)) {
            int k = negative_errno();
            safe_close(fd);
            return k;
        }
        safe_close(cur);
        cur = fd;
    }
    /* An existing last directory becomes the caller's; its mode is the owner's business. */
    if (!created && fchown(cur, uid, gid) < 0)
        return negative_errno();
    *ret_fd = TAKE_FD(cur);
    return 0;
}
