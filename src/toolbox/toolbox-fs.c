/* Paths, the workspace boundary, file reading and the directory walk. See toolbox.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/macro.h"
#include "toolbox/toolbox.h"

/* Lexical normalization of an absolute path: no ".", "..", or repeated slashes. */
static char *normalize(const char *abs)
{
    size_t n = strlen(abs);
    char *out = malloc(n + 2);
    if (!out)
        return NULL;
    size_t o = 0;
    const char *p = abs;
    while (*p) {
        while (*p == '/')
            p++;
        if (!*p)
            break;
        const char *e = strchrnul(p, '/');
        size_t len = (size_t)(e - p);
        if (len == 1 && p[0] == '.') {
            /* skip */
        } else if (len == 2 && p[0] == '.' && p[1] == '.') {
            while (o > 0 && out[o - 1] != '/')
                o--;
            if (o > 0)
                o--;
        } else {
            out[o++] = '/';
            memcpy(out + o, p, len);
            o += len;
        }
        p = e;
    }
    if (o == 0)
        out[o++] = '/';
    out[o] = '\0';
    return out;
}

static bool under(const char *root, const char *p)
{
    size_t n = strlen(root);
    if (n == 1 && root[0] == '/')
        return true;
    return strncmp(root, p, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

/* realpath() of the longest existing prefix plus the missing rest. Owned. */
static char *resolve_existing(const char *norm)
{
    _cleanup_free_ char *cur = strdup(norm);
    if (!cur)
        return NULL;
    for (;;) {
        char *rp = realpath(cur, NULL);
        if (rp) {
            const char *rest = norm + strlen(cur);
            if (!*rest)
                return rp;
            char *full = NULL;
            int k = asprintf(&full, "%s%s", strcmp(rp, "/") == 0 ? "" : rp, rest);
            free(rp);
            if (k < 0)
                return NULL;
            _cleanup_free_ char *t = full;
            return normalize(t);
        }
        char *slash = strrchr(cur, '/');
        if (!slash || slash == cur)
            return strdup(norm);
        *slash = '\0';
    }
}

char *toolbox_resolve(const toolbox_ctx *ctx, const char *p, bool *ret_inside)
{
    _cleanup_free_ char *joined = NULL;
    if (p[0] == '/')
        joined = strdup(p);
    else if (asprintf(&joined, "%s/%s", ctx->root, p) < 0)
        joined = NULL;
    if (!joined)
        return NULL;
    char *norm = normalize(joined);
    if (!norm)
        return NULL;
    _cleanup_free_ char *real = resolve_existing(norm);
    *ret_inside = real && under(ctx->root, norm) && under(ctx->root, real);
    return norm;
}

int toolbox_outside(const toolbox_ctx *ctx, toolbox_result *res, const char *abs)
{
    return toolbox_fail(res, "path_not_in_workspace",
                        "Path not in workspace: Attempted path \"%s\" resolves outside the allowed "
                        "workspace directories: %s",
                        abs, ctx->root);
}

int toolbox_resolve_inside(const toolbox_ctx *ctx, const char *p, char **ret_abs,
                           toolbox_result *res)
{
    bool inside;
    _cleanup_free_ char *abs = toolbox_resolve(ctx, p, &inside);
    *ret_abs = NULL;
    if (!abs)
        return -ENOMEM;
    if (!inside)
        return toolbox_outside(ctx, res, abs);
    *ret_abs = TAKE_PTR(abs);
    return 1;
}

char *toolbox_relative(const char *base, const char *abs)
{
    size_t n = strlen(base);
    if (strcmp(base, "/") == 0 && abs[0] == '/')
        return strdup(abs[1] ? abs + 1 : ".");
    if (strncmp(base, abs, n) == 0 && abs[n] == '/')
        return strdup(abs + n + 1);
    if (strcmp(base, abs) == 0)
        return strdup(".");
    return strdup(abs);
}

int toolbox_read_all(const char *path, char **ret, size_t *ret_len)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    if (S_ISDIR(st.st_mode))
        return -EISDIR;
    buf b = BUF_INIT;
    toolbox_buf_add(&b, "", 0);
    char chunk[65536];
    for (;;) {
        ssize_t k = read(fd, chunk, sizeof(chunk));
        if (k < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            free(b.data);
            return -e;
        }
        if (k == 0)
            break;
        toolbox_buf_add(&b, chunk, (size_t)k);
        if (b.len > TOOLBOX_MAX_FILE_SIZE) {
            free(b.data);
            return -EFBIG;
        }
    }
    *ret_len = b.len;
    *ret = toolbox_buf_steal(&b);
    return 0;
}

bool toolbox_is_binary(const char *path, const char *data, size_t len)
{
    static const char *const exts[] = {
        ".zip", ".tar",  ".gz",  ".tgz",  ".bz2",  ".xz",  ".7z",    ".exe", ".dll", ".so",
        ".o",   ".a",    ".obj", ".lib",  ".bin",  ".dat", ".class", ".jar", ".war", ".pyc",
        ".pyo", ".wasm", ".png", ".jpg",  ".jpeg", ".gif", ".webp",  ".bmp", ".ico", ".tiff",
        ".pdf", ".mp3",  ".wav", ".ogg",  ".flac", ".mp4", ".mov",   ".avi", ".doc", ".docx",
        ".xls", ".xlsx", ".ppt", ".pptx", ".odt",  ".ods", ".odp"};
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');
    if (dot && (!slash || dot > slash))
        for (size_t i = 0; i < ELEMENTSOF(exts); i++)
            if (strcasecmp(dot, exts[i]) == 0)
                return true;
    return memchr(data, '\0', MIN(len, (size_t)4096)) != NULL;
}

int toolbox_text_slice(const char *data, size_t len, size_t start, size_t end, toolbox_text *ret)
{
    *ret = (toolbox_text){0};
    size_t total = 1;
    for (size_t i = 0; i < len; i++)
        if (data[i] == '\n')
            total++;
    if (end > total)
        end = total;
    buf b = BUF_INIT;
    toolbox_buf_add(&b, "", 0);
    bool cut = false;
    size_t line = 0;
    const char *p = data, *stop = data + len;
    while (line < end) {
        const char *nl = memchr(p, '\n', (size_t)(stop - p));
        const char *e = nl ? nl : stop;
        if (line >= start) {
            if (line > start)
                toolbox_buf_add(&b, "\n", 1);
            size_t n = (size_t)(e - p);
            if (n > TOOLBOX_MAX_LINE_LEN) {
                toolbox_buf_add(&b, p, TOOLBOX_MAX_LINE_LEN);
                toolbox_buf_puts(&b, "... [truncated]");
                cut = true;
            } else {
                toolbox_buf_add(&b, p, n);
            }
        }
        line++;
        if (!nl)
            break;
        p = nl + 1;
    }
    ret->content = toolbox_buf_steal(&b);
    ret->total = total;
    ret->first = start + 1;
    ret->last = end;
    ret->truncated = start > 0 || end < total || cut;
    return 0;
}

/* .gitignore: one pattern per line; '#' comments, '!' negation (re-includes), trailing '/'
 * for directories only, a '/' elsewhere anchors the pattern to the root. */
typedef struct ignore_rule {
    char *pat;
    bool negate, dir_only, anchored;
} ignore_rule;

struct toolbox_ignore {
    ignore_rule *v;
    size_t n;
};

static int add_rule(toolbox_ignore *ig, ignore_rule r, const char *pat)
{
    ignore_rule *t = realloc(ig->v, (ig->n + 1) * sizeof(*t));
    if (!t)
        return -ENOMEM;
    ig->v = t;
    if (!(r.pat = strdup(pat)))
        return -ENOMEM;
    ig->v[ig->n++] = r;
    return 0;
}

/* Appends the rules of one ignore file (missing: none). */
static void load_rules(toolbox_ignore *ig, const char *root, const char *name)
{
    _cleanup_free_ char *path = NULL, *data = NULL;
    size_t len = 0;
    if (asprintf(&path, "%s/%s", root, name) < 0 || toolbox_read_all(path, &data, &len) < 0)
        return;
    char *save = NULL;
    for (char *line = strtok_r(data, "\r\n", &save); line; line = strtok_r(NULL, "\r\n", &save)) {
        size_t n = strlen(line);
        while (n > 0 && (line[n - 1] == ' ' || line[n - 1] == '\t'))
            line[--n] = '\0';
        if (n == 0 || line[0] == '#')
            continue;
        ignore_rule r = {0};
        if (line[0] == '!') {
            r.negate = true;
            line++;
            n--;
        }
        if (n > 0 && line[n - 1] == '/') {
            r.dir_only = true;
            line[--n] = '\0';
        }
        if (n > 0 && line[0] == '/') {
            r.anchored = true;
            line++;
        } else if (strchr(line, '/')) {
            r.anchored = true;
        }
        if (*line && add_rule(ig, r, line) < 0)
            return;
    }
}

toolbox_ignore *toolbox_ignore_load(const char *root, bool git, bool gemini)
{
    _cleanup_free_ char *dotgit = NULL;
    if (asprintf(&dotgit, "%s/.git", root) < 0)
        return NULL;
    git = git && access(dotgit, F_OK) == 0;
    if (!git && !gemini)
        return NULL;
    toolbox_ignore *ig = calloc(1, sizeof(*ig));
    if (!ig)
        return NULL;
    if (git) {
        /* The repository's own metadata is always ignored. */
        if (add_rule(ig, (ignore_rule){0}, ".git") < 0) {
            toolbox_ignore_free(ig);
            return NULL;
        }
        load_rules(ig, root, ".gitignore");
    }
    if (gemini)
        load_rules(ig, root, ".geminiignore");
    if (ig->n == 0) {
        toolbox_ignore_free(ig);
        return NULL;
    }
    return ig;
}

static bool rule_match(const ignore_rule *r, const char *rel, bool is_dir)
{
    if (r->dir_only && !is_dir)
        return false;
    if (r->anchored)
        return toolbox_glob_match(r->pat, rel, false);
    const char *base = strrchr(rel, '/');
    return toolbox_glob_match(r->pat, base ? base + 1 : rel, false);
}

bool toolbox_ignore_match(const toolbox_ignore *ig, const char *rel, bool is_dir)
{
    if (!ig)
        return false;
    bool ignored = false;
    for (size_t i = 0; i < ig->n; i++)
        if (rule_match(&ig->v[i], rel, is_dir))
            ignored = !ig->v[i].negate;
    return ignored;
}

void toolbox_ignore_free(toolbox_ignore *ig)
{
    if (!ig)
        return;
    for (size_t i = 0; i < ig->n; i++)
        free(ig->v[i].pat);
    free(ig->v);
    free(ig);
}

static int files_push(toolbox_files *f, char *path, const struct stat *st)
{
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 64;
        toolbox_file *t = realloc(f->v, cap * sizeof(*t));
        if (!t)
            return -ENOMEM;
        f->v = t;
        f->cap = cap;
    }
    f->v[f->n++] = (toolbox_file){.path = path, .mtime = st->st_mtim, .size = st->st_size};
    return 0;
}

static int walk(const char *root, const char *dir, bool recursive, const char *const *skip_dirs,
                const toolbox_ignore *ig, toolbox_files *out, toolbox_files *ignored, int depth)
{
    if (depth > 64)
        return 0;
    _cleanup_closedir_ DIR *d = opendir(dir);
    if (!d)
        return depth == 0 ? -errno : 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char *path = NULL;
        if (asprintf(&path, "%s/%s", strcmp(dir, "/") == 0 ? "" : dir, de->d_name) < 0)
            return -ENOMEM;
        struct stat st;
        if (lstat(path, &st) < 0) {
            free(path);
            continue;
        }
        bool is_dir = S_ISDIR(st.st_mode);
        bool skip = is_dir && !recursive;
        for (size_t i = 0; is_dir && skip_dirs && skip_dirs[i] && !skip; i++)
            skip = strcmp(skip_dirs[i], de->d_name) == 0;
        if (skip) {
            free(path);
            continue;
        }
        if (ig) {
            _cleanup_free_ char *rel = toolbox_relative(root, path);
            if (rel && toolbox_ignore_match(ig, rel, is_dir)) {
                /* what an ignored entry hides is collected for gemini-cli's ignored counts */
                int r = 0;
                if (ignored && is_dir)
                    r = walk(root, path, true, skip_dirs, NULL, ignored, NULL, depth + 1);
                else if (ignored && S_ISREG(st.st_mode))
                    r = files_push(ignored, TAKE_PTR(path), &st);
                free(path);
                if (r < 0)
                    return r;
                continue;
            }
        }
        if (is_dir) {
            int r = walk(root, path, recursive, skip_dirs, ig, out, ignored, depth + 1);
            free(path);
            if (r < 0)
                return r;
            continue;
        }
        if (!S_ISREG(st.st_mode)) { /* symlinks are not followed; devices, fifos skipped */
            free(path);
            continue;
        }
        if (files_push(out, path, &st) < 0) {
            free(path);
            return -ENOMEM;
        }
    }
    return 0;
}

int toolbox_walk(const char *root, const char *dir, bool recursive, const char *const *skip_dirs,
                 const toolbox_ignore *ig, toolbox_files *out, toolbox_files *ignored)
{
    return walk(root, dir, recursive, skip_dirs, ig, out, ignored, 0);
}

void toolbox_files_free(toolbox_files *f)
{
    for (size_t i = 0; i < f->n; i++)
        free(f->v[i].path);
    free(f->v);
    *f = (toolbox_files){0};
}
