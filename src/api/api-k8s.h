/* The structural schemas of the Kubernetes types the kinds embed (api-k8s-schema.c), the same
 * ones scripts/gen-crds.py expands into deploy/crds: pruning and validation of a value of such a
 * type the way kube-apiserver treats it under our CRDs. */
#pragma once

#include <jansson.h>
#include <string.h>

#include "api/api.h"

/* A field path built in place while a walk descends ("spec.a[0].b"), without an allocation per
 * field; a path longer than the buffer is cut (it only ever appears in messages). */
typedef struct api_path {
    char s[1024];
    size_t n;
} api_path;

/* Appends ".key" (or "key" at the root) / "[i]"; returns the length to restore with pop.
 * (memcpy, not snprintf: this runs for every field of every write.) */
static inline void api_path_put(api_path *p, const char *s, size_t n)
{
    size_t room = sizeof(p->s) - 1 - p->n;
    n = n < room ? n : room;
    memcpy(p->s + p->n, s, n);
    p->n += n;
    p->s[p->n] = '\0';
}
static inline size_t api_path_push(api_path *p, const char *key)
{
    size_t was = p->n;
    if (p->n)
        api_path_put(p, ".", 1);
    api_path_put(p, key, strlen(key));
    return was;
}
static inline size_t api_path_push_index(api_path *p, size_t i)
{
    size_t was = p->n;
    char buf[24], *e = buf + sizeof(buf), *d = e;
    *--d = ']';
    do
        *--d = (char)('0' + i % 10);
    while ((i /= 10) > 0);
    *--d = '[';
    api_path_put(p, d, (size_t)(e - d));
    return was;
}
static inline void api_path_pop(api_path *p, size_t was)
{
    p->n = was;
    p->s[was] = '\0';
}
static inline void api_path_init(api_path *p, const char *root)
{
    p->n = 0;
    p->s[0] = '\0';
    if (root && *root)
        api_path_push(p, root);
}

/* The schema of type ("io.k8s.api.core.v1.PodSpec"), borrowed for the life of the process; NULL
 * when unknown. Thread-safe (loaded once). */
const json_t *api_k8s_type_schema(const char *type);
/* node, or the type it names when it is a reference ({"$ref": "io.k8s..."}). */
const json_t *api_k8s_resolve(const json_t *node);

/* Removes from v, at any depth, every field the schema of type does not declare (and nulls, which
 * the schema never allows), appending the path of each unknown field ("path.a[0].b") to paths.
 * Returns 0 or -ENOMEM. */
int api_k8s_prune(const char *type, json_t *v, const char *path, json_t *paths);

/* Validates v (at path) against the schema of type: types, required fields, enums, patterns
 * (quantities), int-or-string, date-times; messages as kube-apiserver words them for a CRD. */
void api_k8s_validate(api_errors *e, const char *type, const char *path, const json_t *v);
