/* TEMPORARY: weak fallback of basic/confine.h until src/basic/confine.c lands on main.
 * Strong definitions in confine.c override these. Delete once merged. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/confine.h"
#include "basic/macro.h"
#include "shared/status.h"

#define WEAK __attribute__((weak))

WEAK char *path_clean(const char *path)
{
    size_t n = strlen(path);
    bool rooted = n > 0 && path[0] == '/';
    char *out = malloc(n + 2);
    if (!out)
        return NULL;
    size_t w = 0, dotdot = 0, r = 0;
    if (rooted) {
        out[w++] = '/';
        r = 1;
        dotdot = 1;
    }
    while (r < n) {
        if (path[r] == '/')
            r++;
        else if (path[r] == '.' && (r + 1 == n || path[r + 1] == '/'))
            r++;
        else if (path[r] == '.' && path[r + 1] == '.' && (r + 2 == n || path[r + 2] == '/')) {
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

WEAK void confined_done(confined *c)
{
    c->dir_fd = safe_close(c->dir_fd);
    free(c->missing);
    free(c->name);
    c->missing = c->name = NULL;
}

/* Components list helpers. */
typedef struct {
    char **v;
    size_t n;
} comps;

static void comps_free(comps *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->v[i]);
    free(c->v);
    c->v = NULL;
    c->n = 0;
}

static int comps_push_front_split(comps *q, const char *p)
{
    /* push components of p (in order) to the front of q */
    comps t = {0};
    _cleanup_free_ char *s = strdup(p);
    if (!s)
        return -ENOMEM;
    for (char *save = NULL, *tok = strtok_r(s, "/", &save); tok; tok = strtok_r(NULL, "/", &save)) {
        char **nv = realloc(t.v, (t.n + 1) * sizeof(char *));
        if (!nv) {
            comps_free(&t);
            return -ENOMEM;
        }
        t.v = nv;
        if (!(t.v[t.n++] = strdup(tok))) {
            comps_free(&t);
            return -ENOMEM;
        }
    }
    char **nv = realloc(q->v, (q->n + t.n + 1) * sizeof(char *));
    if (!nv) {
        comps_free(&t);
        return -ENOMEM;
    }
    q->v = nv;
    memmove(q->v + t.n, q->v, q->n * sizeof(char *));
    memcpy(q->v, t.v, t.n * sizeof(char *));
    q->n += t.n;
    free(t.v);
    return 0;
}

static char *comps_pop_front(comps *q)
{
    char *s = q->v[0];
    memmove(q->v, q->v + 1, (q->n - 1) * sizeof(char *));
    q->n--;
    return s;
}

static int open_parts(int root_fd, comps *parts)
{
    int fd = fcntl(root_fd, F_DUPFD_CLOEXEC, 3);
    if (fd < 0)
        return negative_errno();
    for (size_t i = 0; i < parts->n; i++) {
        int nfd = openat(fd, parts->v[i], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int e = negative_errno();
        close(fd);
        if (nfd < 0)
            return e == -ELOOP ? -ERRNO_PATH_ESCAPE : e;
        fd = nfd;
    }
    return fd;
}

static char *join_rest(comps *q, size_t from, size_t to)
{
    size_t len = 1;
    for (size_t i = from; i < to; i++)
        len += strlen(q->v[i]) + 1;
    char *s = malloc(len), *p = s;
    if (!s)
        return NULL;
    *p = '\0';
    for (size_t i = from; i < to; i++) {
        if (i > from)
            *p++ = '/';
        p = stpcpy(p, q->v[i]);
    }
    return s;
}

WEAK int confine_resolve(int root_fd, const char *root_path, const char *path, confined *ret)
{
    _cleanup_free_ char *clean = path_clean(path);
    if (!clean)
        return -ENOMEM;
    const char *rel = clean;
    size_t rl = strlen(root_path);
    if (clean[0] == '/') {
        if (strcmp(clean, root_path) == 0)
            rel = ".";
        else if (strncmp(clean, root_path, rl) == 0 && clean[rl] == '/')
            rel = clean + rl + 1;
        else
            rel = clean + 1;
    }
    comps q = {0}, parts = {0};
    int r = comps_push_front_split(&q, rel);
    int fd = -1, links = 0;
    size_t orig_left = q.n; /* components left that came from the request (for dangling) */
    if (r < 0)
        goto out;
    while (q.n > 0) {
        char *c = comps_pop_front(&q);
        bool final_orig = q.n == 0;
        if (orig_left > 0)
            orig_left--;
        if (strcmp(c, ".") == 0) {
            free(c);
            continue;
        }
        if (strcmp(c, "..") == 0) {
            free(c);
            if (parts.n == 0) {
                r = -ERRNO_PATH_ESCAPE;
                goto out;
            }
            free(parts.v[--parts.n]);
            continue;
        }
        fd = safe_close(fd);
        fd = open_parts(root_fd, &parts);
        if (fd < 0) {
            r = fd;
            free(c);
            goto out;
        }
        struct stat st;
        if (fstatat(fd, c, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            r = negative_errno();
            if (r != -ENOENT) {
                free(c);
                goto out;
            }
            /* missing: c + rest lexically */
            char **nv = realloc(q.v, (q.n + 1) * sizeof(char *));
            if (!nv) {
                free(c);
                r = -ENOMEM;
                goto out;
            }
            q.v = nv;
            memmove(q.v + 1, q.v, q.n * sizeof(char *));
            q.v[0] = c;
            q.n++;
            _cleanup_free_ char *rest = join_rest(&q, 0, q.n);
            _cleanup_free_ char *rc = rest ? path_clean(rest) : NULL;
            if (!rc) {
                r = -ENOMEM;
                goto out;
            }
            if (strncmp(rc, "..", 2) == 0 && (rc[2] == '/' || rc[2] == 0)) {
                r = -ERRNO_PATH_ESCAPE;
                goto out;
            }
            char *slash = strrchr(rc, '/');
            ret->dir_fd = TAKE_FD(fd);
            ret->missing = slash ? strndup(rc, slash - rc) : strdup("");
            ret->name = strdup(slash ? slash + 1 : rc);
            r = ret->missing && ret->name ? 0 : -ENOMEM;
            goto out;
        }
        if (S_ISLNK(st.st_mode)) {
            if (++links > 40) {
                free(c);
                r = -ELOOP;
                goto out;
            }
            char buf[4096];
            ssize_t n = readlinkat(fd, c, buf, sizeof(buf) - 1);
            if (n < 0) {
                r = negative_errno();
                free(c);
                goto out;
            }
            buf[n] = 0;
            if (final_orig) {
                /* dangling check: resolve the target; if missing, the link itself */
                _cleanup_free_ char *full = NULL;
                if (buf[0] == '/')
                    full = strdup(buf);
                else {
                    _cleanup_free_ char *pp = join_rest(&parts, 0, parts.n);
                    if (pp && asprintf(&full, "%s/%s/%s", root_path, pp, buf) < 0)
                        full = NULL;
                }
                struct stat t;
                if (full && stat(full, &t) < 0 && errno == ENOENT) {
                    ret->dir_fd = TAKE_FD(fd);
                    ret->missing = strdup("");
                    ret->name = c;
                    r = ret->missing ? 0 : -ENOMEM;
                    goto out;
                }
            }
            free(c);
            if (buf[0] == '/') {
                size_t bl = strlen(buf);
                _cleanup_free_ char *bc = path_clean(buf);
                (void)bl;
                if (!bc) {
                    r = -ENOMEM;
                    goto out;
                }
                if (strcmp(bc, root_path) == 0)
                    bc[0] = 0, r = 0;
                else if (strncmp(bc, root_path, rl) == 0 && bc[rl] == '/')
                    memmove(bc, bc + rl + 1, strlen(bc + rl + 1) + 1);
                else {
                    r = -ERRNO_PATH_ESCAPE;
                    goto out;
                }
                comps_free(&parts);
                r = comps_push_front_split(&q, bc);
            } else
                r = comps_push_front_split(&q, buf);
            if (r < 0)
                goto out;
            continue;
        }
        if (!S_ISDIR(st.st_mode) && q.n > 0) {
            free(c);
            r = -ENOTDIR;
            goto out;
        }
        char **nv = realloc(parts.v, (parts.n + 1) * sizeof(char *));
        if (!nv) {
            free(c);
            r = -ENOMEM;
            goto out;
        }
        parts.v = nv;
        parts.v[parts.n++] = c;
    }
    /* resolved: parts is the target */
    {
        fd = safe_close(fd);
        char *name = parts.n > 0 ? parts.v[--parts.n] : strdup("");
        fd = open_parts(root_fd, &parts);
        if (fd < 0) {
            free(name);
            r = fd;
            goto out;
        }
        ret->dir_fd = TAKE_FD(fd);
        ret->missing = strdup("");
        ret->name = name;
        r = ret->missing && ret->name ? 0 : -ENOMEM;
    }
out:
    safe_close(fd);
    comps_free(&q);
    comps_free(&parts);
    if (r < 0 && ret->dir_fd >= 0)
        confined_done(ret);
    return r;
}

WEAK int confine_open_dir(int root_fd, const char *root_path, const char *path, int *ret_fd)
{
    confined c = CONFINED_INIT;
    int r = confine_resolve(root_fd, root_path, path, &c);
    if (r < 0)
        return r;
    if (c.missing[0]) {
        confined_done(&c);
        return -ENOENT;
    }
    int fd = openat(c.dir_fd, c.name[0] ? c.name : ".", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    r = fd < 0 ? negative_errno() : 0;
    confined_done(&c);
    if (r == 0)
        *ret_fd = fd;
    return r;
}
