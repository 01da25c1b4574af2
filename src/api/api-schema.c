/* Pruning of unknown fields the way kube-apiserver prunes custom resources with structural
 * schemas: every field a kind's table (api-field.h) does not declare is dropped at any depth, and
 * inside the Kubernetes types a kind embeds (core/v1 PodSpec, PVC specs, NetworkPolicy rules) every
 * field their schema does not declare (api-k8s-schema.c); string maps (labels, annotations) and
 * free-form fields keep theirs. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/api-field.h"
#include "api/api-k8s.h"
#include "basic/macro.h"

/* metav1.ObjectMeta, which kube-apiserver decodes strictly for custom resources too. */
/* clang-format off */
#define LEAF(n) {.name = (n), .type = API_TYPE_STRING}
static const api_field owner_ref_props[] = {
    LEAF("apiVersion"), LEAF("kind"), LEAF("name"), LEAF("uid"), LEAF("controller"),
    LEAF("blockOwnerDeletion"), {0},
};
static const api_field object_meta_props[] = {
    LEAF("name"), LEAF("generateName"), LEAF("namespace"), LEAF("selfLink"), LEAF("uid"),
    LEAF("resourceVersion"), LEAF("generation"), LEAF("creationTimestamp"),
    LEAF("deletionTimestamp"), LEAF("deletionGracePeriodSeconds"),
    {.name = "labels", .type = API_TYPE_STRING_MAP},
    {.name = "annotations", .type = API_TYPE_STRING_MAP},
    {.name = "ownerReferences", .type = API_TYPE_ARRAY,
     .items = &(const api_field){.type = API_TYPE_OBJECT, .props = owner_ref_props}},
    LEAF("finalizers"),
    {.name = "managedFields", .type = API_TYPE_ARRAY,
     .items = &(const api_field){.type = API_TYPE_FREE}},
    {0},
};
#undef LEAF
/* clang-format on */

static const api_field *prop(const api_field *props, const char *name)
{
    for (const api_field *p = props; p->name; p++)
        if (strcmp(p->name, name) == 0)
            return p;
    return NULL;
}

static int add_path(json_t *paths, const char *path)
{
    json_t *s = json_string(path);
    return s && json_array_append_new(paths, s) == 0 ? 0 : -ENOMEM;
}

static int prune(const api_field *n, json_t *v, const char *path, json_t *paths);

static int prune_props(const api_field *props, json_t *v, const char *path, json_t *paths)
{
    const char *key;
    json_t *child;
    void *tmp;
    json_object_foreach_safe (v, tmp, key, child) {
        _cleanup_free_ char *sub = NULL;
        if (asprintf(&sub, "%s%s%s", path, *path ? "." : "", key) < 0)
            return -ENOMEM;
        const api_field *cn = prop(props, key);
        /* A null is pruned silently (no field of ours is nullable), as kube-apiserver prunes it
         * before defaulting. */
        bool drop_null = cn && json_is_null(child);
        int r = drop_null ? 0 : cn ? prune(cn, child, sub, paths) : add_path(paths, sub);
        if (r < 0)
            return r;
        if (!cn || drop_null) {
            _cleanup_free_ char *name = strdup(key);
            if (!name)
                return -ENOMEM;
            json_object_del(v, name);
        }
    }
    return 0;
}

static int prune(const api_field *n, json_t *v, const char *path, json_t *paths)
{
    if (n->type == API_TYPE_FREE && n->k8s_type)
        return api_k8s_prune(n->k8s_type, v, path, paths);
    if (n->type == API_TYPE_ARRAY && json_is_array(v)) {
        size_t i;
        json_t *item;
        json_array_foreach (v, i, item) {
            _cleanup_free_ char *sub = NULL;
            if (asprintf(&sub, "%s[%zu]", path, i) < 0)
                return -ENOMEM;
            int r = prune(n->items, item, sub, paths);
            if (r < 0)
                return r;
        }
        return 0;
    }
    if (n->type != API_TYPE_OBJECT || !json_is_object(v))
        return 0; /* wrong types are the validator's business */
    return prune_props(n->props, v, path, paths);
}

/* The object's top level: TypeMeta, ObjectMeta, then the kind's spec and status. */
static int prune_object(const api_kind *k, json_t *obj, json_t *paths)
{
    const api_field top[] = {
        {.name = "apiVersion", .type = API_TYPE_STRING},
        {.name = "kind", .type = API_TYPE_STRING},
        {.name = "metadata", .type = API_TYPE_OBJECT, .props = object_meta_props},
        *k->spec,
        k->status ? *k->status : (api_field){0},
        {0},
    };
    return json_is_object(obj) ? prune_props(top, obj, "", paths) : 0;
}

static int cmp_paths(const void *a, const void *b)
{
    return strcmp(json_string_value(*(json_t *const *)a), json_string_value(*(json_t *const *)b));
}

int api_prune_unknown(const api_kind *k, json_t *obj, json_t **ret_paths)
{
    *ret_paths = NULL;
    json_t *paths = json_array();
    if (!paths)
        return -ENOMEM;
    int r = prune_object(k, obj, paths);
    if (r < 0) {
        json_decref(paths);
        return r;
    }
    /* Sorted, as kube-apiserver reports them. */
    size_t cnt = json_array_size(paths);
    if (cnt > 1) {
        json_t **v = calloc(cnt, sizeof(*v));
        if (!v) {
            json_decref(paths);
            return -ENOMEM;
        }
        for (size_t i = 0; i < cnt; i++)
            v[i] = json_incref(json_array_get(paths, i));
        qsort(v, cnt, sizeof(*v), cmp_paths);
        json_array_clear(paths);
        for (size_t i = 0; i < cnt; i++)
            json_array_append_new(paths, v[i]);
        free(v);
    }
    *ret_paths = paths;
    return 0;
}
