/* LimitRange-like defaults and the effective limits of a container (local-limits.h). */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "api/api-pod.h"
#include "local/container/local-limits.h"
#include "unit.h"

TEST(builtin_defaults)
{
    local_limits d;
    char *err = NULL;
    CHECK_INT_EQ(local_limits_parse_defaults(NULL, NULL, NULL, &d, &err), 0);
    CHECK_INT_EQ(d.memory, 1LL << 30);
    CHECK_INT_EQ(d.cpu_millis, 2000);
    CHECK_INT_EQ(d.ephemeral, 10LL << 30);
    CHECK(err == NULL);
}

TEST(defaults_off_and_bad)
{
    local_limits d;
    char *err = NULL;
    CHECK_INT_EQ(local_limits_parse_defaults("0", "none", "512Mi", &d, &err), 0);
    CHECK_INT_EQ(d.memory, 0);
    CHECK_INT_EQ(d.cpu_millis, 0);
    CHECK_INT_EQ(d.ephemeral, 512LL << 20);
    CHECK_INT_EQ(local_limits_parse_defaults(NULL, "two", NULL, &d, &err), -EINVAL);
    CHECK(err && strstr(err, "--default-cpu (env ASB_DEFAULT_CPU): \"two\""));
    free(err);
}

TEST(manifest_wins_per_resource)
{
    local_limits d = {.memory = 1LL << 30, .cpu_millis = 2000, .ephemeral = 10LL << 30}, l;
    json_t *pod = json_loads("{\"containers\":[{\"resources\":{\"limits\":{\"cpu\":\"250m\","
                             "\"ephemeral-storage\":\"1G\"}}}]}",
                             0, NULL);
    api_pod *p = NULL;
    CHECK_INT_EQ(api_pod_parse(pod, "spec", NULL, &p), 0);
    local_limits_effective(&d, &p->containers[0], &l);
    CHECK_INT_EQ(l.memory, 1LL << 30);
    CHECK(l.memory_defaulted && !l.cpu_defaulted && !l.ephemeral_defaulted);
    CHECK_INT_EQ(l.cpu_millis, 250);
    CHECK_INT_EQ(l.ephemeral, 1000000000);
    json_t *j = local_limits_to_json(&l);
    char *s = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
    CHECK_STR_EQ(s, "{\"defaulted\":[\"memory\"],\"limits\":{\"cpu\":\"250m\","
                    "\"ephemeral-storage\":\"1000000000\",\"memory\":\"1Gi\"}}");
    free(s);
    /* Read back as a restarted asb serve reads a running container's status. */
    local_limits back;
    CHECK_INT_EQ(local_limits_from_json(j, &back), 0);
    CHECK(back.memory == l.memory && back.cpu_millis == l.cpu_millis &&
          back.ephemeral == l.ephemeral && back.memory_defaulted && !back.cpu_defaulted &&
          !back.ephemeral_defaulted);
    CHECK_INT_EQ(local_limits_from_json(NULL, &back), -ENOENT);
    json_decref(j);
    /* No container: the defaults, all of them "defaulted". */
    local_limits_effective(&d, NULL, &l);
    CHECK(l.memory == d.memory && l.memory_defaulted && l.cpu_defaulted && l.ephemeral_defaulted);
    api_pod_free(p);
    json_decref(pod);
}

TEST(format)
{
    char b[32];
    local_limits_format(1536LL << 20, false, b, sizeof(b));
    CHECK_STR_EQ(b, "1536Mi");
    local_limits_format(2LL << 40, false, b, sizeof(b));
    CHECK_STR_EQ(b, "2Ti");
    local_limits_format(1500, true, b, sizeof(b));
    CHECK_STR_EQ(b, "1500m");
    local_limits_format(3000, true, b, sizeof(b));
    CHECK_STR_EQ(b, "3");
    local_limits_format(1000, false, b, sizeof(b));
    CHECK_STR_EQ(b, "1000");
}
