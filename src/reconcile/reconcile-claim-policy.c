/* SandboxClaim policies (§2.8): additionalPodMetadata rules, env injection, VCT merge, and the
 * pod template metadata of a claimed sandbox. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/api-objects.h"
#include "api/api.h"
#include "basic/macro.h"
#include "reconcile/reconcile-internal.h"

/* Every policy refusal is an -EINVAL in err, except where an errno is named. */
#define refuse(err, ...) api_error_set_errno(err, -EINVAL, __VA_ARGS__)

/* domain equals d or is a subdomain of d (case-insensitive). */
static bool in_domain(const char *domain, size_t len, const char *d)
{
    size_t dl = strlen(d);
    if (len == dl)
        return strncasecmp(domain, d, len) == 0;
    return len > dl && domain[len - dl - 1] == '.' && strncasecmp(domain + len - dl, d, dl) == 0;
}

int reconcile_validate_pod_metadata(const json_t *apm, const char *const *allowed_domains,
                                    api_error *err)
{
    static const char *const default_domains[] = {RECONCILE_DEFAULT_LABEL_DOMAIN, NULL};
    if (!allowed_domains)
        allowed_domains = default_domains;
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)json_object_get(apm, "labels"), k, v) {
        const char *val = json_string_value(v);
        if (strcasecmp(k, "app") == 0 && val && strcasecmp(val, "sandbox-router") == 0)
            return refuse(err,
                          "invalid additionalPodMetadata label \"%s=%s\": the label is "
                          "reserved for the sandbox router",
                          k, val);
        if (!api_is_qualified_name(k))
            return refuse(
                err, "invalid additionalPodMetadata label key \"%s\": not a qualified name", k);
        const char *slash = strchr(k, '/');
        if (!slash)
            return refuse(err,
                          "invalid additionalPodMetadata label key \"%s\": a domain prefix "
                          "is required (allowed: %s)",
                          k, allowed_domains[0] ? allowed_domains[0] : "none");
        bool ok = false;
        for (size_t i = 0; allowed_domains[i] && !ok; i++)
            ok = in_domain(k, (size_t)(slash - k), allowed_domains[i]);
        if (!ok)
            return refuse(err,
                          "invalid additionalPodMetadata label key \"%s\": domain \"%.*s\" is "
                          "not in the allowed label domains",
                          k, (int)(slash - k), k);
        if (!val || !api_is_label_value(val))
            return refuse(err,
                          "invalid additionalPodMetadata label value \"%s\" for key \"%s\": "
                          "must be 63 characters or less and a valid label value",
                          val ? val : "", k);
    }
    json_object_foreach ((json_t *)json_object_get(apm, "annotations"), k, v) {
        if (!api_is_qualified_name(k))
            return refuse(err,
                          "invalid additionalPodMetadata annotation key \"%s\": not a "
                          "qualified name",
                          k);
        if (strcmp(k, RECONCILE_ANN_SAFE_TO_EVICT) == 0)
            continue;
        const char *slash = strchr(k, '/');
        if (!slash)
            continue;
        size_t len = (size_t)(slash - k);
        if (in_domain(k, len, "kubernetes.io") || in_domain(k, len, "k8s.io") ||
            in_domain(k, len, "agents.x-k8s.io"))
            return refuse(err,
                          "invalid additionalPodMetadata annotation key \"%s\": domain "
                          "\"%.*s\" is restricted",
                          k, (int)len, k);
    }
    return 0;
}

/* Merges src into dst; a key of dst with a different value is a conflict. */
static int merge_map(json_t *dst, const json_t *src, const char *what, api_error *err)
{
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)src, k, v) {
        json_t *cur = json_object_get(dst, k);
        if (cur && !json_equal(cur, v))
            return refuse(err,
                          "metadata override conflict: %s \"%s\" is \"%s\" in the template, "
                          "\"%s\" in additionalPodMetadata",
                          what, k, json_string_value(cur) ? json_string_value(cur) : "",
                          json_string_value(v) ? json_string_value(v) : "");
        json_object_set(dst, k, v);
    }
    return 0;
}

int rc_claim_pod_metadata(const json_t *template, const json_t *claim, json_t **ret, api_error *err)
{
    const json_t *tmd = json_object_get(api_pod_template_of(template), "metadata");
    _cleanup_(json_decrefp) json_t *labels = json_deep_copy(json_object_get(tmd, "labels"));
    _cleanup_(json_decrefp) json_t *anns = json_deep_copy(json_object_get(tmd, "annotations"));
    if (!json_is_object(labels)) {
        json_decref(labels);
        labels = json_object();
    }
    if (!json_is_object(anns)) {
        json_decref(anns);
        anns = json_object();
    }
    if (!labels || !anns)
        return -ENOMEM;
    char th[9];
    reconcile_name_hash(api_meta_string(template, "name"), th);
    json_object_set_new(labels, RECONCILE_LABEL_TEMPLATE_REF_HASH, json_string(th));
    if (claim) {
        const char *uid = api_meta_string(claim, "uid");
        const char *cb = rc_label(claim, RECONCILE_LABEL_CREATED_BY);
        if (uid)
            json_object_set_new(labels, RECONCILE_LABEL_CLAIM_UID, json_string(uid));
        if (cb)
            json_object_set_new(labels, RECONCILE_LABEL_CREATED_BY, json_string(cb));
        const json_t *apm =
            json_object_get(json_object_get(claim, "spec"), "additionalPodMetadata");
        int k = merge_map(labels, json_object_get(apm, "labels"), "label", err);
        if (k < 0)
            return k;
        k = merge_map(anns, json_object_get(apm, "annotations"), "annotation", err);
        if (k < 0)
            return k;
    }
    json_t *md = json_object();
    if (!md)
        return -ENOMEM;
    json_object_set_new(md, "labels", TAKE_PTR(labels));
    if (json_object_size(anns) > 0)
        json_object_set_new(md, "annotations", TAKE_PTR(anns));
    *ret = md;
    return 0;
}

static const char *policy_of(const json_t *template, const char *key)
{
    const char *p = json_string_value(json_object_get(json_object_get(template, "spec"), key));
    return p && *p ? p : "Disallowed";
}

static json_t *find_container(json_t *pod_spec, const char *name)
{
    static const char *const lists[] = {"initContainers", "containers"};
    for (size_t l = 0; l < 2; l++) {
        size_t i;
        json_t *c;
        json_array_foreach (json_object_get(pod_spec, lists[l]), i, c) {
            const char *n = json_string_value(json_object_get(c, "name"));
            if (n && strcmp(n, name) == 0)
                return c;
        }
    }
    return NULL;
}

/* A refusal of the template's policy: EnvVarsInjectionRejected, shown as it is. */
#define reject(f, ...) reconcile_fail(f, "EnvVarsInjectionRejected", false, -EPERM, __VA_ARGS__)
/* An error met while injecting: ReconcilerError, shown as "Error seen: ...". */
#define error_seen(f, err, ...) reconcile_fail(f, "ReconcilerError", true, err, __VA_ARGS__)

int reconcile_inject_env(const json_t *template, const json_t *env, json_t *pod_spec,
                         reconcile_failure *f)
{
    if (json_array_size(env) == 0)
        return 0;
    const char *policy = policy_of(template, "envVarsInjectionPolicy");
    bool overrides = strcmp(policy, "Overrides") == 0;
    if (!overrides && strcmp(policy, "Allowed") != 0) {
        return reject(f, "environment variable injection rejected: environment variable "
                         "injection is not allowed by the template policy");
    }
    size_t i;
    json_t *e;
    json_array_foreach (env, i, e) {
        const char *name = json_string_value(json_object_get(e, "name"));
        const char *cname = json_string_value(json_object_get(e, "containerName"));
        json_t *c = cname && *cname ? find_container(pod_spec, cname)
                                    : json_array_get(json_object_get(pod_spec, "containers"), 0);
        if (!json_is_object(c)) {
            return error_seen(f, -ENOENT,
                              "target container \"%s\" not found in template for environment "
                              "variable \"%s\"",
                              cname ? cname : "", name ? name : "");
        }
        if (!overrides && json_array_size(json_object_get(c, "envFrom")) > 0) {
            return reject(f,
                          "environment variable injection rejected: container \"%s\" "
                          "uses envFrom, so an override of \"%s\" cannot be ruled out",
                          json_string_value(json_object_get(c, "name")) ?: "", name ? name : "");
        }
        json_t *cenv = json_object_get(c, "env");
        if (!json_is_array(cenv)) {
            cenv = json_array();
            if (!cenv || json_object_set_new(c, "env", cenv) < 0) {
                return error_seen(f, -ENOMEM, "out of memory");
            }
        }
        json_t *entry = json_pack("{s:s, s:s}", "name", name ? name : "", "value",
                                  json_string_value(json_object_get(e, "value")) ?: "");
        size_t j;
        json_t *x;
        bool replaced = false;
        json_array_foreach (cenv, j, x) {
            const char *xn = json_string_value(json_object_get(x, "name"));
            if (!xn || !name || strcmp(xn, name) != 0)
                continue;
            if (!overrides) {
                json_decref(entry);
                return error_seen(f, -EPERM,
                                  "environment variable override is not allowed by the "
                                  "template policy for variable \"%s\"",
                                  name);
            }
            json_array_set(cenv, j, entry);
            replaced = true;
            break;
        }
        if (!replaced)
            json_array_append(cenv, entry);
        json_decref(entry);
    }
    return 0;
}

static const char *vct_name(const json_t *v)
{
    return json_string_value(json_object_get(json_object_get(v, "metadata"), "name"));
}

static int check_vct_names(const json_t *list, const char *which, api_error *err)
{
    size_t i, j;
    json_t *a, *b;
    json_array_foreach (list, i, a) {
        const char *n = vct_name(a);
        if (!n || !*n)
            return refuse(err,
                          "invalid volume claim templates: %s volume claim template %zu has "
                          "no name",
                          which, i);
        json_array_foreach (list, j, b) {
            if (j < i && vct_name(b) && strcmp(vct_name(b), n) == 0)
                return refuse(err,
                              "invalid volume claim templates: duplicate %s volume claim "
                              "template name \"%s\"",
                              which, n);
        }
    }
    return 0;
}

static const json_t *vct_find(const json_t *list, const char *name)
{
    size_t i;
    json_t *v;
    json_array_foreach (list, i, v) {
        if (vct_name(v) && strcmp(vct_name(v), name) == 0)
            return v;
    }
    return NULL;
}

int reconcile_merge_vcts(const json_t *template, const json_t *claim_vcts, json_t **ret,
                         api_error *err)
{
    const json_t *tv = json_object_get(json_object_get(template, "spec"), "volumeClaimTemplates");
    json_t *out = json_array();
    if (!out)
        return -ENOMEM;
    if (json_array_size(claim_vcts) == 0) {
        size_t i;
        json_t *v;
        json_array_foreach (tv, i, v)
            json_array_append(out, v);
        *ret = out;
        return 0;
    }
    int k = check_vct_names(tv, "template", err);
    if (k >= 0)
        k = check_vct_names(claim_vcts, "claim", err);
    const char *policy = policy_of(template, "volumeClaimTemplatesPolicy");
    bool overrides = strcmp(policy, "Overrides") == 0;
    if (k >= 0 && !overrides && strcmp(policy, "Allowed") != 0)
        k = refuse(err, "volume claim templates are disallowed by the template");
    size_t i;
    json_t *v;
    if (k >= 0 && !overrides) {
        json_array_foreach (claim_vcts, i, v) {
            if (vct_find(tv, vct_name(v))) {
                k = refuse(err,
                           "overriding volume claim templates is forbidden by the template: "
                           "cannot override template volume \"%s\"",
                           vct_name(v));
                break;
            }
        }
    }
    if (k < 0) {
        json_decref(out);
        return k;
    }
    json_array_foreach (tv, i, v) {
        const json_t *c = overrides ? vct_find(claim_vcts, vct_name(v)) : NULL;
        json_array_append(out, (json_t *)(c ? c : v));
    }
    json_array_foreach (claim_vcts, i, v) {
        if (!vct_find(tv, vct_name(v)))
            json_array_append(out, v);
    }
    *ret = out;
    return 0;
}
