/* A kind's shape, declared once: field descriptors (one table per kind, src/api/api-kinds/) from
 * which the CRD's openAPIV3Schema (api-crd.c, written to deploy/crds by asb-gen-crds and
 * scripts/gen-crds.py), validation (api-validate.c), defaulting (api-default.c), pruning of
 * unknown fields (api-schema.c) and the printer columns of the CRD and of `asb get` are produced.
 * Tables are static and never change. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

typedef struct api_errors api_errors;

typedef enum api_field_type {
    API_TYPE_STRING,
    API_TYPE_INTEGER,
    API_TYPE_BOOLEAN,
    API_TYPE_OBJECT,     /* .props */
    API_TYPE_ARRAY,      /* .items */
    API_TYPE_STRING_MAP, /* additionalProperties: string (labels, annotations) */
    API_TYPE_FREE, /* x-kubernetes-preserve-unknown-fields, or a Kubernetes type (.k8s_type) */
} api_field_type;

/* Validates a present value at path in place of the generic checks (type included). */
typedef void (*api_field_check)(api_errors *errs, const char *path, const json_t *v);

typedef struct api_field api_field;
struct api_field {
    const char *name; /* NULL ends a property list */
    api_field_type type;
    const char *format;      /* "date-time" (validated), "int32", "int64" */
    const char *description; /* CRD only */
    bool required;
    bool immutable; /* spec fields: may not be added, removed or changed by an update */
    const char *const *enum_values; /* NULL-terminated */
    const char *default_json;       /* CRD default as JSON text ("\"Retain\"", "1", "{}") */
    bool has_minimum, has_maximum;
    long long minimum, maximum;
    unsigned min_length;      /* 1 on a required string: empty is "Required value" */
    unsigned max_length;      /* CRD only */
    const char *pattern;      /* CRD only */
    const api_field *props;   /* API_TYPE_OBJECT: {0}-terminated */
    const api_field *items;   /* API_TYPE_ARRAY: one descriptor (its name unused) */
    const char *list_type;    /* x-kubernetes-list-type */
    const char *list_map_key; /* x-kubernetes-list-map-keys (one key) */
    /* API_TYPE_FREE holding a Kubernetes type ("io.k8s.api.core.v1.PodSpec"): the CRD keeps
     * unknown fields unless scripts/gen-crds.py expands the type's pinned schema in its place. */
    const char *k8s_type;
    bool label_values; /* API_TYPE_STRING_MAP: values are label values */
    api_field_check check;
};

/* How `asb get` computes a cell (the CRD only knows .json_path). */
typedef enum api_column_value {
    API_COLUMN_PATH,          /* the value at json_path */
    API_COLUMN_AGE,           /* kubectl's age of .metadata.creationTimestamp */
    API_COLUMN_CLAIM_LATENCY, /* first Ready minus first request */
    API_COLUMN_NETWORK,       /* what the sandbox can reach */
    API_COLUMN_BLOCKED,       /* blocked connections of the NetworkPolicyEnforced condition */
    API_COLUMN_FIRST_POD_IP,  /* json_path's value, or its .ip when an object */
    API_COLUMN_REGARDING,     /* an Event's object: kind/name of .regarding */
} api_column_value;

/* A printer column. `asb get` prints NAME (and NAMESPACE with -A) first, then these in order,
 * headed by the name in upper case; the CRD's additionalPrinterColumns are the ones with crd. */
typedef struct api_column {
    const char *name; /* NULL ends the list */
    const char *type; /* "string", "integer", "date" */
    const char *json_path;
    const char *missing; /* the cell when json_path finds nothing ("<none>" when NULL) */
    api_column_value value;
    bool crd;
    bool wide; /* only with -o wide */
} api_column;

/* The value at a printer column's JSONPath: `.a.b`, `.a[0].b`, `.a[?(@.type=="Ready")].b`.
 * Borrowed from obj, or NULL. */
const json_t *api_json_path(const json_t *obj, const char *path);
