/* Sandbox (agents.x-k8s.io/v1beta1): the table of its fields and printer columns. */
#include "api/api-kinds.h"

/* clang-format off */
static const char *const shutdown_policies[] = {"Delete", "Retain", NULL};
static const char *const operating_modes[] = {"Running", "Suspended", NULL};

static const api_field spec_props[] = {
    API_FIELD_POD_TEMPLATE(true),
    API_FIELD_VOLUME_CLAIM_TEMPLATES(true),
    API_FIELD_SERVICE,
    {.name = "shutdownTime", .type = API_TYPE_STRING, .format = "date-time"},
    {.name = "shutdownPolicy", .type = API_TYPE_STRING, .enum_values = shutdown_policies,
     .default_json = "\"Retain\""},
    {.name = "operatingMode", .type = API_TYPE_STRING, .enum_values = operating_modes,
     .default_json = "\"Running\""},
    {0},
};

/* status.resources (ours): the limits a local sandbox runs with, and which were defaulted. */
static const api_field effective_limits_props[] = {
    {.name = "memory", .type = API_TYPE_STRING},
    {.name = "cpu", .type = API_TYPE_STRING},
    {.name = "ephemeral-storage", .type = API_TYPE_STRING},
    {0},
};

static const api_field effective_resources_props[] = {
    {.name = "limits", .type = API_TYPE_OBJECT, .props = effective_limits_props},
    {.name = "defaulted", .type = API_TYPE_ARRAY, .items = api_string_item},
    /* limits beyond what the machine has (it is their real limit) */
    {.name = "beyondCapacity", .type = API_TYPE_ARRAY, .items = api_string_item},
    {0},
};

static const api_field status_props[] = {
    {.name = "serviceFQDN", .type = API_TYPE_STRING},
    {.name = "service", .type = API_TYPE_STRING},
    API_FIELD_CONDITIONS,
    {.name = "selector", .type = API_TYPE_STRING},
    {.name = "podIPs", .type = API_TYPE_ARRAY, .items = api_string_item},
    {.name = "nodeName", .type = API_TYPE_STRING},
    {.name = "resources", .type = API_TYPE_OBJECT, .props = effective_resources_props},
    {.name = "blockedConnections", .type = API_TYPE_INTEGER, .format = "int64"},
    {0},
};

const api_column api_sandbox_columns[] = {
    API_COLUMN_READY,
    API_COLUMN_REASON,
    API_COLUMN_AGE_,
    {.name = "Mode", .type = "string", .json_path = ".spec.operatingMode", .wide = true},
    {.name = "Shutdown-Time", .type = "string", .json_path = ".spec.shutdownTime", .wide = true},
    {.name = "IP", .type = "string", .json_path = ".status.podIPs[0]",
     .value = API_COLUMN_FIRST_POD_IP, .wide = true},
    {.name = "Network", .type = "string", .value = API_COLUMN_NETWORK, .wide = true},
    {.name = "Blocked", .type = "string", .value = API_COLUMN_BLOCKED, .wide = true},
    {0},
};

const api_field api_sandbox_spec[] = {
    {.name = "spec", .type = API_TYPE_OBJECT, .required = true, .props = spec_props}};
const api_field api_sandbox_status[] = {
    {.name = "status", .type = API_TYPE_OBJECT, .props = status_props}};
/* clang-format on */
