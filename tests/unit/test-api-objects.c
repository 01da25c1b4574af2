/* The kinds' specs as typed values (api-objects.h), and the pod validation hands to admission. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "api/api-objects.h"
#include "api/api.h"
#include "unit.h"

static json_t *load(const char *s)
{
    json_t *j = json_loads(s, 0, NULL);
    CHECK(j != NULL);
    return j;
}

#define POD_TEMPLATE                                                                               \
    "{\"metadata\":{\"labels\":{\"l\":\"1\"},\"annotations\":{\"a\":\"2\"}},"                      \
    "\"spec\":{\"runtimeClassName\":\"gvisor\",\"containers\":[{\"name\":\"main\","                \
    "\"image\":\"img\",\"resources\":{\"limits\":{\"memory\":\"1Gi\"}}}]}}"

TEST(sandbox_spec)
{
    json_t *j = load("{\"metadata\":{\"name\":\"s\"},\"spec\":{\"podTemplate\":" POD_TEMPLATE
                     ",\"volumeClaimTemplates\":[{\"metadata\":{\"name\":\"w\"}}],"
                     "\"shutdownTime\":\"2030-01-01T00:00:00Z\",\"shutdownPolicy\":\"Delete\","
                     "\"operatingMode\":\"Suspended\",\"replicas\":0,\"service\":true}}");
    _cleanup_(api_sandbox_spec_freep) api_sandbox_spec *s = NULL;
    CHECK_INT_EQ(api_sandbox_spec_parse(j, NULL, &s), 0);
    json_decref(j); /* the value keeps its own reference */
    CHECK(s->pod_template.json == api_pod_template_of(s->json));
    CHECK_STR_EQ(json_string_value(json_object_get(s->pod_template.labels, "l")), "1");
    CHECK_STR_EQ(json_string_value(json_object_get(s->pod_template.annotations, "a")), "2");
    CHECK_STR_EQ(s->pod_template.pod->runtime_class_name, "gvisor");
    CHECK_INT_EQ(s->pod_template.pod->n_containers, 1);
    CHECK_STR_EQ(s->pod_template.pod->containers[0].image, "img");
    CHECK_INT_EQ(s->pod_template.pod->containers[0].limits.q[API_RESOURCE_MEMORY].value, 1LL << 30);
    CHECK_INT_EQ(json_array_size(s->volume_claim_templates), 1);
    CHECK_STR_EQ(s->shutdown_time, "2030-01-01T00:00:00Z");
    CHECK_STR_EQ(s->shutdown_policy, "Delete");
    CHECK_STR_EQ(s->operating_mode, "Suspended");
    CHECK_INT_EQ(s->replicas, 0);
    CHECK(s->service);
    CHECK_STR_EQ(json_string_value(
                     json_object_get(api_pod_template_container0(s->pod_template.json), "name")),
                 "main");

    /* Unset fields: NULL, -1, false, and an empty pod. */
    j = load("{\"spec\":{}}");
    api_sandbox_spec *e = NULL;
    CHECK_INT_EQ(api_sandbox_spec_parse(j, NULL, &e), 0);
    json_decref(j);
    CHECK(e->pod_template.json == NULL && e->pod_template.labels == NULL);
    CHECK_INT_EQ(e->pod_template.pod->n_containers, 0);
    CHECK(e->volume_claim_templates == NULL && e->shutdown_time == NULL);
    CHECK_INT_EQ(e->replicas, -1);
    CHECK(!e->service);
    CHECK(api_sandbox_spec_free(e) == NULL);
    CHECK(api_sandbox_spec_free(NULL) == NULL);
}

TEST(sandbox_spec_bad_quantity_names_its_field)
{
    json_t *j = load("{\"spec\":{\"podTemplate\":{\"spec\":{\"containers\":[{\"name\":\"a\","
                     "\"resources\":{\"requests\":{\"cpu\":\"-2\"}}}]}}}}");
    api_sandbox_spec *s = NULL;
    api_errors errs = {0};
    CHECK_INT_EQ(api_sandbox_spec_parse(j, &errs, &s), -EINVAL);
    CHECK(s == NULL);
    CHECK_INT_EQ(errs.n, 1);
    CHECK_STR_EQ(errs.v[0].field, "spec.podTemplate.spec.containers[0].resources.requests.cpu");
    api_errors_clear(&errs);
    json_decref(j);
}

TEST(template_spec)
{
    json_t *j = load("{\"spec\":{\"podTemplate\":" POD_TEMPLATE ",\"networkPolicy\":{},"
                     "\"networkPolicyManagement\":\"Unmanaged\",\"envVarsInjectionPolicy\":"
                     "\"Allowed\",\"volumeClaimTemplatesPolicy\":\"Disallowed\"}}");
    _cleanup_(api_template_spec_freep) api_template_spec *t = NULL;
    CHECK_INT_EQ(api_template_spec_parse(j, NULL, &t), 0);
    json_decref(j);
    CHECK_STR_EQ(t->pod_template.pod->containers[0].name, "main");
    CHECK(t->network_policy != NULL);
    CHECK_STR_EQ(t->network_policy_management, "Unmanaged");
    CHECK_STR_EQ(t->env_vars_injection_policy, "Allowed");
    CHECK_STR_EQ(t->volume_claim_templates_policy, "Disallowed");
    CHECK(t->volume_claim_templates == NULL && !t->service);
    /* A null networkPolicy is no policy. */
    j = load("{\"spec\":{\"podTemplate\":" POD_TEMPLATE ",\"networkPolicy\":null}}");
    _cleanup_(api_template_spec_freep) api_template_spec *n = NULL;
    CHECK_INT_EQ(api_template_spec_parse(j, NULL, &n), 0);
    json_decref(j);
    CHECK(n->network_policy == NULL);
}

TEST(claim_and_warmpool_specs)
{
    json_t *j = load("{\"spec\":{\"sandboxTemplateRef\":{\"name\":\"t\"},\"warmPoolRef\":"
                     "{\"name\":\"p\"},\"lifecycle\":{\"shutdownTime\":\"2030-01-01T00:00:00Z\","
                     "\"shutdownPolicy\":\"Retain\",\"ttlSecondsAfterFinished\":30},"
                     "\"additionalPodMetadata\":{\"labels\":{\"x\":\"y\"}},"
                     "\"env\":[{\"name\":\"A\",\"value\":\"b\"}]}}");
    _cleanup_(api_claim_spec_freep) api_claim_spec *c = NULL;
    CHECK_INT_EQ(api_claim_spec_parse(j, &c), 0);
    json_decref(j);
    CHECK_STR_EQ(c->template_ref, "t");
    CHECK_STR_EQ(c->warm_pool_ref, "p");
    CHECK_STR_EQ(c->shutdown_time, "2030-01-01T00:00:00Z");
    CHECK_STR_EQ(c->shutdown_policy, "Retain");
    CHECK(c->has_ttl);
    CHECK_INT_EQ(c->ttl_seconds_after_finished, 30);
    CHECK_STR_EQ(json_string_value(json_object_get(c->labels, "x")), "y");
    CHECK(c->annotations == NULL);
    CHECK_INT_EQ(json_array_size(c->env), 1);
    CHECK(c->volume_claim_templates == NULL);

    j = load("{\"spec\":{\"sandboxTemplateRef\":{\"name\":\"t\"},\"replicas\":3,"
             "\"updateStrategy\":{\"type\":\"Recreate\"}}}");
    _cleanup_(api_warmpool_spec_freep) api_warmpool_spec *p = NULL;
    CHECK_INT_EQ(api_warmpool_spec_parse(j, &p), 0);
    json_decref(j);
    CHECK_STR_EQ(p->template_ref, "t");
    CHECK_INT_EQ(p->replicas, 3);
    CHECK_STR_EQ(p->update_strategy, "Recreate");
    j = load("{\"spec\":{}}");
    _cleanup_(api_warmpool_spec_freep) api_warmpool_spec *d = NULL;
    CHECK_INT_EQ(api_warmpool_spec_parse(j, &d), 0);
    json_decref(j);
    CHECK_INT_EQ(d->replicas, 1); /* as defaulting makes it */
    CHECK(d->template_ref == NULL && d->update_strategy == NULL);
}

/* Admission parses the pod once: validation keeps the pod it parsed for the capacity warnings. */
TEST(validation_hands_over_its_pod)
{
    const api_kind *k = api_kind_by_name("Sandbox");
    json_t *j = load("{\"metadata\":{\"name\":\"s\"},\"spec\":{\"podTemplate\":" POD_TEMPLATE "}}");
    api_default(k, j);
    api_errors errs = {0};
    api_validate(k, j, NULL, &errs);
    CHECK_INT_EQ(errs.n, 0);
    _cleanup_(api_pod_freep) api_pod *pod = api_errors_take_pod(&errs);
    CHECK(pod != NULL);
    CHECK_INT_EQ(pod->containers[0].limits.q[API_RESOURCE_MEMORY].value, 1LL << 30);
    CHECK(api_errors_take_pod(&errs) == NULL); /* handed over once */
    api_errors_clear(&errs);
    json_decref(j);

    /* A quantity that does not parse: the error, and no pod. */
    j = load("{\"metadata\":{\"name\":\"s\"},\"spec\":{\"podTemplate\":{\"spec\":{\"containers\":"
             "[{\"name\":\"a\",\"image\":\"i\",\"resources\":{\"limits\":{\"cpu\":\"-1\"}}}]}}}}");
    api_default(k, j);
    api_validate(k, j, NULL, &errs);
    CHECK(api_errors_has_field(&errs, "spec.podTemplate.spec.containers[0].resources.limits.cpu"));
    CHECK(errs.pod == NULL);
    api_errors_clear(&errs);
    json_decref(j);

    /* A kind without a pod template hands over none. */
    k = api_kind_by_name("SandboxWarmPool");
    j = load("{\"metadata\":{\"name\":\"p\"},\"spec\":{\"sandboxTemplateRef\":{\"name\":\"t\"}}}");
    api_default(k, j);
    api_validate(k, j, NULL, &errs);
    CHECK_INT_EQ(errs.n, 0);
    CHECK(api_errors_take_pod(&errs) == NULL);
    api_errors_clear(&errs);
    json_decref(j);
}

/* The accessors that JSON copies and hot-path lookups use take any shape. */
TEST(accessors)
{
    json_t *j = load("{\"spec\":{\"podTemplate\":" POD_TEMPLATE ",\"warmPoolRef\":{\"name\":\"p\"},"
                     "\"sandboxTemplateRef\":{\"name\":\"t\"}}}");
    CHECK(api_pod_template_of(j) == json_object_get(json_object_get(j, "spec"), API_POD_TEMPLATE));
    CHECK(api_pod_template_json(json_object_get(j, "spec")) == api_pod_template_of(j));
    CHECK(api_pod_spec_of(j) == json_object_get(api_pod_template_of(j), "spec"));
    CHECK_STR_EQ(json_string_value(
                     json_object_get(api_pod_template_container0(api_pod_template_of(j)), "image")),
                 "img");
    CHECK_STR_EQ(api_warm_pool_ref(j), "p");
    CHECK_STR_EQ(api_template_ref(j), "t");
    json_decref(j);
    j = load("{\"spec\":[1]}");
    CHECK(api_pod_template_of(j) == NULL && api_pod_template_container0(NULL) == NULL);
    CHECK(api_warm_pool_ref(j) == NULL && api_template_ref(NULL) == NULL);
    json_decref(j);
}
