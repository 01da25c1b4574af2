/* Fragments shared by the kind tables (api-kind-*.c): the blueprint a Sandbox and a
 * SandboxTemplate both carry, conditions, pod metadata. See api-field.h. */
#pragma once

#include "api/api-field.h"
#include "api/api-spec.h"

/* The tables read best as written: keep clang-format out of them. */
/* clang-format off */
/* Each kind's table: its "spec" and "status" fields (one descriptor each) and printer columns. */
extern const api_field api_sandbox_spec[], api_sandbox_status[];
extern const api_column api_sandbox_columns[];
extern const api_field api_template_spec[];
extern const api_column api_template_columns[];
extern const api_field api_warmpool_spec[], api_warmpool_status[];
extern const api_column api_warmpool_columns[];
extern const api_field api_claim_spec[], api_claim_status[];
extern const api_column api_claim_columns[];
extern const api_field api_snapshot_spec[], api_snapshot_status[];
extern const api_column api_snapshot_columns[];

extern const api_field api_pod_template_props[];     /* metadata (labels, annotations), spec */
extern const api_field api_volume_claim_template[];  /* one item of volumeClaimTemplates */
extern const api_field api_labels_annotations[];     /* labels, annotations */
extern const api_field api_condition[];              /* one metav1.Condition */

extern const api_field api_string_item[];           /* items of a list of strings */

/* The name of an object a spec refers to: an object name (a DNS-1123 subdomain), or it could
 * never be found. */
#define API_DNS1123_SUBDOMAIN                                                                      \
    "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
#define API_FIELD_REF_NAME                                                                         \
    {.name = "name", .type = API_TYPE_STRING, .required = true, .min_length = 1,                 \
     .max_length = 253, .pattern = API_DNS1123_SUBDOMAIN}

#define API_FIELD_POD_TEMPLATE(is_required)                                                        \
    {.name = "podTemplate", .type = API_TYPE_OBJECT, .required = (is_required),                  \
     .description = "Pod template; only labels and annotations of its metadata are used",        \
     .props = api_pod_template_props, .check = api_check_pod_template}

#define API_FIELD_VOLUME_CLAIM_TEMPLATES(is_immutable)                                             \
    {.name = "volumeClaimTemplates", .type = API_TYPE_ARRAY, .immutable = (is_immutable),         \
     .items = api_volume_claim_template, .list_type = "atomic",                                   \
     .check = api_check_volume_claim_templates}

#define API_FIELD_SERVICE                                                                          \
    {.name = "service", .type = API_TYPE_BOOLEAN,                                                  \
     .description = "true: headless Service; false: delete an owned one; unset: keep, never create"}

#define API_FIELD_CONDITIONS                                                                       \
    {.name = "conditions", .type = API_TYPE_ARRAY, .items = api_condition, .list_type = "map",    \
     .list_map_key = "type"}

#define API_FIELD_TYPE_META                                                                        \
    {.name = "apiVersion", .type = API_TYPE_STRING}, {.name = "kind", .type = API_TYPE_STRING}

/* Printer columns every kind shares. */
#define API_COLUMN_READY                                                                           \
    {.name = "Ready", .type = "string",                                                            \
     .json_path = ".status.conditions[?(@.type==\"Ready\")].status", .crd = true}
#define API_COLUMN_REASON                                                                          \
    {.name = "Reason", .type = "string",                                                           \
     .json_path = ".status.conditions[?(@.type==\"Ready\")].reason", .crd = true}
#define API_COLUMN_AGE_                                                                            \
    {.name = "Age", .type = "date", .json_path = ".metadata.creationTimestamp",                   \
     .value = API_COLUMN_AGE, .crd = true}
/* clang-format on */
