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

int toolbox_read_many(const toolbox_ctx *ctx, json_t *args, toolbox_result *res)
{
    _cleanup_free_ const char **include = NULL, **exclude = NULL;
    bool recursive, defaults, respect_git;
    if (toolbox_arg_strv(args, "include", true, 1, true, &include, res) < 0 ||
        toolbox_arg_strv(args, "exclude", false, 0, false, &exclude, res) < 0 ||
        toolbox_arg_bool(args, "recursive", true, &recursive, res) < 0 ||
        toolbox_arg_bool(args, "useDefaultExcludes", true, &defaults, res) < 0 ||
        toolbox_arg_filtering(args, &respect_git, res) < 0)
        return 0;

    toolbox_ignore *ig = respect_git ? toolbox_ignore_load(ctx->root) : NULL;
    toolbox_files all = {0};
    bool walked = false;
    char **sel = NULL;
    size_t nsel = 0, outside = 0;
    for (size_t i = 0; include[i]; i++) {
        bool inside;
        _cleanup_free_ char *abs = toolbox_resolve(ctx, include[i], &inside);
        struct stat st;
        if (abs && !inside) {
            outside++;
            continue;
        }
        if (abs && lstat(abs, &st) == 0 && S_ISREG(st.st_mode)) {
            add(&sel, &nsel, abs);
            continue;
        }
        _cleanup_free_ char *pat = NULL;
        if (abs && stat(abs, &st) == 0 && S_ISDIR(st.st_mode)) {
            _cleanup_free_ char *rel = toolbox_relative(ctx->root, abs);
            if (rel && asprintf(&pat, "%s/%s", rel, recursive ? "**" : "*") < 0)
                pat = NULL;
            if (pat && strncmp(pat, "./", 2) == 0)
                memmove(pat, pat + 2, strlen(pat + 2) + 1);
        } else {
            pat = strdup(include[i][0] == '/' && abs ? abs : include[i]);
        }
        if (!pat)
            continue;
        if (!walked) {
            toolbox_walk(ctx->root, ctx->root, true, defaults ? default_skip : NULL, ig, &all,
                         NULL);
            walked = true;
        }
        for (size_t f = 0; f < all.n; f++) {
            _cleanup_free_ char *rel = toolbox_relative(ctx->root, all.v[f].path);
            bool m = pat[0] == '/' ? toolbox_glob_match(pat + 1, all.v[f].path + 1, false)
                                   : rel && toolbox_glob_match(pat, rel, false);
            if (m)
                add(&sel, &nsel, all.v[f].path);
        }
    }
    toolbox_files_free(&all);
    toolbox_ignore_free(ig);
    if (nsel)
        qsort(sel, nsel, sizeof(char *), path_cmp);

    toolbox_buf b = {0}, skipped = {0};
    size_t nread = 0;
    for (size_t i = 0; i < nsel; i++) {
        if (i > 0 && strcmp(sel[i], sel[i - 1]) == 0)
            continue;
        _cleanup_free_ char *rel = toolbox_relative(ctx->root, sel[i]);
        bool excluded = false;
        for (size_t e = 0; exclude[e] && !excluded; e++)
            excluded = rel && pattern_match(exclude[e], rel);
        if (excluded)
            continue;
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        int r = toolbox_read_all(sel[i], &data, &len);
        if (r < 0) {
            toolbox_buf_printf(&skipped, "\n- %s (%s)", rel ? rel : sel[i], strerror(-r));
            continue;
        }
        if (toolbox_is_binary(sel[i], data, len)) {
            toolbox_buf_printf(&skipped, "\n- %s (binary file)", rel ? rel : sel[i]);
            continue;
        }
        toolbox_text t;
        toolbox_text_slice(data, len, 0, TOOLBOX_MAX_LINES, &t);
        toolbox_buf_printf(&b, "--- %s ---\n\n", sel[i]);
        if (t.truncated)
            toolbox_buf_puts(&b, "[WARNING: This file was truncated. To view the full content, "
                                 "use the 'read_file' tool on this specific file.]\n\n");
        toolbox_buf_puts(&b, t.content);
        toolbox_buf_puts(&b, "\n\n");
        free(t.content);
        nread++;
    }
    for (size_t i = 0; i < nsel; i++)
        free(sel[i]);
    free(sel);
    if (nread == 0) {
        free(b.s);
        toolbox_set_llm(res, "No files matching the criteria were found or all were skipped.");
    } else {
        toolbox_buf_puts(&b, "\n--- End of content ---");
        res->llm = toolbox_buf_steal(&b);
    }
    if (outside)
        toolbox_buf_printf(&skipped, "\n- %zu path(s) outside the workspace", outside);
    toolbox_set_display(res, "Successfully read and concatenated content from %zu file(s).%s%s",
                        nread, skipped.len ? "\n\nSkipped:" : "", skipped.len ? skipped.s : "");
    free(skipped.s);
    return 0;
}
