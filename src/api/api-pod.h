/* A pod spec as a typed value (issue 31): what asb serve reads of a Sandbox's or a template's
 * `podTemplate.spec`, parsed once from the JSON admission validated: quantities as numbers (bytes,
 * millicores), mounts, users. Admission builds it to check the quantities (api-validate-core.c);
 * the reconciler builds it once per start and the runtime's limits, capacity checks and mounts
 * read it instead of digging in the JSON. Strings and JSON arrays are borrowed from the pod spec,
 * which the value holds a reference to. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "api/api.h"

/* The resources asb serve counts: the index of each in api_resource_list.q. */
typedef enum api_resource {
    API_RESOURCE_MEMORY,            /* bytes */
    API_RESOURCE_CPU,               /* millicores */
    API_RESOURCE_EPHEMERAL_STORAGE, /* bytes */
    API_RESOURCE_COUNT,
} api_resource;

/* "memory", "cpu", "ephemeral-storage". */
const char *api_resource_name(api_resource r);

typedef struct api_quantity {
    bool set;
    int64_t value; /* bytes, or millicores for cpu */
    char text[32]; /* as written ("512Mi", "2"), cut to fit */
} api_quantity;

typedef struct api_resource_list {
    api_quantity q[API_RESOURCE_COUNT];
} api_resource_list;

typedef struct api_volume_mount {
    const char *name, *mount_path, *sub_path; /* sub_path NULL when unset or empty */
    bool read_only;
} api_volume_mount;

typedef struct api_container {
    const json_t *json;                     /* the container's object, for what is not typed */
    const char *name, *image, *working_dir; /* NULL when unset */
    const json_t *command, *args, *env;     /* arrays, NULL when unset */
    api_resource_list limits, requests;
    api_volume_mount *mounts;
    size_t n_mounts;
    int64_t run_as_user, run_as_group; /* -1 when unset */
} api_container;

typedef struct api_pod {
    json_t *json; /* the pod spec (a reference) */
    api_container *containers, *init_containers;
    size_t n_containers, n_init_containers;
    const char *runtime_class_name;
    int64_t run_as_user, run_as_group; /* the pod's securityContext; -1 when unset */
} api_pod;

/* Parses a pod spec (`podTemplate.spec`, borrowed; NULL: an empty pod). A quantity that is not
 * one, or negative, is an error: recorded in errs under path ("spec.podTemplate.spec") when errs
 * is given, and -EINVAL. *ret owned (api_pod_free) on success. 0, -EINVAL or -ENOMEM. */
int api_pod_parse(const json_t *pod_spec, const char *path, api_errors *errs, api_pod **ret);
api_pod *api_pod_free(api_pod *p);
static inline void api_pod_freep(api_pod **p)
{
    api_pod_free(*p);
}
/* The pod spec of a Sandbox or SandboxTemplate object (borrowed), or NULL. */
const json_t *api_pod_spec_of(const json_t *obj);
/* A quantity of resource r as the runtime counts it (bytes, millicores): 0 or -EINVAL (not a
 * quantity, negative, or beyond int64). */
int api_quantity_parse(const char *s, api_resource r, int64_t *ret);
