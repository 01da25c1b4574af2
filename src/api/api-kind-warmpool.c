/* SandboxWarmPool (extensions.agents.x-k8s.io/v1beta1): the table of its fields and printer
 * columns. */
#include "api/api-kinds.h"

/* clang-format off */
static const char *const strategies[] = {"Recreate", "OnReplenish", NULL};

static const api_field template_ref_props[] = {
    API_FIELD_REF_NAME,
    {0},
};

static const api_field update_strategy_props[] = {
    {.name = "type", .type = API_TYPE_STRING, .enum_values = strategies,
     .default_json = "\"OnReplenish\""},
    {0},
};

static const api_field spec_props[] = {
    {.name = "replicas", .type = API_TYPE_INTEGER, .format = "int32", .default_json = "1",
     .has_minimum = true, .minimum = 0, .has_maximum = true, .maximum = 2147483647},
    {.name = "sandboxTemplateRef", .type = API_TYPE_OBJECT, .required = true,
     .props = template_ref_props},
    /* Defaulted to {} so that its type is defaulted too (structural defaulting recurses). */
    {.name = "updateStrategy", .type = API_TYPE_OBJECT, .default_json = "{}",
     .props = update_strategy_props},
    {0},
};

static const api_field status_props[] = {
    API_FIELD_CONDITIONS,
    {.name = "replicas", .type = API_TYPE_INTEGER, .format = "int32"},
    {.name = "readyReplicas", .type = API_TYPE_INTEGER, .format = "int32"},
    {.name = "selector", .type = API_TYPE_STRING},
    {.name = "observedGeneration", .type = API_TYPE_INTEGER, .format = "int64"},
    {0},
};

const api_column api_warmpool_columns[] = {
    {.name = "Ready", .type = "integer", .json_path = ".status.readyReplicas", .missing = "0",
     .crd = true},
    /* An unset spec.replicas is 1 (§2.1). */
    {.name = "Desired", .type = "integer", .json_path = ".spec.replicas", .missing = "1",
     .crd = true},
    {.name = "Template", .type = "string", .json_path = ".spec.sandboxTemplateRef.name"},
    API_COLUMN_AGE_,
    {.name = "Replicas", .type = "integer", .json_path = ".status.replicas", .wide = true},
    {.name = "Strategy", .type = "string", .json_path = ".spec.updateStrategy.type", .wide = true},
    {0},
};

const api_field api_warmpool_spec[] = {
    {.name = "spec", .type = API_TYPE_OBJECT, .required = true, .props = spec_props}};
const api_field api_warmpool_status[] = {
    {.name = "status", .type = API_TYPE_OBJECT, .props = status_props}};
/* clang-format on */
