/* Label and field selector parsing and matching. */
#include <errno.h>
#include <string.h>

#include "api/api.h"
#include "unit.h"

static bool sel(const char *selector, const char *labels_json)
{
    api_selector *s = NULL;
    api_error err = API_ERROR_INIT;
    if (api_label_selector_parse(selector, &s, &err) < 0) {
        printf("#   parse failed: %s\n", err.message ? err.message : "?");
        api_error_clear(&err);
        return false;
    }
    json_t *labels = json_loads(labels_json, 0, NULL);
    bool r = api_label_selector_matches(s, labels);
    json_decref(labels);
    api_selector_free(s);
    return r;
}

static bool parse_fails(const char *selector)
{
    api_selector *s = NULL;
    api_error err = API_ERROR_INIT;
    int r = api_label_selector_parse(selector, &s, &err);
    bool failed =
        r == -EINVAL && err.message && *err.message && err.code == STATUS_INVALID_ARGUMENT;
    api_error_clear(&err);
    api_selector_free(s);
    return failed;
}

TEST(label_selector_parse)
{
    api_selector *s = NULL;
    api_error err = API_ERROR_INIT;
    CHECK_INT_EQ(
        api_label_selector_parse("a=b,c!=d, e ,!f,g in (x, y),h notin (z),i>1,j==k", &s, &err), 0);
    CHECK_INT_EQ(s->n, 8);
    CHECK_STR_EQ(s->reqs[0].key, "a");
    CHECK_INT_EQ(s->reqs[0].op, API_SEL_EQ);
    CHECK_INT_EQ(s->reqs[1].op, API_SEL_NEQ);
    CHECK_INT_EQ(s->reqs[2].op, API_SEL_EXISTS);
    CHECK_STR_EQ(s->reqs[2].key, "e");
    CHECK_INT_EQ(s->reqs[3].op, API_SEL_NOT_EXISTS);
    CHECK_INT_EQ(s->reqs[4].op, API_SEL_IN);
    CHECK_INT_EQ(s->reqs[4].n_values, 2);
    CHECK_STR_EQ(s->reqs[4].values[1], "y");
    CHECK_INT_EQ(s->reqs[5].op, API_SEL_NOTIN);
    CHECK_INT_EQ(s->reqs[6].op, API_SEL_GT);
    CHECK_INT_EQ(s->reqs[7].op, API_SEL_EQ);
    CHECK_STR_EQ(s->reqs[7].values[0], "k");
    api_selector_free(s);
    s = NULL;
    CHECK_INT_EQ(api_label_selector_parse("", &s, &err), 0);
    CHECK_INT_EQ(s->n, 0);
    api_selector_free(s);
    s = NULL;
    CHECK_INT_EQ(api_label_selector_parse(NULL, &s, &err), 0);
    api_selector_free(s);
}

TEST(label_selector_errors)
{
    CHECK(parse_fails("a in x"));
    CHECK(parse_fails("a in (x"));
    CHECK(parse_fails("a in ()"));
    CHECK(parse_fails("a=b,"));
    CHECK(parse_fails(",a"));
    CHECK(parse_fails("a b"));
    CHECK(parse_fails("a>x"));
    CHECK(parse_fails("a=b c"));
    CHECK(parse_fails("a=in valid"));
    CHECK(parse_fails("=b"));
    CHECK(parse_fails("a@=b"));
    CHECK(parse_fails("a=-b"));
    CHECK(parse_fails("!"));
}

TEST(label_selector_match)
{
    const char *l = "{\"app\":\"web\",\"tier\":\"front\",\"n\":\"5\"}";
    CHECK(sel("app=web", l));
    CHECK(!sel("app=db", l));
    CHECK(sel("app!=db", l));
    CHECK(sel("missing!=x", l));
    CHECK(sel("tier", l));
    CHECK(!sel("!tier", l));
    CHECK(sel("!missing", l));
    CHECK(sel("app in (db,web)", l));
    CHECK(!sel("app notin (db,web)", l));
    CHECK(sel("missing notin (a)", l));
    CHECK(!sel("missing in (a)", l));
    CHECK(sel("n>4,n<6", l));
    CHECK(!sel("n>5", l));
    CHECK(sel("app=web,tier=front", l));
    CHECK(!sel("app=web,tier=back", l));
    CHECK(sel("", "null"));
    CHECK(!sel("app", "null"));
    CHECK(sel("a=", "{\"a\":\"\"}"));
}

TEST(field_selector)
{
    api_selector *s = NULL;
    api_error err = API_ERROR_INIT;
    json_t *o = json_loads("{\"metadata\":{\"name\":\"x\",\"namespace\":\"default\"}}", 0, NULL);
    CHECK_INT_EQ(api_field_selector_parse("metadata.name=x,metadata.namespace==default", &s, &err),
                 0);
    CHECK(api_field_selector_matches(s, o));
    s = api_selector_free(s);
    CHECK_INT_EQ(api_field_selector_parse("metadata.name!=x", &s, &err), 0);
    CHECK(!api_field_selector_matches(s, o));
    s = api_selector_free(s);
    CHECK_INT_EQ(api_field_selector_parse("", &s, &err), 0);
    CHECK(api_field_selector_matches(s, o));
    s = api_selector_free(s);
    CHECK_INT_EQ(api_field_selector_parse("spec.foo=bar", &s, &err), -EINVAL);
    CHECK(err.message && strstr(err.message, "spec.foo"));
    CHECK_INT_EQ(err.code, STATUS_INVALID_ARGUMENT);
    api_error_clear(&err);
    CHECK_INT_EQ(api_field_selector_parse("metadata.name", &s, &err), -EINVAL);
    CHECK_STR_EQ(err.message,
                 "invalid selector: 'metadata.name'; can't understand 'metadata.name'");
    api_error_clear(&err);
    json_decref(o);
}
