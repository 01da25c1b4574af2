/* glob (spec/AGENT.md §2.6): files only, dotfiles included, symlinks not followed,
 * case-insensitive by default; files changed in the last 24 hours first (newest first), the
 * rest in path order. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "basic/macro.h"
#include "toolbox/toolbox.h"

#define RECENT_NS (24LL * 3600 * 1000000000LL)

static long long now_ns;

static long long ts_ns(struct timespec t)
{
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int file_cmp(const void *a, const void *b)
{
    const toolbox_file *x = a, *y = b;
    long long mx = ts_ns(x->mtime), my = ts_ns(y->mtime);
    bool rx = now_ns - mx < RECENT_NS, ry = now_ns - my < RECENT_NS;
    if (rx && ry)
        return mx > my ? -1 : mx < my ? 1 : strcmp(x->path, y->path);
    if (rx != ry)
        return rx ? -1 : 1;
    return strcmp(x->path, y->path);
}

/* Absolute patterns match absolute paths; others match paths below dir. */
static bool glob_hit(const char *pattern, const char *dir, const char *path, bool case_sensitive)
{
    if (pattern[0] == '/')
        return toolbox_glob_match(pattern + 1, path + 1, !case_sensitive);
    _cleanup_free_ char *rel = toolbox_relative(dir, path);
    return rel && toolbox_glob_match(pattern, rel, !case_sensitive);
}

static const char *const skip_dirs[] = {"node_modules", ".git", NULL};

/* A pattern with glob characters that names an existing file is taken literally (Next.js-style
 * `app/[id]/page.tsx`). Returns 1 and fills hits when it does. */
static int literal_hit(const toolbox_ctx *ctx, const char *dir, const char *pattern,
                       toolbox_files *hits)
{
    if (!strpbrk(pattern, "*?[{"))
        return 0;
    _cleanup_free_ char *joined = NULL, *literal = NULL;
    bool inside = false;
    if (pattern[0] != '/' && asprintf(&joined, "%s/%s", dir, pattern) < 0)
        return -ENOMEM;
    literal = toolbox_resolve(ctx, joined ? joined : pattern, &inside);
    struct stat st;
    if (!literal || !inside || lstat(literal, &st) < 0 || !S_ISREG(st.st_mode))
        return 0;
    if (!(hits->v = calloc(1, sizeof(toolbox_file))))
        return -ENOMEM;
    hits->v[0] = (toolbox_file){.path = TAKE_PTR(literal), .mtime = st.st_mtim, .size = st.st_size};
    hits->n = hits->cap = 1;
    return 1;
}

/* Files below dir matching pattern into hits; *ret_ignored counts git-ignored matches. */
static int glob_collect(const toolbox_ctx *ctx, const char *dir, const char *pattern,
                        bool case_sensitive, bool respect_git, bool respect_gemini,
                        toolbox_files *hits, size_t *ret_ignored)
{
    *ret_ignored = 0;
    int r = literal_hit(ctx, dir, pattern, hits);
    if (r != 0)
        return r < 0 ? r : 0;
    toolbox_ignore *ig = toolbox_ignore_load(ctx->root, respect_git, respect_gemini);
    toolbox_files all = {0}, ign_files = {0};
    r = toolbox_walk(ctx->root, dir, true, skip_dirs, ig, &all, &ign_files);
    toolbox_ignore_free(ig);
    for (size_t i = 0; r == 0 && i < ign_files.n; i++)
        *ret_ignored += glob_hit(pattern, dir, ign_files.v[i].path, case_sensitive);
    for (size_t i = 0; r == 0 && i < all.n; i++) {
        if (!glob_hit(pattern, dir, all.v[i].path, case_sensitive))
            continue;
        if (hits->n == hits->cap) {
            size_t cap = hits->cap ? hits->cap * 2 : 64;
            toolbox_file *t = realloc(hits->v, cap * sizeof(*t));
            if (!t) {
                r = -ENOMEM;
                break;
            }
            hits->v = t;
            hits->cap = cap;
        }
        hits->v[hits->n++] = all.v[i];
        all.v[i].path = NULL;
    }
    toolbox_files_free(&all);
    toolbox_files_free(&ign_files);
    return r;
}

int toolbox_glob(const toolbox_ctx *ctx, json_t *args, toolbox_result *res)
{
    const char *pattern, *dir_path;
    bool case_sensitive, respect_git, respect_gemini;
    if (toolbox_arg_string(args, "pattern", true, &pattern, res) < 0 ||
        toolbox_arg_string(args, "dir_path", false, &dir_path, res) < 0 ||
        toolbox_arg_bool(args, "case_sensitive", false, &case_sensitive, res) < 0 ||
        toolbox_arg_bool(args, "respect_git_ignore", true, &respect_git, res) < 0 ||
        toolbox_arg_bool(args, "respect_gemini_ignore", true, &respect_gemini, res) < 0)
        return 0;
    if (!pattern[strspn(pattern, " \t\n")])
        return toolbox_invalid(res, "The 'pattern' parameter cannot be empty.");
    _cleanup_free_ char *dir = NULL;
    int inside = toolbox_resolve_inside(ctx, dir_path ? dir_path : ".", &dir, res);
    if (inside <= 0)
        return inside;
    struct stat st;
    if (stat(dir, &st) < 0)
        return toolbox_invalid(res, "Search path does not exist %s", dir);
    if (!S_ISDIR(st.st_mode))
        return toolbox_invalid(res, "Search path is not a directory: %s", dir);

    toolbox_files hits = {0};
    size_t ignored = 0;
    int r = glob_collect(ctx, dir, pattern, case_sensitive, respect_git, respect_gemini, &hits,
                         &ignored);
    if (r < 0) {
        toolbox_files_free(&hits);
        return toolbox_fail(res, "glob_execution_error", "Error during glob search operation: %s",
                            strerror(-r));
    }
    _cleanup_free_ char *ign = NULL;
    if (ignored && asprintf(&ign, " (%zu additional files were git-ignored)", ignored) < 0)
        ign = NULL;
    if (hits.n == 0) {
        toolbox_set_llm(res, "No files found matching pattern \"%s\" within %s%s", pattern, dir,
                        ign ? ign : "");
        toolbox_set_display(res, "No files found");
        toolbox_files_free(&hits);
        return 0;
    }
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    now_ns = ts_ns(now);
    qsort(hits.v, hits.n, sizeof(toolbox_file), file_cmp);
    buf b = BUF_INIT;
    toolbox_buf_printf(&b,
                       "Found %zu file(s) matching \"%s\" within %s%s, sorted by modification "
                       "time (newest first):",
                       hits.n, pattern, dir, ign ? ign : "");
    for (size_t i = 0; i < hits.n; i++) {
        toolbox_buf_puts(&b, "\n");
        toolbox_buf_puts(&b, hits.v[i].path);
    }
    res->llm = toolbox_buf_steal(&b);
    toolbox_set_display(res, "Found %zu matching file(s)", hits.n);
    toolbox_files_free(&hits);
    return 0;
}
