/* Checks of a snapshot manifest (local-snapshot-manifest.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "basic/base64.h"
#include "basic/buf.h"
#include "basic/macro.h"
#include "local/snapshot/local-snapshot-manifest.h"
#include "local/snapshot/local-snapshot-store.h"

static int bad(char **ret_error, const char *fmt, ...) _printf_(2, 3);
static int bad(char **ret_error, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    _cleanup_buf_ buf b = BUF_INIT;
    if (ret_error && buf_appendv(&b, fmt, ap) == 0)
        *ret_error = buf_steal(&b, NULL);
    va_end(ap);
    return -EBADMSG;
}

/* A relative path of at least one component, none empty, "." or "..". */
static int safe_path(const char *p)
{
    if (!*p || p[0] == '/')
        return 0;
    for (const char *c = p;;) {
        const char *e = strchr(c, '/');
        size_t n = e ? (size_t)(e - c) : strlen(c);
        if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
            return 0;
        if (!e)
            return 1;
        c = e + 1;
    }
}

static int is_uint(const json_t *v, json_int_t max)
{
    return json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= max;
}

static int valid_time(const json_t *t)
{
    return json_is_array(t) && json_array_size(t) == 2 && json_is_integer(json_array_get(t, 0)) &&
           is_uint(json_array_get(t, 1), 999999999);
}

static int check_xattrs(const json_t *x)
{
    const char *k;
    const json_t *v;
    if (!json_is_object(x))
        return 0;
    json_object_foreach ((json_t *)x, k, v) {
        _cleanup_free_ char *raw = NULL;
        size_t n;
        if (!*k || !json_is_string(v) ||
            base64_decode(json_string_value(v), json_string_length(v), &raw, &n) < 0)
            return 0;
    }
    return 1;
}

/* Extents of a file entry: sorted, non-overlapping, non-empty, inside size, adding up. */
static int check_file(const json_t *e, char **ret_error, const char *path)
{
    const json_t *size = json_object_get(e, "size"), *obj = json_object_get(e, "object"),
                 *ext = json_object_get(e, "extents");
    if (!is_uint(size, INT64_MAX))
        return bad(ret_error, "%s: size must be a non-negative integer", path);
    uint64_t sz = (uint64_t)json_integer_value(size), data = sz, end = 0;
    if (ext) {
        if (!json_is_array(ext))
            return bad(ret_error, "%s: extents must be an array", path);
        data = 0;
        size_t i;
        const json_t *x;
        json_array_foreach (ext, i, x) {
            const json_t *o = json_array_get(x, 0), *l = json_array_get(x, 1);
            if (json_array_size(x) != 2 || !is_uint(o, INT64_MAX) || !is_uint(l, INT64_MAX) ||
                json_integer_value(l) == 0)
                return bad(ret_error, "%s: extents[%zu] must be [offset, length > 0]", path, i);
            uint64_t off = (uint64_t)json_integer_value(o), len = (uint64_t)json_integer_value(l);
            if (off < end || len > sz || off > sz - len)
                return bad(ret_error, "%s: extents[%zu] overlaps or passes the size", path, i);
            end = off + len;
            data += len;
        }
    }
    if (data > 0 && !snap_hash_valid(json_string_value(obj)))
        return bad(ret_error, "%s: object must be a SHA-256 in hex", path);
    if (data == 0 && obj)
        return bad(ret_error, "%s: an object without data", path);
    return 0;
}

static const char *const types[] = {"dir", "file", "symlink", "hardlink", "fifo", NULL};

static int check_entry(const json_t *e, size_t idx, const json_t *files, char **ret_error)
{
    const char *path = json_string_value(json_object_get(e, "path")),
               *type = json_string_value(json_object_get(e, "type"));
    if (!json_is_object(e) || !path || !type)
        return bad(ret_error, "entries[%zu]: path and type are required", idx);
    if ((idx == 0) != (*path == 0) || (idx > 0 && !safe_path(path)))
        return bad(ret_error,
                   "entries[%zu]: path \"%s\" is not a safe relative path (the root "
                   "\"\" comes first, once)",
                   idx, path);
    if (idx == 0 && strcmp(type, "dir") != 0)
        return bad(ret_error, "entries[0]: the root must be a dir");
    size_t t = 0;
    while (types[t] && strcmp(types[t], type) != 0)
        t++;
    if (!types[t])
        return bad(ret_error, "%s: unknown type \"%s\"", path, type);
    if (strcmp(type, "hardlink") == 0) {
        const char *l = json_string_value(json_object_get(e, "link"));
        if (!l || !json_object_get(files, l))
            return bad(ret_error, "%s: link must name an earlier file of the root", path);
        return 0;
    }
    if (!is_uint(json_object_get(e, "mode"), 07777) ||
        !is_uint(json_object_get(e, "uid"), UINT32_MAX - 1) ||
        !is_uint(json_object_get(e, "gid"), UINT32_MAX - 1) ||
        !valid_time(json_object_get(e, "mtime")) || !valid_time(json_object_get(e, "atime")))
        return bad(ret_error, "%s: mode, uid, gid, mtime and atime are required and in range",
                   path);
    if (json_object_get(e, "xattrs") && !check_xattrs(json_object_get(e, "xattrs")))
        return bad(ret_error, "%s: xattrs must map names to base64 values", path);
    if (strcmp(type, "symlink") == 0 && !json_is_string(json_object_get(e, "target")))
        return bad(ret_error, "%s: a symlink needs a target", path);
    if (strcmp(type, "file") == 0)
        return check_file(e, ret_error, path);
    return 0;
}

int snap_manifest_check(const json_t *m, char **ret_error)
{
    const json_t *version = json_object_get(m, "version");
    if (!json_is_object(m) || !json_is_integer(version) ||
        json_integer_value(version) != SNAP_MANIFEST_VERSION)
        return bad(ret_error, "not a version %d snapshot manifest", SNAP_MANIFEST_VERSION);
    const json_t *roots = json_object_get(m, "roots"), *r;
    size_t i;
    if (!json_is_array(roots))
        return bad(ret_error, "roots must be an array");
    json_array_foreach (roots, i, r) {
        const char *name = json_string_value(json_object_get(r, "name"));
        const json_t *entries = json_object_get(r, "entries"), *e;
        if (!name || !(strcmp(name, SNAP_ROOT_WORKSPACE) == 0 ||
                       (strncmp(name, SNAP_ROOT_VOLUME_PREFIX, 7) == 0 && safe_path(name + 7) &&
                        !strchr(name + 7, '/'))))
            return bad(ret_error, "roots[%zu]: bad name", i);
        if (!json_is_array(entries) || json_array_size(entries) == 0)
            return bad(ret_error, "roots[%zu]: entries must start with the root", i);
        _cleanup_(json_decrefp) json_t *seen = json_object(), *files = json_object();
        if (!seen || !files)
            return -ENOMEM;
        size_t j;
        json_array_foreach (entries, j, e) {
            int k = check_entry(e, j, files, ret_error);
            if (k < 0)
                return k;
            const char *p = json_string_value(json_object_get(e, "path"));
            const char *type = json_string_value(json_object_get(e, "type"));
            if (json_object_get(seen, p))
                return bad(ret_error, "roots[%zu]: path \"%s\" appears twice", i, p);
            if (json_object_set_new(seen, p, json_true()) < 0 ||
                (strcmp(type, "file") == 0 && json_object_set_new(files, p, json_true()) < 0))
                return -ENOMEM;
        }
    }
    return 0;
}

int snap_manifest_extents(const json_t *entry, uint64_t **ret, size_t *ret_n)
{
    const json_t *ext = json_object_get(entry, "extents"), *x;
    *ret = NULL;
    *ret_n = 0;
    if (!ext || json_array_size(ext) == 0)
        return 0;
    uint64_t *v = calloc(json_array_size(ext), 2 * sizeof(uint64_t));
    if (!v)
        return -ENOMEM;
    size_t i;
    json_array_foreach (ext, i, x) {
        v[2 * i] = (uint64_t)json_integer_value(json_array_get(x, 0));
        v[2 * i + 1] = (uint64_t)json_integer_value(json_array_get(x, 1));
    }
    *ret = v;
    *ret_n = json_array_size(ext);
    return 0;
}
