/* SandboxTemplate rules: blueprint, hashes, secure defaults (§2.6), NetworkPolicy (§2.5),
 * staleness of sandboxes built from a template (§2.7). */
#include <stdio.h>
#include <string.h>

#include "api/api-objects.h"
#include "api/api.h"
#include "reconcile/reconcile-internal.h"

static const json_t *spec_of(const json_t *o)
{
    return json_object_get(o, "spec");
}

json_t *reconcile_template_blueprint(const json_t *template)
{
    const json_t *spec = spec_of(template);
    json_t *bp = json_object();
    if (!bp)
        return NULL;
    static const char *const keys[] = {API_POD_TEMPLATE, "volumeClaimTemplates", "service"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        json_t *v = json_object_get(spec, keys[i]);
        if (v && !json_is_null(v) && json_object_set_new(bp, keys[i], json_deep_copy(v)) < 0) {
            json_decref(bp);
            return NULL;
        }
    }
    return bp;
}

void reconcile_blueprint_hash(const json_t *template, char out[9])
{
    json_t *bp = reconcile_template_blueprint(template);
    rc_hash_json(bp, out);
    json_decref(bp);
}

void reconcile_pod_template_hash(const json_t *template, char out[9])
{
    rc_hash_json(api_pod_template_json(spec_of(template)), out);
}

static bool template_managed(const json_t *template)
{
    const char *m =
        json_string_value(json_object_get(spec_of(template), "networkPolicyManagement"));
    return !m || !*m || strcmp(m, "Managed") == 0;
}

static bool has_network_policy(const json_t *template)
{
    const json_t *np = json_object_get(spec_of(template), "networkPolicy");
    return np && !json_is_null(np);
}

void reconcile_apply_secure_defaults(const json_t *template, json_t *pod_spec)
{
    if (!json_is_object(pod_spec))
        return;
    json_t *am = json_object_get(pod_spec, "automountServiceAccountToken");
    if (!am || json_is_null(am))
        json_object_set_new(pod_spec, "automountServiceAccountToken", json_false());
    const char *dns = json_string_value(json_object_get(pod_spec, "dnsPolicy"));
    if (template_managed(template) && !has_network_policy(template) && (!dns || !*dns)) {
        json_object_set_new(pod_spec, "dnsPolicy", json_string("None"));
        json_object_set_new(pod_spec, "dnsConfig",
                            json_pack("{s:[s,s]}", "nameservers", "8.8.8.8", "1.1.1.1"));
    }
}

json_t *reconcile_template_patch(const json_t *template)
{
    const char *name = api_meta_string(template, "name");
    char h[9];
    reconcile_name_hash(name, h);
    const char *cur = rc_label(template, RECONCILE_LABEL_TEMPLATE_REF_HASH);
    if (cur && strcmp(cur, h) == 0)
        return NULL;
    return json_pack("{s:{s:{s:s}}}", "metadata", "labels", RECONCILE_LABEL_TEMPLATE_REF_HASH, h);
}

json_t *reconcile_template_network_policy(const json_t *template)
{
    if (!template_managed(template))
        return NULL;
    const char *name = api_meta_string(template, "name"),
               *ns = api_meta_string(template, "namespace");
    char h[9], pname[300];
    reconcile_name_hash(name, h);
    snprintf(pname, sizeof(pname), "%s-network-policy", name ? name : "");
    json_t *ingress, *egress;
    const json_t *np = json_object_get(spec_of(template), "networkPolicy");
    if (np && !json_is_null(np)) {
        json_t *i = json_object_get(np, "ingress"), *e = json_object_get(np, "egress");
        ingress = json_is_array(i) ? json_deep_copy(i) : json_array();
        egress = json_is_array(e) ? json_deep_copy(e) : json_array();
    } else {
        ingress = json_pack("[{s:[{s:{s:{s:s}}, s:{s:{s:s}}}]}]", "from", "namespaceSelector",
                            "matchLabels", "kubernetes.io/metadata.name", "agent-sandbox-system",
                            "podSelector", "matchLabels", "app", "sandbox-router");
        egress = json_pack("[{s:[{s:{s:s, s:[s,s,s,s]}}, {s:{s:s, s:[s,s]}}]}]", "to", "ipBlock",
                           "cidr", "0.0.0.0/0", "except", "10.0.0.0/8", "172.16.0.0/12",
                           "192.168.0.0/16", "169.254.0.0/16", "ipBlock", "cidr", "::/0", "except",
                           "fc00::/7", "fe80::/10");
    }
    json_t *owner = reconcile_owner_ref(template);
    return json_pack("{s:s, s:s, s:{s:s, s:s, s:[o]}, s:{s:{s:{s:s}}, s:[s,s], s:o, s:o}}",
                     "apiVersion", "networking.k8s.io/v1", "kind", "NetworkPolicy", "metadata",
                     "name", pname, "namespace", ns ? ns : "default", "ownerReferences", owner,
                     "spec", "podSelector", "matchLabels", RECONCILE_LABEL_TEMPLATE_REF_HASH, h,
                     "policyTypes", "Ingress", "Egress", "ingress", ingress, "egress", egress);
}

/* VCT lists equal index by index on name + spec. */
static bool vcts_equal(const json_t *a, const json_t *b)
{
    if (json_array_size(a) != json_array_size(b))
        return false;
    for (size_t i = 0; i < json_array_size(a); i++) {
        const json_t *x = json_array_get(a, i), *y = json_array_get(b, i);
        const json_t *nx = json_object_get(json_object_get(x, "metadata"), "name");
        const json_t *ny = json_object_get(json_object_get(y, "metadata"), "name");
        const json_t *sx = json_object_get(x, "spec"), *sy = json_object_get(y, "spec");
        if (!((!nx && !ny) || (nx && ny && json_equal((json_t *)nx, (json_t *)ny))))
            return false;
        if (!((!sx && !sy) || (sx && sy && json_equal((json_t *)sx, (json_t *)sy))))
            return false;
    }
    return true;
}

static bool same_opt(const json_t *a, const json_t *b)
{
    if (a && json_is_null(a))
        a = NULL;
    if (b && json_is_null(b))
        b = NULL;
    if (!a || !b)
        return a == b;
    return json_equal((json_t *)a, (json_t *)b);
}

bool rc_semantically_equal(const json_t *sandbox, const json_t *template)
{
    const json_t *tspec = spec_of(template), *sspec = spec_of(sandbox);
    json_t *want = json_deep_copy(json_object_get(api_pod_template_json(tspec), "spec"));
    if (!want)
        want = json_object();
    reconcile_apply_secure_defaults(template, want);
    const json_t *have = json_object_get(api_pod_template_json(sspec), "spec");
    bool eq = have && json_equal(want, (json_t *)have);
    json_decref(want);
    return eq &&
           vcts_equal(json_object_get(tspec, "volumeClaimTemplates"),
                      json_object_get(sspec, "volumeClaimTemplates")) &&
           same_opt(json_object_get(tspec, "service"), json_object_get(sspec, "service"));
}

void reconcile_template_hashes_of(const json_t *template, reconcile_template_hashes *ret)
{
    reconcile_name_hash(api_meta_string(template, "name"), ret->ref);
    reconcile_blueprint_hash(template, ret->blueprint);
}

bool reconcile_sandbox_stale_hashed(const json_t *sandbox, const json_t *template,
                                    const reconcile_template_hashes *h)
{
    const char *ref = rc_label(sandbox, RECONCILE_LABEL_TEMPLATE_REF_HASH);
    if (!ref || strcmp(ref, h->ref) != 0)
        return true;
    const char *bh = rc_label(sandbox, RECONCILE_LABEL_TEMPLATE_HASH);
    if (bh && strcmp(bh, h->blueprint) == 0)
        return false;
    return !rc_semantically_equal(sandbox, template);
}

bool reconcile_sandbox_stale(const json_t *sandbox, const json_t *template)
{
    reconcile_template_hashes h;
    reconcile_template_hashes_of(template, &h);
    return reconcile_sandbox_stale_hashed(sandbox, template, &h);
}
