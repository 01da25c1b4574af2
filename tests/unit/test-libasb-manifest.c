/* libasb manifests: YAML/JSON -> JSON objects (types, multi-document, Lists, errors) and
 * JSON -> YAML round trips. */
#include <jansson.h>
#include <string.h>

#include "asb/asb.h"
#include "unit.h"

/* Parses and returns the compact JSON array text (owned) or NULL. */
static char *parse(const char *yaml)
{
    char *out = NULL;
    if (asb_manifest_parse(&out, yaml, strlen(yaml)) != ASB_OK)
        return NULL;
    return out;
}

static json_t *parse_json(const char *yaml)
{
    char *s = parse(yaml);
    json_t *j = s ? json_loads(s, 0, NULL) : NULL;
    asb_free(s);
    return j;
}

TEST(scalar_types)
{
    json_t *j = parse_json("a: 1\nb: -2\nc: 1.5\nd: true\ne: False\nf: null\ng: ~\nh:\n"
                           "i: '1'\nj: \"true\"\nk: yes\nl: 0x1F\nm: 0o17\nn: 1e3\no: hello world\n"
                           "p: !!str 12\nq: 2026-01-02\n");
    CHECK(j != NULL);
    json_t *o = json_array_get(j, 0);
    CHECK(json_integer_value(json_object_get(o, "a")) == 1);
    CHECK(json_integer_value(json_object_get(o, "b")) == -2);
    CHECK(json_real_value(json_object_get(o, "c")) == 1.5);
    CHECK(json_is_true(json_object_get(o, "d")));
    CHECK(json_is_false(json_object_get(o, "e")));
    CHECK(json_is_null(json_object_get(o, "f")));
    CHECK(json_is_null(json_object_get(o, "g")));
    CHECK(json_is_null(json_object_get(o, "h")));
    CHECK_STR_EQ(json_string_value(json_object_get(o, "i")), "1");
    CHECK_STR_EQ(json_string_value(json_object_get(o, "j")), "true");
    CHECK_STR_EQ(json_string_value(json_object_get(o, "k")), "yes"); /* YAML 1.2: a string */
    CHECK(json_integer_value(json_object_get(o, "l")) == 31);
    CHECK(json_integer_value(json_object_get(o, "m")) == 15);
    CHECK(json_real_value(json_object_get(o, "n")) == 1000.0);
    CHECK_STR_EQ(json_string_value(json_object_get(o, "o")), "hello world");
    CHECK_STR_EQ(json_string_value(json_object_get(o, "p")), "12");
    CHECK_STR_EQ(json_string_value(json_object_get(o, "q")), "2026-01-02");
    json_decref(j);
}

TEST(multi_document)
{
    json_t *j = parse_json("---\nkind: A\n---\n# only a comment\n---\nkind: B\n...\n---\n"
                           "kind: C\n");
    CHECK_INT_EQ(json_array_size(j), 3);
    CHECK_STR_EQ(json_string_value(json_object_get(json_array_get(j, 0), "kind")), "A");
    CHECK_STR_EQ(json_string_value(json_object_get(json_array_get(j, 2), "kind")), "C");
    json_decref(j);
}

TEST(nested_and_block_scalars)
{
    json_t *j = parse_json("spec:\n  containers:\n  - name: main\n    command: [python3, -c, "
                           "'print(1)']\n  script: |\n    line1\n    line2\n");
    json_t *spec = json_object_get(json_array_get(j, 0), "spec");
    json_t *c0 = json_array_get(json_object_get(spec, "containers"), 0);
    CHECK_STR_EQ(json_string_value(json_object_get(c0, "name")), "main");
    CHECK_INT_EQ(json_array_size(json_object_get(c0, "command")), 3);
    CHECK_STR_EQ(json_string_value(json_object_get(spec, "script")), "line1\nline2\n");
    json_decref(j);
}

TEST(json_input_and_stream)
{
    json_t *j = parse_json("{\"kind\": \"A\", \"n\": 1}\n{\"kind\": \"B\"}");
    CHECK_INT_EQ(json_array_size(j), 2);
    json_decref(j);
    j = parse_json("{kind: A, n: 1}"); /* YAML flow style, not JSON */
    CHECK_INT_EQ(json_array_size(j), 1);
    json_decref(j);
}

TEST(list_is_expanded)
{
    json_t *j = parse_json("apiVersion: v1\nkind: List\nitems:\n- kind: A\n- kind: B\n");
    CHECK_INT_EQ(json_array_size(j), 2);
    CHECK_STR_EQ(json_string_value(json_object_get(json_array_get(j, 1), "kind")), "B");
    json_decref(j);
}

TEST(anchors_and_aliases)
{
    json_t *j = parse_json("base: &b {image: host}\nx: *b\n");
    json_t *o = json_array_get(j, 0);
    CHECK_STR_EQ(json_string_value(json_object_get(json_object_get(o, "x"), "image")), "host");
    json_decref(j);
    /* Billion laughs is refused, not expanded. */
    const char *bomb =
        "a: &a [x,x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
        "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
        "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\n";
    CHECK(parse(bomb) == NULL);
    CHECK_INT_EQ(asb_error_last()->code, ASB_EMANIFEST);
}

TEST(errors_have_positions)
{
    CHECK(parse("a: 1\n b: 2\n  - c\n") == NULL);
    const asb_error *e = asb_error_last();
    CHECK(e != NULL);
    CHECK_INT_EQ(e->code, ASB_EMANIFEST);
    CHECK(strstr(e->message, "yaml: line ") != NULL);
    CHECK(parse("a: 1\na: 2\n") == NULL);
    CHECK(strstr(asb_error_last()->message, "already defined") != NULL);
    CHECK(parse("- a\n- b\n") == NULL);
    CHECK(strstr(asb_error_last()->message, "document 1: expected an object") != NULL);
    CHECK(parse("a: .inf\n") == NULL);
    CHECK(parse("{\"a\": [1, }") == NULL);
    CHECK(strstr(asb_error_last()->message, "json: line 1") != NULL);
    CHECK(parse("? [a]\n: b\n") == NULL);
    char *out = NULL;
    CHECK_INT_EQ(asb_manifest_parse(&out, "", 0), ASB_OK);
    CHECK_STR_EQ(out, "[]");
    asb_free(out);
}

TEST(yaml_output_round_trip)
{
    const char *json =
        "{\"metadata\":{\"name\":\"x\",\"resourceVersion\":\"3\",\"creationTimestamp\":"
        "\"2026-11-29T19:40:14Z\",\"labels\":{}},\"spec\":{\"a\":[1,2.5,true,null,"
        "\"yes\",\"\",\"multi\\nline\\n\",\"it's\"],\"b\":[]}}";
    char *y = NULL;
    CHECK_INT_EQ(asb_manifest_to_yaml(&y, json), ASB_OK);
    CHECK(strstr(y, "resourceVersion: \"3\"") != NULL);
    CHECK(strstr(y, "creationTimestamp: \"2026-11-29T19:40:14Z\"") != NULL);
    CHECK(strstr(y, "labels: {}") != NULL);
    CHECK(strstr(y, "- name") == NULL);
    char *back = NULL;
    CHECK_INT_EQ(asb_manifest_parse(&back, y, strlen(y)), ASB_OK);
    json_t *a = json_loads(json, 0, NULL), *b = json_loads(back, 0, NULL);
    CHECK(json_equal(a, json_array_get(b, 0)));
    json_decref(a);
    json_decref(b);
    asb_free(y);
    asb_free(back);
}
