/* Reconcile core: SandboxClaim adoption, cold creation, policies, lifecycle and status (§2.8,
 * the claim part of the §2.11 checklist). */
#include <stdlib.h>

#include "reconcile-fixtures.h"
#include "unit.h"

typedef struct world {
    json_t *tpl, *pool, *claim, *sandboxes;
} world;

static world mk(int members_ready, int members_not_ready)
{
    world w = {fx_template("tpl"), fx_pool("wp", 3, NULL), fx_claim("c", "wp", T0), json_array()};
    for (int i = 0; i < members_ready; i++) {
        char n[16];
        snprintf(n, sizeof(n), "wp-r%d", i);
        json_array_append_new(w.sandboxes, fx_member(w.pool, w.tpl, n, T0 - (10 - i) * SEC, true));
    }
    for (int i = 0; i < members_not_ready; i++) {
        char n[16];
        snprintf(n, sizeof(n), "wp-n%d", i);
        json_array_append_new(w.sandboxes, fx_member(w.pool, w.tpl, n, T0 - 20 * SEC, false));
    }
    return w;
}

static void done(world *w)
{
    json_decref(w->tpl);
    json_decref(w->pool);
    json_decref(w->claim);
    json_decref(w->sandboxes);
}

static reconcile_claim_out run(world *w, int64_t now)
{
    reconcile_claim_in in = {.claim = w->claim,
                             .pool = w->pool,
                             .template = w->tpl,
                             .sandboxes = w->sandboxes,
                             .now = now,
                             .networked = fx_ready_network};
    reconcile_claim_out o;
    CHECK_INT_EQ(reconcile_claim(&in, &o), 0);
    return o;
}

static const char *ann_patch(const reconcile_claim_out *o, const char *key)
{
    return json_string_value(json_object_get(
        json_object_get(json_object_get(o->claim_patch, "metadata"), "annotations"), key));
}

TEST(adopts_oldest_ready_member)
{
    world w = mk(3, 1);
    reconcile_claim_out o = run(&w, T0);
    CHECK_INT_EQ(o.action, RECONCILE_CLAIM_ADOPT);
    CHECK_STR_EQ(json_string_value(json_object_get(json_object_get(o.target, "metadata"), "name")),
                 "wp-r0");
    json_t *md = json_object_get(o.sandbox_patch, "metadata");
    json_t *labels = json_object_get(md, "labels");
    CHECK(json_is_null(json_object_get(labels, RECONCILE_LABEL_WARM_POOL)));
    CHECK(json_is_null(json_object_get(labels, RECONCILE_LABEL_TEMPLATE_HASH)));
    CHECK(json_is_null(json_object_get(labels, RECONCILE_LABEL_POD_TEMPLATE_HASH)));
    CHECK(json_is_null(json_object_get(labels, RECONCILE_LABEL_CREATED_BY)));
    CHECK_STR_EQ(json_string_value(json_object_get(labels, RECONCILE_LABEL_CLAIM_UID)),
                 "claim-uid");
    CHECK_STR_EQ(json_string_value(json_object_get(labels, RECONCILE_LABEL_LAUNCH_TYPE)), "warm");
    json_t *refs = json_object_get(md, "ownerReferences");
    CHECK_INT_EQ(json_array_size(refs), 1);
    CHECK_STR_EQ(json_string_value(json_object_get(json_array_get(refs, 0), "kind")),
                 "SandboxClaim");
    CHECK_STR_EQ(json_string_value(
                     json_object_get(json_object_get(md, "annotations"), RECONCILE_ANN_POD_NAME)),
                 "wp-r0");
    /* the pod template metadata drops the pool labels and safe-to-evict */
    json_t *pmd = json_object_get(
        json_object_get(json_object_get(o.sandbox_patch, "spec"), "podTemplate"), "metadata");
    CHECK(json_is_null(json_object_get(json_object_get(pmd, "labels"), RECONCILE_LABEL_WARM_POOL)));
    CHECK(json_is_null(
        json_object_get(json_object_get(pmd, "annotations"), RECONCILE_ANN_SAFE_TO_EVICT)));
    CHECK_STR_EQ(ann_patch(&o, RECONCILE_ANN_SANDBOX_NAME), "wp-r0");
    CHECK(ann_patch(&o, RECONCILE_ANN_FIRST_OBSERVED) != NULL);
    CHECK(ann_patch(&o, RECONCILE_ANN_FIRST_READY) != NULL);
    /* status in the same plan: Ready forwarded from the sandbox, sandbox name */
    CHECK(o.status_changed);
    CHECK_STR_EQ(fx_ready_reason(o.status), "DependenciesReady");
    CHECK_STR_EQ(json_string_value(json_object_get(json_object_get(o.status, "sandbox"), "name")),
                 "wp-r0");
    CHECK_STR_EQ(o.event_reason, "SandboxAdopted");
    reconcile_claim_out_done(&o);
    done(&w);
}

TEST(adoption_skips_foreign_deleting_and_other_pools)
{
    world w = mk(0, 0);
    json_t *a = fx_member(w.pool, w.tpl, "wp-deleting", T0 - 30 * SEC, true);
    json_object_set_new(json_object_get(a, "metadata"), "deletionTimestamp", json_string("x"));
    json_array_append_new(w.sandboxes, a);
    json_t *b = fx_member(w.pool, w.tpl, "wp-foreign", T0 - 30 * SEC, true);
    json_object_set_new(
        json_object_get(b, "metadata"), "ownerReferences",
        json_pack("[{s:s, s:s, s:b}]", "kind", "SandboxWarmPool", "uid", "x", "controller", 1));
    json_array_append_new(w.sandboxes, b);
    json_t *other = fx_pool("other", 1, NULL);
    json_array_append_new(w.sandboxes, fx_member(other, w.tpl, "other-a", T0 - 30 * SEC, true));
    json_array_append_new(w.sandboxes, fx_member(w.pool, w.tpl, "wp-good", T0 - SEC, true));
    reconcile_claim_out o = run(&w, T0);
    CHECK_INT_EQ(o.action, RECONCILE_CLAIM_ADOPT);
    CHECK_STR_EQ(json_string_value(json_object_get(json_object_get(o.target, "metadata"), "name")),
                 "wp-good");
    reconcile_claim_out_done(&o);
    json_decref(other);
    done(&w);
}

TEST(pending_members_grace_then_cold)
{
    world w = mk(0, 2);
    reconcile_claim_out o = run(&w, T0 + SEC / 2);
    CHECK_INT_EQ(o.action, RECONCILE_CLAIM_NOTHING);
    CHECK(!o.status_changed && !o.status);
    CHECK_INT_EQ(o.requeue, 500000);
    reconcile_claim_out_done(&o);
    o = run(&w, T0 + 3 * SEC);
    CHECK_INT_EQ(o.action, RECONCILE_CLAIM_CREATE);
    CHECK_STR_EQ(json_string_value(json_object_get(json_object_get(o.sandbox, "metadata"), "name")),
                 "c");
    CHECK_STR_EQ(fx_label(o.sandbox, RECONCILE_LABEL_LAUNCH_TYPE), "cold");
    CHECK_STR_EQ(fx_ready_reason(o.status), "SandboxNotReady");
    reconcile_claim_out_done(&o);
    done(&w);
}

TEST(fallback_adopts_networked_unready_member)
{
    world w = mk(0, 1);
    reconcile_claim_in in = {
        .claim = w.claim, .pool = w.pool, .template = w.tpl, .sandboxes = w.sandboxes, .now = T0};
    /* cluster semantics: podIPs = networked */
    json_object_set_new(json_object_get(json_array_get(w.sandboxes, 0), "status"), "podIPs",
                        json_pack("[s]", "10.0.0.1"));
    reconcile_claim_out o;
    CHECK_INT_EQ(reconcile_claim(&in, &o), 0);
    CHECK_INT_EQ(o.action, RECONCILE_CLAIM_ADOPT);
    CHECK_STR_EQ(
        json_string_value(
            json_object_get(json_object_get(o.status, "sandbox"), "podIPs")
                ? json_array_get(json_object_get(json_object_get(o.status, "sandbox"), "podIPs"), 0)
                : NULL),
        "10.0.0.1");
    reconcile_claim_out_done(&o);
    done(&w);
}

TEST(cold_sandbox_shape)
{
    world w = mk(0, 0);
    json_object_set_new(json_object_get(w.claim, "metadata"), "labels",
                        json_pack("{s:s}", RECONCILE_LABEL_CREATED_BY, "python-client"));
    json_object_set_new(json_object_get(w.claim, "metadata"), "annotations",
                        json_pack("{s:s}", RECONCILE_ANN_TRACE, "{\"traceparent\":\"x\"}"));
    reconcile_claim_out o = run(&w, T0);
    CHECK_INT_EQ(o.action, RECONCILE_CLAIM_CREATE);
    json_t *sb = o.sandbox;
    CHECK(reconcile_controlled_by(sb, w.claim));
    CHECK_STR_EQ(fx_label(sb, RECONCILE_LABEL_CREATED_BY), "python-client");
    CHECK_STR_EQ(fx_label(sb, RECONCILE_LABEL_CLAIM_UID), "claim-uid");
    CHECK_STR_EQ(
        json_string_value(json_object_get(
            json_object_get(json_object_get(sb, "metadata"), "annotations"), RECONCILE_ANN_TRACE)),
        "{\"traceparent\":\"x\"}");
    json_t *pt = json_object_get(json_object_get(sb, "spec"), "podTemplate");
    CHECK_STR_EQ(json_string_value(
                     json_object_get(json_object_get(json_object_get(pt, "metadata"), "labels"),
                                     RECONCILE_LABEL_CREATED_BY)),
                 "python-client");
    CHECK(json_is_false(
        json_object_get(json_object_get(pt, "spec"), "automountServiceAccountToken")));
    CHECK_STR_EQ(o.event_reason, "SandboxProvisioned");
    reconcile_claim_out_done(&o);
    done(&w);
}

TEST(env_forces_cold_and_policy_matrix)
{
    world w = mk(2, 0);
    json_object_set_new(json_object_get(w.claim, "spec"), "env",
                        json_pack("[{s:s, s:s}]", "name", "A", "value", "1"));
    reconcile_claim_out o = run(&w, T0);
    CHECK_INT_EQ(o.action, RECONCILE_CLAIM_NOTHING);
    CHECK_STR_EQ(fx_ready_reason(o.status), "EnvVarsInjectionRejected");
    CHECK(reconcile_claim_reason_terminal("EnvVarsInjectionRejected"));
    reconcile_claim_out_done(&o);
    json_object_set_new(json_object_get(w.tpl, "spec"), "envVarsInjectionPolicy",
                        json_string("Allowed"));
    o = run(&w, T0);
    CHECK_INT_EQ(o.action, RECONCILE_CLAIM_CREATE); /* cold though members are Ready */
    reconcile_claim_out_done(&o);
    /* envFrom under Allowed: rejected */
    json_t *c0 = json_array_get(
        json_object_get(
            json_object_get(json_object_get(json_object_get(w.tpl, "spec"), "podTemplate"), "spec"),
            "containers"),
        0);
    json_object_set_new(c0, "envFrom", json_pack("[{}]"));
    o = run(&w, T0);
    CHECK_STR_EQ(fx_ready_reason(o.status), "EnvVarsInjectionRejected");
    reconcile_claim_out_done(&o);
    done(&w);
}

TEST(vct_merge_matrix)
{
    json_t *t = fx_template("t"), *out = NULL;
    api_error err = API_ERROR_INIT;
    json_object_set_new(json_object_get(t, "spec"), "volumeClaimTemplates",
                        json_pack("[{s:{s:s}, s:{s:i}}]", "metadata", "name", "a", "spec", "v", 1));
    json_t *cv = json_pack("[{s:{s:s}, s:{s:i}}, {s:{s:s}}]", "metadata", "name", "a", "spec", "v",
                           2, "metadata", "name", "b");
    CHECK(reconcile_merge_vcts(t, cv, &out, &err) < 0);
    CHECK_STR_EQ(err.message, "volume claim templates are disallowed by the template");
    api_error_clear(&err);
    json_object_set_new(json_object_get(t, "spec"), "volumeClaimTemplatesPolicy",
                        json_string("Allowed"));
    CHECK(reconcile_merge_vcts(t, cv, &out, &err) < 0);
    CHECK(strstr(err.message, "cannot override template volume \"a\"") != NULL);
    api_error_clear(&err);
    json_object_set_new(json_object_get(t, "spec"), "volumeClaimTemplatesPolicy",
                        json_string("Overrides"));
    CHECK_INT_EQ(reconcile_merge_vcts(t, cv, &out, &err), 0);
    CHECK_INT_EQ(json_array_size(out), 2);
    CHECK_INT_EQ(
        json_integer_value(json_object_get(json_object_get(json_array_get(out, 0), "spec"), "v")),
        2);
    json_decref(out);
    json_t *dup =
        json_pack("[{s:{s:s}}, {s:{s:s}}]", "metadata", "name", "x", "metadata", "name", "x");
    CHECK(reconcile_merge_vcts(t, dup, &out, &err) < 0);
    CHECK(strstr(err.message, "invalid volume claim templates") != NULL);
    api_error_clear(&err);
    json_decref(dup);
    json_decref(cv);
    json_decref(t);
}

TEST(additional_metadata_rules)
{
    const char *custom[] = {"example.com", NULL};
    struct {
        const char *json;
        const char *const *domains;
        bool ok;
    } v[] = {
        {"{\"labels\":{\"team\":\"a\"}}", NULL, false},
        {"{\"labels\":{\"sandbox.users.io/team\":\"a\"}}", NULL, true},
        {"{\"labels\":{\"x.sandbox.users.io/team\":\"a\"}}", NULL, true},
        {"{\"labels\":{\"evil.io/team\":\"a\"}}", NULL, false},
        {"{\"labels\":{\"APP\":\"Sandbox-Router\"}}", NULL, false},
        {"{\"labels\":{\"example.com/a\":\"b\"}}", custom, true},
        {"{\"annotations\":{\"cluster-autoscaler.kubernetes.io/safe-to-evict\":\"true\"}}", NULL,
         true},
        {"{\"annotations\":{\"foo.kubernetes.io/x\":\"1\"}}", NULL, false},
        {"{\"annotations\":{\"k8s.io/x\":\"1\"}}", NULL, false},
        {"{\"annotations\":{\"agents.x-k8s.io/sandbox-name\":\"1\"}}", NULL, false},
        {"{\"annotations\":{\"plain\":\"1\"}}", NULL, true},
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        json_t *apm = json_loads(v[i].json, 0, NULL);
        api_error err = API_ERROR_INIT;
        int k = reconcile_validate_pod_metadata(apm, v[i].domains, &err);
        if ((k == 0) != v[i].ok)
            printf("#   case %zu (%s): %s\n", i, v[i].json, err.message ?: "accepted");
        CHECK((k == 0) == v[i].ok);
        CHECK_INT_EQ(k, v[i].ok ? 0 : -EINVAL);
        CHECK(k == 0 || err.message);
        api_error_clear(&err);
        json_decref(apm);
    }
}

TEST(metadata_override_conflict)
{
    world w = mk(0, 0);
    json_object_set_new(json_object_get(json_object_get(w.tpl, "spec"), "podTemplate"), "metadata",
                        json_pack("{s:{s:s}}", "labels", "sandbox.users.io/team", "a"));
    json_object_set_new(json_object_get(w.claim, "spec"), "additionalPodMetadata",
                        json_pack("{s:{s:s}}", "labels", "sandbox.users.io/team", "b"));
    reconcile_claim_out o = run(&w, T0);
    CHECK_STR_EQ(fx_ready_reason(o.status), "ReconcilerError");
    reconcile_claim_out_done(&o);
    done(&w);
}

TEST(not_found_and_not_controlled)
{
    world w = mk(0, 0);
    reconcile_claim_in in = {.claim = w.claim, .sandboxes = w.sandboxes, .now = T0};
    reconcile_claim_out o;
    CHECK_INT_EQ(reconcile_claim(&in, &o), 0);
    CHECK_STR_EQ(fx_ready_reason(o.status), "WarmPoolNotFound");
    CHECK(o.requeue > 0);
    reconcile_claim_out_done(&o);
    in.pool = w.pool;
    CHECK_INT_EQ(reconcile_claim(&in, &o), 0);
    CHECK_STR_EQ(fx_ready_reason(o.status), "TemplateNotFound");
    reconcile_claim_out_done(&o);
    json_array_append_new(w.sandboxes, json_pack("{s:{s:s, s:s, s:s}}", "metadata", "name", "c",
                                                 "namespace", "default", "uid", "someone"));
    o = run(&w, T0);
    CHECK_STR_EQ(fx_ready_reason(o.status), "ReconcilerError");
    CHECK_INT_EQ(o.action, RECONCILE_CLAIM_NOTHING);
    reconcile_claim_out_done(&o);
    done(&w);
}

/* The claim bound to sb (as after adoption). */
static void bind(world *w, json_t *sb)
{
    json_t *md = json_object_get(sb, "metadata");
    json_object_set_new(md, "ownerReferences", json_pack("[o]", reconcile_owner_ref(w->claim)));
    json_object_set_new(w->claim, "status",
                        json_pack("{s:{s:O}}", "sandbox", "name", json_object_get(md, "name")));
    json_object_set_new(json_object_get(w->claim, "metadata"), "annotations",
                        json_pack("{s:O, s:s}", RECONCILE_ANN_SANDBOX_NAME,
                                  json_object_get(md, "name"), RECONCILE_ANN_FIRST_OBSERVED, "x"));
}

TEST(bound_forwards_ready_and_expired)
{
    world w = mk(1, 0);
    json_t *sb = json_array_get(w.sandboxes, 0);
    bind(&w, sb);
    reconcile_claim_out o = run(&w, T0);
    /* launch-type is already warm; only pod metadata may need a patch */
    CHECK(o.action == RECONCILE_CLAIM_PATCH_SANDBOX || o.action == RECONCILE_CLAIM_NOTHING);
    CHECK_STR_EQ(fx_ready_reason(o.status), "DependenciesReady");
    reconcile_claim_out_done(&o);
    json_t *rc = json_array_get(json_object_get(json_object_get(sb, "status"), "conditions"), 0);
    json_object_set_new(rc, "status", json_string("False"));
    json_object_set_new(rc, "reason", json_string("SandboxExpired"));
    o = run(&w, T0);
    CHECK_STR_EQ(fx_ready_reason(o.status), "SandboxExpired");
    reconcile_claim_out_done(&o);
    done(&w);
}

TEST(lifecycle_two_pass)
{
    const char *policies[] = {"Retain", "Delete", "DeleteForeground"};
    reconcile_claim_action want[] = {RECONCILE_CLAIM_DELETE_SANDBOX, RECONCILE_CLAIM_DELETE,
                                     RECONCILE_CLAIM_DELETE_FOREGROUND};
    for (size_t i = 0; i < 3; i++) {
        world w = mk(1, 0);
        json_t *sb = json_array_get(w.sandboxes, 0);
        bind(&w, sb);
        json_object_set_new(json_object_get(w.claim, "spec"), "lifecycle",
                            json_pack("{s:s, s:s}", "shutdownTime", "2027-01-15T08:00:10Z",
                                      "shutdownPolicy", policies[i]));
        reconcile_claim_out o = run(&w, T0);
        CHECK_INT_EQ(o.requeue, 10 * SEC);
        reconcile_claim_out_done(&o);
        o = run(&w, T0 + 10 * SEC);
        CHECK_STR_EQ(fx_ready_reason(o.status), "ClaimExpired");
        CHECK_INT_EQ(o.action, RECONCILE_CLAIM_NOTHING);
        CHECK_INT_EQ(o.requeue, 1000);
        json_object_set(w.claim, "status", o.status);
        reconcile_claim_out_done(&o);
        o = run(&w, T0 + 10 * SEC);
        CHECK_INT_EQ(o.action, want[i]);
        reconcile_claim_out_done(&o);
        done(&w);
    }
}

TEST(retain_not_owned_skips_deletion)
{
    world w = mk(0, 0);
    json_array_append_new(w.sandboxes, json_pack("{s:{s:s, s:s, s:s}}", "metadata", "name", "c",
                                                 "namespace", "default", "uid", "someone"));
    json_object_set_new(json_object_get(w.claim, "spec"), "lifecycle",
                        json_pack("{s:s}", "shutdownTime", "2027-01-15T07:00:00Z"));
    json_object_set_new(w.claim, "status",
                        json_pack("{s:[{s:s, s:s, s:s}]}", "conditions", "type", "Ready", "status",
                                  "False", "reason", "ClaimExpired"));
    reconcile_claim_out o = run(&w, T0);
    CHECK_INT_EQ(o.action, RECONCILE_CLAIM_NOTHING);
    const char *msg = NULL;
    size_t i;
    json_t *c;
    json_array_foreach (json_object_get(o.status, "conditions"), i, c)
        msg = json_string_value(json_object_get(c, "message"));
    CHECK(msg && strstr(msg, "deletion skipped") != NULL);
    reconcile_claim_out_done(&o);
    done(&w);
}

TEST(ttl_after_finished)
{
    world w = mk(1, 0);
    json_t *sb = json_array_get(w.sandboxes, 0);
    bind(&w, sb);
    json_object_set_new(json_object_get(w.claim, "spec"), "lifecycle",
                        json_pack("{s:i}", "ttlSecondsAfterFinished", 5));
    json_t *fin = json_pack("{s:s, s:s, s:s, s:s}", "type", "Finished", "status", "True", "reason",
                            "PodSucceeded", "lastTransitionTime", "2027-01-15T08:00:00Z");
    json_array_append(json_object_get(json_object_get(sb, "status"), "conditions"), fin);
    /* first pass mirrors Finished */
    reconcile_claim_out o = run(&w, T0 + SEC);
    json_object_set(w.claim, "status", o.status);
    reconcile_claim_out_done(&o);
    o = run(&w, T0 + SEC);
    CHECK_INT_EQ(o.requeue, 4 * SEC);
    reconcile_claim_out_done(&o);
    o = run(&w, T0 + 5 * SEC);
    CHECK_STR_EQ(fx_ready_reason(o.status), "ClaimExpired");
    reconcile_claim_out_done(&o);
    json_decref(fin);
    done(&w);
}

TEST(template_deleted_warm_member_still_adopted)
{
    /* Upstream adopts before looking the template up: a deleted template does not strand
     * Ready members; only a cold create (or additionalPodMetadata) needs it. */
    world w = mk(1, 0);
    reconcile_claim_in in = {.claim = w.claim,
                             .pool = w.pool,
                             .template = NULL,
                             .sandboxes = w.sandboxes,
                             .now = T0,
                             .networked = fx_ready_network};
    reconcile_claim_out o;
    CHECK_INT_EQ(reconcile_claim(&in, &o), 0);
    CHECK_INT_EQ(o.action, RECONCILE_CLAIM_ADOPT);
    reconcile_claim_out_done(&o);
    json_object_set_new(json_object_get(w.claim, "spec"), "additionalPodMetadata",
                        json_pack("{s:{s:s}}", "labels", "sandbox.users.io/team", "b"));
    CHECK_INT_EQ(reconcile_claim(&in, &o), 0);
    CHECK_STR_EQ(fx_ready_reason(o.status), "TemplateNotFound");
    CHECK_INT_EQ(o.action, RECONCILE_CLAIM_NOTHING);
    reconcile_claim_out_done(&o);
    json_array_clear(w.sandboxes);
    json_object_del(json_object_get(w.claim, "spec"), "additionalPodMetadata");
    CHECK_INT_EQ(reconcile_claim(&in, &o), 0);
    CHECK_STR_EQ(fx_ready_reason(o.status), "TemplateNotFound");
    reconcile_claim_out_done(&o);
    done(&w);
}

TEST(recreate_pool_skips_stale_candidates)
{
    world w = mk(1, 0);
    json_decref(w.pool);
    w.pool = fx_pool("wp", 1, "Recreate");
    json_t *c0 = json_array_get(
        json_object_get(
            json_object_get(json_object_get(json_object_get(w.tpl, "spec"), "podTemplate"), "spec"),
            "containers"),
        0);
    json_object_set_new(c0, "image", json_string("v2"));
    reconcile_claim_out o = run(&w, T0 + 5 * SEC);
    CHECK_INT_EQ(o.action, RECONCILE_CLAIM_CREATE);
    reconcile_claim_out_done(&o);
    json_decref(w.pool);
    w.pool = fx_pool("wp", 1, "OnReplenish");
    o = run(&w, T0 + 5 * SEC);
    CHECK_INT_EQ(o.action, RECONCILE_CLAIM_ADOPT);
    reconcile_claim_out_done(&o);
    done(&w);
}
