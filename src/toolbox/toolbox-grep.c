/* grep_search (spec/AGENT.md §2.7): POSIX extended regular expressions (glibc, plus \d and \D),
 * case-insensitive by default, include_pattern glob, exclude_pattern line filter, context lines,
 * per-file and total match caps, names_only. */
#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "basic/macro.h"
#include "toolbox/toolbox.h"

static const char *const skip_dirs[] = {"node_modules", ".git", NULL};

/* \d and \D are not POSIX; everything else is passed through to regcomp. */
static char *translate(const char *p, bool fixed)
{
    toolbox_buf b = {0};
    toolbox_buf_add(&b, "", 0);
    for (const char *c = p; *c; c++) {
        if (fixed) {
            if (strchr("\\^$.[]|()*+?{}", *c))
                toolbox_buf_add(&b, "\\", 1);
            toolbox_buf_add(&b, c, 1);
        } else if (c[0] == '\\' && c[1] == 'd') {
            toolbox_buf_puts(&b, "[0-9]");
            c++;
        } else if (c[0] == '\\' && c[1] == 'D') {
            toolbox_buf_puts(&b, "[^0-9]");
            c++;
        } else if (c[0] == '\\' && c[1]) {
            toolbox_buf_add(&b, c, 2);
            c++;
        } else {
            toolbox_buf_add(&b, c, 1);
        }
    }
    return toolbox_buf_steal(&b);
}

typedef struct hit {
    size_t file; /* index into files */
    size_t line; /* 0-based */
} hit;

typedef struct text {
    char *data;
    size_t len;
    const char **lines; /* starts */
    size_t *lens;
    size_t n;
} text;

static void text_free(text *t)
{
    free(t->data);
    free(t->lines);
    free(t->lens);
    *t = (text){0};
}

static int text_split(text *t)
{
    size_t n = 1;
    for (size_t i = 0; i < t->len; i++)
        n += t->data[i] == '\n';
    t->lines = calloc(n, sizeof(char *));
    t->lens = calloc(n, sizeof(size_t));
    if (!t->lines || !t->lens)
        return -ENOMEM;
    const char *p = t->data, *end = t->data + t->len;
    for (size_t i = 0; i < n; i++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *e = nl ? nl : end;
        t->lines[i] = p;
        t->lens[i] = (size_t)(e - p);
        if (t->lens[i] && p[t->lens[i] - 1] == '\r')
            t->lens[i]--;
        p = nl ? nl + 1 : end;
    }
    /* A trailing newline does not start a line of its own (as grep and ripgrep count). */
    t->n = (t->len > 0 && t->data[t->len - 1] == '\n') ? n - 1 : n;
    if (t->len == 0)
        t->n = 0;
    return 0;
}

static bool line_matches(const regex_t *re, const char *s, size_t len)
{
    regmatch_t m[1] = {{.rm_so = 0, .rm_eo = (regoff_t)len}};
    return regexec(re, s, 1, m, REG_STARTEND) == 0;
}

static bool include_match(const char *include, const char *rel)
{
    if (!include)
        return true;
    if (strchr(include, '/'))
        return toolbox_glob_match(include, rel, false);
    const char *base = strrchr(rel, '/');
    return toolbox_glob_match(include, base ? base + 1 : rel, false);
}

static int path_cmp(const void *a, const void *b)
{
    return strcmp(((const toolbox_file *)a)->path, ((const toolbox_file *)b)->path);
}

static void add_line(toolbox_buf *b, size_t no, char sep, const char *s, size_t len)
{
    toolbox_buf_printf(b, "\nL%zu%c ", no + 1, sep);
    toolbox_buf_add(b, s, MIN(len, (size_t)TOOLBOX_MAX_LINE_LEN));
    if (len > TOOLBOX_MAX_LINE_LEN)
        toolbox_buf_puts(b, "... [truncated]");
}

int toolbox_grep(const toolbox_ctx *ctx, json_t *args, toolbox_result *res)
{
    const char *pattern, *dir_path, *include, *include_legacy, *exclude;
    bool names_only, case_sensitive, fixed, no_ignore;
    long long per_file = 0, total_max = TOOLBOX_GREP_DEFAULT_MAX, context = 0, before = 0,
              after = 0;
    bool has_per_file, has_total, has_ctx, has_before, has_after;
    if (toolbox_arg_string(args, "pattern", true, &pattern, res) < 0 ||
        toolbox_arg_string(args, "dir_path", false, &dir_path, res) < 0 ||
        toolbox_arg_string(args, "include_pattern", false, &include, res) < 0 ||
        toolbox_arg_string(args, "include", false, &include_legacy, res) < 0 ||
        toolbox_arg_string(args, "exclude_pattern", false, &exclude, res) < 0 ||
        toolbox_arg_bool(args, "names_only", false, &names_only, res) < 0 ||
        toolbox_arg_bool(args, "case_sensitive", false, &case_sensitive, res) < 0 ||
        toolbox_arg_bool(args, "fixed_strings", false, &fixed, res) < 0 ||
        toolbox_arg_bool(args, "no_ignore", false, &no_ignore, res) < 0 ||
        toolbox_arg_int(args, "max_matches_per_file", 1, &per_file, &has_per_file, res) < 0 ||
        toolbox_arg_int(args, "total_max_matches", 1, &total_max, &has_total, res) < 0 ||
        toolbox_arg_int(args, "context", 0, &context, &has_ctx, res) < 0 ||
        toolbox_arg_int(args, "before", 0, &before, &has_before, res) < 0 ||
        toolbox_arg_int(args, "after", 0, &after, &has_after, res) < 0)
        return 0;
    if (!include)
        include = include_legacy;
    if (include && !*include)
        include = NULL;
    if (!*pattern)
        return toolbox_invalid(res, "The 'pattern' parameter cannot be empty.");
    if (!has_total)
        total_max = TOOLBOX_GREP_DEFAULT_MAX;

    int cflags = REG_EXTENDED | REG_NOSUB | (case_sensitive ? 0 : REG_ICASE);
    regex_t re, ex;
    _cleanup_free_ char *tp = translate(pattern, fixed);
    int k = regcomp(&re, tp, cflags);
    if (k != 0) {
        char msg[256];
        regerror(k, &re, msg, sizeof(msg));
        return toolbox_invalid(res, "Invalid regular expression pattern provided: %s. Error: %s",
                               pattern, msg);
    }
    bool has_ex = false;
    if (exclude && *exclude) {
        _cleanup_free_ char *te = translate(exclude, false);
        k = regcomp(&ex, te, cflags);
        if (k != 0) {
            char msg[256];
            regerror(k, &ex, msg, sizeof(msg));
            regfree(&re);
            return toolbox_invalid(res,
                                   "Invalid regular expression pattern provided for "
                                   "exclude_pattern: %s. Error: %s",
                                   exclude, msg);
        }
        has_ex = true;
    }

    int ret = 0;
    toolbox_files files = {0};
    hit *hits = NULL;
    size_t nhits = 0;
    text *texts = NULL;
    toolbox_ignore *ig = NULL;
    _cleanup_free_ char *where = NULL, *base = NULL, *filter = NULL, *lim = NULL;

    bool inside;
    _cleanup_free_ char *target =
        toolbox_resolve(ctx, dir_path && *dir_path ? dir_path : ".", &inside);
    if (!target) {
        ret = -ENOMEM;
        goto out;
    }
    if (!inside) {
        ret = toolbox_outside(ctx, res, target);
        goto out;
    }
    struct stat st;
    if (stat(target, &st) < 0) {
        ret = toolbox_invalid(res, "Path does not exist: %s", target);
        goto out;
    }
    if (dir_path && *dir_path) {
        if (asprintf(&where, "in path \"%s\"", dir_path) < 0)
            where = NULL;
    } else {
        where = strdup("in the workspace directory");
    }
    if (!no_ignore)
        ig = toolbox_ignore_load(ctx->root);
    if (S_ISDIR(st.st_mode)) {
        base = strdup(target);
        int r = toolbox_walk(ctx->root, target, true, skip_dirs, ig, &files, NULL);
        if (r < 0) {
            ret = toolbox_fail(res, "grep_execution_error",
                               "Error during grep search operation: %s", strerror(-r));
            goto out;
        }
    } else {
        char *slash = strrchr(target, '/');
        base = slash == target ? strdup("/") : strndup(target, (size_t)(slash - target));
        files.v = calloc(1, sizeof(toolbox_file));
        if (!files.v || !(files.v[0].path = strdup(target))) {
            ret = -ENOMEM;
            goto out;
        }
        files.n = files.cap = 1;
    }
    /* Files in path order, filtered by include_pattern. */
    qsort(files.v, files.n, sizeof(toolbox_file), path_cmp);
    texts = calloc(files.n ? files.n : 1, sizeof(text));
    if (!texts) {
        ret = -ENOMEM;
        goto out;
    }
    bool limited = false;
    for (size_t f = 0; f < files.n && !limited; f++) {
        _cleanup_free_ char *rel = toolbox_relative(base, files.v[f].path);
        if (!rel || !include_match(include, rel))
            continue;
        text *t = &texts[f];
        if (toolbox_read_all(files.v[f].path, &t->data, &t->len) < 0)
            continue;
        if (toolbox_is_binary("", t->data, t->len) || text_split(t) < 0) {
            text_free(t);
            continue;
        }
        size_t in_file = 0;
        for (size_t l = 0; l < t->n; l++) {
            if (!line_matches(&re, t->lines[l], t->lens[l]))
                continue;
            if (has_ex && line_matches(&ex, t->lines[l], t->lens[l]))
                continue;
            if ((long long)nhits >= total_max) {
                limited = true;
                break;
            }
            hit *h = realloc(hits, (nhits + 1) * sizeof(*h));
            if (!h) {
                ret = -ENOMEM;
                goto out;
            }
            hits = h;
            hits[nhits++] = (hit){.file = f, .line = l};
            if (has_per_file && (long long)++in_file >= per_file)
                break;
        }
    }

    if (include && asprintf(&filter, " (filter: \"%s\")", include) < 0)
        filter = NULL;
    if (nhits == 0) {
        toolbox_set_llm(res, "No matches found for pattern \"%s\" %s%s.", pattern,
                        where ? where : "", filter ? filter : "");
        toolbox_set_display(res, "No matches found");
        goto out;
    }
    if (limited &&
        asprintf(&lim, " (results limited to %lld matches for performance)", total_max) < 0)
        lim = NULL;
    toolbox_buf b = {0};
    if (names_only) {
        size_t nf = 0;
        for (size_t i = 0; i < nhits; i++)
            nf += i == 0 || hits[i].file != hits[i - 1].file;
        toolbox_buf_printf(&b, "Found %zu files with matches for pattern \"%s\" %s%s%s:", nf,
                           pattern, where ? where : "", filter ? filter : "", lim ? lim : "");
        for (size_t i = 0; i < nhits; i++) {
            if (i > 0 && hits[i].file == hits[i - 1].file)
                continue;
            _cleanup_free_ char *rel = toolbox_relative(base, files.v[hits[i].file].path);
            toolbox_buf_printf(&b, "\n%s", rel ? rel : "");
        }
        res->llm = toolbox_buf_steal(&b);
        toolbox_set_display(res, "Found %zu files", nf);
        goto out;
    }
    if (has_ctx) {
        if (!has_before)
            before = context;
        if (!has_after)
            after = context;
    }
    if (!has_ctx && !has_before && !has_after && nhits <= 3)
        before = after = nhits == 1 ? 50 : 15; /* gemini-cli adds context to few matches */
    toolbox_buf_printf(&b, "Found %zu %s for pattern \"%s\" %s%s%s:\n---", nhits,
                       nhits == 1 ? "match" : "matches", pattern, where ? where : "",
                       filter ? filter : "", lim ? lim : "");
    for (size_t i = 0; i < nhits;) {
        size_t f = hits[i].file, j = i;
        while (j < nhits && hits[j].file == f)
            j++;
        _cleanup_free_ char *rel = toolbox_relative(base, files.v[f].path);
        toolbox_buf_printf(&b, "\nFile: %s", rel ? rel : "");
        const text *t = &texts[f];
        size_t next = 0; /* first line not yet printed */
        for (size_t h = i; h < j; h++) {
            size_t l = hits[h].line;
            size_t from = l > (size_t)before ? l - (size_t)before : 0;
            if (from < next)
                from = next;
            for (size_t c = from; c < l; c++)
                add_line(&b, c, '-', t->lines[c], t->lens[c]);
            if (l >= next) {
                add_line(&b, l, ':', t->lines[l], t->lens[l]);
                next = l + 1;
            }
            size_t to = MIN(t->n, l + 1 + (size_t)after);
            if (h + 1 < j && hits[h + 1].line < to)
                to = hits[h + 1].line;
            for (size_t c = next; c < to; c++)
                add_line(&b, c, '-', t->lines[c], t->lens[c]);
            if (to > next)
                next = to;
        }
        toolbox_buf_puts(&b, "\n---");
        i = j;
    }
    while (b.len > 0 && strchr(" \t\r\n", b.s[b.len - 1]))
        b.s[--b.len] = '\0';
    res->llm = toolbox_buf_steal(&b);
    toolbox_set_display(res, "Found %zu %s%s", nhits, nhits == 1 ? "match" : "matches",
                        limited ? " (limited)" : "");
out:
    regfree(&re);
    if (has_ex)
        regfree(&ex);
    for (size_t i = 0; texts && i < files.n; i++)
        text_free(&texts[i]);
    free(texts);
    free(hits);
    toolbox_files_free(&files);
    toolbox_ignore_free(ig);
    return ret;
}
