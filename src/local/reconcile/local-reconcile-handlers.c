/* runtimeClassName -> the OCI runtime that runs a sandbox (local-runtime-class.h). Each handler
 * other than the default keeps its state under $ASB_STATE_DIR/oci-<binary name>, so `runc list`
 * and `runsc list` never see each other's containers. */
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/fs-util.h"
#include "basic/macro.h"
#include "local/fs/local-fs.h"
#include "local/reconcile/local-reconcile-internal.h"
#include "shared/log.h"

const oci_runtime *rec_handler(local_reconciler *r, size_t i)
{
    return i == 0 || i > r->n_extra ? &r->rt : &r->extra[i - 1];
}

const oci_runtime *rec_runtime(local_reconciler *r, const char *uid)
{
    rec_entry *e = rec_find(r, uid);
    return rec_handler(r, e ? e->handler : 0);
}

static char *handler_root(local_reconciler *r, const char *binary)
{
    _cleanup_free_ char *copy = strdup(binary);
    char *p = NULL;
    if (!copy || asprintf(&p, "%s/oci-%s", r->state_dir, basename(copy)) < 0)
        return NULL;
    return p;
}

/* Index of the handler running binary, adding it when create is set. */
static int handler_index(local_reconciler *r, const char *binary, bool create, size_t *ret)
{
    if (strcmp(binary, r->rt.binary) == 0) {
        *ret = 0;
        return 0;
    }
    for (size_t i = 0; i < r->n_extra; i++)
        if (strcmp(r->extra[i].binary, binary) == 0) {
            *ret = i + 1;
            return 0;
        }
    _cleanup_free_ char *root = handler_root(r, binary);
    if (!root)
        return -ENOMEM;
    if (!create && access(root, F_OK) < 0)
        return -ENOENT;
    oci_runtime *v = realloc(r->extra, (r->n_extra + 1) * sizeof(*v));
    if (!v)
        return -ENOMEM;
    r->extra = v;
    if (oci_runtime_init(&v[r->n_extra], binary, root) < 0) {
        oci_runtime_done(&v[r->n_extra]);
        return -ENOMEM;
    }
    int k = mkdir_p(root, 0700);
    if (k < 0)
        log_warn("cannot create the runtime state root", "root", root, "error", strerror(-k));
    *ret = ++r->n_extra;
    return 0;
}

static int failf(rec_failure *f, int err, const char *fmt, const char *a, const char *b)
{
    f->reason = "ReconcilerError";
    if (asprintf(&f->message, fmt, a, b) < 0)
        f->message = NULL;
    return err;
}

int rec_handler_for_class(local_reconciler *r, const char *class_name, size_t *ret,
                          rec_failure *f)
{
    if (!class_name || !*class_name) {
        *ret = 0;
        return 0;
    }
    if (r->class_error)
        return failf(f, -EINVAL, "Error seen: %s%s", r->class_error, "");
    const char *binary = runtime_class_binary(r->classes, r->n_classes, class_name);
    if (!binary)
        return failf(f, -ENOENT,
                     "Error seen: RuntimeClass \"%s\" not found%s (configure handlers with "
                     "ASB_RUNTIME_CLASSES=NAME=BINARY)",
                     class_name, "");
    if (strcmp(binary, r->rt.binary) != 0 && !runtime_binary_available(binary))
        return failf(f, -EOPNOTSUPP,
                     "Error seen: the handler \"%s\" of RuntimeClass \"%s\" is not installed on "
                     "this machine",
                     binary, class_name);
    int k = handler_index(r, binary, true, ret);
    if (k < 0)
        return failf(f, k, "Error seen: %s%s", strerror(-k), "");
    return 0;
}

void rec_handlers_restore(local_reconciler *r)
{
    for (size_t i = 0; i < r->n_classes; i++) {
        size_t idx;
        if (runtime_binary_available(r->classes[i].binary))
            (void)handler_index(r, r->classes[i].binary, false, &idx);
    }
}
