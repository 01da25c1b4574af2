/* Reconcile core: NameHash, template defaults and staleness, warm pool plans (§2.3, §2.5-§2.7,
 * the warm pool part of the §2.11 checklist). */
#include "reconcile-fixtures.h"
#include "unit.h"

TEST(name_hash_vectors)
{
    char h[9];
    const char *v[][2] = {{"", "811c9dc5"},
                          {"a", "e40c292c"},
                          {"sandbox", "da1fd924"},
                          {"my-sandbox", "374de8f5"},
                          {"python-sandbox-template", "d274c066"}};
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        reconcile_name_hash(v[i][0], h);
        CHECK_STR_EQ(h, v[i][1]);
    }
}

TEST(time_round_trip)
{
    char s[40];
    int64_t t;
    reconcile_format_time(T0 + 123456, 9, s);
    CHECK_STR_EQ(s, "2027-01-15T08:00:00.123456Z");
    CHECK_INT_EQ(reconcile_parse_time(s, &t), 0);
    CHECK_INT_EQ(t, T0 + 123456);
    reconcile_format_time(T0, 0, s);
    CHECK_STR_EQ(s, "2027-01-15T08:00:00Z");
    CHECK(reconcile_parse_time("yesterday", &t) < 0);
}

TEST(secure_defaults)
{
    json_t *t = fx_template("tpl"), *ps = json_object();
    reconcile_apply_secure_defaults(t, ps);
    CHECK(json_is_false(json_object_get(ps, "automountServiceAccountToken")));
    CHECK_STR_EQ(json_string_value(json_object_get(ps, "dnsPolicy")), "None");
    CHECK_STR_EQ(json_string_value(json_array_get(
                     json_object_get(json_object_get(ps, "dnsConfig"), "nameservers"), 1)),
                 "1.1.1.1");
    json_decref(ps);
    /* explicit automount true and an explicit dnsPolicy are kept */
    ps = json_pack("{s:b, s:s}", "automountServiceAccountToken", 1, "dnsPolicy", "ClusterFirst");
    reconcile_apply_secure_defaults(t, ps);
    CHECK(json_is_true(json_object_get(ps, "automountServiceAccountToken")));
    CHECK_STR_EQ(json_string_value(json_object_get(ps, "dnsPolicy")), "ClusterFirst");
    CHECK(!json_object_get(ps, "dnsConfig"));
    json_decref(ps);
    /* a custom networkPolicy or Unmanaged: no DNS override */
    json_object_set_new(json_object_get(t, "spec"), "networkPolicy", json_object());
    ps = json_object();
    reconcile_apply_secure_defaults(t, ps);
    CHECK(!json_object_get(ps, "dnsPolicy"));
    json_decref(ps);
    json_object_del(json_object_get(t, "spec"), "networkPolicy");
    json_object_set_new(json_object_get(t, "spec"), "networkPolicyManagement",
                        json_string("Unmanaged"));
    ps = json_object();
    reconcile_apply_secure_defaults(t, ps);
    CHECK(!json_object_get(ps, "dnsPolicy"));
    CHECK(json_is_false(json_object_get(ps, "automountServiceAccountToken")));
    json_decref(ps);
    json_decref(t);
}

TEST(template_network_policy)
{
    json_t *t = fx_template("python-sandbox-template");
    json_t *np = reconcile_template_network_policy(t);
    CHECK_STR_EQ(json_string_value(json_object_get(json_object_get(np, "metadata"), "name")),
                 "python-sandbox-template-network-policy");
    json_t *spec = json_object_get(np, "spec");
    CHECK_STR_EQ(json_string_value(json_object_get(
                     json_object_get(json_object_get(spec, "podSelector"), "matchLabels"),
                     RECONCILE_LABEL_TEMPLATE_REF_HASH)),
                 "d274c066");
    CHECK_INT_EQ(json_array_size(json_object_get(spec, "egress")), 1);
    json_t *peer = json_array_get(
        json_object_get(json_array_get(json_object_get(spec, "ingress"), 0), "from"), 0);
    CHECK(json_object_get(peer, "namespaceSelector") && json_object_get(peer, "podSelector"));
    json_decref(np);
    /* custom: copied verbatim; empty egress = deny all */
    json_object_set_new(json_object_get(t, "spec"), "networkPolicy",
                        json_pack("{s:[{}]}", "ingress"));
    np = reconcile_template_network_policy(t);
    CHECK_INT_EQ(json_array_size(json_object_get(json_object_get(np, "spec"), "egress")), 0);
    CHECK_INT_EQ(json_array_size(json_object_get(json_object_get(np, "spec"), "ingress")), 1);
    json_decref(np);
    json_object_set_new(json_object_get(t, "spec"), "networkPolicyManagement",
                        json_string("Unmanaged"));
    CHECK(reconcile_template_network_policy(t) == NULL);
    json_t *patch = reconcile_template_patch(t);
    CHECK(patch != NULL);
    json_decref(patch);
    json_decref(t);
}

TEST(new_warm_sandbox)
{
    json_t *t = fx_template("tpl"), *p = fx_pool("wp", 2, NULL);
    json_t *sb = reconcile_pool_new_sandbox(p, t, false);
    json_t *md = json_object_get(sb, "metadata");
    CHECK_STR_EQ(json_string_value(json_object_get(md, "generateName")), "wp-");
    CHECK(!json_object_get(md, "name"));
    CHECK(reconcile_controlled_by(sb, p));
    char h[9];
    reconcile_name_hash("wp", h);
    CHECK_STR_EQ(fx_label(sb, RECONCILE_LABEL_WARM_POOL), h);
    CHECK_STR_EQ(fx_label(sb, RECONCILE_LABEL_LAUNCH_TYPE), "warm");
    CHECK_STR_EQ(fx_label(sb, RECONCILE_LABEL_CREATED_BY), "controller");
    CHECK(fx_label(sb, RECONCILE_LABEL_TEMPLATE_HASH) != NULL);
    json_t *pt = json_object_get(json_object_get(sb, "spec"), "podTemplate");
    CHECK_STR_EQ(json_string_value(json_object_get(
                     json_object_get(json_object_get(pt, "metadata"), "annotations"),
                     RECONCILE_ANN_SAFE_TO_EVICT)),
                 "true");
    CHECK(json_is_false(
        json_object_get(json_object_get(pt, "spec"), "automountServiceAccountToken")));
    CHECK(!reconcile_sandbox_stale(sb, t));
    json_decref(sb);
    /* the template's own safe-to-evict wins; eviction off: none */
    json_object_set_new(
        json_object_get(json_object_get(t, "spec"), "podTemplate"), "metadata",
        json_pack("{s:{s:s}}", "annotations", RECONCILE_ANN_SAFE_TO_EVICT, "false"));
    sb = reconcile_pool_new_sandbox(p, t, false);
    pt = json_object_get(json_object_get(sb, "spec"), "podTemplate");
    CHECK_STR_EQ(json_string_value(json_object_get(
                     json_object_get(json_object_get(pt, "metadata"), "annotations"),
                     RECONCILE_ANN_SAFE_TO_EVICT)),
                 "false");
    json_decref(sb);
    json_object_del(json_object_get(json_object_get(t, "spec"), "podTemplate"), "metadata");
    sb = reconcile_pool_new_sandbox(p, t, true);
    pt = json_object_get(json_object_get(sb, "spec"), "podTemplate");
    CHECK(!json_object_get(json_object_get(json_object_get(pt, "metadata"), "annotations"),
                           RECONCILE_ANN_SAFE_TO_EVICT));
    json_decref(sb);
    json_decref(p);
    json_decref(t);
}

TEST(staleness_matrix)
{
    json_t *t = fx_template("tpl"), *p = fx_pool("wp", 1, NULL);
    json_t *sb = reconcile_pool_new_sandbox(p, t, false);
    /* metadata drift never makes it stale */
    json_object_set_new(json_object_get(json_object_get(t, "spec"), "podTemplate"), "metadata",
                        json_pack("{s:{s:s}}", "labels", "x", "y"));
    CHECK(!reconcile_sandbox_stale(sb, t));
    /* image change: stale */
    json_t *c0 = json_array_get(
        json_object_get(
            json_object_get(json_object_get(json_object_get(t, "spec"), "podTemplate"), "spec"),
            "containers"),
        0);
    json_object_set_new(c0, "image", json_string("other"));
    CHECK(reconcile_sandbox_stale(sb, t));
    json_object_set_new(c0, "image", json_string("host"));
    CHECK(!reconcile_sandbox_stale(sb, t));
    /* service change: stale */
    json_object_set_new(json_object_get(t, "spec"), "service", json_true());
    CHECK(reconcile_sandbox_stale(sb, t));
    json_object_del(json_object_get(t, "spec"), "service");
    /* another template name: stale */
    json_t *t2 = fx_template("tpl2");
    CHECK(reconcile_sandbox_stale(sb, t2));
    /* the hashed form answers the same for the hashes of the template it is given */
    reconcile_template_hashes h1, h2;
    reconcile_template_hashes_of(t, &h1);
    reconcile_template_hashes_of(t2, &h2);
    CHECK(!reconcile_sandbox_stale_hashed(sb, t, &h1));
    CHECK(reconcile_sandbox_stale_hashed(sb, t2, &h2));
    json_decref(t2);
    json_decref(sb);
    /* VCT reorder: stale */
    json_object_set_new(
        json_object_get(t, "spec"), "volumeClaimTemplates",
        json_pack("[{s:{s:s}}, {s:{s:s}}]", "metadata", "name", "a", "metadata", "name", "b"));
    sb = reconcile_pool_new_sandbox(p, t, false);
    CHECK(!reconcile_sandbox_stale(sb, t));
    json_object_set_new(
        json_object_get(t, "spec"), "volumeClaimTemplates",
        json_pack("[{s:{s:s}}, {s:{s:s}}]", "metadata", "name", "b", "metadata", "name", "a"));
    CHECK(reconcile_sandbox_stale(sb, t));
    json_decref(sb);
    json_decref(p);
    json_decref(t);
}

static reconcile_pool_out run_pool(json_t *pool, json_t *tpl, json_t *members, int64_t now)
{
    reconcile_pool_in in = {.pool = pool, .template = tpl, .sandboxes = members, .now = now};
    reconcile_pool_out out;
    CHECK_INT_EQ(reconcile_pool(&in, &out), 0);
    return out;
}

TEST(pool_nil_replicas_creates_one)
{
    json_t *t = fx_template("tpl"), *p = fx_pool("wp", -1, NULL), *m = json_array();
    reconcile_pool_out o = run_pool(p, t, m, T0);
    CHECK_INT_EQ(json_array_size(o.create), 1);
    CHECK(o.status_changed);
    CHECK_INT_EQ(json_integer_value(json_object_get(o.status, "observedGeneration")), 3);
    char sel[80], h[9];
    reconcile_name_hash("wp", h);
    snprintf(sel, sizeof(sel), "agents.x-k8s.io/warm-pool-sandbox=%s", h);
    CHECK_STR_EQ(json_string_value(json_object_get(o.status, "selector")), sel);
    reconcile_pool_out_done(&o);
    /* no template: no creates */
    o = run_pool(p, NULL, m, T0);
    CHECK_INT_EQ(json_array_size(o.create), 0);
    reconcile_pool_out_done(&o);
    json_decref(m);
    json_decref(p);
    json_decref(t);
}

/* The pool says why it is not full: TemplateNotFound names the template; else how many of how
 * many are Ready, True once all are. */
TEST(pool_ready_condition)
{
    json_t *t = fx_template("tpl"), *p = fx_pool("wp", 2, NULL), *m = json_array();
    reconcile_pool_out o = run_pool(p, NULL, m, T0);
    CHECK_STR_EQ(fx_ready_reason(o.status), "TemplateNotFound");
    const json_t *c = json_array_get(json_object_get(o.status, "conditions"), 0);
    CHECK_STR_EQ(json_string_value(json_object_get(c, "status")), "False");
    CHECK(strstr(json_string_value(json_object_get(c, "message")),
                 "SandboxTemplate \"tpl\" not found in namespace \"default\"") != NULL);
    CHECK_INT_EQ(json_integer_value(json_object_get(c, "observedGeneration")), 3);
    reconcile_pool_out_done(&o);
    json_array_append_new(m, fx_member(p, t, "wp-a", T0, true));
    json_array_append_new(m, fx_member(p, t, "wp-b", T0, false));
    o = run_pool(p, t, m, T0);
    CHECK_STR_EQ(fx_ready_reason(o.status), "PoolFilling");
    c = json_array_get(json_object_get(o.status, "conditions"), 0);
    CHECK_STR_EQ(json_string_value(json_object_get(c, "message")), "1 of 2 sandboxes Ready");
    reconcile_pool_out_done(&o);
    json_array_set_new(m, 1, fx_member(p, t, "wp-b", T0, true));
    o = run_pool(p, t, m, T0);
    CHECK_STR_EQ(fx_ready_reason(o.status), "PoolReady");
    CHECK_INT_EQ(json_array_size(json_object_get(o.status, "conditions")), 1);
    reconcile_pool_out_done(&o);
    json_decref(m);
    json_decref(p);
    json_decref(t);
}

TEST(pool_scale_up_counts_terminating)
{
    json_t *t = fx_template("tpl"), *p = fx_pool("wp", 4, NULL), *m = json_array();
    json_array_append_new(m, fx_member(p, t, "wp-a", T0, true));
    json_t *gone = fx_member(p, t, "wp-b", T0, true);
    json_object_set_new(json_object_get(gone, "metadata"), "deletionTimestamp",
                        json_string("2027-01-15T08:00:00Z"));
    json_array_append_new(m, gone);
    reconcile_pool_out o = run_pool(p, t, m, T0 + SEC);
    CHECK_INT_EQ(json_array_size(o.create), 2); /* 4 - 1 active - 1 terminating */
    CHECK_INT_EQ(json_integer_value(json_object_get(o.status, "replicas")), 1);
    CHECK_INT_EQ(json_integer_value(json_object_get(o.status, "readyReplicas")), 1);
    reconcile_pool_out_done(&o);
    /* expectations pending: nothing */
    reconcile_pool_in in = {
        .pool = p, .template = t, .sandboxes = m, .now = T0, .expectations_pending = true};
    CHECK_INT_EQ(reconcile_pool(&in, &o), 0);
    CHECK_INT_EQ(json_array_size(o.create), 0);
    reconcile_pool_out_done(&o);
    /* max batch */
    in.expectations_pending = false;
    in.max_batch = 1;
    CHECK_INT_EQ(reconcile_pool(&in, &o), 0);
    CHECK_INT_EQ(json_array_size(o.create), 1);
    reconcile_pool_out_done(&o);
    /* the refill held: no creates, the status as without the hold */
    in.max_batch = 0;
    in.hold_creates = true;
    CHECK_INT_EQ(reconcile_pool(&in, &o), 0);
    CHECK_INT_EQ(json_array_size(o.create), 0);
    CHECK_INT_EQ(json_array_size(o.remove), 0);
    CHECK(o.status_changed);
    CHECK_INT_EQ(json_integer_value(json_object_get(o.status, "replicas")), 1);
    CHECK_INT_EQ(json_integer_value(json_object_get(o.status, "readyReplicas")), 1);
    reconcile_pool_out_done(&o);
    json_decref(m);
    json_decref(p);
    json_decref(t);
}

TEST(pool_scale_down_not_ready_first_then_newest)
{
    json_t *t = fx_template("tpl"), *p = fx_pool("wp", 1, NULL), *m = json_array();
    json_array_append_new(m, fx_member(p, t, "wp-old", T0, true));
    json_array_append_new(m, fx_member(p, t, "wp-new", T0 + 10 * SEC, true));
    json_array_append_new(m, fx_member(p, t, "wp-mid", T0 + 5 * SEC, true));
    json_array_append_new(m, fx_member(p, t, "wp-sick", T0 - 5 * SEC, false));
    reconcile_pool_out o = run_pool(p, t, m, T0 + 20 * SEC);
    CHECK_INT_EQ(json_array_size(o.remove), 3);
    CHECK_STR_EQ(json_string_value(json_object_get(
                     json_object_get(json_array_get(o.remove, 0), "metadata"), "name")),
                 "wp-sick");
    CHECK_STR_EQ(json_string_value(json_object_get(
                     json_object_get(json_array_get(o.remove, 1), "metadata"), "name")),
                 "wp-new");
    CHECK_STR_EQ(json_string_value(json_object_get(
                     json_object_get(json_array_get(o.remove, 2), "metadata"), "name")),
                 "wp-mid");
    CHECK_INT_EQ(json_array_size(o.create), 0);
    reconcile_pool_out_done(&o);
    json_decref(m);
    json_decref(p);
    json_decref(t);
}

TEST(pool_orphans_foreign_and_launch_type)
{
    json_t *t = fx_template("tpl"), *p = fx_pool("wp", 3, NULL), *m = json_array();
    json_t *orphan = fx_member(p, t, "wp-orphan", T0, true);
    json_object_del(json_object_get(orphan, "metadata"), "ownerReferences");
    json_array_append_new(m, orphan);
    json_t *foreign = fx_member(p, t, "wp-foreign", T0, true);
    json_object_set_new(json_object_get(foreign, "metadata"), "ownerReferences",
                        json_pack("[{s:s, s:s, s:s, s:b}]", "kind", "SandboxClaim", "name", "c",
                                  "uid", "other", "controller", 1));
    json_array_append_new(m, foreign);
    json_t *nolt = fx_member(p, t, "wp-nolt", T0, true);
    json_object_del(json_object_get(json_object_get(nolt, "metadata"), "labels"),
                    RECONCILE_LABEL_LAUNCH_TYPE);
    json_array_append_new(m, nolt);
    json_t *stale_orphan = fx_member(p, t, "wp-stale", T0, true);
    json_object_del(json_object_get(stale_orphan, "metadata"), "ownerReferences");
    json_object_set_new(json_object_get(json_object_get(stale_orphan, "metadata"), "labels"),
                        RECONCILE_LABEL_TEMPLATE_REF_HASH, json_string("00000000"));
    json_array_append_new(m, stale_orphan);
    reconcile_pool_out o = run_pool(p, t, m, T0);
    CHECK_INT_EQ(json_array_size(o.patches), 2); /* adopt the orphan, launch-type on nolt */
    json_t *adopt = json_object_get(json_array_get(o.patches, 0), "patch");
    CHECK_STR_EQ(json_string_value(json_object_get(
                     json_array_get(
                         json_object_get(json_object_get(adopt, "metadata"), "ownerReferences"), 0),
                     "uid")),
                 "pool-uid");
    CHECK_INT_EQ(json_array_size(o.remove), 1); /* the stale orphan, under OnReplenish too */
    /* 2 active (orphan + nolt) + 1 terminating = 3: nothing to create, foreign ignored */
    CHECK_INT_EQ(json_array_size(o.create), 0);
    CHECK_INT_EQ(json_integer_value(json_object_get(o.status, "replicas")), 2);
    reconcile_pool_out_done(&o);
    json_decref(m);
    json_decref(p);
    json_decref(t);
}

TEST(pool_recreate_vs_on_replenish)
{
    json_t *t = fx_template("tpl"), *m = json_array();
    json_t *pr = fx_pool("wp", 1, "Recreate"), *po = fx_pool("wp", 1, NULL);
    json_array_append_new(m, fx_member(pr, t, "wp-a", T0, true));
    json_t *c0 = json_array_get(
        json_object_get(
            json_object_get(json_object_get(json_object_get(t, "spec"), "podTemplate"), "spec"),
            "containers"),
        0);
    json_object_set_new(c0, "image", json_string("v2"));
    reconcile_pool_out o = run_pool(pr, t, m, T0);
    CHECK_INT_EQ(json_array_size(o.remove), 1);
    CHECK_INT_EQ(json_array_size(o.create), 0); /* replacement on a later pass */
    reconcile_pool_out_done(&o);
    o = run_pool(po, t, m, T0);
    CHECK_INT_EQ(json_array_size(o.remove), 0);
    CHECK_INT_EQ(json_array_size(o.create), 0);
    reconcile_pool_out_done(&o);
    json_decref(m);
    json_decref(pr);
    json_decref(po);
    json_decref(t);
}

TEST(pool_grace_gc_and_requeue)
{
    json_t *t = fx_template("tpl"), *p = fx_pool("wp", 2, NULL), *m = json_array();
    json_array_append_new(m, fx_member(p, t, "wp-stuck", T0, false));
    json_array_append_new(m, fx_member(p, t, "wp-young", T0 + 290 * SEC, false));
    json_t *unsched = fx_member(p, t, "wp-unsched", T0, false);
    json_array_append_new(json_object_get(json_object_get(unsched, "status"), "conditions"),
                          json_pack("{s:s, s:s, s:s}", "type", "PodScheduled", "status", "False",
                                    "reason", "Unschedulable"));
    json_array_append_new(m, unsched);
    reconcile_pool_out o = run_pool(p, t, m, T0 + 300 * SEC);
    CHECK_INT_EQ(json_array_size(o.remove), 1 + 0);
    CHECK_STR_EQ(json_string_value(json_object_get(
                     json_object_get(json_array_get(o.remove, 0), "metadata"), "name")),
                 "wp-stuck");
    /* young: requeue at its deadline + 2 s */
    CHECK_INT_EQ(o.requeue, 290 * SEC + 2 * SEC);
    CHECK_INT_EQ(json_array_size(o.create), 0); /* 2 active + 1 terminating >= 2 */
    reconcile_pool_out_done(&o);
    json_decref(m);
    json_decref(p);
    json_decref(t);
}
