/* Fragments the kind tables share (api-kinds.h). */
#include "api/api-kinds.h"

/* clang-format off */
const api_field api_string_item[] = {{.type = API_TYPE_STRING}};

const api_field api_labels_annotations[] = {
    {.name = "labels", .type = API_TYPE_STRING_MAP, .label_values = true},
    {.name = "annotations", .type = API_TYPE_STRING_MAP},
    {0},
};

const api_field api_pod_template_props[] = {
    {.name = "metadata", .type = API_TYPE_OBJECT, .props = api_labels_annotations},
    {.name = "spec", .type = API_TYPE_FREE, .required = true,
     .k8s_type = "io.k8s.api.core.v1.PodSpec",
     .description = "core/v1 PodSpec"},
    {0},
};

static const api_field volume_claim_template_metadata[] = {
    {.name = "name", .type = API_TYPE_STRING},
    {.name = "labels", .type = API_TYPE_STRING_MAP, .label_values = true},
    {.name = "annotations", .type = API_TYPE_STRING_MAP},
    {0},
};

static const api_field volume_claim_template_props[] = {
    {.name = "metadata", .type = API_TYPE_OBJECT, .required = true,
     .props = volume_claim_template_metadata},
    {.name = "spec", .type = API_TYPE_FREE,
     .k8s_type = "io.k8s.api.core.v1.PersistentVolumeClaimSpec",
     .description = "core/v1 PersistentVolumeClaimSpec"},
    {0},
};

const api_field api_volume_claim_template[] = {
    {.type = API_TYPE_OBJECT, .props = volume_claim_template_props},
};

static const char *const condition_statuses[] = {"True", "False", "Unknown", NULL};

static const api_field condition_props[] = {
    {.name = "type", .type = API_TYPE_STRING, .required = true, .max_length = 316,
     .pattern = "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"},
    {.name = "status", .type = API_TYPE_STRING, .required = true,
     .enum_values = condition_statuses},
    {.name = "observedGeneration", .type = API_TYPE_INTEGER, .format = "int64",
     .has_minimum = true},
    {.name = "lastTransitionTime", .type = API_TYPE_STRING, .required = true,
     .format = "date-time"},
    {.name = "reason", .type = API_TYPE_STRING, .required = true, .max_length = 1024},
    {.name = "message", .type = API_TYPE_STRING, .required = true, .max_length = 32768},
    {0},
};

const api_field api_condition[] = {{.type = API_TYPE_OBJECT, .props = condition_props}};
/* clang-format on */
