/* geminicli-toolbox: the gemini-cli tool surface (spec/AGENT.md §2, 'Current' column) run inside
 * a sandbox. One tool per invocation: name on the command line, JSON arguments in, one JSON
 * result object out (docs/agent-toolbox.md). Shared types and helpers of src/toolbox. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "basic/buf.h"

#define TOOLBOX_MAX_LINES 2000            /* lines per text read */
#define TOOLBOX_MAX_LINE_LEN 2000         /* characters per line */
#define TOOLBOX_MAX_FILE_SIZE (20u << 20) /* files over 20 MB refused */
#define TOOLBOX_GREP_DEFAULT_MAX 100      /* grep_search total_max_matches default */

/* What the model sees (llm), what a person sees (display) and, for a tool-level error, its
 * message and gemini-cli ToolErrorType name. All strings owned. */
typedef struct toolbox_result {
    char *llm;
    char *display;
    char *error;
    const char *error_type;
} toolbox_result;

/* The workspace every path must stay in (absolute, symlinks resolved). */
typedef struct toolbox_ctx {
    const char *root;
} toolbox_ctx;

typedef int (*toolbox_fn)(const toolbox_ctx *ctx, json_t *args, toolbox_result *res);

/* Tool table lookup; NULL when unknown. */
toolbox_fn toolbox_find(const char *name);
/* Validates nothing beyond the tool name: runs the tool, filling res (always, also on error). */
int toolbox_run(const toolbox_ctx *ctx, const char *name, json_t *args, toolbox_result *res);
void toolbox_result_done(toolbox_result *res);
/* The result as one JSON object (UTF-8 sanitized), newline-terminated. Owned. */
char *toolbox_result_to_json(const toolbox_result *res);

/* Result setters (printf-style; the previous value is freed). */
void toolbox_set_llm(toolbox_result *res, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void toolbox_set_display(toolbox_result *res, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Tool error: llm = display = message, error = message. Returns 0 (the tool ran). */
int toolbox_fail(toolbox_result *res, const char *type, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Parameter error: llm = "Error: Invalid parameters provided. Reason: <msg>". Returns 0. */
int toolbox_invalid(toolbox_result *res, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Argument access with Ajv-style messages ("params must have required property 'x'",
 * "params/x must be string"). Each returns 0 or -EINVAL after toolbox_invalid(). */
int toolbox_arg_string(json_t *args, const char *key, bool required, const char **ret,
                       toolbox_result *res);
int toolbox_arg_bool(json_t *args, const char *key, bool def, bool *ret, toolbox_result *res);
/* Integer >= min; *ret untouched and *present false when absent. */
int toolbox_arg_int(json_t *args, const char *key, long long min, long long *ret, bool *present,
                    toolbox_result *res);
/* Array of strings (NULL-terminated vector, owned, strings borrowed from args). */
int toolbox_arg_strv(json_t *args, const char *key, bool required, size_t min_items,
                     bool nonempty_items, const char ***ret, toolbox_result *res);

/* Paths. Resolves p (relative to the root) to a normalized absolute path; *ret_inside tells
 * whether it, with every existing symlink resolved, stays in the workspace. Owned. */
char *toolbox_resolve(const toolbox_ctx *ctx, const char *p, bool *ret_inside);
/* gemini-cli's message for a path outside the workspace. Returns 0. */
int toolbox_outside(const toolbox_ctx *ctx, toolbox_result *res, const char *abs);
/* abs relative to base ("." for base itself). Owned. */
char *toolbox_relative(const char *base, const char *abs);

/* Whole file into memory (NUL-terminated, *ret_len without it). Negative errno. */
int toolbox_read_all(const char *path, char **ret, size_t *ret_len);
/* A NUL in the first 4 KiB, or a well-known binary extension. */
bool toolbox_is_binary(const char *path, const char *data, size_t len);

/* Text of a file as gemini-cli's processSingleFileContent shapes it: lines [start, end) (0-based,
 * end clamped), each cut at 2000 characters. */
typedef struct toolbox_text {
    char *content;  /* selected lines joined with '\n', owned */
    size_t total;   /* lines in the file (split on '\n') */
    size_t first;   /* 1-based first line shown */
    size_t last;    /* 1-based last line shown */
    bool truncated; /* not from line 1, stopped before the end, or a line was cut */
} toolbox_text;
int toolbox_text_slice(const char *data, size_t len, size_t start, size_t end, toolbox_text *ret);

/* Appends to a basic/buf and aborts on ENOMEM: the toolbox is a one-shot helper with nothing
 * sensible to answer without memory, so its text builders never check. */
void toolbox_buf_add(buf *b, const char *s, size_t n);
void toolbox_buf_puts(buf *b, const char *s);
void toolbox_buf_printf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The text (owned, "" when empty) and an empty b. */
char *toolbox_buf_steal(buf *b);

/* Replaces invalid UTF-8 with U+FFFD. Owned. */
char *toolbox_utf8_sanitize(const char *s, size_t len);

/* Glob patterns: '*', '?', '[...]', '**' as whole segment (any depth), '{a,b}' alternatives.
 * Matches path (relative, '/'-separated) against pattern. */
bool toolbox_glob_match(const char *pattern, const char *path, bool casefold);
/* Brace expansion into a NULL-terminated vector (owned strings, at most 1024; free with
 * strv_free). */
char **toolbox_brace_expand(const char *pattern);

/* Ignore rules of the workspace root: .gitignore (and .git itself) when git is set and the root
 * is a git repository (has .git), .geminiignore when gemini is set. NULL: nothing to ignore. */
typedef struct toolbox_ignore toolbox_ignore;
toolbox_ignore *toolbox_ignore_load(const char *root, bool git, bool gemini);
/* rel: path relative to the root; is_dir: a directory. NULL ignore never ignores. */
bool toolbox_ignore_match(const toolbox_ignore *ig, const char *rel, bool is_dir);
void toolbox_ignore_free(toolbox_ignore *ig);

/* Recursive walk of files below dir (symlinks not followed), skipping directories named in
 * skip_dirs (basenames) and, when ig is set, ignored entries (the files they hide go to
 * *ignored when it is not NULL). */
typedef struct toolbox_file {
    char *path; /* absolute, owned */
    struct timespec mtime;
    off_t size;
} toolbox_file;
typedef struct toolbox_files {
    toolbox_file *v;
    size_t n, cap;
} toolbox_files;
int toolbox_walk(const char *root, const char *dir, bool recursive, const char *const *skip_dirs,
                 const toolbox_ignore *ig, toolbox_files *out, toolbox_files *ignored);
void toolbox_files_free(toolbox_files *f);

/* Writes data to abs (parents created, truncating). Negative errno. */
int toolbox_write_content(const char *abs, const char *data, size_t len);
/* gemini-cli's typed write errors (permission, space, directory, other). Returns 0. */
int toolbox_write_error(toolbox_result *res, const char *abs, int r);

/* file_filtering_options {respect_git_ignore, respect_gemini_ignore} (both default true).
 * 0 or -EINVAL. */
int toolbox_arg_filtering(json_t *args, bool *respect_git, bool *respect_gemini,
                          toolbox_result *res);

/* The tools. */
int toolbox_shell(const toolbox_ctx *ctx, json_t *args, toolbox_result *res);
int toolbox_ls(const toolbox_ctx *ctx, json_t *args, toolbox_result *res);
int toolbox_read_file(const toolbox_ctx *ctx, json_t *args, toolbox_result *res);
int toolbox_write_file(const toolbox_ctx *ctx, json_t *args, toolbox_result *res);
int toolbox_replace(const toolbox_ctx *ctx, json_t *args, toolbox_result *res);
int toolbox_glob(const toolbox_ctx *ctx, json_t *args, toolbox_result *res);
int toolbox_grep(const toolbox_ctx *ctx, json_t *args, toolbox_result *res);
int toolbox_read_many(const toolbox_ctx *ctx, json_t *args, toolbox_result *res);
