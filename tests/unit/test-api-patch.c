/* JSON merge patch (RFC 7386 appendix A vectors) and JSON patch (RFC 6902). */
#include <string.h>

#include "api/api.h"
#include "unit.h"

static bool merge_is(const char *target, const char *patch, const char *want)
{
    json_t *t = json_loads(target, JSON_DECODE_ANY, NULL),
           *p = json_loads(patch, JSON_DECODE_ANY, NULL),
           *w = json_loads(want, JSON_DECODE_ANY, NULL);
    json_t *r = api_merge_patch(t, p);
    bool ok = r && json_equal(r, w);
    if (!ok) {
        char *s = r ? json_dumps(r, JSON_ENCODE_ANY) : NULL;
        printf("#   merge(%s, %s) = %s, want %s\n", target, patch, s ? s : "NULL", want);
        free(s);
    }
    json_decref(t);
    json_decref(p);
    json_decref(w);
    json_decref(r);
    return ok;
}

TEST(merge_patch_rfc7386)
{
    CHECK(merge_is("{\"a\":\"b\"}", "{\"a\":\"c\"}", "{\"a\":\"c\"}"));
    CHECK(merge_is("{\"a\":\"b\"}", "{\"b\":\"c\"}", "{\"a\":\"b\",\"b\":\"c\"}"));
    CHECK(merge_is("{\"a\":\"b\"}", "{\"a\":null}", "{}"));
    CHECK(merge_is("{\"a\":\"b\",\"b\":\"c\"}", "{\"a\":null}", "{\"b\":\"c\"}"));
    CHECK(merge_is("{\"a\":[\"b\"]}", "{\"a\":\"c\"}", "{\"a\":\"c\"}"));
    CHECK(merge_is("{\"a\":\"c\"}", "{\"a\":[\"b\"]}", "{\"a\":[\"b\"]}"));
    CHECK(merge_is("{\"a\":{\"b\":\"c\"}}", "{\"a\":{\"b\":\"d\",\"c\":null}}",
                   "{\"a\":{\"b\":\"d\"}}"));
    CHECK(merge_is("{\"a\":[{\"b\":\"c\"}]}", "{\"a\":[1]}", "{\"a\":[1]}"));
    CHECK(merge_is("[\"a\",\"b\"]", "[\"c\",\"d\"]", "[\"c\",\"d\"]"));
    CHECK(merge_is("{\"a\":\"b\"}", "[\"c\"]", "[\"c\"]"));
    CHECK(merge_is("{\"a\":\"foo\"}", "null", "null"));
    CHECK(merge_is("{\"a\":\"foo\"}", "\"bar\"", "\"bar\""));
    CHECK(merge_is("{\"e\":null}", "{\"a\":1}", "{\"e\":null,\"a\":1}"));
    CHECK(merge_is("[1,2]", "{\"a\":\"b\",\"c\":null}", "{\"a\":\"b\"}"));
    CHECK(merge_is("{}", "{\"a\":{\"bb\":{\"ccc\":null}}}", "{\"a\":{\"bb\":{}}}"));
}

static bool jpatch_is(const char *target, const char *patch, const char *want)
{
    json_t *t = json_loads(target, JSON_DECODE_ANY, NULL), *p = json_loads(patch, 0, NULL);
    const char *err = NULL;
    json_t *r = api_json_patch(t, p, &err);
    bool ok;
    if (!want) {
        ok = r == NULL && err != NULL;
    } else {
        json_t *w = json_loads(want, JSON_DECODE_ANY, NULL);
        ok = r && json_equal(r, w);
        json_decref(w);
    }
    if (!ok)
        printf("#   json patch %s on %s: err=%s\n", patch, target, err ? err : "none");
    json_decref(t);
    json_decref(p);
    json_decref(r);
    return ok;
}

TEST(json_patch_rfc6902)
{
    CHECK(jpatch_is("{\"a\":1}", "[{\"op\":\"add\",\"path\":\"/b\",\"value\":2}]",
                    "{\"a\":1,\"b\":2}"));
    CHECK(jpatch_is("{\"a\":[1,2]}", "[{\"op\":\"add\",\"path\":\"/a/1\",\"value\":9}]",
                    "{\"a\":[1,9,2]}"));
    CHECK(jpatch_is("{\"a\":[1,2]}", "[{\"op\":\"add\",\"path\":\"/a/-\",\"value\":3}]",
                    "{\"a\":[1,2,3]}"));
    CHECK(jpatch_is("{\"a\":1,\"b\":2}", "[{\"op\":\"remove\",\"path\":\"/a\"}]", "{\"b\":2}"));
    CHECK(
        jpatch_is("{\"a\":1}", "[{\"op\":\"replace\",\"path\":\"/a\",\"value\":5}]", "{\"a\":5}"));
    CHECK(jpatch_is("{\"a\":{\"b\":1}}", "[{\"op\":\"move\",\"from\":\"/a/b\",\"path\":\"/c\"}]",
                    "{\"a\":{},\"c\":1}"));
    CHECK(jpatch_is("{\"a\":1}", "[{\"op\":\"copy\",\"from\":\"/a\",\"path\":\"/b\"}]",
                    "{\"a\":1,\"b\":1}"));
    CHECK(jpatch_is(
        "{\"a/b\":1,\"m~n\":2}",
        "[{\"op\":\"test\",\"path\":\"/a~1b\",\"value\":1},{\"op\":\"remove\",\"path\":\"/m~0n\"}]",
        "{\"a/b\":1}"));
    CHECK(jpatch_is("{\"a\":1}", "[{\"op\":\"test\",\"path\":\"/a\",\"value\":2}]", NULL));
    CHECK(jpatch_is("{\"a\":1}", "[{\"op\":\"replace\",\"path\":\"/zz\",\"value\":2}]", NULL));
    CHECK(jpatch_is("{\"a\":1}", "[{\"op\":\"remove\",\"path\":\"/a/b/c\"}]", NULL));
    CHECK(jpatch_is("{\"a\":[1]}", "[{\"op\":\"add\",\"path\":\"/a/01\",\"value\":1}]", NULL));
    CHECK(jpatch_is("{\"a\":{}}", "[{\"op\":\"move\",\"from\":\"/a\",\"path\":\"/a/b\"}]", NULL));
    CHECK(jpatch_is("{\"a\":1}", "[{\"op\":\"frobnicate\",\"path\":\"/a\"}]", NULL));
    CHECK(jpatch_is("{\"a\":1}", "{\"op\":\"add\"}", NULL));
    CHECK(jpatch_is("{\"a\":1}", "[{\"op\":\"add\",\"path\":\"\",\"value\":[1]}]", "[1]"));
}
