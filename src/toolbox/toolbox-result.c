/* Tool table, results, argument access and string helpers. See toolbox.h. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "shared/json-util.h"
#include "toolbox/toolbox.h"

static const struct {
    const char *name;
    toolbox_fn fn;
} tools[] = {
    {"run_shell_command", toolbox_shell}, {"list_directory", toolbox_ls},
    {"read_file", toolbox_read_file},     {"write_file", toolbox_write_file},
    {"replace", toolbox_replace},         {"glob", toolbox_glob},
    {"grep_search", toolbox_grep},        {"read_many_files", toolbox_read_many},
};

toolbox_fn toolbox_find(const char *name)
{
    for (size_t i = 0; i < ELEMENTSOF(tools); i++)
        if (strcmp(tools[i].name, name) == 0)
            return tools[i].fn;
    return NULL;
}

int toolbox_run(const toolbox_ctx *ctx, const char *name, json_t *args, toolbox_result *res)
{
    toolbox_fn fn = toolbox_find(name);
    if (!fn)
        return -ENOENT;
    if (!json_is_object(args))
        return toolbox_invalid(res, "params must be object");
    int r = fn(ctx, args, res);
    if (r < 0 && !res->llm)
        return toolbox_fail(res, "execution_failed",
                            "Error: Tool call execution failed. Reason: %s", strerror(-r));
    if (!res->llm)
        res->llm = strdup("");
    return 0;
}

void toolbox_result_done(toolbox_result *res)
{
    free(res->llm);
    free(res->display);
    free(res->error);
    *res = (toolbox_result){0};
}

static json_t *jstr(const char *s)
{
    _cleanup_free_ char *clean = toolbox_utf8_sanitize(s ? s : "", s ? strlen(s) : 0);
    return clean ? json_string(clean) : NULL;
}

char *toolbox_result_to_json(const toolbox_result *res)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "llmContent", jstr(res->llm));
    json_object_set_new(o, "returnDisplay", jstr(res->display ? res->display : res->llm));
    if (res->error) {
        json_t *e = json_object();
        json_object_set_new(e, "message", jstr(res->error));
        json_object_set_new(e, "type", json_string(res->error_type ? res->error_type : "error"));
        json_object_set_new(o, "error", e);
    } else {
        json_object_set_new(o, "error", json_null());
    }
    char *line = json_dumps_line(o, JSON_COMPACT, NULL);
    json_decref(o);
    return line;
}

static char *vfmt(const char *fmt, va_list ap)
{
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        return NULL;
    return s;
}

void toolbox_set_llm(toolbox_result *res, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    free(res->llm);
    res->llm = vfmt(fmt, ap);
    va_end(ap);
}

void toolbox_set_display(toolbox_result *res, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    free(res->display);
    res->display = vfmt(fmt, ap);
    va_end(ap);
}

int toolbox_fail(toolbox_result *res, const char *type, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *m = vfmt(fmt, ap);
    va_end(ap);
    free(res->llm);
    free(res->display);
    free(res->error);
    res->llm = m ? strdup(m) : NULL;
    res->display = m ? strdup(m) : NULL;
    res->error = m;
    res->error_type = type;
    return 0;
}

int toolbox_invalid(toolbox_result *res, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    _cleanup_free_ char *m = vfmt(fmt, ap);
    va_end(ap);
    return toolbox_fail(res, "invalid_tool_params",
                        "Error: Invalid parameters provided. Reason: %s", m ? m : "");
}

int toolbox_arg_string(json_t *args, const char *key, bool required, const char **ret,
                       toolbox_result *res)
{
    json_t *v = json_object_get(args, key);
    *ret = NULL;
    if (!v) {
        if (required) {
            toolbox_invalid(res, "params must have required property '%s'", key);
            return -EINVAL;
        }
        return 0;
    }
    if (!json_is_string(v)) {
        toolbox_invalid(res, "params/%s must be string", key);
        return -EINVAL;
    }
    if (strlen(json_string_value(v)) != json_string_length(v)) {
        toolbox_invalid(res, "params/%s must not contain NUL characters", key);
        return -EINVAL;
    }
    *ret = json_string_value(v);
    return 0;
}

int toolbox_arg_bool(json_t *args, const char *key, bool def, bool *ret, toolbox_result *res)
{
    json_t *v = json_object_get(args, key);
    *ret = def;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_boolean(v)) {
        toolbox_invalid(res, "params/%s must be boolean", key);
        return -EINVAL;
    }
    *ret = json_is_true(v);
    return 0;
}

int toolbox_arg_int(json_t *args, const char *key, long long min, long long *ret, bool *present,
                    toolbox_result *res)
{
    json_t *v = json_object_get(args, key);
    *present = false;
    if (!v || json_is_null(v))
        return 0;
    long long x;
    if (json_is_integer(v))
        x = json_integer_value(v);
    else if (json_is_real(v) && json_real_value(v) == (double)(long long)json_real_value(v))
        x = (long long)json_real_value(v);
    else {
        toolbox_invalid(res, "params/%s must be integer", key);
        return -EINVAL;
    }
    if (x < min) {
        toolbox_invalid(res, "params/%s must be >= %lld", key, min);
        return -EINVAL;
    }
    *ret = x;
    *present = true;
    return 0;
}

int toolbox_arg_strv(json_t *args, const char *key, bool required, size_t min_items,
                     bool nonempty_items, const char ***ret, toolbox_result *res)
{
    json_t *v = json_object_get(args, key);
    *ret = NULL;
    if (!v) {
        if (required) {
            toolbox_invalid(res, "params must have required property '%s'", key);
            return -EINVAL;
        }
        *ret = calloc(1, sizeof(char *));
        return *ret ? 0 : -ENOMEM;
    }
    if (!json_is_array(v)) {
        toolbox_invalid(res, "params/%s must be array", key);
        return -EINVAL;
    }
    size_t n = json_array_size(v);
    if (n < min_items) {
        toolbox_invalid(res, "params/%s must NOT have fewer than %zu items", key, min_items);
        return -EINVAL;
    }
    const char **out = calloc(n + 1, sizeof(char *));
    if (!out)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        json_t *it = json_array_get(v, i);
        if (!json_is_string(it)) {
            free(out);
            toolbox_invalid(res, "params/%s/%zu must be string", key, i);
            return -EINVAL;
        }
        if ((nonempty_items && json_string_length(it) == 0) ||
            strlen(json_string_value(it)) != json_string_length(it)) {
            free(out);
            toolbox_invalid(res, "params/%s/%zu must NOT have fewer than 1 characters", key, i);
            return -EINVAL;
        }
        out[i] = json_string_value(it);
    }
    *ret = out;
    return 0;
}

void toolbox_buf_add(buf *b, const char *s, size_t n)
{
    if (buf_append(b, s, n) < 0)
        abort(); /* out of memory in a one-shot helper: nothing sensible to return */
}

void toolbox_buf_puts(buf *b, const char *s)
{
    toolbox_buf_add(b, s, strlen(s));
}

void toolbox_buf_printf(buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = buf_appendv(b, fmt, ap);
    va_end(ap);
    if (r == -ENOMEM)
        abort();
}

char *toolbox_buf_steal(buf *b)
{
    char *s = buf_steal(b, NULL);
    if (!s)
        abort();
    return s;
}

char *toolbox_utf8_sanitize(const char *s, size_t len)
{
    buf b = BUF_INIT;
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    static const char fffd[] = "\xEF\xBF\xBD";
    toolbox_buf_add(&b, "", 0);
    while (p < end) {
        unsigned c = *p;
        size_t n = 0;
        unsigned cp = 0;
        if (c == 0) {
            toolbox_buf_add(&b, fffd, 3); /* jansson strings cannot hold NUL via json_string */
            p++;
            continue;
        }
        if (c < 0x80) {
            toolbox_buf_add(&b, (const char *)p, 1);
            p++;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            n = 2;
            cp = c & 0x1F;
        } else if ((c & 0xF0) == 0xE0) {
            n = 3;
            cp = c & 0x0F;
        } else if ((c & 0xF8) == 0xF0) {
            n = 4;
            cp = c & 0x07;
        }
        bool ok = n > 0 && (size_t)(end - p) >= n;
        for (size_t i = 1; ok && i < n; i++) {
            if ((p[i] & 0xC0) != 0x80)
                ok = false;
            else
                cp = (cp << 6) | (p[i] & 0x3F);
        }
        if (ok && ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
                   cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)))
            ok = false;
        if (!ok) {
            toolbox_buf_add(&b, fffd, 3);
            p++;
            continue;
        }
        toolbox_buf_add(&b, (const char *)p, n);
        p += n;
    }
    return toolbox_buf_steal(&b);
}
