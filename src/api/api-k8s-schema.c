/* The Kubernetes types the kinds embed (core/v1 PodSpec, PersistentVolumeClaimSpec, the
 * NetworkPolicy rules), as the structural schemas the CRDs carry: scripts/gen-crds.py writes them
 * to src/api/gen/k8s-schemas.json from the pinned Kubernetes schemas, with references kept, and the
 * build embeds that file. Pruning here; validation in api-k8s-validate.c. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api-k8s.h"
#include "basic/macro.h"

extern const unsigned char api_k8s_schemas_json[];
extern const size_t api_k8s_schemas_json_len;

static json_t *schemas;
static pthread_once_t schemas_once = PTHREAD_ONCE_INIT;

static void load(void)
{
    json_error_t err;
    schemas = json_loadb((const char *)api_k8s_schemas_json, api_k8s_schemas_json_len, 0, &err);
    /* The file is generated and checked by the build's tests: a bad one is a build bug. */
    if (!schemas)
        fprintf(stderr, "asb: embedded Kubernetes schemas: %s (line %d)\n", err.text, err.line);
}

const json_t *api_k8s_type_schema(const char *type)
{
    pthread_once(&schemas_once, load);
    return schemas ? json_object_get(schemas, type) : NULL;
}

const json_t *api_k8s_resolve(const json_t *node)
{
    /* References are one level deep: a type's schema is never itself a bare reference. */
    const char *ref = json_string_value(json_object_get(node, "$ref"));
    return ref ? api_k8s_type_schema(ref) : node;
}

static int add_path(json_t *paths, const char *path)
{
    json_t *s = json_string(path);
    return s && json_array_append_new(paths, s) == 0 ? 0 : -ENOMEM;
}

static int prune(const json_t *schema, json_t *v, api_path *path, json_t *paths);

static int prune_object(const json_t *schema, json_t *v, api_path *path, json_t *paths)
{
    const json_t *props = json_object_get(schema, "properties");
    const json_t *additional = json_object_get(schema, "additionalProperties");
    const char *key;
    json_t *child;
    void *tmp;
    json_object_foreach_safe (v, tmp, key, child) {
        const json_t *cs = props ? json_object_get(props, key) : NULL;
        if (!cs && json_is_object(additional))
            cs = additional;
        /* A null where the schema does not say nullable is pruned silently, as kube-apiserver
         * prunes it before defaulting. */
        bool drop_null = json_is_null(child);
        size_t was = api_path_push(path, key);
        int r = 0;
        if (!cs && !drop_null)
            r = add_path(paths, path->s);
        else if (cs && !drop_null)
            r = prune(cs, child, path, paths);
        api_path_pop(path, was);
        if (r < 0)
            return r;
        if (!cs || drop_null) {
            _cleanup_free_ char *name = strdup(key);
            if (!name)
                return -ENOMEM;
            json_object_del(v, name);
        }
    }
    return 0;
}

static int prune(const json_t *schema, json_t *v, api_path *path, json_t *paths)
{
    schema = api_k8s_resolve(schema);
    if (!schema)
        return 0;
    const char *type = json_string_value(json_object_get(schema, "type"));
    if (!type)
        return 0; /* int-or-string */
    if (strcmp(type, "array") == 0 && json_is_array(v)) {
        const json_t *items = json_object_get(schema, "items");
        size_t i;
        json_t *item;
        json_array_foreach (v, i, item) {
            size_t was = api_path_push_index(path, i);
            int r = items ? prune(items, item, path, paths) : 0;
            api_path_pop(path, was);
            if (r < 0)
                return r;
        }
        return 0;
    }
    if (strcmp(type, "object") != 0 || !json_is_object(v))
        return 0; /* wrong types are the validator's business */
    return prune_object(schema, v, path, paths);
}

int api_k8s_prune(const char *type, json_t *v, const char *path, json_t *paths)
{
    const json_t *schema = api_k8s_type_schema(type);
    api_path p;
    api_path_init(&p, path);
    return schema ? prune(schema, v, &p, paths) : 0;
}
