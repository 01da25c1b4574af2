/* JSON merge patch (RFC 7386 appendix A vectors) and JSON patch (RFC 6902). */
#include <string.h>

#include "api/api.h"
#include "unit.h"

static bool merge_is(const char *target, const char *patch, const char *want)
{
    json_t *t = json_loads(target, JSON_DECODE_ANY, NULL),
           *p = json_loads(patch, JSON_DECODE_ANY, NULL),
           *w = json_loads(want, JSON_DECODE_ANY, NULL);
    json_t *r = api_merge_patch(t, p), *shared = api_merge_patch_shared(t, p);
    /* Both give the same members in the same order (the text, not just json_equal). */
    char *s = r ? json_dumps(r, JSON_ENCODE_ANY) : NULL,
         *ss = shared ? json_dumps(shared, JSON_ENCODE_ANY) : NULL;
    bool ok = r && json_equal(r, w) && s && ss && strcmp(s, ss) == 0;
    if (!ok)
        printf("#   merge(%s, %s) = %s (shared: %s), want %s\n", target, patch, s ? s : "NULL",
               ss ? ss : "NULL", want);
    free(s);
    free(ss);
    json_decref(shared);
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
    /* Order: target's members as they were (a replaced one in its place), then the new ones. */
    CHECK(merge_is("{\"x\":1,\"a\":{\"p\":1,\"q\":2},\"z\":3}",
                   "{\"n\":0,\"a\":{\"p\":null,\"r\":4},\"x\":null}",
                   "{\"a\":{\"q\":2,\"r\":4},\"z\":3,\"n\":0}"));
}

/* The shared merge copies only the patched path; copy on write keeps the target as it was. */
TEST(merge_patch_shared_copies_only_what_it_changes)
{
    json_t *t = json_loads("{\"metadata\":{\"labels\":{\"a\":\"1\"},\"finalizers\":[\"f\"]},"
                           "\"spec\":{\"big\":{\"k\":[1,2,3]}},"
                           "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"g\":1}]}}",
                           0, NULL);
    json_t *p = json_loads("{\"metadata\":{\"labels\":{\"b\":\"2\"}}}", 0, NULL);
    char *before = json_dumps(t, JSON_COMPACT | JSON_SORT_KEYS);
    json_t *r = api_merge_patch_shared(t, p);
    CHECK(r != NULL);
    CHECK(json_object_get(r, "spec") == json_object_get(t, "spec"));
    CHECK(json_object_get(r, "status") == json_object_get(t, "status"));
    json_t *md = json_object_get(r, "metadata");
    CHECK(md != json_object_get(t, "metadata")); /* on the patch's path: a new object */
    CHECK(json_object_get(md, "finalizers") ==
          json_object_get(json_object_get(t, "metadata"), "finalizers"));
    /* Changes made through api_own_* never reach the target. */
    json_t *f = api_own_member(md, "finalizers");
    CHECK(f && json_array_append_new(f, json_string("g")) == 0);
    json_t *conds = api_own_member(api_own_member(r, "status"), "conditions");
    json_t *c0 = api_own_element(conds, 0);
    CHECK(c0 && json_object_set_new(c0, "g", json_integer(2)) == 0);
    CHECK(api_own_member(md, "finalizers") == f); /* owned now: no second copy */
    CHECK(api_own_member(r, "absent") == NULL && api_own_element(conds, 5) == NULL);
    char *after = json_dumps(t, JSON_COMPACT | JSON_SORT_KEYS);
    CHECK(before && after && strcmp(before, after) == 0);
    CHECK(json_array_size(json_object_get(md, "finalizers")) == 2);
    CHECK(json_integer_value(json_object_get(json_array_get(conds, 0), "g")) == 2);
    free(before);
    free(after);
    json_decref(r);
    json_decref(p);
    json_decref(t);
}

static bool jpatch_is(const char *target, const char *patch, const char *want)
{
    json_t *t = json_loads(target, JSON_DECODE_ANY, NULL), *p = json_loads(patch, 0, NULL);
    api_error err = API_ERROR_INIT;
    json_t *r = NULL;
    int k = api_json_patch(t, p, &r, &err);
    bool ok;
    if (!want) {
        ok = k == -EINVAL && r == NULL && err.message != NULL &&
             api_error_reason(&err) == KUBE_REASON_INVALID;
    } else {
        json_t *w = json_loads(want, JSON_DECODE_ANY, NULL);
        ok = k == 0 && r && json_equal(r, w);
        json_decref(w);
    }
    if (!ok)
        printf("#   json patch %s on %s: err=%s\n", patch, target,
               err.message ? err.message : "none");
    api_error_clear(&err);
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

/* The words of a refused JSON patch (reason Invalid), as the API server replies them. */
static const char *jpatch_words(const char *patch, api_error *err)
{
    json_t *t = json_loads("{\"a\":1}", 0, NULL), *p = json_loads(patch, 0, NULL), *r = NULL;
    int k = api_json_patch(t, p, &r, err);
    json_decref(t);
    json_decref(p);
    json_decref(r);
    return k == -EINVAL && api_error_reason(err) == KUBE_REASON_INVALID ? err->message : NULL;
}

TEST(json_patch_refusal_words)
{
    api_error e = API_ERROR_INIT;
    CHECK_STR_EQ(jpatch_words("[{\"op\":\"test\",\"path\":\"/a\",\"value\":2}]", &e),
                 "test operation failed");
    CHECK_STR_EQ(jpatch_words("[{\"op\":\"replace\",\"path\":\"/zz\",\"value\":2}]", &e),
                 "path not found");
    CHECK_STR_EQ(jpatch_words("[1]", &e), "invalid operation");
    CHECK_STR_EQ(jpatch_words("[{\"op\":\"add\",\"path\":\"a\",\"value\":2}]", &e),
                 "JSON pointer must start with '/'");
    CHECK_STR_EQ(jpatch_words("{}", &e), "a JSON patch must be an array of operations");
    api_error_clear(&e);
}
