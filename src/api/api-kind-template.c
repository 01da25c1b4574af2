/* SandboxTemplate (extensions.agents.x-k8s.io/v1beta1): the table of its fields and printer
 * columns. */
#include "api/api-kinds.h"

/* clang-format off */
static const char *const managements[] = {"Managed", "Unmanaged", NULL};
static const char *const policies[] = {"Disallowed", "Allowed", "Overrides", NULL};

static const api_field network_policy_props[] = {
    {.name = "ingress", .type = API_TYPE_ARRAY, .check = api_check_np_ingress,
     .items = &(const api_field){.type = API_TYPE_FREE,
                                 .k8s_type = "io.k8s.api.networking.v1.NetworkPolicyIngressRule",
                                 .description = "networking.k8s.io/v1 NetworkPolicyIngressRule"}},
    {.name = "egress", .type = API_TYPE_ARRAY, .check = api_check_np_egress,
     .items = &(const api_field){.type = API_TYPE_FREE,
                                 .k8s_type = "io.k8s.api.networking.v1.NetworkPolicyEgressRule",
                                 .description = "networking.k8s.io/v1 NetworkPolicyEgressRule"}},
    {0},
};

static const api_field spec_props[] = {
    API_FIELD_POD_TEMPLATE(true),
    API_FIELD_VOLUME_CLAIM_TEMPLATES(false),
    API_FIELD_SERVICE,
    {.name = "networkPolicy", .type = API_TYPE_OBJECT, .props = network_policy_props},
    {.name = "networkPolicyManagement", .type = API_TYPE_STRING, .enum_values = managements,
     .default_json = "\"Managed\""},
    {.name = "envVarsInjectionPolicy", .type = API_TYPE_STRING, .enum_values = policies,
     .default_json = "\"Disallowed\""},
    {.name = "volumeClaimTemplatesPolicy", .type = API_TYPE_STRING, .enum_values = policies,
     .default_json = "\"Disallowed\""},
    {0},
};

const api_column api_template_columns[] = {
    API_COLUMN_AGE_,
    {.name = "Image", .type = "string", .json_path = ".spec.podTemplate.spec.containers[0].image",
     .wide = true},
    {.name = "Network", .type = "string", .value = API_COLUMN_NETWORK, .wide = true},
    {0},
};

const api_field api_template_spec[] = {
    {.name = "spec", .type = API_TYPE_OBJECT, .required = true, .props = spec_props}};
/* clang-format on */
