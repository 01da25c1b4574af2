/* The machine's capacity and the container quantities beyond it (local-capacity.h). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "api/api-pod.h"
#include "local/container/local-capacity.h"
#include "unit.h"

static api_pod *pod_of(const char *s)
{
    json_t *j = json_loads(s, 0, NULL);
    CHECK(j != NULL);
    api_pod *p = NULL;
    CHECK_INT_EQ(api_pod_parse(j, "spec.podTemplate.spec", NULL, &p), 0);
    json_decref(j);
    return p;
}

TEST(reads_this_machine)
{
    local_capacity c;
    CHECK_INT_EQ(local_capacity_read("/", &c), 0);
    CHECK(c.memory > 0 && c.cpu_millis >= 1000 && c.cpu_millis % 1000 == 0 && c.ephemeral > 0);
    CHECK(local_capacity_read("/nonexistent-asb-capacity", &c) < 0);
}

TEST(excess_per_resource_and_section)
{
    const local_capacity cap = {.memory = 8LL << 30, .cpu_millis = 2000, .ephemeral = 100LL << 30};
    api_pod *p = pod_of("{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{\"memory\":"
                        "\"100Ti\",\"cpu\":\"2\",\"ephemeral-storage\":\"1Ti\"},\"requests\":{"
                        "\"cpu\":3,\"memory\":\"1Gi\"}}}]}");
    local_capacity_excess x[API_RESOURCE_COUNT];
    CHECK_INT_EQ(local_capacity_excess_of(&cap, &p->containers[0].limits, "limits", x), 2);
    CHECK_STR_EQ(x[0].resource, "memory");
    CHECK_STR_EQ(x[0].value, "100Ti");
    CHECK_STR_EQ(x[0].have, "8Gi");
    CHECK_STR_EQ(x[1].resource, "ephemeral-storage");
    CHECK_STR_EQ(x[1].have, "100Gi");
    /* A number is a quantity too. */
    CHECK_INT_EQ(local_capacity_excess_of(&cap, &p->containers[0].requests, "requests", x), 1);
    CHECK_STR_EQ(x[0].resource, "cpu");
    CHECK_STR_EQ(x[0].value, "3");
    CHECK_STR_EQ(x[0].have, "2");
    const api_resource_list none = {0};
    CHECK_INT_EQ(local_capacity_excess_of(&cap, &none, "limits", x), 0);
    api_pod_free(p);
}

TEST(warnings_name_the_field)
{
    const local_capacity cap = {.memory = 8LL << 30, .cpu_millis = 2000, .ephemeral = 100LL << 30};
    api_pod *p = pod_of("{\"containers\":[{\"name\":\"a\"},{\"name\":\"b\",\"resources\":{"
                        "\"requests\":{\"memory\":\"9Gi\"}}}],\"initContainers\":[{\"name\":\"i\","
                        "\"resources\":{\"limits\":{\"cpu\":\"2500m\"}}}]}");
    json_t *w = NULL;
    CHECK_INT_EQ(local_capacity_warnings(&cap, p, "spec.podTemplate.spec", &w), 0);
    CHECK_INT_EQ(json_array_size(w), 2);
    CHECK_STR_EQ(json_string_value(json_array_get(w, 0)),
                 "spec.podTemplate.spec.containers[1].resources.requests.memory: 9Gi is more than "
                 "this machine has (8Gi): the sandbox will not be started (Unschedulable)");
    CHECK_STR_EQ(json_string_value(json_array_get(w, 1)),
                 "spec.podTemplate.spec.initContainers[0].resources.limits.cpu: 2500m is more than "
                 "this machine has (2)");
    json_decref(w);
    api_pod_free(p);
    /* Nothing beyond: no array made. */
    w = NULL;
    p = pod_of("{\"containers\":[{\"resources\":{\"limits\":{\"memory\":\"1Gi\"}}}]}");
    CHECK_INT_EQ(local_capacity_warnings(&cap, p, "p", &w), 0);
    CHECK(w == NULL);
    api_pod_free(p);
}
