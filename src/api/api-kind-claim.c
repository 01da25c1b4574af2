/* SandboxClaim (extensions.agents.x-k8s.io/v1beta1): the table of its fields and printer
 * columns. */
#include "api/api-kinds.h"

/* clang-format off */
static const char *const shutdown_policies[] = {"Delete", "DeleteForeground", "Retain", NULL};

static const api_field warm_pool_ref_props[] = {
    API_FIELD_REF_NAME,
    {0},
};

static const api_field lifecycle_props[] = {
    {.name = "shutdownTime", .type = API_TYPE_STRING, .format = "date-time"},
    {.name = "ttlSecondsAfterFinished", .type = API_TYPE_INTEGER, .format = "int32",
     .has_minimum = true, .minimum = 0},
    {.name = "shutdownPolicy", .type = API_TYPE_STRING, .enum_values = shutdown_policies,
     .default_json = "\"Retain\""},
    {0},
};

static const api_field env_props[] = {
    {.name = "name", .type = API_TYPE_STRING, .required = true, .min_length = 1},
    {.name = "value", .type = API_TYPE_STRING},
    {.name = "containerName", .type = API_TYPE_STRING},
    {0},
};

static const api_field spec_props[] = {
    {.name = "warmPoolRef", .type = API_TYPE_OBJECT, .required = true,
     .props = warm_pool_ref_props},
    {.name = "lifecycle", .type = API_TYPE_OBJECT, .props = lifecycle_props},
    {.name = "additionalPodMetadata", .type = API_TYPE_OBJECT, .props = api_labels_annotations},
    {.name = "env", .type = API_TYPE_ARRAY, .list_type = "atomic", .check = api_check_claim_env,
     .items = &(const api_field){.type = API_TYPE_OBJECT, .props = env_props}},
    API_FIELD_VOLUME_CLAIM_TEMPLATES(false),
    {0},
};

static const api_field sandbox_props[] = {
    {.name = "name", .type = API_TYPE_STRING},
    {.name = "podIPs", .type = API_TYPE_ARRAY, .items = api_string_item},
    /* ours (docs/compatibility.md): the bound Sandbox's metadata.uid, so a local client opens
     * its sockets without reading the Sandbox first */
    {.name = "uid", .type = API_TYPE_STRING},
    {0},
};

static const api_field status_props[] = {
    API_FIELD_CONDITIONS,
    {.name = "sandbox", .type = API_TYPE_OBJECT, .props = sandbox_props},
    {0},
};

const api_column api_claim_columns[] = {
    API_COLUMN_READY,
    {.name = "Sandbox", .type = "string", .json_path = ".status.sandbox.name", .crd = true},
    {.name = "Latency", .type = "string", .value = API_COLUMN_CLAIM_LATENCY},
    API_COLUMN_REASON,
    API_COLUMN_AGE_,
    /* A claim has no template reference: the column stays "<none>" (kept as it always was). */
    {.name = "Template", .type = "string", .json_path = ".spec.sandboxTemplateRef.name",
     .wide = true},
    {.name = "WarmPool", .type = "string", .json_path = ".spec.warmPoolRef.name", .wide = true},
    {0},
};

const api_field api_claim_spec[] = {
    {.name = "spec", .type = API_TYPE_OBJECT, .required = true, .props = spec_props}};
const api_field api_claim_status[] = {
    {.name = "status", .type = API_TYPE_OBJECT, .props = status_props}};
/* clang-format on */
