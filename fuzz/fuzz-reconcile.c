/* libFuzzer: the reconcile core over untrusted objects (on clusters they come from any API
 * client, typed only by the CRD schema). Input: a JSON object {"template", "pool", "claim",
 * "sandboxes": [...], "now": µs}; every member may be anything. Runs the pool and claim plans,
 * staleness, secure defaults, the NetworkPolicy and the policy helpers. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "reconcile/reconcile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool any_networked(const json_t *sb, void *ud)
{
    (void)ud;
    return reconcile_sandbox_ready(sb);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *j = json_loadb((const char *)data, size, 0, NULL);
    if (!json_is_object(j)) {
        json_decref(j);
        return 0;
    }
    json_t *tpl = json_object_get(j, "template"), *pool = json_object_get(j, "pool");
    json_t *claim = json_object_get(j, "claim"), *sbs = json_object_get(j, "sandboxes");
    int64_t now = json_integer_value(json_object_get(j, "now"));
    if (!json_is_array(sbs))
        sbs = NULL;
    json_t *empty = json_array();
    reconcile_pool_in pin = {
        .pool = pool, .template = tpl, .sandboxes = sbs ? sbs : empty, .now = now};
    reconcile_pool_out pout;
    if (pool && reconcile_pool(&pin, &pout) == 0)
        reconcile_pool_out_done(&pout);
    reconcile_claim_in cin = {
        .claim = claim, .pool = pool, .template = tpl, .sandboxes = sbs ? sbs : empty, .now = now};
    reconcile_claim_out cout;
    if (claim && reconcile_claim(&cin, &cout) == 0)
        reconcile_claim_out_done(&cout);
    cin.networked = any_networked;
    if (claim && reconcile_claim(&cin, &cout) == 0)
        reconcile_claim_out_done(&cout);
    if (tpl) {
        size_t i;
        json_t *sb;
        json_array_foreach (sbs, i, sb)
            reconcile_sandbox_stale(sb, tpl);
        json_decref(reconcile_template_network_policy(tpl));
        json_decref(reconcile_template_patch(tpl));
        json_t *ps = json_object();
        reconcile_apply_secure_defaults(tpl, ps);
        reconcile_failure f = RECONCILE_FAILURE_INIT;
        json_t *env = json_object_get(json_object_get(claim, "spec"), "env");
        if (json_is_array(env) && reconcile_inject_env(tpl, env, ps, &f) < 0)
            reconcile_failure_clear(&f);
        json_decref(ps);
        json_t *merged = NULL;
        api_error err = API_ERROR_INIT;
        json_t *vcts = json_object_get(json_object_get(claim, "spec"), "volumeClaimTemplates");
        if (reconcile_merge_vcts(tpl, json_is_array(vcts) ? vcts : NULL, &merged, &err) == 0)
            json_decref(merged);
        api_error_clear(&err);
        if (pool)
            json_decref(reconcile_pool_new_sandbox(pool, tpl, false));
    }
    api_error err = API_ERROR_INIT;
    (void)reconcile_validate_pod_metadata(
        json_object_get(json_object_get(claim, "spec"), "additionalPodMetadata"), NULL, &err);
    api_error_clear(&err);
    json_decref(empty);
    json_decref(j);
    return 0;
}
