/* list_directory (spec/AGENT.md §2.2): directories first, then files, each sorted by name;
 * ignore globs match basenames; .gitignore respected by default. */
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "basic/macro.h"
#include "toolbox/toolbox.h"

typedef struct entry {
    char *name;
    bool dir;
    off_t size;
} entry;

static int entry_cmp(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    if (x->dir != y->dir)
        return x->dir ? -1 : 1;
    int c = strcasecmp(x->name, y->name);
    return c ? c : strcmp(x->name, y->name);
}

/* file_filtering_options.respect_git_ignore (default true). */
int toolbox_arg_filtering(json_t *args, bool *respect_git, bool *respect_gemini,
                          toolbox_result *res)
{
    *respect_git = *respect_gemini = true;
    json_t *o = json_object_get(args, "file_filtering_options");
    if (!o || json_is_null(o))
        return 0;
    if (!json_is_object(o)) {
        toolbox_invalid(res, "params/file_filtering_options must be object");
        return -EINVAL;
    }
    if (toolbox_arg_bool(o, "respect_git_ignore", true, respect_git, res) < 0 ||
        toolbox_arg_bool(o, "respect_gemini_ignore", true, respect_gemini, res) < 0)
        return -EINVAL;
    return 0;
}

int toolbox_ls(const toolbox_ctx *ctx, json_t *args, toolbox_result *res)
{
    const char *dir_path;
    _cleanup_free_ const char **ignore = NULL;
    bool respect_git, respect_gemini;
    if (toolbox_arg_string(args, "dir_path", true, &dir_path, res) < 0 ||
        toolbox_arg_strv(args, "ignore", false, 0, false, &ignore, res) < 0 ||
        toolbox_arg_filtering(args, &respect_git, &respect_gemini, res) < 0)
        return 0;
    _cleanup_free_ char *abs = NULL;
    int inside = toolbox_resolve_inside(ctx, dir_path, &abs, res);
    if (inside <= 0)
        return inside;
    struct stat st;
    if (stat(abs, &st) < 0)
        return toolbox_fail(res, "file_not_found", "Error: Directory not found or inaccessible: %s",
                            abs);
    if (!S_ISDIR(st.st_mode))
        return toolbox_fail(res, "path_is_not_a_directory", "Error: Path is not a directory: %s",
                            abs);
    DIR *d = opendir(abs);
    if (!d)
        return toolbox_fail(res, "ls_execution_error", "Error listing directory: %s",
                            strerror(errno));
    toolbox_ignore *ig = toolbox_ignore_load(ctx->root, respect_git, respect_gemini);
    entry *v = NULL;
    size_t n = 0, ignored = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        bool skip = false;
        for (size_t i = 0; ignore[i] && !skip; i++)
            skip = fnmatch(ignore[i], de->d_name, 0) == 0;
        if (skip)
            continue;
        _cleanup_free_ char *path = NULL;
        if (asprintf(&path, "%s/%s", strcmp(abs, "/") == 0 ? "" : abs, de->d_name) < 0)
            break;
        struct stat es;
        if (stat(path, &es) < 0 && lstat(path, &es) < 0)
            continue;
        bool is_dir = S_ISDIR(es.st_mode);
        if (ig) {
            _cleanup_free_ char *rel = toolbox_relative(ctx->root, path);
            if (rel && toolbox_ignore_match(ig, rel, is_dir)) {
                ignored++;
                continue;
            }
        }
        entry *t = realloc(v, (n + 1) * sizeof(*t));
        if (!t)
            break;
        v = t;
        v[n].name = strdup(de->d_name);
        v[n].dir = is_dir;
        v[n].size = es.st_size;
        if (v[n].name)
            n++;
    }
    closedir(d);
    toolbox_ignore_free(ig);
    if (n == 0) {
        free(v);
        toolbox_set_llm(res, "Directory %s is empty.", abs);
        toolbox_set_display(res, "Directory is empty.");
        return 0;
    }
    qsort(v, n, sizeof(*v), entry_cmp);
    buf b = BUF_INIT;
    toolbox_buf_printf(&b, "Directory listing for %s:\n", abs);
    for (size_t i = 0; i < n; i++) {
        if (i)
            toolbox_buf_puts(&b, "\n");
        if (v[i].dir)
            toolbox_buf_printf(&b, "[DIR] %s", v[i].name);
        else
            toolbox_buf_printf(&b, "%s (%lld bytes)", v[i].name, (long long)v[i].size);
        free(v[i].name);
    }
    free(v);
    if (ignored)
        toolbox_buf_printf(&b, "\n\n(%zu ignored)", ignored);
    res->llm = toolbox_buf_steal(&b);
    if (ignored)
        toolbox_set_display(res, "Listed %zu item(s). (%zu ignored)", n, ignored);
    else
        toolbox_set_display(res, "Listed %zu item(s).", n);
    return 0;
}
