/* The kinds' specs as typed values (issue 35): what code reads of a stored Sandbox,
 * SandboxTemplate, SandboxClaim or SandboxWarmPool (the Sandbox start, the pool and claim rules),
 * parsed from the JSON admission validated, instead of digging in it. The pod template's spec is
 * an api_pod (api-pod.h), built by the same parser admission runs (api_pod_template_parse).
 * Strings and JSON values are borrowed from the object, which a value holds a reference to; a
 * field that is unset (or of another type) is NULL, -1 or false unless said otherwise.
 *
 * Code that copies a subtree wholesale (a template's pod template into a Sandbox, a snapshot's
 * recorded source) keeps working on JSON, but reaches it through the accessors below, so that the
 * field names live here and in the kind tables only. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "api/api-pod.h"
#include "basic/macro.h"

/* The field that holds a pod template: in a Sandbox's and a SandboxTemplate's spec, in a
 * SandboxSnapshot's status.source; for code that builds such an object. */
#define API_POD_TEMPLATE "podTemplate"

/* The pod template of a spec (or of a snapshot's status.source), borrowed, or NULL. */
static inline json_t *api_pod_template_json(const json_t *spec)
{
    return json_object_get(spec, API_POD_TEMPLATE);
}

/* The pod template of a Sandbox or SandboxTemplate object, borrowed, or NULL. */
static inline json_t *api_pod_template_of(const json_t *obj)
{
    return api_pod_template_json(json_object_get(obj, "spec"));
}

/* The pod template's spec's first container (the one asb serve runs), borrowed, or NULL. */
static inline json_t *api_pod_template_container0(const json_t *pod_template)
{
    return json_array_get(json_object_get(json_object_get(pod_template, "spec"), "containers"), 0);
}

/* The names a claim and a pool refer to, for lookups on hot paths that need no whole spec:
 * a SandboxClaim's spec.warmPoolRef.name, a SandboxWarmPool's (or a claim's)
 * spec.sandboxTemplateRef.name. Borrowed, or NULL. */
static inline const char *api_warm_pool_ref(const json_t *obj)
{
    return json_string_value(
        json_object_get(json_object_get(json_object_get(obj, "spec"), "warmPoolRef"), "name"));
}
static inline const char *api_template_ref(const json_t *obj)
{
    return json_string_value(json_object_get(
        json_object_get(json_object_get(obj, "spec"), "sandboxTemplateRef"), "name"));
}

typedef struct api_pod_template {
    const json_t *json;                 /* the podTemplate object, or NULL */
    const json_t *labels, *annotations; /* metadata's, objects or NULL */
    api_pod *pod;                       /* its spec; an empty pod when there is none */
} api_pod_template;

/* Parses a pod template (borrowed; NULL: none). Its spec's quantities are checked as
 * api_pod_parse does, errors recorded under path + ".spec" when errs is given. 0, -EINVAL or
 * -ENOMEM; on success *ret holds an api_pod to release with api_pod_template_done(). */
int api_pod_template_parse(const json_t *pod_template, const char *path, api_errors *errs,
                           api_pod_template *ret);
void api_pod_template_done(api_pod_template *t);

/* A Sandbox's spec. */
typedef struct api_sandbox_spec {
    json_t *json; /* the object (a reference) */
    api_pod_template pod_template;
    const json_t *volume_claim_templates; /* array or NULL */
    const char *shutdown_time, *shutdown_policy, *operating_mode;
    int64_t replicas; /* v1alpha1's, -1 when unset */
    bool service;     /* spec.service is true */
} api_sandbox_spec;

/* A SandboxTemplate's spec. */
typedef struct api_template_spec {
    json_t *json;
    api_pod_template pod_template;
    const json_t *volume_claim_templates;
    const json_t *network_policy; /* object or NULL: no policy asked for */
    const char *network_policy_management, *env_vars_injection_policy,
        *volume_claim_templates_policy;
    bool service;
} api_template_spec;

/* A SandboxClaim's spec. */
typedef struct api_claim_spec {
    json_t *json;
    const char *template_ref;                    /* sandboxTemplateRef.name */
    const char *warm_pool_ref;                   /* warmPoolRef.name */
    const char *shutdown_time, *shutdown_policy; /* lifecycle */
    bool has_ttl;                                /* lifecycle.ttlSecondsAfterFinished is set */
    int64_t ttl_seconds_after_finished;
    const json_t *labels, *annotations;   /* additionalPodMetadata's */
    const json_t *env;                    /* array or NULL */
    const json_t *volume_claim_templates; /* array or NULL */
} api_claim_spec;

/* A SandboxWarmPool's spec. */
typedef struct api_warmpool_spec {
    json_t *json;
    const char *template_ref; /* sandboxTemplateRef.name */
    int64_t replicas;         /* 1 when unset, as defaulting makes it */
    const char *update_strategy;
} api_warmpool_spec;

/* Parse a stored (admitted) object of the kind. Only the pod template's quantities can fail
 * (-EINVAL, recorded in errs when given); -ENOMEM. *ret owned on success: free it with the
 * kind's _free, which accepts NULL and returns NULL. */
int api_sandbox_spec_parse(const json_t *obj, api_errors *errs, api_sandbox_spec **ret);
int api_template_spec_parse(const json_t *obj, api_errors *errs, api_template_spec **ret);
int api_claim_spec_parse(const json_t *obj, api_claim_spec **ret);
int api_warmpool_spec_parse(const json_t *obj, api_warmpool_spec **ret);

api_sandbox_spec *api_sandbox_spec_free(api_sandbox_spec *s);
api_template_spec *api_template_spec_free(api_template_spec *s);
api_claim_spec *api_claim_spec_free(api_claim_spec *s);
api_warmpool_spec *api_warmpool_spec_free(api_warmpool_spec *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(api_sandbox_spec *, api_sandbox_spec_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(api_template_spec *, api_template_spec_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(api_claim_spec *, api_claim_spec_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(api_warmpool_spec *, api_warmpool_spec_free);
