/* The typed pod spec (api-pod.h): quantities as numbers, mounts, users, and the errors a bad
 * quantity gets at admission. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "api/api-pod.h"
#include "unit.h"

static json_t *load(const char *s)
{
    json_t *j = json_loads(s, 0, NULL);
    CHECK(j != NULL);
    return j;
}

TEST(typed_fields)
{
    json_t *j = load("{\"runtimeClassName\":\"gvisor\",\"securityContext\":{\"runAsUser\":7},"
                     "\"containers\":[{\"name\":\"main\",\"image\":\"host\",\"workingDir\":\"/w\","
                     "\"command\":[\"sh\"],\"env\":[{\"name\":\"A\",\"value\":\"b\"}],"
                     "\"securityContext\":{\"runAsGroup\":9},\"resources\":{\"limits\":{"
                     "\"memory\":\"512Mi\",\"cpu\":\"250m\",\"nvidia.com/gpu\":1},\"requests\":{"
                     "\"ephemeral-storage\":1000}},\"volumeMounts\":[{\"name\":\"d\","
                     "\"mountPath\":\"/d\",\"subPath\":\"\",\"readOnly\":true}]}],"
                     "\"initContainers\":[{\"name\":\"i\"}]}");
    api_pod *p = NULL;
    CHECK_INT_EQ(api_pod_parse(j, "spec", NULL, &p), 0);
    json_decref(j); /* the value keeps its own reference */
    CHECK_STR_EQ(p->runtime_class_name, "gvisor");
    CHECK_INT_EQ(p->run_as_user, 7);
    CHECK_INT_EQ(p->run_as_group, -1);
    CHECK_INT_EQ(p->n_containers, 1);
    CHECK_INT_EQ(p->n_init_containers, 1);
    const api_container *c = &p->containers[0];
    CHECK_STR_EQ(c->image, "host");
    CHECK_STR_EQ(c->working_dir, "/w");
    CHECK_INT_EQ(json_array_size(c->command), 1);
    CHECK(c->args == NULL);
    CHECK_INT_EQ(c->run_as_user, -1);
    CHECK_INT_EQ(c->run_as_group, 9);
    CHECK(c->limits.q[API_RESOURCE_MEMORY].set);
    CHECK_INT_EQ(c->limits.q[API_RESOURCE_MEMORY].value, 512LL << 20);
    CHECK_STR_EQ(c->limits.q[API_RESOURCE_MEMORY].text, "512Mi");
    CHECK_INT_EQ(c->limits.q[API_RESOURCE_CPU].value, 250);
    CHECK(!c->limits.q[API_RESOURCE_EPHEMERAL_STORAGE].set);
    CHECK_INT_EQ(c->requests.q[API_RESOURCE_EPHEMERAL_STORAGE].value, 1000);
    CHECK_STR_EQ(c->requests.q[API_RESOURCE_EPHEMERAL_STORAGE].text, "1000");
    CHECK_INT_EQ(c->n_mounts, 1);
    CHECK_STR_EQ(c->mounts[0].mount_path, "/d");
    CHECK(c->mounts[0].sub_path == NULL && c->mounts[0].read_only);
    api_pod_free(p);
    /* No pod spec: an empty pod. */
    CHECK_INT_EQ(api_pod_parse(NULL, "spec", NULL, &p), 0);
    CHECK_INT_EQ(p->n_containers, 0);
    api_pod_free(p);
}

TEST(bad_quantities_are_errors_with_their_field)
{
    json_t *j = load("{\"containers\":[{\"name\":\"a\",\"resources\":{\"limits\":{\"cpu\":\"-1\","
                     "\"memory\":\"1e99999\"}}}]}");
    api_pod *p = NULL;
    CHECK_INT_EQ(api_pod_parse(j, "spec.podTemplate.spec", NULL, &p), -EINVAL);
    CHECK(p == NULL);
    api_errors e = {0};
    CHECK_INT_EQ(api_pod_parse(j, "spec.podTemplate.spec", &e, &p), -EINVAL);
    CHECK_INT_EQ(e.n, 2);
    CHECK_STR_EQ(e.v[0].message, "spec.podTemplate.spec.containers[0].resources.limits.memory: "
                                 "Invalid value: \"1e99999\": unable to parse quantity's suffix");
    CHECK_STR_EQ(e.v[1].message, "spec.podTemplate.spec.containers[0].resources.limits.cpu: "
                                 "Invalid value: \"-1\": must be greater than or equal to 0");
    api_errors_clear(&e);
    json_decref(j);
    int64_t v;
    CHECK_INT_EQ(api_quantity_parse("1.5", API_RESOURCE_CPU, &v), 0);
    CHECK_INT_EQ(v, 1500);
    CHECK_INT_EQ(api_quantity_parse("2Gi", API_RESOURCE_MEMORY, &v), 0);
    CHECK_INT_EQ(v, 2LL << 30);
    CHECK_INT_EQ(api_quantity_parse("lots", API_RESOURCE_MEMORY, &v), -EINVAL);
    CHECK_STR_EQ(api_resource_name(API_RESOURCE_EPHEMERAL_STORAGE), "ephemeral-storage");
}
