/* See local-finalizer.h. */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "local/reconcile/local-finalizer.h"
#include "local/store/local-store.h"

bool local_has_finalizer(const json_t *obj, const char *name)
{
    size_t i;
    json_t *f;
    json_array_foreach (json_object_get(json_object_get(obj, "metadata"), "finalizers"), i, f) {
        const char *s = json_string_value(f);
        if (s && strcmp(s, name) == 0)
            return true;
    }
    return false;
}

int local_delete_or_mark(const json_t *old, json_t **ret_new)
{
    const json_t *md = json_object_get(old, "metadata");
    if (json_array_size(json_object_get(md, "finalizers")) == 0)
        return STORE_UPDATE_DELETE;
    if (json_object_get(md, "deletionTimestamp"))
        return STORE_UPDATE_UNCHANGED;
    json_t *new = json_deep_copy(old);
    json_t *nmd = json_object_get(new, "metadata");
    if (!new || !nmd) {
        json_decref(new);
        return -ENOMEM;
    }
    char ts[32];
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (json_object_set_new(nmd, "deletionTimestamp", json_string(ts)) < 0 ||
        json_object_set_new(nmd, "deletionGracePeriodSeconds", json_integer(0)) < 0) {
        json_decref(new);
        return -ENOMEM;
    }
    *ret_new = new;
    return 0;
}

/* A deep copy of obj and its metadata object (borrowed from the copy); NULL when either is
 * missing. Owned. */
static json_t *copy_with_metadata(const json_t *obj, json_t **ret_md)
{
    json_t *new = json_deep_copy(obj);
    *ret_md = json_object_get(new, "metadata");
    if (!*ret_md) {
        json_decref(new);
        return NULL;
    }
    return new;
}

json_t *local_finalizer_add(const json_t *old, const char *name)
{
    json_t *md;
    json_t *new = copy_with_metadata(old, &md);
    if (!new)
        return NULL;
    json_t *f = json_object_get(md, "finalizers");
    if (!json_is_array(f)) {
        f = json_array();
        if (json_object_set_new(md, "finalizers", f) < 0) {
            json_decref(new);
            return NULL;
        }
    }
    if (!local_has_finalizer(new, name) && json_array_append_new(f, json_string(name)) < 0) {
        json_decref(new);
        return NULL;
    }
    return new;
}

json_t *local_finalizer_remove(const json_t *old, const char *name)
{
    json_t *md;
    json_t *new = copy_with_metadata(old, &md);
    if (!new)
        return NULL;
    json_t *f = json_object_get(md, "finalizers");
    for (size_t i = json_array_size(f); i-- > 0;) {
        const char *s = json_string_value(json_array_get(f, i));
        if (s && strcmp(s, name) == 0)
            json_array_remove(f, i);
    }
    if (json_is_array(f) && json_array_size(f) == 0)
        json_object_del(md, "finalizers");
    return new;
}
