/* Validation with field paths, defaults, names and Status objects of src/api. */
#include <string.h>

#include "api/api.h"
#include "unit.h"

static json_t *load(const char *s)
{
    json_error_t e;
    json_t *j = json_loads(s, 0, &e);
    if (!j)
        printf("# bad test JSON: %s\n", e.text);
    return j;
}

/* Validates and returns the aggregate message (owned) or NULL when valid. */
static char *validate(const char *kind, const char *obj_json, const char *old_json)
{
    const api_kind *k = api_kind_by_name(kind);
    json_t *obj = load(obj_json), *old = old_json ? load(old_json) : NULL;
    api_default(k, obj);
    api_errors errs = {0};
    api_validate(k, obj, old, &errs);
    char *msg = errs.n ? api_errors_format(&errs, k, api_meta_string(obj, "name")) : NULL;
    api_errors_clear(&errs);
    json_decref(obj);
    json_decref(old);
    return msg;
}

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = hay; p && (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

static bool contains(const char *hay, const char *needle)
{
    if (!hay || !strstr(hay, needle)) {
        printf("#   \"%s\" not in \"%s\"\n", needle, hay ? hay : "(valid)");
        return false;
    }
    return true;
}

#define POD "{\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"host\"}]}}"

TEST(kind_lookup)
{
    CHECK_STR_EQ(api_kind_by_name("sbx")->kind, "Sandbox");
    CHECK_STR_EQ(api_kind_by_name("sandboxes")->kind, "Sandbox");
    CHECK_STR_EQ(api_kind_by_name("swp")->kind, "SandboxWarmPool");
    CHECK_STR_EQ(api_kind_by_name("claims")->kind, "SandboxClaim");
    CHECK_STR_EQ(api_kind_by_name("template")->kind, "SandboxTemplate");
    CHECK(api_kind_by_name("pods") == NULL);
    CHECK(api_kind_by_plural(API_GROUP_EXT, "sandboxes") == NULL);
    CHECK_STR_EQ(api_kind_by_plural(API_GROUP_CORE, "sandboxes")->list_kind, "SandboxList");
}

TEST(valid_sandbox_gets_defaults)
{
    const api_kind *k = api_kind_by_name("Sandbox");
    json_t *o = load("{\"metadata\":{\"name\":\"a.b-c\"},\"spec\":{\"podTemplate\":" POD "}}");
    api_default(k, o);
    api_errors errs = {0};
    api_validate(k, o, NULL, &errs);
    CHECK_INT_EQ(errs.n, 0);
    json_t *spec = json_object_get(o, "spec");
    CHECK_STR_EQ(json_string_value(json_object_get(spec, "shutdownPolicy")), "Retain");
    CHECK_STR_EQ(json_string_value(json_object_get(spec, "operatingMode")), "Running");
    api_errors_clear(&errs);
    json_decref(o);
}

TEST(sandbox_field_paths)
{
    char *m = validate("Sandbox",
                       "{\"metadata\":{\"name\":\"x\"},\"spec\":{\"podTemplate\":{\"spec\":"
                       "{\"containers\":[{\"name\":\"c\"}]}}}}",
                       NULL);
    CHECK(contains(m, "Sandbox.agents.x-k8s.io \"x\" is invalid: "
                      "spec.podTemplate.spec.containers[0].image: Required value"));
    free(m);
    m = validate("Sandbox", "{\"metadata\":{\"name\":\"x\"}}", NULL);
    CHECK(contains(m, "spec: Required value"));
    free(m);
    m = validate("Sandbox", "{\"metadata\":{\"name\":\"x\"},\"spec\":{}}", NULL);
    CHECK(contains(m, "spec.podTemplate: Required value"));
    free(m);
    m = validate(
        "Sandbox",
        "{\"metadata\":{\"name\":\"x\"},\"spec\":{\"podTemplate\":{\"spec\":{\"containers\":[]}}}}",
        NULL);
    CHECK(contains(m, "spec.podTemplate.spec.containers: Required value"));
    free(m);
    m = validate("Sandbox",
                 "{\"metadata\":{\"name\":\"x\"},\"spec\":{\"podTemplate\":" POD
                 ",\"shutdownPolicy\":\"Never\",\"operatingMode\":\"Paused\","
                 "\"shutdownTime\":\"tomorrow\",\"service\":\"yes\"}}",
                 NULL);
    CHECK(contains(m, "spec.shutdownPolicy: Unsupported value: \"Never\": supported values: "
                      "\"Delete\", \"Retain\""));
    CHECK(contains(m, "spec.operatingMode: Unsupported value: \"Paused\""));
    CHECK(contains(m, "spec.shutdownTime: Invalid value: \"tomorrow\""));
    CHECK(contains(m, "spec.service: Invalid value: \"string\": spec.service in body must be of "
                      "type boolean"));
    free(m);
    m = validate(
        "Sandbox",
        "{\"metadata\":{\"name\":\"x\"},\"spec\":{\"podTemplate\":{\"spec\":{\"containers\":"
        "[{\"name\":\"a\",\"image\":\"i\"},{\"name\":\"a\",\"image\":\"i\"},{\"name\":\"B\","
        "\"image\":\"i\"}]}},"
        "\"shutdownTime\":\"2026-01-02T03:04:05Z\"}}",
        NULL);
    CHECK(contains(m, "spec.podTemplate.spec.containers[1].name: Duplicate value: \"a\""));
    CHECK(contains(m, "spec.podTemplate.spec.containers[2].name: Invalid value: \"B\""));
    CHECK(m && !strstr(m, "shutdownTime"));
    free(m);
}

TEST(volume_claim_templates_immutable)
{
    const char *a = "{\"metadata\":{\"name\":\"x\"},\"spec\":{\"podTemplate\":" POD
                    ",\"volumeClaimTemplates\":[{\"metadata\":{\"name\":\"ws\"}}]}}";
    const char *b = "{\"metadata\":{\"name\":\"x\"},\"spec\":{\"podTemplate\":" POD
                    ",\"volumeClaimTemplates\":[{\"metadata\":{\"name\":\"other\"}}]}}";
    char *m = validate("Sandbox", b, a);
    CHECK(contains(m, "spec.volumeClaimTemplates: Invalid value"));
    free(m);
    json_t *old = load(a);
    m = validate("Sandbox", a, a);
    CHECK(m == NULL);
    free(m);
    json_decref(old);
    m = validate("Sandbox",
                 "{\"metadata\":{\"name\":\"x\"},\"spec\":{\"podTemplate\":" POD
                 ",\"volumeClaimTemplates\":[{\"metadata\":{}}]}}",
                 NULL);
    CHECK(contains(m, "spec.volumeClaimTemplates[0].metadata.name: Required value"));
    free(m);
}

/* Container resources are quantities, checked at admission (issue 31) by the schema the CRD
 * carries (pattern, int-or-string) and by a Pod's rule (not negative): every failing field named,
 * with the value, each once. */
TEST(pod_resources_are_quantities)
{
    char *m = validate(
        "Sandbox",
        "{\"metadata\":{\"name\":\"q\"},\"spec\":{\"podTemplate\":{\"spec\":{\"containers\":[{"
        "\"name\":\"c\",\"image\":\"host\",\"resources\":{\"limits\":{\"memory\":\"lots\","
        "\"cpu\":\"-1\"},\"requests\":{\"ephemeral-storage\":true}}}]}}}}",
        NULL);
    CHECK(contains(m, "spec.podTemplate.spec.containers[0].resources.limits.memory: Invalid value: "
                      "\"lots\": spec.podTemplate.spec.containers[0].resources.limits.memory in "
                      "body should match '^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|"));
    CHECK(contains(m, "spec.podTemplate.spec.containers[0].resources.limits.cpu: Invalid value: "
                      "\"-1\": must be greater than or equal to 0"));
    CHECK(contains(m, "spec.podTemplate.spec.containers[0].resources.requests.ephemeral-storage: "
                      "Invalid value: \"boolean\": spec.podTemplate.spec.containers[0].resources."
                      "requests.ephemeral-storage in body must be of type integer,string: "
                      "\"boolean\""));
    /* Three faults, three errors: the schema's and the rule's are not repeated. */
    CHECK(m && strstr(m, "is invalid: [") && count(m, "Invalid value") == 3);
    free(m);
    m = validate("SandboxTemplate",
                 "{\"metadata\":{\"name\":\"t\"},\"spec\":{\"podTemplate\":{\"spec\":{"
                 "\"containers\":[{\"name\":\"c\",\"image\":\"host\",\"resources\":{\"limits\":{"
                 "\"memory\":\"512Mi\",\"cpu\":2}}}],\"initContainers\":[{\"name\":\"i\","
                 "\"image\":\"host\",\"resources\":{\"limits\":{\"memory\":\"1 Gi\"}}}]}}}}",
                 NULL);
    CHECK(contains(m, "spec.podTemplate.spec.initContainers[0].resources.limits.memory: Invalid "
                      "value: \"1 Gi\""));
    CHECK(!strstr(m ? m : "", "containers[0]"));
    free(m);
}

/* An expired claim's lifecycle cannot change (its sandbox is gone); its status can, and so can
 * the lifecycle of a claim that has not expired. */
TEST(expired_claim_cannot_be_extended)
{
#define CLAIM(when, reason)                                                                        \
    "{\"metadata\":{\"name\":\"c\"},\"spec\":{\"warmPoolRef\":{\"name\":\"p\"},"                 \
    "\"lifecycle\":{\"shutdownPolicy\":\"Retain\",\"shutdownTime\":\"" when "\"}},\"status\":{\"conditions\":[{\"type\":"       \
    "\"Ready\",\"status\":\"False\",\"reason\":\"" reason "\"}]}}"
    const char *expired = CLAIM("2026-01-01T00:00:00Z", "ClaimExpired");
    char *m = validate("SandboxClaim", CLAIM("2027-01-01T00:00:00Z", "ClaimExpired"), expired);
    CHECK(contains(m, "spec.lifecycle: Forbidden: the claim has expired"));
    free(m);
    CHECK((m = validate("SandboxClaim", expired, expired)) == NULL);
    free(m);
    CHECK((m = validate("SandboxClaim", CLAIM("2027-01-01T00:00:00Z", "ClaimReady"),
                        CLAIM("2026-01-01T00:00:00Z", "ClaimReady"))) == NULL);
    free(m);
#undef CLAIM
}

TEST(metadata_rules)
{
    char *m = validate("Sandbox", "{\"metadata\":{},\"spec\":{\"podTemplate\":" POD "}}", NULL);
    CHECK(contains(m, "metadata.name: Required value: name or generateName is required"));
    free(m);
    m = validate("Sandbox",
                 "{\"metadata\":{\"name\":\"x\",\"labels\":{\"ok\":\"bad value!\",\"-bad\":\"v\"},"
                 "\"annotations\":{\"a\":1}},\"spec\":{\"podTemplate\":" POD "}}",
                 NULL);
    CHECK(contains(m, "metadata.labels: Invalid value: \"bad value!\""));
    CHECK(contains(m, "metadata.labels: Invalid value: \"-bad\""));
    CHECK(contains(m, "metadata.annotations[a]: Invalid value: \"integer\""));
    free(m);
    const char *d;
    CHECK(api_is_dns1123_subdomain("a.b-c.d", &d));
    CHECK(!api_is_dns1123_subdomain("a..b", &d));
    CHECK(!api_is_dns1123_subdomain("-a", &d));
    CHECK(!api_is_dns1123_label("a.b", &d));
    char long_name[300];
    memset(long_name, 'a', 254);
    long_name[254] = '\0';
    CHECK(!api_is_dns1123_subdomain(long_name, &d));
    CHECK(api_is_qualified_name("example.com/My_name.1"));
    CHECK(!api_is_qualified_name("Example.com/x"));
    CHECK(!api_is_qualified_name("a/b/c"));
    CHECK(api_is_label_value(""));
    CHECK(!api_is_label_value("a b"));
}

TEST(generate_name)
{
    unsigned char rnd[5] = {0, 1, 2, 26, 27};
    char *n = api_generate_name("sb-", rnd);
    CHECK_STR_EQ(n, "sb-bcd9b");
    CHECK_INT_EQ(strlen(n), 8);
    CHECK(strncmp(n, "sb-", 3) == 0);
    for (size_t i = 3; i < 8; i++)
        CHECK(strchr("bcdfghjklmnpqrstvwxz2456789", n[i]) != NULL);
    free(n);
    char prefix[100];
    memset(prefix, 'p', 99);
    prefix[99] = '\0';
    n = api_generate_name(prefix, rnd);
    CHECK_INT_EQ(strlen(n), 63);
    free(n);
}

TEST(template_defaults_and_enums)
{
    const api_kind *k = api_kind_by_name("SandboxTemplate");
    json_t *o = load("{\"metadata\":{\"name\":\"t\"},\"spec\":{\"podTemplate\":" POD "}}");
    api_default(k, o);
    json_t *spec = json_object_get(o, "spec");
    CHECK_STR_EQ(json_string_value(json_object_get(spec, "networkPolicyManagement")), "Managed");
    CHECK_STR_EQ(json_string_value(json_object_get(spec, "envVarsInjectionPolicy")), "Disallowed");
    CHECK_STR_EQ(json_string_value(json_object_get(spec, "volumeClaimTemplatesPolicy")),
                 "Disallowed");
    json_decref(o);
    char *m =
        validate("SandboxTemplate",
                 "{\"metadata\":{\"name\":\"t\"},\"spec\":{\"podTemplate\":" POD
                 ",\"envVarsInjectionPolicy\":\"Sometimes\",\"networkPolicy\":{\"egress\":{}}}}",
                 NULL);
    CHECK(contains(m, "spec.envVarsInjectionPolicy: Unsupported value: \"Sometimes\""));
    CHECK(contains(m, "spec.networkPolicy.egress: Invalid value: \"object\""));
    free(m);
}

TEST(warmpool_and_claim)
{
    const api_kind *k = api_kind_by_name("SandboxWarmPool");
    json_t *o =
        load("{\"metadata\":{\"name\":\"p\"},\"spec\":{\"sandboxTemplateRef\":{\"name\":\"t\"}}}");
    api_default(k, o);
    json_t *spec = json_object_get(o, "spec");
    CHECK_INT_EQ(json_integer_value(json_object_get(spec, "replicas")), 1);
    CHECK_STR_EQ(
        json_string_value(json_object_get(json_object_get(spec, "updateStrategy"), "type")),
        "OnReplenish");
    json_decref(o);
    char *m = validate("SandboxWarmPool",
                       "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"replicas\":-1,"
                       "\"updateStrategy\":{\"type\":\"Now\"}}}",
                       NULL);
    CHECK(contains(m, "spec.replicas: Invalid value: -1"));
    CHECK(contains(m, "spec.sandboxTemplateRef: Required value"));
    CHECK(contains(m, "spec.updateStrategy.type: Unsupported value: \"Now\""));
    free(m);
    m = validate(
        "SandboxWarmPool",
        "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"replicas\":\"3\",\"sandboxTemplateRef\":{}}}",
        NULL);
    CHECK(contains(
        m,
        "spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer"));
    CHECK(contains(m, "spec.sandboxTemplateRef.name: Required value"));
    free(m);

    k = api_kind_by_name("SandboxClaim");
    o = load("{\"metadata\":{\"name\":\"c\"},\"spec\":{\"warmPoolRef\":{\"name\":\"p\"},"
             "\"lifecycle\":{}}}");
    api_default(k, o);
    CHECK_STR_EQ(json_string_value(json_object_get(
                     json_object_get(json_object_get(o, "spec"), "lifecycle"), "shutdownPolicy")),
                 "Retain");
    json_decref(o);
    m = validate(
        "SandboxClaim",
        "{\"metadata\":{\"name\":\"c\"},\"spec\":{\"lifecycle\":{\"ttlSecondsAfterFinished\":-5,"
        "\"shutdownPolicy\":\"Later\"},\"env\":[{\"value\":\"v\"}]}}",
        NULL);
    CHECK(contains(m, "spec.warmPoolRef: Required value"));
    CHECK(contains(m, "spec.lifecycle.ttlSecondsAfterFinished: Invalid value: -5"));
    CHECK(contains(m, "spec.lifecycle.shutdownPolicy: Unsupported value: \"Later\""));
    CHECK(contains(m, "spec.env[0].name: Required value"));
    free(m);
}

TEST(status_object)
{
    const api_kind *k = api_kind_by_name("Sandbox");
    json_t *st = api_status_failure(404, "NotFound", "gone", k, "x");
    CHECK_STR_EQ(json_string_value(json_object_get(st, "kind")), "Status");
    CHECK_STR_EQ(json_string_value(json_object_get(st, "status")), "Failure");
    CHECK_STR_EQ(json_string_value(json_object_get(st, "reason")), "NotFound");
    CHECK_INT_EQ(json_integer_value(json_object_get(st, "code")), 404);
    json_t *d = json_object_get(st, "details");
    CHECK_STR_EQ(json_string_value(json_object_get(d, "name")), "x");
    CHECK_STR_EQ(json_string_value(json_object_get(d, "group")), "agents.x-k8s.io");
    json_decref(st);

    api_errors errs = {0};
    api_errors_add(&errs, API_FIELD_REQUIRED, "spec", NULL, NULL);
    json_t *causes = api_errors_causes(&errs);
    json_t *c0 = json_array_get(causes, 0);
    CHECK_STR_EQ(json_string_value(json_object_get(c0, "reason")), "FieldValueRequired");
    CHECK_STR_EQ(json_string_value(json_object_get(c0, "field")), "spec");
    CHECK_STR_EQ(json_string_value(json_object_get(c0, "message")), "Required value");
    char *m = api_errors_format(&errs, k, "x");
    CHECK_STR_EQ(m, "Sandbox.agents.x-k8s.io \"x\" is invalid: spec: Required value");
    free(m);
    json_decref(causes);
    api_errors_clear(&errs);
}

TEST(nesting_depth)
{
    static const struct {
        const char *text;
        unsigned depth;
    } cases[] = {
        {"1", 0},
        {"\"[{[{\"", 0},
        {"{}", 1},
        {"[[], {}]", 2},
        {"{\"a\": [1, {\"b\": []}]}", 4},
        {"[\"\\\"[[\", [\"\\\\\", [[]]]]", 4}, /* escaped quote and backslash inside strings */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *s = cases[i].text;
        unsigned d = cases[i].depth;
        json_t *j = json_loads(s, JSON_DECODE_ANY, NULL);
        CHECK(j != NULL);
        CHECK(!api_json_text_deeper_than(s, strlen(s), d));
        CHECK(!api_json_deeper_than(j, d));
        if (d > 0) {
            CHECK(api_json_text_deeper_than(s, strlen(s), d - 1));
            CHECK(api_json_deeper_than(j, d - 1));
        }
        json_decref(j);
    }
    /* validation refuses an object past API_MAX_DEPTH, at the root */
    const api_kind *k = api_kind_by_name("Sandbox");
    json_t *deep = json_string("leaf");
    for (int i = 0; i < API_MAX_DEPTH; i++)
        deep = json_pack("{s:o}", "x", deep);
    json_t *obj = json_pack("{s:{s:s}, s:o}", "metadata", "name", "deep", "spec", deep);
    api_errors errs = {0};
    api_validate(k, obj, NULL, &errs);
    CHECK_INT_EQ(errs.n, 1);
    CHECK_STR_EQ(errs.v[0].message,
                 "<root>: Forbidden: objects and arrays nested deeper than 100 levels");
    api_errors_clear(&errs);
    json_decref(obj);
}

/* Ratcheting: an update keeps the errors of what it changes only. */
TEST(ratchet_keeps_errors_of_changed_fields)
{
    const api_kind *k = api_kind_by_name("SandboxWarmPool");
    json_t *old = load("{\"metadata\":{\"name\":\"p\"},\"spec\":{\"replicas\":1,"
                       "\"sandboxTemplateRef\":{\"name\":\"Bad Name\"}}}");
    json_t *same = load("{\"metadata\":{\"name\":\"p\"},\"spec\":{\"replicas\":2,"
                        "\"sandboxTemplateRef\":{\"name\":\"Bad Name\"}}}");
    json_t *worse = load("{\"metadata\":{\"name\":\"p\"},\"spec\":{\"replicas\":-1,"
                         "\"sandboxTemplateRef\":{\"name\":\"Also Bad\"}}}");
    api_errors e = {0};
    api_validate(k, same, old, &e);
    CHECK_INT_EQ(e.n, 1);
    api_errors_ratchet(&e, same, old);
    CHECK_INT_EQ(e.n, 0);
    api_errors_clear(&e);
    api_validate(k, worse, old, &e);
    CHECK_INT_EQ(e.n, 2);
    api_errors_ratchet(&e, worse, old);
    CHECK_INT_EQ(e.n, 2);
    /* A create has no old object: nothing is ratcheted. */
    api_errors_ratchet(&e, worse, NULL);
    CHECK_INT_EQ(e.n, 2);
    api_errors_clear(&e);
    json_decref(old);
    json_decref(same);
    json_decref(worse);
}
