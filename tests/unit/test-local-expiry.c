/* Sandbox expiry (§2.4.6): the two-pass decision and the requeue interval. */
#include <errno.h>
#include <jansson.h>

#include "basic/time-util.h"
#include "local/reconcile/local-expiry.h"
#include "unit.h"

#define SEC 1000000LL

static json_t *sb(const char *when, const char *policy, const char *ready_reason)
{
    json_t *o = json_pack("{s:{s:s}, s:{s:s}, s:{s:[]}}", "metadata", "name", "x", "spec",
                          "operatingMode", "Running", "status", "conditions");
    if (when)
        json_object_set_new(json_object_get(o, "spec"), "shutdownTime", json_string(when));
    if (policy)
        json_object_set_new(json_object_get(o, "spec"), "shutdownPolicy", json_string(policy));
    if (ready_reason)
        json_array_append_new(json_object_get(json_object_get(o, "status"), "conditions"),
                              json_pack("{s:s, s:s, s:s}", "type", "Ready", "status", "False",
                                        "reason", ready_reason));
    return o;
}

TEST(parse_rfc3339)
{
    int64_t v;
    CHECK_INT_EQ(parse_rfc3339("1970-01-01T00:00:10Z", &v), 0);
    CHECK_INT_EQ(v, 10 * SEC);
    CHECK_INT_EQ(parse_rfc3339("1970-01-01T01:00:10+01:00", &v), 0);
    CHECK_INT_EQ(v, 10 * SEC);
    CHECK_INT_EQ(parse_rfc3339("1970-01-01T00:00:10.25Z", &v), 0);
    CHECK_INT_EQ(v, 10 * SEC + 250000);
    CHECK_INT_EQ(parse_rfc3339("2026-11-29T20:00:00Z", &v), 0);
    CHECK_INT_EQ(v, 1795982400LL * SEC);
    CHECK_INT_EQ(parse_rfc3339("2026-11-29T20:00:00", &v), -EINVAL);
    CHECK_INT_EQ(parse_rfc3339("2026-13-29T20:00:00Z", &v), -EINVAL);
    CHECK_INT_EQ(parse_rfc3339("tomorrow", &v), -EINVAL);
    CHECK_INT_EQ(parse_rfc3339("", &v), -EINVAL);
    CHECK_INT_EQ(parse_rfc3339(NULL, &v), -EINVAL);
    CHECK_INT_EQ(parse_rfc3339("2026-11-29T20:00:00Zjunk", &v), -EINVAL);
}

TEST(never_without_shutdown_time)
{
    int64_t rq = 7;
    json_t *o = sb(NULL, "Delete", NULL);
    CHECK_INT_EQ(local_expiry_decide(o, 100 * SEC, &rq), EXPIRY_NEVER);
    CHECK_INT_EQ(rq, 0);
    json_decref(o);
    o = sb("not a time", "Delete", NULL);
    CHECK_INT_EQ(local_expiry_decide(o, 100 * SEC, &rq), EXPIRY_NEVER);
    json_decref(o);
}

TEST(pending_requeues_at_its_time)
{
    int64_t rq;
    json_t *o = sb("1970-01-01T00:01:40Z", "Delete", NULL); /* 100 s */
    CHECK_INT_EQ(local_expiry_decide(o, 40 * SEC, &rq), EXPIRY_PENDING);
    CHECK_INT_EQ(rq, 60 * SEC);
    CHECK_INT_EQ(local_expiry_decide(o, 100 * SEC - 500000, &rq), EXPIRY_PENDING);
    CHECK_INT_EQ(rq, 500000); /* not later than asked */
    json_decref(o);
}

TEST(two_passes)
{
    int64_t rq;
    /* First pass: Ready not yet SandboxExpired. */
    json_t *o = sb("1970-01-01T00:01:40Z", "Delete", "DependenciesReady");
    CHECK_INT_EQ(local_expiry_decide(o, 100 * SEC, &rq), EXPIRY_MARK);
    CHECK_INT_EQ(rq, 1000);
    json_decref(o);
    o = sb("1970-01-01T00:01:40Z", "Delete", NULL);
    CHECK_INT_EQ(local_expiry_decide(o, 200 * SEC, &rq), EXPIRY_MARK);
    json_decref(o);
    /* Second pass by policy; nil is Retain. */
    o = sb("1970-01-01T00:01:40Z", "Delete", "SandboxExpired");
    CHECK_INT_EQ(local_expiry_decide(o, 100 * SEC, &rq), EXPIRY_DELETE);
    CHECK_INT_EQ(rq, 0);
    json_decref(o);
    o = sb("1970-01-01T00:01:40Z", "Retain", "SandboxExpired");
    CHECK_INT_EQ(local_expiry_decide(o, 100 * SEC, &rq), EXPIRY_RETAIN);
    json_decref(o);
    o = sb("1970-01-01T00:01:40Z", NULL, "SandboxExpired");
    CHECK_INT_EQ(local_expiry_decide(o, 100 * SEC, &rq), EXPIRY_RETAIN);
    json_decref(o);
    /* Extending shutdownTime before expiry just moves the requeue. */
    o = sb("1970-01-01T00:10:00Z", "Retain", "DependenciesReady");
    CHECK_INT_EQ(local_expiry_decide(o, 100 * SEC, &rq), EXPIRY_PENDING);
    CHECK_INT_EQ(rq, 500 * SEC);
    json_decref(o);
}
