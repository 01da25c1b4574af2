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
#include "reconcile/reconcile-internal.h"

static char *fmt_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *fmt_error(const char *fmt, ...)
{
    char *s = NULL;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    return s ? s : strdup("out of memory");
}

/* domain equals d or is a subdomain of d (case-insensitive). */
static bool in_domain(const char *domain, size_t len, const char *d)
{
    size_t dl = strlen(d);
    if (len == dl)
        return strncasecmp(domain, d, len) == 0;
    return len > dl && domain[len - dl - 1] == '.' && strncasecmp(domain + len - dl, d, dl) == 0;
}

char *reconcile_validate_pod_metadata(const json_t *apm, const char *const *allowed_domains)
{
    static const char *const default_domains[] = {RECONCILE_DEFAULT_LABEL_DOMAIN, NULL};
    if (!allowed_domains)
        allowed_domains = default_domains;
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)json_object_get(apm, "labels"), k, v) {
        const char *val = json_string_value(v);
        if (strcasecmp(k, "app") == 0 && val && strcasecmp(val, "sandbox-router") == 0)
            return fmt_error("invalid additionalPodMetadata label \"%s=%s\": the label is "
                             "reserved for the sandbox router",
                             k, val);
        if (!api_is_qualified_name(k))
            return fmt_error("invalid additionalPodMetadata label key \"%s\": not a qualified name",
                             k);
        const char *slash = strchr(k, '/');
        if (!slash)
            return fmt_error("invalid additionalPodMetadata label key \"%s\": a domain prefix "
                             "is required (allowed: %s)",
                             k, allowed_domains[0] ? allowed_domains[0] : "none");
        bool ok = false;
        for (size_t i = 0; allowed_domains[i] && !ok; i++)
            ok = in_domain(k, (size_t)(slash - k), allowed_domains[i]);
        if (!ok)
            return fmt_error("invalid additionalPodMetadata label key \"%s\": domain \"%.*s\" is "
                             "not in the allowed label domains",
                             k, (int)(slash - k), k);
        if (!val || !api_is_label_value(val))
            return fmt_error("invalid additionalPodMetadata label value \"%s\" for key \"%s\": "
                             "must be 63 characters or less and a valid label value",
                             val ? val : "", k);
    }
    json_object_foreach ((json_t *)json_object_get(apm, "annotations"), k, v) {
        if (!api_is_qualified_name(k))
            return fmt_error("invalid additionalPodMetadata annotation key \"%s\": not a "
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
            return fmt_error("invalid additionalPodMetadata annotation key \"%s\": domain "
                             "\"%.*s\" is restricted",
                             k, (int)len, k);
    }
    return NULL;
}

/* Merges src into dst; a key of dst with a different value is a conflict. */
static char *merge_map(json_t *dst, const json_t *src, const char *what)
{
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)src, k, v) {
        json_t *cur = json_object_get(dst, k);
        if (cur && !json_equal(cur, v))
            return fmt_error("metadata override conflict: %s \"%s\" is \"%s\" in the template, "
                             "\"%s\" in additionalPodMetadata",
                             what, k, json_string_value(cur) ? json_string_value(cur) : "",
                             json_string_value(v) ? json_string_value(v) : "");
        json_object_set(dst, k, v);
    }
    return NULL;
}

json_t *rc_claim_pod_metadata(const json_t *template, const json_t *claim, char **ret_error)
{
    const json_t *tmd = json_object_get(api_pod_template_of(template), "metadata");
    json_t *labels = json_deep_copy(json_object_get(tmd, "labels"));
    json_t *anns = json_deep_copy(json_object_get(tmd, "annotations"));
    if (!json_is_object(labels)) {
        json_decref(labels);
        labels = json_object();
    }
    if (!json_is_object(anns)) {
        json_decref(anns);
        anns = json_object();
    }
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
        char *err = merge_map(labels, json_object_get(apm, "labels"), "label");
        if (!err)
            err = merge_map(anns, json_object_get(apm, "annotations"), "annotation");
        if (err) {
            json_decref(labels);
            json_decref(anns);
            *ret_error = err;
            return NULL;
        }
    }
    json_t *md = json_object();
    json_object_set_new(md, "labels", labels);
    if (json_object_size(anns) > 0)
        json_object_set_new(md, "annotations", anns);
    else
        json_decref(anns);
    return md;
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

int reconcile_inject_env(const json_t *template, const json_t *env, json_t *pod_spec,
                         const char **ret_reason, char **ret_error)
{
    if (json_array_size(env) == 0)
        return 0;
    const char *policy = policy_of(template, "envVarsInjectionPolicy");
    bool overrides = strcmp(policy, "Overrides") == 0;
    if (!overrides && strcmp(policy, "Allowed") != 0) {
        *ret_reason = "EnvVarsInjectionRejected";
        *ret_error = fmt_error("environment variable injection rejected: environment variable "
                               "injection is not allowed by the template policy");
        return -EPERM;
    }
    size_t i;
    json_t *e;
    json_array_foreach (env, i, e) {
        const char *name = json_string_value(json_object_get(e, "name"));
        const char *cname = json_string_value(json_object_get(e, "containerName"));
        json_t *c = cname && *cname ? find_container(pod_spec, cname)
                                    : json_array_get(json_object_get(pod_spec, "containers"), 0);
        if (!json_is_object(c)) {
            *ret_reason = "ReconcilerError";
            *ret_error = fmt_error("target container \"%s\" not found in template for environment "
                                   "variable \"%s\"",
                                   cname ? cname : "", name ? name : "");
            return -ENOENT;
        }
        if (!overrides && json_array_size(json_object_get(c, "envFrom")) > 0) {
            *ret_reason = "EnvVarsInjectionRejected";
            *ret_error =
                fmt_error("environment variable injection rejected: container \"%s\" "
                          "uses envFrom, so an override of \"%s\" cannot be ruled out",
                          json_string_value(json_object_get(c, "name")) ?: "", name ? name : "");
            return -EPERM;
        }
        json_t *cenv = json_object_get(c, "env");
        if (!json_is_array(cenv)) {
            cenv = json_array();
            if (!cenv || json_object_set_new(c, "env", cenv) < 0) {
                *ret_reason = "ReconcilerError";
                *ret_error = fmt_error("out of memory");
                return -ENOMEM;
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
                *ret_reason = "ReconcilerError";
                *ret_error = fmt_error("environment variable override is not allowed by the "
                                       "template policy for variable \"%s\"",
                                       name);
                return -EPERM;
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

static char *check_vct_names(const json_t *list, const char *which)
{
    size_t i, j;
    json_t *a, *b;
    json_array_foreach (list, i, a) {
        const char *n = vct_name(a);
        if (!n || !*n)
            return fmt_error("invalid volume claim templates: %s volume claim template %zu has "
                             "no name",
                             which, i);
        json_array_foreach (list, j, b) {
            if (j < i && vct_name(b) && strcmp(vct_name(b), n) == 0)
                return fmt_error("invalid volume claim templates: duplicate %s volume claim "
                                 "template name \"%s\"",
                                 which, n);
        }
    }
    return NULL;
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
                         char **ret_error)
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
    char *err = check_vct_names(tv, "template");
    if (!err)
        err = check_vct_names(claim_vcts, "claim");
    const char *policy = policy_of(template, "volumeClaimTemplatesPolicy");
    bool overrides = strcmp(policy, "Overrides") == 0;
    if (!err && !overrides && strcmp(policy, "Allowed") != 0)
        err = fmt_error("volume claim templates are disallowed by the template");
    size_t i;
    json_t *v;
    if (!err && !overrides) {
        json_array_foreach (claim_vcts, i, v) {
            if (vct_find(tv, vct_name(v))) {
                err = fmt_error("overriding volume claim templates is forbidden by the template: "
                                "cannot override template volume \"%s\"",
                                vct_name(v));
                break;
            }
        }
    }
    if (err) {
        json_decref(out);
        *ret_error = err;
        return -EINVAL;
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
