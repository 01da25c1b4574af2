/* The replaceable sandbox handle: a vtable with a real implementation (asb_sandbox) and an
 * in-memory fake for unit tests of agent code. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "asb/handle.h"
#include "libasb/libasb-internal.h"

struct asb_handle {
    asb_handle_ops ops;
    void *impl;
    int is_fake;
};

ASB_PUBLIC int asb_handle_new(asb_handle **out, const asb_handle_ops *ops, void *impl)
{
    if (!out || !ops)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_handle_new: NULL out or ops");
    *out = NULL;
    if (ops->version == 0 || ops->version > ASB_HANDLE_OPS_VERSION)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_handle_ops: unknown version %u",
                              ops->version);
    asb_handle *h = calloc(1, sizeof(*h));
    if (!h)
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    h->ops = *ops;
    h->impl = impl;
    *out = h;
    return ASB_OK;
}

ASB_PUBLIC void asb_handle_free(asb_handle *h)
{
    if (!h)
        return;
    if (h->ops.free)
        h->ops.free(h->impl);
    free(h);
}

static int unsupported(const char *what)
{
    return asbi_error_set(ASB_EINVAL, 0, NULL, "%s is not supported by this handle", what);
}

#define DISPATCH(op, ...)                                                                          \
    do {                                                                                           \
        if (!h)                                                                                    \
            return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_handle: NULL handle");                 \
        if (!h->ops.op)                                                                            \
            return unsupported(#op);                                                               \
        return h->ops.op(__VA_ARGS__);                                                             \
    } while (0)

ASB_PUBLIC int asb_handle_execute(asb_sandbox_result **out, asb_handle *h, const char *const *argv,
                                  const asb_sandbox_process_options *opts)
{
    DISPATCH(execute, out, h->impl, argv, opts);
}

ASB_PUBLIC int asb_handle_file_read(char **out, size_t *out_len, asb_handle *h, const char *path)
{
    DISPATCH(file_read, out, out_len, h->impl, path);
}

ASB_PUBLIC int asb_handle_file_write(asb_handle *h, const char *path, unsigned int mode,
                                     const void *data, size_t len)
{
    DISPATCH(file_write, h->impl, path, mode, data, len);
}

ASB_PUBLIC int asb_handle_file_list(asb_sandbox_file_entry **out, size_t *out_count, asb_handle *h,
                                    const char *path)
{
    DISPATCH(file_list, out, out_count, h->impl, path);
}

ASB_PUBLIC int asb_handle_file_exists(int *out, asb_handle *h, const char *path)
{
    DISPATCH(file_exists, out, h->impl, path);
}

ASB_PUBLIC int asb_handle_file_delete(asb_handle *h, const char *path, int recursive)
{
    DISPATCH(file_delete, h->impl, path, recursive);
}

/* ---- the real sandbox ---- */

static int real_execute(asb_sandbox_result **out, void *impl, const char *const *argv,
                        const asb_sandbox_process_options *opts)
{
    return asb_sandbox_execute(out, impl, argv, opts);
}
static int real_read(char **out, size_t *out_len, void *impl, const char *path)
{
    return asb_sandbox_file_read_buffer(out, out_len, impl, path);
}
static int real_write(void *impl, const char *path, unsigned int mode, const void *data, size_t len)
{
    return asb_sandbox_file_write_buffer(impl, path, mode, data, len);
}
static int real_list(asb_sandbox_file_entry **out, size_t *n, void *impl, const char *path)
{
    return asb_sandbox_file_list(out, n, impl, path);
}
static int real_exists(int *out, void *impl, const char *path)
{
    return asb_sandbox_file_exists(out, impl, path);
}
static int real_delete(void *impl, const char *path, int recursive)
{
    return asb_sandbox_file_delete(impl, path, recursive);
}
static void real_free(void *impl)
{
    asb_sandbox_free(impl);
}

ASB_PUBLIC int asb_handle_from_sandbox(asb_handle **out, asb_sandbox *sandbox, int take_ownership)
{
    if (!sandbox) {
        if (out)
            *out = NULL;
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_handle_from_sandbox: NULL sandbox");
    }
    asb_handle_ops ops = {ASB_HANDLE_OPS_VERSION,
                          real_execute,
                          real_read,
                          real_write,
                          real_list,
                          real_exists,
                          real_delete,
                          take_ownership ? real_free : NULL};
    return asb_handle_new(out, &ops, sandbox);
}

/* ---- the fake ---- */

typedef struct fake_file {
    char *path;
    char *data;
    size_t len;
    unsigned int mode;
    int64_t mtime;
} fake_file;

typedef struct fake {
    fake_file *files;
    size_t n;
    asb_handle_fake_exec_cb exec_cb;
    void *payload;
    size_t commands;
    char *last;
} fake;

/* "/a/./b/" -> "a/b"; "" is the root. Owned; NULL on ENOMEM. */
static char *fake_norm(const char *path)
{
    char *o = malloc(strlen(path ? path : "") + 1), *p = o;
    if (!o)
        return NULL;
    const char *s = path ? path : "";
    while (*s) {
        while (*s == '/')
            s++;
        size_t l = strcspn(s, "/");
        if (l == 0)
            break;
        if (!(l == 1 && s[0] == '.')) {
            if (p != o)
                *p++ = '/';
            memcpy(p, s, l);
            p += l;
        }
        s += l;
    }
    *p = '\0';
    return o;
}

static fake_file *fake_find(fake *f, const char *norm)
{
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->files[i].path, norm) == 0)
            return &f->files[i];
    return NULL;
}

/* Whether some file lives under the directory norm ("" is the root and always exists). */
static int fake_is_dir(fake *f, const char *norm)
{
    size_t l = strlen(norm);
    if (l == 0)
        return 1;
    for (size_t i = 0; i < f->n; i++)
        if (strncmp(f->files[i].path, norm, l) == 0 && f->files[i].path[l] == '/')
            return 1;
    return 0;
}

static int fake_execute(asb_sandbox_result **out, void *impl, const char *const *argv,
                        const asb_sandbox_process_options *opts)
{
    fake *f = impl;
    (void)opts;
    if (!out || !argv || !argv[0])
        return asbi_error_set(ASB_EINVAL, 0, NULL, "execute: NULL out or empty argv");
    *out = NULL;
    size_t len = 1;
    for (size_t i = 0; argv[i]; i++)
        len += strlen(argv[i]) + 1;
    char *last = malloc(len), *p = last;
    if (!last)
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    for (size_t i = 0; argv[i]; i++)
        p += sprintf(p, "%s%s", i ? " " : "", argv[i]);
    free(f->last);
    f->last = last;
    f->commands++;
    asb_sandbox_result *res = calloc(1, sizeof(*res));
    if (!res)
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    int r = f->exec_cb ? f->exec_cb(res, argv, f->payload) : ASB_OK;
    if (r == ASB_OK && !res->out_data && !(res->out_data = calloc(1, 1)))
        r = asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    if (r == ASB_OK && !res->err_data && !(res->err_data = calloc(1, 1)))
        r = asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    if (r != ASB_OK) {
        asb_sandbox_result_free(res);
        return r;
    }
    *out = res;
    return ASB_OK;
}

static int fake_read(char **out, size_t *out_len, void *impl, const char *path)
{
    fake *f = impl;
    char *n = fake_norm(path);
    if (!n)
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    fake_file *ff = fake_find(f, n);
    int dir = !ff && fake_is_dir(f, n);
    free(n);
    if (!ff)
        return dir ? asbi_error_set(ASB_EBADREQUEST, 400, "INVALID_ARGUMENT", "%s is a directory",
                                    path)
                   : asbi_error_set(ASB_ENOTFOUND, 404, "NOT_FOUND", "%s: no such file", path);
    char *b = malloc(ff->len + 1);
    if (!b)
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    memcpy(b, ff->data, ff->len);
    b[ff->len] = '\0';
    *out = b;
    if (out_len)
        *out_len = ff->len;
    return ASB_OK;
}

static int fake_write(void *impl, const char *path, unsigned int mode, const void *data, size_t len)
{
    fake *f = impl;
    char *n = fake_norm(path);
    if (!n)
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    if (!*n || fake_is_dir(f, n)) {
        free(n);
        return asbi_error_set(ASB_EBADREQUEST, 400, "INVALID_ARGUMENT", "%s is a directory", path);
    }
    char *d = malloc(len ? len : 1);
    if (!d) {
        free(n);
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    }
    if (len)
        memcpy(d, data, len);
    fake_file *ff = fake_find(f, n);
    if (!ff) {
        fake_file *nf = realloc(f->files, (f->n + 1) * sizeof(*nf));
        if (!nf) {
            free(n);
            free(d);
            return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
        }
        f->files = nf;
        ff = &f->files[f->n++];
        ff->path = n;
    } else {
        free(n);
        free(ff->data);
    }
    ff->data = d;
    ff->len = len;
    ff->mode = mode ? mode : 0644;
    ff->mtime = (int64_t)time(NULL);
    return ASB_OK;
}

static int entry_cmp(const void *a, const void *b)
{
    return strcmp(((const asb_sandbox_file_entry *)a)->name,
                  ((const asb_sandbox_file_entry *)b)->name);
}

static int fake_list(asb_sandbox_file_entry **out, size_t *out_count, void *impl, const char *path)
{
    fake *f = impl;
    char *n = fake_norm(path);
    if (!n)
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    int r = ASB_OK;
    if (fake_find(f, n))
        r = asbi_error_set(ASB_EBADREQUEST, 400, "INVALID_ARGUMENT", "%s is not a directory", path);
    else if (!fake_is_dir(f, n))
        r = asbi_error_set(ASB_ENOTFOUND, 404, "NOT_FOUND", "%s: no such directory", path);
    if (r != ASB_OK) {
        free(n);
        return r;
    }
    size_t l = strlen(n), k = 0;
    asb_sandbox_file_entry *e = calloc(f->n + 1, sizeof(*e));
    for (size_t i = 0; e && i < f->n; i++) {
        const char *p = f->files[i].path;
        if (l && (strncmp(p, n, l) != 0 || p[l] != '/'))
            continue;
        const char *rest = l ? p + l + 1 : p;
        size_t nl = strcspn(rest, "/");
        int is_dir = rest[nl] == '/', dup = 0;
        for (size_t j = 0; j < k; j++)
            if (strlen(e[j].name) == nl && strncmp(e[j].name, rest, nl) == 0)
                dup = 1;
        if (dup)
            continue;
        if (!(e[k].name = strndup(rest, nl))) {
            asb_sandbox_file_entries_free(e, k);
            e = NULL;
            break;
        }
        e[k].type = is_dir ? ASB_SANDBOX_DIRECTORY : ASB_SANDBOX_FILE;
        e[k].size = is_dir ? 4096 : (int64_t)f->files[i].len;
        e[k].mode = is_dir ? 0755 : f->files[i].mode;
        e[k].modified_at = f->files[i].mtime;
        k++;
    }
    free(n);
    if (!e)
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    qsort(e, k, sizeof(*e), entry_cmp);
    *out = e;
    *out_count = k;
    return ASB_OK;
}

static int fake_exists(int *out, void *impl, const char *path)
{
    fake *f = impl;
    char *n = fake_norm(path);
    if (!n)
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    *out = fake_find(f, n) || fake_is_dir(f, n);
    free(n);
    return ASB_OK;
}

static int fake_delete(void *impl, const char *path, int recursive)
{
    fake *f = impl;
    char *n = fake_norm(path);
    if (!n)
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    fake_file *ff = fake_find(f, n);
    int r = ASB_OK;
    if (ff) {
        free(ff->path);
        free(ff->data);
        *ff = f->files[--f->n];
    } else if (!*n || !fake_is_dir(f, n)) {
        r = asbi_error_set(ASB_ENOTFOUND, 404, "NOT_FOUND", "%s: no such file", path);
    } else if (!recursive) {
        r = asbi_error_set(ASB_ECONFLICT, 409, "CONFLICT", "%s: directory not empty", path);
    } else {
        size_t l = strlen(n);
        for (size_t i = 0; i < f->n;) {
            if (strncmp(f->files[i].path, n, l) == 0 && f->files[i].path[l] == '/') {
                free(f->files[i].path);
                free(f->files[i].data);
                f->files[i] = f->files[--f->n];
            } else {
                i++;
            }
        }
    }
    free(n);
    return r;
}

static void fake_free(void *impl)
{
    fake *f = impl;
    for (size_t i = 0; i < f->n; i++) {
        free(f->files[i].path);
        free(f->files[i].data);
    }
    free(f->files);
    free(f->last);
    free(f);
}

ASB_PUBLIC int asb_handle_fake_new(asb_handle **out, asb_handle_fake_exec_cb exec_cb, void *payload)
{
    if (!out)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_handle_fake_new: NULL out");
    *out = NULL;
    fake *f = calloc(1, sizeof(*f));
    if (!f)
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    f->exec_cb = exec_cb;
    f->payload = payload;
    asb_handle_ops ops = {ASB_HANDLE_OPS_VERSION,
                          fake_execute,
                          fake_read,
                          fake_write,
                          fake_list,
                          fake_exists,
                          fake_delete,
                          fake_free};
    int r = asb_handle_new(out, &ops, f);
    if (r != ASB_OK) {
        fake_free(f);
        return r;
    }
    (*out)->is_fake = 1;
    return ASB_OK;
}

ASB_PUBLIC size_t asb_handle_fake_commands(const asb_handle *h, const char **last)
{
    if (last)
        *last = NULL;
    if (!h || !h->is_fake)
        return 0;
    const fake *f = h->impl;
    if (last)
        *last = f->last;
    return f->commands;
}
