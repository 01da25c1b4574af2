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
    buf b = BUF_INIT;
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

static void add_line(buf *b, size_t no, char sep, const char *s, size_t len)
{
    toolbox_buf_printf(b, "\nL%zu%c ", no + 1, sep);
    toolbox_buf_add(b, s, MIN(len, (size_t)TOOLBOX_MAX_LINE_LEN));
    if (len > TOOLBOX_MAX_LINE_LEN)
        toolbox_buf_puts(b, "... [truncated]");
}

typedef struct grep_opts {
    const char *pattern, *dir_path, *include, *exclude;
    bool names_only, case_sensitive, fixed, no_ignore;
    long long per_file, total_max, before, after;
    bool has_per_file, auto_context;
} grep_opts;

/* Parameters (AGENT.md §2.7 current, plus the old name `include`). 0 or -EINVAL. */
static int grep_parse(json_t *args, grep_opts *o, toolbox_result *res)
{
    const char *include_legacy;
    long long context = 0;
    bool has_total, has_ctx, has_before, has_after;
    *o = (grep_opts){.total_max = TOOLBOX_GREP_DEFAULT_MAX};
    if (toolbox_arg_string(args, "pattern", true, &o->pattern, res) < 0 ||
        toolbox_arg_string(args, "dir_path", false, &o->dir_path, res) < 0 ||
        toolbox_arg_string(args, "include_pattern", false, &o->include, res) < 0 ||
        toolbox_arg_string(args, "include", false, &include_legacy, res) < 0 ||
        toolbox_arg_string(args, "exclude_pattern", false, &o->exclude, res) < 0 ||
        toolbox_arg_bool(args, "names_only", false, &o->names_only, res) < 0 ||
        toolbox_arg_bool(args, "case_sensitive", false, &o->case_sensitive, res) < 0 ||
        toolbox_arg_bool(args, "fixed_strings", false, &o->fixed, res) < 0 ||
        toolbox_arg_bool(args, "no_ignore", false, &o->no_ignore, res) < 0 ||
        toolbox_arg_int(args, "max_matches_per_file", 1, &o->per_file, &o->has_per_file, res) < 0 ||
        toolbox_arg_int(args, "total_max_matches", 1, &o->total_max, &has_total, res) < 0 ||
        toolbox_arg_int(args, "context", 0, &context, &has_ctx, res) < 0 ||
        toolbox_arg_int(args, "before", 0, &o->before, &has_before, res) < 0 ||
        toolbox_arg_int(args, "after", 0, &o->after, &has_after, res) < 0)
        return -EINVAL;
    if (!o->include)
        o->include = include_legacy;
    if (o->include && !*o->include)
        o->include = NULL;
    if (o->dir_path && !*o->dir_path)
        o->dir_path = NULL;
    if (!has_total)
        o->total_max = TOOLBOX_GREP_DEFAULT_MAX;
    if (has_ctx) {
        if (!has_before)
            o->before = context;
        if (!has_after)
            o->after = context;
    }
    o->auto_context = !has_ctx && !has_before && !has_after;
    if (!*o->pattern) {
        toolbox_invalid(res, "The 'pattern' parameter cannot be empty.");
        return -EINVAL;
    }
    return 0;
}

/* Compiles p (a bad one is a parameter error naming `what`). 0 or -EINVAL. */
static int grep_compile(regex_t *re, const char *p, bool fixed, int cflags, const char *what,
                        toolbox_result *res)
{
    _cleanup_free_ char *t = translate(p, fixed);
    int k = regcomp(re, t, cflags);
    if (k == 0)
        return 0;
    char msg[256];
    regerror(k, re, msg, sizeof(msg)); /* a failed regcomp leaves nothing to regfree */
    toolbox_invalid(res, "Invalid regular expression pattern provided%s: %s. Error: %s", what, p,
                    msg);
    return -EINVAL;
}

/* One search: files in path order, their texts (kept for context lines) and the hits. */
typedef struct grep_run {
    const grep_opts *o;
    regex_t re, ex;
    bool has_ex;
    char *base; /* paths in the output are relative to it */
    toolbox_files files;
    text *texts;
    hit *hits;
    size_t nhits;
    bool limited;
} grep_run;

static void grep_run_done(grep_run *g)
{
    regfree(&g->re);
    if (g->has_ex)
        regfree(&g->ex);
    for (size_t i = 0; g->texts && i < g->files.n; i++)
        text_free(&g->texts[i]);
    free(g->texts);
    free(g->hits);
    free(g->base);
    toolbox_files_free(&g->files);
}

static int grep_file(grep_run *g, size_t f)
{
    text *t = &g->texts[f];
    if (toolbox_read_all(g->files.v[f].path, &t->data, &t->len) < 0)
        return 0;
    if (toolbox_is_binary("", t->data, t->len) || text_split(t) < 0) {
        text_free(t);
        return 0;
    }
    size_t in_file = 0;
    for (size_t l = 0; l < t->n; l++) {
        if (!line_matches(&g->re, t->lines[l], t->lens[l]))
            continue;
        if (g->has_ex && line_matches(&g->ex, t->lines[l], t->lens[l]))
            continue;
        if ((long long)g->nhits >= g->o->total_max) {
            g->limited = true;
            return 0;
        }
        hit *h = realloc(g->hits, (g->nhits + 1) * sizeof(*h));
        if (!h)
            return -ENOMEM;
        g->hits = h;
        g->hits[g->nhits++] = (hit){.file = f, .line = l};
        if (g->o->has_per_file && (long long)++in_file >= g->o->per_file)
            break;
    }
    return 0;
}

/* Collects the files below (or the single file) target and searches them. */
static int grep_search(grep_run *g, const toolbox_ctx *ctx, const char *target, bool is_dir)
{
    toolbox_ignore *ig = g->o->no_ignore ? NULL : toolbox_ignore_load(ctx->root, true, true);
    int r = 0;
    if (is_dir) {
        g->base = strdup(target);
        r = toolbox_walk(ctx->root, target, true, skip_dirs, ig, &g->files, NULL);
    } else {
        char *slash = strrchr(target, '/');
        g->base = slash == target ? strdup("/") : strndup(target, (size_t)(slash - target));
        g->files.v = calloc(1, sizeof(toolbox_file));
        if (!g->files.v || !(g->files.v[0].path = strdup(target)))
            r = -ENOMEM;
        else
            g->files.n = g->files.cap = 1;
    }
    toolbox_ignore_free(ig);
    if (r < 0)
        return r;
    if (!g->base)
        return -ENOMEM;
    qsort(g->files.v, g->files.n, sizeof(toolbox_file), path_cmp);
    g->texts = calloc(g->files.n ? g->files.n : 1, sizeof(text));
    if (!g->texts)
        return -ENOMEM;
    for (size_t f = 0; f < g->files.n && !g->limited; f++) {
        _cleanup_free_ char *rel = toolbox_relative(g->base, g->files.v[f].path);
        if (!rel || !include_match(g->o->include, rel))
            continue;
        r = grep_file(g, f);
        if (r < 0)
            return r;
    }
    return 0;
}

/* One file's block: match lines and their before/after context, overlaps merged. */
static void grep_format_file(buf *b, const grep_run *g, size_t i, size_t j, size_t before,
                             size_t after)
{
    const text *t = &g->texts[g->hits[i].file];
    size_t next = 0; /* first line not yet printed */
    for (size_t h = i; h < j; h++) {
        size_t l = g->hits[h].line;
        size_t from = l > before ? l - before : 0;
        for (size_t c = MAX(from, next); c < l; c++)
            add_line(b, c, '-', t->lines[c], t->lens[c]);
        if (l >= next) {
            add_line(b, l, ':', t->lines[l], t->lens[l]);
            next = l + 1;
        }
        size_t to = MIN(t->n, l + 1 + after);
        if (h + 1 < j && g->hits[h + 1].line < to)
            to = g->hits[h + 1].line;
        for (size_t c = next; c < to; c++)
            add_line(b, c, '-', t->lines[c], t->lens[c]);
        next = MAX(next, to);
    }
}

static char *grep_format(const grep_run *g, const char *where, const char *filter, const char *lim)
{
    const grep_opts *o = g->o;
    buf b = BUF_INIT;
    if (o->names_only) {
        size_t nf = 0;
        for (size_t i = 0; i < g->nhits; i++)
            nf += i == 0 || g->hits[i].file != g->hits[i - 1].file;
        toolbox_buf_printf(&b, "Found %zu files with matches for pattern \"%s\" %s%s%s:", nf,
                           o->pattern, where, filter, lim);
        for (size_t i = 0; i < g->nhits; i++) {
            if (i > 0 && g->hits[i].file == g->hits[i - 1].file)
                continue;
            _cleanup_free_ char *rel = toolbox_relative(g->base, g->files.v[g->hits[i].file].path);
            toolbox_buf_printf(&b, "\n%s", rel ? rel : "");
        }
        return toolbox_buf_steal(&b);
    }
    size_t before = (size_t)o->before, after = (size_t)o->after;
    if (o->auto_context && g->nhits <= 3) /* gemini-cli adds context to few matches */
        before = after = g->nhits == 1 ? 50 : 15;
    toolbox_buf_printf(&b, "Found %zu %s for pattern \"%s\" %s%s%s:\n---", g->nhits,
                       g->nhits == 1 ? "match" : "matches", o->pattern, where, filter, lim);
    for (size_t i = 0; i < g->nhits;) {
        size_t j = i;
        while (j < g->nhits && g->hits[j].file == g->hits[i].file)
            j++;
        _cleanup_free_ char *rel = toolbox_relative(g->base, g->files.v[g->hits[i].file].path);
        toolbox_buf_printf(&b, "\nFile: %s", rel ? rel : "");
        grep_format_file(&b, g, i, j, before, after);
        toolbox_buf_puts(&b, "\n---");
        i = j;
    }
    while (b.len > 0 && strchr(" \t\r\n", b.data[b.len - 1]))
        b.data[--b.len] = '\0';
    return toolbox_buf_steal(&b);
}

int toolbox_grep(const toolbox_ctx *ctx, json_t *args, toolbox_result *res)
{
    grep_opts o;
    if (grep_parse(args, &o, res) < 0)
        return 0;
    _cleanup_free_ char *target = NULL;
    int inside = toolbox_resolve_inside(ctx, o.dir_path ? o.dir_path : ".", &target, res);
    if (inside <= 0)
        return inside;
    struct stat st;
    if (stat(target, &st) < 0)
        return toolbox_invalid(res, "Path does not exist: %s", target);

    grep_run g = {.o = &o};
    int cflags = REG_EXTENDED | REG_NOSUB | (o.case_sensitive ? 0 : REG_ICASE);
    if (grep_compile(&g.re, o.pattern, o.fixed, cflags, "", res) < 0)
        return 0;
    if (o.exclude && *o.exclude) {
        if (grep_compile(&g.ex, o.exclude, false, cflags, " for exclude_pattern", res) < 0) {
            regfree(&g.re);
            return 0;
        }
        g.has_ex = true;
    }
    int r = grep_search(&g, ctx, target, S_ISDIR(st.st_mode));
    if (r < 0) {
        grep_run_done(&g);
        return toolbox_fail(res, "grep_execution_error", "Error during grep search operation: %s",
                            strerror(-r));
    }
    _cleanup_free_ char *where = NULL, *filter = NULL, *lim = NULL;
    if (o.dir_path ? asprintf(&where, "in path \"%s\"", o.dir_path) < 0
                   : !(where = strdup("in the workspace directory")))
        where = NULL;
    if (!o.include || asprintf(&filter, " (filter: \"%s\")", o.include) < 0)
        filter = NULL;
    if (!g.limited ||
        asprintf(&lim, " (results limited to %lld matches for performance)", o.total_max) < 0)
        lim = NULL;
    if (g.nhits == 0) {
        toolbox_set_llm(res, "No matches found for pattern \"%s\" %s%s.", o.pattern,
                        where ? where : "", filter ? filter : "");
        toolbox_set_display(res, "No matches found");
    } else {
        res->llm = grep_format(&g, where ? where : "", filter ? filter : "", lim ? lim : "");
        toolbox_set_display(res, "Found %zu %s%s", g.nhits, g.nhits == 1 ? "match" : "matches",
                            g.limited ? " (limited)" : "");
    }
    grep_run_done(&g);
    return 0;
}
