/* Validation (structural types, CRD enums and required fields, metadata rules) and CRD defaults
 * for the four kinds of shared/spec/UPSTREAM.md §2.1. Messages follow k8s field.Error. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/api-spec.h"
#include "basic/macro.h"


#define PATH_MAX_LEN 512

/* Field paths are built in fixed stack buffers; paths are ours (not user input) except for
 * indices, so truncation cannot happen in practice and would only shorten a message. */
typedef struct fpath {
    char s[PATH_MAX_LEN];
} fpath;

static fpath fp(const char *base, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static fpath fp(const char *base, const char *fmt, ...)
{
    fpath p;
    size_t n = (size_t)snprintf(p.s, sizeof(p.s), "%s", base);
    if (n < sizeof(p.s)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p.s + n, sizeof(p.s) - n, fmt, ap);
        va_end(ap);
    }
    return p;
}

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "object";
    case JSON_ARRAY:
        return "array";
    case JSON_STRING:
        return "string";
    case JSON_INTEGER:
        return "integer";
    case JSON_REAL:
        return "number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "boolean";
    default:
        return "null";
    }
}

/* Structural schema type check: absent (NULL) is fine. Returns true when v is usable. */
static bool want(api_errors *e, const char *field, const json_t *v, json_type t)
{
    if (!v)
        return false;
    bool ok = json_typeof(v) == t || (t == JSON_TRUE && json_is_boolean(v));
    if (ok)
        return true;
    const char *want_name = t == JSON_OBJECT    ? "object"
                            : t == JSON_ARRAY   ? "array"
                            : t == JSON_STRING  ? "string"
                            : t == JSON_INTEGER ? "integer"
                                                : "boolean";
    json_t *got = json_string(type_name(v));
    api_errors_add(e, API_FIELD_TYPE, field, got, "%s in body must be of type %s: \"%s\"", field,
                   want_name, type_name(v));
    json_decref(got);
    return false;
}

static const json_t *get(const json_t *o, const char *k)
{
    return json_is_object(o) ? json_object_get(o, k) : NULL;
}

static void check_enum(api_errors *e, const char *field, const json_t *v, const char *const *vals)
{
    if (!want(e, field, v, JSON_STRING))
        return;
    for (size_t i = 0; vals[i]; i++)
        if (strcmp(json_string_value(v), vals[i]) == 0)
            return;
    char buf[256] = "supported values: ";
    for (size_t i = 0; vals[i]; i++) {
        size_t n = strlen(buf);
        snprintf(buf + n, sizeof(buf) - n, "%s\"%s\"", i ? ", " : "", vals[i]);
    }
    api_errors_add(e, API_FIELD_UNSUPPORTED, field, v, "%s", buf);
}

static void check_required_string(api_errors *e, const char *field, const json_t *v)
{
    if (!v || (json_is_string(v) && json_string_length(v) == 0))
        api_errors_add(e, API_FIELD_REQUIRED, field, NULL, NULL);
    else
        want(e, field, v, JSON_STRING);
}

static bool digits(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i]))
            return false;
    return true;
}

/* RFC 3339 date-time: 2006-01-02T15:04:05[.frac](Z|+07:00). */
static bool is_date_time(const char *s)
{
    size_t n = strlen(s);
    if (n < 20 || !digits(s, 4) || s[4] != '-' || !digits(s + 5, 2) || s[7] != '-' ||
        !digits(s + 8, 2) || (s[10] != 'T' && s[10] != 't') || !digits(s + 11, 2) || s[13] != ':' ||
        !digits(s + 14, 2) || s[16] != ':' || !digits(s + 17, 2))
        return false;
    const char *p = s + 19;
    if (*p == '.') {
        p++;
        if (!isdigit((unsigned char)*p))
            return false;
        while (isdigit((unsigned char)*p))
            p++;
    }
    if (*p == 'Z' || *p == 'z')
        return p[1] == '\0';
    if (*p != '+' && *p != '-')
        return false;
    return strlen(p) == 6 && digits(p + 1, 2) && p[3] == ':' && digits(p + 4, 2);
}

static void check_date_time(api_errors *e, const char *field, const json_t *v)
{
    if (want(e, field, v, JSON_STRING) && !is_date_time(json_string_value(v)))
        api_errors_add(e, API_FIELD_INVALID, field, v,
                       "%s in body must be of type date-time: \"%s\"", field, json_string_value(v));
}

static void check_string_map(api_errors *e, const char *field, const json_t *m, bool label_values)
{
    if (!want(e, field, m, JSON_OBJECT))
        return;
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)m, k, v) {
        fpath f = fp(field, "[%s]", k);
        if (!want(e, f.s, v, JSON_STRING))
            continue;
        json_t *key = json_string(k);
        if (!api_is_qualified_name(k))
            api_errors_add(e, API_FIELD_INVALID, field, key,
                           "name part must consist of alphanumeric characters, '-', '_' or '.', "
                           "and must start and end with an alphanumeric character (e.g. "
                           "'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
                           "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS "
                           "subdomain prefix and '/' (e.g. 'example.com/MyName')");
        json_decref(key);
        if (label_values && !api_is_label_value(json_string_value(v)))
            api_errors_add(
                e, API_FIELD_INVALID, field, v,
                "a valid label must be an empty string or consist of alphanumeric "
                "characters, '-', '_' or '.', and must start and end with an "
                "alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', "
                "regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')");
    }
}

static void check_string_array(api_errors *e, const char *field, const json_t *a)
{
    if (!want(e, field, a, JSON_ARRAY))
        return;
    size_t i;
    json_t *v;
    json_array_foreach (a, i, v) {
        fpath f = fp(field, "[%zu]", i);
        want(e, f.s, v, JSON_STRING);
    }
}

static void check_env(api_errors *e, const char *field, const json_t *env, bool container_name)
{
    if (!want(e, field, env, JSON_ARRAY))
        return;
    size_t i;
    json_t *v;
    json_array_foreach (env, i, v) {
        fpath f = fp(field, "[%zu]", i);
        if (!want(e, f.s, v, JSON_OBJECT))
            continue;
        check_required_string(e, fp(f.s, ".name").s, get(v, "name"));
        if (get(v, "value"))
            want(e, fp(f.s, ".value").s, get(v, "value"), JSON_STRING);
        if (get(v, "valueFrom"))
            want(e, fp(f.s, ".valueFrom").s, get(v, "valueFrom"), JSON_OBJECT);
        if (container_name && get(v, "containerName"))
            want(e, fp(f.s, ".containerName").s, get(v, "containerName"), JSON_STRING);
    }
}

static void check_containers(api_errors *e, const char *field, const json_t *cs, bool required)
{
    if (!cs) {
        if (required)
            api_errors_add(e, API_FIELD_REQUIRED, field, NULL, NULL);
        return;
    }
    if (!want(e, field, cs, JSON_ARRAY))
        return;
    if (required && json_array_size(cs) == 0)
        api_errors_add(e, API_FIELD_REQUIRED, field, NULL, NULL);
    size_t i;
    json_t *c;
    json_array_foreach (cs, i, c) {
        fpath f = fp(field, "[%zu]", i);
        if (!want(e, f.s, c, JSON_OBJECT))
            continue;
        fpath fn = fp(f.s, ".name");
        const json_t *name = get(c, "name");
        check_required_string(e, fn.s, name);
        const char *detail;
        if (json_is_string(name) && json_string_length(name) > 0) {
            if (!api_is_dns1123_label(json_string_value(name), &detail))
                api_errors_add(e, API_FIELD_INVALID, fn.s, name, "%s", detail);
            for (size_t j = 0; j < i; j++)
                if (json_equal(get(json_array_get(cs, j), "name"), (json_t *)name)) {
                    api_errors_add(e, API_FIELD_DUPLICATE, fn.s, name, NULL);
                    break;
                }
        }
        check_required_string(e, fp(f.s, ".image").s, get(c, "image"));
        if (get(c, "command"))
            check_string_array(e, fp(f.s, ".command").s, get(c, "command"));
        if (get(c, "args"))
            check_string_array(e, fp(f.s, ".args").s, get(c, "args"));
        if (get(c, "workingDir"))
            want(e, fp(f.s, ".workingDir").s, get(c, "workingDir"), JSON_STRING);
        if (get(c, "env"))
            check_env(e, fp(f.s, ".env").s, get(c, "env"), false);
        if (get(c, "resources"))
            want(e, fp(f.s, ".resources").s, get(c, "resources"), JSON_OBJECT);
        if (get(c, "ports"))
            want(e, fp(f.s, ".ports").s, get(c, "ports"), JSON_ARRAY);
    }
}

static void check_pod_template(api_errors *e, const char *field, const json_t *pt)
{
    if (!pt) {
        api_errors_add(e, API_FIELD_REQUIRED, field, NULL, NULL);
        return;
    }
    if (!want(e, field, pt, JSON_OBJECT))
        return;
    const json_t *md = get(pt, "metadata");
    if (md && want(e, fp(field, ".metadata").s, md, JSON_OBJECT)) {
        if (get(md, "labels"))
            check_string_map(e, fp(field, ".metadata.labels").s, get(md, "labels"), true);
        if (get(md, "annotations"))
            check_string_map(e, fp(field, ".metadata.annotations").s, get(md, "annotations"),
                             false);
    }
    fpath fs = fp(field, ".spec");
    const json_t *spec = get(pt, "spec");
    if (!spec) {
        api_errors_add(e, API_FIELD_REQUIRED, fs.s, NULL, NULL);
        return;
    }
    if (!want(e, fs.s, spec, JSON_OBJECT))
        return;
    check_containers(e, fp(fs.s, ".containers").s, get(spec, "containers"), true);
    if (get(spec, "initContainers"))
        check_containers(e, fp(fs.s, ".initContainers").s, get(spec, "initContainers"), false);
    if (get(spec, "runtimeClassName"))
        want(e, fp(fs.s, ".runtimeClassName").s, get(spec, "runtimeClassName"), JSON_STRING);
    if (get(spec, "automountServiceAccountToken"))
        want(e, fp(fs.s, ".automountServiceAccountToken").s,
             get(spec, "automountServiceAccountToken"), JSON_TRUE);
    if (get(spec, "volumes"))
        want(e, fp(fs.s, ".volumes").s, get(spec, "volumes"), JSON_ARRAY);
}

static void check_volume_claim_templates(api_errors *e, const char *field, const json_t *v)
{
    if (!want(e, field, v, JSON_ARRAY))
        return;
    size_t i;
    json_t *t;
    json_array_foreach (v, i, t) {
        fpath f = fp(field, "[%zu]", i);
        if (!want(e, f.s, t, JSON_OBJECT))
            continue;
        fpath fn = fp(f.s, ".metadata.name");
        const json_t *md = get(t, "metadata");
        if (md && !want(e, fp(f.s, ".metadata").s, md, JSON_OBJECT))
            continue;
        const json_t *name = get(md, "name");
        check_required_string(e, fn.s, name);
        const char *detail;
        if (json_is_string(name) && json_string_length(name) > 0 &&
            !api_is_dns1123_subdomain(json_string_value(name), &detail))
            api_errors_add(e, API_FIELD_INVALID, fn.s, name, "%s", detail);
        if (get(t, "spec"))
            want(e, fp(f.s, ".spec").s, get(t, "spec"), JSON_OBJECT);
    }
}

static void check_blueprint(api_errors *e, const json_t *spec, const json_t *old)
{
    check_pod_template(e, "spec.podTemplate", get(spec, "podTemplate"));
    const json_t *vct = get(spec, "volumeClaimTemplates");
    if (vct)
        check_volume_claim_templates(e, "spec.volumeClaimTemplates", vct);
    if (get(spec, "service"))
        want(e, "spec.service", get(spec, "service"), JSON_TRUE);
    (void)old;
}

static bool check_spec_object(api_errors *e, const json_t *spec)
{
    if (!spec) {
        api_errors_add(e, API_FIELD_REQUIRED, "spec", NULL, NULL);
        return false;
    }
    return want(e, "spec", spec, JSON_OBJECT);
}

void api_validate_sandbox_spec(const json_t *spec, const json_t *old, api_errors *e)
{
    static const char *const policies[] = {"Delete", "Retain", NULL};
    static const char *const modes[] = {"Running", "Suspended", NULL};
    if (!check_spec_object(e, spec))
        return;
    check_blueprint(e, spec, old);
    if (get(spec, "shutdownTime"))
        check_date_time(e, "spec.shutdownTime", get(spec, "shutdownTime"));
    if (get(spec, "shutdownPolicy"))
        check_enum(e, "spec.shutdownPolicy", get(spec, "shutdownPolicy"), policies);
    if (get(spec, "operatingMode"))
        check_enum(e, "spec.operatingMode", get(spec, "operatingMode"), modes);
    /* CEL rule of the CRD: volumeClaimTemplates may not be added, removed or changed. */
    if (old) {
        const json_t *a = get(old, "volumeClaimTemplates"), *b = get(spec, "volumeClaimTemplates");
        if ((a == NULL) != (b == NULL) || (a && !json_equal((json_t *)a, (json_t *)b)))
            api_errors_add(e, API_FIELD_INVALID, "spec.volumeClaimTemplates", b,
                           "volumeClaimTemplates is immutable");
    }
}

/* networking.k8s.io/v1 NetworkPolicyPort: protocol TCP|UDP|SCTP, port int or name, endPort. */
static void check_np_ports(api_errors *e, const char *field, const json_t *ports)
{
    static const char *const protocols[] = {"TCP", "UDP", "SCTP", NULL};
    if (!want(e, field, ports, JSON_ARRAY))
        return;
    size_t i;
    json_t *p;
    json_array_foreach (ports, i, p) {
        fpath f = fp(field, "[%zu]", i);
        if (!want(e, f.s, p, JSON_OBJECT))
            continue;
        if (get(p, "protocol"))
            check_enum(e, fp(f.s, ".protocol").s, get(p, "protocol"), protocols);
        const json_t *port = get(p, "port");
        fpath fport = fp(f.s, ".port");
        if (json_is_integer(port)) {
            if (json_integer_value(port) < 1 || json_integer_value(port) > 65535)
                api_errors_add(e, API_FIELD_INVALID, fport.s, port,
                               "must be between 1 and 65535, inclusive");
        } else if (port && !json_is_string(port))
            api_errors_add(e, API_FIELD_TYPE, fport.s, port,
                           "%s in body must be of type int-or-string: \"%s\"", fport.s,
                           type_name(port));
        const json_t *end = get(p, "endPort");
        if (end && want(e, fp(f.s, ".endPort").s, end, JSON_INTEGER) &&
            (!json_is_integer(port) || json_integer_value(end) < json_integer_value(port)))
            api_errors_add(e, API_FIELD_INVALID, fp(f.s, ".endPort").s, end,
                           "must be greater than or equal to port, and port must be a number");
    }
}

/* NetworkPolicyPeer: podSelector / namespaceSelector objects, or an ipBlock with a cidr. */
static void check_np_peers(api_errors *e, const char *field, const json_t *peers)
{
    if (!want(e, field, peers, JSON_ARRAY))
        return;
    size_t i;
    json_t *p;
    json_array_foreach (peers, i, p) {
        fpath f = fp(field, "[%zu]", i);
        if (!want(e, f.s, p, JSON_OBJECT))
            continue;
        if (get(p, "podSelector"))
            want(e, fp(f.s, ".podSelector").s, get(p, "podSelector"), JSON_OBJECT);
        if (get(p, "namespaceSelector"))
            want(e, fp(f.s, ".namespaceSelector").s, get(p, "namespaceSelector"), JSON_OBJECT);
        const json_t *ib = get(p, "ipBlock");
        if (ib && want(e, fp(f.s, ".ipBlock").s, ib, JSON_OBJECT)) {
            check_required_string(e, fp(f.s, ".ipBlock.cidr").s, get(ib, "cidr"));
            if (get(ib, "except"))
                check_string_array(e, fp(f.s, ".ipBlock.except").s, get(ib, "except"));
            if (get(p, "podSelector") || get(p, "namespaceSelector"))
                api_errors_add(e, API_FIELD_FORBIDDEN, f.s, NULL,
                               "may not specify both ipBlock and another peer");
        }
    }
}

static void check_np_rules(api_errors *e, const char *field, const json_t *rules, const char *peers)
{
    if (!want(e, field, rules, JSON_ARRAY))
        return;
    size_t i;
    json_t *r;
    json_array_foreach (rules, i, r) {
        fpath f = fp(field, "[%zu]", i);
        if (!want(e, f.s, r, JSON_OBJECT))
            continue;
        if (get(r, "ports"))
            check_np_ports(e, fp(f.s, ".ports").s, get(r, "ports"));
        if (get(r, peers))
            check_np_peers(e, fp(f.s, ".%s", peers).s, get(r, peers));
    }
}

void api_validate_template_spec(const json_t *spec, const json_t *old, api_errors *e)
{
    static const char *const mgmt[] = {"Managed", "Unmanaged", NULL};
    static const char *const inj[] = {"Disallowed", "Allowed", "Overrides", NULL};
    if (!check_spec_object(e, spec))
        return;
    check_blueprint(e, spec, old);
    const json_t *np = get(spec, "networkPolicy");
    if (np && want(e, "spec.networkPolicy", np, JSON_OBJECT)) {
        if (get(np, "ingress"))
            check_np_rules(e, "spec.networkPolicy.ingress", get(np, "ingress"), "from");
        if (get(np, "egress"))
            check_np_rules(e, "spec.networkPolicy.egress", get(np, "egress"), "to");
    }
    if (get(spec, "networkPolicyManagement"))
        check_enum(e, "spec.networkPolicyManagement", get(spec, "networkPolicyManagement"), mgmt);
    if (get(spec, "envVarsInjectionPolicy"))
        check_enum(e, "spec.envVarsInjectionPolicy", get(spec, "envVarsInjectionPolicy"), inj);
    if (get(spec, "volumeClaimTemplatesPolicy"))
        check_enum(e, "spec.volumeClaimTemplatesPolicy", get(spec, "volumeClaimTemplatesPolicy"),
                   inj);
}

void api_validate_warmpool_spec(const json_t *spec, const json_t *old, api_errors *e)
{
    static const char *const strategies[] = {"Recreate", "OnReplenish", NULL};
    if (!check_spec_object(e, spec))
        return;
    const json_t *r = get(spec, "replicas");
    if (r && want(e, "spec.replicas", r, JSON_INTEGER)) {
        if (json_integer_value(r) < 0)
            api_errors_add(e, API_FIELD_INVALID, "spec.replicas", r,
                           "spec.replicas in body should be greater than or equal to 0");
        else if (json_integer_value(r) > 2147483647)
            api_errors_add(e, API_FIELD_INVALID, "spec.replicas", r,
                           "spec.replicas in body should be less than or equal to 2147483647");
    }
    const json_t *ref = get(spec, "sandboxTemplateRef");
    if (!ref)
        api_errors_add(e, API_FIELD_REQUIRED, "spec.sandboxTemplateRef", NULL, NULL);
    else if (want(e, "spec.sandboxTemplateRef", ref, JSON_OBJECT))
        check_required_string(e, "spec.sandboxTemplateRef.name", get(ref, "name"));
    const json_t *us = get(spec, "updateStrategy");
    if (us && want(e, "spec.updateStrategy", us, JSON_OBJECT) && get(us, "type"))
        check_enum(e, "spec.updateStrategy.type", get(us, "type"), strategies);
    (void)old;
}

void api_validate_claim_spec(const json_t *spec, const json_t *old, api_errors *e)
{
    static const char *const policies[] = {"Delete", "DeleteForeground", "Retain", NULL};
    if (!check_spec_object(e, spec))
        return;
    const json_t *ref = get(spec, "warmPoolRef");
    if (!ref)
        api_errors_add(e, API_FIELD_REQUIRED, "spec.warmPoolRef", NULL, NULL);
    else if (want(e, "spec.warmPoolRef", ref, JSON_OBJECT))
        check_required_string(e, "spec.warmPoolRef.name", get(ref, "name"));
    const json_t *lc = get(spec, "lifecycle");
    if (lc && want(e, "spec.lifecycle", lc, JSON_OBJECT)) {
        if (get(lc, "shutdownTime"))
            check_date_time(e, "spec.lifecycle.shutdownTime", get(lc, "shutdownTime"));
        const json_t *ttl = get(lc, "ttlSecondsAfterFinished");
        if (ttl && want(e, "spec.lifecycle.ttlSecondsAfterFinished", ttl, JSON_INTEGER) &&
            json_integer_value(ttl) < 0)
            api_errors_add(e, API_FIELD_INVALID, "spec.lifecycle.ttlSecondsAfterFinished", ttl,
                           "spec.lifecycle.ttlSecondsAfterFinished in body should be greater than "
                           "or equal to 0");
        if (get(lc, "shutdownPolicy"))
            check_enum(e, "spec.lifecycle.shutdownPolicy", get(lc, "shutdownPolicy"), policies);
    }
    const json_t *apm = get(spec, "additionalPodMetadata");
    if (apm && want(e, "spec.additionalPodMetadata", apm, JSON_OBJECT)) {
        if (get(apm, "labels"))
            check_string_map(e, "spec.additionalPodMetadata.labels", get(apm, "labels"), true);
        if (get(apm, "annotations"))
            check_string_map(e, "spec.additionalPodMetadata.annotations", get(apm, "annotations"),
                             false);
    }
    if (get(spec, "env"))
        check_env(e, "spec.env", get(spec, "env"), true);
    if (get(spec, "volumeClaimTemplates"))
        check_volume_claim_templates(e, "spec.volumeClaimTemplates",
                                     get(spec, "volumeClaimTemplates"));
    (void)old;
}

static void check_metadata(const api_kind *k, const json_t *obj, api_errors *e)
{
    const json_t *md = get(obj, "metadata");
    if (!md) {
        api_errors_add(e, API_FIELD_REQUIRED, "metadata.name", NULL, NULL);
        return;
    }
    if (!want(e, "metadata", md, JSON_OBJECT))
        return;
    const json_t *name = get(md, "name");
    const char *detail;
    if (!name || (json_is_string(name) && json_string_length(name) == 0))
        api_errors_add(e, API_FIELD_REQUIRED, "metadata.name", NULL,
                       "name or generateName is required");
    else if (want(e, "metadata.name", name, JSON_STRING) &&
             !api_is_dns1123_subdomain(json_string_value(name), &detail))
        api_errors_add(e, API_FIELD_INVALID, "metadata.name", name, "%s", detail);
    const json_t *ns = get(md, "namespace");
    if (ns && want(e, "metadata.namespace", ns, JSON_STRING) &&
        !api_is_dns1123_label(json_string_value(ns), &detail))
        api_errors_add(e, API_FIELD_INVALID, "metadata.namespace", ns, "%s", detail);
    if (get(md, "generateName"))
        want(e, "metadata.generateName", get(md, "generateName"), JSON_STRING);
    if (get(md, "labels"))
        check_string_map(e, "metadata.labels", get(md, "labels"), true);
    if (get(md, "annotations"))
        check_string_map(e, "metadata.annotations", get(md, "annotations"), false);
    if (get(md, "finalizers"))
        check_string_array(e, "metadata.finalizers", get(md, "finalizers"));
    if (get(md, "ownerReferences"))
        want(e, "metadata.ownerReferences", get(md, "ownerReferences"), JSON_ARRAY);
    (void)k;
}

void api_validate(const api_kind *k, const json_t *obj, const json_t *old, api_errors *e)
{
    if (!json_is_object(obj)) {
        api_errors_add(e, API_FIELD_TYPE, "<root>", NULL, "must be an object");
        return;
    }
    check_metadata(k, obj, e);
    k->validate_spec(get(obj, "spec"), old ? get(old, "spec") : NULL, e);
    const json_t *st = get(obj, "status");
    if (st && !json_is_null(st))
        want(e, "status", st, JSON_OBJECT);
}

/* ---- defaults ---- */

static void set_default(json_t *o, const char *key, json_t *v)
{
    if (json_is_object(o) && !json_object_get(o, key))
        json_object_set_new(o, key, v);
    else
        json_decref(v);
}

void api_default_sandbox_spec(json_t *spec)
{
    set_default(spec, "shutdownPolicy", json_string("Retain"));
    set_default(spec, "operatingMode", json_string("Running"));
}

void api_default_template_spec(json_t *spec)
{
    set_default(spec, "networkPolicyManagement", json_string("Managed"));
    set_default(spec, "envVarsInjectionPolicy", json_string("Disallowed"));
    set_default(spec, "volumeClaimTemplatesPolicy", json_string("Disallowed"));
}

void api_default_warmpool_spec(json_t *spec)
{
    set_default(spec, "replicas", json_integer(1));
    set_default(spec, "updateStrategy", json_object());
    set_default(json_object_get(spec, "updateStrategy"), "type", json_string("OnReplenish"));
}

void api_default_claim_spec(json_t *spec)
{
    set_default(json_object_get(spec, "lifecycle"), "shutdownPolicy", json_string("Retain"));
}

void api_default(const api_kind *k, json_t *obj)
{
    json_t *spec = json_object_get(obj, "spec");
    if (json_is_object(spec))
        k->default_spec(spec);
}
