/* The structural schemas of the Kubernetes types the kinds embed (api-k8s-schema.c), the same
 * ones scripts/gen-crds.py expands into deploy/crds: pruning and validation of a value of such a
 * type the way kube-apiserver treats it under our CRDs. */
#pragma once

#include <jansson.h>

#include "api/api.h"

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
