/* The kind tables of src/api (api-field.h) and what they produce: printer-column JSONPaths,
 * table-driven defaults and pruning, the CRD (schema, rules, columns, subresources). */
#include <string.h>

#include "api/api.h"
#include "api/api-field.h"
#include "unit.h"

static json_t *load(const char *s)
{
    json_error_t e;
    json_t *j = json_loads(s, 0, &e);
    if (!j)
        printf("# bad test JSON: %s\n", e.text);
    return j;
}

TEST(json_path)
{
    json_t *o = load("{\"status\":{\"conditions\":[{\"type\":\"Other\",\"status\":\"False\"},"
                     "{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"R\"}],"
                     "\"podIPs\":[\"10.0.0.1\",\"10.0.0.2\"]},"
                     "\"spec\":{\"c\":[{\"image\":\"i\"}],\"n\":3}}");
    CHECK_STR_EQ(
        json_string_value(api_json_path(o, ".status.conditions[?(@.type==\"Ready\")].status")),
        "True");
    CHECK_STR_EQ(
        json_string_value(api_json_path(o, ".status.conditions[?(@.type==\"Ready\")].reason")),
        "R");
    CHECK(api_json_path(o, ".status.conditions[?(@.type==\"Gone\")].status") == NULL);
    CHECK_STR_EQ(json_string_value(api_json_path(o, ".status.podIPs[1]")), "10.0.0.2");
    CHECK(api_json_path(o, ".status.podIPs[2]") == NULL);
    CHECK_STR_EQ(json_string_value(api_json_path(o, ".spec.c[0].image")), "i");
    CHECK_INT_EQ(json_integer_value(api_json_path(o, ".spec.n")), 3);
    /* A prefix of a key is not the key; malformed paths find nothing. */
    CHECK(api_json_path(o, ".spe") == NULL);
    CHECK(api_json_path(o, ".spec.n.x") == NULL);
    CHECK(api_json_path(o, "spec") == NULL);
    CHECK(api_json_path(o, ".status.podIPs[x]") == NULL);
    CHECK(api_json_path(o, ".status.conditions[?(@.type=Ready)]") == NULL);
    json_decref(o);
}

TEST(defaults_recurse_into_defaulted_objects)
{
    const api_kind *k = api_kind_by_name("SandboxWarmPool");
    json_t *o = load("{\"spec\":{\"sandboxTemplateRef\":{\"name\":\"t\"}}}");
    api_default(k, o);
    CHECK_INT_EQ(json_integer_value(api_json_path(o, ".spec.replicas")), 1);
    CHECK_STR_EQ(json_string_value(api_json_path(o, ".spec.updateStrategy.type")), "OnReplenish");
    json_decref(o);
    /* A claim's lifecycle is defaulted inside only when present. */
    k = api_kind_by_name("SandboxClaim");
    o = load("{\"spec\":{\"warmPoolRef\":{\"name\":\"p\"}}}");
    api_default(k, o);
    CHECK(api_json_path(o, ".spec.lifecycle") == NULL);
    json_decref(o);
    o = load("{\"spec\":{\"lifecycle\":{}}}");
    api_default(k, o);
    CHECK_STR_EQ(json_string_value(api_json_path(o, ".spec.lifecycle.shutdownPolicy")), "Retain");
    json_decref(o);
}

TEST(prune_follows_the_table)
{
    const api_kind *k = api_kind_by_name("SandboxClaim");
    json_t *o =
        load("{\"metadata\":{\"name\":\"c\",\"x\":1},\"spec\":{\"warmPoolRef\":{\"name\":"
             "\"p\",\"y\":2},\"env\":[{\"name\":\"A\",\"z\":3}],\"volumeClaimTemplates\":[{"
             "\"metadata\":{\"name\":\"v\"},\"spec\":{\"kept\":true,\"storageClassName\":\"x\","
             "\"resources\":{\"requests\":{\"storage\":\"1Gi\"},\"limts\":{}}}}]},\"status\":{"
             "\"sandbox\":{\"name\":\"s\",\"w\":4}}}");
    json_t *paths = NULL;
    CHECK_INT_EQ(api_prune_unknown(k, o, &paths), 0);
    char *s = json_dumps(paths, JSON_COMPACT);
    /* Inside the PVC spec, the pinned Kubernetes schema decides (issue 31): at every depth. */
    CHECK_STR_EQ(s, "[\"metadata.x\",\"spec.env[0].z\",\"spec.volumeClaimTemplates[0].spec.kept\","
                    "\"spec.volumeClaimTemplates[0].spec.resources.limts\",\"spec.warmPoolRef.y\","
                    "\"status.sandbox.w\"]");
    free(s);
    CHECK(api_json_path(o, ".spec.volumeClaimTemplates[0].spec.kept") == NULL);
    CHECK_STR_EQ(
        json_string_value(api_json_path(o, ".spec.volumeClaimTemplates[0].spec.storageClassName")),
        "x");
    CHECK_STR_EQ(json_string_value(api_json_path(
                     o, ".spec.volumeClaimTemplates[0].spec.resources.requests.storage")),
                 "1Gi");
    json_decref(paths);
    json_decref(o);
    /* Nulls are dropped without a word, ours and the Kubernetes types' alike. */
    o = load("{\"spec\":{\"warmPoolRef\":{\"name\":\"p\"},\"lifecycle\":null,\"env\":[{"
             "\"name\":\"A\",\"value\":null}],\"volumeClaimTemplates\":[{\"metadata\":{"
             "\"name\":\"v\"},\"spec\":{\"storageClassName\":null}}]}}");
    CHECK_INT_EQ(api_prune_unknown(k, o, &paths), 0);
    CHECK_INT_EQ(json_array_size(paths), 0);
    json_decref(paths);
    s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    CHECK_STR_EQ(s, "{\"spec\":{\"env\":[{\"name\":\"A\"}],\"volumeClaimTemplates\":[{"
                    "\"metadata\":{\"name\":\"v\"},\"spec\":{}}],\"warmPoolRef\":{\"name\":"
                    "\"p\"}}}");
    free(s);
    json_decref(o);
    /* SandboxTemplate has no status in its table: a status is unknown. */
    o = load("{\"spec\":{},\"status\":{}}");
    CHECK_INT_EQ(api_prune_unknown(api_kind_by_name("SandboxTemplate"), o, &paths), 0);
    s = json_dumps(paths, JSON_COMPACT);
    CHECK_STR_EQ(s, "[\"status\"]");
    free(s);
    json_decref(paths);
    json_decref(o);
}

static const json_t *schema_at(const json_t *crd, const char *path)
{
    const json_t *s = api_json_path(crd, ".spec.versions[0].schema.openAPIV3Schema");
    return api_json_path(s, path);
}

TEST(crd_from_table)
{
    const api_kind *k = api_kind_by_name("Sandbox");
    json_t *crd = api_crd(k, false);
    CHECK(crd != NULL);
    CHECK_STR_EQ(json_string_value(api_json_path(crd, ".metadata.name")),
                 "sandboxes.agents.x-k8s.io");
    CHECK_STR_EQ(json_string_value(api_json_path(crd, ".spec.names.shortNames[0]")), "sandbox");
    CHECK(json_is_object(api_json_path(crd, ".spec.versions[0].subresources.status")));
    CHECK(api_json_path(crd, ".spec.versions[0].subresources.scale") == NULL);
    const json_t *spec = schema_at(crd, ".properties.spec");
    CHECK_STR_EQ(json_string_value(api_json_path(spec, ".required[0]")), "podTemplate");
    CHECK_STR_EQ(json_string_value(api_json_path(spec, ".properties.shutdownPolicy.default")),
                 "Retain");
    CHECK_STR_EQ(json_string_value(api_json_path(spec, ".x-kubernetes-validations[0].message")),
                 "volumeClaimTemplates is immutable");
    const json_t *pod = api_json_path(spec, ".properties.podTemplate.properties.spec");
    CHECK(json_is_true(json_object_get(pod, "x-kubernetes-preserve-unknown-fields")));
    CHECK(json_object_get(pod, "x-asb-k8s-type") == NULL);
    /* Printer columns: only the CRD's, with Age last; wide columns stay asb get's own. */
    const json_t *cols = api_json_path(crd, ".spec.versions[0].additionalPrinterColumns");
    CHECK_INT_EQ(json_array_size(cols), 3);
    CHECK_STR_EQ(json_string_value(api_json_path(cols, "[0].jsonPath")),
                 ".status.conditions[?(@.type==\"Ready\")].status");
    CHECK_STR_EQ(json_string_value(api_json_path(cols, "[2].name")), "Age");
    json_decref(crd);

    crd = api_crd(api_kind_by_name("SandboxWarmPool"), true);
    CHECK_STR_EQ(json_string_value(
                     api_json_path(crd, ".spec.versions[0].subresources.scale.specReplicasPath")),
                 ".spec.replicas");
    CHECK_INT_EQ(json_integer_value(schema_at(crd, ".properties.spec.properties.replicas.maximum")),
                 2147483647);
    CHECK(json_is_object(schema_at(crd, ".properties.spec.properties.updateStrategy.default")));
    json_decref(crd);

    crd = api_crd(api_kind_by_name("SandboxTemplate"), true);
    CHECK(api_json_path(crd, ".spec.versions[0].subresources") == NULL);
    CHECK_STR_EQ(
        json_string_value(schema_at(
            crd, ".properties.spec.properties.podTemplate.properties.spec.x-asb-k8s-type")),
        "io.k8s.api.core.v1.PodSpec");
    CHECK(schema_at(crd, ".properties.status") == NULL);
    json_decref(crd);
}

TEST(every_column_has_what_it_needs)
{
    for (size_t i = 0; i < api_n_kinds; i++) {
        const api_kind *k = &api_kinds[i];
        size_t n = 0;
        bool age = false;
        for (const api_column *c = k->columns; c->name; c++, n++) {
            CHECK(c->type != NULL);
            /* A column the CRD prints or asb get reads by path needs a path. */
            if (c->crd || c->value == API_COLUMN_PATH || c->value == API_COLUMN_AGE)
                CHECK(c->json_path != NULL);
            CHECK(!(c->crd && c->wide)); /* the CRD's columns are asb get's default ones */
            age = age || c->value == API_COLUMN_AGE;
        }
        CHECK(age);
        CHECK(n > 0 && n <= 8); /* asb get's table holds NAMESPACE, NAME and 8 more */
    }
}
