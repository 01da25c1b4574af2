/* kubectl's JSONPath templates for `asb get -o jsonpath=`/`custom-columns=` (asb-jsonpath.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "cli/asb-jsonpath.h"

/* [?(@.key=="value")] on one array item: does it match? s points at `?(@.`. */
static int filter_parse(const char *s, const char **ret_key, size_t *ret_klen, const char **ret_val,
                        size_t *ret_vlen, const char **ret_end)
{
    if (strncmp(s, "?(@.", 4) != 0)
        return -EINVAL;
    const char *key = s + 4, *eq = strstr(key, "==");
    if (!eq)
        return -EINVAL;
    char quote = eq[2];
    if (quote != '"' && quote != '\'')
        return -EINVAL;
    const char *val = eq + 3, *vend = strchr(val, quote);
    if (!vend || strncmp(vend + 1, ")]", 2) != 0)
        return -EINVAL;
    *ret_key = key;
    *ret_klen = (size_t)(eq - key);
    *ret_val = val;
    *ret_vlen = (size_t)(vend - val);
    *ret_end = vend + 3;
    return 0;
}

static const json_t *child(const json_t *v, const char *key, size_t n)
{
    const char *k;
    json_t *c;
    json_object_foreach ((json_t *)v, k, c)
        if (strlen(k) == n && strncmp(k, key, n) == 0)
            return c;
    return NULL;
}

/* Walks p from v, appending every value reached to ret. */
static int walk(const json_t *v, const char *p, json_t *ret)
{
    while (v && *p) {
        if (*p == '.') {
            p++;
            if (*p == '*') { /* .* : every member */
                const char *k;
                json_t *c;
                json_object_foreach ((json_t *)v, k, c) {
                    int r = walk(c, p + 1, ret);
                    if (r < 0)
                        return r;
                }
                return 0;
            }
            /* A key ends at an unescaped '.' or '['; "\." is a dot inside it (labels). */
            _cleanup_buf_ buf key = BUF_INIT;
            for (; *p && *p != '.' && *p != '['; p++) {
                if (*p == '\\' && p[1])
                    p++;
                if (buf_append_byte(&key, *p) < 0)
                    return -ENOMEM;
            }
            if (key.len == 0)
                return *p ? -EINVAL : 0; /* a trailing '.' is the value itself */
            v = child(v, key.data, key.len);
        } else if (*p == '[') {
            p++;
            if (strncmp(p, "*]", 2) == 0) {
                size_t i;
                json_t *c;
                json_array_foreach ((json_t *)v, i, c) {
                    int r = walk(c, p + 2, ret);
                    if (r < 0)
                        return r;
                }
                return 0;
            }
            if (*p == '?') {
                const char *key, *val, *end;
                size_t klen, vlen;
                if (filter_parse(p, &key, &klen, &val, &vlen, &end) < 0)
                    return -EINVAL;
                size_t i;
                json_t *c;
                json_array_foreach ((json_t *)v, i, c) {
                    const json_t *f = child(c, key, klen);
                    if (json_is_string(f) && json_string_length(f) == vlen &&
                        strncmp(json_string_value(f), val, vlen) == 0) {
                        int r = walk(c, end, ret);
                        if (r < 0)
                            return r;
                    }
                }
                return 0;
            }
            char *e;
            long i = strtol(p, &e, 10);
            if (e == p || *e != ']')
                return -EINVAL;
            if (i < 0)
                i += (long)json_array_size(v);
            v = i >= 0 ? json_array_get(v, (size_t)i) : NULL;
            p = e + 1;
        } else
            return -EINVAL;
    }
    if (v && json_array_append((json_t *)ret, (json_t *)v) < 0)
        return -ENOMEM;
    return 0;
}

int cli_jsonpath_values(const json_t *root, const char *expr, json_t *ret)
{
    while (*expr == ' ')
        expr++;
    if (*expr == '$' || *expr == '@')
        expr++;
    if (*expr == '\0')
        return json_array_append(ret, (json_t *)root) < 0 ? -ENOMEM : 0;
    if (*expr != '.' && *expr != '[')
        return -EINVAL;
    return walk(root, expr, ret);
}

char *cli_jsonpath_text(const json_t *v)
{
    if (json_is_string(v))
        return strdup(json_string_value(v));
    return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
}

/* The end of the action that starts at s (just past '{'): its '}' outside quotes, or NULL. */
static const char *action_end(const char *s)
{
    char quote = 0;
    for (; *s; s++) {
        if (quote) {
            if (*s == '\\' && s[1])
                s++;
            else if (*s == quote)
                quote = 0;
        } else if (*s == '"' || *s == '\'')
            quote = *s;
        else if (*s == '}')
            return s;
    }
    return NULL;
}

static int literal(buf *out, const char *s, size_t n)
{
    int r = 0;
    for (size_t i = 1; i + 1 < n && r >= 0; i++) {
        char ch = s[i];
        if (ch == '\\' && i + 2 < n) {
            ch = s[++i];
            ch = ch == 'n' ? '\n' : ch == 't' ? '\t' : ch == 'r' ? '\r' : ch;
        }
        r = buf_append_byte(out, ch);
    }
    return r;
}

static int expression(buf *out, const json_t *root, const char *s, size_t n)
{
    _cleanup_free_ char *expr = strndup(s, n);
    json_t *vals = json_array();
    int r = expr && vals ? cli_jsonpath_values(root, expr, vals) : -ENOMEM;
    size_t i;
    json_t *v;
    json_array_foreach (vals, i, v) {
        if (r < 0)
            break;
        _cleanup_free_ char *t = cli_jsonpath_text(v);
        if (!t)
            r = -ENOMEM;
        else if (i > 0)
            r = buf_append_byte(out, ' ');
        if (r >= 0 && t)
            r = buf_append_str(out, t);
    }
    json_decref(vals);
    return r < 0 ? r : 0;
}

/* Renders [s, end) against root. {range} nests: its body runs once per value. */
static int render(buf *out, const char *s, const char *end, const json_t *root, api_error *err)
{
    while (s < end) {
        const char *open = memchr(s, '{', (size_t)(end - s));
        if (!open)
            return buf_append(out, s, (size_t)(end - s)) < 0 ? -ENOMEM : 0;
        if (buf_append(out, s, (size_t)(open - s)) < 0)
            return -ENOMEM;
        const char *close = action_end(open + 1);
        if (!close || close >= end) {
            api_error_set(err, STATUS_INVALID_ARGUMENT, "unclosed action");
            return -EINVAL;
        }
        const char *a = open + 1;
        size_t n = (size_t)(close - a);
        while (n > 0 && *a == ' ')
            a++, n--;
        int r;
        if (n > 0 && (*a == '"' || *a == '\'')) {
            r = literal(out, a, n);
        } else if (n >= 6 && strncmp(a, "range ", 6) == 0) {
            /* The body ends at the matching {end}. */
            const char *body = close + 1, *p = body, *body_end = NULL;
            int depth = 1;
            while (p < end && depth > 0) {
                const char *o = memchr(p, '{', (size_t)(end - p));
                const char *c = o ? action_end(o + 1) : NULL;
                if (!o || !c)
                    break;
                if (strncmp(o, "{range ", 7) == 0)
                    depth++;
                else if (strncmp(o, "{end}", 5) == 0 && --depth == 0)
                    body_end = o;
                p = c + 1;
            }
            if (!body_end) {
                api_error_set(err, STATUS_INVALID_ARGUMENT, "range without end");
                return -EINVAL;
            }
            _cleanup_free_ char *expr = strndup(a + 6, n - 6);
            json_t *vals = json_array();
            r = expr && vals ? cli_jsonpath_values(root, expr, vals) : -ENOMEM;
            size_t i;
            json_t *v;
            json_array_foreach (vals, i, v) {
                if (r < 0)
                    break;
                r = render(out, body, body_end, v, err);
            }
            json_decref(vals);
            if (r < 0)
                return r;
            s = body_end + 5;
            continue;
        } else if (n == 3 && strncmp(a, "end", 3) == 0) {
            api_error_set(err, STATUS_INVALID_ARGUMENT, "end without range");
            return -EINVAL;
        } else {
            r = expression(out, root, a, n);
        }
        if (r < 0) {
            if (r == -EINVAL)
                api_error_set(err, STATUS_INVALID_ARGUMENT, "unrecognized expression");
            return r;
        }
        s = close + 1;
    }
    return 0;
}

int cli_jsonpath_render(buf *out, const char *template, const json_t *root, api_error *err)
{
    _cleanup_(api_error_clear) api_error why = API_ERROR_INIT;
    int r = render(out, template, template + strlen(template), root, &why);
    if (r == -EINVAL && why.message && err) {
        api_error_clear(err);
        *err = why;
        why = (api_error)API_ERROR_INIT; /* moved */
    }
    return r;
}
