/* Checks of the Kubernetes core types that the kinds embed (api-validate-core.c): the subset of
 * kube-apiserver's Pod, PVC and NetworkPolicy validation that asb serve applies, with its
 * messages. The kind tables (api-kind-*.c) hook them in as api_field.check. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "api/api.h"

void api_check_pod_template(api_errors *e, const char *path, const json_t *v);
void api_check_volume_claim_templates(api_errors *e, const char *path, const json_t *v);
void api_check_np_ingress(api_errors *e, const char *path, const json_t *v);
void api_check_np_egress(api_errors *e, const char *path, const json_t *v);
/* A Sandbox's volumeMounts each name a volume of its pod spec or one of its volumeClaimTemplates
 * (a Pod's rule; a template's mounts may name volumes its claims bring). */
void api_check_sandbox_mounts(api_errors *e, const json_t *spec);
/* SandboxClaim spec.env: name, value, valueFrom, containerName. */
void api_check_claim_env(api_errors *e, const char *path, const json_t *v);

/* Shared by the generic validator (api-validate.c) and the core checks. */
/* "object", "array", "string", "integer", "number", "boolean" or "null". */
const char *api_json_type_name(const json_t *v);
bool api_want_type(api_errors *e, const char *path, const json_t *v, json_type t);
/* The structural schema's type error: `path in body must be of type WANT: "GOT"` (want:
 * "integer", "integer,string", ...). */
void api_type_error(api_errors *e, const char *path, const json_t *v, const char *want);
void api_check_enum(api_errors *e, const char *path, const json_t *v, const char *const *vals);
void api_check_required_string(api_errors *e, const char *path, const json_t *v);
void api_check_date_time(api_errors *e, const char *path, const json_t *v);
void api_check_string_map(api_errors *e, const char *path, const json_t *m, bool label_values);
void api_check_string_array(api_errors *e, const char *path, const json_t *a);
/* A string that must match an ECMA/POSIX-ERE pattern of a schema (pattern is static: compiled
 * once, keyed by its address). */
void api_check_pattern(api_errors *e, const char *path, const json_t *v, const char *pattern);
