/* read_many_files (spec/AGENT.md §2.8): globs and paths relative to the workspace, text files
 * concatenated with "--- <path> ---" separators. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "basic/macro.h"
#include "toolbox/toolbox.h"

static const char *const default_skip[] = {"node_modules", ".git", NULL};

static int path_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool pattern_match(const char *pattern, const char *rel)
{
    if (toolbox_glob_match(pattern, rel, false))
        return true;
    if (strchr(pattern, '/'))
        return false;
    const char *base = strrchr(rel, '/');
    return base && toolbox_glob_match(pattern, base + 1, false);
}

static void add(char ***v, size_t *n, const char *p)
{
    char **t = realloc(*v, (*n + 1) * sizeof(char *));
    if (!t)
        return;
    *v = t;
    if (((*v)[*n] = strdup(p)))
        (*n)++;
}

typedef struct selection {
    char **v;
    size_t n, outside;
} selection;

/* The files one include entry names: a file, a directory (its files), or a glob relative to the
 * workspace (matched against `all`, walked once on first need). */
static void select_entry(const toolbox_ctx *ctx, const char *entry, bool recursive,
                         const char *const *skip, const toolbox_ignore *ig, toolbox_files *all,
                         bool *walked, selection *sel)
{
    bool inside;
    _cleanup_free_ char *abs = toolbox_resolve(ctx, entry, &inside);
    struct stat st;
    if (!abs)
        return;
    if (!inside) {
        sel->outside++;
        return;
    }
    if (lstat(abs, &st) == 0 && S_ISREG(st.st_mode)) {
        add(&sel->v, &sel->n, abs);
        return;
    }
    _cleanup_free_ char *pat = NULL;
    if (stat(abs, &st) == 0 && S_ISDIR(st.st_mode)) {
        _cleanup_free_ char *rel = toolbox_relative(ctx->root, abs);
        if (!rel || asprintf(&pat, "%s/%s", rel, recursive ? "**" : "*") < 0)
            return;
        if (strncmp(pat, "./", 2) == 0)
            memmove(pat, pat + 2, strlen(pat + 2) + 1);
    } else if (!(pat = strdup(entry[0] == '/' ? abs : entry))) {
        return;
    }
    if (!*walked) {
        toolbox_walk(ctx->root, ctx->root, true, skip, ig, all, NULL);
        *walked = true;
    }
    for (size_t f = 0; f < all->n; f++) {
        _cleanup_free_ char *rel = toolbox_relative(ctx->root, all->v[f].path);
        bool m = pat[0] == '/' ? toolbox_glob_match(pat + 1, all->v[f].path + 1, false)
                               : rel && toolbox_glob_match(pat, rel, false);
        if (m)
            add(&sel->v, &sel->n, all->v[f].path);
    }
}

/* Appends one file's block; a skipped file goes to *skipped instead. Returns true if read. */
static bool append_file(buf *b, buf *skipped, const char *path, const char *rel)
{
    _cleanup_free_ char *data = NULL;
    size_t len = 0;
    int r = toolbox_read_all(path, &data, &len);
    if (r < 0) {
        toolbox_buf_printf(skipped, "\n- %s (%s)", rel, strerror(-r));
        return false;
    }
    if (toolbox_is_binary(path, data, len)) {
        toolbox_buf_printf(skipped, "\n- %s (binary file)", rel);
        return false;
    }
    toolbox_text t;
    toolbox_text_slice(data, len, 0, TOOLBOX_MAX_LINES, &t);
    toolbox_buf_printf(b, "--- %s ---\n\n", path);
    if (t.truncated)
        toolbox_buf_puts(b, "[WARNING: This file was truncated. To view the full content, use "
                            "the 'read_file' tool on this specific file.]\n\n");
    toolbox_buf_puts(b, t.content);
    toolbox_buf_puts(b, "\n\n");
    free(t.content);
    return true;
}

int toolbox_read_many(const toolbox_ctx *ctx, json_t *args, toolbox_result *res)
{
    _cleanup_free_ const char **include = NULL, **exclude = NULL;
    bool recursive, defaults, respect_git, respect_gemini;
    if (toolbox_arg_strv(args, "include", true, 1, true, &include, res) < 0 ||
        toolbox_arg_strv(args, "exclude", false, 0, false, &exclude, res) < 0 ||
        toolbox_arg_bool(args, "recursive", true, &recursive, res) < 0 ||
        toolbox_arg_bool(args, "useDefaultExcludes", true, &defaults, res) < 0 ||
        toolbox_arg_filtering(args, &respect_git, &respect_gemini, res) < 0)
        return 0;

    toolbox_ignore *ig = toolbox_ignore_load(ctx->root, respect_git, respect_gemini);
    toolbox_files all = {0};
    bool walked = false;
    selection sel = {0};
    for (size_t i = 0; include[i]; i++)
        select_entry(ctx, include[i], recursive, defaults ? default_skip : NULL, ig, &all, &walked,
                     &sel);
    toolbox_files_free(&all);
    toolbox_ignore_free(ig);
    if (sel.n)
        qsort(sel.v, sel.n, sizeof(char *), path_cmp);

    buf b = BUF_INIT, skipped = BUF_INIT;
    size_t nread = 0;
    for (size_t i = 0; i < sel.n; i++) {
        if (i > 0 && strcmp(sel.v[i], sel.v[i - 1]) == 0)
            continue;
        _cleanup_free_ char *rel = toolbox_relative(ctx->root, sel.v[i]);
        bool excluded = false;
        for (size_t e = 0; exclude[e] && !excluded; e++)
            excluded = rel && pattern_match(exclude[e], rel);
        if (!excluded && append_file(&b, &skipped, sel.v[i], rel ? rel : sel.v[i]))
            nread++;
    }
    for (size_t i = 0; i < sel.n; i++)
        free(sel.v[i]);
    free(sel.v);
    if (nread == 0) {
        free(b.data);
        toolbox_set_llm(res, "No files matching the criteria were found or all were skipped.");
    } else {
        toolbox_buf_puts(&b, "\n--- End of content ---");
        res->llm = toolbox_buf_steal(&b);
    }
    if (sel.outside)
        toolbox_buf_printf(&skipped, "\n- %zu path(s) outside the workspace", sel.outside);
    toolbox_set_display(res, "Successfully read and concatenated content from %zu file(s).%s%s",
                        nread, skipped.len ? "\n\nSkipped:" : "", skipped.len ? skipped.data : "");
    free(skipped.data);
    return 0;
}
