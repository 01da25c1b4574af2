/* Reconcile core: the Sandbox's own rules (§2.3 NameHash, §2.4.4 status fields, §2.4.5
 * conditions, §2.4.6 expiry), one test per row group of the spec's tables. */
#include <jansson.h>
#include <string.h>

#include "reconcile/reconcile.h"
#include "unit.h"

#define SEC 1000000LL
#define T0 (1800000000LL * SEC) /* 2027-01-15T08:00:00Z */

/* A stored Sandbox "sb" (generation 3) with optional spec fields. */
static json_t *sandbox(const char *mode, json_t *service)
{
    json_t *o = json_pack("{s:{s:s, s:s, s:I}, s:{s:{}}, s:{s:[]}}", "metadata", "name", "sb",
                          "namespace", "default", "generation", (json_int_t)3, "spec",
                          "podTemplate", "status", "conditions");
    if (mode)
        json_object_set_new(json_object_get(o, "spec"), "operatingMode", json_string(mode));
    if (service)
        json_object_set_new(json_object_get(o, "spec"), "service", service);
    return o;
}

static void add_condition(json_t *sb, const char *type, const char *status, const char *reason)
{
    json_array_append_new(json_object_get(json_object_get(sb, "status"), "conditions"),
                          json_pack("{s:s, s:s, s:s, s:s, s:s}", "type", type, "status", status,
                                    "reason", reason, "message", "", "lastTransitionTime",
                                    "2020-01-01T00:00:00Z"));
}

static const json_t *cond(const reconcile_sandbox_out *out, const char *type)
{
    size_t i;
    json_t *c;
    json_array_foreach (json_object_get(out->status, "conditions"), i, c)
        if (strcmp(json_string_value(json_object_get(c, "type")), type) == 0)
            return c;
    return NULL;
}

static const char *field(const json_t *c, const char *key)
{
    return json_string_value(json_object_get(c, key));
}

/* Runs the status rules; checks Ready's status/reason/message. */
static void check_ready(const json_t *sb, reconcile_sandbox_observed obs, const char *status,
                        const char *reason, const char *message)
{
    reconcile_sandbox_in in = {.sandbox = sb, .now = T0, .observed = obs};
    reconcile_sandbox_out out;
    CHECK_INT_EQ(reconcile_sandbox_status(&in, &out), 0);
    const json_t *r = cond(&out, "Ready");
    CHECK_STR_EQ(field(r, "status"), status);
    CHECK_STR_EQ(field(r, "reason"), reason);
    CHECK_STR_EQ(field(r, "message"), message);
    CHECK_INT_EQ(json_integer_value(json_object_get(r, "observedGeneration")), 3);
    CHECK_INT_EQ(out.ready, strcmp(status, "True") == 0);
    reconcile_sandbox_out_done(&out);
}

TEST(name_hash_vectors)
{
    static const char *const v[][2] = {{"", "811c9dc5"},
                                       {"a", "e40c292c"},
                                       {"sandbox", "da1fd924"},
                                       {"my-sandbox", "374de8f5"},
                                       {"python-sandbox-template", "d274c066"}};
    char h[9];
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        reconcile_name_hash(v[i][0], h);
        CHECK_STR_EQ(h, v[i][1]);
    }
    reconcile_name_hash(NULL, h);
    CHECK_STR_EQ(h, "811c9dc5");
}

TEST(ready_table_in_order)
{
    json_t *sb = sandbox(NULL, NULL);
    json_t *ips = json_pack("[s]", "10.0.0.7");
    reconcile_sandbox_observed running = {
        .pod = true, .phase = "Running", .pod_ready = true, .pod_ips = ips};
    check_ready(sb, running, "True", "DependenciesReady", "Pod is Ready");
    reconcile_sandbox_observed o = running;
    o.error = "PVC x: boom, service y: no";
    check_ready(sb, o, "False", "ReconcilerError", "Error seen: PVC x: boom, service y: no");
    o = running;
    o.owned_pods = 2;
    check_ready(sb, o, "False", "MultiplePods",
                "multiple Pods (2) are controlled by this Sandbox; refusing to choose or create a "
                "Pod");
    o = running;
    o.phase = "Succeeded";
    check_ready(sb, o, "False", "PodSucceeded", "Pod completed successfully");
    o.phase = "Failed";
    check_ready(sb, o, "False", "PodFailed", "Pod failed");
    check_ready(sb, (reconcile_sandbox_observed){0}, "False", "DependenciesNotReady",
                "Pod does not exist");
    o = running;
    o.phase = "Pending";
    check_ready(sb, o, "False", "DependenciesNotReady", "Pod exists with phase: Pending");
    o = running;
    o.pod_ready = false;
    check_ready(sb, o, "False", "DependenciesNotReady", "Pod is Running but not Ready");
    o = running;
    o.pod_ips = NULL;
    check_ready(sb, o, "False", "DependenciesNotReady", "Pod is Ready but has no podIPs yet");
    o.failure_reason = "ImageUnpackFailed";
    o.failure_message = "no such image";
    check_ready(sb, o, "False", "ImageUnpackFailed", "no such image");
    json_decref(ips);
    json_decref(sb);
}

TEST(ready_needs_a_required_service)
{
    json_t *ips = json_pack("[s]", "10.0.0.7");
    reconcile_sandbox_observed o = {
        .pod = true, .phase = "Running", .pod_ready = true, .pod_ips = ips};
    json_t *sb = sandbox(NULL, json_true());
    check_ready(sb, o, "False", "DependenciesNotReady", "Pod is Ready; Service does not exist");
    o.service = true;
    check_ready(sb, o, "True", "DependenciesReady", "Pod is Ready; Service Exists");
    json_decref(sb);
    /* nil: required only while one is tracked; false: never. */
    sb = sandbox(NULL, NULL);
    check_ready(sb, o, "True", "DependenciesReady", "Pod is Ready; Service Exists");
    o.pod = false;
    check_ready(sb, o, "False", "DependenciesNotReady", "Pod does not exist; Service Exists");
    json_decref(sb);
    sb = sandbox(NULL, json_false());
    o.pod = true;
    o.service = false;
    check_ready(sb, o, "True", "DependenciesReady", "Pod is Ready");
    json_decref(sb);
    json_decref(ips);
}

TEST(local_backend_differences)
{
    json_t *sb = sandbox(NULL, json_true());
    reconcile_sandbox_in in = {.sandbox = sb,
                               .now = T0,
                               .observed = {.pod = true, .phase = "Running", .pod_ready = true},
                               .no_scheduling = true,
                               .no_services = true,
                               .ips_optional = true};
    reconcile_sandbox_out out;
    CHECK_INT_EQ(reconcile_sandbox_status(&in, &out), 0);
    CHECK(out.ready);
    CHECK_STR_EQ(field(cond(&out, "Ready"), "message"), "Pod is Ready");
    CHECK(cond(&out, "PodScheduled") == NULL);
    CHECK(json_object_get(out.status, "podIPs") == NULL);
    reconcile_sandbox_out_done(&out);
    in.observed = (reconcile_sandbox_observed){.not_ready_message = "Pod exited: restarting"};
    CHECK_INT_EQ(reconcile_sandbox_status(&in, &out), 0);
    CHECK_STR_EQ(field(cond(&out, "Ready"), "message"), "Pod exited: restarting");
    reconcile_sandbox_out_done(&out);
    json_decref(sb);
}

TEST(suspended_condition)
{
    json_t *sb = sandbox("Suspended", NULL);
    reconcile_sandbox_in in = {.sandbox = sb, .now = T0};
    reconcile_sandbox_out out;
    struct {
        reconcile_sandbox_observed o;
        const char *status, *reason, *ready_message;
    } rows[] = {
        {{.pod = true, .phase = "Running"}, "False", "PodTerminating", "Sandbox is suspending"},
        {{0}, "True", "PodTerminated", "Sandbox is suspended"},
        {{.pod_not_owned = true}, "False", "PodNotOwned", "Sandbox is suspended"},
        {{.pod = true, .pod_frozen = true}, "True", "PodFrozen", "Sandbox is suspended"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        in.observed = rows[i].o;
        CHECK_INT_EQ(reconcile_sandbox_status(&in, &out), 0);
        CHECK_STR_EQ(field(cond(&out, "Suspended"), "status"), rows[i].status);
        CHECK_STR_EQ(field(cond(&out, "Suspended"), "reason"), rows[i].reason);
        CHECK_STR_EQ(field(cond(&out, "Ready"), "reason"), "SandboxSuspended");
        CHECK_STR_EQ(field(cond(&out, "Ready"), "message"), rows[i].ready_message);
        reconcile_sandbox_out_done(&out);
    }
    json_decref(sb);
    sb = sandbox("Running", NULL);
    in.sandbox = sb;
    in.observed = (reconcile_sandbox_observed){0};
    CHECK_INT_EQ(reconcile_sandbox_status(&in, &out), 0);
    CHECK_STR_EQ(field(cond(&out, "Suspended"), "status"), "False");
    CHECK_STR_EQ(field(cond(&out, "Suspended"), "reason"), "NotSuspended");
    CHECK_STR_EQ(field(cond(&out, "Suspended"), "message"), "Sandbox is not suspended");
    reconcile_sandbox_out_done(&out);
    json_decref(sb);
}

TEST(pod_scheduled_and_finished)
{
    json_t *sb = sandbox(NULL, NULL);
    json_t *psc = json_pack("{s:s, s:s, s:s}", "type", "PodScheduled", "status", "False", "message",
                            "0/3 nodes");
    reconcile_sandbox_in in = {
        .sandbox = sb, .now = T0, .observed = {.pod = true, .phase = "Pending"}};
    reconcile_sandbox_out out;
    /* A pod without the condition yet: Unknown. */
    CHECK_INT_EQ(reconcile_sandbox_status(&in, &out), 0);
    CHECK_STR_EQ(field(cond(&out, "PodScheduled"), "status"), "Unknown");
    CHECK_STR_EQ(field(cond(&out, "PodScheduled"), "reason"), "PodSchedulingUnknown");
    CHECK(cond(&out, "Finished") == NULL);
    reconcile_sandbox_out_done(&out);
    /* Copied; an empty reason is filled in. */
    in.observed.pod_scheduled = psc;
    CHECK_INT_EQ(reconcile_sandbox_status(&in, &out), 0);
    CHECK_STR_EQ(field(cond(&out, "PodScheduled"), "status"), "False");
    CHECK_STR_EQ(field(cond(&out, "PodScheduled"), "reason"), "PodSchedulingUnknown");
    CHECK_STR_EQ(field(cond(&out, "PodScheduled"), "message"), "0/3 nodes");
    reconcile_sandbox_out_done(&out);
    json_object_set_new(psc, "status", json_string("True"));
    in.observed.phase = "Succeeded";
    CHECK_INT_EQ(reconcile_sandbox_status(&in, &out), 0);
    CHECK_STR_EQ(field(cond(&out, "PodScheduled"), "reason"), "PodScheduled");
    CHECK_STR_EQ(field(cond(&out, "Finished"), "status"), "True");
    CHECK_STR_EQ(field(cond(&out, "Finished"), "reason"), "PodSucceeded");
    CHECK_STR_EQ(field(cond(&out, "Finished"), "message"), "Pod completed successfully");
    reconcile_sandbox_out_done(&out);
    /* A finished container that is gone (locally): Finished stays, no PodScheduled. */
    in.observed = (reconcile_sandbox_observed){.phase = "Failed", .finished_message = "code 3"};
    CHECK_INT_EQ(reconcile_sandbox_status(&in, &out), 0);
    CHECK(cond(&out, "PodScheduled") == NULL);
    CHECK_STR_EQ(field(cond(&out, "Finished"), "reason"), "PodFailed");
    CHECK_STR_EQ(field(cond(&out, "Finished"), "message"), "code 3");
    CHECK_STR_EQ(field(cond(&out, "Ready"), "reason"), "PodFailed");
    reconcile_sandbox_out_done(&out);
    json_decref(psc);
    json_decref(sb);
}

TEST(status_fields_and_transition_time)
{
    json_t *sb = sandbox(NULL, NULL);
    add_condition(sb, "Ready", "False", "DependenciesNotReady");
    json_t *ips = json_pack("[s, s]", "10.0.0.7", "fd00::7");
    reconcile_sandbox_in in = {.sandbox = sb,
                               .now = T0,
                               .observed = {.pod = true,
                                            .phase = "Running",
                                            .pod_ready = true,
                                            .pod_ips = ips,
                                            .node_name = "n1",
                                            .service = true,
                                            .service_fqdn = "sb.default.svc.cluster.local"}};
    reconcile_sandbox_out out;
    CHECK_INT_EQ(reconcile_sandbox_status(&in, &out), 0);
    CHECK_STR_EQ(json_string_value(json_object_get(out.status, "selector")),
                 "agents.x-k8s.io/sandbox-name-hash=3551ffa0");
    CHECK(json_equal(json_object_get(out.status, "podIPs"), ips));
    CHECK_STR_EQ(json_string_value(json_object_get(out.status, "nodeName")), "n1");
    CHECK_STR_EQ(json_string_value(json_object_get(out.status, "service")), "sb");
    CHECK_STR_EQ(json_string_value(json_object_get(out.status, "serviceFQDN")),
                 "sb.default.svc.cluster.local");
    /* Ready changed status: a new lastTransitionTime; Suspended is new: now too. */
    CHECK_STR_EQ(field(cond(&out, "Ready"), "lastTransitionTime"), "2027-01-15T08:00:00Z");
    CHECK(out.status_changed);
    /* Stored as computed: nothing to write. */
    json_object_set(sb, "status", out.status);
    reconcile_sandbox_out_done(&out);
    in.now = T0 + 60 * SEC;
    CHECK_INT_EQ(reconcile_sandbox_status(&in, &out), 0);
    CHECK(!out.status_changed);
    CHECK_STR_EQ(field(cond(&out, "Ready"), "lastTransitionTime"), "2027-01-15T08:00:00Z");
    reconcile_sandbox_out_done(&out);
    /* No pod: podIPs, nodeName, service go; the selector stays. */
    in.observed = (reconcile_sandbox_observed){0};
    CHECK_INT_EQ(reconcile_sandbox_status(&in, &out), 0);
    CHECK(json_object_get(out.status, "podIPs") == NULL);
    CHECK(json_object_get(out.status, "nodeName") == NULL);
    CHECK(json_object_get(out.status, "serviceFQDN") == NULL);
    CHECK(json_object_get(out.status, "selector") != NULL);
    CHECK(cond(&out, "PodScheduled") == NULL);
    reconcile_sandbox_out_done(&out);
    json_decref(ips);
    json_decref(sb);
}

TEST(node_name_alone_waits_for_ready)
{
    json_t *sb = sandbox(NULL, NULL);
    reconcile_sandbox_in in = {
        .sandbox = sb, .now = T0, .observed = {.pod = true, .phase = "Pending"}};
    reconcile_sandbox_out out;
    CHECK_INT_EQ(reconcile_sandbox_status(&in, &out), 0);
    json_object_set(sb, "status", out.status);
    reconcile_sandbox_out_done(&out);
    in.observed.node_name = "n1";
    CHECK_INT_EQ(reconcile_sandbox_status(&in, &out), 0);
    CHECK_STR_EQ(json_string_value(json_object_get(out.status, "nodeName")), "n1");
    CHECK(!out.status_changed);
    reconcile_sandbox_out_done(&out);
    /* It rides along with a real change. */
    in.observed.phase = "Running";
    CHECK_INT_EQ(reconcile_sandbox_status(&in, &out), 0);
    CHECK(out.status_changed);
    reconcile_sandbox_out_done(&out);
    json_decref(sb);
}

static json_t *expiring(const char *when, const char *policy)
{
    json_t *sb = sandbox(NULL, NULL);
    json_t *spec = json_object_get(sb, "spec");
    if (when)
        json_object_set_new(spec, "shutdownTime", json_string(when));
    if (policy)
        json_object_set_new(spec, "shutdownPolicy", json_string(policy));
    json_object_set_new(json_object_get(sb, "status"), "podIPs", json_pack("[s]", "10.0.0.7"));
    add_condition(sb, "Ready", "True", "DependenciesReady");
    add_condition(sb, "Suspended", "False", "NotSuspended");
    add_condition(sb, "PodScheduled", "True", "PodScheduled");
    return sb;
}

TEST(expiry_never_and_pending)
{
    reconcile_sandbox_out out;
    json_t *sb = expiring(NULL, "Delete");
    reconcile_sandbox_in in = {.sandbox = sb, .now = T0};
    CHECK_INT_EQ(reconcile_sandbox_expiry(&in, &out), 0);
    CHECK_INT_EQ(out.action, RECONCILE_SANDBOX_RUN);
    CHECK_INT_EQ(out.requeue, 0);
    CHECK(out.status == NULL);
    json_decref(sb);
    sb = expiring("2027-01-15T08:01:00Z", "Delete"); /* T0 + 60 s */
    in.sandbox = sb;
    CHECK_INT_EQ(reconcile_sandbox_expiry(&in, &out), 0);
    CHECK_INT_EQ(out.action, RECONCILE_SANDBOX_RUN);
    CHECK_INT_EQ(out.requeue, 60 * SEC);
    in.now = T0 + 59 * SEC + 500000; /* at its time, not later */
    CHECK_INT_EQ(reconcile_sandbox_expiry(&in, &out), 0);
    CHECK_INT_EQ(out.requeue, 500000);
    json_decref(sb);
}

/* Both policies: the first pass marks; the second deletes (Delete, DeleteForeground) or keeps
 * only the conditions (Retain, nil). */
TEST(expiry_two_passes_both_policies)
{
    static const char *const policies[] = {"Delete", "DeleteForeground", "Retain", NULL};
    for (size_t i = 0; i < 4; i++) {
        json_t *sb = expiring("2027-01-15T08:00:00Z", policies[i]);
        reconcile_sandbox_in in = {.sandbox = sb, .now = T0 + SEC};
        reconcile_sandbox_out out;
        CHECK_INT_EQ(reconcile_sandbox_expiry(&in, &out), 0);
        CHECK_INT_EQ(out.action, RECONCILE_SANDBOX_EXPIRE_MARK);
        CHECK_INT_EQ(out.requeue, RECONCILE_EXPIRY_MARK_REQUEUE_USEC);
        CHECK(out.status_changed);
        CHECK_STR_EQ(field(cond(&out, "Ready"), "reason"), "SandboxExpired");
        CHECK_STR_EQ(field(cond(&out, "Ready"), "message"), "Sandbox has expired");
        CHECK(cond(&out, "PodScheduled") == NULL);
        CHECK_STR_EQ(field(cond(&out, "Suspended"), "reason"), "NotSuspended");
        CHECK(json_object_get(out.status, "podIPs") != NULL); /* first pass: kept */
        json_object_set(sb, "status", out.status);
        reconcile_sandbox_out_done(&out);

        CHECK_INT_EQ(reconcile_sandbox_expiry(&in, &out), 0);
        if (i < 2) {
            CHECK_INT_EQ(out.action, RECONCILE_SANDBOX_EXPIRE_DELETE);
            CHECK(out.status == NULL);
        } else {
            CHECK_INT_EQ(out.action, RECONCILE_SANDBOX_EXPIRE_RETAIN);
            CHECK_INT_EQ(json_object_size(out.status), 1);
            CHECK_STR_EQ(field(cond(&out, "Ready"), "reason"), "SandboxExpired");
            CHECK(out.status_changed); /* podIPs go */
        }
        CHECK_INT_EQ(out.requeue, 0);
        CHECK(!out.ready);
        reconcile_sandbox_out_done(&out);
        json_decref(sb);
    }
}

/* replicas 0/1: a Sandbox stands for at most one pod; operatingMode Suspended is replicas 0
 * (the pod goes, the Sandbox stays, Suspended=True once it is gone), Running is replicas 1. */
TEST(replicas_zero_and_one)
{
    json_t *sb = sandbox("Suspended", NULL);
    CHECK(reconcile_sandbox_suspended(sb));
    json_decref(sb);
    sb = sandbox("Running", NULL);
    CHECK(!reconcile_sandbox_suspended(sb));
    json_decref(sb);
    sb = sandbox(NULL, NULL);
    CHECK(!reconcile_sandbox_suspended(sb));
    /* v1alpha1: replicas 0 is Suspended, 1 Running; operatingMode wins when both are set. */
    json_t *spec = json_object_get(sb, "spec");
    json_object_set_new(spec, "replicas", json_integer(0));
    CHECK(reconcile_sandbox_suspended(sb));
    json_object_set_new(spec, "replicas", json_integer(1));
    CHECK(!reconcile_sandbox_suspended(sb));
    json_object_set_new(spec, "replicas", json_integer(0));
    json_object_set_new(spec, "operatingMode", json_string("Running"));
    CHECK(!reconcile_sandbox_suspended(sb));
    json_object_del(spec, "replicas");
    /* More than one owned pod is never chosen from. */
    reconcile_sandbox_in in = {
        .sandbox = sb, .now = T0, .observed = {.pod = true, .owned_pods = 3, .phase = "Running"}};
    reconcile_sandbox_out out;
    CHECK_INT_EQ(reconcile_sandbox_status(&in, &out), 0);
    CHECK_STR_EQ(field(cond(&out, "Ready"), "reason"), "MultiplePods");
    CHECK(json_object_get(out.status, "selector") == NULL);
    reconcile_sandbox_out_done(&out);
    json_decref(sb);
}

/* A failure carries its reason and error; "Error seen: " is added for errors met while
 * reconciling only, and a later failure replaces an earlier one. */
TEST(failure_message)
{
    reconcile_failure f = RECONCILE_FAILURE_INIT;
    CHECK_INT_EQ(reconcile_fail(&f, "ImageNotFound", false, -ENOENT, "image \"%s\": gone", "x"),
                 -ENOENT);
    CHECK_STR_EQ(f.reason, "ImageNotFound");
    CHECK_INT_EQ(api_error_errno(&f.error), -ENOENT);
    char *m = reconcile_failure_message(&f);
    CHECK_STR_EQ(m, "image \"x\": gone");
    free(m);
    CHECK_INT_EQ(reconcile_fail(&f, "ReconcilerError", true, 0, "out of %s", "memory"), -EINVAL);
    m = reconcile_failure_message(&f);
    CHECK_STR_EQ(m, "Error seen: out of memory");
    free(m);
    reconcile_failure_clear(&f);
    CHECK(f.reason == NULL && f.error.message == NULL);
    CHECK(reconcile_failure_message(&f) == NULL);
}
