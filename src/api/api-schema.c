/* The fields each kind declares, as the structural openAPIV3Schema of its CRD does
 * (scripts/gen-crds.py writes the same tree into deploy/crds), and pruning of everything else the
 * way kube-apiserver prunes custom resources: unknown fields are dropped at any depth, except
 * under subtrees that keep unknown fields (core/v1 PodSpec, PVC specs, NetworkPolicy rules) and
 * in string maps (labels, annotations). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "basic/macro.h"

typedef enum schema_type {
    SCHEMA_LEAF,   /* scalar, or a list of scalars: nothing below to prune */
    SCHEMA_OBJECT, /* properties only */
    SCHEMA_FREE,   /* x-kubernetes-preserve-unknown-fields */
    SCHEMA_MAP,    /* additionalProperties: string values */
    SCHEMA_ARRAY,  /* items */
} schema_type;

typedef struct schema_node schema_node;
typedef struct schema_prop {
    const char *name;
    const schema_node *node;
} schema_prop;

struct schema_node {
    schema_type type;
    const schema_prop *props; /* SCHEMA_OBJECT: {NULL, NULL}-terminated */
    const schema_node *items; /* SCHEMA_ARRAY */
};

/* The schema tables read best as written: keep clang-format out of them. */
/* clang-format off */
#define OBJECT(...) (&(const schema_node){SCHEMA_OBJECT, (const schema_prop[]){__VA_ARGS__, {0}}, 0})
#define ARRAY(n) (&(const schema_node){SCHEMA_ARRAY, NULL, (n)})

static const schema_node LEAF = {SCHEMA_LEAF, NULL, NULL};
static const schema_node FREE = {SCHEMA_FREE, NULL, NULL};
static const schema_node STRMAP = {SCHEMA_MAP, NULL, NULL};

/* metav1.ObjectMeta, which kube-apiserver decodes strictly for custom resources too. */
#define OWNER_REF                                                                                  \
    OBJECT({"apiVersion", &LEAF}, {"kind", &LEAF}, {"name", &LEAF}, {"uid", &LEAF},                \
           {"controller", &LEAF}, {"blockOwnerDeletion", &LEAF})
#define OBJECT_META                                                                                \
    OBJECT({"name", &LEAF}, {"generateName", &LEAF}, {"namespace", &LEAF}, {"selfLink", &LEAF},    \
           {"uid", &LEAF}, {"resourceVersion", &LEAF}, {"generation", &LEAF},                      \
           {"creationTimestamp", &LEAF}, {"deletionTimestamp", &LEAF},                             \
           {"deletionGracePeriodSeconds", &LEAF}, {"labels", &STRMAP}, {"annotations", &STRMAP},   \
           {"ownerReferences", ARRAY(OWNER_REF)}, {"finalizers", &LEAF},                           \
           {"managedFields", ARRAY(&FREE)})
#define LABELS_ANNOTATIONS OBJECT({"labels", &STRMAP}, {"annotations", &STRMAP})
#define CONDITIONS                                                                                 \
    ARRAY(OBJECT({"type", &LEAF}, {"status", &LEAF}, {"observedGeneration", &LEAF},                \
                 {"lastTransitionTime", &LEAF}, {"reason", &LEAF}, {"message", &LEAF}))
#define VOLUME_CLAIM_TEMPLATES                                                                     \
    ARRAY(OBJECT({"metadata",                                                                      \
                  OBJECT({"name", &LEAF}, {"labels", &STRMAP}, {"annotations", &STRMAP})},         \
                 {"spec", &FREE}))
#define POD_TEMPLATE OBJECT({"metadata", LABELS_ANNOTATIONS}, {"spec", &FREE})
#define BLUEPRINT                                                                                  \
    {"podTemplate", POD_TEMPLATE}, {"volumeClaimTemplates", VOLUME_CLAIM_TEMPLATES},               \
        {"service", &LEAF}
#define TYPE_META {"apiVersion", &LEAF}, {"kind", &LEAF}, {"metadata", OBJECT_META}

static const schema_node *const SANDBOX = OBJECT(
    TYPE_META,
    {"spec", OBJECT(BLUEPRINT, {"shutdownTime", &LEAF}, {"shutdownPolicy", &LEAF},
                    {"operatingMode", &LEAF})},
    {"status", OBJECT({"serviceFQDN", &LEAF}, {"service", &LEAF}, {"conditions", CONDITIONS},
                      {"selector", &LEAF}, {"podIPs", &LEAF}, {"nodeName", &LEAF})});

static const schema_node *const TEMPLATE = OBJECT(
    TYPE_META,
    {"spec", OBJECT(BLUEPRINT,
                    {"networkPolicy", OBJECT({"ingress", ARRAY(&FREE)}, {"egress", ARRAY(&FREE)})},
                    {"networkPolicyManagement", &LEAF}, {"envVarsInjectionPolicy", &LEAF},
                    {"volumeClaimTemplatesPolicy", &LEAF})});

static const schema_node *const WARM_POOL = OBJECT(
    TYPE_META,
    {"spec", OBJECT({"replicas", &LEAF}, {"sandboxTemplateRef", OBJECT({"name", &LEAF})},
                    {"updateStrategy", OBJECT({"type", &LEAF})})},
    {"status", OBJECT({"replicas", &LEAF}, {"readyReplicas", &LEAF}, {"selector", &LEAF},
                      {"observedGeneration", &LEAF})});

static const schema_node *const CLAIM = OBJECT(
    TYPE_META,
    {"spec",
     OBJECT({"warmPoolRef", OBJECT({"name", &LEAF})},
            {"lifecycle", OBJECT({"shutdownTime", &LEAF}, {"ttlSecondsAfterFinished", &LEAF},
                                 {"shutdownPolicy", &LEAF})},
            {"additionalPodMetadata", LABELS_ANNOTATIONS},
            {"env", ARRAY(OBJECT({"name", &LEAF}, {"value", &LEAF}, {"containerName", &LEAF}))},
            {"volumeClaimTemplates", VOLUME_CLAIM_TEMPLATES})},
    {"status", OBJECT({"conditions", CONDITIONS},
                      {"sandbox", OBJECT({"name", &LEAF}, {"podIPs", &LEAF})})});

/* clang-format on */

static const schema_node *schema_of(const api_kind *k)
{
    if (strcmp(k->kind, "Sandbox") == 0)
        return SANDBOX;
    if (strcmp(k->kind, "SandboxTemplate") == 0)
        return TEMPLATE;
    if (strcmp(k->kind, "SandboxWarmPool") == 0)
        return WARM_POOL;
    if (strcmp(k->kind, "SandboxClaim") == 0)
        return CLAIM;
    return NULL;
}

static const schema_node *prop(const schema_node *n, const char *name)
{
    for (const schema_prop *p = n->props; p->name; p++)
        if (strcmp(p->name, name) == 0)
            return p->node;
    return NULL;
}

static int add_path(json_t *paths, const char *path)
{
    json_t *s = json_string(path);
    return s && json_array_append_new(paths, s) == 0 ? 0 : -ENOMEM;
}

static int prune(const schema_node *n, json_t *v, const char *path, json_t *paths)
{
    if (n->type == SCHEMA_ARRAY && json_is_array(v)) {
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
    if (n->type != SCHEMA_OBJECT || !json_is_object(v))
        return 0; /* wrong types are the validator's business */
    const char *key;
    json_t *child;
    void *tmp;
    json_object_foreach_safe (v, tmp, key, child) {
        _cleanup_free_ char *sub = NULL;
        if (asprintf(&sub, "%s%s%s", path, *path ? "." : "", key) < 0)
            return -ENOMEM;
        const schema_node *cn = prop(n, key);
        int r = cn ? prune(cn, child, sub, paths) : add_path(paths, sub);
        if (r < 0)
            return r;
        if (!cn) {
            _cleanup_free_ char *name = strdup(key);
            if (!name)
                return -ENOMEM;
            json_object_del(v, name);
        }
    }
    return 0;
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
    const schema_node *n = schema_of(k);
    int r = n ? prune(n, obj, "", paths) : 0;
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
